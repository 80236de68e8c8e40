// mv_common.glsl: the matrix-vector machinery shared by mv, mv_glu,
// mv_moe_down, router and attn_vb (decode: one token).
//
// A workgroup is split into teams of TEAM threads (TEAM <= subgroup size,
// a power of two, so a team lives inside one subgroup and reduces with
// shuffles).  Each team computes NR rows; each thread takes UPT units of
// the row (unit_of(t) contiguous elements), issuing their loads first.
// Workgroups are small and many: a decode matvec is a few MB, so the GPU
// needs thousands of threads with little state each to keep enough loads in
// flight.
//
// The input vector is read from memory (L1-resident: every team reads all
// of it) -- or from shared memory `xs` where the kernel built it (attn_vb).
// A fused RMSNorm needs no staging pass: y = (W . (x * nw)) / rms(x), and
// every team sees all of x, so each team sums x^2 as it goes and applies
// 1/rms to its own result.
//
// Declared here: the family's spec constants TYPE, TEAM, NR, SG
// (pc_matvec.h); the including shader declares WGS (local_size_x_id), UPT
// and KSH (shared floats, >= 4), and calls iq_init() first (quant_iq.glsl:
// the low-bit types' tables).

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#include "pc_matvec.h"

WEIGHT_TYPE(MVF_S_TYPE, TYPE);
layout(constant_id = MVF_S_TEAM) const uint TEAM = 16u;
layout(constant_id = MVF_S_NR) const uint NR = 2u;
layout(constant_id = MVF_S_SG) const uint SG = 32u;

// the low-bit types' tables (TYPE, and IQ_T2 where the shader has a second type)
#define IQ_T1 TYPE
#include "quant_iq.glsl"

layout(set = 0, binding = MATVEC_B_X) readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = MATVEC_B_X) readonly buffer XBuf4 { vec4 x[]; } X4;
layout(set = 0, binding = MATVEC_B_NORM) readonly buffer NWBuf { float nw[]; } NW;
layout(set = 0, binding = MATVEC_B_NORM) readonly buffer NWBuf4 { vec4 nw[]; } NW4;

shared vec4 xs[KSH / 4];

// The four bytes of w (each 0..15) as floats: unpackUnorm4x8 gives q/255.
vec4 nibf(uint w) { return 255.0 * unpackUnorm4x8(w); }

// Thread index with subgroups laid out contiguously (teams never straddle one).
uint lin_id() { return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; }

float team_sum(float v)
{
    [[unroll]] for (uint o = TEAM >> 1; o > 0u; o >>= 1)
        v += subgroupShuffleXor(v, o);
    return v;
}

// Element i of x at xb (0 past k: rows of float types are zero-padded).
float x_at(uint xb, uint i, uint k) { return i < k ? X.x[xb + i] : 0.0; }
float nw_at(uint o, uint i, uint k) { return i < k ? NW.nw[o + i] : 0.0; }

// How a kernel reads its input.
struct xsrc {
    bool xg;      // from memory (else from xs)
    uint xb;      // its offset (floats)
    uint k;       // its length
    bool norm;    // times the norm weight; x^2 summed into xx
    uint nwo;     // norm weight offset
};

// Group i (4 elements) of the input.  With norm, adds the raw values'
// squares to xx when `count` (once per element per team).
vec4 xget(xsrc a, uint i, bool count, inout float xx)
{
    vec4 v;
    uint e = 4u * i;
    if (!a.xg)
        v = xs[i];
    else if (e + 4u <= a.k && (a.xb & 3u) == 0u)
        v = X4.x[(a.xb >> 2) + i];
    else
        v = vec4(x_at(a.xb, e, a.k), x_at(a.xb, e + 1u, a.k), x_at(a.xb, e + 2u, a.k), x_at(a.xb, e + 3u, a.k));
    if (a.norm) {
        if (count)
            xx += dot(v, v);
        vec4 w = e + 4u <= a.k && (a.nwo & 3u) == 0u ? NW4.nw[(a.nwo >> 2) + i]
                                                      : vec4(nw_at(a.nwo, e, a.k), nw_at(a.nwo, e + 1u, a.k),
                                                             nw_at(a.nwo, e + 2u, a.k), nw_at(a.nwo, e + 3u, a.k));
        v *= w;
    }
    return v;
}

// 1/rms of the input from a team's sum of squares.
float rms_scale(float xx, uint k, float eps) { return inversesqrt(team_sum(xx) / float(k) + eps); }

// Q6_K, one unit of 32 elements (half h, quarter j of a 256-block): the
// 32 low-bit bytes and 32 high-bit bytes as 16-byte loads; two scales.
float q6_k_unit(uint s, uint blk, uint sub, uint hbase, xsrc a, uint xv, bool count, inout float xx)
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
        vec4 xv4 = xget(a, xv + g, count, xx);
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

// Partial dot of one row (first block row_blk0) over this thread's units,
// for the types without a loads-first path.
float row_partial(uint t, uint s, uint row_blk0, uint hbase, uint lane, uint nunits, xsrc a, bool count,
                  inout float xx)
{
    uint unit = unit_of(t), upb = blk_of(t) / unit, gpu = unit / 4u;
    float acc = 0.0;
    for (uint u = lane; u < nunits; u += TEAM) {
        uint bi = u / upb, g0 = (u % upb) * gpu;
        if (t == T_Q6_K)
            acc += q6_k_unit(s, row_blk0 + bi, u % upb, hbase, a, u * gpu, count, xx);
        else
            for (uint g = 0u; g < gpu; g++)
                acc += dot(deq4(t, s, row_blk0 + bi, g0 + g, hbase), xget(a, u * gpu + g, count, xx));
    }
    return acc;
}

// The team's NR rows (row r's first block: blk0 + r * rstride; rows past
// nv repeat the last valid one), this thread's share; xx gets the sum of
// squares of the input elements this thread read (norm).
void team_rows(uint t, uint s, uint blk0, uint rstride, uint nv, uint hbase, uint lane, uint nunits, xsrc a,
               inout float acc[NR], inout float xx)
{
    // Normally one pass (the host sizes UPT * TEAM >= units per row); more
    // passes when an input is longer (a shared expert twice as wide).
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
                    // sum_i d*(q_i - 8)*x_i = d*(sum q_i x_i - 8 sum x_i); nibbles to
                    // floats four at a time (unpackUnorm4x8 gives q/255)
                    vec4 xl[4], xh[4];
                    vec4 xt = vec4(0.0);
                    [[unroll]] for (uint j = 0u; j < 4u; j++) {
                        xl[j] = xget(a, 8u * u + j, true, xx);
                        xh[j] = xget(a, 8u * u + 4u + j, true, xx);
                        xt += xl[j] + xh[j];
                    }
                    float xs8 = 8.0 * (xt.x + xt.y + xt.z + xt.w);
                    [[unroll]] for (uint r = 0u; r < NR; r++) {
                        uvec4 w = q[r * UPT + i];
                        vec4 p = vec4(0.0);
                        [[unroll]] for (uint j = 0u; j < 4u; j++)
                            p += nibf(w[j] & 0x0f0f0f0fu) * xl[j] + nibf((w[j] >> 4) & 0x0f0f0f0fu) * xh[j];
                        acc[r] += d[r * UPT + i] * ((p.x + p.y + p.z + p.w) - xs8);
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
                    vec4 x0 = xget(a, 2u * u, true, xx), x1 = xget(a, 2u * u + 1u, true, xx);
                    [[unroll]] for (uint r = 0u; r < NR; r++)
                        acc[r] += dot(v[(r * UPT + i) * 2u], x0) + dot(v[(r * UPT + i) * 2u + 1u], x1);
                }
            }
        } else if (base == 0u) {
            // other types: the unit loop (its own stride over the whole row)
            [[unroll]] for (uint r = 0u; r < NR; r++)
                acc[r] += row_partial(t, s, blk0 + min(r, nv - 1u) * rstride, hbase, lane, nunits, a, r == 0u, xx);
        }
    }
}
