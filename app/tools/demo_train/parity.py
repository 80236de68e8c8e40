#!/usr/bin/python3
"""parity.py: the C reference's logits against torch's, on the exported file.

For a few prompts (chat turns rendered as the chat renders them), runs
`glmchat logits --backend cpu --kv-type f32` on the GGUF and the torch model
with the same weights as the file stores them (F16 tensors rounded to f16),
and compares every position's logits: the largest difference relative to the
largest logit of that position, and rel-L2 over all of them.  Exits non-zero
when any position is off by more than --tol (1e-4 by default).

Usage: parity.py CHECKPOINT PREP_DIR MANIFEST GGUF GLMCHAT [--tol 1e-4]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import bpe
from model import Config, GLMDemo

PROMPTS = [
    [("What is a river?", None)],
    [("What does ocean mean?", None)],
    [("What does the ls command do?", "The ls command is used to list directory contents."),
     ("What is a mountain?", None)],
    [("Hello", None)],
]


def render(tok, turns):
    sp = tok.special
    ids = [sp["[gMASK]"], sp["<sop>"]]
    for q, a in turns:
        ids += [sp["<|user|>"]] + tok.encode(q) + [sp["<|assistant|>"], sp["</think>"]]
        if a is not None:
            ids += tok.encode(a)
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("prep")
    ap.add_argument("manifest")
    ap.add_argument("gguf")
    ap.add_argument("glmchat")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)  # see README.md, "Threads"
    st = torch.load(args.checkpoint)
    cfg = Config(**st["config"])
    model = GLMDemo(cfg)
    model.load_state_dict(st["model"])
    with open(args.manifest) as f:
        types = {t["name"]: t["type"] for t in json.load(f)["tensors"]}
    # the weights as the file stores them: F16 tensors rounded to f16
    with torch.no_grad():
        for name, param in named_gguf_params(model).items():
            if types[name] == "F16":
                param.copy_(param.half().float())
    with open(os.path.join(args.prep, "tokenizer.json")) as f:
        tj = json.load(f)
    tok = bpe.Tokenizer([tuple(m.split(" ")) for m in tj["merges"]])
    worst, num, den = 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for turns in PROMPTS:
            ids = render(tok, turns)
            out = os.path.join(tmp, "logits.bin")
            subprocess.run([args.glmchat, "logits", "-m", args.gguf, "--backend", "cpu", "--kv-type", "f32",
                            "-t", "1", "--tokens", ",".join(map(str, ids)), "-o", out], check=True,
                           stdout=subprocess.DEVNULL)
            c_logits = np.fromfile(out, dtype="<f4").reshape(len(ids), cfg.n_vocab)
            with torch.no_grad():
                t_logits = model(torch.tensor([ids]))[0][0].numpy()
            d = np.abs(c_logits - t_logits).max(axis=1) / np.abs(t_logits).max(axis=1)
            worst = max(worst, float(d.max()))
            num += float(((c_logits - t_logits) ** 2).sum())
            den += float((t_logits ** 2).sum())
            same = int((c_logits.argmax(1) == t_logits.argmax(1)).sum())
            print("%-40s %3d tokens: max |C - torch| / max|logit| %.2e, argmax same %d/%d"
                  % (turns[-1][0][:40], len(ids), d.max(), same, len(ids)))
    print("parity: worst position %.2e, rel-L2 %.2e (tolerance %.0e)" % (worst, (num / den) ** 0.5, args.tol))
    return 0 if worst <= args.tol else 1


def named_gguf_params(model):
    """GGUF name -> the parameter or buffer it is exported from."""
    out = {"token_embd.weight": model.token_embd, "output_norm.weight": model.output_norm,
           "output.weight": model.output}
    blocks = list(model.blocks) + ([model.nextn] if model.nextn is not None else [])
    for il, b in enumerate(blocks):
        for attr, val in list(b.named_parameters(recurse=False)) + list(b.named_buffers(recurse=False)):
            gname = attr.replace("nextn_", "nextn.")
            suffix = ".bias" if attr == "exp_probs_b" else ".weight"
            out["blk.%d.%s%s" % (il, gname, suffix)] = val
    return out


if __name__ == "__main__":
    sys.exit(main())
