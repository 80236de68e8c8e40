#!/bin/sh
# t_vk_sampler_sg16.sh: the GPU sampler's kernel cases (test_vk_sampler)
# once more at subgroup size 16 -- lavapipe's 512-bit vectors
# (LP_NATIVE_VECTOR_WIDTH) -- named "... [subgroup 16]": sample_cand's
# rounds and sample_pick's decision run on ballots, shuffles and scans of
# one subgroup, and sample_select's passes follow sample_pick's grids, so
# another width takes other paths through them.  The vocabularies up to
# 20,000 tokens and the draw's boundaries (every way: the candidates,
# sample_pick's own draw over the whole vocabulary, the selections after
# sample_pick, the second program); the full vocabulary
# and the engine case stay at the default size (test_vk_sampler).
# (A device other than lavapipe keeps its own subgroup size: then it says
# so and runs them once more there.)
. tests/lib.sh
TEST_ONLY='test_greedy_ties|test_host_topk|test_draw_boundaries|test_small_vocabularies|test_mid_vocabulary' \
    at_lanes test_vk_sampler 16 5 5
grep '^# [0-9]* draws' "$TMP/out"
done_tests
