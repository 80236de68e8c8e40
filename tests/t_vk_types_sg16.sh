#!/bin/sh
# t_vk_types_sg16.sh: a subset of the low-bit types' kernel cases
# (test_vk_types) once more at subgroup size 16: lavapipe's 512-bit vectors
# (LP_NATIVE_VECTOR_WIDTH) give other team sizes, other lanes per block and
# other reductions.  The kernels that use subgroups, every type in each:
# the expert-id mat-vecs under every geometry variant (mv_xs and mv), the
# small experts' gate/up + down (mv_glu*, mv_moe_down*) and v_b after the
# combine (attn_vb*).  (mm and embed use no subgroup operations; mm_coop
# runs only where there are cooperative matrices.)  Its cases, named
# "... [subgroup 16]".  (A device other than lavapipe keeps its own
# subgroup size: then it says so and runs them once more there.)
. tests/lib.sh
# the sanitizer run (TEST_QUICK): every 4th case, as test_vk_types there
want=60
if [ "${TEST_QUICK:-0}" = 1 ]; then
    export TEST_SAMPLE=4
    want=15
fi
TEST_ONLY='expert ids|(H=|attention combine' at_lanes test_vk_types 16 $want
done_tests
