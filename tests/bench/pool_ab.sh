#!/bin/bash
# pool_ab.sh: the CPU thread pools' A/B -- a bundle's glmchat against its
# base/glmchat (e.g. main's) on one full-size file made there, in $ROUNDS
# rounds, every other one reversed:
#   - the CPU backend at each thread count of $THREADS (default "16 8";
#     THREADS="" skips it):
#     `bench --backend cpu -t T -p 64 -n 32`;
#   - routed experts in host memory (unless NCMOE=0): `bench --backend
#     vulkan --n-cpu-moe $NCMOE -p 512 -n 128` (default 47, as in runs 38-40).
# One line per run: binary, setting, prefill and greedy decode tokens/s
#                                                     -> $OUT/pool_ab.txt
# Run from the checkout's root on the GPU machine, with a bundle made here
# by `tests/bench/device_bundle.sh $D BASE_GLMCHAT` (D default .dev/pool);
# carry .gl and $D.  PRESET / TYPE: mkmodel's (default glm47-flash, Q4_0;
# PRESET=tiny-glm NCMOE=1 tries the script on a small machine).  Figures
# only: nothing here passes or fails on speed.
D=${D:-.dev/pool}
R=$PWD
OUT=${OUT:-$(mktemp -d)}
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig 2>/dev/null
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD
S=$(mktemp -d) || exit 1
trap 'rm -rf "$S"' EXIT
M=$S/model.gguf
"$R/$D/glmchat" mkmodel --preset "${PRESET:-glm47-flash}" --type "${TYPE:-Q4_0}" --quiet -o "$M" || exit 1
# one run: binary label (new/base), setting label, bench arguments
one() {
    local who=$1 what=$2 bin=$R/$D/glmchat
    shift 2
    [ "$who" = base ] && bin=$R/$D/base/glmchat
    timeout "${BENCH_T:-120}" "$bin" bench -m "$M" "$@" 2>&1 | tr '\r' '\n' |
        awk -v who="$who" -v what="$what" '
            /^pp[0-9]*:/ && !pp { pp = $2 }
            /^tg[0-9]* @ depth 0:/ { for (i = 1; i <= NF; i++) if ($i == "greedy") tg = $(i - 1) }
            END { printf "%-4s %-12s pp %10s  tg greedy %10s\n", who, what, pp, tg }'
}
round() {
    for who in "$@"; do
        for t in ${THREADS-16 8}; do
            one "$who" "cpu -t $t" --backend cpu -t "$t" -p 64 -n 32
        done
        [ "${NCMOE:-47}" = 0 ] || one "$who" "ncmoe ${NCMOE:-47}" --backend vulkan --n-cpu-moe "${NCMOE:-47}" -p 512 -n 128
    done
}
for r in $(seq "${ROUNDS:-2}"); do
    if [ $((r % 2)) = 1 ]; then round new base; else round base new; fi
done | tee "$OUT/pool_ab.txt"
