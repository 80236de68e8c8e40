#version 450
// attnx_vb: attn_vb on the x-stationary machinery (mvx_common.glsl): the
// workgroup's staging step is the combine of the head's chunk partials,
// o = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c, written into the staged
// input; then out[z][h*v_head + r] = v_b[h][r] . o, R rows per pass with the
// first pass's weights in flight during the combine.
// Grid: x = row groups of v_head, y = head, z = query token.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 2u;
layout(constant_id = 2) const uint TEAM = 16u;
layout(constant_id = 3) const uint J = 1u;
layout(constant_id = 4) const uint R = 4u;
layout(constant_id = 5) const uint SG = 32u;
layout(constant_id = 7) const uint CCAP = 64u;   // chunk capacity per head (partials)
layout(constant_id = 8) const uint KSH = 512u;
layout(constant_id = 10) const uint XREG = 1u;
layout(constant_id = 11) const uint XRN = 8u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "part_layout.glsl"
#include "mvx_common.glsl"

// binding 1 (X in mvx_common) holds the partials
layout(set = 0, binding = 2) writeonly buffer OBuf { float o[]; } O;
layout(set = 0, binding = 4) readonly buffer Params { uint p[]; } P;
#include "dep_flag.glsl"

layout(push_constant) uniform PC {
    uint K, Kp, N;        // K = kv_lora, N = v_head
    uint hbase, mat_blocks;
    uint part_off, n_head, cmax_chunks;
    uint o_off, o_z;
    uint nchunk_word;     // params word holding the chunk count (decode / prefill)
    uint passes;
    uint dep_signal, dep_wait, dep_n;  // SIGNAL / WAIT (dep_flag.glsl)
} pc;

shared float cw[CCAP];

void vb()
{
    uint h = gl_WorkGroupID.y, z = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
    if (z >= P.p[1])
        return;  // past the batch
    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT, mblk0 = h * pc.mat_blocks;
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;
    load_rows(0u, mblk0, bpr, pc.hbase, wrow0 + team * R, pc.N, lane, nunits, 0u);
    // the first rows' weights are in flight while the partials are awaited
    if (WAIT == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));

    // The chunks' weights e^(m_c - M) / L: one chunk per thread, two
    // workgroup reductions (max, then sum).
    uint n_chunks = P.p[pc.nchunk_word];
    uint pstride = pc.K + PART_HDR;
    // partials chunk-major: (token, chunk, head) rows
    uint pb = pc.part_off + (z * pc.cmax_chunks * pc.n_head + h) * pstride, cs = pc.n_head * pstride;
    float mx = -1.0 / 0.0;
    for (uint c = tid; c < n_chunks; c += WGS)
        mx = max(mx, X.x[pb + c * cs]);
    mx = subgroupMax(mx);
    if (subgroupElect())
        red[gl_SubgroupID] = mx;
    barrier();
    float M = -1.0 / 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        M = max(M, red[i]);
    float ls = 0.0;
    for (uint c = tid; c < n_chunks; c += WGS) {
        float e = exp(X.x[pb + c * cs] - M);
        cw[c] = e;
        ls += e * X.x[pb + c * cs + 1u];
    }
    ls = subgroupAdd(ls);
    barrier();
    if (subgroupElect())
        red[gl_SubgroupID] = ls;
    barrier();
    float L = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        L += red[i];
    float invL = 1.0 / L;

    // Staging: o = sum_c w_c o_c (16 chunks' 16-byte loads in flight: the
    // combine is a chain of L2 round trips), zeros past K.
    for (uint v = tid; v < J * TEAM * GPU; v += WGS) {
        vec4 acc = vec4(0.0);
        if (4u * v < pc.K)
            for (uint c0 = 0u; c0 < n_chunks; c0 += 16u) {
                vec4 t[16];
                [[unroll]] for (uint u = 0u; u < 16u; u++)
                    t[u] = X4.x[(pb + min(c0 + u, n_chunks - 1u) * cs + PART_HDR) / 4u + v];
                [[unroll]] for (uint u = 0u; u < 16u; u++)
                    if (c0 + u < n_chunks)
                        acc += cw[c0 + u] * t[u];
            }
        x_put(v, acc * invL);
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
            if (lane == 0u && row0 + r < pc.N)
                O.o[pc.o_off + z * pc.o_z + h * pc.N + row0 + r] = v;
        }
    }
}

void main()
{
    vb();
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
