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
T=$BUILD/tests/test_vk_types
if [ ! -x "$T" ]; then
    fail "test_vk_types at subgroup 16" "$T not built"
    done_tests
fi
# the sanitizer run (TEST_QUICK): every 4th case, as test_vk_types there
want=60
if [ "${TEST_QUICK:-0}" = 1 ]; then
    export TEST_SAMPLE=4
    want=15
fi
TEST_ONLY='expert ids|(H=|attention combine' \
    LP_NATIVE_VECTOR_WIDTH=512 "$T" >"$TMP/out" 2>&1
rc=$?
grep '^# device' "$TMP/out" | grep -q 'subgroup 16' || echo "# not at subgroup 16 here: $(grep '^# device' "$TMP/out")"
sed -n 's/^\(ok\|FAIL\) - \([^:]*\)\(.*\)$/\1 - \2 [subgroup 16]\3/p' "$TMP/out"
n=$(grep -c '^ok - ' "$TMP/out")
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL - ' "$TMP/out"; then
    fail "test_vk_types at subgroup 16" "exit status $rc: $(tail -c 300 "$TMP/out")"
elif [ "$n" -lt $want ]; then
    fail "test_vk_types at subgroup 16" "only $n cases ran: $(tail -c 300 "$TMP/out")"
fi
grep -q '^FAIL - ' "$TMP/out" && _failed=1
done_tests
