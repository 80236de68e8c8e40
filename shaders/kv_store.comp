#version 450
// kv_store: the new token's entries of the MLA cache, and its rotated query.
//   workgroup 0:     latent = RMSNorm(kv[0..kv_lora)) * kv_a_norm, k_rope =
//                    RoPE(kv[kv_lora..]), both written to the cache row of
//                    the token's position (f16 or f32)
//   workgroup 1+h:   q_abs[h][kv_lora..] = RoPE(q[h][nope..])  (q_abs[h][0..kv_lora)
//                    is the absorbed query, written by the k_b matvec)
// RoPE is ggml's NORM mode: adjacent pairs (2i, 2i+1) rotated by the angles
// of the table (cos, sin per position and pair, computed once on the host in
// double, YaRN included).  Rows are padded to RS elements with zeros.
// Grid: x = 1 + n_head, y = token of the batch.
// Decode may wait on q_b's counter and signal the attention's (dep_flag.glsl):
// kv and q are then read coherently (earlier layers' kernels on this compute
// unit read the same buffers).  LL_IN: kv and q are tagged words (sites
// pc.ll_in, pc.ll_q), each polled (dep_flag.glsl).

#define PC_USE_KV_STORE
#include "pc_attn.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = KVS_S_KVF16) const uint KVF16 = 1u;
layout(constant_id = KVS_S_SG) const uint SG = 32u;
const uint WGS = gl_WorkGroupSize.x;

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(set = 0, binding = KVS_B_KV) coherent readonly buffer KvBuf { float kv[]; } KV;
layout(set = 0, binding = KVS_B_NORM) readonly buffer NWBuf { float nw[]; } NW;
layout(set = 0, binding = KVS_B_CACHE) writeonly buffer CacheW { uint w[]; } CW;
layout(set = 0, binding = KVS_B_CACHE) writeonly buffer CacheF { float f[]; } CF;
layout(set = 0, binding = KVS_B_ROPE) readonly buffer RopeBuf { vec2 cs[]; } RT;
layout(set = 0, binding = KVS_B_Q) coherent readonly buffer QBuf { float q[]; } Q;
layout(set = 0, binding = KVS_B_Q_ABS) writeonly buffer QAbsBuf { float q_abs[]; } QABS;
layout(set = 0, binding = KVS_B_PARAMS) readonly buffer Params { uint p[]; } P;
#include "dep_flag.glsl"
#ifdef LL
layout(set = 0, binding = KVS_B_KV) coherent volatile readonly buffer KvLL { uvec2 w[]; } KVL;
layout(set = 0, binding = KVS_B_Q) coherent volatile readonly buffer QLL { uvec2 w[]; } QL;

uint tag_kv, tag_q;
bool ll_failed = false;

float kv_at(uint i)
{
    if (LL_IN == 0u)
        return KV.kv[i];
    uvec2 w;
    LL_POLL2(KVL, i, tag_kv, w, ll_failed);
    return uintBitsToFloat(w.x);
}

float q_at(uint i)
{
    if (LL_IN == 0u)
        return Q.q[i];
    uvec2 w;
    LL_POLL2(QL, i, tag_q, w, ll_failed);
    return uintBitsToFloat(w.x);
}
#else
float kv_at(uint i) { return KV.kv[i]; }
float q_at(uint i) { return Q.q[i]; }
#endif

shared float red[64];
shared float lat[1024];

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

// Element i of the cache row: the normalized latent, the rotated k_rope, or padding.
float row_val(uint kb, uint pos, uint i, float sc)
{
    if (i < pc.kv_lora)
        return lat[i] * sc * NW.nw[pc.nw_off + i];
    uint j = i - pc.kv_lora;
    if (j >= pc.rope)
        return 0.0;
    vec2 c = RT.cs[pos * (pc.rope / 2u) + j / 2u];
    float x0 = kv_at(kb + pc.kv_lora + (j & ~1u)), x1 = kv_at(kb + pc.kv_lora + (j | 1u));
    return (j & 1u) == 0u ? x0 * c.x - x1 * c.y : x0 * c.y + x1 * c.x;
}

void store()
{
    uint z = gl_WorkGroupID.y, tid = gl_LocalInvocationIndex;
    if (z >= P.p[VKP_NTOK])
        return;  // past the batch
    uint pos = P.p[VKP_POS0] + z;
    if (gl_WorkGroupID.x == 0u) {
        uint kb = pc.kv_off + z * pc.kv_z;
        float ss = 0.0;
        for (uint i = tid; i < pc.kv_lora; i += WGS) {
            float v = kv_at(kb + i);
            lat[i] = v;
            ss += v * v;
        }
        float sc = inversesqrt(wg_sum(ss) / float(pc.kv_lora) + pc.eps);
        uint rb = pc.cache_off + pos * pc.RS;
        if (KVF16 == 1u) {
            for (uint i = tid; i < pc.RS / 2u; i += WGS)
                CW.w[rb / 2u + i] = packHalf2x16(vec2(row_val(kb, pos, 2u * i, sc), row_val(kb, pos, 2u * i + 1u, sc)));
        } else {
            for (uint i = tid; i < pc.RS; i += WGS)
                CF.f[rb + i] = row_val(kb, pos, i, sc);
        }
        return;
    }
    uint h = gl_WorkGroupID.x - 1u;
    uint qb = pc.q_off + z * pc.q_z + h * (pc.nope + pc.rope) + pc.nope;
    uint ob = pc.q_abs_off + z * pc.q_abs_z + h * pc.RS + pc.kv_lora;
    for (uint j = tid; j < pc.RS - pc.kv_lora; j += WGS) {
        float v = 0.0;
        if (j < pc.rope) {
            vec2 c = RT.cs[pos * (pc.rope / 2u) + j / 2u];
            float x0 = q_at(qb + (j & ~1u)), x1 = q_at(qb + (j | 1u));
            v = (j & 1u) == 0u ? x0 * c.x - x1 * c.y : x0 * c.y + x1 * c.x;
        }
        QABS.q_abs[ob + j] = v;
    }
}

void main()
{
    if (WAIT == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
#ifdef LL
    tag_kv = LL_TAG(pc.ll_in);
    tag_q = LL_TAG(pc.ll_q);
#endif
    store();
#ifdef LL
    if (ll_failed)
        ll_give_up();
#endif
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
