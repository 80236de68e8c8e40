/* cpu_dot_portable.c: the kernel set in plain C (cpu_kernels.h).
 *
 * Every CPU runs it; on x86-64 it is the second opinion the vector sets
 * are tested against.  Each kernel decodes a weight block once into small
 * integer levels (and its scales), then takes every token of the tile:
 * an exact integer dot product per block, scaled in f32 -- the same
 * integers the vector kernels form, summed in the order written here. */
#include <math.h>
#include <string.h>

#include "cpu_iq4.h"
#include "cpu_kernels.h"
#include "cpu_lowbit.h"
#include "format/quant_grids.h"

/* ======================================================================
 * Helpers
 * ====================================================================== */

static float f16(uint16_t h)
{
    return quant_f16_to_f32(h);
}

static uint16_t load_u16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int32_t idot(const int8_t *a, const int8_t *b, int n)
{
    int32_t s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* 8 partial sums: a fixed order that compilers can vectorize. */
static float dot_f32(const float *a, const float *b, uint64_t n)
{
    float acc[8] = {0}, tail = 0;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += a[i + k] * b[i + k];
    for (; i < n; i++)
        tail += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

static float dot_f16(const uint16_t *a, const float *b, uint64_t n)
{
    float w[256], sum = 0;
    for (uint64_t i = 0; i < n; i += 256) {
        uint64_t m = n - i < 256 ? n - i : 256;
        for (uint64_t k = 0; k < m; k++)
            w[k] = f16(a[i + k]);
        sum += dot_f32(w, b + i, m);
    }
    return sum;
}

static void axpy_f32(float *y, float a, const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const uint16_t *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        y[i] += a * f16(x[i]);
}

/* ---- per-tile bookkeeping for the 32-element formats ---- */
typedef struct {
    const int8_t *q[CPU_TILE_TOK];
    const float *d[CPU_TILE_TOK], *s[CPU_TILE_TOK];
    float acc[CPU_TILE_TOK];
} tile32;

static void tile32_init(tile32 *t, const void *const *x, int nt, uint64_t n)
{
    for (int i = 0; i < nt; i++) {
        t->q[i] = cpu_act_q(x[i]);
        t->d[i] = cpu_act_d(x[i], n);
        t->s[i] = cpu_act_s(x[i], n);
        t->acc[i] = 0;
    }
}

/* One 32-element block of levels lv (scale dw, min m: value = dw*lv + m)
 * against every token. */
static void tile32_block(tile32 *t, int nt, uint64_t b, const int8_t *lv, float dw, float m)
{
    for (int i = 0; i < nt; i++) {
        int32_t s = idot(lv, t->q[i] + 32 * b, 32);
        t->acc[i] += dw * t->d[i][b] * (float)s + m * t->s[i][b];
    }
}

/* ======================================================================
 * 32-element formats
 * ====================================================================== */

static void dot_q4_0(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q4_0 *w = row;
    tile32 t;
    tile32_init(&t, x, nt, n);
    int8_t lv[32];
    for (uint64_t b = 0; b < n / 32; b++) {
        for (int j = 0; j < 16; j++) {
            lv[j] = (int8_t)((w[b].qs[j] & 0xF) - 8);
            lv[j + 16] = (int8_t)((w[b].qs[j] >> 4) - 8);
        }
        tile32_block(&t, nt, b, lv, f16(w[b].d), 0);
    }
    memcpy(out, t.acc, (size_t)nt * sizeof *out);
}

static void dot_q4_1(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q4_1 *w = row;
    tile32 t;
    tile32_init(&t, x, nt, n);
    int8_t lv[32];
    for (uint64_t b = 0; b < n / 32; b++) {
        for (int j = 0; j < 16; j++) {
            lv[j] = (int8_t)(w[b].qs[j] & 0xF);
            lv[j + 16] = (int8_t)(w[b].qs[j] >> 4);
        }
        tile32_block(&t, nt, b, lv, f16(w[b].d), f16(w[b].m));
    }
    memcpy(out, t.acc, (size_t)nt * sizeof *out);
}

/* Q5: element j's fifth bit is bit j of qh. */
static void q5_levels(const uint8_t *qs, const uint8_t *qh_bytes, int offset, int8_t *lv)
{
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    for (int j = 0; j < 16; j++) {
        lv[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - offset);
        lv[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - offset);
    }
}

static void dot_q5_0(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q5_0 *w = row;
    tile32 t;
    tile32_init(&t, x, nt, n);
    int8_t lv[32];
    for (uint64_t b = 0; b < n / 32; b++) {
        q5_levels(w[b].qs, w[b].qh, 16, lv);
        tile32_block(&t, nt, b, lv, f16(w[b].d), 0);
    }
    memcpy(out, t.acc, (size_t)nt * sizeof *out);
}

static void dot_q5_1(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q5_1 *w = row;
    tile32 t;
    tile32_init(&t, x, nt, n);
    int8_t lv[32];
    for (uint64_t b = 0; b < n / 32; b++) {
        q5_levels(w[b].qs, w[b].qh, 0, lv);
        tile32_block(&t, nt, b, lv, f16(w[b].d), f16(w[b].m));
    }
    memcpy(out, t.acc, (size_t)nt * sizeof *out);
}

static void dot_q8_0(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q8_0 *w = row;
    tile32 t;
    tile32_init(&t, x, nt, n);
    for (uint64_t b = 0; b < n / 32; b++)
        tile32_block(&t, nt, b, w[b].qs, f16(w[b].d), 0);
    memcpy(out, t.acc, (size_t)nt * sizeof *out);
}

/* IQ4_NL: table levels under one f16 scale per 32 (q8_32 activations, as
 * llama.cpp's q8_0). */
static void dot_iq4_nl(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_iq4_nl *w = row;
    tile32 t;
    tile32_init(&t, x, nt, n);
    int8_t lv[32];
    for (uint64_t b = 0; b < n / 32; b++) {
        for (int j = 0; j < 16; j++) {
            lv[j] = cpu_iq4_levels[w[b].qs[j] & 0xF];
            lv[j + 16] = cpu_iq4_levels[w[b].qs[j] >> 4];
        }
        tile32_block(&t, nt, b, lv, f16(w[b].d), 0);
    }
    memcpy(out, t.acc, (size_t)nt * sizeof *out);
}

/* MXFP4: table levels under 2^(e - 128) (q8_32 activations, as llama.cpp's
 * q8_0). */
static void dot_mxfp4(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_mxfp4 *w = row;
    tile32 t;
    tile32_init(&t, x, nt, n);
    int8_t lv[32];
    for (uint64_t b = 0; b < n / 32; b++) {
        for (int j = 0; j < 16; j++) {
            lv[j] = cpu_mxfp4_levels[w[b].qs[j] & 0xF];
            lv[j + 16] = cpu_mxfp4_levels[w[b].qs[j] >> 4];
        }
        tile32_block(&t, nt, b, lv, cpu_mxfp4_scale(w[b].e), 0);
    }
    memcpy(out, t.acc, (size_t)nt * sizeof *out);
}

/* ======================================================================
 * K-quants (super-blocks of 256 against q8_K)
 * ====================================================================== */

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block. */
static void kq_scale_min(int j, const uint8_t *s, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K / Q5_K: levels lv[256] (unsigned), 8 sub-blocks of 32 with scale and
 * min: value = d*sc*lv - dmin*mn. */
static void kq_scaled_min(const int8_t *lv, const uint8_t *scales, float d, float dmin, const void *const *x,
                          int nt, uint64_t n, uint64_t b, float *acc)
{
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++)
        kq_scale_min(j, scales, &sc[j], &mn[j]);
    for (int i = 0; i < nt; i++) {
        const int8_t *q = cpu_act_q(x[i]) + 256 * b;
        const int16_t *bs = cpu_act_bsum(x[i], n) + 16 * b;
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            sumi += sc[j] * idot(lv + 32 * j, q + 32 * j, 32);
            summ += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
        }
        const float dx = cpu_act_d(x[i], n)[b];
        acc[i] += dx * d * (float)sumi - dx * dmin * (float)summ;
    }
}

static void dot_q4_K(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q4_K *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) {
                lv[64 * p + l] = (int8_t)(w[b].qs[32 * p + l] & 0xF);
                lv[64 * p + 32 + l] = (int8_t)(w[b].qs[32 * p + l] >> 4);
            }
        kq_scaled_min(lv, w[b].scales, f16(w[b].d), f16(w[b].dmin), x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

static void dot_q5_K(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q5_K *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) {
                uint8_t q = w[b].qs[32 * p + l], h = w[b].qh[l];
                lv[64 * p + l] = (int8_t)((q & 0xF) | (((h >> (2 * p)) & 1) << 4));
                lv[64 * p + 32 + l] = (int8_t)((q >> 4) | (((h >> (2 * p + 1)) & 1) << 4));
            }
        kq_scaled_min(lv, w[b].scales, f16(w[b].d), f16(w[b].dmin), x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* Q6_K: levels q - 32 in 16 sub-blocks of 16 with int8 scales. */
static void dot_q6_K(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q6_K *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = w[b].ql + 64 * half, *qh = w[b].qh + 32 * half;
            int8_t *o = lv + 128 * half;
            for (int l = 0; l < 32; l++) {
                o[l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        const float d = f16(load_u16(&w[b].d));
        for (int i = 0; i < nt; i++) {
            const int8_t *q = cpu_act_q(x[i]) + 256 * b;
            int32_t sumi = 0;
            for (int j = 0; j < 16; j++)
                sumi += w[b].scales[j] * idot(lv + 16 * j, q + 16 * j, 16);
            acc[i] += cpu_act_d(x[i], n)[b] * d * (float)sumi;
        }
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* Q2_K / Q3_K element order (quant_kquant.c): in each half of 128, row r
 * (32 elements) takes bit pair r of the half's 32 bytes of qs; sub-blocks
 * of 16 elements.  The levels of a block into lv[256]: the 2-bit codes, and
 * for Q3_K (hmask not NULL) less 4 where the third bit -- bit 4h + r of
 * hmask[l] -- is clear. */
static void lowbit_levels(const uint8_t *restrict qs, const uint8_t *restrict hmask, int8_t *restrict lv)
{
    /* one loop of constant shifts per half (restrict: what lets compilers
     * vectorize it) */
    for (int h = 0; h < 2; h++) {
        int8_t *o = lv + 128 * h;
        for (int l = 0; l < 32; l++) {
            const uint8_t q = qs[32 * h + l];
            o[l] = (int8_t)(q & 3);
            o[l + 32] = (int8_t)((q >> 2) & 3);
            o[l + 64] = (int8_t)((q >> 4) & 3);
            o[l + 96] = (int8_t)(q >> 6);
        }
        if (hmask)
            for (int l = 0; l < 32; l++) {
                const uint8_t m = (uint8_t)(hmask[l] >> (4 * h));
                o[l] = (int8_t)(o[l] - 4 + 4 * (m & 1));
                o[l + 32] = (int8_t)(o[l + 32] - 4 + 2 * (m & 2));
                o[l + 64] = (int8_t)(o[l + 64] - 4 + (m & 4));
                o[l + 96] = (int8_t)(o[l + 96] - 4 + ((m & 8) >> 1));
            }
    }
}

/* Q2_K: levels 0..3 in 16 sub-blocks of 16, each with a 4-bit scale (low
 * nibble of scales[j]) and a 4-bit min (high nibble): d * sum_j sc_j
 * (lv_j . q_j) - dmin * sum_j m_j sum(q_j), the mins against q8_K's sums per
 * 16. */
static void dot_q2_K(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q2_K *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        lowbit_levels(w[b].qs, NULL, lv);
        const float d = f16(load_u16(&w[b].d)), dmin = f16(load_u16(&w[b].dmin));
        for (int i = 0; i < nt; i++) {
            const int8_t *q = cpu_act_q(x[i]) + 256 * b;
            const int16_t *bs = cpu_act_bsum(x[i], n) + 16 * b;
            int32_t sumi = 0, summ = 0;
            for (int j = 0; j < 16; j++) {
                sumi += (w[b].scales[j] & 0xF) * idot(lv + 16 * j, q + 16 * j, 16);
                summ += (w[b].scales[j] >> 4) * bs[j];
            }
            const float dx = cpu_act_d(x[i], n)[b];
            acc[i] += dx * d * (float)sumi - dx * dmin * (float)summ;
        }
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* Q3_K: levels -4..3 (the 2-bit code, less 4 where the hmask bit is
 * clear) in 16 sub-blocks of 16 with 6-bit scales less 32: d * sum_j sc_j
 * (lv_j . q_j). */
static void dot_q3_K(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q3_K *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        int8_t sc[16];
        cpu_q3_K_scales(w[b].scales, sc);
        lowbit_levels(w[b].qs, w[b].hmask, lv);
        const float d = f16(load_u16(&w[b].d));
        for (int i = 0; i < nt; i++) {
            const int8_t *q = cpu_act_q(x[i]) + 256 * b;
            int32_t sumi = 0;
            for (int j = 0; j < 16; j++)
                sumi += sc[j] * idot(lv + 16 * j, q + 16 * j, 16);
            acc[i] += cpu_act_d(x[i], n)[b] * d * (float)sumi;
        }
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* The grid formats' last step: every token's integer sum over block b's
 * 256 signed levels lv, one odd scale ls per `group` elements, times scale
 * (the weights': d, times whatever the levels leave out) and its d_x, in
 * that order of products, into acc. */
static void levels_to_acc(const int8_t *lv, const int *ls, int group, float scale, const void *const *x, int nt,
                          uint64_t n, uint64_t b, float *acc)
{
    for (int i = 0; i < nt; i++) {
        const int8_t *q = cpu_act_q(x[i]) + 256 * b;
        int32_t sumi = 0;
        for (int j = 0; j < 256 / group; j++)
            sumi += ls[j] * idot(lv + group * j, q + group * j, group);
        acc[i] += scale * cpu_act_d(x[i], n)[b] * (float)sumi;
    }
}

/* IQ4_XS: table levels of 8 sub-blocks of 32, each with a 6-bit scale
 * (offset 32) under the block's f16 d. */
static void dot_iq4_xs(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const cpu_iq4_xs_block *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        int ls[8];
        for (int ib = 0; ib < 8; ib++) {
            ls[ib] = cpu_iq4_xs_scale(&w[b], ib) - 32;
            for (int j = 0; j < 16; j++) {
                lv[32 * ib + j] = cpu_iq4_levels[w[b].qs[16 * ib + j] & 0xf];
                lv[32 * ib + 16 + j] = cpu_iq4_levels[w[b].qs[16 * ib + j] >> 4];
            }
        }
        const float d = f16(w[b].d);
        levels_to_acc(lv, ls, 32, d, x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* IQ2_XXS / IQ3_XXS: per sub-block of 32 the signed grid levels (grid
 * magnitudes <= 62, signs from four 7-bit sign indices) and the odd scale
 * 2 ls + 1: the dequantizer's d (0.5 + ls) / 4 (IQ2) or / 2 (IQ3) is
 * d (2 ls + 1) / 8 or / 4, so the integer sum takes 2 ls + 1 and the block
 * is scaled once by d d_x / 8 (IQ2) or / 4 (IQ3). */
static void signed_levels(const uint8_t *grid, uint8_t signs, int n, int8_t *lv)
{
    for (int j = 0; j < n; j++)
        lv[j] = (int8_t)(signs & (1u << j) ? -grid[j] : grid[j]);
}

/* The levels of sub-block ib of an IQ2_XXS / IQ3_XXS block into lv[32];
 * returns its 2 ls + 1. */
static int grid_sub_levels(bool three, const void *blk, int ib, int8_t *lv)
{
    const uint8_t *qs = (const uint8_t *)blk + 2; /* after the f16 d */
    const uint8_t *q = qs + 8 * ib;
    uint32_t aux;
    memcpy(&aux, three ? qs + QK_K / 4 + 4 * ib : q + 4, sizeof aux);
    for (int l = 0; l < 4; l++) {
        const uint8_t signs = quant_ksigns_iq2xs[(aux >> (7 * l)) & 127];
        if (three) {
            signed_levels(quant_iq3xxs_grid[q[2 * l]], signs, 4, lv + 8 * l);
            signed_levels(quant_iq3xxs_grid[q[2 * l + 1]], (uint8_t)(signs >> 4), 4, lv + 8 * l + 4);
        } else {
            signed_levels(quant_iq2xxs_grid[q[l]], signs, 8, lv + 8 * l);
        }
    }
    return 2 * (int)(aux >> 28) + 1;
}

static void dot_grid_xxs(bool three, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const uint64_t block_bytes = three ? sizeof(block_iq3_xxs) : sizeof(block_iq2_xxs);
    const float unit = three ? 0.25f : 0.125f;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = (const uint8_t *)row + b * block_bytes;
        int ls[8];
        for (int ib = 0; ib < 8; ib++)
            ls[ib] = grid_sub_levels(three, blk, ib, lv + 32 * ib);
        const float d = f16(load_u16(blk));
        levels_to_acc(lv, ls, 32, unit * d, x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

static void dot_iq2_xxs(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    dot_grid_xxs(false, row, x, nt, n, out);
}

static void dot_iq3_xxs(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    dot_grid_xxs(true, row, x, nt, n, out);
}

/* IQ2_XS: per group of 8 a 9-bit grid index and a 7-bit sign index in one
 * 16-bit word, a 4-bit scale per 16 elements (the dequantizer's
 * d (0.5 + ls) / 4 again: 2 ls + 1 in the integer sum, d d_x / 8 per
 * block). */
static void dot_iq2_xs(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_iq2_xs *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        int ls[16];
        for (int ib = 0; ib < 8; ib++) {
            ls[2 * ib] = 2 * (w[b].scales[ib] & 0xf) + 1;
            ls[2 * ib + 1] = 2 * (w[b].scales[ib] >> 4) + 1;
            for (int l = 0; l < 4; l++) {
                const uint16_t q = load_u16(&w[b].qs[4 * ib + l]);
                signed_levels(quant_iq2xs_grid[q & 511], quant_ksigns_iq2xs[q >> 9], 8, lv + 32 * ib + 8 * l);
            }
        }
        const float d = f16(load_u16(&w[b].d));
        levels_to_acc(lv, ls, 16, 0.125f * d, x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* IQ3_S: per group of 4 a 9-bit grid index (8 bits in qs, the ninth in
 * qh), plain sign bits, an odd scale 2 ls + 1 per 32 elements -- the
 * dequantizer's d (1 + 2 ls) as it stands, so the block is scaled by
 * d d_x alone. */
static void dot_iq3_s(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_iq3_s *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        int ls[8];
        for (int ib = 0; ib < 8; ib++) {
            ls[ib] = 2 * ((w[b].scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1;
            for (int l = 0; l < 8; l++) {
                const int idx = w[b].qs[8 * ib + l] | ((w[b].qh[ib] >> l) & 1) << 8;
                signed_levels(quant_iq3s_grid[idx], (uint8_t)(w[b].signs[4 * ib + l / 2] >> (4 * (l % 2))), 4,
                              lv + 32 * ib + 4 * l);
            }
        }
        const float d = f16(load_u16(&w[b].d));
        levels_to_acc(lv, ls, 32, d, x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* IQ2_S: IQ2_XS's scales with 10-bit grid indices (8 bits in qs, 2 in qh)
 * and a plain sign byte per group of 8 (the 32 bytes after the indices). */
static void dot_iq2_s(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_iq2_s *w = row;
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *signs = w[b].qs + QK_K / 8;
        int ls[16];
        for (int ib = 0; ib < 8; ib++) {
            ls[2 * ib] = 2 * (w[b].scales[ib] & 0xf) + 1;
            ls[2 * ib + 1] = 2 * (w[b].scales[ib] >> 4) + 1;
            for (int l = 0; l < 4; l++) {
                const int idx = w[b].qs[4 * ib + l] | ((w[b].qh[ib] >> (2 * l)) & 3) << 8;
                signed_levels(quant_iq2s_grid[idx], signs[4 * ib + l], 8, lv + 32 * ib + 8 * l);
            }
        }
        const float d = f16(load_u16(&w[b].d));
        levels_to_acc(lv, ls, 16, 0.125f * d, x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

/* IQ1_S / IQ1_M: grid values g of -1, 0, 1 shifted by +-1/8 per group,
 * times d (2 ls + 1): as integers the levels 8 g +- 1 (never zero), the
 * block scaled by d d_x / 8.  IQ1_S: 11-bit indices (qs, 3 bits each in
 * qh[ib]), one shift sign and one 3-bit scale per 32 (qh[ib]'s top bits).
 * IQ1_M: the 3 high index bits and the shift sign per group of 8 in a
 * nibble of qh, a 3-bit scale per 16, and d spread over the top nibbles
 * of the four scale words (quant_decode_iq1_m). */
static void iq1_group_levels(int idx, bool minus, int8_t *lv)
{
    for (int j = 0; j < 8; j++)
        lv[j] = (int8_t)(8 * quant_iq1s_grid[idx][j] + (minus ? -1 : 1));
}

/* Block b's levels into lv[256] and its 2 ls + 1 per 16 into ls[16];
 * returns its d. */
static float iq1_block_levels(bool m, const void *row, uint64_t b, int8_t *lv, int *ls)
{
    if (!m) {
        const block_iq1_s *w = (const block_iq1_s *)row + b;
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t qh = load_u16(&w->qh[ib]);
            ls[2 * ib] = ls[2 * ib + 1] = 2 * ((qh >> 12) & 7) + 1;
            for (int l = 0; l < 4; l++)
                iq1_group_levels(w->qs[4 * ib + l] | ((qh >> (3 * l)) & 7) << 8, qh & 0x8000, lv + 32 * ib + 8 * l);
        }
        return f16(load_u16(&w->d));
    }
    const block_iq1_m *w = (const block_iq1_m *)row + b;
    uint16_t sc[4];
    for (int i = 0; i < 4; i++)
        sc[i] = load_u16(w->scales + 2 * i);
    for (int ib = 0; ib < 8; ib++) {
        ls[2 * ib] = 2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1;
        ls[2 * ib + 1] = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1;
        for (int l = 0; l < 4; l++) {
            const int h = w->qh[2 * ib + l / 2] >> (4 * (l % 2));
            iq1_group_levels(w->qs[4 * ib + l] | (h & 7) << 8, h & 8, lv + 32 * ib + 8 * l);
        }
    }
    return f16((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
}

static void dot_iq1(bool m, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    float acc[CPU_TILE_TOK] = {0};
    int8_t lv[256];
    for (uint64_t b = 0; b < n / 256; b++) {
        int ls[16];
        const float d = iq1_block_levels(m, row, b, lv, ls);
        levels_to_acc(lv, ls, 16, 0.125f * d, x, nt, n, b, acc);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

static void dot_iq1_s(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    dot_iq1(false, row, x, nt, n, out);
}

static void dot_iq1_m(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    dot_iq1(true, row, x, nt, n, out);
}

/* ======================================================================
 * Float weights (f32 activations)
 * ====================================================================== */

static void dot_f32_rows(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    /* a row stride need not keep F32 rows 4-byte aligned: copy through a
     * buffer, 256 elements at a time */
    float w[256];
    float acc[CPU_TILE_TOK] = {0};
    for (uint64_t i = 0; i < n; i += 256) {
        uint64_t m = n - i < 256 ? n - i : 256;
        memcpy(w, (const char *)row + 4 * i, 4 * m);
        for (int t = 0; t < nt; t++)
            acc[t] += dot_f32(w, (const float *)x[t] + i, m);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

static void dot_half_rows(bool bf16, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    float w[256];
    float acc[CPU_TILE_TOK] = {0};
    const uint8_t *p = row;
    for (uint64_t i = 0; i < n; i += 256) {
        uint64_t m = n - i < 256 ? n - i : 256;
        for (uint64_t k = 0; k < m; k++) {
            uint16_t h = load_u16(p + 2 * (i + k));
            w[k] = bf16 ? quant_bf16_to_f32(h) : f16(h);
        }
        for (int t = 0; t < nt; t++)
            acc[t] += dot_f32(w, (const float *)x[t] + i, m);
    }
    memcpy(out, acc, (size_t)nt * sizeof *out);
}

static void dot_f16_rows(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    dot_half_rows(false, row, x, nt, n, out);
}

static void dot_bf16_rows(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    dot_half_rows(true, row, x, nt, n, out);
}

/* Any type quant.c decodes: 256 elements (whole blocks) at a time. */
static void dot_fallback_row(uint32_t type, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const quant_traits *tr = quant_traits_of(type);
    float w[256];
    float acc[CPU_TILE_TOK] = {0};
    uint64_t per = tr && tr->block_elems <= 256 ? 256 / tr->block_elems * tr->block_elems : 0;
    for (uint64_t i = 0; per && i < n; i += per) {
        uint64_t m = n - i < per ? n - i : per;
        quant_dequant_row(type, (const uint8_t *)row + i / tr->block_elems * tr->block_bytes, w, m);
        for (int t = 0; t < nt; t++)
            acc[t] += dot_f32(w, (const float *)x[t] + i, m);
    }
    for (int t = 0; t < nt; t++)
        out[t] = per ? acc[t] : NAN;
}

/* ======================================================================
 * Rows (cpu_rows_fn) over the one-row kernels above
 * ====================================================================== */

#define ROWS_OF(name, dot1)                                                                                   \
    static void name(const void *w, uint64_t row_bytes, uint64_t n_rows, const void *const *x, int nt,         \
                     uint64_t n, float *const *y, bool accumulate)                                             \
    {                                                                                                         \
        for (uint64_t r = 0; r < n_rows; r++) {                                                               \
            float o[CPU_TILE_TOK];                                                                            \
            dot1((const char *)w + r * row_bytes, x, nt, n, o);                                               \
            for (int t = 0; t < nt; t++)                                                                      \
                y[t][r] = accumulate ? y[t][r] + o[t] : o[t];                                                 \
        }                                                                                                     \
    }

ROWS_OF(rows_q4_0, dot_q4_0)
ROWS_OF(rows_q4_1, dot_q4_1)
ROWS_OF(rows_q5_0, dot_q5_0)
ROWS_OF(rows_q5_1, dot_q5_1)
ROWS_OF(rows_q8_0, dot_q8_0)
ROWS_OF(rows_iq4_nl, dot_iq4_nl)
ROWS_OF(rows_mxfp4, dot_mxfp4)
ROWS_OF(rows_q4_K, dot_q4_K)
ROWS_OF(rows_q5_K, dot_q5_K)
ROWS_OF(rows_q6_K, dot_q6_K)
ROWS_OF(rows_q3_K, dot_q3_K)
ROWS_OF(rows_q2_K, dot_q2_K)
ROWS_OF(rows_iq4_xs, dot_iq4_xs)
ROWS_OF(rows_iq2_xxs, dot_iq2_xxs)
ROWS_OF(rows_iq3_xxs, dot_iq3_xxs)
ROWS_OF(rows_iq2_xs, dot_iq2_xs)
ROWS_OF(rows_iq3_s, dot_iq3_s)
ROWS_OF(rows_iq2_s, dot_iq2_s)
ROWS_OF(rows_iq1_s, dot_iq1_s)
ROWS_OF(rows_iq1_m, dot_iq1_m)
ROWS_OF(rows_f32, dot_f32_rows)
ROWS_OF(rows_f16, dot_f16_rows)
ROWS_OF(rows_bf16, dot_bf16_rows)

static void rows_fallback(uint32_t type, const void *w, uint64_t row_bytes, uint64_t n_rows, const void *const *x,
                          int nt, uint64_t n, float *const *y, bool accumulate)
{
    for (uint64_t r = 0; r < n_rows; r++) {
        float o[CPU_TILE_TOK];
        dot_fallback_row(type, (const char *)w + r * row_bytes, x, nt, n, o);
        for (int t = 0; t < nt; t++)
            y[t][r] = accumulate ? y[t][r] + o[t] : o[t];
    }
}

void cpu_kernels_fill_portable(cpu_kernels *k)
{
    k->type[QT_F32] = (cpu_type_kernel){CPU_ACT_F32, rows_f32, NULL};
    k->type[QT_F16] = (cpu_type_kernel){CPU_ACT_F32, rows_f16, NULL};
    k->type[QT_BF16] = (cpu_type_kernel){CPU_ACT_F32, rows_bf16, NULL};
    k->type[QT_Q4_0] = (cpu_type_kernel){CPU_ACT_Q8_32, rows_q4_0, NULL};
    k->type[QT_Q4_1] = (cpu_type_kernel){CPU_ACT_Q8_32, rows_q4_1, NULL};
    k->type[QT_Q5_0] = (cpu_type_kernel){CPU_ACT_Q8_32, rows_q5_0, NULL};
    k->type[QT_Q5_1] = (cpu_type_kernel){CPU_ACT_Q8_32, rows_q5_1, NULL};
    k->type[QT_Q8_0] = (cpu_type_kernel){CPU_ACT_Q8_32, rows_q8_0, NULL};
    k->type[QT_IQ4_NL] = (cpu_type_kernel){CPU_ACT_Q8_32, rows_iq4_nl, NULL};
    k->type[QT_MXFP4] = (cpu_type_kernel){CPU_ACT_Q8_32, rows_mxfp4, NULL};
    k->type[QT_Q4_K] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_q4_K, NULL};
    k->type[QT_Q5_K] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_q5_K, NULL};
    k->type[QT_Q6_K] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_q6_K, NULL};
    k->type[QT_Q3_K] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_q3_K, NULL};
    k->type[QT_Q2_K] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_q2_K, NULL};
    k->type[QT_IQ4_XS] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq4_xs, NULL};
    k->type[QT_IQ2_XXS] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq2_xxs, NULL};
    k->type[QT_IQ3_XXS] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq3_xxs, NULL};
    k->type[QT_IQ2_XS] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq2_xs, NULL};
    k->type[QT_IQ3_S] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq3_s, NULL};
    k->type[QT_IQ2_S] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq2_s, NULL};
    k->type[QT_IQ1_S] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq1_s, NULL};
    k->type[QT_IQ1_M] = (cpu_type_kernel){CPU_ACT_Q8_K, rows_iq1_m, NULL};
    k->prepare[CPU_ACT_F32] = cpu_act_prepare_f32;
    k->prepare[CPU_ACT_Q8_32] = cpu_act_prepare_q8_32;
    k->prepare[CPU_ACT_Q8_K] = cpu_act_prepare_q8_K;
    k->rows_fallback = rows_fallback;
    k->dot_f32 = dot_f32;
    k->dot_f16 = dot_f16;
    k->axpy_f32 = axpy_f32;
    k->axpy_f16 = axpy_f16;
}
