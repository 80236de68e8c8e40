/* sampler_kernels.c: the sampler's whole-vocabulary passes: one portable C
 * body each, compiled once plainly and, on x86-64, again for AVX2 and for
 * AVX-512 (target attributes, so the rest of the build stays baseline
 * x86-64; picked at run time).  The bodies are loops a compiler vectorises;
 * the per-value arithmetic is the same IEEE single operations at every
 * level and the sums are of integers, so the levels agree bit for bit
 * (test_sampler checks them against each other). */
#include "sampler_kernels.h"

/* The bodies, for each level to instantiate with its own attributes. */
/* the smallest key in one vectorisable pass; its first index in a second,
 * which stops there */
#define BODY_BEST                                                                                  \
    {                                                                                              \
        uint32_t bk = UINT32_MAX, bi = 0;                                                          \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            uint32_t k = sk_key(sk_canon(l[i]));                                                   \
            bk = k < bk ? k : bk;                                                                  \
        }                                                                                          \
        while (bi < n && sk_key(sk_canon(l[bi])) != bk)                                            \
            bi++;                                                                                  \
        *first = bi;                                                                               \
        return bk;                                                                                 \
    }

/* keys in one vectorisable pass; the minimum found in a second, cheap one */
#define BODY_KEYS                                                                                  \
    {                                                                                              \
        uint32_t mk = UINT32_MAX;                                                                  \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            float c = sk_canon(l[i]);                                                              \
            l[i] = c;                                                                              \
            uint32_t k = sk_key(c);                                                                \
            key[i] = k;                                                                            \
            mk = k < mk ? k : mk;                                                                  \
        }                                                                                          \
        uint32_t bi = 0;                                                                           \
        while (bi < n && key[bi] != mk)                                                            \
            bi++;                                                                                  \
        *first = bi;                                                                               \
        return mk;                                                                                 \
    }

#define BODY_MASS                                                                                  \
    {                                                                                              \
        uint64_t s = 0;                                                                            \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            uint32_t k = key[i];                                                                   \
            bool in = k < bkey || (k == bkey && i <= bid);                                         \
            uint32_t w = sk_weight(l[i], max, inv_t);                                              \
            s += in ? w : 0;                                                                       \
        }                                                                                          \
        return s;                                                                                  \
    }

#define BODY_COLLECT                                                                               \
    {                                                                                              \
        uint32_t c = 0;                                                                            \
        for (uint32_t i = 0; i < n; i++)                                                           \
            if (key[i] <= bkey)                                                                    \
                idx[c++] = (int32_t)i;                                                             \
        return c;                                                                                  \
    }

/* a list's weights: the loads are gathers, the arithmetic as everywhere */
#define BODY_WEIGHTS                                                                               \
    {                                                                                              \
        uint64_t s = 0;                                                                            \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            uint32_t v = sk_weight(l[idx[i]], max, inv_t);                                         \
            w[i] = v;                                                                              \
            s += v;                                                                                \
        }                                                                                          \
        return s;                                                                                  \
    }

/* GCC vectorises these loops from -O3 only; clang does at -O2. */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTORIZE __attribute__((optimize("O3")))
#else
#define VECTORIZE
#endif

/* One level: the five passes with attribute `attr`, and their table. */
#define LEVEL(prefix, attr)                                                                                    \
    attr VECTORIZE static uint32_t prefix##_best(const float *l, uint32_t n, uint32_t *first) BODY_BEST         \
    attr VECTORIZE static uint32_t prefix##_keys(float *l, uint32_t *key, uint32_t n, uint32_t *first) BODY_KEYS \
    attr VECTORIZE static uint64_t prefix##_mass(const float *l, const uint32_t *key, uint32_t n, uint32_t bkey,  \
                                                 uint32_t bid, float max, float inv_t) BODY_MASS                  \
    attr VECTORIZE static uint32_t prefix##_collect(const uint32_t *key, uint32_t n, uint32_t bkey,              \
                                                    int32_t *idx) BODY_COLLECT                                    \
    attr VECTORIZE static uint64_t prefix##_weights(const float *l, const int32_t *idx, uint32_t n, float max,    \
                                                    float inv_t, uint32_t *w) BODY_WEIGHTS                        \
    static const sk_kernels prefix##_kernels = {prefix##_best, prefix##_keys, prefix##_mass, prefix##_collect,    \
                                                prefix##_weights};

LEVEL(portable, )

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_KERNELS 1
/* No "fma": a fused multiply-add would round differently. */
LEVEL(avx2, __attribute__((target("avx2,popcnt"))))
LEVEL(avx512, __attribute__((target("avx512f,avx2,popcnt"))))
#else
#define HAVE_X86_KERNELS 0
#endif

int sk_best_level(void)
{
#if HAVE_X86_KERNELS
    /* __builtin_cpu_supports also checks that the OS saves the wide
     * registers; it reads a table filled at start-up, cheap to ask. */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("popcnt"))
        return 0;
    return __builtin_cpu_supports("avx512f") ? 2 : 1;
#else
    return 0;
#endif
}

int sk_get(sk_kernels *k, int level)
{
    int best = sk_best_level();
    level = level < 0 ? 0 : level > best ? best : level;
#if HAVE_X86_KERNELS
    *k = level == 2 ? avx512_kernels : level == 1 ? avx2_kernels : portable_kernels;
#else
    *k = portable_kernels;
#endif
    return level;
}
