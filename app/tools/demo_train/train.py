#!/usr/bin/python3
"""train.py: trains the demo model (model.py) on prepare.py's sequences.

Loss: next-token cross-entropy of the main model, plus MTP_WEIGHT times the
NextN block's next-next-token cross-entropy (its input at t: the main
model's final hidden state at t and the embedding of token t+1; its target:
token t+2), both over the trained targets only.  Routing balance without an
auxiliary loss, as DeepSeek-V3 does it: after each step every MoE block's
selection bias (exp_probs_b) moves by BIAS_RATE towards the experts that got
fewer tokens than the mean.

Deterministic for a given seed and thread count; resumable: a checkpoint
(model, optimizer, step) every few minutes and at the end, and --resume
continues from it.  Logs one line per LOG_EVERY steps on stdout.

Usage: train.py DATA_DIR OUT_DIR [--steps N [--decay-from M] | --minutes W] [--resume] [--config JSON]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from model import Config, GLMDemo

MTP_WEIGHT = 0.3
BIAS_RATE = 1e-3
LOG_EVERY = 10
CKPT_SECONDS = 300


def masked_ce(logits, targets, mask):
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long(), reduction="none")
    m = mask.reshape(-1).float()
    return (ce * m).sum() / m.sum().clamp(min=1)


def losses(model, tokens, mask, mtp_rows=None):
    """Main and NextN losses; the NextN block sees the first mtp_rows
    sequences of the batch (all by default): on a CPU the second pass and
    head cost nearly as much as the main model, half a batch keeps its
    objective at a third of the cost."""
    logits, h = model(tokens)
    main = masked_ce(logits[:, :-1], tokens[:, 1:], mask[:, 1:])
    r = mtp_rows or tokens.shape[0]
    mtp_logits, _ = model.nextn_forward(h[:r, :-2], tokens[:r, 1:-1])
    mtp = masked_ce(mtp_logits, tokens[:r, 2:], mask[:r, 2:])
    return main, mtp


def lr_at(step, sched, peak):
    """Warmup, a constant stretch, then a linear decay to 0.1 x peak over the
    last steps (warmup-stable-decay): the decay can be placed when a wall
    budget runs out, and --steps N --decay-from M repeats a run exactly."""
    if step < sched["warmup"]:
        return peak * (step + 1) / sched["warmup"]
    if sched["decay_from"] is None or step < sched["decay_from"]:
        return peak
    p = (step - sched["decay_from"]) / max(1, sched["steps"] - sched["decay_from"])
    return peak * (1.0 - 0.9 * min(1.0, p))


def save(path, model, opt, step, cfg, sched):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "config": cfg.to_dict(),
                "sched": sched}, tmp)
    os.replace(tmp, path)


def evaluate(model, data, batch=32):
    model.eval()
    tot = {"main": 0.0, "mtp": 0.0}
    n = 0
    with torch.no_grad():
        for i in range(0, len(data["tokens"]), batch):
            t = torch.from_numpy(data["tokens"][i:i + batch].astype(np.int64))
            m = torch.from_numpy(data["mask"][i:i + batch])
            main, mtp = losses(model, t, m)
            w = float(m[:, 1:].sum())
            tot["main"] += float(main) * w
            tot["mtp"] += float(mtp) * w
            n += w
    model.train()
    return {k: v / n for k, v in tot.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--decay-from", type=int, default=None,
                    help="first step of the LR decay (default: the last fifth of --steps, or where --minutes puts it)")
    ap.add_argument("--minutes", type=float, default=None,
                    help="wall budget: the decay starts at 80%% of it, sized at the measured speed, and the run "
                         "stops at the end of the decay (the log and checkpoint record --steps / --decay-from)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=4747)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on a machine shared with other jobs, OpenMP threads wait on each other)")
    ap.add_argument("--config", default="{}", help="JSON: model.Config fields to override")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "checkpoint.pt")

    train = dict(np.load(os.path.join(args.data, "train.npz")))
    test = dict(np.load(os.path.join(args.data, "test.npz")))
    with open(os.path.join(args.data, "tokenizer.json")) as f:
        n_vocab = len(json.load(f)["tokens"])
    cfg = Config(n_vocab=n_vocab, n_ctx=int(train["tokens"].shape[1]) * 4, **json.loads(args.config))
    model = GLMDemo(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    step = 0
    sched = {"warmup": args.warmup, "steps": args.steps,
             "decay_from": args.decay_from if args.decay_from is not None or args.minutes
             else args.steps - args.steps // 5}
    if args.resume and os.path.exists(ckpt):
        st = torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
        sched = st["sched"]
        print("resumed at step %d (schedule %s)" % (step, json.dumps(sched)), flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print("config %s; %.2fM parameters; %d sequences of %d" % (json.dumps(cfg.to_dict()), n_params / 1e6,
          len(train["tokens"]), train["tokens"].shape[1]), flush=True)

    t_ckpt = time.time()
    t_log, tok_log = time.time(), 0
    t_start, step_start = time.time(), step
    while step < sched["steps"]:
        if args.minutes and sched["decay_from"] is None and time.time() - t_start > 0.8 * 60 * args.minutes:
            rate = (step - step_start) / (time.time() - t_start)
            sched["decay_from"] = step
            sched["steps"] = step + max(1, int(rate * 0.2 * 60 * args.minutes))
            print("decay from step %d to step %d (repeat with --steps %d --decay-from %d)"
                  % (step, sched["steps"], sched["steps"], step), flush=True)
        # the batch of this step: fixed by the step number (so a resumed run
        # sees the same batches)
        i0 = (step * args.batch) % (len(train["tokens"]) - args.batch)
        tokens = torch.from_numpy(train["tokens"][i0:i0 + args.batch].astype(np.int64))
        mask = torch.from_numpy(train["mask"][i0:i0 + args.batch])
        for g in opt.param_groups:
            g["lr"] = lr_at(step, sched, args.lr)
        main, mtp = losses(model, tokens, mask, max(1, args.batch // 2))
        loss = main + MTP_WEIGHT * mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for b in model.moe_blocks():
                load = b.last_load
                b.exp_probs_b += BIAS_RATE * torch.sign(load.mean() - load)
        step += 1
        tok_log += int(mask.sum())
        if step % LOG_EVERY == 0 or step == sched["steps"]:
            dt = time.time() - t_log
            print("step %d loss %.4f mtp %.4f lr %.2e %.0f tok/s" % (step, float(main), float(mtp),
                  opt.param_groups[0]["lr"], tok_log / max(dt, 1e-9)), flush=True)
            t_log, tok_log = time.time(), 0
        if time.time() - t_ckpt > CKPT_SECONDS:
            save(ckpt, model, opt, step, cfg, sched)
            t_ckpt = time.time()
    save(ckpt, model, opt, step, cfg, sched)
    ev = evaluate(model, {k: v[:256] for k, v in test.items()})  # evaluate.py measures all of it
    print("held-out (256 conversations): loss %.4f (perplexity %.2f), mtp loss %.4f" % (ev["main"], math.exp(ev["main"]), ev["mtp"]),
          flush=True)
    torch.save({"model": model.state_dict(), "config": cfg.to_dict(), "sched": sched, "held_out": ev},
               os.path.join(args.out, "final.pt"))


if __name__ == "__main__":
    sys.exit(main())
