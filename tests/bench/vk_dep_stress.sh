#!/bin/bash
# vk_dep_stress.sh: counter-dependency stress on the lent GPU machine (gpu/PERF.md run 17): decode
# logits (-b 1) of the tiny fixtures under several GLMCHAT_DEP_FLAGS settings, six runs each, compared bit for bit with barriers only (DEP=0); then, when
# vk_device_run.sh has made /tmp/m.gguf, 96 decode steps of the full-size file.  Run from the repo
# root there with the binaries in .devcarry/ (see tests/bench/vk_device_run.sh); a line
# "N of 6 differ" with N > 0 or "DIFFER" is a race.
D=${D:-.devcarry}
for f in .gl/*.deb $D/gl2/*.deb; do [ -f "$f" ] && dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
G=$D/glmchat; JG=$D/build/tools/json_get
for m in tiny-glm-a tiny-lite-a; do
  d=tests/data/models/$m; M=$d/$m.f32.gguf; T=$($JG $d/fixture.json prompt.tokens --sep ,)
  GLMCHAT_DEP_FLAGS=0 $G logits -m $M --backend vulkan --kv-type f16 -b 1 --tokens "$T" -o /tmp/base.bin 2>/dev/null
  for cfg in 128 256 384 511 511 511; do
    bad=0
    for i in 1 2 3 4 5 6; do
      GLMCHAT_DEP_FLAGS=$cfg $G logits -m $M --backend vulkan --kv-type f16 -b 1 --tokens "$T" -o /tmp/t.bin 2>/tmp/err || { bad=$((bad+100)); head -c 200 /tmp/err; }
      cmp -s /tmp/t.bin /tmp/base.bin || bad=$((bad+1))
    done
    echo "$m DEP=$cfg: $bad of 6 differ"
  done
done
# the full-size model (made by vk_device_run.sh): 96 decode steps, DEP=0 vs all counters, twice
if [ -f /tmp/m.gguf ]; then
  T=$(seq -s, 11 106)
  GLMCHAT_DEP_FLAGS=0 $G logits -m /tmp/m.gguf --backend vulkan -b 1 --tokens "$T" -o /tmp/fb.bin 2>/tmp/err || head -c 200 /tmp/err
  for i in 1 2; do
    GLMCHAT_DEP_FLAGS=511 $G logits -m /tmp/m.gguf --backend vulkan -b 1 --tokens "$T" -o /tmp/ft.bin 2>/tmp/err || head -c 200 /tmp/err
    cmp -s /tmp/fb.bin /tmp/ft.bin && echo "glm47-flash q4_0 DEP=511 run $i: same logits" || echo "glm47-flash q4_0 DEP=511 run $i: DIFFER"
  done
fi
