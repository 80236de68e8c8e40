#version 450
// router: the MoE gate of one token in one dispatch, for router weight
// types the x-stationary router_xs does not read.  Every workgroup computes
// some router logits (RMSNorm(x) * nw fused); the last workgroup to finish
// picks the experts (router_tail.glsl).  Grid: x = row groups, y = token.

#define PC_USE_ROUTER
#include "pc_matvec.h"
#include "params.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = ROUTER_S_KSH) const uint KSH = 2048u;
layout(constant_id = ROUTER_S_UPT) const uint UPT = 4u;
const uint WGS = gl_WorkGroupSize.x;
layout(constant_id = ROUTER_S_EPL) const uint EPL = 16u;  // experts per lane in the tail (N / SG rounded up)

#include "quant.glsl"
#include "mv_common.glsl"

layout(set = 0, binding = ROUTER_B_PARAMS) readonly buffer Params { uint p[]; } P;

#include "router_tail.glsl"

void main()
{
    iq_init();
    uint z = gl_WorkGroupID.y;
    if (pc.check_batch != 0u && z >= P.p[VKP_NTOK])
        return;
    xsrc a = xsrc(true, pc.x_off + z * pc.x_z, pc.K, true, pc.nw_off);

    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE);
    uint row0 = (gl_WorkGroupID.x * (WGS / TEAM) + team) * NR;
    uint nv = row0 < pc.N ? min(NR, pc.N - row0) : 1u;
    uint r0 = min(row0, pc.N - 1u);
    uint lb = pc.l_off + z * pc.N;
    float acc[NR];
    [[unroll]] for (uint r = 0u; r < NR; r++)
        acc[r] = 0.0;
    float xx = 0.0;
    team_rows(TYPE, 0u, r0 * bpr, bpr, nv, pc.hbase, lane, pc.Kp / unit_of(TYPE), a, acc, xx);
    float sc = rms_scale(xx, pc.K, pc.eps);
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        float v = team_sum(acc[r]) * sc;
        if (lane == 0u && row0 + r < pc.N)
            L.logit[lb + row0 + r] = v;
    }
    router_tail(z, lb);
}
