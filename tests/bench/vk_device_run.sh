#!/bin/bash
# vk_device_run.sh: glmchat's Vulkan checks and benchmarks on the lent GPU machine, in one call
# (see gpu/PERF.md "How to run").  Run from the repo root there, with the binaries in .devcarry/:
#   MSWEEP="default MB_MIXED=1 GLMCHAT_MVX=0 ..."   microbenchmark settings (comma-separated env)
#   SWEEP="GLMCHAT_MVX=0,GLMCHAT_ATTN_SG=0 ..."     full-model A/B settings
# Logs go to $OUT/log.txt (plus kernels.txt, fixtures.txt, devices.txt, mkmodel.txt).
D=${D:-.devcarry}
R=$PWD
L=$OUT/log.txt
for f in .gl/*.deb $D/gl2/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
$D/glmchat devices > $OUT/devices.txt 2>&1 || { cat $OUT/devices.txt; exit 1; }
( cd /tmp && time $R/$D/glmchat mkmodel --preset glm47-flash --type q4_0 -o /tmp/m.gguf --quiet ) > $OUT/mkmodel.txt 2>&1 &
MK=$!
{
date +%T
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
echo "== kernel tests"; timeout 150 $D/test_vk_kernels > $OUT/kernels.txt 2>&1; echo "rc=$?"; grep -v "^ok" $OUT/kernels.txt; grep -c "^ok" $OUT/kernels.txt
# a kernel family failing here must not spoil the benchmark: fall back to the previous kernels
if grep -q "^FAIL - experts gate" $OUT/kernels.txt; then export GLMCHAT_MVX_DOWN=0; echo "FALLBACK GLMCHAT_MVX_DOWN=0"; fi
if grep -q "^FAIL - attention" $OUT/kernels.txt; then export GLMCHAT_MVX_VB=0 GLMCHAT_ATTN_SG=0 GLMCHAT_ATTN_FD=0; echo "FALLBACK GLMCHAT_MVX_VB=0 GLMCHAT_ATTN_SG=0 GLMCHAT_ATTN_FD=0"; fi
if grep -q "^FAIL - mv\|^FAIL - router" $OUT/kernels.txt; then export GLMCHAT_MVX=0; echo "FALLBACK GLMCHAT_MVX=0"; fi
if grep "^FAIL - mat-mat\|^FAIL - experts of a prompt" $OUT/kernels.txt | grep -qv "batched heads"; then export GLMCHAT_COOPMAT=0; echo "FALLBACK GLMCHAT_COOPMAT=0"; fi
if grep -q "^FAIL - attention.*\[prefill: attn_combine\|^FAIL - mat-mat batched heads" $OUT/kernels.txt; then export GLMCHAT_PF_HEADS_MM=0; echo "FALLBACK GLMCHAT_PF_HEADS_MM=0"; fi
date +%T
echo "== fixtures"; BUILD=$D/build GLMCHAT=$D/glmchat timeout 150 sh $D/t_vk_fixtures.sh > $OUT/fixtures.txt 2>&1; echo "rc=$?"; grep -c "^ok" $OUT/fixtures.txt; grep -v "^ok" $OUT/fixtures.txt | head -20
date +%T
echo "== microbench"
for cfg in $MSWEEP; do
  echo "-- $cfg"
  if [ "$cfg" = default ]; then timeout 90 $D/vk_microbench ${REPS:-40} 2>&1 | grep -v "^# device"
  else env $(echo $cfg | tr ',' ' ') MB_NOBW=1 timeout 90 $D/vk_microbench ${REPS:-40} 2>&1 | grep -v "^# device"; fi
done
date +%T
wait $MK; cat $OUT/mkmodel.txt
date +%T
echo "== bench"
time timeout 240 $D/glmchat bench -m /tmp/m.gguf --backend vulkan -p 512 -n 128 -d 0,4096 --profile --routing 2>&1 | tr '\r' '\n' | grep -v "^uploading"
date +%T
if [ -n "$SWEEP" ]; then
  echo "== A/B (tg64 at depth 0 and 4096, pp512)"
  for cfg in $SWEEP; do
    echo "-- $cfg"
    env $(echo $cfg | tr ',' ' ') timeout 90 $D/glmchat bench -m /tmp/m.gguf --backend vulkan -p 512 -n 64 -d 0,4096 -r 1 2>&1 | grep -E "^tg|^pp|glmchat:"
  done
fi
date +%T
} >> $L 2>&1
cat $L
