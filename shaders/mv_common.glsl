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
// SG, TEAM, NR, UPT (units per thread: ceil(units per row / TEAM)), KSH
// (shared floats) and binding 1 `X` (float x[]).
//
// team_rows() is the fast path: each thread first issues the loads of all
// its UPT units of all NR rows (fully unrolled, so 8-16 independent 16-byte
// loads are in flight per thread), then computes; each input group is read
// once and used for the NR rows.

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

// Q4_0, one block (a unit): 16 bytes of nibbles as one 16-byte load;
// sum_i d*(q_i - 8)*x_i = d*(sum q_i x_i - 8 sum x_i), nibbles to floats four
// at a time (unpackUnorm4x8 gives q/255; the 255 is folded in at the end).
float q4_0_unit(uint s, uint blk, uint hbase, bool xg, uint xb, uint xv, uint k)
{
    uvec4 q = W4[s].w[blk];
    float d = head_half(s, hbase + 2u * blk);
    vec4 a = vec4(0.0), xt = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        vec4 xl = xin(xg, xb, xv + j, k), xh = xin(xg, xb, xv + 4u + j, k);
        a += unpackUnorm4x8(q[j] & 0x0f0f0f0fu) * xl + unpackUnorm4x8((q[j] >> 4) & 0x0f0f0f0fu) * xh;
        xt += xl + xh;
    }
    return d * (255.0 * (a.x + a.y + a.z + a.w) - 8.0 * (xt.x + xt.y + xt.z + xt.w));
}

// Q6_K, one unit of 32 elements (half h, quarter j of a 256-block): the
// 32 low-bit bytes and 32 high-bit bytes as 16-byte loads; two scales.
float q6_k_unit(uint s, uint blk, uint sub, uint hbase, bool xg, uint xb, uint xv, uint k)
{
    uint b4 = blk * 13u;                 // 208-byte body = 13 uvec4
    uint h = sub >> 2, j = sub & 3u;
    uvec4 l0 = W4[s].w[b4 + 4u * h + 2u * (j & 1u)], l1 = W4[s].w[b4 + 4u * h + 2u * (j & 1u) + 1u];
    uvec4 h0 = W4[s].w[b4 + 8u + 2u * h], h1 = W4[s].w[b4 + 8u + 2u * h + 1u];
    uint kk = 8u * h + 2u * j;           // scale index of the first 16 elements
    uint sw = W[s].w[blk * 52u + 48u + (kk >> 2)];
    float sc0 = float(int(sw << (24u - 8u * (kk & 3u))) >> 24);
    float sc1 = float(int(sw << (16u - 8u * (kk & 3u))) >> 24);
    float d = head_half(s, hbase + 2u * blk);
    uint sh = 2u * j, nsh = (j >> 1) * 4u;
    vec4 a0 = vec4(0.0), a1 = vec4(0.0), x0 = vec4(0.0), x1 = vec4(0.0);
    [[unroll]] for (uint g = 0u; g < 8u; g++) {
        uint lw = g < 4u ? l0[g] : l1[g - 4u];
        uint hw = g < 4u ? h0[g] : h1[g - 4u];
        uint qb = ((lw >> nsh) & 0x0f0f0f0fu) | (((hw >> sh) & 0x03030303u) << 4);
        vec4 xv4 = xin(xg, xb, xv + g, k);
        if (g < 4u) {
            a0 += unpackUnorm4x8(qb) * xv4;
            x0 += xv4;
        } else {
            a1 += unpackUnorm4x8(qb) * xv4;
            x1 += xv4;
        }
    }
    float s0 = 255.0 * (a0.x + a0.y + a0.z + a0.w) - 32.0 * (x0.x + x0.y + x0.z + x0.w);
    float s1 = 255.0 * (a1.x + a1.y + a1.z + a1.w) - 32.0 * (x1.x + x1.y + x1.z + x1.w);
    return d * (sc0 * s0 + sc1 * s1);
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
        if (t == T_Q4_0)
            acc += q4_0_unit(s, row_blk0 + bi, hbase, xg, xb, u * gpu, k);
        else if (t == T_Q6_K)
            acc += q6_k_unit(s, row_blk0 + bi, u % upb, hbase, xg, xb, u * gpu, k);
        else
            for (uint g = 0u; g < gpu; g++)
                acc += dot(deq4(t, s, row_blk0 + bi, g0 + g, hbase), xin(xg, xb, u * gpu + g, k));
    }
    return acc;
}

// The block index of unit u of a row whose first block is rb.
// Q4_0: unit = block.  Q6_K: 8 units per block.  F32: unit = block (8 floats).
void team_rows(uint t, uint s, uint blk0, uint rstride, uint nv, uint hbase, uint lane, uint nunits, bool xg,
               uint xb, uint k, inout float acc[NR])
{
    // Normally one pass (the host sizes UPT * TEAM >= units per row); more
    // passes when a second input is longer (a shared expert twice as wide).
    for (uint base = 0u; base < nunits; base += UPT * TEAM) {
    if (t == T_Q4_0) {
        uvec4 q[NR * UPT];
        float d[NR * UPT];
        [[unroll]] for (uint r = 0u; r < NR; r++) {
            uint rb = blk0 + min(r, nv - 1u) * rstride;
            [[unroll]] for (uint i = 0u; i < UPT; i++) {
                uint b = rb + min(base + lane + i * TEAM, nunits - 1u);
                q[r * UPT + i] = W4[s].w[b];
                d[r * UPT + i] = head_half(s, hbase + 2u * b);
            }
        }
        [[unroll]] for (uint i = 0u; i < UPT; i++) {
            uint u = base + lane + i * TEAM;
            if (u < nunits) {
                vec4 xl[4], xh[4];
                vec4 xt = vec4(0.0);
                [[unroll]] for (uint j = 0u; j < 4u; j++) {
                    xl[j] = xin(xg, xb, 8u * u + j, k);
                    xh[j] = xin(xg, xb, 8u * u + 4u + j, k);
                    xt += xl[j] + xh[j];
                }
                float xs8 = 8.0 * (xt.x + xt.y + xt.z + xt.w);
                [[unroll]] for (uint r = 0u; r < NR; r++) {
                    uvec4 w = q[r * UPT + i];
                    vec4 a = vec4(0.0);
                    [[unroll]] for (uint j = 0u; j < 4u; j++)
                        a += unpackUnorm4x8(w[j] & 0x0f0f0f0fu) * xl[j] + unpackUnorm4x8((w[j] >> 4) & 0x0f0f0f0fu) * xh[j];
                    acc[r] += d[r * UPT + i] * (255.0 * (a.x + a.y + a.z + a.w) - xs8);
                }
            }
        }
    } else if (t == T_F32) {
        vec4 v[NR * UPT * 2u];
        [[unroll]] for (uint r = 0u; r < NR; r++) {
            uint rb = blk0 + min(r, nv - 1u) * rstride;
            [[unroll]] for (uint i = 0u; i < UPT; i++) {
                uint b = rb + min(base + lane + i * TEAM, nunits - 1u);
                v[(r * UPT + i) * 2u] = uintBitsToFloat(W4[s].w[2u * b]);
                v[(r * UPT + i) * 2u + 1u] = uintBitsToFloat(W4[s].w[2u * b + 1u]);
            }
        }
        [[unroll]] for (uint i = 0u; i < UPT; i++) {
            uint u = base + lane + i * TEAM;
            if (u < nunits) {
                vec4 x0 = xin(xg, xb, 2u * u, k), x1 = xin(xg, xb, 2u * u + 1u, k);
                [[unroll]] for (uint r = 0u; r < NR; r++)
                    acc[r] += dot(v[(r * UPT + i) * 2u], x0) + dot(v[(r * UPT + i) * 2u + 1u], x1);
            }
        }
    } else {
        // other types: the unit loop (its own stride over the whole row)
        if (base == 0u)
            [[unroll]] for (uint r = 0u; r < NR; r++)
                acc[r] += row_partial(t, s, blk0 + min(r, nv - 1u) * rstride, hbase, lane, nunits * unit_of(t), xg,
                                      xb, k);
    }
    }
}
