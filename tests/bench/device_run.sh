#!/bin/bash
# device_run.sh: glmchat's Vulkan checks and the formats table on the lent
# GPU machine, in one call (gpu/PERF.md "How to run").  Run from the
# checkout's root there, with a bundle made here in $D (default .dev/kquant):
#   $D/glmchat, $D/build/tests/test_vk_* (the kernel tests), $D/build/tools/ (cmp_logits,
#   json_get, requant, vk_microbench), $D/tests/ (the shell tests, lib.sh,
#   oracle_lib.sh, bench/; data/ is linked to the checkout's), optionally
#   $D/base/glmchat (an earlier binary for an A/B in the same call) --
#   tests/bench/device_bundle.sh makes it;
# carry .gl, .peer (llama-bench) and $D.  Steps, each off with =0:
#   KERNELS   every test_vk_* of the bundle               -> $OUT/kernels.txt
#   FIXTURES  tests/t_vk_fixtures.sh                  -> $OUT/fixtures.txt
#   LOWBIT    tests/t_vk_lowbit.sh (tiny models of the low-bit types against
#             their float64 references)                   -> $OUT/lowbit.txt
#   LLAMA     build llama-bench first (in the background), wait before the table
#   FORMATS   the formats of tests/bench/bench_formats.sh (default its list)
#             with BASE_FORMATS for the earlier binary, AB / AB_FORMATS for
#             tuning A/Bs (bench_formats.sh), NCMOE=N for both programs
#             with the routed experts of blocks 0..N-1 on the CPU -> $OUT/formats.txt
# A summary goes to stdout (the call's output) and $OUT/log.txt.
D=${D:-.dev/kquant}
R=$PWD
L=$OUT/log.txt
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
ln -sfn "$R/tests/data" "$D/tests/data"
[ "${LLAMA:-1}" = 1 ] && [ -f .peer/build-llama-bench.sh ] && bash .peer/build-llama-bench.sh
{
    date +%T
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
    "$D/glmchat" devices || exit 1
    if [ "${KERNELS:-1}" = 1 ]; then
        echo "== kernel tests"
        for t in "$D"/build/tests/test_vk_*; do
            timeout "${KERNELS_T:-200}" "$t" >>"$OUT/kernels.txt" 2>&1
            echo "$(basename "$t"): rc=$? ok=$(grep -c '^ok' "$OUT/kernels.txt") (so far)"
        done
        grep -v '^ok' "$OUT/kernels.txt" | head -n 40
        date +%T
    fi
    if [ "${FIXTURES:-1}" = 1 ]; then
        echo "== fixtures"
        (cd "$D" && BUILD=build GLMCHAT=./glmchat timeout "${FIXTURES_T:-200}" sh tests/t_vk_fixtures.sh) \
            >"$OUT/fixtures.txt" 2>&1
        echo "rc=$? ok=$(grep -c '^ok' "$OUT/fixtures.txt")"
        grep -v '^ok' "$OUT/fixtures.txt" | head -n 20
        grep 'same file\|vs f64' "$OUT/fixtures.txt" | sed 's/^ok - //' | head -n 40
        date +%T
    fi
    if [ "${LOWBIT:-1}" = 1 ]; then
        echo "== low-bit types"
        (cd "$D" && BUILD=build GLMCHAT=./glmchat timeout "${LOWBIT_T:-200}" sh tests/t_vk_lowbit.sh) \
            >"$OUT/lowbit.txt" 2>&1
        echo "rc=$? ok=$(grep -c '^ok' "$OUT/lowbit.txt")"
        grep -v '^ok' "$OUT/lowbit.txt" | head -n 20
        date +%T
    fi
    if [ "${FORMATS:-}" != 0 ]; then
        # SPLIT=1 (bench_formats.sh): glmchat's figures while llama-bench builds
        [ "${LLAMA:-1}" = 1 ] && [ "${SPLIT:-0}" != 1 ] && bash .peer/build-llama-bench.sh --wait
        date +%T
        echo "== formats"
        base=
        [ -x "$D/base/glmchat" ] && base=$R/$D/base/glmchat
        # llama-bench where the peer's build script says it puts it (its "Binaries:" line)
        llama=$(sed -n 's|^# Binaries: \([^ ,]*/llama-bench\).*|\1|p' .peer/build-llama-bench.sh 2>/dev/null)
        GLMCHAT=$R/$D/glmchat MICROBENCH=$R/$D/build/tools/vk_microbench BASE=$base LLAMA_BENCH=$llama \
            LLAMA_WAIT="$R/.peer/build-llama-bench.sh" \
            FORMATS=${FORMATS:-Q4_K_M Q5_K_M Q4_K_XL Q4_0 Q6_K Q8_0} \
            bash "$D/tests/bench/bench_formats.sh" >"$OUT/formats.txt" 2>&1
        sed -n '/^== A\/B\|^== formats:/,$p' "$OUT/formats.txt"
        date +%T
    fi
} 2>&1 | tee "$L"
