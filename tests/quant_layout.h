/* quant_layout.h: the legacy (Q4_0 .. Q8_0) and K-quant (Q2_K .. Q6_K) block
 * layouts, written from ggml-common.h's description independently of
 * core/format/quant*.c: "levels" are the unsigned stored integers; these helpers
 * put them where the layout says and read them back, give the value each
 * element must decode to, and check a quantized block's per-element error
 * bound.  Shared by test_quant_legacy.c and test_quant_kquant.c (the
 * llama-quantize fixture files mix both families). */
#ifndef GLM_QUANT_LAYOUT_H
#define GLM_QUANT_LAYOUT_H

#include "quant_testlib.h"

/* Byte offsets inside each block. */
enum {
    Q4_0_QS = 2, Q4_1_QS = 4, Q5_0_QH = 2, Q5_0_QS = 6, Q5_1_QH = 4, Q5_1_QS = 8, Q8_0_QS = 2,
    QK_SC = 4, Q4K_QS = 16, Q5K_QH = 16, Q5K_QS = 48, Q6K_QL = 0, Q6K_QH = 128, Q6K_SC = 192,
    Q6K_D = 208, Q2K_SC = 0, Q2K_QS = 16, Q2K_D = 80, Q2K_DMIN = 82, Q3K_HM = 0, Q3K_QS = 32,
    Q3K_SC = 96, Q3K_D = 108
};

/* Q2_K/Q3_K: element e sits in bit pair (e%128)/32 of byte e%32 of the
 * e/128-th 32 bytes of qs. */
static int two_bit_level(const uint8_t *qs, int e)
{
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/* Level of element e of a block (for Q8_0: the raw byte; Q3_K: 0..7 with
 * the hmask bit as bit 2). */
static int level_of(uint32_t type, const uint8_t *b, int e)
{
    switch (type) {
    case QT_Q4_0: return e < 16 ? b[Q4_0_QS + e] & 15 : b[Q4_0_QS + e - 16] >> 4;
    case QT_Q4_1: return e < 16 ? b[Q4_1_QS + e] & 15 : b[Q4_1_QS + e - 16] >> 4;
    case QT_Q5_0:
        return (e < 16 ? b[Q5_0_QS + e] & 15 : b[Q5_0_QS + e - 16] >> 4) |
               (((b[Q5_0_QH + e / 8] >> (e % 8)) & 1) << 4);
    case QT_Q5_1:
        return (e < 16 ? b[Q5_1_QS + e] & 15 : b[Q5_1_QS + e - 16] >> 4) |
               (((b[Q5_1_QH + e / 8] >> (e % 8)) & 1) << 4);
    case QT_Q8_0: return b[Q8_0_QS + e];
    case QT_Q2_K: return two_bit_level(b + Q2K_QS, e);
    case QT_Q3_K: return two_bit_level(b + Q3K_QS, e) | (((b[Q3K_HM + e % 32] >> (e / 32)) & 1) << 2);
    case QT_Q4_K: {
        int c = e / 64, l = e % 64, byte = b[Q4K_QS + 32 * c + l % 32];
        return l < 32 ? byte & 15 : byte >> 4;
    }
    case QT_Q5_K: {
        int c = e / 64, l = e % 64, byte = b[Q5K_QS + 32 * c + l % 32];
        int hbit = (b[Q5K_QH + l % 32] >> (2 * c + (l >= 32))) & 1;
        return (l < 32 ? byte & 15 : byte >> 4) | (hbit << 4);
    }
    case QT_Q6_K: {
        int h = e / 128, r = (e % 128) / 32, l = e % 32;
        int byte = b[Q6K_QL + 64 * h + 32 * (r & 1) + l];
        int nib = r < 2 ? byte & 15 : byte >> 4;
        return nib | (((b[Q6K_QH + 32 * h + l] >> (2 * r)) & 3) << 4);
    }
    default: return 0;
    }
}

/* Writes level lv of element e (the block's level bytes start zeroed). */
static void put_level(uint32_t type, uint8_t *b, int e, int lv)
{
    switch (type) {
    case QT_Q4_0:
    case QT_Q4_1: {
        int qs = type == QT_Q4_0 ? Q4_0_QS : Q4_1_QS;
        b[qs + e % 16] |= (uint8_t)(e < 16 ? lv : lv << 4);
        break;
    }
    case QT_Q5_0:
    case QT_Q5_1: {
        int qs = type == QT_Q5_0 ? Q5_0_QS : Q5_1_QS, qh = type == QT_Q5_0 ? Q5_0_QH : Q5_1_QH;
        b[qs + e % 16] |= (uint8_t)(e < 16 ? (lv & 15) : (lv & 15) << 4);
        set_bit(b + qh, e, lv >> 4);
        break;
    }
    case QT_Q8_0: b[Q8_0_QS + e] = (uint8_t)lv; break;
    case QT_Q2_K:
    case QT_Q3_K: {
        int qs = type == QT_Q2_K ? Q2K_QS : Q3K_QS;
        b[qs + 32 * (e / 128) + e % 32] |= (uint8_t)((lv & 3) << (2 * ((e % 128) / 32)));
        if (type == QT_Q3_K)
            set_bit(b + Q3K_HM + e % 32, e / 32, lv >> 2);
        break;
    }
    case QT_Q4_K: {
        int c = e / 64, l = e % 64;
        b[Q4K_QS + 32 * c + l % 32] |= (uint8_t)(l < 32 ? lv : lv << 4);
        break;
    }
    case QT_Q5_K: {
        int c = e / 64, l = e % 64;
        b[Q5K_QS + 32 * c + l % 32] |= (uint8_t)(l < 32 ? (lv & 15) : (lv & 15) << 4);
        set_bit(b + Q5K_QH + l % 32, 2 * c + (l >= 32), lv >> 4);
        break;
    }
    case QT_Q6_K: {
        int h = e / 128, r = (e % 128) / 32, l = e % 32;
        b[Q6K_QL + 64 * h + 32 * (r & 1) + l] |= (uint8_t)(r < 2 ? (lv & 15) : (lv & 15) << 4);
        b[Q6K_QH + 32 * h + l] |= (uint8_t)((lv >> 4) << (2 * r));
        break;
    }
    }
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j: scales 0-3 and mins
 * 0-3 in the low 6 bits of bytes 0-3 / 4-7; scales and mins 4-7 split into
 * a low nibble (bytes 8-11, scale low, min high) and two high bits (the top
 * bits of bytes 0-3 for scales, 4-7 for mins). */
static void put_scale_min(uint8_t *s, int j, int sc, int mn)
{
    if (j < 4) {
        s[j] |= (uint8_t)sc;
        s[j + 4] |= (uint8_t)mn;
    } else {
        s[j + 4] |= (uint8_t)((sc & 15) | ((mn & 15) << 4));
        s[j - 4] |= (uint8_t)((sc >> 4) << 6);
        s[j] |= (uint8_t)((mn >> 4) << 6);
    }
}

static void get_scale_min(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q3_K: the 6-bit scale of sub-block j (of 16): low nibble in byte j (j < 8)
 * or the high nibble of byte j-8, high two bits in byte 8 + j%4 at 2*(j/4).
 * Stored plus 32. */
static void put_q3_scale(uint8_t *s, int j, int sc)
{
    int u = sc + 32;
    s[j % 8] |= (uint8_t)((u & 15) << (j < 8 ? 0 : 4));
    s[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
}

static int get_q3_scale(const uint8_t *s, int j)
{
    int lo = (s[j % 8] >> (j < 8 ? 0 : 4)) & 15;
    return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/* The value ggml's layout defines for element e, from the fields, computed
 * with the decoders' float operations in their order (the results must be
 * equal bit for bit). */
static float expected_value(uint32_t type, const uint8_t *b, int e)
{
    int lv = level_of(type, b, e);
    switch (type) {
    case QT_Q4_0: return (float)(lv - 8) * half_at(b);
    case QT_Q5_0: return (float)(lv - 16) * half_at(b);
    case QT_Q8_0: return (float)(int8_t)lv * half_at(b);
    case QT_Q4_1:
    case QT_Q5_1: return (float)lv * half_at(b) + half_at(b + 2);
    case QT_Q2_K: {
        int sc = b[Q2K_SC + e / 16];
        float d = half_at(b + Q2K_D) * (float)(sc & 15), m = half_at(b + Q2K_DMIN) * (float)(sc >> 4);
        return d * (float)lv - m;
    }
    case QT_Q3_K: {
        float d = half_at(b + Q3K_D) * (float)get_q3_scale(b + Q3K_SC, e / 16);
        return d * (float)(lv - 4);
    }
    case QT_Q4_K:
    case QT_Q5_K: {
        int sc, mn;
        get_scale_min(b + QK_SC, e / 32, &sc, &mn);
        float d = half_at(b) * (float)sc;
        float m = half_at(b + 2) * (float)mn;
        return d * (float)lv - m;
    }
    case QT_Q6_K: {
        float d = half_at(b + Q6K_D) * (float)(int8_t)b[Q6K_SC + e / 16];
        return d * (float)(lv - 32);
    }
    }
    return NAN;
}

static void check_block_decodes(uint32_t type, const uint8_t *b, const char *what)
{
    const quant_traits *t = quant_traits_of(type);
    float y[256];
    quant_dequant_row(type, b, y, t->block_elems);
    int bad = 0;
    for (uint32_t e = 0; e < t->block_elems; e++) {
        float want = expected_value(type, b, (int)e);
        if (bits_of(y[e]) != bits_of(want) && bad++ < 3)
            CHECK(0, "%s %s element %u: %.9g, expected %.9g", t->name, what, e, (double)y[e], (double)want);
    }
}

/* What each format guarantees for an element x stored as y (d, m: the
 * stored f16 scale and min):
 *  - Q8_0: |x-y| <= d/2 + 128*delta(d)            (round to nearest of 255 levels)
 *  - Q4_0/Q5_0: |x-y| <= d/2 + L*delta(d), L = 8/16, except at the top level
 *    (15/31), where the far end of the range is clamped: |x-y| <= d + L*delta(d);
 *  - Q4_1/Q5_1: |x-y| <= d/2 + L*delta(d) + delta(m), L = 15/31;
 *  - the K-quants: the element sits on the nearest level of its
 *    sub-block's stored grid (the quantizers requantize against the stored,
 *    rounded scales): t = (x + m_j)/d_j (Q3_K, Q6_K: x/d_j) is within 1/2
 *    of the level, or beyond the end level it was clamped to.  Sub-blocks
 *    whose scale rounded to 0 store only the min and carry no per-element
 *    bound; they are counted and must be rare;
 *  - F16/BF16: half an ulp (2^-11 / 2^-8 relative, 2^-25 absolute for f16).
 * Every bound gets 8 f32 ulps of the magnitudes involved for the float
 * arithmetic of decode and quantize. */
static void check_block_bounds(uint32_t type, const uint8_t *b, const float *x, bound_stats *s)
{
    const quant_traits *t = quant_traits_of(type);
    if (t->family == QF_KQUANT) {
        for (int e = 0; e < 256; e++) {
            int lv = level_of(type, b, e);
            double dj, mj = 0;
            switch (type) {
            case QT_Q6_K: dj = half_at(b + Q6K_D) * (int8_t)b[Q6K_SC + e / 16]; break;
            case QT_Q3_K: dj = (double)half_at(b + Q3K_D) * get_q3_scale(b + Q3K_SC, e / 16); break;
            case QT_Q2_K:
                dj = (double)half_at(b + Q2K_D) * (b[Q2K_SC + e / 16] & 15);
                mj = (double)half_at(b + Q2K_DMIN) * (b[Q2K_SC + e / 16] >> 4);
                break;
            default: {
                int sc, mn;
                get_scale_min(b + QK_SC, e / 32, &sc, &mn);
                dj = (double)half_at(b) * sc;
                mj = (double)half_at(b + 2) * mn;
            }
            }
            if (dj == 0) {
                s->unbounded++;
                continue;
            }
            if (type == QT_Q6_K || type == QT_Q3_K) {
                const int off = type == QT_Q6_K ? 32 : 4;
                double tv = x[e] / dj;
                note_level(s, dj > 0 ? tv : -tv, dj > 0 ? lv - off : off - lv, dj > 0 ? -off : -off + 1,
                           dj > 0 ? off - 1 : off);
            } else {
                note_level(s, (x[e] + mj) / dj, lv, 0, type == QT_Q2_K ? 3 : type == QT_Q4_K ? 15 : 31);
            }
        }
        return;
    }
    const double ulp8 = 8 * 0x1p-24;
    float y[256];
    quant_dequant_row(type, b, y, t->block_elems);
    for (uint32_t e = 0; e < t->block_elems; e++) {
        double err = fabs((double)x[e] - y[e]);
        double mag = fabs(x[e]) + fabs(y[e]);
        double d = fabs((double)half_at(b));
        double bound;
        switch (type) {
        case QT_F32: bound = 0; break;
        case QT_F16: bound = fabs(x[e]) * 0x1p-11 + 0x1p-25; break;
        case QT_BF16: bound = fabs(x[e]) * 0x1p-8 + 0x1p-134; break;
        case QT_Q8_0: bound = d / 2 + 128 * delta(d); break;
        case QT_Q4_0: bound = (level_of(type, b, (int)e) == 15 ? d : d / 2) + 8 * delta(d); break;
        case QT_Q5_0: bound = (level_of(type, b, (int)e) == 31 ? d : d / 2) + 16 * delta(d); break;
        case QT_Q4_1:
        case QT_Q5_1: {
            double m = half_at(b + 2);
            bound = d / 2 + (type == QT_Q4_1 ? 15 : 31) * delta(d) + delta(m);
            mag += fabs(m);
            break;
        }
        default: bound = 0;
        }
        note(s, err, bound + ulp8 * mag);
    }
}

#endif
