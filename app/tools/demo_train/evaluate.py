#!/usr/bin/python3
"""evaluate.py: the demo model measured on the held-out conversations.

1. Perplexity on every trained target of the held-out conversations (and on
   the answers' tokens alone) against a unigram and a bigram model counted
   on the training conversations, all on the same tokenization (the
   unigram add-one smoothed, the bigram interpolated with it, Witten-Bell).
2. The NextN head's acceptance at k = 1, 2, 3 drafts, in Python on held-out
   questions: the main model answers each (greedily; with GLM-4.7's default
   sampling: temperature 1, top-p 0.95, min-p 0.01; with the demo's own
   temperature, the same top-p and min-p); at every position of an
   answer the NextN block drafts k tokens chained on its own output (input:
   the main model's final hidden state at t and token t+1; then its own
   normed output and its draft), and the drafts are checked as speculative
   decoding does -- greedy: a draft is accepted while it equals the main
   model's greedy token; sampling: draft d ~ q accepted with probability
   min(1, p(d)/q(d)), p and q both after the sampler's truncation, Monte
   Carlo with a fixed seed.  Reported: accepted drafts per step / k.
Prints Markdown (app/demo/EVAL.md).

Usage: evaluate.py CHECKPOINT PREP_DIR [--questions N]
"""
import argparse
import json
import math
import os
import random

import numpy as np
import torch

import bpe
from model import Config, GLMDemo


def baselines(train, test, V):
    tok, mask = train["tokens"].astype(np.int64), train["mask"].astype(bool)
    uni = np.bincount(tok[mask], minlength=V).astype(np.float64) + 1.0
    uni /= uni.sum()
    prev, nxt = tok[:, :-1][mask[:, 1:]], tok[:, 1:][mask[:, 1:]]
    big = {}
    for a, b in zip(prev.tolist(), nxt.tolist()):
        d = big.setdefault(a, {})
        d[b] = d.get(b, 0) + 1
    tot = {a: sum(d.values()) for a, d in big.items()}

    def bigram_p(a, b):
        d = big.get(a)
        if not d:
            return uni[b]
        lam = tot[a] / (tot[a] + len(d))
        return lam * d.get(b, 0) / tot[a] + (1 - lam) * uni[b]
    t_tok, t_mask, t_ans = test["tokens"].astype(np.int64), test["mask"].astype(bool), test["answer"].astype(bool)
    out = {}
    for name, sel in (("all", t_mask), ("answers", t_ans & t_mask)):
        s = sel[:, 1:]
        p, n = t_tok[:, :-1][s], t_tok[:, 1:][s]
        out[name] = {"unigram": math.exp(-np.log(uni[n]).mean()),
                     "bigram": math.exp(-np.mean([math.log(bigram_p(a, b)) for a, b in zip(p.tolist(), n.tolist())])),
                     "n": int(s.sum())}
    return out


def model_ppl(model, test):
    t_tok = torch.from_numpy(test["tokens"].astype(np.int64))
    t_mask, t_ans = test["mask"].astype(bool), test["answer"].astype(bool)
    nll = {"all": [], "answers": []}
    with torch.no_grad():
        for i in range(0, len(t_tok), 32):
            logits, _ = model(t_tok[i:i + 32])
            lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, t_tok[i:i + 32, 1:, None])[..., 0].numpy()
            m, a = t_mask[i:i + 32, 1:], t_ans[i:i + 32, 1:]
            nll["all"].append(-lp[m])
            nll["answers"].append(-lp[m & a])
    return {k: math.exp(np.concatenate(v).mean()) for k, v in nll.items()}


def sampler_probs(logits, temp):
    """glmchat's sampler as a distribution: temperature, min-p 0.01, top-p
    0.95 (temp 0: greedy, one-hot on the argmax)."""
    if temp == 0:
        p = torch.zeros_like(logits)
        p[logits.argmax()] = 1.0
        return p
    p = torch.softmax(logits / temp, -1)
    p = torch.where(p >= 0.01 * p.max(), p, torch.zeros_like(p))
    sp, idx = torch.sort(p, descending=True)
    keep = torch.cumsum(sp, 0) - sp < 0.95 * sp.sum()
    out = torch.zeros_like(p)
    out[idx[keep]] = sp[keep]
    return out / out.sum()


def draw(p, rng):
    return int(torch.multinomial(p, 1, generator=rng))


def answer(model, prompt, temp, rng, end_id, max_new=48):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(max_new):
            logits, _ = model(torch.tensor([ids]))
            x = draw(sampler_probs(logits[0, -1], temp), rng)
            ids.append(x)
            if x == end_id:
                break
    return ids


def drafts_accepted(model, ids, t, k, temp, rng):
    """Accepted drafts (0..k) at position t of ids: the main model has
    produced ids[t+1]; the NextN block drafts ids[t+2..t+1+k]."""
    with torch.no_grad():
        _, h = model(torch.tensor([ids[:t + 2]]))
        hs, toks = h[0, :t + 1], list(ids[1:t + 2])         # MTP inputs: (h_i, x_{i+1}), i <= t
        ctx = list(ids[:t + 2])
        for j in range(k):
            lq, hn = model.nextn_forward(hs[None], torch.tensor([toks]))
            q = sampler_probs(lq[0, -1], temp)
            d = draw(q, rng)
            lp, _ = model(torch.tensor([ctx]))
            p = sampler_probs(lp[0, -1], temp)
            if temp == 0:
                ok = d == int(p.argmax())
            else:
                ok = float(torch.rand(1, generator=rng)) < min(1.0, float(p[d] / q[d]))
            if not ok:
                return j
            ctx.append(d)
            hs = torch.cat((hs, hn[0, -1:]), 0)             # the next draft: its own output and draft
            toks.append(d)
    return k


def acceptance(model, tok, questions, temp, seed, k_max=3):
    rng = torch.Generator().manual_seed(seed)
    sp = tok.special
    acc = [0.0] * (k_max + 1)
    steps = 0
    for q in questions:
        prompt = [sp["[gMASK]"], sp["<sop>"], sp["<|user|>"]] + tok.encode(q) + [sp["<|assistant|>"], sp["</think>"]]
        ids = answer(model, prompt, temp, rng, sp["<|user|>"])
        for t in range(len(prompt) - 1, len(ids) - 2):
            a = drafts_accepted(model, ids, t, k_max, temp, rng)  # k drafts accept min(a, k)
            for k in range(1, k_max + 1):
                acc[k] += min(a, k) / k
            steps += 1
    return [a / max(1, steps) for a in acc], steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("prep")
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--demo-temp", type=float, default=0.3, help="the temperature the file recommends")
    ap.add_argument("--seed", type=int, default=4747)
    args = ap.parse_args()
    torch.set_num_threads(1)  # see README.md, "Threads"
    st = torch.load(args.checkpoint)
    cfg = Config(**st["config"])
    model = GLMDemo(cfg)
    model.load_state_dict(st["model"])
    model.eval()
    with open(os.path.join(args.prep, "tokenizer.json")) as f:
        tj = json.load(f)
    tok = bpe.Tokenizer([tuple(m.split(" ")) for m in tj["merges"]])
    train = dict(np.load(os.path.join(args.prep, "train.npz")))
    test = dict(np.load(os.path.join(args.prep, "test.npz")))
    base = baselines(train, test, cfg.n_vocab)
    ppl = model_ppl(model, test)
    with open(os.path.join(args.prep, "test.txt")) as f:
        lines = f.read().split("\n")
    questions = lines[0:-1:2]
    random.Random(args.seed).shuffle(questions)
    questions = questions[:args.questions]
    rows = [("greedy", 0.0), ("GLM-4.7's default (temperature 1, top-p 0.95, min-p 0.01)", 1.0),
            ("the demo's default (temperature %g, top-p 0.95, min-p 0.01)" % args.demo_temp, args.demo_temp)]
    acc = [(name, acceptance(model, tok, questions, t, args.seed)) for name, t in rows]

    sched = st.get("sched", {})
    print("# The demo model, measured (evaluate.py)\n")
    print("Checkpoint: %d training steps (schedule %s).  Held-out: %d conversations about words and commands "
          "that no training turn asks about.\n" % (sched.get("steps", 0), json.dumps(sched), len(test["tokens"])))
    print("## Perplexity on the held-out conversations\n")
    print("| targets | tokens | demo model | bigram | unigram |\n|---|---|---|---|---|")
    for k in ("all", "answers"):
        print("| %s | %d | **%.2f** | %.2f | %.2f |" % (
            "every token of the conversations" if k == "all" else "the answers' tokens", base[k]["n"], ppl[k],
            base[k]["bigram"], base[k]["unigram"]))
    print("\nSame tokenization for all three; unigram and bigram counted on the training conversations "
          "(add-one; Witten-Bell interpolation).\n")
    print("## NextN (MTP) head: acceptance of k chained drafts\n")
    print("Measured in Python (torch, the F32 weights) on %d held-out questions, at every position of the "
          "main model's own answer: accepted drafts per step divided by k (glmchat's speculative decoding "
          "is another issue).\n" % len(questions))
    print("| sampling | positions | k = 1 | k = 2 | k = 3 |\n|---|---|---|---|---|")
    for name, (a, n) in acc:
        print("| %s | %d | %.3f | %.3f | %.3f |" % (name, n, a[1], a[2], a[3]))


if __name__ == "__main__":
    main()
