#!/bin/bash
# vk_dep_stress.sh: counter-dependency and tagged-word (LL) stress on the lent GPU machine (gpu/PERF.md
# runs 17, 30): decode logits (-b 1) of the tiny fixtures under several settings (GLMCHAT_DEP_FLAGS, --tune ll),
# six runs each, compared bit for bit with barriers only (DEP=0, ll=0); then, with the full-size file $FULL
# (when given: depth_ab.sh passes the file it made), 96 decode steps with counters and LL against
# barriers (FULL_TUNES: the settings).  Run from the repo root there with the binaries in $D (see tests/bench/device_run.sh); a line
# "N of 6 differ" with N > 0 or "DIFFER" is a race.
D=${D:-.devcarry}
for f in .gl/*.deb $D/gl2/*.deb; do [ -f "$f" ] && dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
G=$D/glmchat; JG=$D/build/tools/json_get
FULL=${FULL:-}
S=$(mktemp -d) || exit 1
trap 'rm -rf "$S"' EXIT
for m in tiny-glm-a tiny-lite-a; do
  d=tests/data/models/$m; M=$d/$m.f32.gguf; T=$($JG $d/fixture.json prompt.tokens --sep ,)
  GLMCHAT_DEP_FLAGS=0 $G logits -m $M --backend vulkan --kv-type f16 -b 1 --tune ll=0 --tokens "$T" -o $S/base.bin 2>/dev/null
  # DEP:TUNES, TUNES comma-separated --tune fields
  for cfg in ${CONFIGS:-128:ll=0 511:ll=0 0:ll=1 0:ll=2 511:ll=1 511:ll=2}; do
    bad=0
    tunes=$(echo "${cfg#*:}" | tr ',' '\n' | sed 's/^/--tune /' | tr '\n' ' ')
    for i in 1 2 3 4 5 6; do
      # shellcheck disable=SC2086
      GLMCHAT_DEP_FLAGS=${cfg%:*} $G logits -m $M --backend vulkan --kv-type f16 -b 1 $tunes --tokens "$T" -o $S/t.bin 2>$S/err || { bad=$((bad+100)); head -c 200 $S/err; }
      cmp -s $S/t.bin $S/base.bin || bad=$((bad+1))
    done
    echo "$m DEP=${cfg%:*} ${cfg#*:}: $bad of 6 differ"
  done
done
# the full-size model: 96 decode steps, DEP=0 ll=0 vs all counters and LL, twice
if [ -n "$FULL" ] && [ -f "$FULL" ]; then
  T=$(seq -s, 11 106)
  GLMCHAT_DEP_FLAGS=0 $G logits -m "$FULL" --backend vulkan -b 1 --tune ll=0 --tokens "$T" -o $S/fb.bin 2>$S/err || head -c 200 $S/err
  for t in ${FULL_TUNES:-ll=1 ll=2}; do
    tunes=$(echo "$t" | tr ',' '\n' | sed 's/^/--tune /' | tr '\n' ' ')
    # shellcheck disable=SC2086
    GLMCHAT_DEP_FLAGS=511 $G logits -m "$FULL" --backend vulkan -b 1 $tunes --tokens "$T" -o $S/ft.bin 2>$S/err || head -c 200 $S/err
    cmp -s $S/fb.bin $S/ft.bin && echo "full-size DEP=511 $t: same logits" || echo "full-size DEP=511 $t: DIFFER"
  done
fi
