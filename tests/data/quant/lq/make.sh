#!/bin/sh
# make.sh: the files of this folder, made by llama.cpp's own quantizer (commit
# d32676d7, ../shared/peer/llama-src.tar.xz: build llama-quantize as
# ../shared/peer/build-llama-bench.sh does, CPU-only is enough), so the tests
# hold glmchat to files people download, not only to its own writers:
#  - IQ2_XXS, IQ3_XXS, IQ1_S, IQ2_M, IQ3_M .gguf: the tiny-glm-a fixture's F32
#    file quantized with llama-quantize's presets; all but IQ3_M require an
#    importance matrix, made by mkimatrix.py (random positive values, seed 1:
#    llama-imatrix would need a run of the model).  llama-quantize picks its
#    own mix (IQ4_NL, Q5_1, Q5_K, Q2_K, IQ3_S for the tensors it keeps wider),
#    which is the point.  Their float64 references: ../ref/lq.*.
#  - llama_quantize_digests.txt: the tensor digest (tests/tools/tensor_digest)
#    of llama-quantize's file for each preset that needs no importance matrix;
#    t_mkmodel.sh checks tests/tools/requant writes the same tensors.
#
#   sh tests/data/quant/lq/make.sh LLAMA_QUANTIZE GGUF_PY_DIR   (from the repository root, after make test)
set -e
LQ=${1:?usage: make.sh LLAMA_QUANTIZE GGUF_PY_DIR}
PY=${2:?usage: make.sh LLAMA_QUANTIZE GGUF_PY_DIR}
BUILD=${BUILD:-build/rel}
D=tests/data/quant/lq
F=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 $D/mkimatrix.py "$PY" $F "$tmp/imatrix.dat"
for t in IQ2_XXS IQ3_XXS IQ1_S IQ2_M; do
    "$LQ" --imatrix "$tmp/imatrix.dat" $F $D/$t.gguf $t 2 >"$tmp/log" 2>&1 || { tail -3 "$tmp/log"; exit 1; }
done
"$LQ" $F $D/IQ3_M.gguf IQ3_M 2 >"$tmp/log" 2>&1 || { tail -3 "$tmp/log"; exit 1; }
for t in Q2_K Q3_K_S Q3_K_M Q3_K_L IQ4_XS IQ4_NL MXFP4_MOE Q4_K_S Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0; do
    "$LQ" $F "$tmp/$t.gguf" $t 2 >"$tmp/log" 2>&1 || { tail -3 "$tmp/log"; exit 1; }
    echo "$t $($BUILD/tools/tensor_digest "$tmp/$t.gguf")"
done >$D/llama_quantize_digests.txt
