#!/bin/sh
# t_vk_sampler_sg16.sh: the GPU sampler's kernel cases (test_vk_sampler)
# once more at subgroup size 16 -- lavapipe's 512-bit vectors
# (LP_NATIVE_VECTOR_WIDTH) -- named "... [subgroup 16]": sample_cand's
# rounds and sample_pick's decision run on ballots, shuffles and scans of
# one subgroup, and sample_select's passes follow sample_pick's grids, so
# another width takes other paths through them.  The vocabularies up to
# 20,000 tokens and the draw's boundaries (every way: the candidates, the
# selections after sample_pick, the second program); the full vocabulary
# and the engine case stay at the default size (test_vk_sampler).
# (A device other than lavapipe keeps its own subgroup size: then it says
# so and runs them once more there.)
. tests/lib.sh
T=$BUILD/tests/test_vk_sampler
if [ ! -x "$T" ]; then
    fail "test_vk_sampler at subgroup 16" "$T not built"
    done_tests
fi
TEST_ONLY='test_greedy_ties|test_host_topk|test_draw_boundaries|test_small_vocabularies|test_mid_vocabulary' \
    LP_NATIVE_VECTOR_WIDTH=512 "$T" >"$TMP/out" 2>&1
rc=$?
grep '^# device' "$TMP/out" | grep -q 'subgroup 16' || echo "# not at subgroup 16 here: $(grep '^# device' "$TMP/out")"
grep '^# [0-9]* draws' "$TMP/out"
sed -n 's/^\(ok\|FAIL\) - \([^:]*\)\(.*\)$/\1 - \2 [subgroup 16]\3/p' "$TMP/out"
n=$(grep -c '^ok - ' "$TMP/out")
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL - ' "$TMP/out"; then
    fail "test_vk_sampler at subgroup 16" "exit status $rc: $(tail -c 300 "$TMP/out")"
elif [ "$n" -ne 5 ] && ! grep -q '^FAIL - ' "$TMP/out"; then
    fail "test_vk_sampler at subgroup 16" "$n of 5 cases ran: $(tail -c 300 "$TMP/out")"
fi
grep -q '^FAIL - ' "$TMP/out" && _failed=1
done_tests
