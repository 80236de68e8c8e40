#!/bin/sh
# bench_text.sh: tokenizer MB/s and sampler us/token (run by `make bench`).
set -e
BUILD=${BUILD:-build/rel}
make -s "$BUILD/tools/bench_text"
"$BUILD/tools/bench_text" "${BENCH_TEXT_MB:-4}"
