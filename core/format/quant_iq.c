/* quant_iq.c: decoders of the grid formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ1_S and IQ1_M.
 *
 * A grid format stores, per group of 8 (IQ2, IQ1) or 4 (IQ3) elements, the
 * index of a point of a fixed grid of magnitudes (quant_grids.h), plus sign
 * bits and a small per-sub-block scale multiplying one f16 scale per block
 * of 256.  Signs come either as a 7-bit index into ksigns (the eighth sign
 * makes the count of minus signs even: IQ2_XXS, IQ2_XS, IQ3_XXS) or as
 * plain bits (IQ2_S, IQ3_S); IQ1 has no signs (its grid is signed) but a
 * shift of +-1/8 per group.
 *
 * Every value is computed with ggml's expression in ggml's order, e.g.
 * (db * grid) * sign with db = (d * (0.5 + ls)) * 0.25, so the floats are
 * those of dequantize_row_iq* and gguf-py bit for bit.  The quantizers are
 * in quant_iq_quantize.c.
 */
#include <string.h>

#include "quant.h"
#include "quant_formats.h"
#include "quant_grids.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define IQ1_DELTA 0.125f

/* y[j] = db * grid[j], negated where bit j of signs is set. */
static void signed_group(float db, const uint8_t *grid, uint8_t signs, int n, float *y)
{
    for (int j = 0; j < n; j++)
        y[j] = db * grid[j] * (signs & (1u << j) ? -1.f : 1.f);
}

/* IQ2_XXS: per 32 elements two words: the first holds four 8-bit grid
 * indices, the second four 7-bit sign indices (bits 0-27) and the 4-bit
 * scale (bits 28-31). */
void quant_decode_iq2_xxs(const void *vb, float *y)
{
    const block_iq2_xxs *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
        const uint8_t *q = (const uint8_t *)b->qs + 8 * ib;
        const uint32_t aux = quant_load_u32(q + 4);
        const float db = d * (0.5f + (aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++)
            signed_group(db, quant_iq2xxs_grid[q[l]], quant_ksigns_iq2xs[(aux >> (7 * l)) & 127], 8, y + 8 * l);
    }
}

/* IQ2_XS: per group of 8 one 16-bit word (9-bit grid index, 7-bit sign
 * index); a 4-bit scale per 16 elements. */
void quant_decode_iq2_xs(const void *vb, float *y)
{
    const block_iq2_xs *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
        const float db[2] = {d * (0.5f + (b->scales[ib] & 0xf)) * 0.25f,
                             d * (0.5f + (b->scales[ib] >> 4)) * 0.25f};
        for (int l = 0; l < 4; l++) {
            const uint16_t q = quant_load_u16(&b->qs[4 * ib + l]);
            signed_group(db[l / 2], quant_iq2xs_grid[q & 511], quant_ksigns_iq2xs[q >> 9], 8, y + 8 * l);
        }
    }
}

/* IQ2_S: 10-bit grid indices (8 bits in qs, 2 in qh), one sign byte per
 * group of 8 (stored after the 32 index bytes), a 4-bit scale per 16. */
void quant_decode_iq2_s(const void *vb, float *y)
{
    const block_iq2_s *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    const uint8_t *signs = b->qs + QK_K / 8;
    for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
        const float db[2] = {d * (0.5f + (b->scales[ib] & 0xf)) * 0.25f,
                             d * (0.5f + (b->scales[ib] >> 4)) * 0.25f};
        for (int l = 0; l < 4; l++) {
            const int idx = b->qs[4 * ib + l] | (((b->qh[ib] >> (2 * l)) & 3) << 8);
            signed_group(db[l / 2], quant_iq2s_grid[idx], signs[4 * ib + l], 8, y + 8 * l);
        }
    }
}

/* IQ3_XXS: 64 grid index bytes (groups of 4), then per 32 elements a word
 * of four 7-bit sign indices (one per 8) and a 4-bit scale. */
void quant_decode_iq3_xxs(const void *vb, float *y)
{
    const block_iq3_xxs *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    const uint8_t *qs = b->qs, *scales_signs = b->qs + QK_K / 4;
    for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
        const uint32_t aux = quant_load_u32(scales_signs + 4 * ib);
        const float db = d * (0.5f + (aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = quant_ksigns_iq2xs[(aux >> (7 * l)) & 127];
            signed_group(db, quant_iq3xxs_grid[qs[8 * ib + 2 * l]], signs, 4, y + 8 * l);
            signed_group(db, quant_iq3xxs_grid[qs[8 * ib + 2 * l + 1]], (uint8_t)(signs >> 4), 4, y + 8 * l + 4);
        }
    }
}

/* IQ3_S: 9-bit grid indices (8 bits in qs, bit k%8 of qh[k/8] for index
 * k), plain sign bits, a 4-bit odd scale 1 + 2*ls per 32. */
void quant_decode_iq3_s(const void *vb, float *y)
{
    const block_iq3_s *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
        const float db = d * (1 + 2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 0xf));
        for (int l = 0; l < 4; l++) {
            const int k = 8 * ib + 2 * l;
            const int i1 = b->qs[k] | (((b->qh[ib] >> (2 * l)) & 1) << 8);
            const int i2 = b->qs[k + 1] | (((b->qh[ib] >> (2 * l + 1)) & 1) << 8);
            const uint8_t signs = b->signs[4 * ib + l];
            signed_group(db, quant_iq3s_grid[i1], signs, 4, y + 8 * l);
            signed_group(db, quant_iq3s_grid[i2], (uint8_t)(signs >> 4), 4, y + 8 * l + 4);
        }
    }
}

/* y[j] = dl * (grid[j] + delta) for a group of 8. */
static void shifted_group(float dl, const int8_t *grid, float delta, float *y)
{
    for (int j = 0; j < 8; j++)
        y[j] = dl * (grid[j] + delta);
}

/* IQ1_S: 11-bit grid indices (8 bits in qs, 3 per group in qh[ib]); qh[ib]
 * also holds the 3-bit odd scale (bits 12-14) and the shift's sign (15). */
void quant_decode_iq1_s(const void *vb, float *y)
{
    const block_iq1_s *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
        const uint16_t qh = quant_load_u16(&b->qh[ib]);
        const float dl = d * (2 * ((qh >> 12) & 7) + 1);
        const float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
        for (int l = 0; l < 4; l++)
            shifted_group(dl, quant_iq1s_grid[b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)], delta, y + 8 * l);
    }
}

/* IQ1_M: no f16 field: the block's f16 scale is spread over the top nibbles
 * of the four 16-bit scale words, whose other 12 bits are four 3-bit odd
 * scales (one per 16 elements).  Each qh byte holds two groups' 3 high index
 * bits and shift signs. */
void quant_decode_iq1_m(const void *vb, float *y)
{
    const block_iq1_m *b = vb;
    uint16_t sc[4];
    for (int i = 0; i < 4; i++)
        sc[i] = quant_load_u16(b->scales + 2 * i);
    const uint16_t d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = quant_f16_to_f32(d16);
    for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
        const float dl[2] = {d * (2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1),
                             d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1)};
        for (int l = 0; l < 4; l++) {
            const uint8_t qh = b->qh[2 * ib + l / 2];
            const int shift = 4 * (l % 2);
            const int idx = b->qs[4 * ib + l] | (((qh >> shift) & 7) << 8);
            const float delta = (qh >> shift) & 8 ? -IQ1_DELTA : IQ1_DELTA;
            shifted_group(dl[l / 2], quant_iq1s_grid[idx], delta, y + 8 * l);
        }
    }
}
