/* quant_iq_quantize.c: quantizers of the grid formats IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (the layouts: quant_iq.c).
 *
 * Our own method, not llama.cpp's (which needs an importance matrix for
 * most of these types): a nearest-grid-point search under a scale search,
 * minimizing the plain squared error of each sub-block.
 *
 *  1. Targets.  The sign bits take each element's sign, so the grid must
 *     fit the magnitudes t = |x|.  Where signs come in groups of 8 with an
 *     even count of minus signs (IQ2_XXS, IQ2_XS, IQ3_XXS), an odd group
 *     gives its smallest element the wrong sign: its target becomes -|x|,
 *     and the search then gives it the smallest magnitude.  IQ1's grid is
 *     signed, so its targets are x itself.
 *  2. Points at a scale s.  For group k and grid point p the error is
 *     |t_k - s q_p|^2 = |t_k|^2 - 2 s D[k][p] + s^2 N[p], with D = t_k . q_p
 *     and N = |q_p|^2 computed once per sub-block, so choosing every
 *     group's nearest point at a new s is one pass over the grid.
 *  3. Scale search.  Trial scales from 0.5 to 1.6 times the one that maps
 *     the largest target onto the largest grid value (steps of 0.1), then
 *     up to the one that maps it onto the smallest (steps of x1.25: flat
 *     sub-blocks want all elements on small values); at each, the nearest
 *     points, then the least-squares scale for those points (sum D / sum
 *     N); keep the best, then up to three refinement rounds (points at the
 *     best scale, scale for those points).
 *  4. Block scale.  The sub-block scales become small integers (4 bits, 3
 *     for IQ1) times one f16 scale per 256 chosen so the largest sub-block
 *     scale is representable; for each sub-block the rounded integer and
 *     its two neighbours are tried, each with its own nearest points, and
 *     the one with the least error is stored -- with the scale exactly as
 *     the decoder computes it.
 *
 * Deterministic (no allocation, no state), ~50 KB of stack per call; NaN
 * and inf give unspecified bytes, never undefined behaviour.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant.h"
#include "quant_formats.h"
#include "quant_grids.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ======================================================================
 * The search over one sub-block
 * ====================================================================== */

#define MAX_POINTS 4096        /* IQ1_M: 2048 grid points x 2 shifts */
#define MAX_GROUPS 8           /* IQ3: 32 elements in groups of 4 */
#define MAX_GROUP_POINTS 8192  /* groups x points of a sub-block: IQ1_S 4 x 2048, IQ1_M 2 x 4096 */
/* Every format below within those bounds (groups per sub-block x points). */
_Static_assert(4 * 256 <= MAX_GROUP_POINTS && 2 * 512 <= MAX_GROUP_POINTS && 2 * 1024 <= MAX_GROUP_POINTS &&
                   8 * 256 <= MAX_GROUP_POINTS && 8 * 512 <= MAX_GROUP_POINTS && 4 * 2048 <= MAX_GROUP_POINTS &&
                   2 * 4096 <= MAX_GROUP_POINTS,
               "grid search scratch too small");

/* A grid as the search sees it: n_points = n_grid * n_shift points of
 * `group` values each; point p is grid row p % n_grid plus shift[p / n_grid]. */
typedef struct {
    int group, n_grid, n_shift;
    const uint8_t *mag;  /* n_grid x group magnitudes (IQ2, IQ3) */
    const int8_t *sgn;   /* or signed values (IQ1) */
    float shift[2];
    float top;           /* largest magnitude of any point value */
    float bottom;        /* smallest non-zero magnitude */
} grid_set;

typedef struct {
    float D[MAX_GROUP_POINTS]; /* D[k * n_points + p] = t_k . q_p */
    float N[MAX_POINTS];              /* |q_p|^2 */
} grid_scan;

static int n_points(const grid_set *g)
{
    return g->n_grid * g->n_shift;
}

static float point_value(const grid_set *g, int p, int j)
{
    int row = p % g->n_grid;
    float v = g->mag ? (float)g->mag[row * g->group + j] : (float)g->sgn[row * g->group + j];
    return v + g->shift[p / g->n_grid];
}

static void scan(const grid_set *g, const float *t, int n_groups, grid_scan *s)
{
    const int np = n_points(g);
    for (int p = 0; p < np; p++) {
        float q[8], n = 0;
        for (int j = 0; j < g->group; j++) {
            q[j] = point_value(g, p, j);
            n += q[j] * q[j];
        }
        s->N[p] = n;
        for (int k = 0; k < n_groups; k++) {
            float d = 0;
            for (int j = 0; j < g->group; j++)
                d += t[k * g->group + j] * q[j];
            s->D[k * np + p] = d;
        }
    }
}

/* Group k's nearest point at scale sc (> 0): least sc*N - 2*D. */
static int nearest_point(const grid_set *g, const grid_scan *s, int k, float sc)
{
    const int np = n_points(g);
    const float *D = s->D + k * np;
    int best = 0;
    float best_cost = FLT_MAX;
    for (int p = 0; p < np; p++) {
        float cost = sc * s->N[p] - 2 * D[p];
        if (cost < best_cost) {
            best_cost = cost;
            best = p;
        }
    }
    return best;
}

/* Every group's nearest point at scale sc; returns the error relative to
 * |t|^2 at that fixed scale: sum over groups of sc^2 N - 2 sc D. */
static float points_at(const grid_set *g, const grid_scan *s, int n_groups, float sc, int *idx)
{
    const int np = n_points(g);
    float err = 0;
    for (int k = 0; k < n_groups; k++) {
        idx[k] = nearest_point(g, s, k, sc);
        err += sc * sc * s->N[idx[k]] - 2 * sc * s->D[k * np + idx[k]];
    }
    return err;
}

/* The least-squares scale for chosen points (0 if it would be negative)
 * and its relative error -(sum D)^2 / sum N. */
static float refit(const grid_set *g, const grid_scan *s, int n_groups, const int *idx, float *err)
{
    const int np = n_points(g);
    float sd = 0, sn = 0;
    for (int k = 0; k < n_groups; k++) {
        sd += s->D[k * np + idx[k]];
        sn += s->N[idx[k]];
    }
    if (!(sd > 0 && sn > 0)) {
        *err = 0;
        return 0;
    }
    *err = -sd * sd / sn;
    return sd / sn;
}

/* Steps 2-3 for the targets of one sub-block (n_groups groups): the best
 * scale (>= 0) and, in *err, its error relative to |t|^2.  The scan is
 * left in s for the block-scale step. */
static float fit_subblock(const grid_set *g, const float *t, int n_groups, grid_scan *s, float *err)
{
    float amax = 0;
    for (int i = 0; i < n_groups * g->group; i++)
        if (fabsf(t[i]) > amax)
            amax = fabsf(t[i]);
    scan(g, t, n_groups, s);
    *err = 0;
    if (!(amax > QUANT_GROUP_MAX_EPS) || !(amax < FLT_MAX))
        return 0;
    int idx[MAX_GROUPS];
    float best = 0, best_err = 0;
    /* the largest target on the largest value, and nearby; then, for flat
     * sub-blocks, in steps of 1.25 up to the largest on the smallest value */
    const float first = amax / g->top, last = amax / g->bottom * 1.05f;
    float sc = first * 0.5f;
    for (int trial = 0; trial < 40 && sc <= last; trial++) { /* 40: a bound for inf */
        float e;
        points_at(g, s, n_groups, sc, idx);
        float fit = refit(g, s, n_groups, idx, &e);
        if (e < best_err) {
            best_err = e;
            best = fit;
        }
        sc = trial < 11 ? first * (0.6f + 0.1f * (float)trial) : sc * 1.25f;
    }
    for (int round = 0; round < 3 && best > 0; round++) {
        float e;
        points_at(g, s, n_groups, best, idx);
        float fit = refit(g, s, n_groups, idx, &e);
        if (!(e < best_err))
            break;
        best_err = e;
        best = fit;
    }
    *err = best_err;
    return best;
}

/* ======================================================================
 * Block scales (step 4)
 *
 * A sub-block's stored scale is (d, ls) -> value, evaluated exactly as the
 * decoder does; ls runs over 0..ls_max.
 * ====================================================================== */

typedef enum { SCALE_QUARTER, SCALE_HALF, SCALE_ODD } scale_kind;

static float scale_value(scale_kind k, float d, int ls)
{
    switch (k) {
    case SCALE_QUARTER: return d * (0.5f + ls) * 0.25f; /* IQ2 */
    case SCALE_HALF: return d * (0.5f + ls) * 0.5f;     /* IQ3_XXS */
    default: return d * (2 * ls + 1);                    /* IQ3_S, IQ1 */
    }
}

/* The f16 block scale that makes the largest sub-block scale the top one. */
static uint16_t block_scale(scale_kind k, int ls_max, float max_sub)
{
    return quant_f32_to_f16(max_sub / scale_value(k, 1.0f, ls_max));
}

/* The integer nearest to the wanted scale `want` at block scale d. */
static int nearest_ls(scale_kind k, int ls_max, float d, float want)
{
    float v = want / d;
    float l = k == SCALE_QUARTER ? v * 4 - 0.5f : k == SCALE_HALF ? v * 2 - 0.5f : (v - 1) / 2;
    return quant_clamp_int(quant_round_even(l), 0, ls_max);
}

/* Re-fits a sub-block (whose scan is in s) at stored scales: tries the
 * nearest integer and its neighbours, keeps the least error; writes the
 * points and returns ls. */
static int store_subblock(const grid_set *g, const grid_scan *s, int n_groups, scale_kind k, int ls_max,
                          float d, float want, int *idx)
{
    int l0 = nearest_ls(k, ls_max, d, want), best_ls = l0;
    float best_err = FLT_MAX;
    int trial_idx[MAX_GROUPS];
    for (int l = l0 - 1; l <= l0 + 1; l++) {
        if (l < 0 || l > ls_max)
            continue;
        float err = points_at(g, s, n_groups, scale_value(k, d, l), trial_idx);
        if (err < best_err) {
            best_err = err;
            best_ls = l;
            memcpy(idx, trial_idx, sizeof trial_idx);
        }
    }
    if (best_err == FLT_MAX) /* NaN everywhere: any valid points */
        memset(idx, 0, sizeof trial_idx);
    return best_ls;
}

/* ======================================================================
 * Signs and targets
 * ====================================================================== */

/* Sign bits of n elements (bit j set: negative) and their targets |x|.
 * even_parity: the count of minus signs must be even, so an odd group
 * flips its smallest element (target -|x|). */
static uint8_t sign_targets(const float *x, int n, int even_parity, float *t)
{
    uint8_t bits = 0;
    int n_neg = 0, smallest = 0;
    for (int j = 0; j < n; j++) {
        t[j] = fabsf(x[j]);
        if (x[j] < 0) {
            bits |= (uint8_t)(1u << j);
            n_neg++;
        }
        if (t[j] < t[smallest])
            smallest = j;
    }
    if (even_parity && n_neg % 2) {
        bits ^= (uint8_t)(1u << smallest);
        t[smallest] = -t[smallest];
    }
    return bits;
}

/* ======================================================================
 * The IQ2 and IQ3 formats
 *
 * One routine: a block of 256 is cut into sub-blocks of `sub` elements
 * (one stored scale each), each cut into groups of g->group; signs are
 * taken per 8 elements.  The per-format packing is done by the callers
 * from the chosen points, sign bytes and scales.
 * ====================================================================== */

typedef struct {
    const grid_set *grid;
    int sub;           /* elements per stored scale */
    int even_parity;   /* signs through ksigns */
    scale_kind kind;
    int ls_max;
} grid_format;

typedef struct {
    uint16_t d;
    int idx[QK_K / 4];     /* point of each group */
    uint8_t signs[QK_K / 8];
    int ls[QK_K / 16];     /* stored scale of each sub-block */
} grid_choice;

static void choose(const grid_format *f, const float *x, grid_choice *c)
{
    const grid_set *g = f->grid;
    const int n_sub = QK_K / f->sub, n_groups = f->sub / g->group;
    float t[QK_K], want[QK_K / 16], max_want = 0;
    for (int i = 0; i < QK_K / 8; i++)
        c->signs[i] = sign_targets(x + 8 * i, 8, f->even_parity, t + 8 * i);
    grid_scan s;
    for (int j = 0; j < n_sub; j++) {
        float err;
        want[j] = fit_subblock(g, t + j * f->sub, n_groups, &s, &err);
        if (want[j] > max_want)
            max_want = want[j];
    }
    memset(c->idx, 0, sizeof c->idx);
    memset(c->ls, 0, sizeof c->ls);
    c->d = block_scale(f->kind, f->ls_max, max_want);
    const float d = quant_f16_to_f32(c->d);
    if (!(d > 0) || !(max_want > 0)) { /* all zero (or not finite): a zero block */
        c->d = 0;
        return;
    }
    for (int j = 0; j < n_sub; j++) {
        scan(g, t + j * f->sub, n_groups, &s);
        c->ls[j] = store_subblock(g, &s, n_groups, f->kind, f->ls_max, d, want[j], c->idx + j * n_groups);
    }
}

static const grid_set iq2xxs_set = {.group = 8, .n_grid = 256, .n_shift = 1, .mag = &quant_iq2xxs_grid[0][0], .top = 43, .bottom = 8};
static const grid_set iq2xs_set = {.group = 8, .n_grid = 512, .n_shift = 1, .mag = &quant_iq2xs_grid[0][0], .top = 43, .bottom = 8};
static const grid_set iq2s_set = {.group = 8, .n_grid = 1024, .n_shift = 1, .mag = &quant_iq2s_grid[0][0], .top = 43, .bottom = 8};
static const grid_set iq3xxs_set = {.group = 4, .n_grid = 256, .n_shift = 1, .mag = &quant_iq3xxs_grid[0][0], .top = 62, .bottom = 4};
static const grid_set iq3s_set = {.group = 4, .n_grid = 512, .n_shift = 1, .mag = &quant_iq3s_grid[0][0], .top = 15, .bottom = 1};

void quant_quantize_iq2_xxs(const float *x, void *vb)
{
    static const grid_format f = {&iq2xxs_set, 32, 1, SCALE_QUARTER, 15};
    block_iq2_xxs *b = vb;
    grid_choice c;
    choose(&f, x, &c);
    uint8_t *q = (uint8_t *)b->qs;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint32_t signs = 0;
        for (int l = 0; l < 4; l++) {
            q[8 * ib + l] = (uint8_t)c.idx[4 * ib + l];
            signs |= (uint32_t)(c.signs[4 * ib + l] & 127) << (7 * l);
        }
        uint32_t w = signs | (uint32_t)c.ls[ib] << 28;
        memcpy(q + 8 * ib + 4, &w, 4);
    }
    quant_store_u16(&b->d, c.d);
}

void quant_quantize_iq2_xs(const float *x, void *vb)
{
    static const grid_format f = {&iq2xs_set, 16, 1, SCALE_QUARTER, 15};
    block_iq2_xs *b = vb;
    grid_choice c;
    choose(&f, x, &c);
    for (int k = 0; k < QK_K / 8; k++)
        quant_store_u16(&b->qs[k], (uint16_t)(c.idx[k] | (c.signs[k] & 127) << 9));
    for (int ib = 0; ib < QK_K / 32; ib++)
        b->scales[ib] = (uint8_t)(c.ls[2 * ib] | c.ls[2 * ib + 1] << 4);
    quant_store_u16(&b->d, c.d);
}

void quant_quantize_iq2_s(const float *x, void *vb)
{
    static const grid_format f = {&iq2s_set, 16, 0, SCALE_QUARTER, 15};
    block_iq2_s *b = vb;
    grid_choice c;
    choose(&f, x, &c);
    memset(b->qh, 0, sizeof b->qh);
    for (int k = 0; k < QK_K / 8; k++) {
        b->qs[k] = (uint8_t)c.idx[k];
        b->qh[k / 4] |= (uint8_t)((c.idx[k] >> 8) << (2 * (k % 4)));
        b->qs[QK_K / 8 + k] = c.signs[k];
    }
    for (int ib = 0; ib < QK_K / 32; ib++)
        b->scales[ib] = (uint8_t)(c.ls[2 * ib] | c.ls[2 * ib + 1] << 4);
    quant_store_u16(&b->d, c.d);
}

void quant_quantize_iq3_xxs(const float *x, void *vb)
{
    static const grid_format f = {&iq3xxs_set, 32, 1, SCALE_HALF, 15};
    block_iq3_xxs *b = vb;
    grid_choice c;
    choose(&f, x, &c);
    for (int k = 0; k < QK_K / 4; k++)
        b->qs[k] = (uint8_t)c.idx[k];
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint32_t w = (uint32_t)c.ls[ib] << 28;
        for (int l = 0; l < 4; l++)
            w |= (uint32_t)(c.signs[4 * ib + l] & 127) << (7 * l);
        memcpy(b->qs + QK_K / 4 + 4 * ib, &w, 4);
    }
    quant_store_u16(&b->d, c.d);
}

void quant_quantize_iq3_s(const float *x, void *vb)
{
    static const grid_format f = {&iq3s_set, 32, 0, SCALE_ODD, 15};
    block_iq3_s *b = vb;
    grid_choice c;
    choose(&f, x, &c);
    memset(b->qh, 0, sizeof b->qh);
    memset(b->scales, 0, sizeof b->scales);
    for (int k = 0; k < QK_K / 4; k++) {
        b->qs[k] = (uint8_t)c.idx[k];
        b->qh[k / 8] |= (uint8_t)((c.idx[k] >> 8) << (k % 8));
    }
    memcpy(b->signs, c.signs, sizeof b->signs);
    for (int ib = 0; ib < QK_K / 32; ib++)
        b->scales[ib / 2] |= (uint8_t)(c.ls[ib] << (4 * (ib % 2)));
    quant_store_u16(&b->d, c.d);
}

/* ======================================================================
 * The IQ1 formats
 *
 * Targets are the signed elements; a point's values are grid + shift with
 * shift +-1/8: per group of 8 for IQ1_M (the search sees 4096 points), per
 * 32 for IQ1_S (each sub-block is fitted with either shift, the better
 * kept).  Stored scales are odd, 1..15, times the block's f16 scale.
 * ====================================================================== */

static const grid_set iq1_both = {.group = 8, .n_grid = 2048, .n_shift = 2, .sgn = &quant_iq1s_grid[0][0],
                                  .shift = {0.125f, -0.125f}, .top = 1.125f, .bottom = 0.875f};
static const grid_set iq1_plus = {.group = 8, .n_grid = 2048, .n_shift = 1, .sgn = &quant_iq1s_grid[0][0],
                                  .shift = {0.125f}, .top = 1.125f, .bottom = 0.875f};
static const grid_set iq1_minus = {.group = 8, .n_grid = 2048, .n_shift = 1, .sgn = &quant_iq1s_grid[0][0],
                                   .shift = {-0.125f}, .top = 1.125f, .bottom = 0.875f};

void quant_quantize_iq1_s(const float *x, void *vb)
{
    block_iq1_s *b = vb;
    float want[QK_K / 32], max_want = 0;
    int minus[QK_K / 32];
    grid_scan s;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        float e_plus, e_minus;
        float s_plus = fit_subblock(&iq1_plus, x + 32 * ib, 4, &s, &e_plus);
        float s_minus = fit_subblock(&iq1_minus, x + 32 * ib, 4, &s, &e_minus);
        minus[ib] = e_minus < e_plus;
        want[ib] = minus[ib] ? s_minus : s_plus;
        if (want[ib] > max_want)
            max_want = want[ib];
    }
    memset(b, 0, sizeof *b);
    uint16_t d16 = block_scale(SCALE_ODD, 7, max_want);
    const float d = quant_f16_to_f32(d16);
    if (!(d > 0) || !(max_want > 0))
        return;
    quant_store_u16(&b->d, d16);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const grid_set *g = minus[ib] ? &iq1_minus : &iq1_plus;
        int idx[MAX_GROUPS];
        scan(g, x + 32 * ib, 4, &s);
        int ls = store_subblock(g, &s, 4, SCALE_ODD, 7, d, want[ib], idx);
        uint16_t qh = (uint16_t)(ls << 12 | minus[ib] << 15);
        for (int l = 0; l < 4; l++) {
            b->qs[4 * ib + l] = (uint8_t)idx[l];
            qh |= (uint16_t)((idx[l] >> 8) << (3 * l));
        }
        quant_store_u16(&b->qh[ib], qh);
    }
}

void quant_quantize_iq1_m(const float *x, void *vb)
{
    block_iq1_m *b = vb;
    float want[QK_K / 16], max_want = 0;
    grid_scan s;
    for (int j = 0; j < QK_K / 16; j++) {
        float err;
        want[j] = fit_subblock(&iq1_both, x + 16 * j, 2, &s, &err);
        if (want[j] > max_want)
            max_want = want[j];
    }
    memset(b, 0, sizeof *b);
    uint16_t d16 = block_scale(SCALE_ODD, 7, max_want);
    const float d = quant_f16_to_f32(d16);
    if (!(d > 0) || !(max_want > 0))
        return;
    uint16_t sc[4] = {0};
    for (int j = 0; j < QK_K / 16; j++) {
        int idx[MAX_GROUPS];
        scan(&iq1_both, x + 16 * j, 2, &s);
        int ls = store_subblock(&iq1_both, &s, 2, SCALE_ODD, 7, d, want[j], idx);
        /* sub-block j: scale word j/4, bits 3*(j%4); groups 2j, 2j+1 */
        sc[j / 4] |= (uint16_t)(ls << (3 * (j % 4)));
        for (int h = 0; h < 2; h++) {
            const int k = 2 * j + h, row = idx[h] % 2048, minus = idx[h] >= 2048;
            b->qs[k] = (uint8_t)row;
            b->qh[k / 2] |= (uint8_t)(((row >> 8) | minus << 3) << (4 * (k % 2)));
        }
    }
    /* the f16 block scale in the top nibbles of the four scale words */
    for (int i = 0; i < 4; i++) {
        sc[i] |= (uint16_t)(((d16 >> (4 * i)) & 0xf) << 12);
        quant_store_u16(b->scales + 2 * i, sc[i]);
    }
}
