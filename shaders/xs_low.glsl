// xs_low.glsl: the x-stationary units (mv_xs_common.glsl) of the low-bit
// types: Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4 and the grid types.  Included by
// mv_xs_common.glsl after its helpers (fld, bytes_f, half_of, xv, the
// register sets qv / hv and the input sums xsum).
//
// Units (gpu/vk_layout.c): 32 elements for IQ4_NL and MXFP4 (a block, as
// Q4_0), 64 for the others -- elements 64u.. of a block, or for Q2_K / Q3_K
// the 64 whose 2-bit codes share the 16 bytes qs[32n + 16h ..] (vec4 g = 4j +
// k of such a unit: row j of the four, word k; x_unit maps the input so).
//
// Conversions, as the other units': 2- and 3-bit codes (Q2_K, Q3_K) and
// signed grid magnitudes are bytes of a word converted by bytes_f (x_pre's
// BYTES factors); a grid point's magnitudes m and signs become the bytes 64
// + m or 64 - m (every magnitude is below 64) selected by the sign bits, so
// the sign costs no multiply; IQ1's 2-bit codes are converted in place at
// bits 2j (x_pre: 4^-j).  The 16-level types read their levels as floats
// from shared memory (quant_iq.glsl).  Scales multiply the sum of a
// sub-block's products (a 32-element ib or a 16-element half), and the
// minimum of Q2_K / IQ1's shift multiply a sum of inputs (xsum, NS per
// unit: Q2_K's four 16-element rows, IQ1_S's two ibs, IQ1_M's eight groups).

// 0xFF in byte i where bit i of s (i < 4) is set.
uint sign_bytes(uint s) { return ((s & 15u) * 0x00204081u & 0x01010101u) * 255u; }

// The bytes 64 + m_i, or 64 - m_i where bit i of s is set (m_i < 64).
uint sbytes(uint mag, uint s)
{
    uint m = sign_bytes(s);
    return ((0x40404040u - mag) & m) | ((mag | 0x40404040u) & ~m);
}

// Signed magnitudes as floats, scaled as x_pre's BYTES factors expect.
vec4 sbytes_f(uint mag, uint s) { return bytes_f(sbytes(mag, s), 0x7Fu, 64u); }

float sum4(vec4 v) { return v.x + v.y + v.z + v.w; }

// Unit `sub` (< UPB) of block blk of the tensor in slot s into register set i.
void load_unit_low(uint s, uint blk, uint sub, uint hbase, uint i)
{
    uint hw = hbase >> 2;
    if (TYPE == T_Q2_K) {
        qv[i] = W4[s].w[blk * 5u + sub];
        hv[2u * i] = W[s].w[blk * 20u + 16u + sub];          // sc' (4 scale/min bytes)
        hv[2u * i + 1u] = W[s].w[hw + blk];                  // d, dmin
    } else if (TYPE == T_Q3_K) {
        qv[i] = W4[s].w[blk * 7u + sub];
        uvec2 hm = W2[s].w[blk * 14u + 8u + sub];           // hm'
        hv[4u * i] = hm.x;
        hv[4u * i + 1u] = hm.y;
        hv[4u * i + 2u] = W[s].w[blk * 28u + 24u + sub];     // sc'
        hv[4u * i + 3u] = W[s].w[hw + (blk >> 1)];           // d
    } else if (TYPE == T_IQ4_NL) {
        qv[i] = W4[s].w[blk];
        hv[i] = W[s].w[hw + (blk >> 1)];
    } else if (TYPE == T_MXFP4) {
        qv[i] = W4[s].w[blk];
        hv[i] = W[s].w[hw + (blk >> 2)];
    } else if (TYPE == T_IQ4_XS) {
        qv[2u * i] = W4[s].w[blk * 8u + 2u * sub];
        qv[2u * i + 1u] = W4[s].w[blk * 8u + 2u * sub + 1u];
        uvec2 h = W2[s].w[(hbase >> 3) + blk];
        hv[2u * i] = h.x;
        hv[2u * i + 1u] = h.y;
    } else if (TYPE == T_IQ2_XXS) {
        qv[i] = W4[s].w[blk * 4u + sub];
        hv[i] = W[s].w[hw + (blk >> 1)];
    } else if (TYPE == T_IQ2_XS) {
        qv[i] = W4[s].w[blk * 4u + sub];
        hv[2u * i] = W[s].w[hw + 3u * blk];                   // d
        hv[2u * i + 1u] = W[s].w[hw + 3u * blk + 1u + (sub >> 1)];  // scales of ibs 2sub, 2sub+1
    } else if (TYPE == T_IQ2_S) {
        qv[i] = W4[s].w[blk * 5u + sub];
        hv[2u * i] = W[s].w[blk * 20u + 16u + sub];          // meta
        hv[2u * i + 1u] = W[s].w[hw + (blk >> 1)];
    } else if (TYPE == T_IQ3_XXS) {
        qv[i] = W4[s].w[blk * 6u + sub];
        uvec2 a = W2[s].w[blk * 12u + 8u + sub];            // scales and signs of ibs 2sub, 2sub+1
        hv[3u * i] = a.x;
        hv[3u * i + 1u] = a.y;
        hv[3u * i + 2u] = W[s].w[hw + (blk >> 1)];
    } else if (TYPE == T_IQ3_S) {
        qv[i] = W4[s].w[blk * 7u + sub];
        uvec2 sg = W2[s].w[blk * 14u + 8u + sub];           // signs
        hv[4u * i] = sg.x;
        hv[4u * i + 1u] = sg.y;
        hv[4u * i + 2u] = W[s].w[blk * 28u + 24u + sub];     // meta
        hv[4u * i + 3u] = W[s].w[hw + (blk >> 1)];
    } else if (TYPE == T_IQ1_S) {
        qv[i] = uvec4(W2[s].w[blk * 6u + sub], 0u, 0u);
        hv[2u * i] = W[s].w[blk * 12u + 8u + sub];           // qh of ibs 2sub, 2sub+1
        hv[2u * i + 1u] = W[s].w[hw + (blk >> 1)];
    } else if (TYPE == T_IQ1_M) {
        qv[i] = uvec4(W2[s].w[blk * 6u + sub], 0u, 0u);
        hv[3u * i] = W[s].w[blk * 12u + 8u + sub];           // qh bytes of ibs 2sub, 2sub+1
        uvec2 h = W2[s].w[(hbase >> 3) + blk];              // scales (and d)
        hv[3u * i + 1u] = h.x;
        hv[3u * i + 2u] = h.y;
    }
}

// Q2_K / Q3_K: sum over the unit's four rows j of scale_j * sum code * x
// (Q3_K: code - 4), and Q2_K's minimum terms.
float unit_k2(uint i, uint blk, uint j, uint u)
{
    uvec4 q = qv[QW * i];
    float a = 0.0, b = 0.0;
    [[unroll]] for (uint r = 0u; r < 4u; r++) {
        vec4 acc = vec4(0.0);
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uint c = (q[k] >> (2u * r)) & 0x03030303u;
            if (TYPE == T_Q2_K)
                acc += bytes_f(c, 0x03u, 0u) * xv(j, 4u * r + k, u);
            else
                acc += bytes_f(c | q3_hbits(hv[4u * i + (r >> 1)], r, k), 0x07u, 4u) * xv(j, 4u * r + k, u);
        }
        if (TYPE == T_Q2_K) {
            uint sc = (hv[2u * i] >> (8u * r)) & 255u;
            a += float(sc & 15u) * sum4(acc);
            b += float(sc >> 4) * xsum[NS * j + r];
        } else {
            a += float(int(hv[4u * i + 2u] << (24u - 8u * r)) >> 24) * sum4(acc);
        }
    }
    if (TYPE == T_Q2_K) {
        vec2 dm = unpackHalf2x16(hv[2u * i + 1u]);
        return dm.x * a - dm.y * b;
    }
    return half_of(hv[4u * i + 3u], blk) * a;
}

// A 32-element block of 16-level codes (word w: elements 4k+i low nibbles,
// 16+4k+i high), vec4s g0.. of the unit: sum level * x.
float levels32(uvec4 w, uint j, uint u, uint g0)
{
    vec4 acc = vec4(0.0);
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uint a = w[k];
        vec4 lo = vec4(iq_level(TYPE, a & 15u), iq_level(TYPE, (a >> 8) & 15u), iq_level(TYPE, (a >> 16) & 15u),
                       iq_level(TYPE, (a >> 24) & 15u));
        vec4 hi = vec4(iq_level(TYPE, (a >> 4) & 15u), iq_level(TYPE, (a >> 12) & 15u),
                       iq_level(TYPE, (a >> 20) & 15u), iq_level(TYPE, a >> 28));
        acc += lo * xv(j, g0 + k, u) + hi * xv(j, g0 + 4u + k, u);
    }
    return sum4(acc);
}

// A group of 8 from a grid point p (IQ2) with signs sg: vec4s g, g+1.
vec4 grid8_dot(uvec2 p, uint sg, uint j, uint u, uint g)
{
    return sbytes_f(p.x, sg) * xv(j, g, u) + sbytes_f(p.y, sg >> 4) * xv(j, g + 1u, u);
}

// IQ1: the 8 codes of point p (2 bits each, value + 1) times vec4s g, g+1.
float iq1_group(uint p, uint j, uint u, uint g)
{
    vec4 a = vec4(fld(p, 3u, 1u), fld(p, 3u << 2, 1u << 2), fld(p, 3u << 4, 1u << 4), fld(p, 3u << 6, 1u << 6));
    vec4 b = vec4(fld(p, 3u << 8, 1u << 8), fld(p, 3u << 10, 1u << 10), fld(p, 3u << 12, 1u << 12),
                  fld(p, 3u << 14, 1u << 14));
    return sum4(a * xv(j, g, u) + b * xv(j, g + 1u, u));
}

// Dot of register set i (block blk, unit sub of it) with this lane's unit j
// (unit index u).
float unit_dot_low(uint i, uint blk, uint sub, uint j, uint u)
{
    if (TYPE == T_Q2_K || TYPE == T_Q3_K)
        return unit_k2(i, blk, j, u);
    if (TYPE == T_IQ4_NL)
        return half_of(hv[i], blk) * levels32(qv[i], j, u, 0u);
    if (TYPE == T_MXFP4)
        return levels32(qv[i], j, u, 0u) * e8m0_half((hv[i] >> (8u * (blk & 3u))) & 255u);
    if (TYPE == T_IQ4_XS) {
        uvec2 h = uvec2(hv[2u * i], hv[2u * i + 1u]);
        float a = float(iq4xs_ls(h, 2u * sub)) * levels32(qv[2u * i], j, u, 0u) +
                  float(iq4xs_ls(h, 2u * sub + 1u)) * levels32(qv[2u * i + 1u], j, u, 8u);
        return unpackHalf2x16(h.x).x * a;
    }
    uvec4 q = qv[QW * i];
    float t = 0.0;
    if (TYPE == T_IQ2_XXS) {
        // per ib: a word of grid indices, a word of sign indices and scale
        [[unroll]] for (uint ib = 0u; ib < 2u; ib++) {
            uint aux = q[2u * ib + 1u];
            vec4 acc = vec4(0.0);
            [[unroll]] for (uint l = 0u; l < 4u; l++)
                acc += grid8_dot(iq_grid8(TYPE, (q[2u * ib] >> (8u * l)) & 255u), ksign8((aux >> (7u * l)) & 127u), j,
                                 u, 8u * ib + 2u * l);
            t += (0.5 + float(aux >> 28)) * sum4(acc);
        }
        return half_of(hv[i], blk) * 0.25 * t;
    }
    if (TYPE == T_IQ2_XS || TYPE == T_IQ2_S) {
        // a 4-bit scale per 16 elements (two groups of 8)
        uint sc = TYPE == T_IQ2_XS ? hv[2u * i + 1u] >> (16u * (sub & 1u)) : hv[2u * i] >> 16;
        [[unroll]] for (uint ib = 0u; ib < 2u; ib++)
            [[unroll]] for (uint hf = 0u; hf < 2u; hf++) {
                vec4 acc = vec4(0.0);
                [[unroll]] for (uint l = 2u * hf; l < 2u * hf + 2u; l++) {
                    uint grp = 4u * ib + l, idx, sg;
                    if (TYPE == T_IQ2_XS) {
                        uint w = (q[2u * ib + (l >> 1)] >> (16u * (l & 1u))) & 0xFFFFu;
                        idx = w & 511u;
                        sg = ksign8(w >> 9);
                    } else {
                        idx = ((q[grp >> 2] >> (8u * (grp & 3u))) & 255u) | (((hv[2u * i] >> (8u * ib + 2u * l)) & 3u) << 8);
                        sg = (q[2u + (grp >> 2)] >> (8u * (grp & 3u))) & 255u;
                    }
                    acc += grid8_dot(iq_grid8(TYPE, idx), sg, j, u, 2u * grp);
                }
                t += (0.5 + float((sc >> (8u * ib + 4u * hf)) & 15u)) * sum4(acc);
            }
        return half_of(hv[2u * i + (TYPE == T_IQ2_XS ? 0u : 1u)], TYPE == T_IQ2_XS ? 0u : blk) * 0.25 * t;
    }
    if (TYPE == T_IQ3_XXS || TYPE == T_IQ3_S) {
        // 16 groups of 4 (vec4 gi: index byte gi), 8 to an ib
        uint meta = TYPE == T_IQ3_S ? hv[4u * i + 2u] : 0u;
        [[unroll]] for (uint ib = 0u; ib < 2u; ib++) {
            uint aux = TYPE == T_IQ3_XXS ? hv[3u * i + ib] : hv[4u * i + ib];
            vec4 acc = vec4(0.0);
            [[unroll]] for (uint l = 0u; l < 4u; l++) {
                uint sg = TYPE == T_IQ3_XXS ? ksign8((aux >> (7u * l)) & 127u) : (aux >> (8u * l)) & 255u;
                [[unroll]] for (uint hh = 0u; hh < 2u; hh++) {
                    uint gi = 8u * ib + 2u * l + hh;
                    uint idx = (q[gi >> 2] >> (8u * (gi & 3u))) & 255u;
                    if (TYPE == T_IQ3_S)
                        idx |= ((meta >> (8u * ib + 2u * l + hh)) & 1u) << 8;
                    acc += sbytes_f(iq_grid4(TYPE, idx), sg >> (4u * hh)) * xv(j, gi, u);
                }
            }
            t += (TYPE == T_IQ3_XXS ? 0.5 + float(aux >> 28) : float(1u + 2u * ((meta >> (16u + 4u * ib)) & 15u))) *
                 sum4(acc);
        }
        return TYPE == T_IQ3_XXS ? half_of(hv[3u * i + 2u], blk) * 0.5 * t : half_of(hv[4u * i + 3u], blk) * t;
    }
    // IQ1_S / IQ1_M: groups of 8 (vec4s 2gi, 2gi+1), 11-bit indices
    uint qh = hv[(TYPE == T_IQ1_S ? 2u : 3u) * i];
    if (TYPE == T_IQ1_S) {
        [[unroll]] for (uint ib = 0u; ib < 2u; ib++) {
            uint h = (qh >> (16u * ib)) & 0xFFFFu;
            float a = 0.0;
            [[unroll]] for (uint l = 0u; l < 4u; l++) {
                uint gi = 4u * ib + l;
                uint idx = ((q[gi >> 2] >> (8u * (gi & 3u))) & 255u) | (((h >> (3u * l)) & 7u) << 8);
                a += iq1_group(iq_grid1(TYPE, idx), j, u, 2u * gi);
            }
            float delta = (h & 0x8000u) != 0u ? -0.125 : 0.125;
            t += float(2u * ((h >> 12) & 7u) + 1u) * (a + delta * xsum[NS * j + ib]);
        }
        return half_of(hv[2u * i + 1u], blk) * t;
    }
    uvec2 sc = uvec2(hv[3u * i + 1u], hv[3u * i + 2u]);
    uint hwd = (sub < 2u ? sc.x : sc.y) >> (16u * (sub & 1u));
    [[unroll]] for (uint ib = 0u; ib < 2u; ib++)
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
            uint gi = 4u * ib + l;
            uint h = (qh >> (8u * (2u * ib + (l >> 1)) + 4u * (l & 1u))) & 15u;
            uint idx = ((q[gi >> 2] >> (8u * (gi & 3u))) & 255u) | ((h & 7u) << 8);
            float delta = (h & 8u) != 0u ? -0.125 : 0.125;
            t += iq1m_scale(hwd, ib, l >> 1) * (iq1_group(iq_grid1(TYPE, idx), j, u, 2u * gi) + delta * xsum[NS * j + gi]);
        }
    return iq1m_d(sc) * t;
}
