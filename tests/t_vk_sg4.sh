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

TEST_ONLY='router' at_lanes test_vk_matvec 4 16
TEST_ONLY='test_greedy_ties|test_host_topk|test_draw_boundaries|test_small_vocabularies|test_mid_vocabulary|test_engine_samples_like_cpu' \
    at_lanes test_vk_sampler 4 6
done_tests
