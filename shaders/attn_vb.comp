#version 450
// attn_vb: combines a head's chunk partials into its attention output in
// latent space, o = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c, and
// projects it through v_b of that head: out[z][h*v_head + r] = v_b[h][r] . o.
// Grid: x = row groups of v_head, y = head, z = query token.

#define PC_USE_ATTN_VB
#include "pc_attn.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = AVB_S_KSH) const uint KSH = 512u;
layout(constant_id = AVB_S_UPT) const uint UPT = 4u;
layout(constant_id = AVB_S_CCAP) const uint CCAP = 64u;   // chunk capacity per head (partials)
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "mv_common.glsl"

// binding 1 (X in mv_common) holds the partials
layout(set = 0, binding = AVB_B_O) writeonly buffer OBuf { float o[]; } O;
layout(set = 0, binding = AVB_B_PARAMS) readonly buffer Params { uint p[]; } P;

shared float red[64];
#include "chunk_combine.glsl"

void main()
{
    iq_init();
    uint h = gl_WorkGroupID.y, z = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
    if (z >= P.p[VKP_NTOK])
        return;  // past the batch
    uint n_chunks = P.p[VKP_NCHUNK];
    uint pstride = pc.K + VK_PART_HDR;
    // partials chunk-major: (token, chunk, head) rows
    uint pb = pc.part_off + (z * pc.cmax_chunks * pc.part_heads + h) * pstride, cs = pc.part_heads * pstride;
    // the chunks' weights (chunk_combine.glsl)
    float invL = chunk_weights(pb, cs, n_chunks);
    // o = sum_c w_c o_c, eight chunks' loads in flight per thread
    for (uint d4 = tid; d4 < pc.Kp / 4u; d4 += WGS) {
        vec4 acc = vec4(0.0);
        if (4u * d4 < pc.K)
            for (uint c0 = 0u; c0 < n_chunks; c0 += 8u) {
                vec4 v[8];
                [[unroll]] for (uint u = 0u; u < 8u; u++) {
                    uint b = pb + min(c0 + u, n_chunks - 1u) * cs + VK_PART_HDR + 4u * d4;
                    v[u] = vec4(X.x[b], X.x[b + 1u], X.x[b + 2u], X.x[b + 3u]);
                }
                [[unroll]] for (uint u = 0u; u < 8u; u++)
                    if (c0 + u < n_chunks)
                        acc += cw[c0 + u] * v[u];
            }
        xs[d4] = acc * invL;
    }
    barrier();

    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE);
    uint row0 = (gl_WorkGroupID.x * (WGS / TEAM) + team) * NR;
    uint nv = row0 < pc.N ? min(NR, pc.N - row0) : 1u;
    uint r0 = min(row0, pc.N - 1u);
    float acc[NR];
    [[unroll]] for (uint r = 0u; r < NR; r++)
        acc[r] = 0.0;
    float xx = 0.0;
    team_rows(TYPE, 0u, h * pc.mat_blocks + r0 * bpr, bpr, nv, pc.hbase, lane, pc.Kp / unit_of(TYPE),
              xsrc(false, 0u, pc.K, false, 0u), acc, xx);
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        float v = team_sum(acc[r]);
        if (lane == 0u && row0 + r < pc.N)
            O.o[pc.o_off + z * pc.o_z + h * pc.N + row0 + r] = v;
    }
}
