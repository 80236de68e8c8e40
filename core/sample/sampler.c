/* sampler.c: token sampling, the reference of the definition in sampler.h.
 *
 * The chain, in llama.cpp's default order: penalties over the recent-token
 * window -> top-k -> top-p -> min-p (both on the untempered distribution)
 * -> temperature -> a draw from the seeded RNG (xoshiro256**).  Every
 * buffer is sized at sampler_new, so sampling allocates nothing.
 *
 * How the reference finds the definition's tokens without sorting the
 * vocabulary: each "shortest prefix of the order whose weight reaches a
 * target" (the top-k bound, with unit weights; the top-p cut) is a
 * weighted selection over the keys (sampler_kernels.h): a histogram of the
 * weights by the top bits of the key finds the bucket the target falls in,
 * the next bits refine within it, and the tokens left at the end share one
 * logit, hence one weight, so the crossing one is found by division (ids
 * ascend within a key).  The draw needs no order at all: it walks the kept
 * tokens by id.  The GPU runs the same selections and draw
 * (shaders/sample_select.comp, sample_pick.comp); both add integers, so
 * they agree exactly. */
#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_kernels.h"

#define SELECT_SMALL 48 /* lists this short are sorted and walked instead */

struct sampler {
    sampler_params p;
    uint32_t n_vocab;
    uint64_t rng[4];
    sk_kernels k;
    int simd;
    uint32_t *key;        /* (n_vocab) the order's key of each logit */
    int32_t *list;        /* (n_vocab) ids of the tokens that may be kept, ascending */
    uint32_t *list_w;     /* (n_vocab) their weights */
    int32_t *sel;         /* (n_vocab) a selection's working list */
    uint32_t *sel_w;      /* (n_vocab) */
    uint32_t *count;      /* (n_vocab) occurrences in the penalty window */
    int32_t *window;      /* (window_cap) ring of recent tokens */
    int window_cap, window_n, window_pos;
    int32_t pen_ids[SAMPLER_MAX_WINDOW];   /* the request's distinct window tokens */
    uint32_t pen_counts[SAMPLER_MAX_WINDOW];
    /* the same for the requests of a speculative step (sampler_prepare_ahead) */
    int32_t *ahead_ids;      /* (SAMPLER_SPEC_SLOTS, SAMPLER_MAX_WINDOW) */
    uint32_t *ahead_counts;  /* (SAMPLER_SPEC_SLOTS, SAMPLER_MAX_WINDOW) */
};

/* ---- RNG: xoshiro256**, seeded through splitmix64 ------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static void seed_rng(sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
}

/* ---- lifecycle ------------------------------------------------------------------ */

void sampler_params_default(sampler_params *p)
{
    /* GLM-4.7-Flash's recommended settings; the template presets carry
     * each family's own (tmpl_sampling_defaults). */
    *p = (sampler_params){
        .temp = 1.0f, .top_k = 0, .top_p = 0.95f, .min_p = 0.01f, .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f, .frequency_penalty = 0.0f, .penalty_window = 64, .seed = 0x5EED,
    };
}

/* ---- the settings people and files give ------------------------------------------------- */

typedef struct {
    double lo, hi;
    bool integer;
    const char *range; /* as the message says it */
} setting_range;

static const setting_range ranges[] = {
    [SAMPLER_TEMP] = {0, 100, false, "[0.001, 100] (or 0: greedy)"},
    [SAMPLER_TOP_K] = {0, 1000000, true, "[0, 1000000]"},
    [SAMPLER_TOP_P] = {0, 1, false, "[0, 1]"},
    [SAMPLER_MIN_P] = {0, 1, false, "[0, 1]"},
    [SAMPLER_REPEAT_PENALTY] = {0.1, 10, false, "[0.1, 10]"},
    [SAMPLER_PRESENCE_PENALTY] = {-2, 2, false, "[-2, 2]"},
    [SAMPLER_FREQUENCY_PENALTY] = {-2, 2, false, "[-2, 2]"},
};

int sampler_check(sampler_setting which, const char *name, double v, err_t *err)
{
    if ((unsigned)which >= sizeof ranges / sizeof ranges[0])
        return err_set(err, "%s: not a sampler setting", name);
    const setting_range *r = &ranges[which];
    if (!isfinite(v))
        return err_set(err, "%s: %.10g is not a number", name, v);
    if (v < r->lo || v > r->hi || (which == SAMPLER_TEMP && v > 0 && v < SAMPLER_TEMP_MIN))
        return err_set(err, "%s: %.10g is out of range %s", name, v, r->range);
    if (v != 0 && fabs(v) < FLT_MIN)
        return err_set(err, "%s: %.10g is too close to 0 (0, or at least %.2g)", name, v, (double)FLT_MIN);
    if (r->integer && v != floor(v))
        return err_set(err, "%s: %.10g is not an integer", name, v);
    return 0;
}

int sampler_params_check(const sampler_params *p, err_t *err)
{
    if (sampler_check(SAMPLER_TEMP, "temp", p->temp, err) || sampler_check(SAMPLER_TOP_K, "top-k", p->top_k, err) ||
        sampler_check(SAMPLER_TOP_P, "top-p", p->top_p, err) || sampler_check(SAMPLER_MIN_P, "min-p", p->min_p, err) ||
        sampler_check(SAMPLER_REPEAT_PENALTY, "repeat-penalty", p->repeat_penalty, err) ||
        sampler_check(SAMPLER_PRESENCE_PENALTY, "presence-penalty", p->presence_penalty, err) ||
        sampler_check(SAMPLER_FREQUENCY_PENALTY, "frequency-penalty", p->frequency_penalty, err))
        return -1;
    return 0;
}

/* ---- the sampler's state ----------------------------------------------------------------- */

static int set_window(sampler *s, int n)
{
    n = n < 0 ? 0 : n > SAMPLER_MAX_WINDOW ? SAMPLER_MAX_WINDOW : n;
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

sampler *sampler_new(const sampler_params *p, uint32_t n_vocab)
{
    if (n_vocab == 0 || n_vocab > INT32_MAX)
        return NULL;
    sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->n_vocab = n_vocab;
    s->p = *p;
    s->key = malloc(n_vocab * sizeof *s->key);
    s->list = malloc(n_vocab * sizeof *s->list);
    s->list_w = malloc(n_vocab * sizeof *s->list_w);
    s->sel = malloc(n_vocab * sizeof *s->sel);
    s->sel_w = malloc(n_vocab * sizeof *s->sel_w);
    s->count = calloc(n_vocab, sizeof *s->count);
    s->ahead_ids = malloc(SAMPLER_SPEC_SLOTS * SAMPLER_MAX_WINDOW * sizeof *s->ahead_ids);
    s->ahead_counts = malloc(SAMPLER_SPEC_SLOTS * SAMPLER_MAX_WINDOW * sizeof *s->ahead_counts);
    if (!s->key || !s->list || !s->list_w || !s->sel || !s->sel_w || !s->count || !s->ahead_ids ||
        !s->ahead_counts ||
        set_window(s, p->penalty_window) != 0) {
        sampler_free(s);
        return NULL;
    }
    s->simd = sk_get(&s->k, sk_best_level());
    seed_rng(s, p->seed);
    return s;
}

void sampler_free(sampler *s)
{
    if (!s)
        return;
    free(s->key);
    free(s->list);
    free(s->list_w);
    free(s->sel);
    free(s->sel_w);
    free(s->count);
    free(s->window);
    free(s->ahead_ids);
    free(s->ahead_counts);
    free(s);
}

int sampler_set_simd(sampler *s, int level)
{
    sk_kernels k;
    int used = sk_get(&k, level);
    if (s) {
        s->k = k;
        s->simd = used;
    }
    return used;
}

void sampler_set_params(sampler *s, const sampler_params *p)
{
    bool reseed = p->seed != s->p.seed;
    if (p->penalty_window != s->p.penalty_window && set_window(s, p->penalty_window) != 0)
        set_window(s, 0); /* out of memory: penalties switched off rather than a crash */
    s->p = *p;
    if (reseed)
        seed_rng(s, p->seed);
}

void sampler_reset(sampler *s)
{
    s->window_n = s->window_pos = 0;
    memset(s->count, 0, s->n_vocab * sizeof *s->count);
    seed_rng(s, s->p.seed);
}

/* Pushes id into the window ring; returns the token that fell out (-1:
 * none), or -2 when nothing was pushed (no window, an invalid id). */
static int32_t window_push(sampler *s, int32_t id)
{
    if (s->window_cap <= 0 || id < 0 || (uint32_t)id >= s->n_vocab)
        return -2;
    int32_t out = -1;
    if (s->window_n == s->window_cap) {
        out = s->window[s->window_pos];
        s->count[out]--;
    } else {
        s->window_n++;
    }
    s->window[s->window_pos] = id;
    s->count[id]++;
    s->window_pos = (s->window_pos + 1) % s->window_cap;
    return out;
}

/* Undoes the latest window_push(s, id) that returned `out`. */
static void window_pop(sampler *s, int32_t id, int32_t out)
{
    if (out == -2)
        return;
    s->window_pos = (s->window_pos + s->window_cap - 1) % s->window_cap;
    s->count[id]--;
    if (out >= 0) {
        s->window[s->window_pos] = out;
        s->count[out]++;
    } else {
        s->window_n--;
    }
}

void sampler_accept(sampler *s, int32_t id)
{
    window_push(s, id);
}

/* ---- the request ------------------------------------------------------------------- */

static bool penalties_on(const sampler_params *p)
{
    return p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

/* Each distinct window token once: its count is flagged while listed
 * (counts never reach 2^31) and the flags are cleared after. */
#define PENALTY_LISTED 0x80000000u

/* The request's settings and its penalty list (into ids / counts). */
static void prepare_into(sampler *s, sampler_request *rq, int32_t *ids, uint32_t *counts)
{
    const sampler_params *p = &s->p;
    memset(rq, 0, sizeof *rq);
    float inv_t = 1.0f / p->temp;
    /* NaN, 0 and negative temperatures, and those whose inverse overflows */
    rq->greedy = !(p->temp > 0.0f) || !isfinite(inv_t);
    rq->inv_temp = rq->greedy ? 1.0f : inv_t;
    rq->top_k = p->top_k > 0 && (uint32_t)p->top_k < s->n_vocab ? (uint32_t)p->top_k : 0;
    rq->top_p_on = p->top_p < 1.0f;
    double q = p->top_p > 0 ? (double)p->top_p * 4294967296.0 : 0;
    rq->top_p_q32 = rq->top_p_on ? (uint32_t)(q < 4294967295.0 ? q : 4294967295.0) : 0;
    rq->min_p_on = p->min_p > 0.0f;
    rq->log_min_p = rq->min_p_on ? logf(p->min_p) : 0.0f;
    rq->penalties_on = penalties_on(p);
    rq->rp = p->repeat_penalty;
    rq->inv_rp = 1.0f / p->repeat_penalty;
    rq->freq = p->frequency_penalty;
    rq->pres = p->presence_penalty;
    rq->pen_ids = ids;
    rq->pen_counts = counts;
    if (rq->penalties_on) {
        uint32_t n = 0;
        for (int i = 0; i < s->window_n; i++) {
            int32_t id = s->window[i];
            uint32_t c = s->count[id];
            if (c == 0 || (c & PENALTY_LISTED))
                continue;
            ids[n] = id;
            counts[n++] = c;
            s->count[id] = c | PENALTY_LISTED;
        }
        for (uint32_t i = 0; i < n; i++)
            s->count[ids[i]] &= ~PENALTY_LISTED;
        rq->n_pen = n;
    }
}

void sampler_prepare(sampler *s, sampler_request *rq)
{
    prepare_into(s, rq, s->pen_ids, s->pen_counts);
    if (!rq->greedy)
        rq->uniform = (uint32_t)(rng_next(s->rng) >> 32);
}

/* ---- requests of a speculative step ------------------------------------------------ */

uint32_t sampler_uniform(sampler *s)
{
    return (uint32_t)(rng_next(s->rng) >> 32);
}

void sampler_prepare_draft(sampler *s, sampler_request *rq)
{
    prepare_into(s, rq, s->pen_ids, s->pen_counts);
    rq->penalties_on = 0;
    rq->n_pen = 0;
    if (!rq->greedy)
        rq->uniform = sampler_uniform(s);
}

void sampler_prepare_ahead(sampler *s, const int32_t *extra, uint32_t n_extra, uint32_t slot, sampler_request *rq)
{
    int32_t out[SAMPLER_SPEC_SLOTS];
    if (slot >= SAMPLER_SPEC_SLOTS || n_extra > SAMPLER_SPEC_SLOTS) /* a caller's bug: a request without penalties */
        slot = 0, n_extra = 0;
    for (uint32_t i = 0; i < n_extra; i++)
        out[i] = window_push(s, extra[i]);
    prepare_into(s, rq, s->ahead_ids + (size_t)slot * SAMPLER_MAX_WINDOW,
                 s->ahead_counts + (size_t)slot * SAMPLER_MAX_WINDOW);
    for (uint32_t i = n_extra; i-- > 0;)
        window_pop(s, extra[i], out[i]);
    if (!rq->greedy)
        rq->uniform = sampler_uniform(s);
}

bool sampler_request_draws(const sampler_request *rq)
{
    return !rq->greedy && rq->inv_temp >= 0.0f && rq->inv_temp <= FLT_MAX;
}

/* ---- the weighted selection ---------------------------------------------------------- */

/* Sorts (ids, w)[0..n) by (key, id): an insertion sort for the few tokens
 * of a short list. */
static void sort_short(const uint32_t *key, int32_t *ids, uint32_t *w, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        int32_t id = ids[i];
        uint32_t wi = w[i], k = key[id], j = i;
        while (j > 0 && (key[ids[j - 1]] > k || (key[ids[j - 1]] == k && ids[j - 1] > id))) {
            ids[j] = ids[j - 1];
            w[j] = w[j - 1];
            j--;
        }
        ids[j] = id;
        w[j] = wi;
    }
}

/* The token of (ids, w)[0..n) (ids ascending) that comes first in the
 * order among those whose running weight sum, in the order, reaches
 * target (1 <= target <= the total).  Works in place on the arrays. */
static int32_t select_weighted(const uint32_t *key, int32_t *ids, uint32_t *w, uint32_t n, uint64_t target)
{
    static const int shift[3] = {21, 10, 0}, bits[3] = {11, 11, 10};
    for (int level = 0; level < 3 && n > SELECT_SMALL; level++) {
        uint64_t hist[2048] = {0};
        uint32_t mask = (1u << bits[level]) - 1;
        for (uint32_t i = 0; i < n; i++)
            hist[key[ids[i]] >> shift[level] & mask] += w[i];
        uint32_t d = 0;
        while (d < mask && hist[d] < target)
            target -= hist[d++];
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++)
            if ((key[ids[i]] >> shift[level] & mask) == d) {
                ids[m] = ids[i];
                w[m++] = w[i];
            }
        n = m;
        if (level == 2) {
            /* one key left: equal logits, equal weights (> 0: the bucket
             * reached the target), ids ascending */
            uint64_t j = (target + w[0] - 1) / w[0] - 1;
            return ids[j < n ? j : n - 1];
        }
    }
    sort_short(key, ids, w, n);
    uint64_t cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += w[i];
        if (cum >= target)
            return ids[i];
    }
    return n ? ids[n - 1] : -1; /* not reached: the target is at most the total */
}

/* The selection over the list s->list[0..n) with weights s->list_w,
 * leaving the list as it is. */
static int32_t select_in_list(sampler *s, uint32_t n, uint64_t target)
{
    memcpy(s->sel, s->list, n * sizeof *s->sel);
    memcpy(s->sel_w, s->list_w, n * sizeof *s->sel_w);
    return select_weighted(s->key, s->sel, s->sel_w, n, target);
}

/* The draw (step 9): the first of the list's tokens, in id order (the
 * list's), whose running weight reaches target (1 <= target <= the
 * total). */
static int32_t draw_in_list(const sampler *s, uint32_t n, uint64_t target)
{
    uint64_t cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += s->list_w[i];
        if (cum >= target)
            return s->list[i];
    }
    return n ? s->list[n - 1] : -1; /* not reached: the target is at most the total */
}

/* Keeps the list's tokens at or before (bkey, bid) in the order; with
 * w_total, their weights in s->list_w too, summed into *w_total. */
static uint32_t cut_list(sampler *s, uint32_t n, uint32_t bkey, int32_t bid, uint64_t *w_total)
{
    uint32_t m = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t id = s->list[i];
        uint32_t k = s->key[id];
        if (k < bkey || (k == bkey && id <= bid)) {
            if (w_total) {
                s->list_w[m] = s->list_w[i];
                total += s->list_w[i];
            }
            s->list[m++] = id;
        }
    }
    if (w_total)
        *w_total = total;
    return m;
}

static uint64_t list_weights(sampler *s, uint32_t n, const float *l, float max, float inv_t)
{
    return s->k.weights(l, s->list, n, max, inv_t, s->list_w);
}

/* ---- the chain ---------------------------------------------------------------------------- */

/* pen(canon(x)) of sampler.h. */
static float penalized(const sampler_request *rq, float x, uint32_t c)
{
    x = sk_canon(x);
    x = x > 0 ? x * rq->inv_rp : x * rq->rp;
    return x - (float)c * rq->freq - rq->pres;
}

/* Steps 1-8 of the definition: the penalties (in place), then false with
 * the one token in *only (greedy, or a best logit that is not finite), or
 * true with the kept tokens in s->list[0..*kept) (ids ascending) and the
 * best logit in *best.  *m_total: the sum of the kept tokens' top-p
 * weights m, which s->list_w then holds, or 0 when it holds nothing of
 * theirs (top-p off). */
static bool kept_tokens(sampler *s, const sampler_request *rq, float *l, uint32_t *kept, float *best, int32_t *only,
                        uint64_t *m_total)
{
    *m_total = 0;
    uint32_t n = s->n_vocab, first;
    if (rq->penalties_on)
        for (uint32_t i = 0; i < rq->n_pen; i++)
            if (rq->pen_ids[i] >= 0 && (uint32_t)rq->pen_ids[i] < n)
                l[rq->pen_ids[i]] = penalized(rq, l[rq->pen_ids[i]], rq->pen_counts[i]);
    if (!sampler_request_draws(rq)) {
        s->k.best(l, n, &first);
        *only = (int32_t)first;
        return false;
    }
    uint32_t kbest = s->k.keys(l, s->key, n, &first);
    float max = sk_key_value(kbest);
    if (!isfinite(max)) {
        *only = (int32_t)first;
        return false;
    }
    /* C: the first top_k tokens (a unit-weight selection over everything) */
    uint32_t ck = UINT32_MAX, cid = UINT32_MAX;
    if (rq->top_k > 0 && rq->top_k < n) {
        for (uint32_t i = 0; i < n; i++) {
            s->sel[i] = (int32_t)i;
            s->sel_w[i] = 1;
        }
        int32_t b = select_weighted(s->key, s->sel, s->sel_w, n, rq->top_k);
        ck = s->key[b];
        cid = (uint32_t)b;
    }
    /* the tokens C and min-p allow, in id order */
    uint32_t mk = rq->min_p_on ? sk_key(sk_canon(max + rq->log_min_p)) : UINT32_MAX;
    uint32_t m = s->k.collect(s->key, n, ck < mk ? ck : mk, s->list);
    if (ck <= mk)
        m = cut_list(s, m, ck, (int32_t)cid, NULL);
    if (m == 0) { /* min-p above 1: the first token alone */
        s->list[0] = (int32_t)first;
        m = 1;
    }
    /* top-p: the cut in C, when it falls among those tokens */
    if (rq->top_p_on) {
        uint64_t z = s->k.mass(l, s->key, n, ck, cid, max, 1.0f), t = sk_mulhi(z, rq->top_p_q32);
        t = t ? t : 1;
        uint64_t w = list_weights(s, m, l, max, 1.0f);
        if (w >= t) {
            int32_t cut = select_in_list(s, m, t);
            m = cut_list(s, m, s->key[cut], cut, &w);
        }
        *m_total = w; /* the kept tokens' weights m stay in s->list_w */
    }
    *kept = m;
    *best = max;
    return true;
}

/* The draw's weights r of the kept tokens into s->list_w, and their sum:
 * at temperature 1 (inv_t exactly 1) r is m, which kept_tokens left there
 * with top-p on (on flat logits that halves the exponentials of a draw: the
 * GLM preset's temperature is 1). */
static uint64_t draw_weights(sampler *s, const sampler_request *rq, uint32_t m, const float *l, float max,
                             uint64_t m_total)
{
    if (m_total && rq->inv_temp == 1.0f)
        return m_total;
    return list_weights(s, m, l, max, rq->inv_temp);
}

int32_t sampler_pick(sampler *s, const sampler_request *rq, float *l, float *prob)
{
    uint32_t m;
    float max;
    int32_t only;
    uint64_t m_total;
    if (prob)
        *prob = 1.0f;
    if (!kept_tokens(s, rq, l, &m, &max, &only, &m_total))
        return only;
    /* the draw */
    uint64_t total = draw_weights(s, rq, m, l, max, m_total);
    int32_t tok = draw_in_list(s, m, sk_mulhi(total, rq->uniform) + 1);
    if (prob)
        *prob = (float)((double)sk_weight(l[tok], max, rq->inv_temp) / (double)total);
    return tok;
}

int32_t sampler_probs_pick(sampler *s, const sampler_request *rq, float *l, uint32_t *P)
{
    uint32_t m;
    float max;
    int32_t only;
    uint64_t m_total;
    memset(P, 0, s->n_vocab * sizeof *P);
    if (!kept_tokens(s, rq, l, &m, &max, &only, &m_total)) {
        P[only] = SAMPLER_PROB_ONE;
        return only;
    }
    uint64_t total = draw_weights(s, rq, m, l, max, m_total); /* >= 2^31: the best token is kept */
    for (uint32_t i = 0; i < m; i++)
        P[s->list[i]] = (uint32_t)(((uint64_t)s->list_w[i] << 31) / total);
    /* sampler_pick's draw over the same list and weights */
    return draw_in_list(s, m, sk_mulhi(total, rq->uniform) + 1);
}

void sampler_probs(sampler *s, const sampler_request *rq, float *l, uint32_t *P)
{
    (void)sampler_probs_pick(s, rq, l, P);
}

int32_t sampler_sample(sampler *s, float *logits)
{
    sampler_request rq;
    sampler_prepare(s, &rq);
    return sampler_pick(s, &rq, logits, NULL);
}
