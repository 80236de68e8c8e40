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

Usage: train.py DATA_DIR OUT_DIR [--steps N] [--resume] [--config JSON]
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


def losses(model, tokens, mask):
    logits, h = model(tokens)
    main = masked_ce(logits[:, :-1], tokens[:, 1:], mask[:, 1:])
    mtp_logits, _ = model.nextn_forward(h[:, :-2], tokens[:, 1:-1])
    mtp = masked_ce(mtp_logits, tokens[:, 2:], mask[:, 2:])
    return main, mtp


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def save(path, model, opt, step, cfg):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "config": cfg.to_dict()}, tmp)
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
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--seed", type=int, default=4747)
    ap.add_argument("--threads", type=int, default=2)
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
    if args.resume and os.path.exists(ckpt):
        st = torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
        print("resumed at step %d" % step, flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print("config %s; %.2fM parameters; %d sequences of %d" % (json.dumps(cfg.to_dict()), n_params / 1e6,
          len(train["tokens"]), train["tokens"].shape[1]), flush=True)

    t_ckpt = time.time()
    t_log, tok_log = time.time(), 0
    while step < args.steps:
        # the batch of this step: fixed by the step number (so a resumed run
        # sees the same batches)
        i0 = (step * args.batch) % (len(train["tokens"]) - args.batch)
        tokens = torch.from_numpy(train["tokens"][i0:i0 + args.batch].astype(np.int64))
        mask = torch.from_numpy(train["mask"][i0:i0 + args.batch])
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        main, mtp = losses(model, tokens, mask)
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
        if step % LOG_EVERY == 0 or step == args.steps:
            dt = time.time() - t_log
            print("step %d loss %.4f mtp %.4f lr %.2e %.0f tok/s" % (step, float(main), float(mtp),
                  opt.param_groups[0]["lr"], tok_log / max(dt, 1e-9)), flush=True)
            t_log, tok_log = time.time(), 0
        if time.time() - t_ckpt > CKPT_SECONDS:
            save(ckpt, model, opt, step, cfg)
            t_ckpt = time.time()
    save(ckpt, model, opt, step, cfg)
    ev = evaluate(model, test)
    print("held-out: loss %.4f (perplexity %.2f), mtp loss %.4f" % (ev["main"], math.exp(ev["main"]), ev["mtp"]),
          flush=True)
    torch.save({"model": model.state_dict(), "config": cfg.to_dict()}, os.path.join(args.out, "final.pt"))


if __name__ == "__main__":
    sys.exit(main())
