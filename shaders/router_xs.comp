#version 450
// router_xs: the MoE gate of one token in one dispatch, x-stationary (see
// mv_xs_common.glsl): each workgroup stages RMSNorm(x) * nw once and computes
// its share of the router logits; the last workgroup to finish picks the
// experts (router_tail.glsl).  Grid: x = row groups, y = token.

#define PC_USE_ROUTER
#include "pc_matvec.h"
#define XS_STAGED_SUMS
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = ROUTER_S_EPL) const uint EPL = 2u;   // experts per lane in the tail
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "dep_flag.glsl"
#include "mv_xs_common.glsl"

layout(set = 0, binding = ROUTER_B_PARAMS) readonly buffer Params { uint p[]; } P;

#include "router_tail.glsl"

void route()
{
    uint z = gl_WorkGroupID.y;
    if (pc.check_batch != 0u && z >= P.p[VKP_NTOK])
        return;
    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT;
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;
    uint lb = pc.l_off + z * pc.N;

    load_rows(0u, 0u, bpr, pc.hbase, wrow0 + team * R, pc.N, lane, nunits, 0u);
    if (WAIT == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
    float sc = stage_x(pc.x_off + z * pc.x_z, pc.K, pc.Kp, true, pc.nw_off, pc.eps, 0u);
    load_xr(lane);
    for (uint p = 0u; p < pc.passes; p++) {
        if (wrow0 + p * NT * R >= pc.N)
            break;  // past the matrix (the last workgroup; uniform)
        uint row0 = wrow0 + (p * NT + team) * R;
        if (p > 0u)
            load_rows(0u, 0u, bpr, pc.hbase, row0, pc.N, lane, nunits, 0u);
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float v = team_sum(row_dot(0u, bpr, row0 + r, pc.N, lane, nunits, 0u, r)) * sc;
            if (lane == 0u && row0 + r < pc.N)
                L.logit[lb + row0 + r] = v;
        }
    }
    router_tail(z, lb);
}

void main()
{
    route();
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
