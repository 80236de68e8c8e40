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
one=1
[ "${TEST_FULL:-0}" = 1 ] && one=0
TEST_VK_SPEC_ONE=$one TEST_ONLY='test_nextn_block_matches_reference_fixtures|past_one_chunk|columns' \
    at_lanes test_vk_spec 16 1
done_tests
