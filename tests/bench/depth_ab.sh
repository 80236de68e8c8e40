#!/bin/bash
# depth_ab.sh: decode (and prefill) A/B of two binaries, or of tuning
# settings, in one GPU call (gpu/perf/runs: 27, 30, 32, 33, 34).  Run from
# the checkout's root on the GPU machine with a bundle made here by
# tests/bench/device_bundle.sh in $D (its glmchat: the binary under test;
# base/glmchat: the one to compare with, e.g. main's); carry .gl and $D.
# Steps, each off with =0, every one under a timeout:
#   KERNELS   the kernel-test programs named in $KBINS (default
#             "test_vk_sync test_vk_deps": the planner and the dependency
#             kernels), each with TEST_ONLY=$KTESTS when that is set
#                                                         -> $OUT/kernels.txt
#   FIXTURES  tests/t_vk_fixtures.sh                      -> $OUT/fixtures.txt
#   AB        per file type of $TYPES (default Q4_0; made there, full size):
#             $ROUNDS rounds of `bench $AB_ARGS` (default `-p 0 -n 128 -d
#             0,4096 -r 1`) under each of $SETTINGS (first type) /
#             $SETTINGS2 (the others; default $SETTINGS) in turn, every
#             other round reversed ("base": base/glmchat; "default"; else
#             comma-separated --tune fields of the bundle's binary); one
#             line each: tg at depth 0 and 4096 (greedy) and the share,
#             pp512 where AB_ARGS has -p 512              -> $OUT/ab.txt
#   STRESS    (=1; off by default) after the first type's A/B:
#             tests/bench/vk_dep_stress.sh with that file -> $OUT/stress.txt
#   PROF      `bench $PROF_ARGS --profile` (default `-p 0 -n 64 -d 0,4096
#             -r 1`) under each of $PROF_SETTINGS on type $PROF_TYPE right
#             after its A/B (default: the last type) (the per-kernel tables)
#                                                         -> $OUT/prof.txt
# PRESET: mkmodel's preset (default glm47-flash; tiny-glm tries the script
# on a small model, e.g. here on lavapipe).  The model and scratch files go
# to a directory of mktemp's ($TMPDIR), removed at the end.  Figures only:
# nothing here passes or fails on speed.
D=${D:-.dev/depth}
R=$PWD
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD
ln -sfn "$R/tests/data" "$D/tests/data"
G=$R/$D/glmchat
S=$(mktemp -d) || exit 1
trap 'rm -rf "$S"' EXIT
M=$S/model.gguf
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
# the per-kernel tables of $PROF_SETTINGS on the file made last
profiles() {
    for s in ${PROF_SETTINGS:-}; do
        echo "== profile $s"
        # shellcheck disable=SC2086
        run_setting "$s" ${PROF_ARGS:--p 0 -n 64 -d 0,4096 -r 1} --profile | tee -a "$OUT/prof.txt" |
            grep -E '^tg|^  (attn|attn_vb|moe_down|moe_gate_up|attn_output|attn_q_b|sum) '
    done
}
{
    date +%T
    command -v nvidia-smi >/dev/null &&
        nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
    "$G" devices | grep default || exit 1
    if [ "${KERNELS:-1}" = 1 ]; then
        for k in ${KBINS:-test_vk_sync test_vk_deps}; do
            echo "== kernel tests: $k${KTESTS:+ (cases matching $KTESTS)}"
            TEST_ONLY=${KTESTS:-} timeout "${KERNELS_T:-120}" "$D/build/tests/$k" >>"$OUT/kernels.txt" 2>&1
            echo "rc=$? ok=$(grep -c '^ok' "$OUT/kernels.txt") fail=$(grep -c '^FAIL' "$OUT/kernels.txt")"
        done
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
    first=1
    for ty in ${TYPES:-Q4_0}; do
        [ "${AB:-1}" = 1 ] || [ -n "${PROF_SETTINGS:-}" ] || break
        timeout 120 "$G" mkmodel --preset "${PRESET:-glm47-flash}" --type "$ty" -o "$M" --quiet --force || exit 1
        date +%T
        settings=${SETTINGS:-base default}
        [ $first = 0 ] && settings=${SETTINGS2:-$settings}
        if [ "${AB:-1}" = 1 ]; then
            echo "== A/B $ty (bench ${AB_ARGS:--p 0 -n 128 -d 0,4096 -r 1}): tg greedy, depth 0 / 4096 / share; pp512"
            for round in $(seq "${ROUNDS:-2}"); do
                # every other round in the reverse order (no setting always first)
                order=$settings
                [ $((round % 2)) = 0 ] && order=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')
                for s in $order; do
                    # shellcheck disable=SC2086
                    run_setting "$s" ${AB_ARGS:--p 0 -n 128 -d 0,4096 -r 1} >"$S/ab.txt"
                    sed "s/^/$ty $round $s: /" "$S/ab.txt" >>"$OUT/ab.txt"
                    t0=$(greedy 0 <"$S/ab.txt") t4=$(greedy 4096 <"$S/ab.txt")
                    pp=$(sed -n 's/^pp512: \([0-9.]*\) tokens.*/\1/p' "$S/ab.txt" | head -n 1)
                    line="$ty $round $s: ${t0:-?}"
                    [ -n "$t4" ] && line="$line / $t4 / $(awk -v a="$t0" -v b="$t4" 'BEGIN { if (a > 0) printf "%.1f %%", 100 * b / a }')"
                    echo "$line${pp:+, pp512 $pp}"
                done
            done
            date +%T
        fi
        if [ $first = 1 ] && [ "${STRESS:-0}" = 1 ]; then
            echo "== stress"
            FULL=$M D=$D timeout "${STRESS_T:-100}" bash "$D/tests/bench/vk_dep_stress.sh" >"$OUT/stress.txt" 2>&1
            cat "$OUT/stress.txt"
            date +%T
        fi
        first=0
        if [ "$ty" = "${PROF_TYPE:-}" ]; then
            profiles
            date +%T
        fi
    done
    [ -n "${PROF_TYPE:-}" ] || profiles
    date +%T
} 2>&1 | tee "$OUT/log.txt"
