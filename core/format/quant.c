/* quant.c: the GGML tensor formats, scalar reference implementation.
 *
 * Sections in pipeline order: the type table (every type's geometry and
 * block codecs; the codecs of the other families live in quant_kquant.c,
 * quant_iq4.c, quant_iq.c and quant_iq_quantize.c); the float and legacy (Q4_0 .. Q8_0) block decoders (the exact
 * values ggml's dequantize_row_* produce); row dequantization and the
 * reference dot product; the legacy quantizers (byte-identical with ggml's
 * quantize_row_*_ref, which llama-quantize uses when it has no importance
 * matrix); row quantization.  Half and bfloat conversion, which every
 * family uses, is quant_half.c (so the families call one way: quant.c ->
 * family -> quant_half.c).
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
#include "quant_formats.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ======================================================================
 * Type table (ggml's type ids and block geometry, ggml-common.h)
 * ====================================================================== */

static void decode_f32(const void *b, float *y);
static void decode_f16(const void *b, float *y);
static void decode_bf16(const void *b, float *y);
static void decode_q4_0(const void *b, float *y);
static void decode_q4_1(const void *b, float *y);
static void decode_q5_0(const void *b, float *y);
static void decode_q5_1(const void *b, float *y);
static void decode_q8_0(const void *b, float *y);
static void quantize_f32(const float *x, void *b);
static void quantize_f16(const float *x, void *b);
static void quantize_bf16(const float *x, void *b);
static void quantize_q4_0(const float *x, void *b);
static void quantize_q4_1(const float *x, void *b);
static void quantize_q5_0(const float *x, void *b);
static void quantize_q5_1(const float *x, void *b);
static void quantize_q8_0(const float *x, void *b);

/* T: a type with codecs; S: a type known by size only. */
#define T(name_, elems_, bytes_, fam_, dec_, quant_)                                                    \
    {.name = name_, .block_elems = elems_, .block_bytes = bytes_, .can_dequant = true,                \
     .can_quantize = true, .family = fam_, .decode_block = dec_, .quantize_block = quant_}
#define S(name_, elems_, bytes_) {.name = name_, .block_elems = elems_, .block_bytes = bytes_}

static const quant_traits type_table[QT_COUNT] = {
    [QT_F32] = T("F32", 1, 4, QF_FLOAT, decode_f32, quantize_f32),
    [QT_F16] = T("F16", 1, 2, QF_FLOAT, decode_f16, quantize_f16),
    [QT_BF16] = T("BF16", 1, 2, QF_FLOAT, decode_bf16, quantize_bf16),
    [QT_Q4_0] = T("Q4_0", QK4_0, sizeof(block_q4_0), QF_LEGACY, decode_q4_0, quantize_q4_0),
    [QT_Q4_1] = T("Q4_1", QK4_1, sizeof(block_q4_1), QF_LEGACY, decode_q4_1, quantize_q4_1),
    [QT_Q5_0] = T("Q5_0", QK5_0, sizeof(block_q5_0), QF_LEGACY, decode_q5_0, quantize_q5_0),
    [QT_Q5_1] = T("Q5_1", QK5_1, sizeof(block_q5_1), QF_LEGACY, decode_q5_1, quantize_q5_1),
    [QT_Q8_0] = T("Q8_0", QK8_0, sizeof(block_q8_0), QF_LEGACY, decode_q8_0, quantize_q8_0),
    [QT_Q2_K] = T("Q2_K", QK_K, sizeof(block_q2_K), QF_KQUANT, quant_decode_q2_K, quant_quantize_q2_K),
    [QT_Q3_K] = T("Q3_K", QK_K, sizeof(block_q3_K), QF_KQUANT, quant_decode_q3_K, quant_quantize_q3_K),
    [QT_Q4_K] = T("Q4_K", QK_K, sizeof(block_q4_K), QF_KQUANT, quant_decode_q4_K, quant_quantize_q4_K),
    [QT_Q5_K] = T("Q5_K", QK_K, sizeof(block_q5_K), QF_KQUANT, quant_decode_q5_K, quant_quantize_q5_K),
    [QT_Q6_K] = T("Q6_K", QK_K, sizeof(block_q6_K), QF_KQUANT, quant_decode_q6_K, quant_quantize_q6_K),
    [QT_IQ4_NL] = T("IQ4_NL", QK4_NL, sizeof(block_iq4_nl), QF_IQ4, quant_decode_iq4_nl, quant_quantize_iq4_nl),
    [QT_IQ4_XS] = T("IQ4_XS", QK_K, sizeof(block_iq4_xs), QF_IQ4, quant_decode_iq4_xs, quant_quantize_iq4_xs),
    [QT_MXFP4] = T("MXFP4", QK_MXFP4, sizeof(block_mxfp4), QF_IQ4, quant_decode_mxfp4, quant_quantize_mxfp4),
    [QT_IQ2_XXS] = T("IQ2_XXS", QK_K, sizeof(block_iq2_xxs), QF_GRID, quant_decode_iq2_xxs, quant_quantize_iq2_xxs),
    [QT_IQ2_XS] = T("IQ2_XS", QK_K, sizeof(block_iq2_xs), QF_GRID, quant_decode_iq2_xs, quant_quantize_iq2_xs),
    [QT_IQ2_S] = T("IQ2_S", QK_K, sizeof(block_iq2_s), QF_GRID, quant_decode_iq2_s, quant_quantize_iq2_s),
    [QT_IQ3_XXS] = T("IQ3_XXS", QK_K, sizeof(block_iq3_xxs), QF_GRID, quant_decode_iq3_xxs, quant_quantize_iq3_xxs),
    [QT_IQ3_S] = T("IQ3_S", QK_K, sizeof(block_iq3_s), QF_GRID, quant_decode_iq3_s, quant_quantize_iq3_s),
    [QT_IQ1_S] = T("IQ1_S", QK_K, sizeof(block_iq1_s), QF_GRID, quant_decode_iq1_s, quant_quantize_iq1_s),
    [QT_IQ1_M] = T("IQ1_M", QK_K, sizeof(block_iq1_m), QF_GRID, quant_decode_iq1_m, quant_quantize_iq1_m),
    [QT_Q8_1] = S("Q8_1", 32, 36),
    [QT_Q8_K] = S("Q8_K", QK_K, 292),
    [QT_I8] = S("I8", 1, 1),
    [QT_I16] = S("I16", 1, 2),
    [QT_I32] = S("I32", 1, 4),
    [QT_I64] = S("I64", 1, 8),
    [QT_F64] = S("F64", 1, 8),
    [QT_TQ1_0] = S("TQ1_0", QK_K, 54),
    [QT_TQ2_0] = S("TQ2_0", QK_K, 66),
    [QT_NVFP4] = S("NVFP4", 64, 36),
    [QT_Q1_0] = S("Q1_0", 128, 18),
    [QT_Q2_0] = S("Q2_0", 64, 18),
};
#undef T
#undef S

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs layout");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 layout");
_Static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs layout");
_Static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs layout");
_Static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s layout");
_Static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs layout");
_Static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s layout");
_Static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s layout");
_Static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m layout");

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
 * Float and legacy block decoders
 *
 * Each writes one block's values in ggml's element order with ggml's
 * expressions.
 * ====================================================================== */

static void decode_f32(const void *b, float *y)
{
    memcpy(y, b, sizeof(float));
}

static void decode_f16(const void *b, float *y)
{
    y[0] = quant_f16_to_f32(quant_load_u16(b));
}

static void decode_bf16(const void *b, float *y)
{
    y[0] = quant_bf16_to_f32(quant_load_u16(b));
}

static void decode_q4_0(const void *vb, float *y)
{
    const block_q4_0 *b = vb;
    const float d = quant_f16_to_f32(b->d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        y[j] = ((b->qs[j] & 0x0F) - 8) * d;
        y[j + QK4_0 / 2] = ((b->qs[j] >> 4) - 8) * d;
    }
}

static void decode_q4_1(const void *vb, float *y)
{
    const block_q4_1 *b = vb;
    const float d = quant_f16_to_f32(b->d);
    const float m = quant_f16_to_f32(b->m);
    for (int j = 0; j < QK4_1 / 2; j++) {
        y[j] = (b->qs[j] & 0x0F) * d + m;
        y[j + QK4_1 / 2] = (b->qs[j] >> 4) * d + m;
    }
}

/* Q5: element j's fifth bit is bit j of qh (elements 0-15 in the low
 * nibbles, 16-31 in the high nibbles). */
static void decode_q5_0(const void *vb, float *y)
{
    const block_q5_0 *b = vb;
    const float d = quant_f16_to_f32(b->d);
    const uint32_t qh = quant_load_u32(b->qh);
    for (int j = 0; j < QK5_0 / 2; j++) {
        int lo = (b->qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4);
        int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        y[j] = (lo - 16) * d;
        y[j + QK5_0 / 2] = (hi - 16) * d;
    }
}

static void decode_q5_1(const void *vb, float *y)
{
    const block_q5_1 *b = vb;
    const float d = quant_f16_to_f32(b->d);
    const float m = quant_f16_to_f32(b->m);
    const uint32_t qh = quant_load_u32(b->qh);
    for (int j = 0; j < QK5_1 / 2; j++) {
        int lo = (b->qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4);
        int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        y[j] = lo * d + m;
        y[j + QK5_1 / 2] = hi * d + m;
    }
}

static void decode_q8_0(const void *vb, float *y)
{
    const block_q8_0 *b = vb;
    const float d = quant_f16_to_f32(b->d);
    for (int j = 0; j < QK8_0; j++)
        y[j] = b->qs[j] * d;
}
void quant_decode_block(uint32_t type, const void *block, float *out)
{
    const quant_traits *t = quant_traits_of(type);
    if (t && t->decode_block) {
        t->decode_block(block, out);
        return;
    }
    for (uint32_t i = 0; t && i < t->block_elems; i++)
        out[i] = NAN;
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

static void quantize_f32(const float *x, void *b)
{
    memcpy(b, x, sizeof(float));
}

static void quantize_f16(const float *x, void *b)
{
    quant_store_u16(b, quant_f32_to_f16(*x));
}

static void quantize_bf16(const float *x, void *b)
{
    quant_store_u16(b, quant_f32_to_bf16(*x));
}

/* ======================================================================
 * 32-element quantizers: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 *
 * Symmetric types take the scale from the signed extreme so that it maps to
 * the most negative level exactly (-8 or -16); the asymmetric ones span
 * [min, max].  Levels are rounded with +0.5 and truncation, as ggml does.
 * ====================================================================== */

static void quantize_q4_0(const float *x, void *vy)
{
    block_q4_0 *y = vy;
    const float d = quant_signed_absmax(x, QK4_0) / -8;
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

static void quantize_q4_1(const float *x, void *vy)
{
    block_q4_1 *y = vy;
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

static void quantize_q5_0(const float *x, void *vy)
{
    block_q5_0 *y = vy;
    const float d = quant_signed_absmax(x, QK5_0) / -16;
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

static void quantize_q5_1(const float *x, void *vy)
{
    block_q5_1 *y = vy;
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

static void quantize_q8_0(const float *x, void *vy)
{
    block_q8_0 *y = vy;
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
 * Row quantization
 * ====================================================================== */

size_t quant_quantize_row(uint32_t type, const float *src, void *dst, uint64_t n)
{
    const quant_traits *t = quant_traits_of(type);
    if (!t || !t->quantize_block)
        return 0;
    const uint64_t nb = n / t->block_elems;
    uint8_t *out = dst;
    for (uint64_t b = 0; b < nb; b++)
        t->quantize_block(src + b * t->block_elems, out + b * t->block_bytes);
    return (size_t)(nb * t->block_bytes);
}
