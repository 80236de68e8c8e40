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

WRaw w_fetch(uint t, uint s, uint rb, uint hbase, bool row_in, uint k0, uint h)
{
    WRaw r;
    r.lo = uvec4(0u);
    r.hi = uvec4(0u);
    r.hd = uvec4(0u);
    uint k = k0 + 16u * h;
    if (!row_in || k >= pc.Kp)
        return r;
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
            r.hd.x = W[s].w[(hbase >> 2) + (blk >> 1)];
        } else {
            r.lo = W4[s].w[blk];                     // 16 bytes, 32 nibbles
            if (t == T_Q4_0)
                r.hd.x = W[s].w[(hbase >> 2) + (blk >> 1)];
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
        r.hd = W4[s].w[(hbase >> 4) + blk];
        if (t == T_Q5_K)
            r.hi.x = W[s].w[blk * 40u + 32u + j];
        return r;
    }
    // Q6_K: half hh = j/4, row jj = j%4 of it (see quant.glsl)
    uint hh = j >> 2, jj = j & 3u;
    r.lo = W4[s].w[blk * 13u + 4u * hh + 2u * (jj & 1u) + h];
    r.hi = W4[s].w[blk * 13u + 8u + 2u * hh + h];
    r.hd.x = W[s].w[blk * 52u + 48u + ((8u * hh + h + 2u * jj) >> 2)];
    r.hd.y = W[s].w[(hbase >> 2) + (blk >> 1)];
    return r;
}

// The fifth bits of run s moved to bit 4 of each byte (vk_layout.c's qh').
uint qh_bits(uint w, uint s) { return (s < 4u ? w >> s : w << (8u - s)) & 0x10101010u; }

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
            n |= uvec4(qh_bits(r.hd.y, 4u * h), qh_bits(r.hd.y, 4u * h + 1u), qh_bits(r.hd.y, 4u * h + 2u),
                       qh_bits(r.hd.y, 4u * h + 3u));
        return n;
    }
    uint j = (k0 % 256u) / 32u;
    if (t == T_Q4_K || t == T_Q5_K) {
        // sub-block j: nibble j%2 of its chunk's bytes
        uvec4 n = (r.lo >> (4u * (j & 1u))) & 0x0f0f0f0fu;
        if (t == T_Q5_K)
            n |= uvec4(qh_bits(r.hi.x, 4u * h), qh_bits(r.hi.x, 4u * h + 1u), qh_bits(r.hi.x, 4u * h + 2u),
                       qh_bits(r.hi.x, 4u * h + 3u));
        return n;
    }
    // Q6_K: a nibble of ql and two bits of qh
    uint jj = j & 3u;
    return ((r.lo >> (4u * (jj >> 1))) & 0x0f0f0f0fu) | (((r.hi >> (2u * jj)) & 0x03030303u) << 4);
}

// Scale and minimum of sub-block j of a Q4_K/Q5_K block from its head
// words (ggml's get_scale_min_k4; scale bytes in words 1..3).
uint head_byte(uvec4 hd, uint i) { return (hd[1u + (i >> 2)] >> (8u * (i & 3u))) & 255u; }
uvec2 head_scale_min(uvec4 hd, uint j)
{
    if (j < 4u)
        return uvec2(head_byte(hd, j) & 63u, head_byte(hd, j + 4u) & 63u);
    return uvec2((head_byte(hd, j + 4u) & 15u) | ((head_byte(hd, j - 4u) >> 6) << 4),
                 (head_byte(hd, j + 4u) >> 4) | ((head_byte(hd, j) >> 6) << 4));
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
