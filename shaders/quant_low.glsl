// quant_low.glsl: the low-bit weight types in the GPU layout (gpu/vk_layout.c):
// Q2_K, Q3_K, the 16-level types (IQ4_NL, IQ4_XS, MXFP4) and the grid types
// (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M).  Included by
// quant.glsl: the scale helpers every kernel family shares and deq4_low,
// quant.glsl's deq4 for these types (values exactly as ggml's reference
// dequantization: the same products in the same order).
//
// Tables (grids, levels) come through quant.glsl's iq_* declarations, which
// quant_iq.glsl defines over shared memory.  Signs: the IQ2 / IQ3_XXS 7-bit
// sign indices are expanded with their parity bit (ggml's ksigns table is
// exactly i | parity(i) << 7), so no table is needed for them.

// The half of block blk from a word holding two blocks' (2-byte heads).
float half_of_word(uint w, uint blk) { return unpackHalf2x16((blk & 1u) != 0u ? w >> 16 : w).x; }

// The 8 signs of a group from a 7-bit index (bit 7: even count of minus signs).
uint ksign8(uint i7) { return i7 | ((bitCount(i7) & 1u) << 7); }

// MXFP4's scale 2^(e-128) (ggml keeps the e2m1 levels doubled): e < 2 give
// fp32 subnormals, which a device may flush to zero (no file has them).
float e8m0_half(uint e) { return uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23); }

// The f16 of IQ1_M's block from the top nibbles of its four scale halfwords.
float iq1m_d(uvec2 sc)
{
    uint d16 = ((sc.x >> 12) & 0xFu) | ((sc.x >> 24) & 0xF0u) | ((sc.y >> 4) & 0xF00u) | ((sc.y >> 16) & 0xF000u);
    return unpackHalf2x16(d16).x;
}

// IQ1_M's odd scale 2 * s + 1 of the 16 elements q (0..3) of the 32 of ib32
// parity ibl, from the halfword of its ib32 pair.
float iq1m_scale(uint hw, uint ibl, uint q) { return float(2u * ((hw >> (6u * ibl + 3u * q)) & 7u) + 1u); }

// IQ4_XS's sub-block ib scale (ls - 32) from its head words (d | scales_h << 16, scales_l).
int iq4xs_ls(uvec2 h, uint ib) { return int(((h.y >> (4u * ib)) & 15u) | (((h.x >> (16u + 2u * ib)) & 3u) << 4)) - 32; }

// The four bytes of w as floats.
vec4 bytes4(uint w) { return vec4(w & 255u, (w >> 8) & 255u, (w >> 16) & 255u, w >> 24); }

// db * m_i, negated where bit i of s is set: ggml's (db * grid[i]) * +-1.
vec4 signed4(float db, uint mag, uint s)
{
    vec4 sg = vec4(1.0) - 2.0 * vec4(s & 1u, (s >> 1) & 1u, (s >> 2) & 1u, (s >> 3) & 1u);
    return (db * bytes4(mag)) * sg;
}

// dl * (c_i - 1 + delta) for IQ1's 2-bit codes c_i at bits 2i of p.
vec4 shifted4(float dl, uint p, float delta)
{
    vec4 c = vec4(p & 3u, (p >> 2) & 3u, (p >> 4) & 3u, (p >> 6) & 3u) - 1.0;
    return dl * (c + delta);
}

// Q2_K / Q3_K element e of a block: 128-element half n, row j of four
// sharing a code byte, the unit's half h and word k (gpu/vk_layout.c).
uvec4 k2_place(uint e) { return uvec4(e >> 7, (e >> 5) & 3u, (e >> 4) & 1u, (e >> 2) & 3u); }

// Q3_K's third bits of run (j, k) from hm' word hw, at bit 2 of each byte.
uint q3_hbits(uint hw, uint j, uint k)
{
    uint s = 4u * (j & 1u) + k;
    return (s >= 2u ? hw >> (s - 2u) : hw << (2u - s)) & 0x04040404u;
}

// Elements 4g..4g+3 of the block whose body starts at word bw and head at
// byte hb, type t.
vec4 deq4_low(uint t, uint s, uint bw, uint hb, uint g)
{
    if (t == T_Q2_K || t == T_Q3_K) {
        uvec4 p = k2_place(4u * g);
        uint u = 2u * p.x + p.z;
        uint q = (W[s].w[bw + 8u * p.x + 4u * p.z + p.w] >> (2u * p.y)) & 0x03030303u;
        if (t == T_Q2_K) {
            uint sc = (W[s].w[bw + 16u + u] >> (8u * p.y)) & 255u;
            vec2 dm = unpackHalf2x16(W[s].w[hb >> 2]);
            float dl = dm.x * float(sc & 15u), ml = dm.y * float(sc >> 4);
            return dl * bytes4(q) - ml;
        }
        q |= q3_hbits(W[s].w[bw + 16u + 2u * u + (p.y >> 1)], p.y, p.w);
        float dl = head_half(s, hb) * float(int(W[s].w[bw + 24u + u] << (24u - 8u * p.y)) >> 24);
        return dl * (bytes4(q) - 4.0);
    }
    if (t == T_IQ4_NL || t == T_MXFP4 || t == T_IQ4_XS) {
        // 32-element (sub-)block sb: low nibbles of its 16 bytes, then high
        uint sb = t == T_IQ4_XS ? g >> 3 : 0u, gg = g & 7u;
        uint v = W[s].w[bw + 4u * sb + (gg & 3u)] >> (gg < 4u ? 0u : 4u);
        vec4 lv = vec4(iq_level(t, v & 15u), iq_level(t, (v >> 8) & 15u), iq_level(t, (v >> 16) & 15u),
                       iq_level(t, (v >> 24) & 15u));
        if (t == T_MXFP4)
            return lv * e8m0_half((W[s].w[hb >> 2] >> (8u * (hb & 3u))) & 255u);
        if (t == T_IQ4_NL)
            return head_half(s, hb) * lv;
        uvec2 h = W2[s].w[hb >> 3];
        return (unpackHalf2x16(h.x).x * float(iq4xs_ls(h, sb))) * lv;
    }
    // the grid types: 32-element ib, group of 8 l (IQ3: groups of 4, gi = g)
    uint ib = g >> 3, l = (g >> 1) & 3u, hh = g & 1u;
    if (t == T_IQ2_XXS) {
        uint aux = W[s].w[bw + 2u * ib + 1u];
        uvec2 p = iq_grid8(t, (W[s].w[bw + 2u * ib] >> (8u * l)) & 255u);
        float db = head_half(s, hb) * (0.5 + float(aux >> 28)) * 0.25;
        return signed4(db, hh == 0u ? p.x : p.y, ksign8((aux >> (7u * l)) & 127u) >> (4u * hh));
    }
    if (t == T_IQ2_XS) {
        uint q = (W[s].w[bw + 2u * ib + (l >> 1)] >> (16u * (l & 1u))) & 0xFFFFu;
        uint sc = (W[s].w[(hb >> 2) + 1u + (ib >> 2)] >> (8u * (ib & 3u) + 4u * (l >> 1))) & 15u;
        uvec2 p = iq_grid8(t, q & 511u);
        float db = head_half(s, hb) * (0.5 + float(sc)) * 0.25;
        return signed4(db, hh == 0u ? p.x : p.y, ksign8(q >> 9) >> (4u * hh));
    }
    if (t == T_IQ2_S) {
        uint u = ib >> 1, ibl = ib & 1u, grp = 4u * ibl + l;
        uint meta = W[s].w[bw + 16u + u];
        uint idx = ((W[s].w[bw + 4u * u + (grp >> 2)] >> (8u * (grp & 3u))) & 255u) |
                   (((meta >> (8u * ibl + 2u * l)) & 3u) << 8);
        uint sg = (W[s].w[bw + 4u * u + 2u + (grp >> 2)] >> (8u * (grp & 3u))) & 255u;
        uint sc = (meta >> (16u + 8u * ibl + 4u * (l >> 1))) & 15u;
        uvec2 p = iq_grid8(t, idx);
        float db = head_half(s, hb) * (0.5 + float(sc)) * 0.25;
        return signed4(db, hh == 0u ? p.x : p.y, sg >> (4u * hh));
    }
    if (t == T_IQ3_XXS) {
        uint aux = W[s].w[bw + 16u + ib];
        uint mag = iq_grid4(t, (W[s].w[bw + (g >> 2)] >> (8u * (g & 3u))) & 255u);
        float db = head_half(s, hb) * (0.5 + float(aux >> 28)) * 0.5;
        return signed4(db, mag, ksign8((aux >> (7u * l)) & 127u) >> (4u * hh));
    }
    if (t == T_IQ3_S) {
        uint meta = W[s].w[bw + 24u + (ib >> 1)];
        uint idx = ((W[s].w[bw + (g >> 2)] >> (8u * (g & 3u))) & 255u) | (((meta >> (8u * (ib & 1u) + (g & 7u))) & 1u) << 8);
        uint sg = (W[s].w[bw + 16u + (g >> 3)] >> (8u * ((g >> 1) & 3u) + 4u * hh)) & 15u;
        float db = head_half(s, hb) * float(1u + 2u * ((meta >> (16u + 4u * (ib & 1u))) & 15u));
        return signed4(db, iq_grid4(t, idx), sg);
    }
    // IQ1_S, IQ1_M: an 11-bit index per group of 8 (8 bits in qs, 3 in qh)
    uint qs = (W[s].w[bw + (g >> 3)] >> (8u * ((g >> 1) & 3u))) & 255u;
    if (t == T_IQ1_S) {
        uint qh = (W[s].w[bw + 8u + (ib >> 1)] >> (16u * (ib & 1u))) & 0xFFFFu;
        uint p = iq_grid1(t, qs | (((qh >> (3u * l)) & 7u) << 8));
        float dl = head_half(s, hb) * float(2u * ((qh >> 12) & 7u) + 1u);
        return shifted4(dl, p >> (8u * hh), (qh & 0x8000u) != 0u ? -0.125 : 0.125);
    }
    uint qh = (W[s].w[bw + 8u + (g >> 4)] >> (8u * ((g >> 2) & 3u) + 4u * (l & 1u))) & 15u;
    uvec2 sc = W2[s].w[hb >> 3];
    uint hw = ((ib >> 1) < 2u ? sc.x : sc.y) >> (16u * ((ib >> 1) & 1u));
    float dl = iq1m_d(sc) * iq1m_scale(hw, ib & 1u, l >> 1);
    uint p = iq_grid1(t, qs | ((qh & 7u) << 8));
    return shifted4(dl, p >> (8u * hh), (qh & 8u) != 0u ? -0.125 : 0.125);
}
