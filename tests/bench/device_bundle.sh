#!/bin/sh
# device_bundle.sh DEST [BASE_GLMCHAT]: the files tests/bench/device_run.sh
# needs on the GPU machine, from this tree's release build (make first):
# DEST/glmchat, DEST/build/tests (the Vulkan kernel and planner tests of $TESTS),
# DEST/build/tools, DEST/tests (the scripts; the
# fixtures come from the checkout there);
# BASE_GLMCHAT (an earlier binary) as DEST/base/glmchat.  DEST goes into
# the checkout the device call sends, ignored by git there.
set -e
dest=$1
[ -n "$dest" ] || { echo "usage: device_bundle.sh DEST [BASE_GLMCHAT]" >&2; exit 2; }
B=${BUILD:-build/rel}
rm -rf "$dest"
mkdir -p "$dest/build/tests" "$dest/build/tools" "$dest/tests"
cp glmchat "$dest/"
# the kernel families' tests and the planner's ($TESTS; each ~6 MB, and a
# call carries 64 MiB in all)
for t in ${TESTS:-test_vk_sync test_vk_deps test_vk_matvec test_vk_attn test_vk_prefill test_vk_types}; do
    cp "$B/tests/$t" "$dest/build/tests/"
done
for t in cmp_logits json_get requant vk_microbench fixture_cmp tensor_digest; do cp "$B/tools/$t" "$dest/build/tools/"; done
cp tests/*.sh "$dest/tests/"
cp -r tests/bench "$dest/tests/"
if [ -n "$2" ]; then
    mkdir -p "$dest/base"
    cp "$2" "$dest/base/glmchat"
fi
# without debug sections: what travels is limited (64 MiB with the checkout)
strip -g "$dest/glmchat" "$dest"/build/tests/* "$dest"/build/tools/* ${2:+"$dest/base/glmchat"}
du -sh "$dest"
