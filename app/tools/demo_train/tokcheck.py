#!/usr/bin/python3
"""tokcheck.py: glmchat's tokenizer on the GGUF gives the ids training used.

Encodes every line of the held-out text (prepare.py's test.txt) with bpe.py
and with `glmchat tokenize --ids` on the exported file, and compares the id
sequences line by line; also one rendered conversation with its special
tokens (`--special`).  Exits non-zero on the first difference.

Usage: tokcheck.py PREP_DIR GGUF GLMCHAT
"""
import json
import os
import subprocess
import sys

import bpe


def glmchat_ids(glmchat, gguf, text, special):
    cmd = [glmchat, "tokenize", "-m", gguf, "--ids"] + (["--special"] if special else [])
    r = subprocess.run(cmd, input=text.encode(), capture_output=True, check=True)
    return [int(x) for x in r.stdout.split()]


def main():
    prep, gguf, glmchat = sys.argv[1:4]
    with open(os.path.join(prep, "tokenizer.json")) as f:
        tj = json.load(f)
    tok = bpe.Tokenizer([tuple(m.split(" ")) for m in tj["merges"]])
    with open(os.path.join(prep, "test.txt")) as f:
        lines = f.read().split("\n")[:-1]
    # one call for all lines: a line's ids end where its newline's begin, and
    # "\n" is a piece of its own for the glm4 pre-tokenizer
    text = "\n".join(lines)
    want = tok.encode(text)
    got = glmchat_ids(glmchat, gguf, text, False)
    if want != got:
        at = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        print("tokcheck: held-out text differs at id %d: bpe.py %s, glmchat %s" % (at, want[at:at + 8], got[at:at + 8]))
        return 1
    conv = "[gMASK]<sop><|user|>%s<|assistant|></think>%s<|user|>" % (lines[0], lines[1])
    if tok.encode(conv, parse_special=True) != glmchat_ids(glmchat, gguf, conv, True):
        print("tokcheck: a rendered conversation differs")
        return 1
    print("tokcheck: %d held-out lines, %d bytes, %d ids: identical" % (len(lines), len(text), len(want)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
