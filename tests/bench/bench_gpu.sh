#!/bin/sh
# bench_gpu.sh (make bench): the Vulkan backend's figures on synthetic models
# written by `glmchat mkmodel` into a temporary directory:
#   - the demo model: prefill, decode, per-kernel table, routing spread;
#   - GLM-4.7-Flash at full width, 3 layers (0.8 GB): decode per-kernel table
#     at the real matrix sizes (fits lavapipe's 2 GiB);
#   - BENCH_FULL=1: the full-size GLM-4.7-Flash Q4_0 (17 GB; a real GPU with
#     ~20 GB free): pp512, tg128 at depth 0 and 4096, the table, routing --
#     the figures of gpu/PERF.md.
# Figures only: nothing here passes or fails on speed.  Needs a Vulkan device.
GLMCHAT=${GLMCHAT:-./glmchat}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
status=0

run() {
    echo "\$ glmchat $*"
    # the upload progress line rewrites itself with carriage returns: drop it
    $GLMCHAT "$@" 2>&1 | tr '\r' '\n' | grep -v '^uploading' || status=1
}

if ! $GLMCHAT devices; then
    echo "bench_gpu: no usable Vulkan device; skipped"
    exit 0
fi
$GLMCHAT mkmodel --preset demo --type q4_0 -o "$DIR/demo.gguf" --quiet &&
    run bench -m "$DIR/demo.gguf" --backend vulkan -p 64 -n 32 --profile --routing
$GLMCHAT mkmodel --preset glm47-flash --type q4_0 --layers 3 --vocab 16384 -o "$DIR/glm3.gguf" --quiet &&
    run bench -m "$DIR/glm3.gguf" --backend vulkan -p 0 -n 8 --profile
if [ "${BENCH_FULL:-0}" = 1 ]; then
    $GLMCHAT mkmodel --preset glm47-flash --type q4_0 -o "$DIR/glm.gguf" --quiet &&
        run bench -m "$DIR/glm.gguf" --backend vulkan -p 512 -n 128 -d 0,4096 --profile --routing
fi
exit $status
