// quant.glsl: decoding the GPU weight layout (gpu/vk_layout.c describes it).
//
// Weights are bound as an array of PC_WEIGHT_SLOTS buffers at binding 0, viewed
// as words (W) and as 16-byte vectors (W4).  A tensor's block i has its quant
// bytes ("body") at byte i*BODY and its scales ("head") at byte
// hbase + i*HEAD of its binding.  The type is always a specialization
// constant at the call sites, so after inlining the driver keeps one branch.
//
// deq4(t, s, blk, g, hbase) returns elements 4g..4g+3 of block `blk` of the
// tensor in weight slot s, exactly as ggml's reference dequantization does.
// The low-bit types' (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, the grid types) are
// in quant_low.glsl; their tables are read through the iq_* functions that
// quant_iq.glsl defines (every kernel includes it once its weight types are
// declared).

#extension GL_EXT_control_flow_attributes : enable
#include "pc_common.h"

layout(set = 0, binding = PC_B_WEIGHTS) readonly buffer WBuf { uint w[]; } W[PC_WEIGHT_SLOTS];
layout(set = 0, binding = PC_B_WEIGHTS) readonly buffer WBuf4 { uvec4 w[]; } W4[PC_WEIGHT_SLOTS];
layout(set = 0, binding = PC_B_WEIGHTS) readonly buffer WBuf2 { uvec2 w[]; } W2[PC_WEIGHT_SLOTS];

const uint T_F32 = 0u;
const uint T_F16 = 1u;
const uint T_Q4_0 = 2u;
const uint T_Q4_1 = 3u;
const uint T_Q5_0 = 6u;
const uint T_Q5_1 = 7u;
const uint T_Q8_0 = 8u;
const uint T_Q2_K = 10u;
const uint T_Q3_K = 11u;
const uint T_Q4_K = 12u;
const uint T_Q5_K = 13u;
const uint T_Q6_K = 14u;
const uint T_IQ2_XXS = 16u;
const uint T_IQ2_XS = 17u;
const uint T_IQ3_XXS = 18u;
const uint T_IQ1_S = 19u;
const uint T_IQ4_NL = 20u;
const uint T_IQ3_S = 21u;
const uint T_IQ2_S = 22u;
const uint T_IQ4_XS = 23u;
const uint T_IQ1_M = 29u;
const uint T_BF16 = 30u;
const uint T_MXFP4 = 39u;

bool is_float_type(uint t) { return t == T_F32 || t == T_F16 || t == T_BF16; }
bool is_k_type(uint t) { return t == T_Q4_K || t == T_Q5_K || t == T_Q6_K; }
// The grid types: magnitudes of groups of 8 (IQ2, IQ1) or 4 (IQ3) from a table.
bool is_grid_type(uint t)
{
    return t == T_IQ2_XXS || t == T_IQ2_XS || t == T_IQ2_S || t == T_IQ3_XXS || t == T_IQ3_S || t == T_IQ1_S ||
           t == T_IQ1_M;
}
// The 16-level types: a 4-bit index into a table of levels.
bool is_level_type(uint t) { return t == T_IQ4_NL || t == T_IQ4_XS || t == T_MXFP4; }
// The low-bit types of quant_low.glsl.
bool is_low_type(uint t) { return t == T_Q2_K || t == T_Q3_K || is_level_type(t) || is_grid_type(t); }

// Elements per block.
uint blk_of(uint t)
{
    return is_float_type(t) ? 8u : t == T_Q4_0 || t == T_Q4_1 || t == T_Q5_0 || t == T_Q5_1 || t == T_Q8_0 ||
                                   t == T_IQ4_NL || t == T_MXFP4 ? 32u : 256u;
}
// Body bytes per block (gpu/vk_layout.c's table).
uint body_of(uint t)
{
    return t == T_F32 ? 32u : (t == T_F16 || t == T_BF16) ? 16u : t == T_Q8_0 ? 32u
         : t == T_Q4_K ? 128u : t == T_Q5_K ? 160u : t == T_Q6_K ? 208u
         : t == T_Q2_K ? 80u : t == T_Q3_K ? 112u : t == T_IQ4_XS ? 128u : t == T_IQ2_XXS ? 64u
         : t == T_IQ2_XS ? 64u : t == T_IQ2_S ? 80u : t == T_IQ3_XXS ? 96u : t == T_IQ3_S ? 112u
         : t == T_IQ1_S ? 48u : t == T_IQ1_M ? 48u : 16u;
}
// Head bytes per block.
uint head_of(uint t)
{
    return is_float_type(t) ? 0u : t == T_MXFP4 ? 1u
         : (t == T_Q4_0 || t == T_Q8_0 || t == T_Q6_K || t == T_Q3_K || t == T_IQ4_NL || t == T_IQ2_XXS ||
            t == T_IQ2_S || t == T_IQ3_XXS || t == T_IQ3_S || t == T_IQ1_S) ? 2u
         : t == T_Q4_1 || t == T_Q2_K ? 4u : (t == T_Q5_0 || t == T_Q5_1 || t == T_IQ4_XS || t == T_IQ1_M) ? 8u
         : t == T_IQ2_XS ? 12u : 16u;
}
// Elements one matvec thread handles per step (a contiguous run).
uint unit_of(uint t)
{
    return is_float_type(t) ? 8u : (t == T_Q4_K || t == T_Q5_K || (is_low_type(t) && blk_of(t) == 256u)) ? 64u : 32u;
}

// The low-bit types' tables (quant_iq.glsl): a grid point of 8 magnitudes
// as bytes (IQ2), of 4 (IQ3), of 8 2-bit codes (IQ1: value + 1 at bit 2j),
// a level (IQ4_NL, IQ4_XS, MXFP4) -- of the table of weight type t.
uvec2 iq_grid8(uint t, uint i);
uint iq_grid4(uint t, uint i);
uint iq_grid1(uint t, uint i);
float iq_level(uint t, uint q);

float head_half(uint s, uint hb)
{
    uint v = W[s].w[hb >> 2];
    return unpackHalf2x16((hb & 2u) != 0u ? (v >> 16) : v).x;
}

vec4 nib_lo(uint v) { return vec4(v & 15u, (v >> 8) & 15u, (v >> 16) & 15u, (v >> 24) & 15u); }
vec4 nib_hi(uint v) { return vec4((v >> 4) & 15u, (v >> 12) & 15u, (v >> 20) & 15u, v >> 28); }
vec4 bytes_signed(uint v)
{
    return vec4(float(int(v << 24) >> 24), float(int(v << 16) >> 24), float(int(v << 8) >> 24), float(int(v) >> 24));
}
// Bit `bit` of each byte of v.
vec4 bytebit(uint v, uint bit) { return vec4((v >> bit) & 1u, (v >> (bit + 8u)) & 1u, (v >> (bit + 16u)) & 1u, (v >> (bit + 24u)) & 1u); }

// Scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (ggml's get_scale_min_k4);
// the 12 scale bytes are head words 1..3.
uint kbyte(uint s, uint hw, uint k) { return (W[s].w[hw + 1u + (k >> 2)] >> (8u * (k & 3u))) & 255u; }
vec2 k_scale_min(uint s, uint hw, uint j)
{
    if (j < 4u)
        return vec2(kbyte(s, hw, j) & 63u, kbyte(s, hw, j + 4u) & 63u);
    uint a = kbyte(s, hw, j + 4u);
    return vec2((a & 15u) | ((kbyte(s, hw, j - 4u) >> 6) << 4), (a >> 4) | ((kbyte(s, hw, j) >> 6) << 4));
}

#include "quant_low.glsl"

vec4 deq4(uint t, uint s, uint blk, uint g, uint hbase)
{
    uint bw = blk * (body_of(t) >> 2);        // body word of the block
    uint hb = hbase + blk * head_of(t);       // head byte of the block
    if (is_low_type(t))
        return deq4_low(t, s, bw, hb, g);
    if (t == T_F32)
        return uintBitsToFloat(W4[s].w[(bw >> 2) + g]);
    if (t == T_F16) {
        uint a = W[s].w[bw + 2u * g], b = W[s].w[bw + 2u * g + 1u];
        return vec4(unpackHalf2x16(a), unpackHalf2x16(b));
    }
    if (t == T_BF16) {
        uint a = W[s].w[bw + 2u * g], b = W[s].w[bw + 2u * g + 1u];
        return vec4(uintBitsToFloat(a << 16), uintBitsToFloat(a & 0xffff0000u), uintBitsToFloat(b << 16),
                    uintBitsToFloat(b & 0xffff0000u));
    }
    if (t == T_Q4_0) {
        uint v = W[s].w[bw + (g & 3u)];
        vec4 q = g < 4u ? nib_lo(v) : nib_hi(v);
        return head_half(s, hb) * (q - 8.0);
    }
    if (t == T_Q4_1) {
        uint v = W[s].w[bw + (g & 3u)];
        vec4 q = g < 4u ? nib_lo(v) : nib_hi(v);
        vec2 dm = unpackHalf2x16(W[s].w[hb >> 2]);
        return dm.x * q + dm.y;
    }
    if (t == T_Q5_0 || t == T_Q5_1) {
        // the fifth bits in vk_layout.c's order: element 4g+i at bit 8i + (g+4)%8
        uint v = W[s].w[bw + (g & 3u)];
        uint qh = W[s].w[(hb >> 2) + 1u];
        vec4 q = (g < 4u ? nib_lo(v) : nib_hi(v)) + 16.0 * bytebit(qh, (g + 4u) & 7u);
        if (t == T_Q5_0)
            return head_half(s, hb) * (q - 16.0);
        vec2 dm = unpackHalf2x16(W[s].w[hb >> 2]);
        return dm.x * q + dm.y;
    }
    if (t == T_Q8_0)
        return head_half(s, hb) * bytes_signed(W[s].w[bw + g]);
    if (t == T_Q4_K || t == T_Q5_K) {
        // Element 4g: 64-element chunk c = g/16; its first 32 elements use the
        // low nibbles of qs[32c..32c+32), the next 32 the high nibbles.
        uint c = g >> 4, hi = (g >> 3) & 1u;
        uint v = W[s].w[bw + 8u * c + (g & 7u)];
        vec4 q = hi == 0u ? nib_lo(v) : nib_hi(v);
        // Q5_K: sub-block 2c+hi's fifth bits in body word 32 + 2c + hi
        // (vk_layout.c's order: element 4k+i at bit 8i + (k+4)%8)
        if (t == T_Q5_K)
            q += 16.0 * bytebit(W[s].w[bw + 32u + 2u * c + hi], ((g & 7u) + 4u) & 7u);
        uint hw = hb >> 2;
        vec2 dm = unpackHalf2x16(W[s].w[hw]);
        vec2 sm = k_scale_min(s, hw, 2u * c + hi);
        return dm.x * sm.x * q - dm.y * sm.y;
    }
    // Q6_K: element e = 4g; half h = e/128, within it j = (e%128)/32, l = e%32.
    uint h = g >> 5, j = (g >> 3) & 3u, l = 4u * (g & 7u);
    uint ql = W[s].w[bw + 16u * h + (g & 7u) + 8u * (j & 1u)];
    uint qh = W[s].w[bw + 32u + 8u * h + (g & 7u)];
    vec4 lo = (j >> 1) == 0u ? nib_lo(ql) : nib_hi(ql);
    vec4 hb4 = vec4((qh >> (2u * j)) & 3u, (qh >> (2u * j + 8u)) & 3u, (qh >> (2u * j + 16u)) & 3u,
                    (qh >> (2u * j + 24u)) & 3u);
    uint k = 8u * h + (l >> 4) + 2u * j;       // scale index
    float sc = float(int(W[s].w[bw + 48u + (k >> 2)] << (24u - 8u * (k & 3u))) >> 24);
    return head_half(s, hb) * sc * (lo + 16.0 * hb4 - 32.0);
}
