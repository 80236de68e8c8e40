/* sampler_kernels.h: the sampler's passes over a whole vocabulary
 * (internal to core/sampler.c; not part of the public API).
 *
 * Each pass has a portable C version and, on x86-64, AVX2 and AVX-512
 * versions picked at run time.  All versions give bit-identical results:
 * they perform the same IEEE single/double operations on each value (no
 * FMA contraction: -std=c11 keeps GCC from fusing, the pragma below keeps
 * clang from it), and where a sum is order-sensitive they keep the order. */
#ifndef GLM_SAMPLER_KERNELS_H
#define GLM_SAMPLER_KERNELS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* The top-p mass is summed in float blocks of this many values, added up
 * in double (the sampler's definition; see sk_mass). */
#define SK_MASS_BLOCK 4096
/* Output arrays written by the collecting passes need this many spare
 * entries past the largest possible count (vector stores). */
#define SK_SLACK 16

/* exp(x) for x <= 0 (NaN and x < -87 count as -87): 2^n * e^t with
 * n = rint(x / ln 2), |t| <= ln2/2 and a degree-6 Taylor polynomial
 * (relative error < 2e-7).  Rounding to an integer by adding and removing
 * 1.5 * 2^23 is rint (ties to even) for |y| < 2^22, and multiplying by 2^n
 * is adding n to the exponent field, which is exact because every result
 * is >= 1.4 * 2^-126 (normal).  Checked against the rintf / ldexp form on
 * every float in [-88, 0] (bit-identical) when this was written. */
static inline float sk_fast_exp(float x)
{
    x = x > -87.0f ? x : -87.0f;
    float y = x * 1.44269504f;
    float ym = y + 12582912.0f;
    float n = ym - 12582912.0f;
    float t = (y - n) * 0.693147181f;
    float p = 1.0f + t * (1.0f + t * (0.5f + t * (1.0f / 6 + t * (1.0f / 24 + t * (1.0f / 120 + t * (1.0f / 720))))));
    uint32_t pb, nb;
    memcpy(&pb, &p, sizeof pb);
    memcpy(&nb, &ym, sizeof nb); /* low bits: n + 2^22 + 2^23; << 23 keeps n's */
    pb += nb << 23;
    memcpy(&p, &pb, sizeof p);
    return p;
}

/* Collecting modes of sk_kernels.scan. */
enum { SK_MAX_ONLY, SK_AT_LEAST, SK_NEAR_MAX };

typedef struct sk_kernels {
    /* First index of the largest value, as a scan from l[0] keeping the
     * best under '>' finds it: NaN never wins, except that l[0] = NaN
     * gives 0. */
    uint32_t (*argmax)(const float *l, uint32_t n);
    /* Returns the largest non-NaN value (-inf if none).  SK_AT_LEAST also
     * appends (i, l[i]) for every l[i] >= thr to (idx, val) in index order;
     * SK_NEAR_MAX appends every l[i] >= m_i + thr, where m_i is a running
     * maximum that never exceeds the result, so the list holds every
     * l[i] >= max + thr (and maybe more). *m: the count appended. */
    float (*scan)(const float *l, uint32_t n, int mode, float thr, int32_t *idx, float *val, uint32_t *m);
    /* sum over blocks b of SK_MASS_BLOCK values of (double) the float sum,
     * in order, of fast_exp(v[i] - max).  pad: SK_MASS_BLOCK + SK_SLACK
     * floats of scratch. */
    double (*mass)(const float *v, uint32_t n, float max, float *pad);
    /* out[i] = fast_exp((v[i] - max) * inv_t) (out may be v); returns the
     * smallest and largest out[i] through lo, hi. */
    void (*exps)(const float *v, float *out, uint32_t n, float max, float inv_t, float *lo, float *hi);
    /* out[i] = the top-p bucket of v[i] (see sk_bucket_of) */
    void (*buckets)(const float *v, uint8_t *out, uint32_t n, float max, float scale);
    /* smallest of start and v[0..n) (no NaN in v) */
    float (*min)(const float *v, uint32_t n, float start);
    /* how many i in [from, to) have l[i] > pv, or l[i] == pv and id < pid,
     * where id is ids[i] (ids NULL: i) */
    uint32_t (*count_better)(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv, int32_t pid);
    /* Moves the entries of (idx, val)[0..n) whose bucket is below `cross`
     * to the front, in order, and returns how many; appends those in bucket
     * `cross` to (cidx, cval) in order, counting them in *c. */
    uint32_t (*split)(int32_t *idx, float *val, const uint8_t *bucket, uint32_t n, int cross, int32_t *cidx,
                      float *cval, uint32_t *c);
    /* appends those (id, l[i]) to (idx, val) in index order; returns how
     * many */
    uint32_t (*collect_better)(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv, int32_t pid,
                               int32_t *idx, float *val);
} sk_kernels;

#define SK_BUCKETS 256

/* The top-p bucket of a logit: 0 for the best, SK_BUCKETS - 1 for the
 * worst; NaN (only from an infinite span) goes to 0. */
static inline int sk_bucket_of(float v, float max, float scale)
{
    float b = (max - v) * scale;
    return b > 0 ? (b < SK_BUCKETS - 1 ? (int)b : SK_BUCKETS - 1) : 0;
}

/* The best level this CPU runs: 0 portable, 1 AVX2, 2 AVX-512. */
int sk_best_level(void);
/* Fills k with the kernels of a level (capped at sk_best_level()); returns
 * the level used. */
int sk_get(sk_kernels *k, int level);

#endif
