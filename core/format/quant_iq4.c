/* quant_iq4.c: the 4-bit table formats IQ4_NL, IQ4_XS and MXFP4.
 *
 * Each element is a 4-bit index into a table of 16 signed levels
 * (quant_grids.h) times a scale: IQ4_NL one f16 scale per 32 elements,
 * IQ4_XS an f16 scale per 256 times a 6-bit signed sub-scale per 32,
 * MXFP4 a power of two (E8M0) per 32 over the e2m1 levels.
 *
 * Sections: decoders; the level search shared by IQ4_NL and IQ4_XS;
 * quantizers.  The quantizers give the bytes llama-quantize writes without
 * an importance matrix (ggml's quantize_iq4_nl / quantize_iq4_xs, which try
 * 15 scales around the extreme's, and quantize_row_mxfp4_ref): every float
 * expression keeps ggml's operand order (quant_formats.h says why).
 */
#include <math.h>
#include <string.h>

#include "quant.h"
#include "quant_formats.h"
#include "quant_grids.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ======================================================================
 * Decoders
 * ====================================================================== */

/* Elements 0-15 of each 32 are the low nibbles of 16 bytes, 16-31 the high. */
void quant_decode_iq4_nl(const void *vb, float *y)
{
    const block_iq4_nl *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    for (int j = 0; j < QK4_NL / 2; j++) {
        y[j] = d * quant_kvalues_iq4nl[b->qs[j] & 0xf];
        y[j + QK4_NL / 2] = d * quant_kvalues_iq4nl[b->qs[j] >> 4];
    }
}

/* Sub-block ib's scale: 4 low bits in nibble ib of scales_l, 2 high bits at
 * bit 2*ib of scales_h; stored plus 32. */
static int iq4_xs_scale(const block_iq4_xs *b, int ib)
{
    int lo = (b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
    int hi = (quant_load_u16(&b->scales_h) >> (2 * ib)) & 3;
    return (lo | (hi << 4)) - 32;
}

void quant_decode_iq4_xs(const void *vb, float *y)
{
    const block_iq4_xs *b = vb;
    const float d = quant_f16_to_f32(quant_load_u16(&b->d));
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const float dl = d * iq4_xs_scale(b, ib);
        const uint8_t *qs = b->qs + 16 * ib;
        for (int j = 0; j < 16; j++) {
            y[32 * ib + j] = dl * quant_kvalues_iq4nl[qs[j] & 0xf];
            y[32 * ib + j + 16] = dl * quant_kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

/* 2^(e-128) as a float: e < 2 are subnormals (bit 21 or 22), the rest
 * normals with exponent field e-1.  e = 255 gives 2^127 (ggml has no NaN). */
float quant_e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void quant_decode_mxfp4(const void *vb, float *y)
{
    const block_mxfp4 *b = vb;
    const float d = quant_e8m0_half(b->e);
    for (int j = 0; j < QK_MXFP4 / 2; j++) {
        y[j] = quant_kvalues_mxfp4[b->qs[j] & 0x0f] * d;
        y[j + QK_MXFP4 / 2] = quant_kvalues_mxfp4[b->qs[j] >> 4] * d;
    }
}

/* ======================================================================
 * The IQ4 level search
 * ====================================================================== */

/* Index of the level nearest v (ties to the lower one) in the sorted table
 * of 16, by bisection as ggml's best_index_int8 (NaN lands on some index). */
static int nearest_level(const int8_t *val, float v)
{
    if (v <= val[0])
        return 0;
    if (v >= val[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < val[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - val[hi - 1] < val[hi] - v ? hi - 1 : hi;
}

/* The weighted least-squares scale of 32 elements against the levels their
 * scaled values round to; stores sum(w*q*x) and sum(w*q*q). */
static void level_fit(const float *x, const float *w, float id, uint8_t *lv, float *sumqx, float *sumq2)
{
    *sumqx = 0;
    *sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        int l = nearest_level(quant_kvalues_iq4nl, id * x[j]);
        if (lv)
            lv[j] = (uint8_t)l;
        float q = quant_kvalues_iq4nl[l];
        *sumqx += w[j] * q * x[j];
        *sumq2 += w[j] * q * q;
    }
}

/* One 32-element sub-block's scale (weights x^2): starting from the scale
 * that puts the signed extreme on the outermost level, 15 trial scales
 * around it; keeps the best weighted least-squares fit.  0 for an all-zero
 * sub-block. */
static float iq4_subblock_scale(const float *x)
{
    float w[32], amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        w[j] = x[j] * x[j];
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < QUANT_GROUP_MAX_EPS)
        return 0;
    const int ntry = 7;
    float d = -max / quant_kvalues_iq4nl[0];
    float sumqx, sumq2;
    level_fit(x, w, 1 / d, NULL, &sumqx, &sumq2);
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; itry++) {
        float id = (itry + quant_kvalues_iq4nl[0]) / max;
        level_fit(x, w, id, NULL, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 levels from 32 elements at inverse scale id, packed into 16 bytes. */
static void pack_levels(const float *x, float id, uint8_t *qs)
{
    uint8_t lv[32];
    for (int j = 0; j < 32; j++)
        lv[j] = (uint8_t)nearest_level(quant_kvalues_iq4nl, id * x[j]);
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(lv[j] | (lv[j + 16] << 4));
}

/* ======================================================================
 * Quantizers
 * ====================================================================== */

void quant_quantize_iq4_nl(const float *x, void *vb)
{
    block_iq4_nl *b = vb;
    float d = iq4_subblock_scale(x);
    quant_store_u16(&b->d, quant_f32_to_f16(d));
    pack_levels(x, d ? 1 / d : 0, b->qs);
}

/* The sub-block scales become 6-bit multiples of one f16 scale that maps
 * the one of largest magnitude to -32; the levels are then chosen again
 * against each sub-block's (unrounded-d) scale, as ggml does. */
void quant_quantize_iq4_xs(const float *x, void *vb)
{
    block_iq4_xs *b = vb;
    float scales[QK_K / 32], max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        scales[ib] = iq4_subblock_scale(x + 32 * ib);
        if (fabsf(scales[ib]) > amax_scale) {
            amax_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    float d = -max_scale / 32;
    quant_store_u16(&b->d, quant_f32_to_f16(d));
    float id = d ? 1 / d : 0.f;
    uint16_t scales_h = 0;
    memset(b->scales_l, 0, sizeof b->scales_l);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        int l = quant_clamp_int(quant_round_even(id * scales[ib]), -32, 31);
        float dl = d * l;
        pack_levels(x + 32 * ib, dl ? 1 / dl : 0.f, b->qs + 16 * ib);
        l += 32;
        b->scales_l[ib / 2] |= (uint8_t)((l & 0xf) << (4 * (ib % 2)));
        scales_h |= (uint16_t)((l >> 4) << (2 * ib));
    }
    quant_store_u16(&b->scales_h, scales_h);
}

/* The level nearest x at scale e (ties to the lower index, as ggml). */
static uint8_t mxfp4_level(float x, float e)
{
    int best = 0;
    float best_err = fabsf(quant_kvalues_mxfp4[0] * e - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(quant_kvalues_mxfp4[i] * e - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

/* The scale is the power of two that puts the largest magnitude in [4, 8)
 * (the top level, 6, doubled to 12, times half the scale: floor(log2(amax))
 * - 2, plus the bias 127).  ggml converts that float to uint8_t directly;
 * it is clamped here first, which changes nothing for |x| >= 2^-125. */
void quant_quantize_mxfp4(const float *x, void *vb)
{
    block_mxfp4 *b = vb;
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; j++)
        if (amax < fabsf(x[j]))
            amax = fabsf(x[j]);
    uint8_t e = 0;
    if (amax > 0.0f) {
        float ef = floorf(log2f(amax)) - 2 + 127;
        e = !(ef > 0) ? 0 : ef > 255 ? 255 : (uint8_t)ef;
    }
    const float d = quant_e8m0_half(e);
    b->e = e;
    for (int j = 0; j < QK_MXFP4 / 2; j++)
        b->qs[j] = (uint8_t)(mxfp4_level(x[j], d) | (mxfp4_level(x[j + QK_MXFP4 / 2], d) << 4));
}
