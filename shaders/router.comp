#version 450
// router: the MoE gate of one token in one dispatch.  Every workgroup
// computes some router logits (RMSNorm(x) * nw fused); the last workgroup to
// finish (an atomic counter) turns them into probabilities (sigmoid or
// softmax), picks the top n_used of prob + bias (the bias only selects; ties
// to the lower expert id), normalizes and scales the chosen probabilities,
// and writes expert ids and weights for the expert kernels.  That tail runs
// in the last workgroup's first subgroup alone (no barriers).  The counter
// is reset for the next use.  Grid: x = row groups, y = token.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 0u;
layout(constant_id = 2) const uint TEAM = 16u;
layout(constant_id = 3) const uint NR = 2u;
layout(constant_id = 4) const uint SG = 32u;
layout(constant_id = 5) const uint KSH = 2048u;
layout(constant_id = 6) const uint UPT = 4u;
const uint WGS = gl_WorkGroupSize.x;
const uint EMAX = 512u;      // experts a router can have
const uint EPL = EMAX / SG;   // experts per lane in the tail

#include "quant.glsl"
#include "mv_common.glsl"

layout(set = 0, binding = 2) coherent buffer LBuf { float logit[]; } L;
layout(set = 0, binding = 4) writeonly buffer IdBuf { int ids[]; } ID;
layout(set = 0, binding = 5) writeonly buffer WtBuf { float wts[]; } WT;
layout(set = 0, binding = 6) readonly buffer BBuf { float bias[]; } B;
layout(set = 0, binding = 7) coherent buffer CBuf { uint count[]; } CNT;
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
} pc;

shared bool s_last;

void main()
{
    uint z = gl_WorkGroupID.y;
    if (pc.check_batch != 0u && z >= P.p[1])
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
    // Publish the logits, then count this workgroup in.
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        s_last = atomicAdd(CNT.count[z], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (!s_last || gl_SubgroupID != 0u)
        return;
    memoryBarrierBuffer();

    // The tail, in one subgroup: lane l holds experts l, l + SG, ...
    uint sl = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    float prob[EPL], score[EPL];
    float mx = -1.0 / 0.0;
    for (uint i = 0u; i < EPL; i++) {
        uint e = sl + i * ss;
        prob[i] = e < pc.N ? L.logit[lb + e] : -1.0 / 0.0;
        mx = max(mx, prob[i]);
    }
    mx = subgroupMax(mx);
    float se = 0.0;
    for (uint i = 0u; i < EPL; i++) {
        uint e = sl + i * ss;
        float l = prob[i];
        float p = e >= pc.N ? 0.0 : pc.gating == 2u ? 1.0 / (1.0 + exp(-l)) : exp(l - mx);
        prob[i] = p;
        se += p;
    }
    se = subgroupAdd(se);
    for (uint i = 0u; i < EPL; i++) {
        uint e = sl + i * ss;
        if (pc.gating != 2u)
            prob[i] /= se;
        score[i] = e < pc.N ? prob[i] + (pc.has_bias != 0u ? B.bias[pc.bias_off + e] : 0.0) : -1.0 / 0.0;
    }
    float wsum = 0.0, wsel = 0.0;
    uint ob = pc.out_off + z * pc.n_used;
    for (uint k = 0u; k < pc.n_used; k++) {
        // this lane's best, then the subgroup's (lower id on ties)
        float best = -1.0 / 0.0;
        uint bi = 0xffffffffu;
        for (uint i = 0u; i < EPL; i++)
            if (score[i] > best) {
                best = score[i];
                bi = sl + i * ss;
            }
        float m = subgroupMax(best);
        uint w = subgroupMin(best == m ? bi : 0xffffffffu);
        uint owner = w % ss, slot = w / ss;
        float pw = 0.0;
        if (sl == owner)
            for (uint i = 0u; i < EPL; i++)
                if (i == slot) {
                    pw = prob[i];
                    score[i] = -1.0 / 0.0;
                }
        pw = subgroupAdd(pw);   // the chosen probability, from its owner
        wsum += pw;
        if (sl == k)
            wsel = pw;
        if (sl == 0u)
            ID.ids[ob + k] = int(w);
    }
    // lane k holds weight k (n_used <= subgroup size)
    if (sl < pc.n_used) {
        float inv = pc.norm_w != 0u ? 1.0 / max(wsum, 6.103515625e-5) : 1.0;
        float wv = wsel * inv;
        if (pc.scale != 0.0)
            wv *= pc.scale;
        WT.wts[ob + sl] = wv;
    }
    if (sl == 0u)
        CNT.count[z] = 0u;
}
