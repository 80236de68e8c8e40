// mm_weights_low.glsl: mm_weights.glsl's 16-element weight segments for the
// low-bit types (Q2_K, Q3_K, the 16-level and the grid types): the raw words
// of segment h of the 32-element group at k0 (w_fetch_low; a group is one
// block of IQ4_NL / MXFP4, one 32-element ib of the 256-element types; for
// Q2_K / Q3_K row j%4 of half j/4 of the block, k2_place) and their values
// (w_values_low), each exactly as ggml's reference dequantization
// (quant_low.glsl's helpers, the same products in the same order).
// Layout: gpu/vk_layout.c.  Needs quant.glsl, quant_iq.glsl's tables.

WRaw w_fetch_low(uint t, uint s, uint rb, uint hbase, uint k0, uint h)
{
    WRaw r;
    r.lo = uvec4(0u);
    r.hi = uvec4(0u);
    r.hd = uvec4(0u);
    uint blk = rb + k0 / blk_of(t), j = (k0 % 256u) / 32u;
    uint bw = blk * (body_of(t) >> 2), hb = hbase + blk * head_of(t);
    if (t == T_Q2_K || t == T_Q3_K) {
        uint u = 2u * (j >> 2) + h;            // the unit of rows (j/4, h)
        if (t == T_Q2_K) {
            r.lo = W4[s].w[blk * 5u + u];
            r.hd.x = W[s].w[bw + 16u + u];
            r.hd.y = W[s].w[hb >> 2];
        } else {
            r.lo = W4[s].w[blk * 7u + u];
            r.hd.x = W[s].w[bw + 16u + 2u * u + ((j & 3u) >> 1)];
            r.hd.y = W[s].w[bw + 24u + u];
            r.hd.z = W[s].w[hb >> 2];
        }
    } else if (t == T_IQ4_NL || t == T_MXFP4) {
        r.lo = W4[s].w[blk];
        r.hd.x = W[s].w[hb >> 2];
    } else if (t == T_IQ4_XS) {
        r.lo = W4[s].w[blk * 8u + j];
        r.hd.xy = W2[s].w[hb >> 3];
    } else if (t == T_IQ2_XXS) {
        r.lo.xy = W2[s].w[blk * 8u + j];
        r.hd.x = W[s].w[hb >> 2];
    } else if (t == T_IQ2_XS) {
        r.lo.x = W[s].w[bw + 2u * j + h];
        r.hd.x = W[s].w[hb >> 2];
        r.hd.y = W[s].w[(hb >> 2) + 1u + (j >> 2)];
    } else if (t == T_IQ2_S) {
        uint u = j >> 1;
        r.lo.x = W[s].w[bw + 4u * u + (j & 1u)];
        r.lo.y = W[s].w[bw + 4u * u + 2u + (j & 1u)];
        r.hd.x = W[s].w[bw + 16u + u];
        r.hd.y = W[s].w[hb >> 2];
    } else if (t == T_IQ3_XXS) {
        r.lo.x = W[s].w[bw + 2u * j + h];
        r.hd.x = W[s].w[bw + 16u + j];
        r.hd.y = W[s].w[hb >> 2];
    } else if (t == T_IQ3_S) {
        r.lo.x = W[s].w[bw + 2u * j + h];
        r.lo.y = W[s].w[bw + 16u + j];
        r.hd.x = W[s].w[bw + 24u + (j >> 1)];
        r.hd.y = W[s].w[hb >> 2];
    } else if (t == T_IQ1_S) {
        r.lo.x = W[s].w[bw + j];
        r.hd.x = W[s].w[bw + 8u + (j >> 1)];
        r.hd.y = W[s].w[hb >> 2];
    } else {  // IQ1_M
        r.lo.x = W[s].w[bw + j];
        r.hd.x = W[s].w[bw + 8u + (j >> 1)];
        r.hd.yz = W2[s].w[hb >> 3];
    }
    return r;
}

void w_values_low(uint t, uint rb, uint k0, uint h, WRaw r, out vec4 v[4])
{
    uint blk = rb + k0 / blk_of(t), j = (k0 % 256u) / 32u;
    if (t == T_Q2_K || t == T_Q3_K) {
        uint jj = j & 3u;
        if (t == T_Q2_K) {
            uint sc = (r.hd.x >> (8u * jj)) & 255u;
            vec2 dm = unpackHalf2x16(r.hd.y);
            float dl = dm.x * float(sc & 15u), ml = dm.y * float(sc >> 4);
            [[unroll]] for (uint k = 0u; k < 4u; k++)
                v[k] = dl * bytes4((r.lo[k] >> (2u * jj)) & 0x03030303u) - ml;
        } else {
            float dl = half_of_word(r.hd.z, blk) * float(int(r.hd.y << (24u - 8u * jj)) >> 24);
            [[unroll]] for (uint k = 0u; k < 4u; k++)
                v[k] = dl * (bytes4(((r.lo[k] >> (2u * jj)) & 0x03030303u) | q3_hbits(r.hd.x, jj, k)) - 4.0);
        }
        return;
    }
    if (is_level_type(t)) {
        float d = t == T_IQ4_NL ? half_of_word(r.hd.x, blk)
                : t == T_MXFP4  ? e8m0_half((r.hd.x >> (8u * (blk & 3u))) & 255u)
                                : unpackHalf2x16(r.hd.x).x * float(iq4xs_ls(r.hd.xy, j));
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uint a = r.lo[k] >> (4u * h);
            vec4 lv = vec4(iq_level(t, a & 15u), iq_level(t, (a >> 8) & 15u), iq_level(t, (a >> 16) & 15u),
                           iq_level(t, (a >> 24) & 15u));
            v[k] = t == T_MXFP4 ? lv * d : d * lv;
        }
        return;
    }
    if (t == T_IQ2_XXS || t == T_IQ2_XS || t == T_IQ2_S) {
        // two groups of 8: l = 2h, 2h + 1 of the ib
        float db;
        if (t == T_IQ2_XXS)
            db = half_of_word(r.hd.x, blk) * (0.5 + float(r.lo.y >> 28)) * 0.25;
        else if (t == T_IQ2_XS)
            db = unpackHalf2x16(r.hd.x).x * (0.5 + float((r.hd.y >> (8u * (j & 3u) + 4u * h)) & 15u)) * 0.25;
        else
            db = half_of_word(r.hd.y, blk) * (0.5 + float((r.hd.x >> (16u + 8u * (j & 1u) + 4u * h)) & 15u)) * 0.25;
        [[unroll]] for (uint gl = 0u; gl < 2u; gl++) {
            uint l = 2u * h + gl, idx, sg;
            if (t == T_IQ2_XXS) {
                idx = (r.lo.x >> (8u * l)) & 255u;
                sg = ksign8((r.lo.y >> (7u * l)) & 127u);
            } else if (t == T_IQ2_XS) {
                uint w = (r.lo.x >> (16u * gl)) & 0xFFFFu;
                idx = w & 511u;
                sg = ksign8(w >> 9);
            } else {
                idx = ((r.lo.x >> (8u * l)) & 255u) | (((r.hd.x >> (8u * (j & 1u) + 2u * l)) & 3u) << 8);
                sg = (r.lo.y >> (8u * l)) & 255u;
            }
            uvec2 p = iq_grid8(t, idx);
            v[2u * gl] = signed4(db, p.x, sg);
            v[2u * gl + 1u] = signed4(db, p.y, sg >> 4);
        }
        return;
    }
    if (t == T_IQ3_XXS || t == T_IQ3_S) {
        // four groups of 4: 4h + q of the ib's 8
        float db = t == T_IQ3_XXS ? half_of_word(r.hd.y, blk) * (0.5 + float(r.hd.x >> 28)) * 0.5
                                  : half_of_word(r.hd.y, blk) * float(1u + 2u * ((r.hd.x >> (16u + 4u * (j & 1u))) & 15u));
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            uint g8 = 4u * h + q, idx = (r.lo.x >> (8u * q)) & 255u, sg;
            if (t == T_IQ3_XXS) {
                sg = ksign8((r.hd.x >> (7u * (g8 >> 1))) & 127u) >> (4u * (q & 1u));
            } else {
                idx |= ((r.hd.x >> (8u * (j & 1u) + g8)) & 1u) << 8;
                sg = (r.lo.y >> (8u * (g8 >> 1) + 4u * (q & 1u))) & 15u;
            }
            v[q] = signed4(db, iq_grid4(t, idx), sg);
        }
        return;
    }
    // IQ1_S, IQ1_M: two groups of 8, l = 2h, 2h + 1
    [[unroll]] for (uint gl = 0u; gl < 2u; gl++) {
        uint l = 2u * h + gl, qs = (r.lo.x >> (8u * l)) & 255u, p;
        float dl, delta;
        if (t == T_IQ1_S) {
            uint qh = (r.hd.x >> (16u * (j & 1u))) & 0xFFFFu;
            p = iq_grid1(t, qs | (((qh >> (3u * l)) & 7u) << 8));
            dl = half_of_word(r.hd.y, blk) * float(2u * ((qh >> 12) & 7u) + 1u);
            delta = (qh & 0x8000u) != 0u ? -0.125 : 0.125;
        } else {
            uint qh = (r.hd.x >> (8u * (2u * (j & 1u) + h) + 4u * gl)) & 15u;
            uint hw = ((j >> 1) < 2u ? r.hd.y : r.hd.z) >> (16u * ((j >> 1) & 1u));
            p = iq_grid1(t, qs | ((qh & 7u) << 8));
            dl = iq1m_d(r.hd.yz) * iq1m_scale(hw, j & 1u, h);
            delta = (qh & 8u) != 0u ? -0.125 : 0.125;
        }
        v[2u * gl] = shifted4(dl, p, delta);
        v[2u * gl + 1u] = shifted4(dl, p >> 8, delta);
    }
}
