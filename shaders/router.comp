#version 450
// router: the MoE gate of one token in one dispatch.  Every workgroup
// computes some router logits (RMSNorm(x) * nw fused); the last workgroup to
// finish (an atomic counter) turns them into probabilities (sigmoid or
// softmax), picks the top n_used of prob + bias (the bias only selects),
// normalizes and scales the chosen probabilities, and writes expert ids and
// weights for the expert kernels.  It resets the counter for the next use.
// Grid: x = row groups, y = token (prefill), each token with its own counter.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 0u;
layout(constant_id = 2) const uint TEAM = 16u;
layout(constant_id = 3) const uint NR = 2u;
layout(constant_id = 4) const uint SG = 32u;
layout(constant_id = 5) const uint KSH = 2048u;
const uint WGS = gl_WorkGroupSize.x;
const uint EMAX = 512u;      // experts a router can have

#include "quant.glsl"
#include "mv_common.glsl"

layout(set = 0, binding = 2) coherent buffer LBuf { float logit[]; } L;
layout(set = 0, binding = 3) readonly buffer NWBuf { float nw[]; } NW;
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

shared float prob[EMAX];
shared float score[EMAX];
shared bool s_last;
shared uint s_cand[32];     // per subgroup (WGS / subgroup size <= 32)
shared uint s_choice[32];   // the experts chosen so far (n_used <= 32)

void main()
{
    uint z = gl_WorkGroupID.y;
    if (pc.check_batch != 0u && z >= P.p[1])
        return;
    uint xb = pc.x_off + z * pc.x_z;
    STAGE_X_NORM(xb, pc.K, pc.Kp, NW.nw, pc.nw_off, pc.eps)

    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE);
    uint row0 = (gl_WorkGroupID.x * (WGS / TEAM) + team) * NR;
    uint lb = pc.l_off + z * pc.N;
    for (uint r = 0u; r < NR; r++) {
        uint row = min(row0 + r, pc.N - 1u);
        float acc = team_sum(row_partial(TYPE, 0u, row * bpr, pc.hbase, lane, pc.Kp, false, xb, pc.K));
        if (lane == 0u && row0 + r < pc.N)
            L.logit[lb + row] = acc;
    }
    // Publish the logits, then count this workgroup in.
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        s_last = atomicAdd(CNT.count[z], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (!s_last)
        return;
    memoryBarrierBuffer();

    uint tid = gl_LocalInvocationIndex;
    float mx = -1.0 / 0.0;
    for (uint e = tid; e < pc.N; e += WGS)
        mx = max(mx, L.logit[lb + e]);
    mx = wg_max(mx);
    float se = 0.0;
    for (uint e = tid; e < pc.N; e += WGS) {
        float l = L.logit[lb + e];
        float p = pc.gating == 2u ? 1.0 / (1.0 + exp(-l)) : exp(l - mx);
        prob[e] = p;
        se += p;
    }
    se = wg_sum(se);
    for (uint e = tid; e < pc.N; e += WGS) {
        if (pc.gating != 2u)
            prob[e] /= se;
        score[e] = prob[e] + (pc.has_bias != 0u ? B.bias[pc.bias_off + e] : 0.0);
    }
    barrier();
    // Top n_used by score, ties to the lower expert id.
    for (uint k = 0u; k < pc.n_used; k++) {
        float best = -1.0 / 0.0;
        uint bi = 0xffffffffu;
        for (uint e = tid; e < pc.N; e += WGS)
            if (score[e] > best) {
                best = score[e];
                bi = e;
            }
        float m = wg_max(best);
        uint cand = best == m ? bi : 0xffffffffu;
        cand = subgroupMin(cand);
        if (subgroupElect())
            s_cand[gl_SubgroupID] = cand;
        barrier();
        if (tid == 0u) {
            uint w = 0xffffffffu;
            for (uint i = 0u; i < gl_NumSubgroups; i++)
                w = min(w, s_cand[i]);
            s_choice[k] = w;
            score[w] = -1.0 / 0.0;
            ID.ids[pc.out_off + z * pc.n_used + k] = int(w);
        }
        barrier();
    }
    if (tid == 0u) {
        float sum = 0.0;
        for (uint k = 0u; k < pc.n_used; k++)
            sum += prob[s_choice[k]];
        float inv = pc.norm_w != 0u ? 1.0 / max(sum, 6.103515625e-5) : 1.0;
        for (uint k = 0u; k < pc.n_used; k++) {
            float w = prob[s_choice[k]] * inv;
            if (pc.scale != 0.0)
                w *= pc.scale;
            WT.wts[pc.out_off + z * pc.n_used + k] = w;
        }
        CNT.count[z] = 0u;
    }
}
