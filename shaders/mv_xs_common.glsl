// mv_xs_common.glsl: x-stationary matrix-vector products for one token
// (decode), shared by mv_xs, mv_glu_xs, mv_moe_down_xs, router_xs and
// attn_vb_xs.
//
// Why: a decode matvec reads each weight once, but a kernel that walks rows
// with the input vector in memory reads the input (and the RMSNorm weight)
// once per row from L1/L2 -- 8-16x the weight traffic for Q4_0.  Here the
// workgroup stages its input once in shared memory (norm weight folded in,
// 1/rms from one workgroup reduction, applied to the results), and each
// lane then owns fixed columns of every row: a row is cut into units (8
// elements for the float types, 32 for the 32-element blocks, 64 for the
// K-quants), lane l of a team of TEAM threads takes units l, l+TEAM, ... (J
// of them), copies their inputs into registers once (XREG; else it reads
// them from shared memory once per R rows) and then only streams weights:
// R rows at a time, every load of the R rows issued before any arithmetic.
// Consecutive lanes read consecutive pieces of a row (coalesced in the
// repacked layout, gpu/vk_layout.c).
//
// Float conversion without conversion instructions: a 4-bit (5-, 6-, 8-bit)
// field at bits b.. of a word (below bit 23), ORed with the exponent of
// 2^23, is the float 2^23 + q*2^b; subtracting 2^23 + off*2^b gives
// (q-off)*2^b exactly.  The 2^-b goes into the staged input (exact: a power
// of two), so most fields need no shift at all.  See nib_dot / byte_dot for
// the bit positions.
//
// Types with a minimum (Q4_1, Q5_1: d*q + m; Q4_K, Q5_K: d*sc*q - dmin*m
// per 32-element sub-block): sum w*x = d*sc * sum q*x - dmin*m * sum x, and
// sum x over a lane's sub-blocks is the same for every row -- the input
// stays put -- so each lane sums its units' inputs once (load_xr) and a row
// costs one multiply-add more per sub-block.
//
// The sums of x over sub-blocks (XS_STAGED_SUMS, defined by the including
// shader before this file): the eight lanes that stage a sub-block's eight
// vec4s add them with three shuffles and one of them stores the sum
// (xsub), so load_xr reads two floats a unit instead of its 16 vec4s again.
// Why: a matvec of few rows (attn_output, q_b, the MoE down: one row per
// team, one pass) does load_xr once per row, and its vec4 reads from
// shared memory were as many as the dot's own -- half of the kernel's
// shared-memory traffic (gpu/PERF.md run 26).  attn_vb_xs stages through
// its own loop and keeps the per-lane sums.
//
// Shared layout: unit u's vec4 g sits at u*GPU + ((g + u) mod GPU), so the
// lanes of a subgroup reading the same g of consecutive units hit different
// banks.  Units past the row (padding up to J*TEAM units) are zero.
//
// The low-bit types' units are in xs_low.glsl; their tables (quant_iq.glsl)
// are copied into shared memory by every staging step (stage_x, or a
// kernel's own loop calling iq_fill before its barrier).
//
// Declared here: the family's spec constants TYPE, TEAM, J, R, SG, KSH
// (staged floats, >= J*TEAM*UNIT), XREG, XRN (= J*GPU with XREG, else 1)
// (pc_matvec.h); the including shader declares WGS (local_size_x_id) and
// includes quant.glsl first.

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#include "pc_matvec.h"

WEIGHT_TYPE(XS_S_TYPE, TYPE);
layout(constant_id = XS_S_TEAM) const uint TEAM = 32u;
layout(constant_id = XS_S_J) const uint J = 2u;
layout(constant_id = XS_S_R) const uint R = 4u;
layout(constant_id = XS_S_SG) const uint SG = 32u;
layout(constant_id = XS_S_KSH) const uint KSH = 2048u;
layout(constant_id = XS_S_XREG) const uint XREG = 1u;
layout(constant_id = XS_S_XRN) const uint XRN = 16u;

#define IQ_T1 TYPE
#include "quant_iq.glsl"

// Elements per unit, vec4s of input per unit, uvec4s of weights per unit.
const bool LOW = TYPE == T_Q2_K || TYPE == T_Q3_K || TYPE == T_IQ4_NL || TYPE == T_IQ4_XS || TYPE == T_MXFP4 ||
                 TYPE == T_IQ2_XXS || TYPE == T_IQ2_XS || TYPE == T_IQ2_S || TYPE == T_IQ3_XXS || TYPE == T_IQ3_S ||
                 TYPE == T_IQ1_S || TYPE == T_IQ1_M;
const bool K_UNIT = TYPE == T_Q4_K || TYPE == T_Q5_K || TYPE == T_Q6_K || TYPE == T_Q2_K || TYPE == T_Q3_K ||
                    TYPE == T_IQ4_XS || TYPE == T_IQ2_XXS || TYPE == T_IQ2_XS || TYPE == T_IQ2_S || TYPE == T_IQ3_XXS ||
                    TYPE == T_IQ3_S || TYPE == T_IQ1_S || TYPE == T_IQ1_M;
const uint UNIT = (TYPE == T_F32 || TYPE == T_F16 || TYPE == T_BF16) ? 8u : K_UNIT ? 64u : 32u;
const uint GPU = UNIT / 4u;
// (glslang turns a spec-constant && nested in || into a branch the
// optimizer cannot place: these stay plain || lists)
const uint QW = (TYPE == T_Q4_0 || TYPE == T_Q4_1 || TYPE == T_Q5_0 || TYPE == T_Q5_1 || TYPE == T_F16 ||
                 TYPE == T_BF16 || TYPE == T_Q2_K || TYPE == T_Q3_K || TYPE == T_IQ4_NL || TYPE == T_MXFP4 ||
                 TYPE == T_IQ2_XXS || TYPE == T_IQ2_XS || TYPE == T_IQ2_S || TYPE == T_IQ3_XXS || TYPE == T_IQ3_S ||
                 TYPE == T_IQ1_S || TYPE == T_IQ1_M) ? 1u : TYPE == T_Q6_K ? 3u : 2u;
// Units per block (the 256-element types: four 64-element units per block).
const uint UPB = K_UNIT ? 4u : 1u;
// Head words a unit needs (scales): Q6_K its d and two words of scales;
// Q4_K/Q5_K the block's d, dmin and 12 scale bytes (Q5_K: and its two qh'
// words); Q5_0/Q5_1 d (and m) and qh'; the low-bit types' (xs_low.glsl).
const uint HW = TYPE == T_Q6_K ? 3u : TYPE == T_Q4_K ? 4u : TYPE == T_Q5_K ? 6u
              : (TYPE == T_Q5_0 || TYPE == T_Q5_1) ? 2u
              : (TYPE == T_Q3_K || TYPE == T_IQ3_S) ? 4u : (TYPE == T_IQ3_XXS || TYPE == T_IQ1_M) ? 3u
              : (TYPE == T_Q2_K || TYPE == T_IQ4_XS || TYPE == T_IQ2_XS || TYPE == T_IQ2_S || TYPE == T_IQ1_S) ? 2u : 1u;
// Input sums a unit needs (types with a minimum or a shift): one per
// sub-block; Q2_K's per row of 16 of its unit, IQ1_S's per 32, IQ1_M's per 8.
const uint NS = (TYPE == T_Q4_K || TYPE == T_Q5_K) ? 2u : (TYPE == T_Q4_1 || TYPE == T_Q5_1) ? 1u
              : TYPE == T_Q2_K ? 4u : TYPE == T_IQ1_S ? 2u : TYPE == T_IQ1_M ? 8u : 0u;

// coherent: the input may come from a dispatch that ran beside this one
// with no barrier between them (WAIT, dep_flag.glsl), so no stale L1 line
// may serve it; a workgroup stages it once, from L2 either way.
layout(set = 0, binding = MATVEC_B_X) coherent readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = MATVEC_B_X) coherent readonly buffer XBuf4 { vec4 x[]; } X4;
#ifdef LL
// LL_IN (dep_flag.glsl, which the including shader includes first): the
// input as tagged words (value bits, tag), polled.
layout(set = 0, binding = MATVEC_B_X) coherent volatile readonly buffer XLL2 { uvec2 w[]; } XL2;
layout(set = 0, binding = MATVEC_B_X) coherent volatile readonly buffer XLL4 { uvec4 w[]; } XL4;
#endif
layout(set = 0, binding = MATVEC_B_NORM) readonly buffer NWBuf { float nw[]; } NW;
layout(set = 0, binding = MATVEC_B_NORM) readonly buffer NWBuf4 { vec4 nw[]; } NW4;

shared vec4 xs[KSH / 4u];
shared float red[64];
#ifdef XS_STAGED_SUMS
// xsub[2u + h] (K-quants) or xsub[u] (Q4_1, Q5_1): unit u's sub-block sums;
// the eight lanes of a sub-block must share a subgroup (the low-bit types'
// sums are of other shapes: load_xr adds them up).
const bool XSUB = NS > 0u && SG >= 8u && !LOW;
shared float xsub[XSUB ? (KSH + 31u) / 32u : 1u];
#else
const bool XSUB = false;
float xsub[1];  // never read (XSUB false): keeps the code below one text
#endif

// This thread's input registers, weight registers (R rows x J units) and
// the per-(row, unit) scale words.
// XS_SETS: matrices loaded per pass (mv_glu_xs: gate and up).
#ifndef XS_SETS
#define XS_SETS 1u
#endif
vec4 xr[XRN];
float xsum[NS > 0u ? J * NS : 1u];
uvec4 qv[XS_SETS * R * J * QW];
uint hv[XS_SETS * R * J * HW];

#ifdef IDOT
// Integer dot products (the -DIDOT build, gpu/vk_k_matvec.c; a device with
// VK_KHR_shader_integer_dot_product, core in Vulkan 1.3).  glslc 2023.2 has
// no GL_EXT_integer_dot_product, so OpSUDot (signed x, unsigned weight codes,
// four 8-bit lanes packed in a word) is declared through
// GL_EXT_spirv_intrinsics: capabilities DotProductInput4x8BitPacked (6018)
// and DotProduct (6019).  Why: the float path spends ~4 instructions an
// element turning codes into floats (fld) before its fma; here a word of
// four codes meets four 8-bit inputs in one instruction.
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6018, 6019], id = 4452)
int sudot4x8(uint x_signed, uint w_unsigned, spirv_literal int packed_4x8);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6018, 6019], id = 4450)
int sdot4x8(uint x_signed, uint w_signed, spirv_literal int packed_4x8);
// The input is quantized per 32 elements for every weight type, as
// llama.cpp's CUDA decode does (q8_1): d = max|x| / 127, q = roundEven(x 127
// / max|x|).  (The K-quants over 256, llama.cpp's CPU q8_K, measured no
// faster and coarser: gpu/perf/runs/57.)  Once a workgroup: the staging
// (x_stage) keeps the floats and each run's max|x| (its eight lanes, by
// shuffles), then load_xr quantizes (idot_quantize) -- a lane that quantized
// its own units redid it for each of its rows' few teams (run 57 call 1: the
// MoE down 914 -> 1380 us a token).  8-lane clusters: subgroups of 8 or
// more.  A unit of 64 (Q4_K, Q5_K, IQ4_XS) reads two runs' scales and sums, a
// Q6_K unit (16 elements of four rows) shares of four (idot_block).  The
// builds: mv_xs (and its tagged-word build mv_xs_ll_id, so a tagged call and
// a verify column's untagged one do the same arithmetic), mv_glu_xs,
// mv_moe_down_xs, attn_vb_xs.
const bool IDOT_ON = (TYPE == T_Q4_0 || TYPE == T_Q4_1 || TYPE == T_Q5_0 || TYPE == T_Q5_1 || TYPE == T_Q8_0 ||
                      TYPE == T_Q4_K || TYPE == T_Q5_K || TYPE == T_Q6_K || TYPE == T_IQ4_NL || TYPE == T_IQ4_XS ||
                      TYPE == T_MXFP4) && SG >= 8u;
// The 16-level types (IQ4_NL, IQ4_XS: kvalues_iq4nl; MXFP4: twice E2M1's
// values): their levels are signed bytes.  A byte of two codes (low nibble:
// element 4k + i, high: 16 + 4k + i) indexes lev2_sh, which holds both
// levels as bytes 0 and 2 of a word, and again a byte up in its second
// half, so four lookups and ORs make the two words of packed levels
// (lev_idot) where the float path converts eight levels to floats; filled
// by idot_quantize from the float table.  (The copy a byte up saves two
// shifts a word: IQ4_XS +1.3 %, run 60.  Reads are what these kernels wait
// on: four 64-bit tables that need only ORs took 8 KiB and lost 4-18 %.)
const bool LEV16 = (TYPE == T_IQ4_NL || TYPE == T_IQ4_XS || TYPE == T_MXFP4) && SG >= 8u;  // (IDOT_ON's form: see QW)
shared uint lev2_sh[LEV16 ? 512u : 1u];
const uint NBU = TYPE == T_Q6_K ? 4u : UNIT / 32u;   // the input blocks a unit reads
shared float amax_sh[IDOT_ON ? KSH / 32u : 1u];  // max|x| of each 32 elements
shared uint xq_sh[IDOT_ON ? KSH / 4u : 1u];  // vec4 g of unit u as four signed bytes, at x_slot(u, g)
shared float xd_sh[IDOT_ON ? KSH / 32u : 1u];      // block b's d
shared int xqs_sh[IDOT_ON ? KSH / 32u : 1u];       // block b's sum of q
uint xq[IDOT_ON ? J * GPU : 1u];     // this lane's unit j: its words GPU j.., its blocks' d and sums
float xd[IDOT_ON ? J * NBU : 1u];
int xqs[IDOT_ON ? J * NBU : 1u];

// The input block of unit u's h-th share (its h-th 32 elements; Q6_K: row h
// of unit (h', s0) of its 256-element block: elements 128h' + 32h + 16s0 ..).
uint idot_block(uint u, uint h)
{
    if (TYPE == T_Q6_K)
        return (u >> 2) * 8u + 4u * ((u & 3u) >> 1) + h;
    return u * NBU + h;
}
#else
const bool IDOT_ON = false;
#endif

uint lin_id() { return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; }

float team_sum(float v)
{
    [[unroll]] for (uint o = TEAM >> 1; o > 0u; o >>= 1)
        v += subgroupShuffleXor(v, o);
    return v;
}

// ---- staging ------------------------------------------------------------------------

// Unit and vec4-within-unit of logical vec4 v (elements 4v..4v+3) of a
// row; Q6_K's units are not contiguous (see unit_q6_k).
uvec2 x_unit(uint v)
{
    if (TYPE == T_Q2_K || TYPE == T_Q3_K) {
        // unit (n, h) of its block, vec4 4j + k (xs_low.glsl, k2_place)
        uvec4 p = k2_place((4u * v) & 255u);
        return uvec2((v >> 6) * 4u + 2u * p.x + p.z, 4u * p.y + p.w);
    }
    if (TYPE == T_Q6_K) {
        uint e = 4u * v, w = e & 255u;
        return uvec2((e >> 8) * 4u + (w >> 7) * 2u + ((w >> 4) & 1u), ((w >> 5) & 3u) * 4u + ((w >> 2) & 3u));
    }
    return uvec2(v / GPU, v % GPU);
}

uint x_slot(uint u, uint g) { return u * GPU + ((g + u) & (GPU - 1u)); }

// The power-of-two factors the conversions need for vec4 g of a unit (see
// nib_dot, byte_dot and unit_q8_0): nibbles' low and high halves, bytes.
const bool NIB = TYPE == T_Q4_0 || TYPE == T_Q4_1 || TYPE == T_Q4_K;
const bool BYTES = TYPE == T_Q5_0 || TYPE == T_Q5_1 || TYPE == T_Q5_K || TYPE == T_Q6_K || TYPE == T_Q2_K ||
                   TYPE == T_Q3_K || TYPE == T_IQ2_XXS || TYPE == T_IQ2_XS || TYPE == T_IQ2_S || TYPE == T_IQ3_XXS ||
                   TYPE == T_IQ3_S;
vec4 x_pre(uint g)
{
    if (TYPE == T_IQ1_S || TYPE == T_IQ1_M)  // 2-bit codes at bits 2j of a group of 8
        return (g & 1u) == 0u ? vec4(1.0, 0.25, 0.0625, 0.015625)
                              : vec4(1.0 / 256.0, 1.0 / 1024.0, 1.0 / 4096.0, 1.0 / 16384.0);
    if (NIB)
        return g < GPU / 2u ? vec4(1.0, 1.0 / 256.0, 1.0 / 65536.0, 1.0 / 4096.0)
                            : vec4(1.0 / 16.0, 1.0 / 4096.0, 1.0 / 256.0, 1.0 / 65536.0);
    if (TYPE == T_Q8_0)
        return vec4(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0);
    if (BYTES)
        return vec4(1.0, 1.0 / 256.0, 1.0 / 65536.0, 1.0 / 256.0);
    return vec4(1.0);
}

// Four input elements e..e+3 at float offset xb (0 past k).
vec4 x_get4(uint xb, uint e, uint k)
{
    if (e + 4u <= k && (xb & 3u) == 0u)
        return X4.x[(xb >> 2) + (e >> 2)];
    vec4 a;
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        a[i] = e + i < k ? X.x[xb + e + i] : 0.0;
    return a;
}

#ifdef LL
// x_get4 of tagged input words: each polled until it carries `tag`
// (failed: a poll gave up).
vec4 x_get4_ll(uint xb, uint e, uint k, uint tag, inout bool failed)
{
    if (e + 4u <= k && (xb & 1u) == 0u) {
        uint i = (xb + e) >> 1;
        uvec4 a, b;
        LL_POLL4(XL4, i, tag, a, failed);
        LL_POLL4(XL4, i + 1u, tag, b, failed);
        return uintBitsToFloat(uvec4(a.x, a.z, b.x, b.z));
    }
    vec4 a = vec4(0.0);
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        if (e + i < k) {
            uvec2 w;
            LL_POLL2(XL2, xb + e + i, tag, w, failed);
            a[i] = uintBitsToFloat(w.x);
        }
    return a;
}
#endif

vec4 nw_get4(uint o, uint e, uint k)
{
    if (e + 4u <= k && (o & 3u) == 0u)
        return NW4.nw[(o >> 2) + (e >> 2)];
    vec4 a;
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        a[i] = e + i < k ? NW.nw[o + e + i] : 0.0;
    return a;
}

// Stores logical vec4 v of the staged input (already scaled).
void x_put(uint v, vec4 a)
{
    uvec2 ug = x_unit(v);
    xs[x_slot(ug.x, ug.y)] = a * x_pre(ug.y);
}

// The staged input's vec4s.  A staging loop runs v from x_first() while v <
// XEND, WGS at a time: with XSUB every lane the same rounds, as the shuffles
// need whole clusters (then v may pass XV); else up to XV, as before run 26.
const uint XV = J * TEAM * GPU;
const bool XCLUSTER = XSUB || IDOT_ON;
const uint XEND = XCLUSTER ? (XV + WGS - 1u) / WGS * WGS : XV;
uint x_first() { return XCLUSTER ? lin_id() : gl_LocalInvocationIndex; }

// x_put for a staging loop's vec4 v (a: zero past the input); XSUB: also
// the sub-block sums.
void x_stage(uint v, vec4 a)
{
#ifdef IDOT
    if (IDOT_ON) {
        vec4 aa = abs(a);
        float m = max(max(aa.x, aa.y), max(aa.z, aa.w));
        m = max(m, subgroupShuffleXor(m, 1u));
        m = max(m, subgroupShuffleXor(m, 2u));
        m = max(m, subgroupShuffleXor(m, 4u));
        if (v < XV) {
            uvec2 ug = x_unit(v);
            xs[x_slot(ug.x, ug.y)] = a;
            if ((v & 7u) == 0u)
                amax_sh[v >> 3] = m;
        }
        return;
    }
#endif
    if (v < XV)
        x_put(v, a);
    if (XSUB) {
        float t = a.x + a.y + a.z + a.w;
        t += subgroupShuffleXor(t, 1u);
        t += subgroupShuffleXor(t, 2u);
        t += subgroupShuffleXor(t, 4u);
        if ((v & 7u) == 0u && v < XV)
            xsub[v >> 3] = t;
    }
}

// Stages one input of k elements (a row of kp, padded with zeros to all
// J*TEAM units); with norm, times the norm weight.  Returns 1/rms (norm) or
// 1.  LL_IN: the input's words are polled for tag `tag`.  Call from
// uniform control flow (barrier).
float stage_x(uint xb, uint k, uint kp, bool norm, uint nwo, float eps, uint tag)
{
    float ss = 0.0;
    bool failed = false;
    iq_fill();
    for (uint v = x_first(); v < XEND; v += WGS) {
        vec4 a = vec4(0.0);
        if (4u * v < kp) {
#ifdef LL
            a = LL_IN != 0u ? x_get4_ll(xb, 4u * v, k, tag, failed) : x_get4(xb, 4u * v, k);
#else
            a = x_get4(xb, 4u * v, k);
#endif
            if (norm) {
                ss += dot(a, a);
                a *= nw_get4(nwo, 4u * v, k);
            }
        }
        x_stage(v, a);
    }
#ifdef LL
    if (LL_IN != 0u && failed)
        ll_give_up();
#endif
    if (norm) {
        ss = subgroupAdd(ss);
        if (subgroupElect())
            red[gl_SubgroupID] = ss;
    }
    barrier();
    float sc = 1.0;
    if (norm) {
        float t = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++)
            t += red[i];
        sc = inversesqrt(t / float(k) + eps);
    }
    return sc;
}

#ifdef IDOT
// The staged input (x_stage: floats and each run's max|x|) quantized by the
// workgroup after the staging's barrier, each run's d and sum of q beside
// it.  Call from uniform control flow (barrier).
void idot_quantize()
{
    if (LEV16)
        for (uint b = gl_LocalInvocationIndex; b < 512u; b += WGS)
            lev2_sh[b] = ((uint(int(iq_level(TYPE, b & 15u))) & 0xFFu) |
                          ((uint(int(iq_level(TYPE, (b >> 4) & 15u))) & 0xFFu) << 16)) << (b >> 8 << 3);
    for (uint v = x_first(); v < XEND; v += WGS) {
        float m = v < XV ? amax_sh[v >> 3] : 0.0;
        uvec2 ug = x_unit(v);
        vec4 a = v < XV ? xs[x_slot(ug.x, ug.y)] : vec4(0.0);
        float id = m > 0.0 ? 127.0 / m : 0.0;
        ivec4 q = ivec4(roundEven(a * id));
        int qs = q.x + q.y + q.z + q.w;
        qs += subgroupShuffleXor(qs, 1u);
        qs += subgroupShuffleXor(qs, 2u);
        qs += subgroupShuffleXor(qs, 4u);
        if (v < XV) {
            xq_sh[x_slot(ug.x, ug.y)] = uint(q.x & 0xFF) | uint(q.y & 0xFF) << 8 | uint(q.z & 0xFF) << 16 |
                                        uint(q.w & 0xFF) << 24;
            if ((v & 7u) == 0u) {
                xd_sh[v >> 3] = m / 127.0;
                xqs_sh[v >> 3] = qs;
            }
        }
    }
    barrier();
}
#endif

// This lane's inputs into registers (XREG), and the sums of its
// sub-blocks' inputs (NS: from xsub, else summed here); after staging.
void load_xr(uint lane)
{
    if (XREG == 1u && !IDOT_ON)
        [[unroll]] for (uint j = 0u; j < J; j++)
            [[unroll]] for (uint g = 0u; g < GPU; g++)
                xr[j * GPU + g] = xs[x_slot(lane + j * TEAM, g)];
    if (XSUB)
        [[unroll]] for (uint j = 0u; j < J; j++)
            [[unroll]] for (uint h = 0u; h < NS; h++)
                xsum[j * NS + h] = xsub[(lane + j * TEAM) * NS + h];
    else if (NS > 0u)
        [[unroll]] for (uint j = 0u; j < J; j++) {
            // sub-block h: vec4s h * GPU/NS .. of the unit
            vec4 s[NS > 0u ? NS : 1u];
            [[unroll]] for (uint h = 0u; h < NS; h++)
                s[h] = vec4(0.0);
            [[unroll]] for (uint g = 0u; g < GPU; g++)
                s[g / (GPU / max(NS, 1u))] += xs[x_slot(lane + j * TEAM, g)] / x_pre(g);
            [[unroll]] for (uint h = 0u; h < NS; h++)
                xsum[j * NS + h] = s[h].x + s[h].y + s[h].z + s[h].w;
        }
#ifdef IDOT
    if (IDOT_ON) {
        idot_quantize();
        [[unroll]] for (uint j = 0u; j < J; j++) {
            uint u = lane + j * TEAM;
            [[unroll]] for (uint g = 0u; g < GPU; g++)
                xq[GPU * j + g] = xq_sh[x_slot(u, g)];
            [[unroll]] for (uint h = 0u; h < NBU; h++) {
                uint b = idot_block(u, h);
                xd[NBU * j + h] = xd_sh[b];
                xqs[NBU * j + h] = xqs_sh[b];
            }
            // the K-quants' minimums: sum x of a sub-block as d sum q (k_chunk)
            if (TYPE == T_Q4_K || TYPE == T_Q5_K)
                [[unroll]] for (uint h = 0u; h < 2u; h++)
                    xsum[2u * j + h] = xd[NBU * j + h] * float(xqs[NBU * j + h]);
        }
    }
#endif
}

// vec4 g of this lane's unit j (unit index u = lane + j*TEAM).
vec4 xv(uint j, uint g, uint u)
{
    if (XREG == 1u)
        return xr[j * GPU + g];
    return xs[x_slot(u, g)];
}

// ---- weights ------------------------------------------------------------------------

void load_unit_low(uint s, uint blk, uint sub, uint hbase, uint i);   // xs_low.glsl

// Loads unit `sub` (< UPB) of block `blk` of the tensor in weight slot s
// into register set i (i = row * J + j).  s must be a constant at the call.
void load_unit(uint s, uint blk, uint sub, uint hbase, uint i)
{
    if (LOW) {
        load_unit_low(s, blk, sub, hbase, i);
    } else if (TYPE == T_Q4_0 || TYPE == T_F16 || TYPE == T_BF16) {
        qv[i] = W4[s].w[blk];
        hv[i] = TYPE == T_Q4_0 ? W[s].w[(hbase >> 2) + (blk >> 1)] : 0u;
    } else if (TYPE == T_Q4_1) {
        qv[i] = W4[s].w[blk];
        hv[i] = W[s].w[(hbase >> 2) + blk];                  // d, m
    } else if (TYPE == T_Q5_0 || TYPE == T_Q5_1) {
        qv[i] = W4[s].w[blk];
        uvec2 h = W2[s].w[(hbase >> 3) + blk];               // d (and m), qh'
        hv[2u * i] = h.x;
        hv[2u * i + 1u] = h.y;
    } else if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
        // chunk `sub` (64 elements): qs[32 sub .. +32]; the block's head
        // (d, dmin, scales); Q5_K: the chunk's two qh' words after qs
        uint b4 = blk * (TYPE == T_Q5_K ? 10u : 8u) + 2u * sub;
        qv[2u * i] = W4[s].w[b4];
        qv[2u * i + 1u] = W4[s].w[b4 + 1u];
        uvec4 h = W4[s].w[(hbase >> 4) + blk];
        hv[HW * i] = h.x;
        hv[HW * i + 1u] = h.y;
        hv[HW * i + 2u] = h.z;
        hv[HW * i + 3u] = h.w;
        if (TYPE == T_Q5_K) {
            uvec2 q5 = W2[s].w[blk * 20u + 16u + sub];
            hv[HW * i + 4u] = q5.x;
            hv[HW * i + 5u] = q5.y;
        }
    } else if (TYPE == T_Q8_0 || TYPE == T_F32) {
        qv[2u * i] = W4[s].w[2u * blk];
        qv[2u * i + 1u] = W4[s].w[2u * blk + 1u];
        hv[i] = TYPE == T_Q8_0 ? W[s].w[(hbase >> 2) + (blk >> 1)] : 0u;
    } else if (TYPE == T_Q6_K) {
        // unit (h, s0): ql[64h+16s0..+16], ql[64h+32+16s0..+16], qh[32h+16s0..+16];
        // scales sc[8h+s0+2j] (j = 0..3) in body words 48+2h, 49+2h
        uint h = sub >> 1, s0 = sub & 1u, b4 = blk * 13u;
        qv[3u * i] = W4[s].w[b4 + 4u * h + s0];
        qv[3u * i + 1u] = W4[s].w[b4 + 4u * h + 2u + s0];
        qv[3u * i + 2u] = W4[s].w[b4 + 8u + 2u * h + s0];
        hv[3u * i] = W[s].w[(hbase >> 2) + (blk >> 1)];
        hv[3u * i + 1u] = W[s].w[blk * 52u + 48u + 2u * h];
        hv[3u * i + 2u] = W[s].w[blk * 52u + 49u + 2u * h];
    }
}

// The half scale of block blk from its head word.
float half_of(uint w, uint blk) { return unpackHalf2x16((blk & 1u) != 0u ? w >> 16 : w).x; }

// The field (w & mask), at bits b.., as the float 2^23 + q*2^b (exact while
// the field stays below bit 23), minus 2^23 + off*2^b: (q - off) * 2^b.
float fld(uint w, uint mask, uint offb) { return uintBitsToFloat((w & mask) | 0x4B000000u) - uintBitsToFloat(0x4B000000u | offb); }

// Nibble units (Q4_1: 32 elements in one uvec4; Q4_K: a 64-element chunk in
// two; Q4_0's the same, in one accumulator: unit_q4_0): body word k holds
// bytes 4k..4k+3, whose low nibbles are elements 4k+i (vec4 k of the unit)
// and whose high nibbles are elements UNIT/2 + 4k+i (vec4 GPU/2 + k).  Nibbles at bits 0, 4, 8, 12, 16 are used
// in place; those at 20, 24, 28 after one shift by 12 (to 8, 12, 16).
// Hence x_pre's factors: low vec4s 2^-(0, 8, 16, 12), high vec4s 2^-(4, 12,
// 8, 16).  Returns sum (q-off) * x over the low and the high half.
vec2 nib_dot(uint i, uint j, uint u, uint off)
{
    vec4 lo_acc = vec4(0.0), hi_acc = vec4(0.0);
    [[unroll]] for (uint k = 0u; k < GPU / 2u; k++) {
        uint a = qv[QW * i + (k >> 2)][k & 3u], b = a >> 12;
        vec4 lo = vec4(fld(a, 0xFu, off), fld(a, 0xF00u, off << 8), fld(a, 0xF0000u, off << 16), fld(b, 0xF000u, off << 12));
        vec4 hi = vec4(fld(a, 0xF0u, off << 4), fld(a, 0xF000u, off << 12), fld(b, 0xF00u, off << 8), fld(b, 0xF0000u, off << 16));
        lo_acc += lo * xv(j, k, u);
        hi_acc += hi * xv(j, GPU / 2u + k, u);
    }
    return vec2(lo_acc.x + lo_acc.y + lo_acc.z + lo_acc.w, hi_acc.x + hi_acc.y + hi_acc.z + hi_acc.w);
}

// Q4_0 (main's code as run 18 measured it, one accumulator: the two-sum
// nib_dot measured 3-4 % slower on the Q4_0 file's decode in run 20):
// sum (q-8) * x over the unit.
float unit_q4_0(uint i, uint j, uint u)
{
    uvec4 w = qv[i];
    vec4 acc = vec4(0.0);
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uint a = w[k], b = a >> 12;
        vec4 lo = vec4(fld(a, 0xFu, 8u), fld(a, 0xF00u, 8u << 8), fld(a, 0xF0000u, 8u << 16), fld(b, 0xF000u, 8u << 12));
        vec4 hi = vec4(fld(a, 0xF0u, 8u << 4), fld(a, 0xF000u, 8u << 12), fld(b, 0xF00u, 8u << 8), fld(b, 0xF0000u, 8u << 16));
        acc += lo * xv(j, k, u) + hi * xv(j, 4u + k, u);
    }
    return acc.x + acc.y + acc.z + acc.w;
}

// The fifth bits of run s (elements 4s'+i of a qh' word's order, gpu/vk_layout.c:
// bits 8i + (s+4)%8) moved to bit 4 of byte i.
uint qh_bits(uint h, uint s) { return (s < 4u ? h >> s : h << (8u - s)) & 0x10101010u; }

// One word of byte-wide values (each below 64) at bits 0, 8, 16 in place,
// byte 3 after a shift by 16 (to 8): x_pre's 2^-(0, 8, 16, 8).
vec4 bytes_f(uint v, uint mask, uint off)
{
    uint b = v >> 16;
    return vec4(fld(v, mask, off), fld(v, mask << 8, off << 8), fld(v, mask << 16, off << 16), fld(b, mask << 8, off << 8));
}

// 5-bit units (Q5_0, Q5_1: 32 elements; Q5_K: a 64-element chunk): the
// nibbles as nib_dot's, each with its fifth bit (from qh' words hlo for the
// low nibbles, hhi for the high; run k of the low half is slot k, of the
// high half slot k + hs) at bit 4 of its byte, converted as bytes.
vec2 nib5_dot(uint i, uint j, uint u, uint hlo, uint hhi, uint hs, uint off)
{
    vec4 lo_acc = vec4(0.0), hi_acc = vec4(0.0);
    [[unroll]] for (uint k = 0u; k < GPU / 2u; k++) {
        uint a = qv[QW * i + (k >> 2)][k & 3u];
        uint lo = (a & 0x0F0F0F0Fu) | qh_bits(hlo, k), hi = ((a >> 4) & 0x0F0F0F0Fu) | qh_bits(hhi, k + hs);
        lo_acc += bytes_f(lo, 0x1Fu, off) * xv(j, k, u);
        hi_acc += bytes_f(hi, 0x1Fu, off) * xv(j, GPU / 2u + k, u);
    }
    return vec2(lo_acc.x + lo_acc.y + lo_acc.z + lo_acc.w, hi_acc.x + hi_acc.y + hi_acc.z + hi_acc.w);
}

// Q4_K / Q5_K chunk c (sub-blocks 2c, 2c+1) of a block whose head words are
// hv[HW*i..]: d, dmin; scale bytes 0-3, 4-7, 8-11 (ggml's get_scale_min_k4:
// sub-block j < 4 takes scale byte j & 63 and min byte j+4 & 63; j >= 4 the
// low nibbles (scale) and high nibbles (min) of byte j+4, with the top two
// bits of bytes j-4 (scale) and j (min)).  a: sum q*x of the two
// sub-blocks.  Returns d * (sc0 a.x + sc1 a.y) - dmin * (m0 s0 + m1 s1).
float k_chunk(uint i, uint c, uint j, vec2 a)
{
    uint w1 = hv[HW * i + 1u], w2 = hv[HW * i + 2u], w3 = hv[HW * i + 3u], sh = 16u * (c & 1u);
    bool top = c >= 2u;
    uint scp = top ? ((w3 >> sh) & 0x0F0Fu) | ((w1 >> (sh + 2u)) & 0x3030u) : (w1 >> sh) & 0x3F3Fu;
    uint mp = top ? ((w3 >> (sh + 4u)) & 0x0F0Fu) | ((w2 >> (sh + 2u)) & 0x3030u) : (w2 >> sh) & 0x3F3Fu;
    vec4 sm = vec4(uvec4(scp & 0xFFu, scp >> 8, mp & 0xFFu, mp >> 8));
    vec2 dm = unpackHalf2x16(hv[HW * i]);
    return dm.x * (sm.x * a.x + sm.y * a.y) - dm.y * (sm.z * xsum[2u * j] + sm.w * xsum[2u * j + 1u]);
}

// Q8_0: signed bytes; XOR 0x80 makes them q+128.  Bytes 0, 1 at bits 0, 8
// in place, bytes 2, 3 after a shift by 16 (x_pre: 2^-(0, 8, 0, 8)).
float unit_q8_0(uint i, uint j, uint u)
{
    vec4 acc = vec4(0.0);
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint a = qv[2u * i + (k >> 2)][k & 3u] ^ 0x80808080u, b = a >> 16;
        vec4 f = vec4(fld(a, 0xFFu, 128u), fld(a, 0xFF00u, 128u << 8), fld(b, 0xFFu, 128u), fld(b, 0xFF00u, 128u << 8));
        acc += f * xv(j, k, u);
    }
    return acc.x + acc.y + acc.z + acc.w;
}

// Q6_K unit (half h, column run s0) of a block: element 128h + 32j + 16s0 + l
// (j = 0..3, l = 0..15) has its low 4 bits in ql byte 64h + 32(j&1) + 16s0 + l
// (nibble j>>1) and its high 2 bits in qh byte 32h + 16s0 + l (bits 2j).  Per
// word k (4 columns) the four 6-bit values of each j are assembled into the
// bytes of one word, then converted as bytes at bits 0, 8, 16 and (after a
// shift by 16) 8 (x_pre: 2^-(0, 8, 16, 8)).  vec4 g = 4j + k of the unit
// holds columns 4k..4k+3 of row j.  Returns d * sum_j sc_j * sum (q-32) * x.
// Word k of a unit's rows j = 0..3 (component j), from its registers l0,
// l1 (ql) and word k of qh: byte l the 6-bit value of column 4k + l
// (unit_q6_k's layout).
uvec4 q6_words(uvec4 l0, uvec4 l1, uint h, uint k)
{
    return uvec4((l0[k] & 0x0F0F0F0Fu) | ((h << 4) & 0x30303030u), (l1[k] & 0x0F0F0F0Fu) | ((h << 2) & 0x30303030u),
                 ((l0[k] >> 4) & 0x0F0F0F0Fu) | (h & 0x30303030u), ((l1[k] >> 4) & 0x0F0F0F0Fu) | ((h >> 2) & 0x30303030u));
}

// Row r's signed 8-bit scale of a unit (column run s0) from its two words
// of scales w0, w1.
float q6_scale(uint w0, uint w1, uint s0, uint r)
{
    uint sw = r < 2u ? w0 : w1;
    uint byte = s0 + 2u * (r & 1u);
    return float(int(sw << (24u - 8u * byte)) >> 24);
}

float unit_q6_k(uint i, uint blk, uint sub, uint j, uint u)
{
    uvec4 l0 = qv[3u * i], l1 = qv[3u * i + 1u], qh = qv[3u * i + 2u];
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uvec4 a = q6_words(l0, l1, qh[k], k);
        [[unroll]] for (uint r = 0u; r < 4u; r++)
            acc[r] += bytes_f(a[r], 0x3Fu, 32u) * xv(j, 4u * r + k, u);
    }
    uint s0 = sub & 1u, w0 = hv[3u * i + 1u], w1 = hv[3u * i + 2u];
    float d = half_of(hv[3u * i], blk);
    float s = 0.0;
    [[unroll]] for (uint r = 0u; r < 4u; r++)
        s += q6_scale(w0, w1, s0, r) * (acc[r].x + acc[r].y + acc[r].z + acc[r].w);
    return d * s;
}

#ifdef IDOT
// Integer dot products of a unit: the weight codes four to a word as the
// input's words hold their elements (byte i of a word element 4k+i), the
// input's block scales outside the sums.
// Nibble words (Q4_0 / Q4_1 / Q5_0 / Q5_1: a unit's word k holds elements
// 4k.. in its low nibbles, 16+4k.. in its high ones; Q4_K / Q5_K: word k of
// a 64-element chunk, elements 4k.. and 32+4k.., two sub-blocks), with the
// fifth bits (qh_bits) where hlo / hhi are given: sum q x of each half.
ivec2 nib_idot(uint i, uint j, bool five, uint hlo, uint hhi, uint hs)
{
    ivec2 acc = ivec2(0);
    [[unroll]] for (uint k = 0u; k < GPU / 2u; k++) {
        uint a = qv[QW * i + (k >> 2)][k & 3u];
        uint lo = a & 0x0F0F0F0Fu, hi = (a >> 4) & 0x0F0F0F0Fu;
        if (five) {
            lo |= qh_bits(hlo, k);
            hi |= qh_bits(hhi, k + hs);
        }
        acc.x += sudot4x8(xq[GPU * j + k], lo, 0);
        acc.y += sudot4x8(xq[GPU * j + GPU / 2u + k], hi, 0);
    }
    return acc;
}

// Q6_K: as unit_q6_k assembles its bytes, then each byte less 32 (a borrow
// cannot cross bytes: 0x80 + q - 0x20 stays in one byte for q < 64).
float unit_q6_k_idot(uint i, uint blk, uint sub, uint j)
{
    uvec4 l0 = qv[3u * i], l1 = qv[3u * i + 1u], qh = qv[3u * i + 2u];
    ivec4 acc = ivec4(0);
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uvec4 a = q6_words(l0, l1, qh[k], k);
        [[unroll]] for (uint r = 0u; r < 4u; r++)
            acc[r] += sdot4x8(xq[16u * j + 4u * r + k], ((a[r] | 0x80808080u) - 0x20202020u) ^ 0x80808080u, 0);
    }
    uint s0 = sub & 1u, w0 = hv[3u * i + 1u], w1 = hv[3u * i + 2u];
    float s = 0.0;
    [[unroll]] for (uint r = 0u; r < 4u; r++)
        s += q6_scale(w0, w1, s0, r) * xd[4u * j + r] * float(acc[r]);
    return half_of(hv[3u * i], blk) * s;
}

// A 32-element block of 16-level codes (w: as levels32 reads it) with the
// input's words g0.. of this lane's unit j: sum level q.
int lev_idot(uvec4 w, uint j, uint g0)
{
    int acc = 0;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uint a = w[k];
        // bytes of x01: levels of codes lo0, lo1, hi0, hi1; of x23: lo2, lo3, hi2, hi3
        uint x01 = lev2_sh[a & 0xFFu] | lev2_sh[256u + ((a >> 8) & 0xFFu)];
        uint x23 = lev2_sh[(a >> 16) & 0xFFu] | lev2_sh[256u + (a >> 24)];
        acc += sdot4x8(xq[GPU * j + g0 + k], (x01 & 0xFFFFu) | (x23 << 16), 0);
        acc += sdot4x8(xq[GPU * j + g0 + 4u + k], (x01 >> 16) | (x23 & 0xFFFF0000u), 0);
    }
    return acc;
}

float unit_dot_idot(uint i, uint blk, uint sub, uint j)
{
    if (TYPE == T_IQ4_NL)
        return half_of(hv[i], blk) * xd[j] * float(lev_idot(qv[i], j, 0u));
    if (TYPE == T_MXFP4)
        return xd[j] * float(lev_idot(qv[i], j, 0u)) * e8m0_half((hv[i] >> (8u * (blk & 3u))) & 255u);
    if (TYPE == T_IQ4_XS) {
        uvec2 h = uvec2(hv[2u * i], hv[2u * i + 1u]);
        float a = float(iq4xs_ls(h, 2u * sub)) * xd[2u * j] * float(lev_idot(qv[2u * i], j, 0u)) +
                  float(iq4xs_ls(h, 2u * sub + 1u)) * xd[2u * j + 1u] * float(lev_idot(qv[2u * i + 1u], j, 8u));
        return unpackHalf2x16(h.x).x * a;
    }
    if (TYPE == T_Q8_0) {
        int acc = 0;
        [[unroll]] for (uint g = 0u; g < 8u; g++)
            acc += sdot4x8(xq[8u * j + g], qv[2u * i + (g >> 2)][g & 3u], 0);
        return half_of(hv[i], blk) * xd[j] * float(acc);
    }
    if (TYPE == T_Q6_K)
        return unit_q6_k_idot(i, blk, sub, j);
    if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
        ivec2 a = TYPE == T_Q5_K ? nib_idot(i, j, true, hv[HW * i + 4u], hv[HW * i + 5u], 0u)
                                 : nib_idot(i, j, false, 0u, 0u, 0u);
        return k_chunk(i, sub, j, vec2(xd[2u * j] * float(a.x), xd[2u * j + 1u] * float(a.y)));
    }
    // the 32-element blocks: d (q - off) or d q + m
    bool five = TYPE == T_Q5_0 || TYPE == T_Q5_1;
    uint hq = five ? hv[2u * i + 1u] : 0u;
    ivec2 a = nib_idot(i, j, five, hq, hq, 4u);
    int q = a.x + a.y;
    float dx = xd[j];
    if (TYPE == T_Q4_0)
        return half_of(hv[i], blk) * dx * float(q - 8 * xqs[j]);
    if (TYPE == T_Q5_0)
        return unpackHalf2x16(hv[2u * i]).x * dx * float(q - 16 * xqs[j]);
    vec2 dm = unpackHalf2x16(TYPE == T_Q4_1 ? hv[i] : hv[2u * i]);
    return dx * (dm.x * float(q) + dm.y * float(xqs[j]));
}
#endif

#include "xs_low.glsl"

// Dot of register set i (block blk, unit sub of it) with this lane's unit j.
float unit_dot(uint i, uint blk, uint sub, uint j, uint u)
{
#ifdef IDOT
    if (IDOT_ON)
        return unit_dot_idot(i, blk, sub, j);
#endif
    if (LOW)
        return unit_dot_low(i, blk, sub, j, u);
    if (TYPE == T_Q4_0)
        return half_of(hv[i], blk) * unit_q4_0(i, j, u);
    if (TYPE == T_Q4_1) {
        vec2 a = nib_dot(i, j, u, 0u), dm = unpackHalf2x16(hv[i]);
        return dm.x * (a.x + a.y) + dm.y * xsum[j];
    }
    if (TYPE == T_Q5_0 || TYPE == T_Q5_1) {
        uint h = hv[2u * i + 1u];
        vec2 a = nib5_dot(i, j, u, h, h, 4u, TYPE == T_Q5_0 ? 16u : 0u), dm = unpackHalf2x16(hv[2u * i]);
        return TYPE == T_Q5_0 ? dm.x * (a.x + a.y) : dm.x * (a.x + a.y) + dm.y * xsum[j];
    }
    if (TYPE == T_Q4_K)
        return k_chunk(i, sub, j, nib_dot(i, j, u, 0u));
    if (TYPE == T_Q5_K)
        return k_chunk(i, sub, j, nib5_dot(i, j, u, hv[HW * i + 4u], hv[HW * i + 5u], 0u, 0u));
    if (TYPE == T_Q8_0)
        return half_of(hv[i], blk) * unit_q8_0(i, j, u);
    if (TYPE == T_Q6_K)
        return unit_q6_k(i, blk, sub, j, u);
    if (TYPE == T_F16) {
        uvec4 w = qv[i];
        return dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), xv(j, 0u, u)) +
               dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), xv(j, 1u, u));
    }
    if (TYPE == T_BF16) {
        uvec4 w = qv[i];
        vec4 a = uintBitsToFloat(uvec4(w.x << 16, w.x & 0xFFFF0000u, w.y << 16, w.y & 0xFFFF0000u));
        vec4 b = uintBitsToFloat(uvec4(w.z << 16, w.z & 0xFFFF0000u, w.w << 16, w.w & 0xFFFF0000u));
        return dot(a, xv(j, 0u, u)) + dot(b, xv(j, 1u, u));
    }
    return dot(uintBitsToFloat(qv[2u * i]), xv(j, 0u, u)) + dot(uintBitsToFloat(qv[2u * i + 1u]), xv(j, 1u, u));
}

// ---- one matrix, R rows per pass -----------------------------------------------------

// Issues the loads of rows row0..row0+R-1 (clamped to nrows-1) of the
// matrix whose first block is mblk0 (bpr blocks per row), this lane's units.
void load_rows(uint s, uint mblk0, uint bpr, uint hbase, uint row0, uint nrows, uint lane, uint nunits, uint set0)
{
    [[unroll]] for (uint r = 0u; r < R; r++) {
        uint rb = mblk0 + min(row0 + r, nrows - 1u) * bpr;
        [[unroll]] for (uint j = 0u; j < J; j++) {
            uint u = min(lane + j * TEAM, nunits - 1u);
            if (s == 0u)
                load_unit(0u, rb + u / UPB, u % UPB, hbase, set0 + r * J + j);
            else if (s == 1u)
                load_unit(1u, rb + u / UPB, u % UPB, hbase, set0 + r * J + j);
            else if (s == 2u)
                load_unit(2u, rb + u / UPB, u % UPB, hbase, set0 + r * J + j);
            else
                load_unit(3u, rb + u / UPB, u % UPB, hbase, set0 + r * J + j);
        }
    }
}

// Partial dot of row r of the last load_rows (register sets set0 + r*J + j).
float row_dot(uint mblk0, uint bpr, uint row, uint nrows, uint lane, uint nunits, uint set0, uint r)
{
    uint rb = mblk0 + min(row, nrows - 1u) * bpr;
    float acc = 0.0;
    [[unroll]] for (uint j = 0u; j < J; j++) {
        uint u = lane + j * TEAM;
        uint uc = min(u, nunits - 1u);
        acc += unit_dot(set0 + r * J + j, rb + uc / UPB, uc % UPB, j, u);
    }
    return acc;
}
