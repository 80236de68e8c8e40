#version 450
// routerx: the MoE gate of one token in one dispatch, x-stationary (see
// mvx_common.glsl): each workgroup stages RMSNorm(x) * nw once and computes
// its share of the router logits; the last workgroup to finish picks the
// experts (router_tail.glsl).  Grid: x = row groups, y = token.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 0u;
layout(constant_id = 2) const uint TEAM = 32u;
layout(constant_id = 3) const uint J = 8u;
layout(constant_id = 4) const uint R = 1u;
layout(constant_id = 5) const uint SG = 32u;
layout(constant_id = 7) const uint EPL = 2u;   // experts per lane in the tail
layout(constant_id = 8) const uint KSH = 2048u;
layout(constant_id = 10) const uint XREG = 1u;
layout(constant_id = 11) const uint XRN = 16u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "mvx_common.glsl"
#include "dep_flag.glsl"

layout(set = 0, binding = 8) readonly buffer Params { uint p[]; } P;

layout(push_constant) uniform PC {
    uint K, Kp, N;       // N = experts
    uint hbase;
    uint x_off, x_z;
    uint nw_off;
    float eps;
    uint n_used;
    uint gating;         // 1 softmax, 2 sigmoid
    uint has_bias, norm_w;
    float scale;         // 0: none
    uint out_off;        // ids/weights of token z at out_off + z*n_used
    uint l_off;          // logits scratch of token z at l_off + z*N
    uint bias_off;
    uint check_batch;    // 1: tokens past params[1] have nothing to do
    uint passes;
    uint dep_signal;     // SIGNAL: this dispatch's counter
    uint dep_wait, dep_n; // WAIT: the producers' counter and workgroups
} pc;

#include "router_tail.glsl"

void route()
{
    uint z = gl_WorkGroupID.y;
    if (pc.check_batch != 0u && z >= P.p[1])
        return;
    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT;
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;
    uint lb = pc.l_off + z * pc.N;

    load_rows(0u, 0u, bpr, pc.hbase, wrow0 + team * R, pc.N, lane, nunits, 0u);
    if (WAIT == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
    float sc = stage_x(pc.x_off + z * pc.x_z, pc.K, pc.Kp, true, pc.nw_off, pc.eps);
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
