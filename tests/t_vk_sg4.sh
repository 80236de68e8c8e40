#!/bin/sh
# t_vk_sg4.sh: kernel cases once more at subgroup size 4 -- lavapipe's
# 128-bit vectors (LP_NATIVE_VECTOR_WIDTH), the smallest it offers and the
# size of some mobile GPUs -- named "... [subgroup 4]":
#  - the router (test_vk_matvec): its tail picks the experts in one
#    subgroup, and 6 used of 160 is more than 4 lanes hold one weight each;
#  - the GPU sampler (test_vk_sampler, the subset t_vk_sampler_sg16.sh
#    runs, and the engine case): a workgroup of 256 threads has 64
#    subgroups there, more lists than sample_cand's merges hold at once.
# Both failed here before their fixes (the router's weights past the 4th
# were never written; the engine refused to open).  t_shapes.sh runs a
# whole model at this size.  (A device other than lavapipe keeps its own
# subgroup size: then it says so and runs them once more there.)
. tests/lib.sh

# at_sg4 PROGRAM CASES MIN: the cases of PROGRAM matching CASES (TEST_ONLY)
# at subgroup 4, at least MIN of them
at_sg4() {
    T=$BUILD/tests/$1
    if [ ! -x "$T" ]; then
        fail "$1 at subgroup 4" "$T not built"
        return
    fi
    TEST_ONLY=$2 LP_NATIVE_VECTOR_WIDTH=128 "$T" >"$TMP/out" 2>&1
    rc=$?
    grep '^# device' "$TMP/out" | grep -q 'subgroup 4)' || echo "# not at subgroup 4 here: $(grep '^# device' "$TMP/out")"
    sed -n 's/^\(ok\|FAIL\) - \([^:]*\)\(.*\)$/\1 - \2 [subgroup 4]\3/p' "$TMP/out"
    n=$(grep -c '^ok - ' "$TMP/out")
    if [ "$rc" -ne 0 ] && ! grep -q '^FAIL - ' "$TMP/out"; then
        fail "$1 at subgroup 4" "exit status $rc: $(tail -c 300 "$TMP/out")"
    elif [ "$n" -lt "$3" ] && ! grep -q '^FAIL - ' "$TMP/out"; then
        fail "$1 at subgroup 4" "only $n of $3 cases ran: $(tail -c 300 "$TMP/out")"
    fi
    grep -q '^FAIL - ' "$TMP/out" && _failed=1
}

at_sg4 test_vk_matvec 'router' 16
at_sg4 test_vk_sampler \
    'test_greedy_ties|test_host_topk|test_draw_boundaries|test_small_vocabularies|test_mid_vocabulary|test_engine_samples_like_cpu' 6
done_tests
