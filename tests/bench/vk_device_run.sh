#!/bin/bash
# vk_device_run.sh: glmchat's Vulkan checks and benchmarks on the lent GPU machine, in one call
# (see gpu/PERF.md "How to run").  Run from the repo root there, with the binaries in .devcarry/:
#   MSWEEP="default MB_MIXED=1 ..."                 microbenchmark settings (comma-separated env)
#   SWEEP="xs=0,attn_sg=0 ..."                      full-model A/B settings (comma-separated --tune keys)
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
# a kernel family failing here must not spoil the benchmark: fall back to the portable kernels
TUNE=
if grep -q "^FAIL - experts gate\|^FAIL - mv\|^FAIL - router" $OUT/kernels.txt; then TUNE="$TUNE --tune xs=0"; fi
if grep -q "^FAIL - attention" $OUT/kernels.txt; then TUNE="$TUNE --tune xs=0 --tune attn_sg=0 --tune attn_fd=0"; fi
if grep "^FAIL - mat-mat\|^FAIL - experts of a prompt" $OUT/kernels.txt | grep -qv "batched heads"; then TUNE="$TUNE --tune coopmat=0"; fi
[ -n "$TUNE" ] && echo "FALLBACK$TUNE"
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
time timeout 240 $D/glmchat bench -m /tmp/m.gguf --backend vulkan -p 512 -n 128 -d 0,4096 --profile --routing $TUNE 2>&1 | tr '\r' '\n' | grep -v "^uploading"
date +%T
if [ -n "$SWEEP" ]; then
  echo "== A/B (tg64 at depth 0 and 4096, pp512)"
  for cfg in $SWEEP; do
    echo "-- $cfg"
    timeout 90 $D/glmchat bench $(echo $cfg | tr ',' '\n' | sed 's/^/--tune /') -m /tmp/m.gguf --backend vulkan -p 512 -n 64 -d 0,4096 -r 1 2>&1 | grep -E "^tg|^pp|glmchat:"
  done
fi
date +%T
} >> $L 2>&1
cat $L
