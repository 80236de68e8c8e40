#!/bin/sh
# bench_mkmodel.sh: speed of `glmchat mkmodel` (the synthetic-model
# generator).  Figures only; nothing here passes or fails on speed.
#  - generation alone: the full-size GLM-4.7-Flash Q4_0 and Q4_K_M written
#    to /dev/null, all CPUs and one thread;
#  - to disk: a 6-layer cut of the full-size shape (about 2.3 GB) in a
#    directory of mktemp's ($TMPDIR), removed afterwards.  Set MKMODEL_FULL=1 to write the full 17 GB file
#    instead (needs ~17 GB free).
GLMCHAT=${GLMCHAT:-./glmchat}
dir=$(mktemp -d) || exit 1
out=$dir/bench_mkmodel.gguf
trap 'rm -rf "$dir"' EXIT
status=0
echo "cpus: $(nproc)"
for t in Q4_0 Q4_K_M; do
    $GLMCHAT mkmodel --preset glm47-flash --type $t --quiet -o /dev/null || status=1
done
$GLMCHAT mkmodel --preset glm47-flash --type Q4_0 --threads 1 --quiet -o /dev/null || status=1
if [ "${MKMODEL_FULL:-0}" = 1 ]; then
    $GLMCHAT mkmodel --preset glm47-flash --type Q4_0 --quiet -o "$out" || status=1
else
    $GLMCHAT mkmodel --preset glm47-flash --type Q4_0 --layers 6 --quiet -o "$out" || status=1
fi
exit $status
