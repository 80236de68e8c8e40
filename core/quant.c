/* quant.c: the GGML tensor formats, scalar reference implementation.
 *
 * Sections in pipeline order: the type table; half and bfloat conversion;
 * block decoders (the exact values ggml's dequantize_row_* produce); row
 * dequantization and the reference dot product; the reference quantizers
 * (byte-identical with ggml's quantize_row_*_ref, which llama-quantize uses
 * when it has no importance matrix).
 *
 * Exactness rules this file keeps:
 *  - every float expression is evaluated in the same order and with the same
 *    operand types as ggml's reference C, because the quantizers' searches
 *    compare float sums and a single differently rounded sum can flip a
 *    choice and change the bytes;
 *  - no FMA contraction (gcc does not contract in ISO C mode; clang is told
 *    below), for the same reason;
 *  - no conversion of a float to an integer that might be out of range:
 *    inputs are clamped first, so NaN or inf in a tensor gives defined (if
 *    meaningless) bytes instead of undefined behaviour.
 */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "quant_fast.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ======================================================================
 * Type table (ggml's type ids and block geometry, ggml-common.h)
 * ====================================================================== */

#define T(name_, elems_, bytes_, deq_, quant_) \
    { .name = name_, .block_elems = elems_, .block_bytes = bytes_, .can_dequant = deq_, .can_quantize = quant_ }

static const quant_traits type_table[QT_COUNT] = {
    [QT_F32] = T("F32", 1, 4, true, true),
    [QT_F16] = T("F16", 1, 2, true, true),
    [QT_Q4_0] = T("Q4_0", QK4_0, sizeof(block_q4_0), true, true),
    [QT_Q4_1] = T("Q4_1", QK4_1, sizeof(block_q4_1), true, true),
    [QT_Q5_0] = T("Q5_0", QK5_0, sizeof(block_q5_0), true, true),
    [QT_Q5_1] = T("Q5_1", QK5_1, sizeof(block_q5_1), true, true),
    [QT_Q8_0] = T("Q8_0", QK8_0, sizeof(block_q8_0), true, true),
    [QT_Q8_1] = T("Q8_1", 32, 36, false, false),
    [QT_Q2_K] = T("Q2_K", QK_K, 84, false, false),
    [QT_Q3_K] = T("Q3_K", QK_K, 110, false, false),
    [QT_Q4_K] = T("Q4_K", QK_K, sizeof(block_q4_K), true, true),
    [QT_Q5_K] = T("Q5_K", QK_K, sizeof(block_q5_K), true, true),
    [QT_Q6_K] = T("Q6_K", QK_K, sizeof(block_q6_K), true, true),
    [QT_Q8_K] = T("Q8_K", QK_K, 292, false, false),
    [QT_IQ2_XXS] = T("IQ2_XXS", QK_K, 66, false, false),
    [QT_IQ2_XS] = T("IQ2_XS", QK_K, 74, false, false),
    [QT_IQ3_XXS] = T("IQ3_XXS", QK_K, 98, false, false),
    [QT_IQ1_S] = T("IQ1_S", QK_K, 50, false, false),
    [QT_IQ4_NL] = T("IQ4_NL", 32, 18, false, false),
    [QT_IQ3_S] = T("IQ3_S", QK_K, 110, false, false),
    [QT_IQ2_S] = T("IQ2_S", QK_K, 82, false, false),
    [QT_IQ4_XS] = T("IQ4_XS", QK_K, 136, false, false),
    [QT_I8] = T("I8", 1, 1, false, false),
    [QT_I16] = T("I16", 1, 2, false, false),
    [QT_I32] = T("I32", 1, 4, false, false),
    [QT_I64] = T("I64", 1, 8, false, false),
    [QT_F64] = T("F64", 1, 8, false, false),
    [QT_IQ1_M] = T("IQ1_M", QK_K, 56, false, false),
    [QT_BF16] = T("BF16", 1, 2, true, true),
    [QT_TQ1_0] = T("TQ1_0", QK_K, 54, false, false),
    [QT_TQ2_0] = T("TQ2_0", QK_K, 66, false, false),
    [QT_MXFP4] = T("MXFP4", 32, 17, false, false),
};
#undef T

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");

const quant_traits *quant_traits_of(uint32_t type)
{
    if (type >= QT_COUNT || !type_table[type].name)
        return NULL;
    return &type_table[type];
}

const char *quant_type_name(uint32_t type)
{
    const quant_traits *t = quant_traits_of(type);
    return t ? t->name : "?";
}

int quant_type_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < QT_COUNT; i++)
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0)
            return i;
    return -1;
}

bool quant_row_bytes(uint32_t type, uint64_t n, uint64_t *out)
{
    const quant_traits *t = quant_traits_of(type);
    if (!t || n % t->block_elems != 0)
        return false;
    uint64_t blocks = n / t->block_elems;
    if (blocks > UINT64_MAX / t->block_bytes)
        return false;
    *out = blocks * t->block_bytes;
    return true;
}

/* ======================================================================
 * Half and bfloat conversion
 * ====================================================================== */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        /* Zero or subnormal: man * 2^-24, exact in f32. */
        float mag = (float)man * 0x1p-24f;
        return sign ? -mag : mag;
    }
    if (exp == 31) /* inf, or NaN with its payload (quiet bit included) */
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

/* Rounds the integer m right by `shift` bits, to nearest with ties to even. */
static uint32_t shift_round_even(uint32_t m, unsigned shift)
{
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return q;
}

uint16_t quant_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) /* NaN: the quiet NaN ggml writes */
        return sign | 0x7e00;
    if (ax >= 0x477ff000) /* at or past 65520, the midpoint above 65504: inf */
        return sign | 0x7c00;
    if (ax >= 0x38800000) {
        /* Normal half.  A carry out of the mantissa bumps the exponent,
         * which is exactly the right result. */
        uint32_t rebased = ax - (112u << 23);
        return sign | (uint16_t)shift_round_even(rebased, 13);
    }
    if (ax <= 0x33000000) /* at most 2^-25, half the smallest subnormal: zero */
        return sign;
    /* Subnormal half: the value in units of 2^-24, rounded. */
    uint32_t mant = (ax & 0x7fffff) | 0x800000;
    unsigned shift = 126 - (ax >> 23);
    return sign | (uint16_t)shift_round_even(mant, shift);
}

float quant_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) /* NaN: keep sign and payload, force quiet */
        return (uint16_t)((x >> 16) | 0x40);
    /* Round to nearest even; overflow carries into inf, as it should. */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* ======================================================================
 * Block decoders
 *
 * Each writes one block's values in ggml's element order with ggml's
 * expressions (e.g. Q6_K is (d*scale)*q, not d*(scale*q): the first rounds
 * differently once d*scale*q needs more than 24 bits).
 * ====================================================================== */

static uint16_t load_u16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t load_u32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

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

static void decode_q4_0(const block_q4_0 *b, float *y)
{
    const float d = quant_f16_to_f32(b->d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        y[j] = ((b->qs[j] & 0x0F) - 8) * d;
        y[j + QK4_0 / 2] = ((b->qs[j] >> 4) - 8) * d;
    }
}

static void decode_q4_1(const block_q4_1 *b, float *y)
{
    const float d = quant_f16_to_f32(b->d);
    const float m = quant_f16_to_f32(b->m);
    for (int j = 0; j < QK4_1 / 2; j++) {
        y[j] = (b->qs[j] & 0x0F) * d + m;
        y[j + QK4_1 / 2] = (b->qs[j] >> 4) * d + m;
    }
}

/* Q5: element j's fifth bit is bit j of qh (elements 0-15 in the low
 * nibbles, 16-31 in the high nibbles). */
static void decode_q5_0(const block_q5_0 *b, float *y)
{
    const float d = quant_f16_to_f32(b->d);
    const uint32_t qh = load_u32(b->qh);
    for (int j = 0; j < QK5_0 / 2; j++) {
        int lo = (b->qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4);
        int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        y[j] = (lo - 16) * d;
        y[j + QK5_0 / 2] = (hi - 16) * d;
    }
}

static void decode_q5_1(const block_q5_1 *b, float *y)
{
    const float d = quant_f16_to_f32(b->d);
    const float m = quant_f16_to_f32(b->m);
    const uint32_t qh = load_u32(b->qh);
    for (int j = 0; j < QK5_1 / 2; j++) {
        int lo = (b->qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4);
        int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        y[j] = lo * d + m;
        y[j + QK5_1 / 2] = hi * d + m;
    }
}

static void decode_q8_0(const block_q8_0 *b, float *y)
{
    const float d = quant_f16_to_f32(b->d);
    for (int j = 0; j < QK8_0; j++)
        y[j] = b->qs[j] * d;
}

/* Q4_K: 8 sub-blocks of 32, value = (d*scale)*q - dmin*min; each 32 bytes of
 * qs hold two sub-blocks (low nibbles, then high nibbles). */
static void decode_q4_K(const block_q4_K *b, float *y)
{
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
static void decode_q5_K(const block_q5_K *b, float *y)
{
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
static void decode_q6_K(const block_q6_K *b, float *y)
{
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

void quant_decode_block(uint32_t type, const void *block, float *out)
{
    switch (type) {
    case QT_F32: memcpy(out, block, sizeof(float)); break;
    case QT_F16: out[0] = quant_f16_to_f32(load_u16(block)); break;
    case QT_BF16: out[0] = quant_bf16_to_f32(load_u16(block)); break;
    case QT_Q4_0: decode_q4_0(block, out); break;
    case QT_Q4_1: decode_q4_1(block, out); break;
    case QT_Q5_0: decode_q5_0(block, out); break;
    case QT_Q5_1: decode_q5_1(block, out); break;
    case QT_Q8_0: decode_q8_0(block, out); break;
    case QT_Q4_K: decode_q4_K(block, out); break;
    case QT_Q5_K: decode_q5_K(block, out); break;
    case QT_Q6_K: decode_q6_K(block, out); break;
    default: {
        const quant_traits *t = quant_traits_of(type);
        for (uint32_t i = 0; t && i < t->block_elems; i++)
            out[i] = NAN;
    }
    }
}

/* ======================================================================
 * Row dequantization and the reference dot product
 * ====================================================================== */

static bool dequantizable(uint32_t type)
{
    const quant_traits *t = quant_traits_of(type);
    return t && t->can_dequant;
}

void quant_dequant_row(uint32_t type, const void *src, float *dst, uint64_t n)
{
    if (!dequantizable(type)) {
        for (uint64_t i = 0; i < n; i++)
            dst[i] = NAN;
        return;
    }
    const quant_traits *t = quant_traits_of(type);
    const uint8_t *p = src;
    for (uint64_t b = 0; b < n / t->block_elems; b++)
        quant_decode_block(type, p + b * t->block_bytes, dst + b * t->block_elems);
}

/* Block by block: decode the block exactly, sum its products in order,
 * add the block's sum to the row's. */
float quant_dot_row(uint32_t type, const void *row, const float *x, uint64_t n)
{
    if (!dequantizable(type))
        return NAN;
    const quant_traits *t = quant_traits_of(type);
    const uint8_t *p = row;
    float w[QK_K];
    float sum = 0.0f;
    for (uint64_t b = 0; b < n / t->block_elems; b++) {
        quant_decode_block(type, p + b * t->block_bytes, w);
        const float *xb = x + b * t->block_elems;
        float block_sum = 0.0f;
        for (uint32_t i = 0; i < t->block_elems; i++)
            block_sum += w[i] * xb[i];
        sum += block_sum;
    }
    return sum;
}

/* ======================================================================
 * Quantizer helpers
 * ====================================================================== */

/* ggml's smallest group maximum that is not treated as all-zero. */
#define GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even, the way ggml's K-quant code does it:
 * adding 1.5*2^23 leaves the rounded integer in the low mantissa bits.  Exact
 * for |v| < 2^22; beyond that, and for NaN, it returns some int (never UB). */
static int round_even(float v)
{
    float t = v + 12582912.0f;
    return (int)(f32_bits(t) & 0x7fffff) - 0x400000;
}

/* C's float-to-int conversion (truncation) where the value fits; values out
 * of [lo, hi] and NaN are clamped first, so the conversion is always
 * defined.  Inside the range this is exactly ggml's (int8_t)/(uint8_t) cast. */
static int trunc_clamped(float v, int lo, int hi)
{
    if (!(v > (float)lo - 1.0f))
        return lo;
    if (!(v < (float)hi + 1.0f))
        return hi;
    return (int)v;
}

static int clamp_int(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The element of largest magnitude (the first one on ties), sign kept. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *min, float *max)
{
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min)
            *min = x[j];
        if (x[j] > *max)
            *max = x[j];
    }
}

/* ======================================================================
 * 32-element quantizers: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 *
 * Symmetric types take the scale from the signed extreme so that it maps to
 * the most negative level exactly (-8 or -16); the asymmetric ones span
 * [min, max].  Levels are rounded with +0.5 and truncation, as ggml does.
 * ====================================================================== */

static void quantize_q4_0(const float *x, block_q4_0 *y)
{
    const float d = signed_absmax(x, QK4_0) / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = quant_f32_to_f16(d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        int lo = trunc_clamped(x[j] * id + 8.5f, -128, 127);
        int hi = trunc_clamped(x[j + QK4_0 / 2] * id + 8.5f, -128, 127);
        lo = lo < 15 ? lo : 15;
        hi = hi < 15 ? hi : 15;
        y->qs[j] = (uint8_t)((uint8_t)lo | ((uint8_t)hi << 4));
    }
}

static void quantize_q4_1(const float *x, block_q4_1 *y)
{
    float min, max;
    min_max(x, QK4_1, &min, &max);
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = quant_f32_to_f16(d);
    y->m = quant_f32_to_f16(min);
    for (int j = 0; j < QK4_1 / 2; j++) {
        int lo = trunc_clamped((x[j] - min) * id + 0.5f, -128, 127);
        int hi = trunc_clamped((x[j + QK4_1 / 2] - min) * id + 0.5f, -128, 127);
        lo = lo < 15 ? lo : 15;
        hi = hi < 15 ? hi : 15;
        y->qs[j] = (uint8_t)((uint8_t)lo | ((uint8_t)hi << 4));
    }
}

/* Packs 32 five-bit levels: low nibbles into qs, fifth bits into qh. */
static void pack_q5(const int *lv, uint8_t *qs, uint8_t *qh_bytes)
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((lv[j] & 0x0F) | ((lv[j + 16] & 0x0F) << 4));
        qh |= (uint32_t)((lv[j] >> 4) & 1) << j;
        qh |= (uint32_t)((lv[j + 16] >> 4) & 1) << (j + 16);
    }
    memcpy(qh_bytes, &qh, sizeof qh);
}

static void quantize_q5_0(const float *x, block_q5_0 *y)
{
    const float d = signed_absmax(x, QK5_0) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = quant_f32_to_f16(d);
    int lv[QK5_0];
    for (int j = 0; j < QK5_0; j++) {
        /* ggml stores the int8_t cast in a uint8_t: keep those low 8 bits */
        int l = trunc_clamped(x[j] * id + 16.5f, -128, 127);
        lv[j] = (uint8_t)(l < 31 ? l : 31);
    }
    pack_q5(lv, y->qs, y->qh);
}

static void quantize_q5_1(const float *x, block_q5_1 *y)
{
    float min, max;
    min_max(x, QK5_1, &min, &max);
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = quant_f32_to_f16(d);
    y->m = quant_f32_to_f16(min);
    int lv[QK5_1];
    for (int j = 0; j < QK5_1; j++)
        lv[j] = trunc_clamped((x[j] - min) * id + 0.5f, 0, 255);
    pack_q5(lv, y->qs, y->qh);
}

static void quantize_q8_0(const float *x, block_q8_0 *y)
{
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = quant_f32_to_f16(d);
    for (int j = 0; j < QK8_0; j++) {
        /* roundf, then the int8 conversion ggml's assignment performs */
        y->qs[j] = (int8_t)trunc_clamped(roundf(x[j] * id), -128, 127);
    }
}

/* ======================================================================
 * K-quant searches
 * ====================================================================== */

/* Q4_K/Q5_K sub-block fit: levels l in [0, nmax] with x ~ scale*l + min
 * (min <= 0), minimizing the weighted squared error.  Starts from the plain
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
} kquant_search;

static float weighted_sq_error(const float *x, const float *w, const uint8_t *lv, int n,
                               float scale, float min)
{
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * lv[i] + min - x[i];
        diff = diff * diff;
        err += w[i] * diff;
    }
    return err;
}

static void levels_for(const float *x, int n, float iscale, float min, int nmax, uint8_t *lv)
{
    for (int i = 0; i < n; i++)
        lv[i] = (uint8_t)clamp_int(round_even(iscale * (x[i] - min)), 0, nmax);
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
    float best_err = weighted_sq_error(x, w, lv, n, scale, min);

    uint8_t trial[QK_K];
    for (int is = 0; is <= s->nstep; is++) {
        iscale = (s->rmin + s->rdelta * is + s->nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(round_even(iscale * (x[i] - min)), 0, s->nmax);
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
        float err = weighted_sq_error(x, w, trial, n, this_scale, this_min);
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
        int l = clamp_int(round_even(iscale * x[i]), -nmax, nmax - 1);
        if (lv)
            lv[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        *sumlx += w * x[i] * l;
        *suml2 += w * l * l;
    }
}

static float q6_fit(const float *x, int n, int nmax, int8_t *lv)
{
    float max = signed_absmax(x, n);
    if (fabsf(max) < GROUP_MAX_EPS) {
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

/* ======================================================================
 * K-quantizers: Q4_K, Q5_K, Q6_K
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
        uint8_t a = (uint8_t)round_even(inv_scale * scales[j]);
        uint8_t b = (uint8_t)round_even(inv_min * mins[j]);
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
            lv[32 * j + i] = (uint8_t)clamp_int(round_even((x[32 * j + i] + dm) / d), 0, s->nmax);
    }
}

static void quantize_q4_K(const float *x, block_q4_K *y)
{
    static const kquant_search search = {.nmax = 15, .rmin = -1.f, .rdelta = 0.1f, .nstep = 20};
    uint8_t lv[QK_K];
    memset(y->scales, 0, sizeof y->scales);
    kquant_block(x, &search, &y->d, &y->dmin, y->scales, lv);
    for (int pair = 0; pair < 4; pair++)
        for (int l = 0; l < 32; l++)
            y->qs[32 * pair + l] = (uint8_t)(lv[64 * pair + l] | (lv[64 * pair + 32 + l] << 4));
}

static void quantize_q5_K(const float *x, block_q5_K *y)
{
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

static void quantize_q6_K(const float *x, block_q6_K *y)
{
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
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    float iscale = -128.f / max_scale;
    y->d = quant_f32_to_f16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ib++) {
        int l = round_even(iscale * scales[ib]);
        y->scales[ib] = (int8_t)clamp_int(l, -128, 127);
    }
    const float d_all = quant_f16_to_f32(y->d);
    for (int j = 0; j < QK_K / 16; j++) {
        float d = d_all * y->scales[j];
        if (!d)
            continue;
        for (int i = 0; i < 16; i++) {
            int l = clamp_int(round_even(x[16 * j + i] / d), -32, 31);
            lv[16 * j + i] = (int8_t)(l + 32);
        }
    }
    pack_q6_K(lv, y);
}

/* ======================================================================
 * Row quantization
 * ====================================================================== */

size_t quant_quantize_row(uint32_t type, const float *src, void *dst, uint64_t n)
{
    const quant_traits *t = quant_traits_of(type);
    if (!t || !t->can_quantize)
        return 0;
    const uint64_t nb = n / t->block_elems;
    uint8_t *out = dst;
    for (uint64_t b = 0; b < nb; b++) {
        const float *x = src + b * t->block_elems;
        void *y = out + b * t->block_bytes;
        switch (type) {
        case QT_F32: memcpy(y, x, sizeof(float)); break;
        case QT_F16: {
            uint16_t h = quant_f32_to_f16(*x);
            memcpy(y, &h, sizeof h);
            break;
        }
        case QT_BF16: {
            uint16_t h = quant_f32_to_bf16(*x);
            memcpy(y, &h, sizeof h);
            break;
        }
        case QT_Q4_0: quantize_q4_0(x, y); break;
        case QT_Q4_1: quantize_q4_1(x, y); break;
        case QT_Q5_0: quantize_q5_0(x, y); break;
        case QT_Q5_1: quantize_q5_1(x, y); break;
        case QT_Q8_0: quantize_q8_0(x, y); break;
        case QT_Q4_K: quantize_q4_K(x, y); break;
        case QT_Q5_K: quantize_q5_K(x, y); break;
        case QT_Q6_K: quantize_q6_K(x, y); break;
        default: return 0;
        }
    }
    return (size_t)(nb * t->block_bytes);
}
