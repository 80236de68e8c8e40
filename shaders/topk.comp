#version 450
// topk: the K best logits (value descending, lower id first on ties) and the
// logsumexp of a whole row, so the host reads back K candidates instead of
// the vocabulary.  Each workgroup reduces a slice (its max, sum of exp, its
// own top K); the last workgroup to finish (atomic counter) merges them.
// Selection walks the strict order: round k takes the best element worse
// than round k-1's pick, so nothing needs to be marked.

#define PC_USE_TOPK
#include "pc_token.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = TOPK_S_SG) const uint SG = 32u;
const uint WGS = gl_WorkGroupSize.x;

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(set = 0, binding = TOPK_B_LOGITS) readonly buffer LBuf { float l[]; } LG;
layout(set = 0, binding = TOPK_B_CAND_V) coherent buffer CandV { float v[]; } CV;    // [slice][K]
layout(set = 0, binding = TOPK_B_CAND_I) coherent buffer CandI { uint i[]; } CI;     // [slice][K]
layout(set = 0, binding = TOPK_B_MS) coherent buffer MsBuf { vec2 ms[]; } MS;    // [slice] (max, sum)
layout(set = 0, binding = TOPK_B_COUNT) coherent buffer CBuf { uint count[]; } CNT;
layout(set = 0, binding = TOPK_B_OUT_IDS) writeonly buffer OutI { int ids[]; } OI;    // [K]
layout(set = 0, binding = TOPK_B_OUT_VALS) writeonly buffer OutV { float v[]; } OV;    // [K + 1]: values, then logsumexp

layout(set = 0, binding = TOPK_B_PARAMS) readonly buffer Params { uint p[]; } P;

shared float red[64];
shared uint redi[64];
shared bool s_last;

float wg_max(float v)
{
    v = subgroupMax(v);
    barrier();
    if (subgroupElect())
        red[gl_SubgroupID] = v;
    barrier();
    float s = -1.0 / 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        s = max(s, red[i]);
    barrier();
    return s;
}

float wg_sum(float v)
{
    v = subgroupAdd(v);
    barrier();
    if (subgroupElect())
        red[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        s += red[i];
    barrier();
    return s;
}

bool better(float av, uint ai, float bv, uint bi) { return av > bv || (av == bv && ai < bi); }

// The best (value, id) over the workgroup, given each thread's best.
void wg_best(inout float v, inout uint id)
{
    float m = wg_max(v);
    uint c = v == m ? id : 0xffffffffu;
    c = subgroupMin(c);
    if (subgroupElect())
        redi[gl_SubgroupID] = c;
    barrier();
    uint w = 0xffffffffu;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        w = min(w, redi[i]);
    barrier();
    v = m;
    id = w;
}

void main()
{
    uint K = pc.k_in_params != 0u ? min(P.p[VKP_TOPK], 64u) : pc.Kc;
    uint s = gl_WorkGroupID.x, tid = gl_LocalInvocationIndex;
    uint a = s * pc.slice, b = min(a + pc.slice, pc.N);
    float m = -1.0 / 0.0;
    for (uint i = a + tid; i < b; i += WGS)
        m = max(m, LG.l[pc.l_off + i]);
    m = wg_max(m);
    float sum = 0.0;
    for (uint i = a + tid; i < b; i += WGS)
        sum += exp(LG.l[pc.l_off + i] - m);
    sum = wg_sum(sum);
    float pv = 1.0 / 0.0;
    uint pi = 0u;
    for (uint k = 0u; k < K; k++) {
        float bv = -1.0 / 0.0;
        uint bi = 0xffffffffu;
        for (uint i = a + tid; i < b; i += WGS) {
            float v = LG.l[pc.l_off + i];
            if (better(pv, pi, v, i) && better(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        wg_best(bv, bi);
        if (tid == 0u) {
            CV.v[s * K + k] = bv;
            CI.i[s * K + k] = bi;
        }
        pv = bv;
        pi = bi;
    }
    if (tid == 0u)
        MS.ms[s] = vec2(m, sum);

    memoryBarrierBuffer();
    barrier();
    if (tid == 0u)
        s_last = atomicAdd(CNT.count[0], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (!s_last)
        return;
    memoryBarrierBuffer();

    uint ns = gl_NumWorkGroups.x;
    float M = -1.0 / 0.0;
    for (uint i = tid; i < ns; i += WGS)
        M = max(M, MS.ms[i].x);
    M = wg_max(M);
    float L = 0.0;
    for (uint i = tid; i < ns; i += WGS)
        L += MS.ms[i].y * exp(MS.ms[i].x - M);
    L = wg_sum(L);
    pv = 1.0 / 0.0;
    pi = 0u;
    for (uint k = 0u; k < K; k++) {
        float bv = -1.0 / 0.0;
        uint bi = 0xffffffffu;
        for (uint i = tid; i < ns * K; i += WGS) {
            float v = CV.v[i];
            uint id = CI.i[i];
            if (id != 0xffffffffu && better(pv, pi, v, id) && better(v, id, bv, bi)) {
                bv = v;
                bi = id;
            }
        }
        wg_best(bv, bi);
        if (tid == 0u) {
            OI.ids[k] = int(bi);
            OV.v[k] = bv;
        }
        pv = bv;
        pi = bi;
    }
    if (tid == 0u) {
        OV.v[K] = M + log(L);
        CNT.count[0] = 0u;
    }
}
