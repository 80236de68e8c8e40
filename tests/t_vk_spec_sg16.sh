#!/bin/sh
# t_vk_spec_sg16.sh: the Vulkan drafting test (test_vk_spec) once more at
# subgroup size 16 -- lavapipe's 512-bit vectors (LP_NATIVE_VECTOR_WIDTH)
# give other team sizes, so other summation orders for the NextN block
# against the reference, and other attention grids past one chunk: the
# NextN block on a fixture file, the deep verify case and the verify
# program's columns (its matvecs' columns in one call at other team
# sizes), named "... [subgroup 16]", each on one model where it takes
# fixtures (TEST_VK_SPEC_ONE): the kernels
# whose team sizes follow the subgroup (the matrix-vector reductions, the
# attention's grids) show other sizes on any model, and the normal run of
# test_vk_spec covers the other models and types at the default size.
# TEST_FULL=1 runs both cases on every model; the sanitizer run
# (TEST_QUICK) the deep case alone (test_vk_spec leaves the block's
# fixture case out there).
# (A device other than lavapipe keeps its own subgroup size: then it says
# so and runs them once more there.)
. tests/lib.sh
T=$BUILD/tests/test_vk_spec
if [ ! -x "$T" ]; then
    fail "test_vk_spec at subgroup 16" "$T not built"
    done_tests
fi
one=1
[ "${TEST_FULL:-0}" = 1 ] && one=0
TEST_VK_SPEC_ONE=$one TEST_ONLY='test_nextn_block_matches_reference_fixtures|past_one_chunk|columns' LP_NATIVE_VECTOR_WIDTH=512 \
    "$T" >"$TMP/out" 2>&1
rc=$?
grep '^# device' "$TMP/out" | grep -q 'subgroup 16' || echo "# not at subgroup 16 here: $(grep '^# device' "$TMP/out")"
sed -n 's/^\(ok\|FAIL\) - \([^:]*\)\(.*\)$/\1 - \2 [subgroup 16]\3/p' "$TMP/out"
n=$(grep -c '^ok - ' "$TMP/out")
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL - ' "$TMP/out"; then
    fail "test_vk_spec at subgroup 16" "exit status $rc: $(tail -c 300 "$TMP/out")"
elif [ "$n" -eq 0 ] && ! grep -q '^FAIL - ' "$TMP/out"; then
    fail "test_vk_spec at subgroup 16" "no case ran: $(tail -c 300 "$TMP/out")"
fi
grep -q '^FAIL - ' "$TMP/out" && _failed=1
done_tests
