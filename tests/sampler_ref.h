/* sampler_ref.h: the sampling definition of core/sample/sampler.h written out as
 * plainly as it reads -- sort the whole vocabulary, walk prefix sums (the
 * draw's over the kept tokens sorted by id) --
 * as the oracle the fast sampler (core/sample/sampler.c) and the GPU kernels
 * must match token for token.  Names carry ref_; the arithmetic helpers
 * (sk_fast_exp, sk_canon, sk_key, sk_q31, sk_mulhi) are the definition's
 * own, from sampler_kernels.h.  Slow on purpose: O(n log n) per token. */
#ifndef GLM_SAMPLER_REF_H
#define GLM_SAMPLER_REF_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sample/sampler.h"
#include "sample/sampler_kernels.h"

#define REF_FN static __attribute__((unused))

typedef struct ref_sampler ref_sampler;

struct ref_sampler {
    sampler_params p;
    uint32_t n_vocab;
    uint64_t rng[4];
    uint32_t *count;  /* (n_vocab) occurrences in the penalty window */
    int32_t *window;  /* (window_cap) ring of recent tokens */
    int window_cap, window_n, window_pos;
    uint64_t *order;  /* (n_vocab) (key << 32 | id), sorted: the order */
};

REF_FN uint64_t ref_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

REF_FN uint64_t ref_rng_next(uint64_t s[4])
{
    uint64_t r = s[1] * 5;
    r = ((r << 7) | (r >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return r;
}

REF_FN void ref_seed(ref_sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = ref_splitmix64(&x);
}

REF_FN void ref_sampler_free(ref_sampler *s)
{
    if (!s)
        return;
    free(s->count);
    free(s->window);
    free(s->order);
    free(s);
}

REF_FN void ref_set_window(ref_sampler *s, int n)
{
    n = n < 0 ? 0 : n > SAMPLER_MAX_WINDOW ? SAMPLER_MAX_WINDOW : n;
    free(s->window);
    s->window = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->window);
    s->window_cap = n;
    s->window_n = s->window_pos = 0;
    memset(s->count, 0, s->n_vocab * sizeof *s->count);
}

REF_FN ref_sampler *ref_sampler_new(const sampler_params *p, uint32_t n_vocab)
{
    ref_sampler *s = calloc(1, sizeof *s);
    if (!s || n_vocab == 0) {
        free(s);
        return NULL;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->count = calloc(n_vocab, sizeof *s->count);
    s->order = malloc(n_vocab * sizeof *s->order);
    if (!s->count || !s->order) {
        ref_sampler_free(s);
        return NULL;
    }
    ref_set_window(s, p->penalty_window);
    ref_seed(s, p->seed);
    return s;
}

REF_FN void ref_sampler_set_params(ref_sampler *s, const sampler_params *p)
{
    bool reseed = p->seed != s->p.seed;
    if (p->penalty_window != s->p.penalty_window)
        ref_set_window(s, p->penalty_window);
    s->p = *p;
    if (reseed)
        ref_seed(s, p->seed);
}

REF_FN void ref_sampler_reset(ref_sampler *s)
{
    s->window_n = s->window_pos = 0;
    memset(s->count, 0, s->n_vocab * sizeof *s->count);
    ref_seed(s, s->p.seed);
}

REF_FN void ref_sampler_accept(ref_sampler *s, int32_t id)
{
    if (s->window_cap <= 0 || id < 0 || (uint32_t)id >= s->n_vocab)
        return;
    if (s->window_n == s->window_cap)
        s->count[s->window[s->window_pos]]--;
    else
        s->window_n++;
    s->window[s->window_pos] = id;
    s->count[id]++;
    s->window_pos = (s->window_pos + 1) % s->window_cap;
}

REF_FN int ref_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The definition, step by step (sampler.h numbers them). */
REF_FN int32_t ref_sampler_sample(ref_sampler *s, float *l)
{
    const sampler_params *p = &s->p;
    uint32_t n = s->n_vocab;
    /* 1. penalties, each window token once */
    if (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
        float inv_rp = 1.0f / p->repeat_penalty;
        bool *done = calloc(n, sizeof *done);
        for (int i = 0; i < s->window_n; i++) {
            int32_t t = s->window[i];
            if (done[t] || !s->count[t])
                continue;
            done[t] = true;
            float x = sk_canon(l[t]);
            x = x > 0 ? x * inv_rp : x * p->repeat_penalty;
            l[t] = x - (float)s->count[t] * p->frequency_penalty - p->presence_penalty;
        }
        free(done);
    }
    /* 2. the order */
    for (uint32_t i = 0; i < n; i++)
        s->order[i] = (uint64_t)sk_key(sk_canon(l[i])) << 32 | i;
    qsort(s->order, n, sizeof *s->order, ref_cmp_u64);
    int32_t first = (int32_t)(uint32_t)s->order[0];
    /* 3. greedy (no uniform drawn): temp <= 0 or NaN, or 1/temp not finite */
    if (!(p->temp > 0.0f) || !isfinite(1.0f / p->temp))
        return first;
    uint32_t u = (uint32_t)(ref_rng_next(s->rng) >> 32);
    float max = sk_canon(l[first]);
    if (!isfinite(max))
        return first;
    float inv_t = 1.0f / p->temp;
#define REF_L(i) sk_canon(l[(uint32_t)s->order[i]])
    /* 5. C */
    uint32_t nc = p->top_k > 0 && (uint32_t)p->top_k < n ? (uint32_t)p->top_k : n, kept = nc;
    /* 6. top-p */
    if (p->top_p < 1.0f) {
        double q = p->top_p > 0 ? (double)p->top_p * 4294967296.0 : 0;
        uint32_t pq = (uint32_t)(q < 4294967295.0 ? q : 4294967295.0);
        uint64_t z = 0, cum = 0;
        for (uint32_t i = 0; i < nc; i++)
            z += sk_q31(sk_fast_exp((REF_L(i) - max) * 1.0f));
        uint64_t t = sk_mulhi(z, pq);
        t = t ? t : 1;
        for (uint32_t i = 0; i < nc; i++) {
            cum += sk_q31(sk_fast_exp((REF_L(i) - max) * 1.0f));
            if (cum >= t) {
                kept = i + 1;
                break;
            }
        }
    }
    /* 7. min-p */
    if (p->min_p > 0.0f) {
        float floor_l = sk_canon(max + logf(p->min_p));
        uint32_t nm = 0;
        while (nm < n && REF_L(nm) >= floor_l)
            nm++;
        nm = nm ? nm : 1;
        kept = nm < kept ? nm : kept;
    }
#undef REF_L
    /* 9. the draw, over the kept tokens in id order */
    for (uint32_t i = 0; i < kept; i++)
        s->order[i] = (uint32_t)s->order[i];
    qsort(s->order, kept, sizeof *s->order, ref_cmp_u64);
#define REF_ID(i) ((uint32_t)s->order[i])
    uint64_t total = 0, cum = 0;
    for (uint32_t i = 0; i < kept; i++)
        total += sk_q31(sk_fast_exp((sk_canon(l[REF_ID(i)]) - max) * inv_t));
    uint64_t target = sk_mulhi(total, u);
    for (uint32_t i = 0; i < kept; i++) {
        cum += sk_q31(sk_fast_exp((sk_canon(l[REF_ID(i)]) - max) * inv_t));
        if (cum > target)
            return (int32_t)REF_ID(i);
    }
#undef REF_ID
    return -1; /* not reached: target < total */
}

#endif
