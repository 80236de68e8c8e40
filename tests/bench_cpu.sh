#!/bin/sh
# bench_cpu.sh: CPU reference backend speed (prefill, decode, per stage) on
# the fixture models, and on $BENCH_MODEL when set (e.g. a `glmchat mkmodel`
# file).  Figures only; nothing here passes or fails on speed.
BUILD=${BUILD:-build/rel}
make -s "$BUILD/tools/cpu_bench" >/dev/null || exit 1
status=0
for m in tests/data/models/*/*.q4_0.gguf ${BENCH_MODEL:-}; do
    [ -f "$m" ] || continue
    for t in 1 0; do
        "$BUILD/tools/cpu_bench" "$m" -t $t -p 64 -n 64 || status=1
    done
done
exit $status
