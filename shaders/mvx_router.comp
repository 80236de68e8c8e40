#version 450
// mvx_router: x += W_o . o for one token (mvx with OMODE 1, x-stationary:
// see mvx_common.glsl), then the MoE router of the new x in the same
// dispatch -- one dependent step instead of two (gpu/PERF.md run 14a).
//
// The router is linear in x up to the RMSNorm's global scale:
//   logit[e] = (sum_j Wr[e][j] * nw[j] * x[j]) / sqrt(mean_j x[j]^2 + eps)
// so each workgroup, once it has its rows j of the new x, writes its rows'
// shares of the N dot products and of sum x^2 to a scratch (column c of
// workgroup g at part_off + c * groups + g; column N is sum x^2) -- plain
// stores, no float atomics, so the result does not depend on the order the
// workgroups finish in.  The last workgroup to count itself in sums each
// column over the workgroups in a fixed order, scales the dots by 1/rms and
// picks the experts (router_tail.glsl).
//
// Grid: x = row groups of LRS rows (WGS/TEAM teams x R rows x LRS/(NT*R)
// passes).  Weight slots: 0 attn_output (TYPE), 1 the router (RTYPE, any
// type quant.glsl decodes: its rows are read a vec4 at a time, so a
// workgroup's row range need not meet block boundaries).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 2u;
layout(constant_id = 2) const uint TEAM = 32u;
layout(constant_id = 3) const uint J = 2u;
layout(constant_id = 4) const uint R = 4u;
layout(constant_id = 5) const uint SG = 32u;
layout(constant_id = 6) const uint RTYPE = 0u;
layout(constant_id = 7) const uint EPL = 2u;    // experts per lane in the tail
layout(constant_id = 8) const uint KSH = 2048u;
layout(constant_id = 9) const uint LRS = 16u;   // rows per workgroup
layout(constant_id = 10) const uint XREG = 1u;
layout(constant_id = 11) const uint XRN = 16u;
layout(constant_id = 12) const uint RT = 4u;    // lanes per column, workgroup shares
layout(constant_id = 13) const uint ST = 16u;   // lanes per column, the last workgroup's sums
layout(constant_id = 14) const uint NE1 = 65u;  // experts + 1
layout(constant_id = 15) const uint PRE = 0u;   // 1: each lane's router weights loaded up front
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "mvx_common.glsl"

layout(set = 0, binding = 8) buffer YBuf { float y[]; } Y;

layout(push_constant) uniform PC {
    uint K, Kp, No;      // attn_output: input width, padded, rows (= the router's width)
    uint hbase;          // attn_output's head byte offset
    uint x_off;          // o
    uint y_off;          // x, the residual stream (accumulated into)
    uint N;              // experts
    uint rbpr;           // router blocks per row
    uint r_hbase;        // router head byte offset
    uint nw_off;         // ffn_norm
    float eps;
    uint n_used;
    uint gating;         // 1 softmax, 2 sigmoid
    uint has_bias, norm_w;
    float scale;         // 0: none
    uint out_off;        // ids / weights
    uint bias_off;
    uint part_off;       // the partials scratch (binding 2)
} pc;

#include "router_tail.glsl"

shared float xo[LRS];   // this workgroup's rows of the new x
shared float xw[LRS];   // ... times the norm weight
shared float lg[NE1];   // the last workgroup: dot products, then sum x^2

float lanes_sum(float v, uint n)
{
    for (uint o = n >> 1; o > 0u; o >>= 1)
        v += subgroupShuffleXor(v, o);
    return v;
}

// Column c's share of this workgroup (rows w0.., nr of them): the router
// weights of group q (elements 4q..4q+3) are wq.
float row_share(vec4 wq, uint q, uint w0, uint nr)
{
    float a = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint j = 4u * q + i - w0;   // wraps below w0: fails j < nr
        if (j < nr)
            a += wq[i] * xw[j];
    }
    return a;
}

vec4 router_group(uint c, uint q)
{
    const uint GPB = blk_of(RTYPE) / 4u;   // vec4 groups per block
    return deq4(RTYPE, 1u, c * pc.rbpr + q / GPB, q % GPB, pc.r_hbase);
}

void main()
{
    const uint NT = WGS / TEAM, PASSES = LRS / (NT * R);
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT;
    uint w0 = gl_WorkGroupID.x * LRS, nr = min(LRS, pc.No - w0);
    uint q0 = w0 >> 2, q1 = (w0 + nr - 1u) >> 2;
    uint rteam = lid / RT, rl = lid % RT;

    // the router weights do not depend on x: in flight during the matvec
    vec4 wpre = vec4(0.0);
    if (PRE == 1u && rteam < pc.N && q0 + rl <= q1)
        wpre = router_group(rteam, q0 + rl);

    // x += W_o . o (mvx.comp, one token, no norm, accumulate)
    load_rows(0u, 0u, bpr, pc.hbase, w0 + team * R, pc.No, lane, nunits, 0u);
    stage_x(pc.x_off, pc.K, pc.Kp, false, 0u, 0.0);
    load_xr(lane);
    for (uint p = 0u; p < PASSES; p++) {
        if (w0 + p * NT * R >= pc.No)
            break;  // past the matrix (the last workgroup; uniform)
        uint row0 = w0 + (p * NT + team) * R;
        if (p > 0u)
            load_rows(0u, 0u, bpr, pc.hbase, row0, pc.No, lane, nunits, 0u);
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float v = team_sum(row_dot(0u, bpr, row0 + r, pc.No, lane, nunits, 0u, r));
            if (lane == 0u && row0 + r < pc.No) {
                uint row = row0 + r, yi = pc.y_off + row;
                float xn = Y.y[yi] + v;
                Y.y[yi] = xn;
                xo[row - w0] = xn;
                xw[row - w0] = xn * NW.nw[pc.nw_off + row];
            }
        }
    }
    barrier();

    // this workgroup's shares: teams of RT lanes, a column each (column N: sum x^2)
    uint groups = gl_NumWorkGroups.x;
    for (uint c0 = 0u; c0 < NE1; c0 += WGS / RT) {
        uint c = c0 + rteam;
        float a = 0.0;
        if (PRE == 1u) {
            if (c < pc.N && q0 + rl <= q1)
                a = row_share(wpre, q0 + rl, w0, nr);
        } else if (c < pc.N) {
            for (uint q = q0 + rl; q <= q1; q += RT)
                a += row_share(router_group(c, q), q, w0, nr);
        }
        if (c == pc.N)
            for (uint j = rl; j < nr; j += RT)
                a += xo[j] * xo[j];
        a = lanes_sum(a, RT);
        if (rl == 0u && c <= pc.N)
            L.logit[pc.part_off + c * groups + gl_WorkGroupID.x] = a;
    }
    if (!router_count_in(0u))
        return;

    // the last workgroup: each column summed over the workgroups, teams of
    // ST lanes, lane l taking workgroups l, l + ST, ... in 32 independent
    // sums (the loads of a batch in flight together), added in a fixed order
    const uint U = 32u;
    for (uint c0 = 0u; c0 < NE1; c0 += WGS / ST) {
        uint c = c0 + lid / ST, sl = lid % ST;
        float a[U];
        [[unroll]] for (uint u = 0u; u < U; u++)
            a[u] = 0.0;
        if (c <= pc.N) {
            uint cb = pc.part_off + c * groups;
            for (uint g0 = sl; g0 < groups; g0 += U * ST)
                [[unroll]] for (uint u = 0u; u < U; u++)
                    if (g0 + u * ST < groups)
                        a[u] += L.logit[cb + g0 + u * ST];
        }
        [[unroll]] for (uint s = U >> 1; s > 0u; s >>= 1)
            [[unroll]] for (uint u = 0u; u < s; u++)
                a[u] += a[u + s];
        float t = lanes_sum(a[0], ST);
        if (sl == 0u && c <= pc.N)
            lg[c] = t;
    }
    barrier();
    if (gl_SubgroupID != 0u)
        return;
    float sc = inversesqrt(lg[pc.N] / float(pc.No) + pc.eps);
    uint sl = gl_SubgroupInvocationID;
    float prob[EPL];
    for (uint i = 0u; i < EPL; i++) {
        uint e = sl + i * gl_SubgroupSize;
        prob[i] = e < pc.N ? lg[e] * sc : -1.0 / 0.0;
    }
    router_pick(0u, prob);
}
