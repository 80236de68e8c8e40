/* sampler_ref.h: the sampler as it was before its full-vocabulary path was
 * made fast (core/sampler.c at commit cfe4f77), kept verbatim (names
 * prefixed ref_) as the oracle: the fast sampler must pick the very same
 * token for the same seed and inputs.  test_sampler.c compares the two;
 * bench_text.c times both in the same run.
 *
 * One change: the old ref_bucket_of converted NaN to int (undefined: on
 * x86 an index of -2^31, a crash).  NaN arises when the candidates' logit
 * span is below 255 / FLT_MAX (the scale overflows: 0 * inf for the best
 * token) or above FLT_MAX; it now goes to bucket 0, as in the fast sampler,
 * the only choice that keeps the best token first. */
#ifndef GLM_SAMPLER_REF_H
#define GLM_SAMPLER_REF_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define REF_FN static __attribute__((unused))

typedef struct ref_sampler ref_sampler;
REF_FN void ref_sampler_free(ref_sampler *s);

#define REF_N_BUCKETS 256

/* The exp loops below are written to vectorise; GCC does so from -O3 only,
 * clang at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#define REF_VECTORIZE __attribute__((optimize("O3")))
#else
#define REF_VECTORIZE
#endif

struct ref_sampler {
    sampler_params p;
    uint32_t n_vocab;
    uint64_t rng[4];
    int32_t *idx;     /* (n_vocab) candidate ids */
    float *val;       /* (n_vocab) candidate logits, then probabilities */
    uint32_t *count;  /* (n_vocab) occurrences in the penalty window */
    int32_t *window;  /* (window_cap) ring of recent tokens */
    int window_cap, window_n, window_pos;
};

/* ---- RNG: xoshiro256**, seeded through ref_splitmix64 ------------------------- */

REF_FN uint64_t ref_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

REF_FN inline uint64_t ref_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

REF_FN uint64_t ref_rng_next(uint64_t s[4])
{
    uint64_t result = ref_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ref_rotl(s[3], 45);
    return result;
}

REF_FN double ref_rng_uniform(uint64_t s[4]) /* [0, 1) with 53 random bits */
{
    return (double)(ref_rng_next(s) >> 11) * 0x1.0p-53;
}

REF_FN void ref_seed_rng(ref_sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = ref_splitmix64(&x);
}

/* ---- lifecycle ------------------------------------------------------------------ */

REF_FN void ref_sampler_params_default(sampler_params *p)
{
    /* GLM-4.7-Flash's recommended settings; the template presets carry
     * each family's own (tmpl_sampling_defaults). */
    *p = (sampler_params){
        .temp = 1.0f, .top_k = 0, .top_p = 0.95f, .min_p = 0.01f, .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f, .frequency_penalty = 0.0f, .penalty_window = 64, .seed = 0x5EED,
    };
}

REF_FN int ref_set_window(ref_sampler *s, int n)
{
    if (n < 0)
        n = 0;
    int cap = n > 0 ? n : 1;
    int32_t *w = realloc(s->window, (size_t)cap * sizeof *w);
    if (!w)
        return -1;
    s->window = w;
    s->window_cap = n;
    s->window_n = s->window_pos = 0;
    memset(s->count, 0, s->n_vocab * sizeof *s->count);
    return 0;
}

REF_FN ref_sampler *ref_sampler_new(const sampler_params *p, uint32_t n_vocab)
{
    if (n_vocab == 0)
        return NULL;
    ref_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->n_vocab = n_vocab;
    s->p = *p;
    s->idx = malloc(n_vocab * sizeof *s->idx);
    s->val = malloc(n_vocab * sizeof *s->val);
    s->count = calloc(n_vocab, sizeof *s->count);
    if (!s->idx || !s->val || !s->count || ref_set_window(s, p->penalty_window) != 0) {
        ref_sampler_free(s);
        return NULL;
    }
    ref_seed_rng(s, p->seed);
    return s;
}

REF_FN void ref_sampler_free(ref_sampler *s)
{
    if (!s)
        return;
    free(s->idx);
    free(s->val);
    free(s->count);
    free(s->window);
    free(s);
}

REF_FN void ref_sampler_set_params(ref_sampler *s, const sampler_params *p)
{
    bool reseed = p->seed != s->p.seed;
    if (p->penalty_window != s->p.penalty_window && ref_set_window(s, p->penalty_window) != 0)
        ref_set_window(s, 0); /* out of memory: penalties switched off rather than a crash */
    s->p = *p;
    if (reseed)
        ref_seed_rng(s, p->seed);
}

REF_FN void ref_sampler_reset(ref_sampler *s)
{
    s->window_n = s->window_pos = 0;
    memset(s->count, 0, s->n_vocab * sizeof *s->count);
    ref_seed_rng(s, s->p.seed);
}

REF_FN void ref_sampler_accept(ref_sampler *s, int32_t id)
{
    if (s->window_cap <= 0 || id < 0 || (uint32_t)id >= s->n_vocab)
        return;
    if (s->window_n == s->window_cap) {
        s->count[s->window[s->window_pos]]--;
    } else {
        s->window_n++;
    }
    s->window[s->window_pos] = id;
    s->count[id]++;
    s->window_pos = (s->window_pos + 1) % s->window_cap;
}

/* ---- the chain ------------------------------------------------------------------- */

REF_FN bool ref_penalties_on(const sampler_params *p)
{
    return p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

/* llama.cpp's rule: a seen token's logit is divided by the repeat penalty
 * when positive (multiplied when negative), then lowered by
 * count * frequency + presence. */
REF_FN float ref_penalized(const sampler_params *p, float l, uint32_t c)
{
    if (l > 0)
        l /= p->repeat_penalty;
    else
        l *= p->repeat_penalty;
    return l - (float)c * p->frequency_penalty - p->presence_penalty;
}

REF_FN void ref_apply_penalties(ref_sampler *s, float *logits)
{
    if (!ref_penalties_on(&s->p))
        return;
    /* Each distinct token once: its count is zeroed after use and restored. */
    for (int i = 0; i < s->window_n; i++) {
        int32_t id = s->window[i];
        uint32_t c = s->count[id];
        if (c == 0)
            continue;
        logits[id] = ref_penalized(&s->p, logits[id], c);
        s->count[id] = 0;
        s->idx[i] = (int32_t)c; /* idx[] is free scratch here */
    }
    for (int i = 0; i < s->window_n; i++)
        if (s->idx[i] > 0 && s->count[s->window[i]] == 0)
            s->count[s->window[i]] = (uint32_t)s->idx[i];
    for (int i = 0; i < s->window_n; i++)
        s->idx[i] = 0;
}

REF_FN inline bool ref_better(float la, int32_t ia, float lb, int32_t ib)
{
    return la > lb || (la == lb && ia < ib);
}

REF_FN inline void ref_swap_at(int32_t *idx, float *val, uint32_t a, uint32_t b)
{
    float tv = val[a];
    int32_t ti = idx[a];
    val[a] = val[b];
    idx[a] = idx[b];
    val[b] = tv;
    idx[b] = ti;
}

/* Moves the k best of (idx, val)[0..n) to the front, in any order
 * (quickselect; ties broken by id, so every key is distinct). */
REF_FN void ref_select_top(int32_t *idx, float *val, uint32_t n, uint32_t k)
{
    uint32_t lo = 0, hi = n;
    while (hi - lo > 1) {
        ref_swap_at(idx, val, lo + (hi - lo) / 2, hi - 1);
        uint32_t store = lo;
        for (uint32_t i = lo; i < hi - 1; i++)
            if (ref_better(val[i], idx[i], val[hi - 1], idx[hi - 1]))
                ref_swap_at(idx, val, i, store++);
        ref_swap_at(idx, val, store, hi - 1);
        /* [lo, store) beat the pivot now at store; the rest do not */
        if (store == k || store + 1 == k)
            return;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
}

/* Sorts (idx, val)[0..n) best first: a shell sort, in place and without
 * allocation; n is a few thousand at most except in the rare full sort. */
REF_FN void ref_sort_desc(int32_t *idx, float *val, uint32_t n)
{
    static const uint32_t gaps[] = {1750, 701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        uint32_t gap = gaps[g];
        for (uint32_t i = gap; i < n; i++) {
            float v = val[i];
            int32_t id = idx[i];
            uint32_t j = i;
            while (j >= gap && ref_better(v, id, val[j - gap], idx[j - gap])) {
                val[j] = val[j - gap];
                idx[j] = idx[j - gap];
                j -= gap;
            }
            val[j] = v;
            idx[j] = id;
        }
    }
}

/* Keeps the smallest best-first prefix whose probability ref_mass reaches
 * top_p; probabilities are exp(l - log_z).  Needs (idx, val) sorted. */
REF_FN uint32_t ref_cut_top_p(const float *val, uint32_t n, float top_p, double log_z)
{
    double cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += exp((double)val[i] - log_z);
        if (cum >= top_p)
            return i + 1;
    }
    return n;
}

/* min-p: keep tokens whose probability is at least min_p times the best's. */
REF_FN uint32_t ref_cut_min_p(int32_t *idx, float *val, uint32_t n, float min_p)
{
    if (min_p <= 0 || n == 0)
        return n;
    float best = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        if (val[i] > best)
            best = val[i];
    float floor_l = best + logf(min_p);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (val[i] >= floor_l) {
            idx[k] = idx[i];
            val[k] = val[i];
            k++;
        }
    return k;
}

/* Draws from softmax(val / temp) over the kept candidates. */
REF_FN int32_t ref_draw(ref_sampler *s, const int32_t *idx, float *val, uint32_t n)
{
    if (n == 0)
        return -1;
    float m = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        if (val[i] > m)
            m = val[i];
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        val[i] = (float)exp((double)(val[i] - m) / s->p.temp);
        sum += val[i];
    }
    double u = ref_rng_uniform(s->rng) * sum, cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += val[i];
        if (u < cum)
            return idx[i];
    }
    return idx[n - 1];
}

REF_FN int32_t ref_argmax(const float *logits, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

/* exp(x) for x <= 0: 2^n * e^t with |t| <= ln2/2 and a degree-6 Taylor
 * polynomial (relative error < 2e-7); branch-free so loops vectorise. */
REF_FN inline float ref_fast_exp(float x)
{
    x = x > -87.0f ? x : -87.0f; /* also maps NaN to a tiny value */
    float y = x * 1.44269504f;
    float n = rintf(y);
    float t = (y - n) * 0.693147181f;
    float p = 1.0f + t * (1.0f + t * (0.5f + t * (1.0f / 6 + t * (1.0f / 24 + t * (1.0f / 120 + t * (1.0f / 720))))));
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Sum of exp(val - max) over n values. */
REF_VECTORIZE REF_FN double ref_mass(const float *val, uint32_t n, float max)
{
    double total = 0;
    for (uint32_t b = 0; b < n; b += 4096) {
        float part = 0; /* float blocks vectorise; the double total keeps precision */
        uint32_t e = b + 4096 < n ? b + 4096 : n;
        for (uint32_t i = b; i < e; i++)
            part += ref_fast_exp(val[i] - max);
        total += part;
    }
    return total;
}

REF_FN inline int ref_bucket_of(float v, float max, float scale)
{
    float b = (max - v) * scale;
    if (b != b) /* the one change: NaN, undefined as an int, goes to bucket 0 */
        return 0;
    return b < 0 ? 0 : b > REF_N_BUCKETS - 1 ? REF_N_BUCKETS - 1 : (int)b;
}

/* top-p on unsorted candidates: keeps the smallest best-first prefix whose
 * ref_mass reaches `target` (in units of exp(l - max)); returns its length,
 * with the kept candidates moved to the front. */
REF_FN uint32_t ref_cut_top_p_buckets(int32_t *idx, float *val, uint32_t n, float max, double target)
{
    float lo = max;
    for (uint32_t i = 0; i < n; i++)
        lo = val[i] < lo ? val[i] : lo;
    float span = max - lo, scale = span > 0 ? (REF_N_BUCKETS - 1) / span : 0;
    double bucket_mass[REF_N_BUCKETS] = {0};
    for (uint32_t i = 0; i < n; i++)
        bucket_mass[ref_bucket_of(val[i], max, scale)] += ref_fast_exp(val[i] - max);
    double cum = 0;
    int cross = -1;
    for (int b = 0; b < REF_N_BUCKETS && cross < 0; b++) {
        if (cum + bucket_mass[b] >= target)
            cross = b;
        else
            cum += bucket_mass[b];
    }
    if (cross < 0)
        return n; /* the candidates hold less than top-p: keep them all */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; i++) /* ref_better buckets first */
        if (ref_bucket_of(val[i], max, scale) < cross)
            ref_swap_at(idx, val, i, kept++);
    uint32_t seg = kept;
    for (uint32_t i = kept; i < n; i++) /* then the crossing bucket */
        if (ref_bucket_of(val[i], max, scale) == cross)
            ref_swap_at(idx, val, i, seg++);
    ref_sort_desc(idx + kept, val + kept, seg - kept);
    for (uint32_t i = kept; i < seg; i++) {
        cum += ref_fast_exp(val[i] - max);
        kept++;
        if (cum >= target)
            break;
    }
    return kept;
}

/* The ref_draw from softmax(val / temp). */
REF_FN int32_t ref_draw_fast(ref_sampler *s, const int32_t *idx, float *val, uint32_t n, float max)
{
    float inv_t = 1.0f / s->p.temp;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        val[i] = ref_fast_exp((val[i] - max) * inv_t);
        sum += val[i];
    }
    double u = ref_rng_uniform(s->rng) * sum, cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += val[i];
        if (u < cum)
            return idx[i];
    }
    return idx[n - 1];
}

/* top-k, top-p, min-p, temperature and the ref_draw over sorted candidates
 * (the top-K entry point); log_z: logsumexp of the whole distribution. */
REF_FN int32_t ref_sample_sorted(ref_sampler *s, uint32_t n, double log_z)
{
    const sampler_params *p = &s->p;
    if (p->top_k > 0 && (uint32_t)p->top_k < n)
        n = (uint32_t)p->top_k;
    if (p->top_p < 1.0f)
        n = ref_cut_top_p(s->val, n, p->top_p, log_z);
    n = ref_cut_min_p(s->idx, s->val, n, p->min_p);
    return ref_draw(s, s->idx, s->val, n);
}

REF_FN int32_t ref_sampler_sample(ref_sampler *s, float *logits)
{
    const sampler_params *p = &s->p;
    ref_apply_penalties(s, logits);
    if (p->temp <= 0.0f)
        return ref_argmax(logits, s->n_vocab);
    uint32_t n = s->n_vocab, m = 0;
    float max = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        max = logits[i] > max ? logits[i] : max;
    if (!isfinite(max)) /* every logit masked (or +inf): the greedy answer */
        return ref_argmax(logits, n);
    double z = 0;
    if (p->top_k > 0 && (uint32_t)p->top_k < n) {
        /* top-p then weighs the k best only, as in llama.cpp */
        for (uint32_t i = 0; i < n; i++) {
            s->idx[i] = (int32_t)i;
            s->val[i] = logits[i];
        }
        ref_select_top(s->idx, s->val, n, (uint32_t)p->top_k);
        m = (uint32_t)p->top_k;
        if (p->top_p < 1.0f)
            z = ref_mass(s->val, m, max);
        float floor_l = p->min_p > 0 ? max + logf(p->min_p) : -FLT_MAX;
        uint32_t k = 0;
        for (uint32_t i = 0; i < m; i++)
            if (s->val[i] >= floor_l)
                ref_swap_at(s->idx, s->val, i, k++);
        m = k;
    } else {
        if (p->top_p < 1.0f)
            z = ref_mass(logits, n, max);
        /* min-p keeps a best-first prefix, as top-p does: filtering first
         * keeps the same tokens and leaves fewer to weigh */
        /* -inf (masked) and NaN logits never qualify */
        float floor_l = p->min_p > 0 ? max + logf(p->min_p) : -FLT_MAX;
        for (uint32_t i = 0; i < n; i++)
            if (logits[i] >= floor_l) {
                s->idx[m] = (int32_t)i;
                s->val[m++] = logits[i];
            }
    }
    if (m == 0) /* every logit masked: nothing ref_better than the greedy answer */
        return ref_argmax(logits, n);
    if (p->top_p < 1.0f)
        m = ref_cut_top_p_buckets(s->idx, s->val, m, max, z * p->top_p);
    return ref_draw_fast(s, s->idx, s->val, m, max);
}

REF_FN int32_t ref_sampler_sample_topk(ref_sampler *s, const int32_t *ids, const float *logits, uint32_t k, float log_z)
{
    if (k == 0)
        return -1;
    if (k > s->n_vocab)
        k = s->n_vocab;
    bool pen = ref_penalties_on(&s->p);
    for (uint32_t i = 0; i < k; i++) {
        s->idx[i] = ids[i];
        float l = logits[i];
        /* Penalties reach only the candidates the GPU returned. */
        if (pen && ids[i] >= 0 && (uint32_t)ids[i] < s->n_vocab && s->count[ids[i]])
            l = ref_penalized(&s->p, l, s->count[ids[i]]);
        s->val[i] = l;
    }
    if (pen) /* the order may have changed */
        ref_sort_desc(s->idx, s->val, k);
    if (s->p.temp <= 0.0f) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < k; i++)
            if (ref_better(s->val[i], s->idx[i], s->val[best], s->idx[best]))
                best = i;
        return s->idx[best];
    }
    return ref_sample_sorted(s, k, (double)log_z);
}

#endif
