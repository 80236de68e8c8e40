#!/usr/bin/python3
"""prepare.py: the tokenizer and the training sequences.

Trains the byte-level BPE (bpe.py) on the training pairs' text, then turns
the pairs into conversations rendered with GLM-4.7's chat template exactly as
glmchat renders it with thinking off (core/chat_template.c, preset glm47,
enable_thinking false):

  [gMASK]<sop><|user|>QUESTION<|assistant|></think>ANSWER<|user|>QUESTION...

and the last answer is followed by <|user|>, the token that ends an
assistant turn (tokenizer.ggml.eot_token_id, a stop text of the preset).
Turns are packed into conversations of at most SEQ tokens (no padding
inside, <|endoftext|> pads the tail and is not trained on).

Writes OUT/tokenizer.json (merges, tokens, types), OUT/{train,test}.npz
(tokens (N, SEQ) int16, mask (N, SEQ) of trained targets, answer (N, SEQ):
the targets inside assistant turns) and OUT/test.txt: the held-out turns'
text, for the tokenizer check against glmchat.

Usage: prepare.py CORPUS_DIR OUT_DIR [--vocab 2048] [--seq 128] [--seed N]
"""
import argparse
import json
import os
import random
import sys

import numpy as np

import bpe


def load_pairs(path):
    with open(path) as f:
        return [tuple(json.loads(line)) for line in f]


def pack(tok, pairs, seq, rng):
    sp = tok.special
    start = [sp["[gMASK]"], sp["<sop>"]]
    user, asst, think_end, pad = sp["<|user|>"], sp["<|assistant|>"], sp["</think>"], sp["<|endoftext|>"]
    pairs = pairs[:]
    rng.shuffle(pairs)
    seqs, masks, answers = [], [], []
    cur, ans = list(start), [0, 0]

    def close():
        cur.append(user)          # the end of the last assistant turn
        ans.append(1)
        n = len(cur)
        seqs.append(cur + [pad] * (seq - n))
        masks.append([0] + [1] * (n - 1) + [0] * (seq - n))   # mask[i]: token i is a target
        answers.append(ans + [0] * (seq - n))

    for q, a in pairs:
        turn = [user] + tok.encode(q) + [asst, think_end]
        ta = tok.encode(a)
        t_ans = [0] * len(turn) + [1] * len(ta)
        turn += ta
        if len(start) + len(turn) + 1 > seq:
            continue  # a turn too long for one conversation
        if len(cur) + len(turn) + 1 > seq:
            close()
            cur, ans = list(start), [0, 0]
        cur += turn
        ans += t_ans
    if len(cur) > len(start):
        close()
    return (np.array(seqs, dtype=np.int16), np.array(masks, dtype=np.uint8), np.array(answers, dtype=np.uint8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=2, help="passes over the training pairs, each shuffled")
    ap.add_argument("--seed", type=int, default=4747)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train = load_pairs(os.path.join(args.corpus, "train_pairs.jsonl"))
    test = load_pairs(os.path.join(args.corpus, "test_pairs.jsonl"))

    counts = {}
    for q, a in train:
        for text in (q, a):
            for w in bpe.pretokenize(text):
                counts[w] = counts.get(w, 0) + 1
    n_merges = args.vocab - 256 - len(bpe.ADDED)
    merges = bpe.train(counts, n_merges, log=lambda m: print(m, file=sys.stderr))
    tok = bpe.Tokenizer(merges)
    assert len(tok) == args.vocab, len(tok)
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump({"pre": bpe.PRE_NAME, "merges": [a + " " + b for a, b in merges],
                   "tokens": tok.tokens, "types": tok.types}, f)

    rng = random.Random(args.seed)
    parts = [pack(tok, train, args.seq, rng) for _ in range(args.epochs)]
    tr = [np.concatenate(p) for p in zip(*parts)]
    te = pack(tok, test, args.seq, rng)
    np.savez(os.path.join(args.out, "train.npz"), tokens=tr[0], mask=tr[1], answer=tr[2])
    np.savez(os.path.join(args.out, "test.npz"), tokens=te[0], mask=te[1], answer=te[2])
    with open(os.path.join(args.out, "test.txt"), "w") as f:
        for q, a in test:
            f.write(q + "\n" + a + "\n")
    n_tok = int(tr[1].sum())
    print("prepare: vocab %d (%d merges), train %d conversations / %d target tokens, test %d / %d"
          % (len(tok), len(merges), len(tr[0]), n_tok, len(te[0]), int(te[1].sum())))


if __name__ == "__main__":
    main()
