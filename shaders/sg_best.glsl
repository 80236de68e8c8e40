// sg_best.glsl: the subgroup's best of one (value, id) pair a lane -- the
// highest value, the lowest id among equal values -- and the lane holding
// it, for the loops that take a subgroup's best one round at a time (the
// router's pick, router_tail.glsl; sample_cand's lists).  Those rounds are
// on the token's critical path, so a round is one max, a ballot and one
// shuffle from the lane that holds the best; a second reduction (and a
// second ballot for its lane) only on a tie of values, which is rare.
// Ids are distinct among the lanes that can hold the best.

#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_ballot : enable
#extension GL_KHR_shader_subgroup_shuffle : enable

void sg_best(float v, uint id, out float m, out uint w, out uint lane)
{
    m = subgroupMax(v);
    uvec4 at = subgroupBallot(v == m);
    if (subgroupBallotBitCount(at) == 1u) {
        lane = subgroupBallotFindLSB(at);
        w = subgroupShuffle(id, lane);
    } else {
        w = subgroupMin(v == m ? id : 0xffffffffu);
        lane = subgroupBallotFindLSB(subgroupBallot(v == m && id == w));
    }
}
