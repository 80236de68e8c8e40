/* sampler_kernels.h: the arithmetic of the sampling definition (sampler.h)
 * and the sampler's passes over a whole vocabulary (internal to
 * core/sample/sampler.c and its tests; shaders/sample_common.glsl is the GPU's
 * copy of the inline functions below, operation for operation).
 *
 * Each pass has a portable C version and, on x86-64, the same C compiled
 * for AVX2 and AVX-512, picked at run time.  Every version gives the same
 * results: each value goes through the same IEEE single operations (no FMA
 * contraction: -std=c11 keeps GCC from fusing, the pragma below keeps clang
 * from it) and the sums are of integers, which any order adds up alike. */
#ifndef GLM_SAMPLER_KERNELS_H
#define GLM_SAMPLER_KERNELS_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* exp(x) for x <= 0 (NaN and x < -87 count as -87): 2^n * e^t with
 * n = rint(x / ln 2), |t| <= ln2/2 and a degree-6 Taylor polynomial
 * (relative error < 2e-7).  Rounding to an integer by adding and removing
 * 1.5 * 2^23 is rint (ties to even) for |y| < 2^22, and multiplying by 2^n
 * is adding n to the exponent field, which is exact because every result
 * is >= 1.4 * 2^-126 (normal).  Only adds, multiplies and integer
 * operations: a GPU computes the same bits. */
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

static inline uint32_t sk_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float sk_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A logit as the definition sees it: NaN is -inf; zeros and subnormals
 * are +0 (a GPU may flush subnormals, so they must not matter).  Decided
 * on the bits, which no compiler or driver reinterprets. */
static inline float sk_canon(float x)
{
    uint32_t u = sk_bits(x), a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return -INFINITY;
    if (a < 0x00800000u)
        return 0.0f;
    return x;
}

/* The order of the tokens as an unsigned key of a canonical logit:
 * ascending key = descending logit (then ascending id). */
static inline uint32_t sk_key(float canon)
{
    uint32_t u = sk_bits(canon);
    uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending with the value */
    return ~ord;
}

/* The canonical logit of a key. */
static inline float sk_key_value(uint32_t key)
{
    uint32_t ord = ~key;
    return sk_float((ord & 0x80000000u) ? (ord & 0x7FFFFFFFu) : ~ord);
}

/* A weight in (0, 1] as an integer, 2^31 for 1 (0 below 2^-31). */
static inline uint32_t sk_q31(float w)
{
    return (uint32_t)(w * 2147483648.0f);
}

/* m (inv_t = 1) or r of a canonical logit l <= max. */
static inline uint32_t sk_weight(float l, float max, float inv_t)
{
    return sk_q31(sk_fast_exp((l - max) * inv_t));
}

/* floor(z * p / 2^32), exactly (no overflow: the result is below z). */
static inline uint64_t sk_mulhi(uint64_t z, uint32_t p)
{
    return (z >> 32) * p + (((z & 0xFFFFFFFFu) * p) >> 32);
}

typedef struct sk_kernels {
    /* The smallest key of canon(l[0..n)) (the first token of the order)
     * and, in *first, the lowest id that has it. */
    uint32_t (*best)(const float *l, uint32_t n, uint32_t *first);
    /* l[i] = canon(l[i]) and key[i] = sk_key(l[i]); returns the smallest
     * key, *first its lowest id. */
    uint32_t (*keys)(float *l, uint32_t *key, uint32_t n, uint32_t *first);
    /* The sum of sk_weight(l[i], max, inv_t) over the canonical l[i] whose
     * (key[i], i) <= (bkey, bid). */
    uint64_t (*mass)(const float *l, const uint32_t *key, uint32_t n, uint32_t bkey, uint32_t bid, float max,
                     float inv_t);
    /* Appends every i with key[i] <= bkey to idx, in order; returns how
     * many. */
    uint32_t (*collect)(const uint32_t *key, uint32_t n, uint32_t bkey, int32_t *idx);
    /* w[i] = sk_weight(l[idx[i]], max, inv_t) for i < n (the canonical l);
     * returns their sum. */
    uint64_t (*weights)(const float *l, const int32_t *idx, uint32_t n, float max, float inv_t, uint32_t *w);
} sk_kernels;

/* The best level this CPU runs: 0 portable, 1 AVX2, 2 AVX-512. */
int sk_best_level(void);
/* Fills k with the kernels of a level (capped at sk_best_level()); returns
 * the level used. */
int sk_get(sk_kernels *k, int level);

#endif
