#version 450
// attn: MLA attention in the absorbed form, one chunk of the sequence for a
// group of HG heads of one query token.  All heads share the cache rows
// ([latent | k_rope], RS elements, f16 or f32), so a workgroup reads each row
// once for HG heads.  It writes the chunk's partial result: the score max m,
// the sum of exp(s - m), and sum_p exp(s_p - m) * latent_p; attn_vb combines
// the chunks.  Splitting the sequence keeps the GPU full at long contexts.
// Grid: x = chunk, y = head group, z = query token (causal: token z sees
// positions < pos0 + z + 1).  Chunking comes from the params buffer; a
// chunk is walked in pieces of CMAX positions with a running max and sum.
// Scores: a subgroup per position, lanes splitting the row (short chunks),
// or a thread per position (long ones).  Values: each thread owns 4 latent
// dimensions (kv_lora <= 4 * WGS).

#define PC_USE_ATTN
#include "pc_attn.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = ATTN_S_HG) const uint HG = 4u;      // heads per workgroup
layout(constant_id = ATTN_S_KVF16) const uint KVF16 = 1u;
layout(constant_id = ATTN_S_RS) const uint RS = 576u;    // cache row stride (multiple of 8)
layout(constant_id = ATTN_S_CMAX) const uint CMAX = 256u;  // longest chunk
layout(constant_id = ATTN_S_SG) const uint SG = 32u;
layout(constant_id = ATTN_S_KQ) const uint KQ = 3u;      // 8-element groups of a row per lane: RS/8/SG rounded up
layout(constant_id = ATTN_S_PU) const uint PU = 2u;      // positions scored together per subgroup
layout(constant_id = ATTN_S_SGMAX) const uint SGMAX = 48u;  // longest chunk scored by subgroups
const uint WGS = gl_WorkGroupSize.x;

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_EXT_control_flow_attributes : enable

layout(set = 0, binding = ATTN_B_Q_ABS) readonly buffer QAbsBuf { vec4 q_abs[]; } QABS;
layout(set = 0, binding = ATTN_B_CACHE) readonly buffer Cache4 { uvec4 w[]; } C4;
layout(set = 0, binding = ATTN_B_CACHE) readonly buffer CacheF4 { vec4 f[]; } CF4;
layout(set = 0, binding = ATTN_B_CACHE) readonly buffer CacheW { uint w[]; } CW;
layout(set = 0, binding = ATTN_B_PART) writeonly buffer PartBuf { float part[]; } PT;
layout(set = 0, binding = ATTN_B_PARAMS) readonly buffer Params { uint p[]; } P;

shared vec4 qs[HG * (RS / 4u)];
shared float sc[HG * CMAX];
shared float redh[64 * HG];
shared float s_m[HG], s_l[HG], s_f[HG];

// Eight elements 8i..8i+7 of cache row `row`.
void row8(uint row, uint i, out vec4 a, out vec4 b)
{
    if (KVF16 == 1u) {
        uvec4 w = C4.w[(pc.cache_off + row * RS) / 8u + i];
        a = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
        b = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
    } else {
        uint base = (pc.cache_off + row * RS) / 4u + 2u * i;
        a = CF4.f[base];
        b = CF4.f[base + 1u];
    }
}

vec4 row4(uint row, uint i)
{
    if (KVF16 == 1u) {
        uint base = (pc.cache_off + row * RS) / 2u + 2u * i;
        return vec4(unpackHalf2x16(CW.w[base]), unpackHalf2x16(CW.w[base + 1u]));
    }
    return CF4.f[(pc.cache_off + row * RS) / 4u + i];
}

void main()
{
    uint c = gl_WorkGroupID.x, h0 = gl_WorkGroupID.y * HG, z = gl_WorkGroupID.z;
    uint tid = gl_LocalInvocationIndex;
    if (z >= P.p[VKP_NTOK])
        return;  // past the batch (prefill grids are recorded for the largest batch)
    uint n_kv = P.p[VKP_POS0] + z + 1u, clen = P.p[pc.chunk_word];
    uint start = c * clen, end = min(start + clen, n_kv);
    uint pstride = pc.dlat + VK_PART_HDR;

    if (start >= end) {
        // Past this token's causal limit: an empty partial.
        for (uint h = 0u; h < HG && h0 + h < pc.n_head; h++) {
            uint pb = pc.part_off + ((z * pc.cmax_chunks + c) * pc.n_head + h0 + h) * pstride;
            for (uint i = tid; i < pstride; i += WGS)
                PT.part[pb + i] = i == 0u ? -1.0 / 0.0 : 0.0;
        }
        return;
    }

    for (uint i = tid; i < HG * (RS / 4u); i += WGS) {
        uint h = i / (RS / 4u);
        qs[i] = h0 + h < pc.n_head ? QABS.q_abs[(pc.q_abs_off + z * pc.q_abs_z + (h0 + h) * RS) / 4u + i % (RS / 4u)] : vec4(0.0);
    }
    if (tid < HG) {
        s_m[tid] = -1.0 / 0.0;
        s_l[tid] = 0.0;
    }
    barrier();

    // Each thread owns latent dimensions 4*tid..4*tid+3 (dlat <= 4 * WGS).
    vec4 o[HG];
    [[unroll]] for (uint h = 0u; h < HG; h++)
        o[h] = vec4(0.0);

    // Short chunks (decode at short context): a subgroup per position,
    // lanes splitting the row, this lane's share of the HG queries in
    // registers (8-element groups i = lane + k*SG of the row).  Long chunks
    // (prefill, long context): a thread per position -- measured faster
    // there (gpu/PERF.md run 6).
    bool by_sg = clen <= SGMAX;
    uint lane = gl_SubgroupInvocationID, sgid = gl_SubgroupID, nsg = gl_NumSubgroups;
    vec4 qlo[KQ * HG], qhi[KQ * HG];
    if (by_sg)
        [[unroll]] for (uint k = 0u; k < KQ; k++) {
            uint i = min(lane + k * SG, RS / 8u - 1u);
            [[unroll]] for (uint h = 0u; h < HG; h++) {
                qlo[k * HG + h] = qs[h * (RS / 4u) + 2u * i];
                qhi[k * HG + h] = qs[h * (RS / 4u) + 2u * i + 1u];
            }
        }

    // The chunk in pieces of CMAX positions, with a running max and sum
    // (online softmax), so a chunk may be any length.
    for (uint sub = start; sub < end; sub += CMAX) {
        uint send = min(sub + CMAX, end), n = send - sub;
        // Scores: a subgroup per position (lanes split the row, one
        // reduction per head), PU positions' loads issued together; or one
        // position per thread, all HG heads at once.
        if (!by_sg)
            for (uint p = sub + tid; p < send; p += WGS) {
                float acc[HG];
                [[unroll]] for (uint h = 0u; h < HG; h++)
                    acc[h] = 0.0;
                for (uint i = 0u; i < RS / 8u; i++) {
                    vec4 a, b;
                    row8(p, i, a, b);
                    [[unroll]] for (uint h = 0u; h < HG; h++)
                        acc[h] += dot(qs[h * (RS / 4u) + 2u * i], a) + dot(qs[h * (RS / 4u) + 2u * i + 1u], b);
                }
                [[unroll]] for (uint h = 0u; h < HG; h++)
                    sc[h * CMAX + p - sub] = acc[h] * pc.kq_scale;
            }
        for (uint p0 = sub + sgid * PU; by_sg && p0 < send; p0 += nsg * PU) {
            vec4 ra[PU * KQ], rb[PU * KQ];
            [[unroll]] for (uint u = 0u; u < PU; u++)
                [[unroll]] for (uint k = 0u; k < KQ; k++)
                    row8(min(p0 + u, send - 1u), min(lane + k * SG, RS / 8u - 1u), ra[u * KQ + k], rb[u * KQ + k]);
            [[unroll]] for (uint u = 0u; u < PU; u++) {
                float acc[HG];
                [[unroll]] for (uint h = 0u; h < HG; h++)
                    acc[h] = 0.0;
                [[unroll]] for (uint k = 0u; k < KQ; k++)
                    if (lane + k * SG < RS / 8u)
                        [[unroll]] for (uint h = 0u; h < HG; h++)
                            acc[h] += dot(qlo[k * HG + h], ra[u * KQ + k]) + dot(qhi[k * HG + h], rb[u * KQ + k]);
                [[unroll]] for (uint h = 0u; h < HG; h++) {
                    float v = subgroupAdd(acc[h]);
                    if (lane == 0u && p0 + u < send)
                        sc[h * CMAX + p0 + u - sub] = v * pc.kq_scale;
                }
            }
        }
        barrier();
        // Softmax pieces of all HG heads in one pass: subgroup reductions,
        // then one exchange through shared memory.
        float mh[HG], lh[HG];
        [[unroll]] for (uint h = 0u; h < HG; h++)
            mh[h] = -1.0 / 0.0;
        for (uint p = tid; p < n; p += WGS)
            [[unroll]] for (uint h = 0u; h < HG; h++)
                mh[h] = max(mh[h], sc[h * CMAX + p]);
        [[unroll]] for (uint h = 0u; h < HG; h++)
            mh[h] = subgroupMax(mh[h]);
        if (subgroupElect())
            [[unroll]] for (uint h = 0u; h < HG; h++)
                redh[gl_SubgroupID * HG + h] = mh[h];
        barrier();
        [[unroll]] for (uint h = 0u; h < HG; h++) {
            float m = s_m[h];
            for (uint i = 0u; i < gl_NumSubgroups; i++)
                m = max(m, redh[i * HG + h]);
            mh[h] = m;
            lh[h] = 0.0;
        }
        barrier();
        for (uint p = tid; p < n; p += WGS)
            [[unroll]] for (uint h = 0u; h < HG; h++) {
                float e = exp(sc[h * CMAX + p] - mh[h]);
                sc[h * CMAX + p] = e;
                lh[h] += e;
            }
        [[unroll]] for (uint h = 0u; h < HG; h++)
            lh[h] = subgroupAdd(lh[h]);
        if (subgroupElect())
            [[unroll]] for (uint h = 0u; h < HG; h++)
                redh[gl_SubgroupID * HG + h] = lh[h];
        barrier();
        if (tid < HG) {
            float l = 0.0;
            for (uint i = 0u; i < gl_NumSubgroups; i++)
                l += redh[i * HG + tid];
            float f = exp(s_m[tid] - mh[tid]);   // rescales what earlier pieces summed
            s_f[tid] = f;
            s_l[tid] = s_l[tid] * f + l;
            s_m[tid] = mh[tid];
        }
        barrier();
        if (4u * tid < pc.dlat) {
            [[unroll]] for (uint h = 0u; h < HG; h++)
                o[h] *= s_f[h];
            // eight positions' loads issued together (the loop bound is
            // runtime, so the compiler would otherwise wait on each load)
            uint p = sub;
            for (; p + 8u <= send; p += 8u) {
                vec4 v[8];
                [[unroll]] for (uint j = 0u; j < 8u; j++)
                    v[j] = row4(p + j, tid);
                [[unroll]] for (uint j = 0u; j < 8u; j++)
                    [[unroll]] for (uint h = 0u; h < HG; h++)
                        o[h] += sc[h * CMAX + p + j - sub] * v[j];
            }
            for (; p < send; p++) {
                vec4 v = row4(p, tid);
                [[unroll]] for (uint h = 0u; h < HG; h++)
                    o[h] += sc[h * CMAX + p - sub] * v;
            }
        }
        barrier();
    }

    if (4u * tid < pc.dlat)
        [[unroll]] for (uint h = 0u; h < HG; h++)
            if (h0 + h < pc.n_head) {
                uint pb = pc.part_off + ((z * pc.cmax_chunks + c) * pc.n_head + h0 + h) * pstride;
                PT.part[pb + VK_PART_HDR + 4u * tid] = o[h].x;
                PT.part[pb + VK_PART_HDR + 1u + 4u * tid] = o[h].y;
                PT.part[pb + VK_PART_HDR + 2u + 4u * tid] = o[h].z;
                PT.part[pb + VK_PART_HDR + 3u + 4u * tid] = o[h].w;
            }
    if (tid == 0u)
        for (uint h = 0u; h < HG && h0 + h < pc.n_head; h++) {
            uint pb = pc.part_off + ((z * pc.cmax_chunks + c) * pc.n_head + h0 + h) * pstride;
            PT.part[pb] = s_m[h];
            PT.part[pb + 1u] = s_l[h];
        }
}
