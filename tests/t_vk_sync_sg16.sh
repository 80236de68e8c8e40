#!/bin/sh
# t_vk_sync_sg16.sh: the planner's test (test_vk_sync) once more at
# subgroup size 16: lavapipe's 512-bit vectors (LP_NATIVE_VECTOR_WIDTH)
# give other team sizes and grids, so other counts for the counters to wait
# for.  Its cases, named "... [subgroup 16]".  (A device other than
# lavapipe keeps its own subgroup size: then it says so and runs them once
# more there.)
. tests/lib.sh
at_lanes test_vk_sync 16 1
done_tests
