#!/bin/sh
# bench_quant: single-threaded throughput of the CPU matrix-vector kernels
# (quant_matvec) on 2048-wide rows, the hidden size of GLM-4.7-Flash.
# 16384 rows make each matrix 19-55 MB, so the weights stream from DRAM as
# a model's do; compare GB/s with the machine's single-core bandwidth (the
# F32 line is nearly a pure stream).
BUILD=${BUILD:-build/rel}
bin=$BUILD/tools/quant_bench
# `make bench` builds only glmchat; the tool is built here when missing.
[ -x "$bin" ] || make -s BUILD="$BUILD" "$bin" || exit 1
"$bin" -n 2048 -r 16384 -s 1 Q4_0 Q6_K Q4_K Q5_0 Q8_0 F16 F32
