// mm_weights.glsl: a 16-element segment of a weight row for the prefill
// mat-mats (mm_coop.comp, mm.comp): the loads of its raw words (w_fetch)
// apart from their decoding (w_codes, w_values), so a kernel can issue the
// next step's loads before it decodes this step's.  Segment h (0 or 1) of
// the 32-element group starting at k0 (a multiple of 32): such a group never
// straddles a block or a K-quant sub-block.  Layout: gpu/vk_layout.c.
// Needs quant.glsl and the kernel's pc.Kp.  F32 rows are not read here.

struct WRaw {
    uvec4 lo, hi;   // body words (F16/BF16: the 16 values); Q6_K: ql, qh; Q5_K: hi.x its fifth bits
    uvec4 hd;       // scale words (head)
};

// fresh false: the scale words that serve more than one group (Q4_0 /
// Q8_0's head word, the K-quants' head; Q6_K: its d word) are hd0's, from
// the same thread's previous group of the block, instead of loaded again.
// (The low-bit types always load theirs: mm_weights_low.glsl.)
#include "mm_weights_low.glsl"

WRaw w_fetch(uint t, uint s, uint rb, uint hbase, bool row_in, uint k0, uint h, uvec4 hd0, bool fresh)
{
    WRaw r;
    r.lo = uvec4(0u);
    r.hi = uvec4(0u);
    r.hd = uvec4(0u);
    uint k = k0 + 16u * h;
    if (!row_in || k >= pc.Kp)
        return r;
    if (is_low_type(t))
        return w_fetch_low(t, s, rb, hbase, k0, h);
    if (t == T_F16 || t == T_BF16) {
        // 8 elements per 16-byte block; rows end on a multiple of 8
        r.lo = W4[s].w[rb + k / 8u];
        if (k + 8u < pc.Kp)
            r.hi = W4[s].w[rb + k / 8u + 1u];
        return r;
    }
    if (!is_k_type(t)) {
        uint blk = rb + k0 / 32u;
        if (t == T_Q8_0) {
            r.lo = W4[s].w[2u * blk + h];
            r.hd.x = fresh ? W[s].w[(hbase >> 2) + (blk >> 1)] : hd0.x;
        } else {
            r.lo = W4[s].w[blk];                     // 16 bytes, 32 nibbles
            if (t == T_Q4_0)
                r.hd.x = fresh ? W[s].w[(hbase >> 2) + (blk >> 1)] : hd0.x;
            else if (t == T_Q4_1)
                r.hd.x = W[s].w[(hbase >> 2) + blk];
            else
                r.hd.xy = W2[s].w[(hbase >> 3) + blk];
        }
        return r;
    }
    uint blk = rb + k0 / 256u, j = (k0 % 256u) / 32u;     // sub-block j of the block
    if (t == T_Q4_K || t == T_Q5_K) {
        r.lo = W4[s].w[blk * (t == T_Q5_K ? 10u : 8u) + 2u * (j >> 1) + h];
        r.hd = fresh ? W4[s].w[(hbase >> 4) + blk] : hd0;
        if (t == T_Q5_K)
            r.hi.x = W[s].w[blk * 40u + 32u + j];
        return r;
    }
    // Q6_K: half hh = j/4, row jj = j%4 of it (see quant.glsl)
    uint hh = j >> 2, jj = j & 3u;
    r.lo = W4[s].w[blk * 13u + 4u * hh + 2u * (jj & 1u) + h];
    r.hi = W4[s].w[blk * 13u + 8u + 2u * hh + h];
    r.hd.x = W[s].w[blk * 52u + 48u + ((8u * hh + h + 2u * jj) >> 2)];
    r.hd.y = fresh ? W[s].w[(hbase >> 2) + (blk >> 1)] : hd0.y;
    return r;
}

WRaw w_fetch(uint t, uint s, uint rb, uint hbase, bool row_in, uint k0, uint h)
{
    return w_fetch(t, s, rb, hbase, row_in, k0, h, uvec4(0u), true);
}

// Segment 1 of the group whose segment 0 w_fetch gave as r0: only the words
// that differ are loaded.  Both segments share every type's scale words
// (hd; Q6_K's sub-block scales too: one word for h 0 and 1), Q4_0/Q4_1/
// Q5_0/Q5_1's body word (its 32 nibbles) and Q5_K's fifth-bits word.
WRaw w_fetch_second(uint t, uint s, uint rb, uint hbase, bool row_in, uint k0, WRaw r0)
{
    if (t == T_Q4_0 || t == T_Q4_1 || t == T_Q5_0 || t == T_Q5_1)
        return r0;
    if (is_low_type(t))
        return w_fetch(t, s, rb, hbase, row_in, k0, 1u, uvec4(0u), true);
    WRaw r;
    r.lo = uvec4(0u);
    r.hi = uvec4(0u);
    r.hd = r0.hd;
    uint k = k0 + 16u;
    if (!row_in || k >= pc.Kp)
        return r;
    if (t == T_F16 || t == T_BF16) {
        r.lo = W4[s].w[rb + k / 8u];
        if (k + 8u < pc.Kp)
            r.hi = W4[s].w[rb + k / 8u + 1u];
        return r;
    }
    if (t == T_Q8_0) {
        r.lo = W4[s].w[2u * (rb + k0 / 32u) + 1u];
        return r;
    }
    uint blk = rb + k0 / 256u, j = (k0 % 256u) / 32u;
    if (t == T_Q4_K || t == T_Q5_K) {
        r.lo = W4[s].w[blk * (t == T_Q5_K ? 10u : 8u) + 2u * (j >> 1) + 1u];
        r.hi.x = r0.hi.x;
        return r;
    }
    uint hh = j >> 2, jj = j & 3u;
    r.lo = W4[s].w[blk * 13u + 4u * hh + 2u * (jj & 1u) + 1u];
    r.hi = W4[s].w[blk * 13u + 8u + 2u * hh + 1u];
    return r;
}

// The fifth bits of runs 4h .. 4h + 3 moved to bit 4 of each byte (vk_layout.c's
// qh': run s's bits are bit s of each byte): one shift by 4h, then the
// runs' constant shifts -- w << 4 keeps bits 0-27, all that runs 4-7 need.
uvec4 qh_runs(uint w, uint h)
{
    return (uvec4(w << (4u * h)) >> uvec4(0u, 1u, 2u, 3u)) & 0x10101010u;
}

// The 16 codes of a quantized segment, one per byte (element 4k + i: byte i
// of word k): nibbles, 5- and 6-bit values, Q8_0's bytes + 128.
uvec4 w_codes(uint t, uint k0, uint h, WRaw r)
{
    if (t == T_Q8_0)
        return r.lo ^ 0x80808080u;
    if (!is_k_type(t)) {
        // element 16h + 4k + i: nibble h of byte 4k + i
        uvec4 n = (r.lo >> (4u * h)) & 0x0f0f0f0fu;
        if (t == T_Q5_0 || t == T_Q5_1)
            n |= qh_runs(r.hd.y, h);
        return n;
    }
    uint j = (k0 % 256u) / 32u;
    if (t == T_Q4_K || t == T_Q5_K) {
        // sub-block j: nibble j%2 of its chunk's bytes
        uvec4 n = (r.lo >> (4u * (j & 1u))) & 0x0f0f0f0fu;
        if (t == T_Q5_K)
            n |= qh_runs(r.hi.x, h);
        return n;
    }
    // Q6_K: a nibble of ql and two bits of qh
    uint jj = j & 3u;
    return ((r.lo >> (4u * (jj >> 1))) & 0x0f0f0f0fu) | (((r.hi >> (2u * jj)) & 0x03030303u) << 4);
}

// Scale and minimum of sub-block j of a Q4_K/Q5_K block from its head
// words (ggml's get_scale_min_k4; scale bytes 0..11 in words 1..3).  The
// bytes it reads are byte j % 4 of each word (j, j + 4 / j - 4, j, j + 4),
// so the three words are shifted once by that byte and read at fixed
// places (no indexing of hd by j).
uvec2 head_scale_min(uvec4 hd, uint j)
{
    uint sh = 8u * (j & 3u), b0 = hd.y >> sh, b1 = hd.z >> sh;
    if (j < 4u)
        return uvec2(b0 & 63u, b1 & 63u);
    uint b2 = hd.w >> sh;
    return uvec2((b2 & 15u) | ((b0 >> 2) & 48u), ((b2 >> 4) & 15u) | ((b1 >> 2) & 48u));
}

// The segment's values are a * code + b with one (a, b) per segment: Q4_0
// (d, -8d), Q5_0 (d, -16d), Q8_0 (d, -128d), Q4_1/Q5_1 (d, m), Q4_K/Q5_K
// (d sc, -dmin m), Q6_K (d sc, -32 d sc).  Every a and b is exact in fp32.
vec2 w_affine(uint t, uint rb, uint k0, uint h, WRaw r)
{
    if (!is_k_type(t)) {
        uint blk = rb + k0 / 32u;
        // Q4_0 / Q8_0: two blocks' 2-byte scales per head word; the others' d first in theirs
        vec2 dm = unpackHalf2x16(t == T_Q4_0 || t == T_Q8_0 ? r.hd.x >> (16u * (blk & 1u)) : r.hd.x);
        if (t == T_Q4_1 || t == T_Q5_1)
            return dm;
        return vec2(dm.x, -dm.x * (t == T_Q4_0 ? 8.0 : t == T_Q5_0 ? 16.0 : 128.0));
    }
    uint j = (k0 % 256u) / 32u;
    if (t == T_Q4_K || t == T_Q5_K) {
        vec2 dm = unpackHalf2x16(r.hd.x), sm = vec2(head_scale_min(r.hd, j));
        return vec2(dm.x * sm.x, -(dm.y * sm.y));
    }
    uint blk = rb + k0 / 256u, si = (8u * (j >> 2) + h + 2u * (j & 3u)) & 3u;
    float a = unpackHalf2x16(r.hd.y >> (16u * (blk & 1u))).x * float(int(r.hd.x << (24u - 8u * si)) >> 24);
    return vec2(a, -32.0 * a);
}

// Bytes of n as floats, by exponent bits.
vec4 byte_f(uint n)
{
    return uintBitsToFloat(uvec4(n & 0xffu, (n >> 8) & 0xffu, (n >> 16) & 0xffu, n >> 24) | 0x4B000000u) -
           8388608.0;
}

// The segment's 16 values in fp32 (v[k]: elements 4k..4k+3), each exactly
// as ggml's dequantization up to one fp32 rounding of a * code + b.
void w_values(uint t, uint rb, uint k0, uint h, WRaw r, out vec4 v[4])
{
    if (is_low_type(t)) {
        w_values_low(t, rb, k0, h, r, v);
        return;
    }
    if (t == T_F16 || t == T_BF16) {
        uvec4 w[2] = uvec4[2](r.lo, r.hi);
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uvec2 p = uvec2(w[k >> 1][2u * (k & 1u)], w[k >> 1][2u * (k & 1u) + 1u]);
            v[k] = t == T_F16 ? vec4(unpackHalf2x16(p.x), unpackHalf2x16(p.y))
                              : uintBitsToFloat(uvec4(p.x << 16, p.x & 0xffff0000u, p.y << 16, p.y & 0xffff0000u));
        }
        return;
    }
    uvec4 n = w_codes(t, k0, h, r);
    vec2 ab = w_affine(t, rb, k0, h, r);
    [[unroll]] for (uint k = 0u; k < 4u; k++)
        v[k] = fma(vec4(ab.x), byte_f(n[k]), vec4(ab.y));
}
