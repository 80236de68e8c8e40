#version 450
// attn_combine: a prefill batch's attention output in latent space, one
// (head, token) per workgroup: the chunk partials (m_c, l_c, o_c) of the
// attention kernel combine into
//   o_lat[z][h][d] = sum_c e^(m_c - M) o_c[d] / sum_c e^(m_c - M) l_c,
// written for a batched-head mat-mat (v_b per head on tensor cores) instead
// of attn_vb's per-(token, head) matvec.  Empty chunks (past the causal
// limit) carry m = -inf, l = 0 and weigh nothing.
// Grid: x = head, z = query token.

#define PC_USE_ATTN_COMBINE
#include "pc_attn.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = COMBINE_S_CCAP) const uint CCAP = 64u;   // chunk capacity per (token, head)
const uint WGS = gl_WorkGroupSize.x;

layout(set = 0, binding = COMBINE_B_PART) readonly buffer PartBuf { float part[]; } PT;
layout(set = 0, binding = COMBINE_B_O) writeonly buffer OBuf { float o[]; } O;
layout(set = 0, binding = COMBINE_B_PARAMS) readonly buffer Params { uint p[]; } P;

shared float cw[CCAP];
shared float s_invl;

void main()
{
    uint h = gl_WorkGroupID.x, z = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
    if (z >= P.p[VKP_NTOK])
        return;  // past the batch
    uint n_chunks = min(P.p[VKP_NCHUNK_PF], CCAP);
    uint pstride = pc.K + VK_PART_HDR;
    // partials chunk-major: (token, chunk, head) rows
    uint pb = pc.part_off + (z * CCAP * pc.part_heads + h) * pstride, cs = pc.part_heads * pstride;
    // A prefill batch has a handful of chunks: one thread weighs them all.
    if (tid == 0u) {
        float M = -1.0 / 0.0;
        for (uint c = 0u; c < n_chunks; c++)
            M = max(M, PT.part[pb + c * cs]);
        float L = 0.0;
        for (uint c = 0u; c < n_chunks; c++) {
            float e = exp(PT.part[pb + c * cs] - M);
            cw[c] = e;
            L += e * PT.part[pb + c * cs + 1u];
        }
        s_invl = 1.0 / L;
    }
    barrier();
    float invL = s_invl;
    uint ob = pc.o_off + z * pc.o_z + h * pc.o_h;
    for (uint d = tid; d < pc.K; d += WGS) {
        float acc = 0.0;
        for (uint c = 0u; c < n_chunks; c++)
            if (cw[c] != 0.0)  // uniform: empty chunks are not read
                acc += cw[c] * PT.part[pb + c * cs + VK_PART_HDR + d];
        O.o[ob + d] = acc * invL;
    }
}
