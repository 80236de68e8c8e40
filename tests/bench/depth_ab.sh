#!/bin/bash
# depth_ab.sh: decode at depth, A/B in one GPU call (gpu/PERF.md run 27).
# Run from the checkout's root on the GPU machine with a bundle made here by
# tests/bench/device_bundle.sh in $D (its base/glmchat: the earlier binary);
# carry .gl and $D.  Steps, each off with =0, every one under a timeout:
#   KERNELS   test_vk_kernels, the cases matching $KTEST_ONLY (default
#             "att": the attention and attn_vb cases)    -> $OUT/kernels.txt
#   FIXTURES  tests/t_vk_fixtures.sh                      -> $OUT/fixtures.txt
#   AB        one full-size file ($TYPE, default Q4_0, made there), then
#             $ROUNDS rounds of `bench -p 0 -n 128 -d 0,4096 -r 1` under each
#             of $SETTINGS in turn, every other round reversed ("base": the
#             earlier binary; "default";
#             else comma-separated --tune fields); one line each: tg128 at
#             depth 0 and 4096 (greedy) and the share   -> $OUT/ab.txt
#   PROF      `bench -p 0 -n 64 -d 0,4096 --profile` under each of
#             $PROF_SETTINGS (the per-kernel tables)     -> $OUT/prof.txt
# Figures only: nothing here passes or fails on speed.
D=${D:-.dev/depth}
R=$PWD
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
ln -sfn "$R/tests/data" "$D/tests/data"
G=$R/$D/glmchat
M=/tmp/depth_ab.gguf
# bench with one setting: "base", "default" or KEY=V[,KEY=V...]
run_setting() {
    local s=$1 bin=$G tunes=
    shift
    [ "$s" = base ] && bin=$R/$D/base/glmchat
    case $s in default | base) ;; *) tunes=$(echo "$s" | tr ',' '\n' | sed 's/^/--tune /' | tr '\n' ' ') ;; esac
    # shellcheck disable=SC2086
    timeout "${BENCH_T:-90}" "$bin" bench -m "$M" --backend vulkan $tunes "$@" 2>&1 | tr '\r' '\n' | grep -v '^uploading'
}
# greedy tokens/s of the line "tgN @ depth D: ..."
greedy() { sed -n "s/^tg[0-9]* @ depth $1: .*, \([0-9.]*\) greedy.*/\1/p" | head -n 1; }
{
    date +%T
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
    "$G" devices | grep default || exit 1
    if [ "${KERNELS:-1}" = 1 ]; then
        echo "== kernel tests (${KTEST_ONLY-att})"
        TEST_ONLY=${KTEST_ONLY-att} timeout "${KERNELS_T:-120}" "$D/build/tests/test_vk_kernels" >"$OUT/kernels.txt" 2>&1
        echo "rc=$? ok=$(grep -c '^ok' "$OUT/kernels.txt") fail=$(grep -c '^FAIL' "$OUT/kernels.txt")"
        grep -v '^ok' "$OUT/kernels.txt" | head -n 20
        date +%T
    fi
    if [ "${FIXTURES:-1}" = 1 ]; then
        echo "== fixtures"
        (cd "$D" && BUILD=build GLMCHAT=./glmchat timeout "${FIXTURES_T:-150}" sh tests/t_vk_fixtures.sh) \
            >"$OUT/fixtures.txt" 2>&1
        echo "rc=$? ok=$(grep -c '^ok' "$OUT/fixtures.txt")"
        grep -v '^ok' "$OUT/fixtures.txt" | head -n 20
        date +%T
    fi
    if [ "${AB:-1}" = 1 ] || [ -n "${PROF_SETTINGS:-}" ]; then
        # (--force: a warm machine may still hold an earlier call's file)
        timeout 120 "$G" mkmodel --preset glm47-flash --type "${TYPE:-Q4_0}" -o "$M" --quiet --force || exit 1
        date +%T
    fi
    if [ "${AB:-1}" = 1 ]; then
        echo "== A/B ${TYPE:-Q4_0}: tg128 greedy, depth 0 / 4096 / share"
        for round in $(seq "${ROUNDS:-2}"); do
            # every other round in the reverse order (no setting always first)
            order=${SETTINGS:-base default}
            [ $((round % 2)) = 0 ] && order=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')
            for s in $order; do
                run_setting "$s" -p 0 -n 128 -d 0,4096 -r 1 >/tmp/ab.txt
                sed "s/^/$round $s: /" /tmp/ab.txt >>"$OUT/ab.txt"
                t0=$(greedy 0 </tmp/ab.txt) t4=$(greedy 4096 </tmp/ab.txt)
                echo "$round $s: $t0 / $t4 / $(awk -v a="$t0" -v b="$t4" 'BEGIN { if (a > 0) printf "%.1f %%", 100 * b / a }')"
            done
        done
        date +%T
    fi
    for s in ${PROF_SETTINGS:-}; do
        echo "== profile $s"
        run_setting "$s" -p 0 -n 64 -d 0,4096 -r 1 --profile | tee -a "$OUT/prof.txt" |
            grep -E '^tg|^  (attn|attn_vb|moe_down|moe_gate_up|attn_output|sum) '
    done
    date +%T
} 2>&1 | tee "$OUT/log.txt"
