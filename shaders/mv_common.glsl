// mv_common.glsl: the matrix-vector machinery shared by mv, mv_glu,
// mv_moe_down, router and attn_vb.
//
// A workgroup is split into teams of TEAM threads (TEAM <= subgroup size,
// a power of two, so a team lives inside one subgroup and reduces with
// shuffles).  Each team computes NR rows; each thread walks the row in units
// (unit_of(t) contiguous elements) strided by TEAM.  The input vector sits in
// shared memory (`xs`, optionally RMS-normalized on the way in) or is read
// from global memory when it is too long for shared memory.
//
// The including shader declares: spec constants WGS (local_size_x_id 0),
// SG, TEAM, NR, KSH (shared floats) and binding 1 `X` (float x[]).

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(set = 0, binding = 1) readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = 1) readonly buffer XBuf4 { vec4 x[]; } X4;

shared vec4 xs[KSH / 4];
shared float red[64];

// Thread index with subgroups laid out contiguously (teams never straddle one).
uint lin_id() { return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; }

// Sum over the workgroup; every thread gets the result.
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

float team_sum(float v)
{
    [[unroll]] for (uint o = TEAM >> 1; o > 0u; o >>= 1)
        v += subgroupShuffleXor(v, o);
    return v;
}

// Element i of x at xb (0 past k: rows of float types are zero-padded).
float x_at(uint xb, uint i, uint k) { return i < k ? X.x[xb + i] : 0.0; }

// Copies x[xb .. xb+k) into xs (zero-padded to kp).  With nw_ok, scales it
// by 1/sqrt(mean(x^2) + eps) and multiplies by the norm weight `nw`
// (the RMSNorm of the model, recomputed in every workgroup instead of a
// separate pass: the vector is a few KB and sits in L2).
void stage_x(uint xb, uint k, uint kp)
{
    for (uint i = gl_LocalInvocationIndex; i < kp / 4u; i += WGS) {
        uint e = 4u * i;
        xs[i] = vec4(x_at(xb, e, k), x_at(xb, e + 1u, k), x_at(xb, e + 2u, k), x_at(xb, e + 3u, k));
    }
    barrier();
}

// x staged and normalized; returns nothing, xs holds rmsnorm(x) * nw.
#define STAGE_X_NORM(xb, k, kp, NWBUF, nwoff, eps)                                        \
    {                                                                                     \
        float ss_ = 0.0;                                                                  \
        for (uint i_ = gl_LocalInvocationIndex; i_ < (kp) / 4u; i_ += WGS) {              \
            uint e_ = 4u * i_;                                                            \
            vec4 v_ = vec4(x_at(xb, e_, k), x_at(xb, e_ + 1u, k), x_at(xb, e_ + 2u, k),   \
                           x_at(xb, e_ + 3u, k));                                         \
            xs[i_] = v_;                                                                  \
            ss_ += dot(v_, v_);                                                           \
        }                                                                                 \
        float sc_ = inversesqrt(wg_sum(ss_) / float(k) + (eps));                          \
        for (uint i_ = gl_LocalInvocationIndex; i_ < (kp) / 4u; i_ += WGS) {              \
            uint e_ = 4u * i_;                                                            \
            vec4 w_ = vec4(e_ < (k) ? NWBUF[(nwoff) + e_] : 0.0,                          \
                           e_ + 1u < (k) ? NWBUF[(nwoff) + e_ + 1u] : 0.0,                \
                           e_ + 2u < (k) ? NWBUF[(nwoff) + e_ + 2u] : 0.0,                \
                           e_ + 3u < (k) ? NWBUF[(nwoff) + e_ + 3u] : 0.0);               \
            xs[i_] = xs[i_] * sc_ * w_;                                                   \
        }                                                                                 \
        barrier();                                                                        \
    }

// Group i (4 elements) of the input: shared, or global when XG.
vec4 xin(bool xg, uint xb, uint i, uint k)
{
    if (!xg)
        return xs[i];
    uint e = 4u * i;
    if (e + 4u <= k && (xb & 3u) == 0u)
        return X4.x[(xb >> 2) + i];
    return vec4(x_at(xb, e, k), x_at(xb, e + 1u, k), x_at(xb, e + 2u, k), x_at(xb, e + 3u, k));
}

// Partial dot of one row (block row_blk0 is its first block) with the input,
// over this thread's units; the team sums the partials afterwards.
float row_partial(uint t, uint s, uint row_blk0, uint hbase, uint lane, uint kp, bool xg, uint xb, uint k)
{
    uint unit = unit_of(t), upb = blk_of(t) / unit, gpu = unit / 4u;
    uint nunits = kp / unit;
    float acc = 0.0;
    for (uint u = lane; u < nunits; u += TEAM) {
        uint bi = u / upb, g0 = (u % upb) * gpu;
        for (uint g = 0u; g < gpu; g++)
            acc += dot(deq4(t, s, row_blk0 + bi, g0 + g, hbase), xin(xg, xb, u * gpu + g, k));
    }
    return acc;
}
