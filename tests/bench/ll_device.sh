#!/bin/bash
# ll_device.sh: gpu/PERF.md run 30's GPU call -- qkv and q as tagged words
# (LL) checked and measured in one call.  Run from the checkout's root on the GPU
# machine with a bundle made here by tests/bench/device_bundle.sh in $D
# (default .dev/ll; its base/glmchat: the session's start binary); carry .gl
# and $D.  Steps in order of need, each under a timeout, each off with =0:
#   KERNELS   test_vk_kernels, the cases matching each of $KTESTS (default:
#             the counter and LL chains, the embedding)   -> $OUT/kernels.txt
#             ("tagged": the q_b -> k_b || kv_store LL cases)
#   FIXTURES  tests/t_vk_fixtures.sh                      -> $OUT/fixtures.txt
#   AB        per file type of $TYPES (default Q4_0 Q4_K_M; made there):
#             $ROUNDS rounds of `bench -p 0 -n 128 -d 0,4096 -r 1` under each
#             of $SETTINGS (first type) / $SETTINGS2 (the others) in turn,
#             every other round reversed ("base": the earlier binary;
#             "default"; else comma-separated --tune fields): tg128 greedy at
#             depth 0 / 4096 / share                      -> $OUT/ab.txt
#   STRESS    after the first type's A/B: tests/bench/vk_dep_stress.sh with
#             that file (FULL)                            -> $OUT/stress.txt
#   PROF      `bench -p 0 -n 64 --profile` under each of $PROF_SETTINGS on the
#             last type                                   -> $OUT/prof.txt
# Figures only: nothing here passes or fails on speed.
D=${D:-.dev/ll}
R=$PWD
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
ln -sfn "$R/tests/data" "$D/tests/data"
G=$R/$D/glmchat
M=/tmp/ll_ab.gguf
run_setting() {
    local s=$1 bin=$G tunes=
    shift
    [ "$s" = base ] && bin=$R/$D/base/glmchat
    case $s in default | base) ;; *) tunes=$(echo "$s" | tr ',' '\n' | sed 's/^/--tune /' | tr '\n' ' ') ;; esac
    # shellcheck disable=SC2086
    timeout "${BENCH_T:-60}" "$bin" bench -m "$M" --backend vulkan $tunes "$@" 2>&1 | tr '\r' '\n' | grep -v '^uploading'
}
greedy() { sed -n "s/^tg[0-9]* @ depth $1: .*, \([0-9.]*\) greedy.*/\1/p" | head -n 1; }
{
    date +%T
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
    "$G" devices | grep default || exit 1
    if [ "${KERNELS:-1}" = 1 ]; then
        for k in ${KTESTS:-chain tagged embedding}; do
            echo "== kernel tests ($k)"
            TEST_ONLY=$k timeout "${KERNELS_T:-60}" "$D/build/tests/test_vk_kernels" >>"$OUT/kernels.txt" 2>&1
            echo "rc=$? ok=$(grep -c '^ok' "$OUT/kernels.txt") fail=$(grep -c '^FAIL' "$OUT/kernels.txt")"
        done
        grep -v '^ok' "$OUT/kernels.txt" | head -n 20
        date +%T
    fi
    if [ "${FIXTURES:-1}" = 1 ]; then
        echo "== fixtures"
        (cd "$D" && BUILD=build GLMCHAT=./glmchat timeout "${FIXTURES_T:-100}" sh tests/t_vk_fixtures.sh) \
            >"$OUT/fixtures.txt" 2>&1
        echo "rc=$? ok=$(grep -c '^ok' "$OUT/fixtures.txt")"
        grep -v '^ok' "$OUT/fixtures.txt" | head -n 20
        date +%T
    fi
    first=1
    for ty in ${TYPES-Q4_0 Q4_K_M}; do
        timeout 90 "$G" mkmodel --preset glm47-flash --type "$ty" -o "$M" --quiet --force || break
        date +%T
        settings=${SETTINGS:-base ll=0 default}
        [ $first = 0 ] && settings=${SETTINGS2:-ll=0 default}
        if [ "${AB:-1}" = 1 ]; then
            echo "== A/B $ty: tg128 greedy, depth 0 / 4096 / share"
            for round in $(seq "${ROUNDS:-2}"); do
                order=$settings
                [ $((round % 2)) = 0 ] && order=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')
                for s in $order; do
                    run_setting "$s" -p 0 -n 128 -d 0,4096 -r 1 >/tmp/ab.txt
                    sed "s/^/$ty $round $s: /" /tmp/ab.txt >>"$OUT/ab.txt"
                    t0=$(greedy 0 </tmp/ab.txt) t4=$(greedy 4096 </tmp/ab.txt)
                    echo "$ty $round $s: $t0 / $t4 / $(awk -v a="$t0" -v b="$t4" 'BEGIN { if (a > 0) printf "%.1f %%", 100 * b / a }')"
                done
            done
            date +%T
        fi
        if [ $first = 1 ] && [ "${STRESS:-1}" = 1 ]; then
            echo "== stress"
            FULL=$M D=$D timeout "${STRESS_T:-100}" bash "$D/tests/bench/vk_dep_stress.sh" >"$OUT/stress.txt" 2>&1
            cat "$OUT/stress.txt"
            date +%T
        fi
        first=0
    done
    for s in ${PROF_SETTINGS:-}; do
        echo "== profile $s"
        run_setting "$s" -p 0 -n 64 -r 1 --profile | tee -a "$OUT/prof.txt" |
            grep -E '^tg|^  (attn|attn_vb|moe_down|moe_gate_up|attn_output|router|shexp_gate_up|attn_q_a|sum)'
    done
    date +%T
} 2>&1 | tee "$OUT/log.txt"
