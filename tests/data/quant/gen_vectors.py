#!/usr/bin/env python3
"""Writes the dequantization vectors of tests/data/quant: random blocks of each
of the low-bit and non-linear formats with the values llama.cpp's own Python
package (gguf-py, gguf/quants.py) decodes them to.  tests/test_quant_lowbit.c
decodes the same blocks with core/ and compares bit for bit, so CI needs no
Python.

    /usr/bin/python3 tests/data/quant/gen_vectors.py GGUF_PY_DIR tests/data/quant

GGUF_PY_DIR: llama.cpp's gguf-py folder (../shared/peer/llama-src.tar.xz,
llama/gguf-py).  Needs python3-numpy.  Deterministic: the same files each run.

Blocks: every byte random (all bit patterns of the level, index, sign and
sub-scale fields), then each f16 scale set to a random finite value:
sign * 10^U(-5, 1), so about one in seven is an f16 subnormal; the first
blocks of each type take the edge scales 0, -0, 2^-24 (the smallest
subnormal), 65504 and -65504 (the largest finite).  MXFP4's E8M0 byte stays
uniformly random over 0..255 except in the first blocks, which take
0, 1, 2, 127, 254 and 255 (the last two overflow the top level to inf, in
ggml as here).

File layout (little-endian): "GQV1", uint32 ggml type id, uint32 n_blocks,
uint32 block_bytes, the blocks, then n_blocks * block_elems float32 values.
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as Q  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

OUT = sys.argv[2]

# type -> byte offsets of its f16 scales ("iq1m" marks IQ1_M's split scale)
SCALES = {
    Q.Q2_K: [80, 82],
    Q.Q3_K: [108],
    Q.IQ4_NL: [0],
    Q.IQ4_XS: [0],
    Q.MXFP4: [],
    Q.IQ2_XXS: [0],
    Q.IQ2_XS: [0],
    Q.IQ2_S: [0],
    Q.IQ3_XXS: [0],
    Q.IQ3_S: [0],
    Q.IQ1_S: [0],
    Q.IQ1_M: "iq1m",
}
EDGE_F16 = [0x0000, 0x8000, 0x0001, 0x7BFF, 0xFBFF]
EDGE_E8M0 = [0, 1, 2, 127, 254, 255]


def random_f16(rng, n):
    mag = 10.0 ** rng.uniform(-5.0, 1.0, n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    h = (sign * mag).astype(np.float16)
    assert np.all(np.isfinite(h))
    return h.view(np.uint16)


def make_blocks(qtype, seed):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n = 128 if block_elems == 256 else 512
    rng = np.random.default_rng([seed, int(qtype)])
    blocks = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    where = SCALES[qtype]
    if qtype == Q.MXFP4:
        blocks[:len(EDGE_E8M0), 0] = EDGE_E8M0
    elif where == "iq1m":
        # the f16 scale lives in the top nibble of the four scale words at 48..55
        h = random_f16(rng, n)
        h[:len(EDGE_F16)] = EDGE_F16
        words = blocks[:, 48:56].copy().view(np.uint16)
        for i in range(4):
            words[:, i] = (words[:, i] & 0x0FFF) | (((h >> (4 * i)) & 0xF) << 12)
        blocks[:, 48:56] = words.view(np.uint8)
    else:
        for off in where:
            h = random_f16(rng, n)
            h[:len(EDGE_F16)] = EDGE_F16
            blocks[:, off:off + 2] = h.view(np.uint8).reshape(n, 2)
    return blocks, block_elems, block_bytes


def main():
    os.makedirs(OUT, exist_ok=True)
    for seed, qtype in enumerate(SCALES):
        blocks, block_elems, block_bytes = make_blocks(qtype, 7 + seed)
        with np.errstate(over="ignore"):
            values = dequantize(blocks, qtype).astype(np.float32)
        assert values.shape == (blocks.shape[0], block_elems)
        path = os.path.join(OUT, qtype.name + ".bin")
        with open(path, "wb") as f:
            f.write(b"GQV1" + struct.pack("<III", int(qtype), blocks.shape[0], block_bytes))
            f.write(blocks.tobytes())
            f.write(values.astype("<f4").tobytes())
        print("%-8s %4d blocks -> %s" % (qtype.name, blocks.shape[0], path))


main()
