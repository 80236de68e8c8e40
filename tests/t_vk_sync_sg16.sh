#!/bin/sh
# t_vk_sync_sg16.sh: the planner's test (test_vk_sync) once more at
# subgroup size 16: lavapipe's 512-bit vectors (LP_NATIVE_VECTOR_WIDTH)
# give other team sizes and grids, so other counts for the counters to wait
# for.  Its cases, named "... [subgroup 16]".  (A device other than
# lavapipe keeps its own subgroup size: then it says so and runs them once
# more there.)
. tests/lib.sh
T=$BUILD/tests/test_vk_sync
if [ ! -x "$T" ]; then
    fail "test_vk_sync at subgroup 16" "$T not built"
    done_tests
fi
LP_NATIVE_VECTOR_WIDTH=512 "$T" >"$TMP/out" 2>&1
rc=$?
grep '^# device' "$TMP/out" | grep -q 'subgroup 16' || echo "# not at subgroup 16 here: $(grep '^# device' "$TMP/out")"
sed -n 's/^\(ok\|FAIL\) - \([^:]*\)\(.*\)$/\1 - \2 [subgroup 16]\3/p' "$TMP/out"
n=$(grep -c '^ok - ' "$TMP/out")
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL - ' "$TMP/out"; then
    fail "test_vk_sync at subgroup 16" "exit status $rc: $(tail -c 300 "$TMP/out")"
elif [ "$n" -eq 0 ]; then
    fail "test_vk_sync at subgroup 16" "no case ran: $(tail -c 300 "$TMP/out")"
fi
grep -q '^FAIL - ' "$TMP/out" && _failed=1
done_tests
