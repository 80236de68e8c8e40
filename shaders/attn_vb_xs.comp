#version 450
// attn_vb_xs: attn_vb on the x-stationary machinery (mv_xs_common.glsl): the
// workgroup's staging step is the combine of the head's chunk partials,
// o = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c, written into the staged
// input; then out[z][h*v_head + r] = v_b[h][r] . o, R rows per pass with the
// first pass's weights in flight during the combine.
// Grid: x = row groups of v_head, y = head, z = query token.

#define PC_USE_ATTN_VB
#include "pc_attn.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = AVB_S_CCAP) const uint CCAP = 64u;   // chunk capacity per head (partials)
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "dep_flag.glsl"
#include "mv_xs_common.glsl"

// binding 1 (X in mv_xs_common) holds the partials
layout(set = 0, binding = AVB_B_O) writeonly buffer OBuf { float o[]; } O;
layout(set = 0, binding = AVB_B_PARAMS) readonly buffer Params { uint p[]; } P;

#include "chunk_combine.glsl"

void vb()
{
    uint h = gl_WorkGroupID.y, z = gl_WorkGroupID.z;
    if (z >= P.p[VKP_NTOK])
        return;  // past the batch
    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT, mblk0 = h * pc.mat_blocks;
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;
    load_rows(0u, mblk0, bpr, pc.hbase, wrow0 + team * R, pc.N, lane, nunits, 0u);
    // the first rows' weights are in flight while the partials are awaited
    if (WAIT == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));

    // the chunks' weights (chunk_combine.glsl)
    uint n_chunks = P.p[VKP_NCHUNK];
    uint pstride = pc.K + VK_PART_HDR;
    // partials chunk-major: (token, chunk, head) rows
    uint pb = pc.part_off + (z * pc.cmax_chunks * pc.part_heads + h) * pstride, cs = pc.part_heads * pstride;
    float invL = chunk_weights(pb, cs, n_chunks);

    // Staging: o = sum_c w_c o_c (16 chunks' 16-byte loads in flight: the
    // combine is a chain of L2 round trips), zeros past K; x_stage's loop
    // (whole 8-lane clusters where the -DIDOT build quantizes o).
    iq_fill();
    for (uint v = x_first(); v < XEND; v += WGS) {
        vec4 acc = vec4(0.0);
        if (4u * v < pc.K)
            for (uint c0 = 0u; c0 < n_chunks; c0 += 16u) {
                vec4 t[16];
                [[unroll]] for (uint u = 0u; u < 16u; u++)
                    t[u] = X4.x[(pb + min(c0 + u, n_chunks - 1u) * cs + VK_PART_HDR) / 4u + v];
                [[unroll]] for (uint u = 0u; u < 16u; u++)
                    if (c0 + u < n_chunks)
                        acc += cw[c0 + u] * t[u];
            }
        x_stage(v, acc * invL);
    }
    barrier();
    load_xr(lane);

    for (uint p = 0u; p < pc.passes; p++) {
        if (wrow0 + p * NT * R >= pc.N)
            break;  // past the matrix (the last workgroup; uniform)
        uint row0 = wrow0 + (p * NT + team) * R;
        if (p > 0u)
            load_rows(0u, mblk0, bpr, pc.hbase, row0, pc.N, lane, nunits, 0u);
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float v = team_sum(row_dot(mblk0, bpr, row0 + r, pc.N, lane, nunits, 0u, r));
            if (lane == 0u && row0 + r < pc.N) {
                O.o[pc.o_off + z * pc.o_z + h * pc.N + row0 + r] = v;
            }
        }
    }
}

void main()
{
    vb();
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
