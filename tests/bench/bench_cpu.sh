#!/bin/sh
# bench_cpu.sh: the CPU backends' speed (prefill, decode, CPU time per token,
# the fast backend's per-step table), the reference (ref) beside the fast
# one (cpu), on the fixture models and on a mid-size synthetic model
# (GLM-4.7-Flash layout scaled down: hidden 1024, 12 blocks, 32 experts of
# 768, 4 used, Q4_0, ~570 MB, written once to build/bench/ with `glmchat
# mkmodel`), plus $BENCH_MODEL when set; one thread and all of them.
# tests/bench/cpu_bench.sh puts the fast one beside llama.cpp at full size.
# Figures only; nothing here passes or fails on speed.
BUILD=${BUILD:-build/rel}
GLMCHAT=${GLMCHAT:-./glmchat}
make -s "$BUILD/tools/cpu_bench" >/dev/null || exit 1
MID=build/bench/mid-glm-q4_0.gguf
if [ ! -f "$MID" ]; then
    mkdir -p build/bench
    $GLMCHAT mkmodel --preset glm47-flash --type Q4_0 --hidden 1024 --layers 12 --heads 16 --q-lora 384 \
        --kv-lora 256 --qk-nope 128 --qk-rope 64 --v-head 128 --ff 4096 --moe-ff 768 --experts 32 \
        --experts-used 4 --vocab 32000 --quiet -o "$MID" || exit 1
fi
status=0
for m in tests/data/models/*/*.q4_0.gguf "$MID" ${BENCH_MODEL:-}; do
    [ -f "$m" ] || continue
    for t in 1 0; do
        for be in ref cpu; do
            "$BUILD/tools/cpu_bench" "$m" --backend $be -t $t -p 64 -n 64 || status=1
        done
    done
done
exit $status
