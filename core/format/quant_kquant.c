/* quant_kquant.c: the K-quant formats Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (block
 * decoders and quantizers).
 *
 * Sections in pipeline order: the decoders; the sub-block fits (ggml's
 * make_qkx2_quants, make_qx_quants, make_q3_quants, rewritten); the
 * quantizers.  Every float expression keeps the operand order and types of
 * ggml's reference C (quant_formats.h says why); the quantizers give the
 * bytes llama-quantize writes without an importance matrix
 * (quantize_row_*_ref), which tests/test_quant_kquant.c pins down.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "quant.h"
#include "quant_formats.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ======================================================================
 * Decoders
 *
 * Each writes one block's values in ggml's element order with ggml's
 * expressions (e.g. Q6_K is (d*scale)*q, not d*(scale*q): the first rounds
 * differently once d*scale*q needs more than 24 bits).
 * ====================================================================== */

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block: the first
 * four pairs sit in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); the
 * last four keep their low 4 bits in bytes 8-11 and their high 2 bits in the
 * top bits of bytes 0-7. */
static void kquant_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *mn = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Q2_K and Q3_K share their element order: two halves of 128, in each four
 * rows of 32 that take bit pair r (shift 2r) of the same 32 bytes of qs;
 * each row is two sub-blocks of 16 (element e: half e/128, row
 * (e%128)/32, byte e%32, sub-block e/16). */
void quant_decode_q2_K(const void *vb, float *y)
{
    const block_q2_K *b = vb;
    const float d = quant_f16_to_f32(b->d);
    const float dmin = quant_f16_to_f32(b->dmin);
    for (int e0 = 0; e0 < QK_K; e0 += 16) {
        const int half = e0 / 128, row = (e0 % 128) / 32, l0 = e0 % 32;
        const uint8_t sc = b->scales[e0 / 16];
        const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        const uint8_t *q = b->qs + 32 * half + l0;
        for (int l = 0; l < 16; l++)
            y[e0 + l] = dl * ((q[l] >> (2 * row)) & 3) - ml;
    }
}

/* Q3_K's sixteen 6-bit scales: the low nibble of scale j in byte j (j < 8,
 * low nibble) or j-8 (high nibble), the top two bits in byte 8 + j%4 at bit
 * 2*(j/4). */
static int q3_K_scale(const uint8_t *s, int j)
{
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/* Q3_K: the third bit of element e is bit e/32 of hmask[e%32]; a clear bit
 * subtracts 4. */
void quant_decode_q3_K(const void *vb, float *y)
{
    const block_q3_K *b = vb;
    const float d_all = quant_f16_to_f32(b->d);
    for (int e0 = 0; e0 < QK_K; e0 += 16) {
        const int half = e0 / 128, row = (e0 % 128) / 32, l0 = e0 % 32;
        const float dl = d_all * q3_K_scale(b->scales, e0 / 16);
        const uint8_t *q = b->qs + 32 * half + l0, *hm = b->hmask + l0;
        const uint8_t m = (uint8_t)(1u << (e0 / 32));
        for (int l = 0; l < 16; l++)
            y[e0 + l] = dl * (((q[l] >> (2 * row)) & 3) - ((hm[l] & m) ? 0 : 4));
    }
}

/* Q4_K: 8 sub-blocks of 32, value = (d*scale)*q - dmin*min; each 32 bytes of
 * qs hold two sub-blocks (low nibbles, then high nibbles). */
void quant_decode_q4_K(const void *vb, float *y)
{
    const block_q4_K *b = vb;
    const float d = quant_f16_to_f32(b->d);
    const float dmin = quant_f16_to_f32(b->dmin);
    for (int pair = 0; pair < 4; pair++) {
        const uint8_t *q = b->qs + 32 * pair;
        uint8_t sc, mn;
        kquant_scale_min(2 * pair, b->scales, &sc, &mn);
        const float d1 = d * sc, m1 = dmin * mn;
        kquant_scale_min(2 * pair + 1, b->scales, &sc, &mn);
        const float d2 = d * sc, m2 = dmin * mn;
        for (int l = 0; l < 32; l++)
            y[64 * pair + l] = d1 * (q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++)
            y[64 * pair + 32 + l] = d2 * (q[l] >> 4) - m2;
    }
}

/* Q5_K: as Q4_K plus a fifth bit: for sub-block pair p, bit 2p of qh[l] is
 * the high bit of element l of the first sub-block, bit 2p+1 of the second. */
void quant_decode_q5_K(const void *vb, float *y)
{
    const block_q5_K *b = vb;
    const float d = quant_f16_to_f32(b->d);
    const float dmin = quant_f16_to_f32(b->dmin);
    for (int pair = 0; pair < 4; pair++) {
        const uint8_t *q = b->qs + 32 * pair;
        const uint8_t bit1 = (uint8_t)(1u << (2 * pair)), bit2 = (uint8_t)(2u << (2 * pair));
        uint8_t sc, mn;
        kquant_scale_min(2 * pair, b->scales, &sc, &mn);
        const float d1 = d * sc, m1 = dmin * mn;
        kquant_scale_min(2 * pair + 1, b->scales, &sc, &mn);
        const float d2 = d * sc, m2 = dmin * mn;
        for (int l = 0; l < 32; l++)
            y[64 * pair + l] = d1 * ((q[l] & 0xF) + (b->qh[l] & bit1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            y[64 * pair + 32 + l] = d2 * ((q[l] >> 4) + (b->qh[l] & bit2 ? 16 : 0)) - m2;
    }
}

/* Q6_K: two halves of 128; in each, ql[0..63] hold the low nibbles and
 * qh[0..31] the top two bits of four interleaved 32-element rows, and the 16
 * int8 scales cover 16 elements each. */
void quant_decode_q6_K(const void *vb, float *y)
{
    const block_q6_K *b = vb;
    const float d = quant_f16_to_f32(b->d);
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b->ql + 64 * half;
        const uint8_t *qh = b->qh + 32 * half;
        const int8_t *sc = b->scales + 8 * half;
        float *out = y + 128 * half;
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            out[l] = d * sc[is] * q1;
            out[l + 32] = d * sc[is + 2] * q2;
            out[l + 64] = d * sc[is + 4] * q3;
            out[l + 96] = d * sc[is + 6] * q4;
        }
    }
}

/* ======================================================================
 * K-quant searches
 * ====================================================================== */

/* Q2_K/Q4_K/Q5_K sub-block fit: levels l in [0, nmax] with x ~ scale*l + min
 * (min <= 0), minimizing the weighted squared (Q2_K: absolute) error.  Starts from the plain
 * min/max fit, then tries nstep+1 stretched scales, each refined by a
 * weighted least-squares solve for (scale, min); keeps the best.  Returns
 * scale and stores -min.  The arithmetic mirrors ggml's make_qkx2_quants.
 * The steps cannot be evaluated independently (e.g. all at once for
 * speed): an accepted step replaces `min`, which the later steps' levels
 * depend on. */
typedef struct {
    int nmax;
    float rmin, rdelta;
    int nstep;
    bool use_mad; /* absolute instead of squared error */
} kquant_search;

static float weighted_error(const float *x, const float *w, const uint8_t *lv, int n, float scale,
                            float min, bool use_mad)
{
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * lv[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        err += w[i] * diff;
    }
    return err;
}

static void levels_for(const float *x, int n, float iscale, float min, int nmax, uint8_t *lv)
{
    for (int i = 0; i < n; i++)
        lv[i] = (uint8_t)quant_clamp_int(quant_round_even(iscale * (x[i] - min)), 0, nmax);
}

static float kquant_fit(const float *x, const float *w, int n, const kquant_search *s,
                        uint8_t *lv, float *neg_min)
{
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(lv, 0, (size_t)n);
        *neg_min = -min;
        return 0.f;
    }
    float iscale = s->nmax / (max - min);
    float scale = 1 / iscale;
    levels_for(x, n, iscale, min, s->nmax, lv);
    float best_err = weighted_error(x, w, lv, n, scale, min, s->use_mad);

    uint8_t trial[QK_K];
    for (int is = 0; is <= s->nstep; is++) {
        iscale = (s->rmin + s->rdelta * is + s->nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_clamp_int(quant_round_even(iscale * (x[i] - min)), 0, s->nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = weighted_error(x, w, trial, n, this_scale, this_min, s->use_mad);
        if (err < best_err) {
            memcpy(lv, trial, (size_t)n);
            best_err = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

/* Q6_K sub-block fit: signed levels l in [-nmax, nmax-1] with x ~ scale*l,
 * weights x^2.  Starts from the scale that maps the signed extreme to -nmax,
 * then tries 18 nearby scales and keeps the best least-squares fit; stores
 * l + nmax.  Mirrors ggml's make_qx_quants(rmse_type 1, no weights). */
static void signed_levels(const float *x, int n, float iscale, int nmax, int8_t *lv,
                          float *sumlx, float *suml2)
{
    *sumlx = 0;
    *suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_clamp_int(quant_round_even(iscale * x[i]), -nmax, nmax - 1);
        if (lv)
            lv[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        *sumlx += w * x[i] * l;
        *suml2 += w * l * l;
    }
}

static float q6_fit(const float *x, int n, int nmax, int8_t *lv)
{
    float max = quant_signed_absmax(x, n);
    if (fabsf(max) < QUANT_GROUP_MAX_EPS) {
        memset(lv, 0, (size_t)n);
        return 0.f;
    }
    float sumlx, suml2;
    float iscale = -nmax / max;
    signed_levels(x, n, iscale, nmax, lv, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        signed_levels(x, n, iscale, nmax, NULL, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            signed_levels(x, n, iscale, nmax, lv, &sumlx, &suml2);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K sub-block fit: signed levels l in [-nmax, nmax-1] with x ~ scale*l,
 * weights x^2: start from the scale that maps the signed extreme to -nmax,
 * then up to 5 passes that move single levels where that improves the
 * weighted least-squares fit (sumlx^2/suml2 grows).  Stores l + nmax and
 * returns the fitted scale.  Mirrors ggml's make_q3_quants(do_rmse). */
static float q3_fit(const float *x, int n, int nmax, int8_t *lv)
{
    float max = quant_signed_absmax(x, n);
    if (fabsf(max) < QUANT_GROUP_MAX_EPS) {
        memset(lv, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_clamp_int(quant_round_even(iscale * x[i]), -nmax, nmax - 1);
        lv[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * lv[i];
            if (!(slx > 0))
                continue;
            float sl2 = suml2 - w * lv[i] * lv[i];
            int l = quant_clamp_int(quant_round_even(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == lv[i])
                continue;
            slx += w * x[i] * l;
            sl2 += w * l * l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                lv[i] = (int8_t)l;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < n; i++)
        lv[i] = (int8_t)(lv[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ======================================================================
 * K-quantizers: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * ====================================================================== */

/* Inverse of kquant_scale_min: packs eight 6-bit scales and mins. */
static void kquant_pack_scales(const uint8_t *ls, const uint8_t *lm, uint8_t *s)
{
    for (int j = 0; j < 4; j++) {
        s[j] = ls[j];
        s[j + 4] = lm[j];
    }
    for (int j = 4; j < 8; j++) {
        s[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        s[j] |= (uint8_t)((lm[j] >> 4) << 6);
    }
}

/* Q2_K and Q3_K pack 2-bit levels the same way: byte l of each 32-byte half
 * of qs holds rows 0-3 (elements l, l+32, l+64, l+96 of the half). */
static void pack_2bit(const uint8_t *lv, uint8_t *qs)
{
    for (int h = 0; h < QK_K; h += 128)
        for (int l = 0; l < 32; l++)
            qs[h / 4 + l] = (uint8_t)(lv[h + l] | (lv[h + l + 32] << 2) | (lv[h + l + 64] << 4) |
                                      (lv[h + l + 96] << 6));
}

/* Q2_K: each sub-block of 16 fitted as scale*l + min (absolute error,
 * weights |x|); scales and mins quantized to 4 bits against the largest of
 * each, then every element requantized against the stored values. */
void quant_quantize_q2_K(const float *x, void *vy)
{
    static const kquant_search search = {.nmax = 3, .rmin = -0.5f, .rdelta = 0.1f, .nstep = 15, .use_mad = true};
    block_q2_K *y = vy;
    uint8_t lv[QK_K];
    float scales[QK_K / 16], mins[QK_K / 16], w[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 16; j++) {
        for (int l = 0; l < 16; l++)
            w[l] = fabsf(x[16 * j + l]);
        scales[j] = kquant_fit(x + 16 * j, w, 16, &search, lv + 16 * j, &mins[j]);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    if (max_scale > 0) {
        float iscale = 15.f / max_scale;
        for (int j = 0; j < QK_K / 16; j++)
            y->scales[j] = (uint8_t)quant_round_even(iscale * scales[j]);
        y->d = quant_f32_to_f16(max_scale / 15.f);
    } else {
        memset(y->scales, 0, sizeof y->scales);
        y->d = quant_f32_to_f16(0.f);
    }
    if (max_min > 0) {
        float iscale = 15.f / max_min;
        for (int j = 0; j < QK_K / 16; j++)
            y->scales[j] |= (uint8_t)((unsigned)quant_round_even(iscale * mins[j]) << 4);
        y->dmin = quant_f32_to_f16(max_min / 15.f);
    } else {
        y->dmin = quant_f32_to_f16(0.f);
    }
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = quant_f16_to_f32(y->d) * (y->scales[j] & 0xF);
        if (!d)
            continue;
        const float dm = quant_f16_to_f32(y->dmin) * (y->scales[j] >> 4);
        for (int i = 0; i < 16; i++)
            lv[16 * j + i] = (uint8_t)quant_clamp_int(quant_round_even((x[16 * j + i] + dm) / d), 0, 3);
    }
    pack_2bit(lv, y->qs);
}

/* Q3_K: each sub-block of 16 fitted with signed 3-bit levels; the sixteen
 * scales quantized to 6 signed bits against the one of largest magnitude,
 * then every element requantized against the stored scales. */
void quant_quantize_q3_K(const float *x, void *vy)
{
    block_q3_K *y = vy;
    int8_t lv[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < QK_K / 16; j++) {
        scales[j] = q3_fit(x + 16 * j, 16, 4, lv + 16 * j);
        if (fabsf(scales[j]) > amax) {
            amax = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    memset(y->scales, 0, sizeof y->scales);
    if (max_scale != 0) {
        float iscale = -32.f / max_scale;
        for (int j = 0; j < QK_K / 16; j++) {
            /* ggml keeps the low 8 bits of the rounded value, then clamps */
            int l = (int8_t)quant_round_even(iscale * scales[j]);
            l = quant_clamp_int(l, -32, 31) + 32;
            if (j < 8)
                y->scales[j] = (uint8_t)(l & 0xF);
            else
                y->scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
            y->scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        y->d = quant_f32_to_f16(1 / iscale);
    } else {
        y->d = quant_f32_to_f16(0.f);
    }
    uint8_t lu[QK_K];
    for (int i = 0; i < QK_K; i++)
        lu[i] = (uint8_t)lv[i];
    for (int j = 0; j < QK_K / 16; j++) {
        float d = quant_f16_to_f32(y->d) * q3_K_scale(y->scales, j);
        if (!d)
            continue;
        for (int i = 0; i < 16; i++)
            lu[16 * j + i] = (uint8_t)(quant_clamp_int(quant_round_even(x[16 * j + i] / d), -4, 3) + 4);
    }
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < QK_K; j++) {
        if (lu[j] > 3) {
            y->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            lu[j] -= 4;
        }
    }
    pack_2bit(lu, y->qs);
}

/* The shared part of Q4_K and Q5_K: fits the 8 sub-blocks, quantizes their
 * scales and mins to 6 bits against the block's d and dmin, then requantizes
 * every element against the stored (rounded) scales.  Writes d, dmin,
 * scales and the levels lv[256] in [0, nmax]. */
static void kquant_block(const float *x, const kquant_search *s, uint16_t *d_out,
                         uint16_t *dmin_out, uint8_t *scales_out, uint8_t *lv)
{
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xs[l]);
        scales[j] = kquant_fit(xs, w, 32, s, lv + 32 * j, &mins[j]);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        /* ggml keeps the low 8 bits, then caps at 63 */
        uint8_t a = (uint8_t)quant_round_even(inv_scale * scales[j]);
        uint8_t b = (uint8_t)quant_round_even(inv_min * mins[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = b < 63 ? b : 63;
    }
    kquant_pack_scales(ls, lm, scales_out);
    *d_out = quant_f32_to_f16(max_scale / 63.f);
    *dmin_out = quant_f32_to_f16(max_min / 63.f);

    const float d_all = quant_f16_to_f32(*d_out), dmin_all = quant_f16_to_f32(*dmin_out);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        kquant_scale_min(j, scales_out, &sc, &mn);
        const float d = d_all * sc;
        if (!d)
            continue;
        const float dm = dmin_all * mn;
        for (int i = 0; i < 32; i++)
            lv[32 * j + i] = (uint8_t)quant_clamp_int(quant_round_even((x[32 * j + i] + dm) / d), 0, s->nmax);
    }
}

void quant_quantize_q4_K(const float *x, void *vy)
{
    block_q4_K *y = vy;
    static const kquant_search search = {.nmax = 15, .rmin = -1.f, .rdelta = 0.1f, .nstep = 20};
    uint8_t lv[QK_K];
    memset(y->scales, 0, sizeof y->scales);
    kquant_block(x, &search, &y->d, &y->dmin, y->scales, lv);
    for (int pair = 0; pair < 4; pair++)
        for (int l = 0; l < 32; l++)
            y->qs[32 * pair + l] = (uint8_t)(lv[64 * pair + l] | (lv[64 * pair + 32 + l] << 4));
}

void quant_quantize_q5_K(const float *x, void *vy)
{
    block_q5_K *y = vy;
    static const kquant_search search = {.nmax = 31, .rmin = -0.5f, .rdelta = 0.1f, .nstep = 15};
    uint8_t lv[QK_K];
    memset(y->scales, 0, sizeof y->scales);
    kquant_block(x, &search, &y->d, &y->dmin, y->scales, lv);
    memset(y->qh, 0, sizeof y->qh);
    for (int pair = 0; pair < 4; pair++) {
        for (int l = 0; l < 32; l++) {
            int a = lv[64 * pair + l], b = lv[64 * pair + 32 + l];
            if (a > 15)
                y->qh[l] |= (uint8_t)(1u << (2 * pair));
            if (b > 15)
                y->qh[l] |= (uint8_t)(2u << (2 * pair));
            y->qs[32 * pair + l] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
        }
    }
}

static void pack_q6_K(const int8_t *lv, block_q6_K *y)
{
    for (int half = 0; half < 2; half++) {
        const int8_t *L = lv + 128 * half;
        uint8_t *ql = y->ql + 64 * half;
        uint8_t *qh = y->qh + 32 * half;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((L[l] & 0xF) | ((L[l + 64] & 0xF) << 4));
            ql[l + 32] = (uint8_t)((L[l + 32] & 0xF) | ((L[l + 96] & 0xF) << 4));
            qh[l] = (uint8_t)((L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) |
                              ((L[l + 96] >> 4) << 6));
        }
    }
}

void quant_quantize_q6_K(const float *x, void *vy)
{
    block_q6_K *y = vy;
    int8_t lv[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ib++) {
        scales[ib] = q6_fit(x + 16 * ib, 16, 32, lv + 16 * ib);
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < QUANT_GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    float iscale = -128.f / max_scale;
    y->d = quant_f32_to_f16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ib++) {
        int l = quant_round_even(iscale * scales[ib]);
        y->scales[ib] = (int8_t)quant_clamp_int(l, -128, 127);
    }
    const float d_all = quant_f16_to_f32(y->d);
    for (int j = 0; j < QK_K / 16; j++) {
        float d = d_all * y->scales[j];
        if (!d)
            continue;
        for (int i = 0; i < 16; i++) {
            int l = quant_clamp_int(quant_round_even(x[16 * j + i] / d), -32, 31);
            lv[16 * j + i] = (int8_t)(l + 32);
        }
    }
    pack_q6_K(lv, y);
}

