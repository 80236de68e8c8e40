/* synth_blocks.c: the random blocks of synthetic models' tensors.
 *
 * Counter-based randomness: word k of block b of tensor i is
 * mix64(key(seed, i) + (b * words_per_block + k) * golden), so any block can
 * be made on its own and the file does not depend on how the work is split.
 * Quantized blocks are made directly, not by quantizing: random codes with
 * a random-sign scale per block (per sub-block for Q6_K and Q3_K), which
 * makes every tensor zero-mean; scale magnitudes vary over [0.5, 1.5] x c,
 * with c chosen so the values' rms is the tensor's target.
 *
 * Sections: the generator; the legacy and Q4_K-Q6_K blocks (their code
 * rms worked out below); the low-bit and table formats (Q2_K, Q3_K, IQ4,
 * MXFP4, the grids: code rms measured); float elements; the entry point.
 */
#include <math.h>
#include <string.h>

#include "format/quant.h"
#include "synth.h"

/* ======================================================================
 * The generator
 * ====================================================================== */

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t key, ctr;
} rng;

static inline uint64_t next64(rng *r) { return mix64(r->key + (r->ctr++) * 0x9E3779B97F4A7C15ull); }

static void fill_words(rng *r, uint8_t *dst, size_t n_words)
{
    for (size_t k = 0; k < n_words; k++) {
        uint64_t v = next64(r);
        memcpy(dst + 8 * k, &v, 8);
    }
}

/* About N(0,1): the sum of four 16-bit uniforms, centred and scaled
 * (Irwin-Hall), from one random word. */
static inline float gauss(uint64_t v)
{
    float s = (float)(v & 0xffff) + (float)(v >> 16 & 0xffff) + (float)(v >> 32 & 0xffff) + (float)(v >> 48);
    return (s / 65536.0f - 2.0f) * 1.7320508f;
}

/* ======================================================================
 * Legacy and Q4_K-Q6_K blocks
 * ====================================================================== */

/* rms of the codes times the scale factor per type (see above), and the
 * random words each block uses. */
typedef struct {
    uint32_t type;
    double code_rms;
    uint32_t words;
} block_recipe;

#define SC_RMS 48.389 /* rms of a 6-bit sub-block scale uniform in 32..63 */

static const block_recipe recipes[] = {
    {QT_Q4_0, 4.6368, 3},           /* q-8, q in 0..15 */
    {QT_Q4_1, 4.6098, 3},           /* q-7.5 */
    {QT_Q5_0, 9.2466, 4},           /* q-16, q in 0..31 */
    {QT_Q5_1, 9.2331, 4},           /* q-15.5 */
    {QT_Q8_0, 73.902, 5},           /* int8 */
    {QT_Q4_K, SC_RMS * 4.6098, 18}, /* sc * (q-7.5) */
    {QT_Q5_K, SC_RMS * 9.2331, 22}, /* sc * (q-15.5) */
    {QT_Q6_K, SC_RMS * 18.480, 27}, /* sc * (q-32) */
};

static const block_recipe *recipe_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (recipes[i].type == type)
            return &recipes[i];
    return NULL;
}

/* 256 scale magnitudes (f16 bits) uniform over [0.5, 1.5] x c, and `mult`
 * times each (Q4_1/Q5_1's offset, the K-quants' dmin). */
typedef struct {
    uint16_t d[256], aux[256];
} scale_table;

static void make_scales(scale_table *s, double rms, double code_rms, double mult)
{
    /* E[u^2] for u uniform on [0.5, 1.5] is 13/12 */
    double c = rms / (code_rms * sqrt(13.0 / 12.0));
    for (int k = 0; k < 256; k++) {
        double d = c * (0.5 + (k + 0.5) / 256.0);
        s->d[k] = quant_f32_to_f16((float)d);
        s->aux[k] = quant_f32_to_f16((float)(d * mult));
    }
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* 12 bytes holding eight 6-bit scales and eight 6-bit mins (ggml's K-quant
 * packing: sub-blocks 0-3 in the low 6 bits of bytes 0-7, 4-7 split across
 * the top bits of those and the nibbles of bytes 8-11). */
static void pack_k_scales(uint8_t out[12], const uint8_t sc[8], const uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

/* Q4_K / Q5_K block header: d, dmin (same sign), sub-block scales 32..63 and
 * mins chosen so each sub-block is centred: dmin*m ~ d*sc*centre. */
static void k_header(uint8_t *b, const scale_table *s, uint64_t w_sc, uint64_t w_d, double centre_over_mult)
{
    uint16_t sign = (uint16_t)((w_d >> 8 & 1) << 15);
    put16(b, s->d[w_d & 255] | sign);
    put16(b + 2, s->aux[w_d & 255] | sign);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(32 + (w_sc >> (5 * j) & 31));
        mn[j] = (uint8_t)lrint(sc[j] * centre_over_mult);
    }
    pack_k_scales(b + 4, sc, mn);
}

static void fill_quant_block(uint32_t type, rng *r, const scale_table *s, uint8_t *b)
{
    uint64_t w[27];
    switch (type) {
    case QT_Q4_0: /* d, qs[16] */
        fill_words(r, b + 2, 2);
        w[0] = next64(r);
        put16(b, s->d[w[0] & 255] | (uint16_t)((w[0] >> 8 & 1) << 15));
        return;
    case QT_Q4_1: /* d, m = -7.5 d, qs[16] */
        fill_words(r, b + 4, 2);
        w[0] = next64(r);
        put16(b, s->d[w[0] & 255] | (uint16_t)((w[0] >> 8 & 1) << 15));
        put16(b + 2, s->aux[w[0] & 255] ^ (uint16_t)((w[0] >> 8 & 1) << 15));
        return;
    case QT_Q5_0: /* d, qh[4], qs[16] */
        fill_words(r, b + 6, 2);
        w[0] = next64(r);
        memcpy(b + 2, &w[0], 4);
        w[1] = next64(r);
        put16(b, s->d[w[1] & 255] | (uint16_t)((w[1] >> 8 & 1) << 15));
        return;
    case QT_Q5_1: /* d, m = -15.5 d, qh[4], qs[16] */
        fill_words(r, b + 8, 2);
        w[0] = next64(r);
        memcpy(b + 4, &w[0], 4);
        w[1] = next64(r);
        put16(b, s->d[w[1] & 255] | (uint16_t)((w[1] >> 8 & 1) << 15));
        put16(b + 2, s->aux[w[1] & 255] ^ (uint16_t)((w[1] >> 8 & 1) << 15));
        return;
    case QT_Q8_0: /* d, qs[32] */
        fill_words(r, b + 2, 4);
        w[0] = next64(r);
        put16(b, s->d[w[0] & 255] | (uint16_t)((w[0] >> 8 & 1) << 15));
        return;
    case QT_Q4_K: /* d, dmin = 8 d, scales[12], qs[128] */
        fill_words(r, b + 16, 16);
        w[0] = next64(r);
        w[1] = next64(r);
        k_header(b, s, w[0], w[1], 7.5 / 8.0);
        return;
    case QT_Q5_K: /* d, dmin = 16 d, scales[12], qh[32], qs[128] */
        fill_words(r, b + 16, 20);
        w[0] = next64(r);
        w[1] = next64(r);
        k_header(b, s, w[0], w[1], 15.5 / 16.0);
        return;
    case QT_Q6_K: { /* ql[128], qh[64], scales[16] (signed), d */
        fill_words(r, b, 24);
        w[0] = next64(r);
        w[1] = next64(r);
        w[2] = next64(r);
        for (int j = 0; j < 16; j++) {
            uint8_t x = (uint8_t)((j < 8 ? w[0] : w[1]) >> (8 * (j & 7)));
            int mag = 32 + (x & 31);
            b[192 + j] = (uint8_t)(int8_t)((x & 128) ? -mag : mag);
        }
        put16(b + 208, s->d[w[2] & 255]);
        return;
    }
    default:
        return;
    }
}


/* ======================================================================
 * Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4 and the grid formats
 *
 * Every byte random (all codes, grid points and signs), then the
 * sub-block scales held in the upper half of their range (so no sub-block
 * is nearly zero, as in a quantized real tensor) and the f16 scale(s) set:
 * d random-sign, |d| from the scale table.  Their code rms (the values'
 * rms at |d| = 1) is measured on 64 blocks made the same way with a fixed
 * key, so it is the same in every thread and call.
 * ====================================================================== */

/* Writes the sub-scales and scale fields of a random-byte block; w: a
 * random word; d, the f16 scale (sign included). */
static void lowbit_fields(uint32_t type, uint8_t *b, uint64_t w, uint16_t d)
{
    switch (type) {
    case QT_Q2_K: { /* 4-bit scales 8..15, mins ~0.75 x scale against dmin = 2 d: centred sub-blocks */
        for (int j = 0; j < 16; j++) {
            int sc = 8 + (int)((w >> (3 * j)) & 7);
            b[j] = (uint8_t)(sc | lrint(0.75 * sc) << 4);
        }
        put16(b + 80, d);
        put16(b + 82, quant_f32_to_f16(2.0f * quant_f16_to_f32(d)));
        break;
    }
    case QT_Q3_K: /* 6-bit scales 32 +- (16..31), random signs */
    case QT_IQ4_XS: {
        uint8_t u[16];
        int n = type == QT_Q3_K ? 16 : 8;
        for (int j = 0; j < n; j++) {
            int mag = 16 + (int)((w >> (4 * j)) & 15);
            u[j] = (uint8_t)((w >> (63 - j)) & 1 ? 32 - mag : 32 + mag);
        }
        if (type == QT_Q3_K) {
            memset(b + 96, 0, 12);
            for (int j = 0; j < 16; j++) {
                b[96 + j % 8] |= (uint8_t)((u[j] & 15) << (j < 8 ? 0 : 4));
                b[96 + 8 + j % 4] |= (uint8_t)((u[j] >> 4) << (2 * (j / 4)));
            }
            put16(b + 108, d);
        } else {
            uint16_t sh = 0;
            memset(b + 4, 0, 4);
            for (int j = 0; j < 8; j++) {
                b[4 + j / 2] |= (uint8_t)((u[j] & 15) << (4 * (j % 2)));
                sh |= (uint16_t)((u[j] >> 4) << (2 * j));
            }
            put16(b + 2, sh);
            put16(b, d);
        }
        break;
    }
    case QT_IQ2_XXS: /* the 4-bit scale in the top nibble of each 32's second word: 8..15 */
        for (int ib = 0; ib < 8; ib++)
            b[2 + 8 * ib + 7] |= 0x80;
        put16(b, d);
        break;
    case QT_IQ3_XXS:
        for (int ib = 0; ib < 8; ib++)
            b[66 + 4 * ib + 3] |= 0x80;
        put16(b, d);
        break;
    case QT_IQ2_XS: /* 4-bit scale nibbles: 8..15 */
    case QT_IQ2_S:
    case QT_IQ3_S: {
        int at = type == QT_IQ2_XS ? 66 : type == QT_IQ2_S ? 74 : 106, n = type == QT_IQ3_S ? 4 : 8;
        for (int i = 0; i < n; i++)
            b[at + i] |= 0x88;
        put16(b, d);
        break;
    }
    case QT_IQ1_S: /* 3-bit scales 4..7 (bit 14 of each 32's word) */
        for (int ib = 0; ib < 8; ib++)
            b[34 + 2 * ib + 1] |= 0x40;
        put16(b, d);
        break;
    case QT_IQ1_M: /* 3-bit scales 4..7, then d in the scale words' top nibbles */
        for (int i = 0; i < 4; i++) {
            uint16_t sc = (uint16_t)(b[48 + 2 * i] | b[48 + 2 * i + 1] << 8);
            sc = (uint16_t)((sc | 0x0924) & 0x0fff) | (uint16_t)(((d >> (4 * i)) & 15) << 12);
            put16(b + 48 + 2 * i, sc);
        }
        break;
    default: /* IQ4_NL */
        put16(b, d);
        break;
    }
}

static void lowbit_block(uint32_t type, rng *r, uint16_t d, uint8_t *b)
{
    uint8_t words[144];
    const uint32_t bytes = quant_traits_of(type)->block_bytes;
    fill_words(r, words, (bytes + 7) / 8);
    memcpy(b, words, bytes);
    lowbit_fields(type, b, next64(r), d);
}

static double lowbit_code_rms(uint32_t type)
{
    const quant_traits *qt = quant_traits_of(type);
    double s2 = 0;
    float y[QK_K];
    uint8_t b[144];
    for (uint64_t k = 0; k < 64; k++) {
        rng r = {0x243F6A8885A308D3ull, 64 * k};
        lowbit_block(type, &r, 0x3c00, b);
        quant_dequant_row(type, b, y, qt->block_elems);
        for (uint32_t i = 0; i < qt->block_elems; i++)
            s2 += (double)y[i] * y[i];
    }
    return sqrt(s2 / (64.0 * qt->block_elems));
}

/* MXFP4: the scale is a power of two; mixing two neighbouring exponents
 * (the higher with probability p) gives any wanted mean square exactly. */
static void mxfp4_blocks(const synth_tensor *t, uint64_t key, uint64_t first, uint64_t n, uint8_t *out)
{
    const double level_rms = sqrt(274.0 / 8); /* e2m1 doubled: 0 1 2 3 4 6 8 12, both signs */
    const double want = t->rms / level_rms;   /* wanted rms of the scale 2^(e-128) */
    int lo = (int)floor(log2(want));
    double p = (want * want - exp2(2.0 * lo)) / (exp2(2.0 * lo + 2) - exp2(2.0 * lo));
    for (uint64_t k = 0; k < n; k++) {
        rng r = {key, (first + k) * 3};
        uint8_t *b = out + k * 17, words[24];
        fill_words(&r, words, 3);
        memcpy(b + 1, words, 16);
        int e = lo + ((double)(next64(&r) >> 11) * 0x1p-53 < p) + 128;
        b[0] = (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
    }
}

static void fill_lowbit_blocks(const synth_tensor *t, uint64_t key, uint64_t first, uint64_t n, uint8_t *out)
{
    if (t->type == QT_MXFP4) {
        mxfp4_blocks(t, key, first, n, out);
        return;
    }
    const uint32_t bytes = quant_traits_of(t->type)->block_bytes;
    scale_table s;
    make_scales(&s, t->rms, lowbit_code_rms(t->type), 1.0);
    for (uint64_t k = 0; k < n; k++) {
        rng r = {key, (first + k) * 32};
        uint64_t w = next64(&r);
        uint16_t d = s.d[w & 255] | (uint16_t)((w >> 8 & 1) << 15);
        lowbit_block(t->type, &r, d, out + k * bytes);
    }
}

/* ======================================================================
 * Float elements, and the entry point
 * ====================================================================== */

/* F32/F16/BF16 elements. */
static float float_value(const synth_tensor *t, uint64_t v)
{
    float g = gauss(v);
    switch (t->kind) {
    case SYNTH_NORM: return 1.0f + 0.1f * g;
    case SYNTH_BIAS: return SYNTH_BIAS_RMS * g;
    default: return t->rms * g;
    }
}

static uint64_t tensor_key(uint64_t seed, uint32_t tensor_index)
{
    return mix64(mix64(seed ^ 0x5851F42D4C957F2Dull) + tensor_index * 0xD1B54A32D192ED03ull);
}

void synth_fill_blocks(const synth_tensor *t, uint64_t seed, uint32_t tensor_index, uint64_t first_block,
                       uint64_t n_blocks, void *dst)
{
    const quant_traits *qt = quant_traits_of(t->type);
    uint8_t *out = dst;
    uint64_t key = tensor_key(seed, tensor_index);
    const block_recipe *rc = recipe_of(t->type);
    if (qt->family == QF_IQ4 || qt->family == QF_GRID || t->type == QT_Q2_K || t->type == QT_Q3_K) {
        fill_lowbit_blocks(t, key, first_block, n_blocks, out);
        return;
    }
    if (rc) {
        scale_table s;
        double mult = t->type == QT_Q4_1 ? -7.5 : t->type == QT_Q5_1 ? -15.5 : t->type == QT_Q4_K ? 8.0
                    : t->type == QT_Q5_K ? 16.0 : 1.0;
        make_scales(&s, t->rms, rc->code_rms, mult);
        for (uint64_t b = 0; b < n_blocks; b++) {
            rng r = {key, (first_block + b) * rc->words};
            fill_quant_block(t->type, &r, &s, out + b * qt->block_bytes);
        }
        return;
    }
    for (uint64_t b = 0; b < n_blocks; b++) { /* one element per block */
        float f = float_value(t, mix64(key + (first_block + b) * 0x9E3779B97F4A7C15ull));
        if (t->type == QT_F32)
            memcpy(out + 4 * b, &f, 4);
        else
            put16(out + 2 * b, t->type == QT_F16 ? quant_f32_to_f16(f) : quant_f32_to_bf16(f));
    }
}

