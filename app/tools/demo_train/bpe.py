"""bpe.py: byte-level BPE (GPT-2 style) trained here, split as glmchat splits.

The pre-tokenizer is glmchat's "glm4" (core/pretokenizer.c: the Llama-3
regex, which is what GLM-4.x files name), run with the `regex` module's
Unicode classes; words are then GPT-2 byte symbols merged by rank, the lowest
rank first and the leftmost on a tie, as core/tokenizer.c does.  So the ids
this module gives a text are the ids `glmchat tokenize` gives it, which the
recipe checks on the held-out text.

Vocabulary layout (what the GGUF's tokenizer.ggml.* arrays hold):
  0..255          the 256 byte symbols in byte order
  256..           one token per merge, in merge order
  then            GLM-4.7's 36 added tokens, in the real vocabulary's order
"""
import heapq

import regex

PRE_NAME = "glm4"
PRE_RX = regex.compile(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# GLM-4.7's added tokens in its vocabulary's order; type 3 CONTROL, 4 USER_DEFINED.
ADDED = [
    ("<|endoftext|>", 3), ("[MASK]", 3), ("[gMASK]", 3), ("[sMASK]", 3), ("<sop>", 3), ("<eop>", 3),
    ("<|system|>", 3), ("<|user|>", 3), ("<|assistant|>", 3), ("<|observation|>", 3),
    ("<|begin_of_image|>", 3), ("<|end_of_image|>", 3), ("<|begin_of_video|>", 3), ("<|end_of_video|>", 3),
    ("<|begin_of_audio|>", 3), ("<|end_of_audio|>", 3), ("<|begin_of_transcription|>", 3),
    ("<|end_of_transcription|>", 3), ("<|code_prefix|>", 3), ("<|code_middle|>", 3), ("<|code_suffix|>", 3),
    ("<think>", 4), ("</think>", 4), ("<tool_call>", 4), ("</tool_call>", 4), ("<tool_response>", 4),
    ("</tool_response>", 4), ("<arg_key>", 4), ("</arg_key>", 4), ("<arg_value>", 4), ("</arg_value>", 4),
    ("/nothink", 4), ("<|begin_of_box|>", 4), ("<|end_of_box|>", 4), ("<|image|>", 4), ("<|video|>", 4),
]


def bytes_to_unicode():
    """GPT-2's map: printable bytes stand for themselves, the rest for U+0100 up."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


BYTE_SYM = bytes_to_unicode()


def pretokenize(text):
    return PRE_RX.findall(text)


def word_symbols(word):
    return [BYTE_SYM[b] for b in word.encode("utf-8")]


def train(word_counts, n_merges, log=None):
    """Merges (pairs of symbol strings) learnt from {word: count}: always the
    most frequent adjacent pair, ties to the smallest pair (deterministic).
    Incremental: only the words that hold a merged pair are updated."""
    words = [word_symbols(w) for w in word_counts]
    counts = list(word_counts.values())
    pair_count = {}
    where = {}
    for i, syms in enumerate(words):
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] = pair_count.get((a, b), 0) + counts[i]
            where.setdefault((a, b), set()).add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue  # stale entry
        merges.append(pair)
        a, b = pair
        ab = a + b
        touched = {}
        for i in where.pop(pair, ()):
            syms = words[i]
            c = counts[i]
            for x, y in zip(syms, syms[1:]):  # remove this word's pairs
                pair_count[(x, y)] -= c
                touched[(x, y)] = True
            out = []
            j = 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == a and syms[j + 1] == b:
                    out.append(ab)
                    j += 2
                else:
                    out.append(syms[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):  # add them back
                pair_count[(x, y)] = pair_count.get((x, y), 0) + c
                where.setdefault((x, y), set()).add(i)
                touched[(x, y)] = True
        pair_count.pop(pair, None)
        for p in touched:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                pair_count.pop(p, None)
        if log and len(merges) % 500 == 0:
            log("bpe: %d merges" % len(merges))
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = merges
        self.tokens = [BYTE_SYM[b] for b in range(256)] + [a + b for a, b in merges]
        self.types = [1] * len(self.tokens)
        for text, ty in ADDED:
            self.tokens.append(text)
            self.types.append(ty)
        self.id_of = {}
        for i, t in enumerate(self.tokens):
            if self.types[i] == 1:
                self.id_of.setdefault(t, i)
        self.special = {t: i for i, t in enumerate(self.tokens) if self.types[i] != 1}
        self.rank = {p: r for r, p in enumerate(merges)}
        self.cache = {}
        self.special_rx = regex.compile("|".join(regex.escape(t) for t in
                                                 sorted(self.special, key=len, reverse=True)))

    def __len__(self):
        return len(self.tokens)

    def encode_word(self, word):
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        syms = word_symbols(word)
        while len(syms) > 1:
            best, at = None, -1
            for j in range(len(syms) - 1):
                r = self.rank.get((syms[j], syms[j + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, j
            if best is None:
                break
            syms[at:at + 2] = [syms[at] + syms[at + 1]]
        ids = [self.id_of[s] for s in syms]
        if len(self.cache) < 500000:
            self.cache[word] = ids
        return ids

    def encode(self, text, parse_special=False):
        ids = []
        pos = 0
        if parse_special:
            for m in self.special_rx.finditer(text):
                for w in pretokenize(text[pos:m.start()]):
                    ids.extend(self.encode_word(w))
                ids.append(self.special[m.group(0)])
                pos = m.end()
        for w in pretokenize(text[pos:]):
            ids.extend(self.encode_word(w))
        return ids

    def decode(self, ids):
        inv = {v: k for k, v in BYTE_SYM.items()}
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.types[i] != 1:
                out += t.encode()
            else:
                out += bytes(inv[c] for c in t)
        return out.decode("utf-8", errors="replace")
