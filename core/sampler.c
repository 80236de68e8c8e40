/* sampler.c: token sampling.
 *
 * The chain, in llama.cpp's default order: penalties over the recent-token
 * window -> top-k -> top-p -> min-p (both on the untempered distribution)
 * -> temperature -> a draw from the seeded RNG (xoshiro256**).  Temperature
 * 0 is greedy (lowest id on ties).  Every buffer is sized at sampler_new,
 * so sampling allocates nothing.
 *
 * What the full-vocabulary path computes is defined by its first version
 * (kept as the oracle in tests/sampler_ref.h): min-p keeps a best-first
 * prefix, so it filters first; the top-p mass z is a sum of exponentials
 * in float blocks of 4096; the cut is found over 256 logit buckets and only
 * the bucket it falls in is sorted; the draw walks the survivors in the
 * order that leaves them in; top-k is a middle-pivot quickselect whose
 * output order the draw also walks.  The same seed must keep giving the
 * same tokens, so this version replays all of that exactly (same values,
 * same summation orders, same candidate order) and is fast by doing less
 * work to get there:
 *  - one vectorised pass finds the max and collects the min-p candidates;
 *  - z is summed in SIMD lanes, one lane per block, each lane adding its
 *    block's values in order, so every float rounding is the old one;
 *  - double sums that are provably exact (values within a known ratio, see
 *    exact_sum_ok) are summed in any order;
 *  - the quickselect is replayed with counting passes (see the top-k
 *    section) instead of moving 150k pairs. */
#include "sampler.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_kernels.h"

#define SEL_CHUNK 1024 /* top-k replay: logits per counted chunk */
#define SEL_SMALL 256  /* ranges this small are written out and finished directly */
#define SEL_RELOC 32   /* moved tokens tracked before writing out */

struct sampler {
    sampler_params p;
    uint32_t n_vocab;
    uint64_t rng[4];
    sk_kernels k;
    int simd;
    int32_t *idx;      /* (n_vocab + SK_SLACK) candidate ids */
    float *val;        /* (n_vocab + SK_SLACK) candidate logits, then weights */
    float *ex;         /* (n_vocab + SK_SLACK) exp(logit - max) of the candidates */
    int32_t *list_idx; /* (n_vocab + SK_SLACK) top-k replay scratch, with ex */
    uint8_t *bucket;   /* (n_vocab + SK_SLACK) top-p bucket of each candidate */
    int32_t *aux_idx;  /* (n_vocab + SK_SLACK) crossing-bucket candidates */
    float *aux_val;    /* (n_vocab + SK_SLACK) */
    float *pad;        /* (SK_MASS_BLOCK + SK_SLACK) scratch of the mass kernels */
    uint32_t *chunks;  /* 3 * (n_vocab / SEL_CHUNK + 1) top-k replay counts */
    uint32_t *count;   /* (n_vocab) occurrences in the penalty window */
    int32_t *window;   /* (window_cap) ring of recent tokens */
    int window_cap, window_n, window_pos;
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

static double rng_uniform(uint64_t s[4]) /* [0, 1) with 53 random bits */
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
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

static int set_window(sampler *s, int n)
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

sampler *sampler_new(const sampler_params *p, uint32_t n_vocab)
{
    if (n_vocab == 0 || n_vocab > INT32_MAX - SK_SLACK)
        return NULL;
    sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->n_vocab = n_vocab;
    s->p = *p;
    size_t cap = (size_t)n_vocab + SK_SLACK;
    s->idx = malloc(cap * sizeof *s->idx);
    s->val = malloc(cap * sizeof *s->val);
    s->ex = malloc(cap * sizeof *s->ex);
    s->list_idx = malloc(cap * sizeof *s->list_idx);
    s->bucket = malloc(cap * sizeof *s->bucket);
    s->aux_idx = malloc(cap * sizeof *s->aux_idx);
    s->aux_val = malloc(cap * sizeof *s->aux_val);
    s->pad = calloc(SK_MASS_BLOCK + SK_SLACK, sizeof *s->pad);
    s->chunks = malloc(3 * ((size_t)n_vocab / SEL_CHUNK + 1) * sizeof *s->chunks);
    s->count = calloc(n_vocab, sizeof *s->count);
    if (!s->idx || !s->val || !s->ex || !s->list_idx || !s->bucket || !s->aux_idx || !s->aux_val || !s->pad || !s->chunks ||
        !s->count || set_window(s, p->penalty_window) != 0) {
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
    free(s->idx);
    free(s->val);
    free(s->ex);
    free(s->list_idx);
    free(s->bucket);
    free(s->aux_idx);
    free(s->aux_val);
    free(s->pad);
    free(s->chunks);
    free(s->count);
    free(s->window);
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

void sampler_accept(sampler *s, int32_t id)
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

/* ---- penalties ---------------------------------------------------------------------- */

static bool penalties_on(const sampler_params *p)
{
    return p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

/* llama.cpp's rule: a seen token's logit is divided by the repeat penalty
 * when positive (multiplied when negative), then lowered by
 * count * frequency + presence. */
static float penalized(const sampler_params *p, float l, uint32_t c)
{
    if (l > 0)
        l /= p->repeat_penalty;
    else
        l *= p->repeat_penalty;
    return l - (float)c * p->frequency_penalty - p->presence_penalty;
}

/* Only the window's tokens are touched: O(window), not O(vocabulary).
 * Each distinct token once: its count is flagged when done (counts never
 * reach 2^31) and the flags are cleared after. */
#define PENALTY_DONE 0x80000000u

static void apply_penalties(sampler *s, float *logits)
{
    if (!penalties_on(&s->p))
        return;
    for (int i = 0; i < s->window_n; i++) {
        int32_t id = s->window[i];
        uint32_t c = s->count[id];
        if (c == 0 || (c & PENALTY_DONE))
            continue;
        logits[id] = penalized(&s->p, logits[id], c);
        s->count[id] = c | PENALTY_DONE;
    }
    for (int i = 0; i < s->window_n; i++)
        s->count[s->window[i]] &= ~PENALTY_DONE;
}

/* ---- ordering ------------------------------------------------------------------------ */

/* The candidates' order: higher logit first, lower id on ties.  With
 * distinct ids this is a total order (NaN aside), so every correct sort
 * gives the same sequence. */
static inline bool better(float la, int32_t ia, float lb, int32_t ib)
{
    return la > lb || (la == lb && ia < ib);
}

static inline void swap_at(int32_t *idx, float *val, uint32_t a, uint32_t b)
{
    float tv = val[a];
    int32_t ti = idx[a];
    val[a] = val[b];
    idx[a] = idx[b];
    val[b] = tv;
    idx[b] = ti;
}

/* Sorts (idx, val)[0..n) best first: a shell sort, in place and without
 * allocation, for the few candidates of the top-K entry point. */
static void sort_desc(int32_t *idx, float *val, uint32_t n)
{
    static const uint32_t gaps[] = {1750, 701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        uint32_t gap = gaps[g];
        for (uint32_t i = gap; i < n; i++) {
            float v = val[i];
            int32_t id = idx[i];
            uint32_t j = i;
            while (j >= gap && better(v, id, val[j - gap], idx[j - gap])) {
                val[j] = val[j - gap];
                idx[j] = idx[j - gap];
                j -= gap;
            }
            val[j] = v;
            idx[j] = id;
        }
    }
}

/* Sorts (idx, val)[0..n) best first in O(n log n): insertion-sorted runs
 * of 16, then merges between the arrays and (tidx, tval) (n entries). */
static void sort_best_first(int32_t *idx, float *val, uint32_t n, int32_t *tidx, float *tval)
{
    enum { RUN = 16 };
    for (uint32_t r = 0; r < n; r += RUN) {
        uint32_t e = n - r < RUN ? n : r + RUN;
        for (uint32_t i = r + 1; i < e; i++)
            for (uint32_t j = i; j > r && better(val[j], idx[j], val[j - 1], idx[j - 1]); j--)
                swap_at(idx, val, j, j - 1);
    }
    int32_t *si = idx, *di = tidx;
    float *sv = val, *dv = tval;
    for (uint32_t w = RUN; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = n - lo < w ? n : lo + w, hi = n - lo < 2 * w ? n : lo + 2 * w;
            uint32_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) {
                bool take_b = better(sv[b], si[b], sv[a], si[a]);
                uint32_t from = take_b ? b++ : a++;
                di[o] = si[from];
                dv[o++] = sv[from];
            }
            for (; a < mid; a++, o++) {
                di[o] = si[a];
                dv[o] = sv[a];
            }
            for (; b < hi; b++, o++) {
                di[o] = si[b];
                dv[o] = sv[b];
            }
        }
        int32_t *ti = si;
        float *tv = sv;
        si = di;
        sv = dv;
        di = ti;
        dv = tv;
    }
    if (si != idx) {
        memcpy(idx, si, n * sizeof *idx);
        memcpy(val, sv, n * sizeof *val);
    }
}

/* Sorts (idx, val)[0..n) best first when the ids ascend on entry: a
 * stable radix sort on the value (3 passes of 11 bits, skipping passes
 * where every value has the same digit), so equal values keep ascending
 * ids, the order `better` asks for.  O(n) where a comparison sort of a
 * huge top-p bucket (near-equal logits) takes milliseconds.  Needs
 * (tidx, tval) of n entries. */
static void radix_best_first(int32_t *idx, float *val, uint32_t n, int32_t *tidx, float *tval)
{
    enum { BITS = 11, DIGITS = 1 << BITS, PASSES = 3 };
    static_assert(BITS * PASSES >= 32, "the passes cover the key");
    uint32_t count[PASSES][DIGITS];
    memset(count, 0, sizeof count);
    for (uint32_t i = 0; i < n; i++) { /* key: ascending key, descending value */
        float v = val[i] + 0.0f;      /* -0 and +0 are one value */
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        u = ~(u & 0x80000000u ? ~u : u ^ 0x80000000u);
        for (int p = 0; p < PASSES; p++)
            count[p][(u >> (p * BITS)) & (DIGITS - 1)]++;
    }
    int32_t *si = idx, *di = tidx;
    float *sv = val, *dv = tval;
    for (int p = 0; p < PASSES; p++) {
        uint32_t sum = 0, *c = count[p];
        bool one_digit = false;
        for (uint32_t d = 0; d < DIGITS; d++) {
            one_digit = one_digit || c[d] == n;
            uint32_t t = c[d];
            c[d] = sum;
            sum += t;
        }
        if (one_digit)
            continue;
        for (uint32_t i = 0; i < n; i++) {
            float v = sv[i] + 0.0f;
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            u = ~(u & 0x80000000u ? ~u : u ^ 0x80000000u);
            uint32_t at = c[(u >> (p * BITS)) & (DIGITS - 1)]++;
            di[at] = si[i];
            dv[at] = sv[i];
        }
        int32_t *ti = si;
        float *tv = sv;
        si = di;
        sv = dv;
        di = ti;
        dv = tv;
    }
    if (si != idx) {
        memcpy(idx, si, n * sizeof *idx);
        memcpy(val, sv, n * sizeof *val);
    }
}

/* ---- top-k: the quickselect, replayed -------------------------------------------------
 *
 * The first version moved the k best to the front of a copy of the whole
 * vocabulary with this loop (a Lomuto quickselect, middle pivot), and the
 * draw walks them in the order it leaves them. */
static void select_top(int32_t *idx, float *val, uint32_t lo, uint32_t hi, uint32_t k)
{
    while (hi - lo > 1) {
        swap_at(idx, val, lo + (hi - lo) / 2, hi - 1);
        uint32_t store = lo;
        for (uint32_t i = lo; i < hi - 1; i++)
            if (better(val[i], idx[i], val[hi - 1], idx[hi - 1]))
                swap_at(idx, val, i, store++);
        swap_at(idx, val, store, hi - 1);
        /* [lo, store) beat the pivot now at store; the rest do not */
        if (store == k || store + 1 == k)
            return;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
}

/* Every round of that loop that recurses left keeps lo = 0 and leaves as
 * its range the tokens that beat its pivot, in the order of the scan; the
 * scan order is the range's order with the range's last token moved into
 * the pivot's slot.  So while it recurses left the range is "every token
 * better than the last pivot, by position", where a token's position is
 * its place in a base sequence unless it was moved into a pivot's slot:
 * few tokens, kept in a small table.  The replay counts (vectorised, per
 * chunk of positions) instead of moving pairs.  The base sequence starts as
 * the logits in id order; whenever the range is down to a quarter of the
 * base, it is written out (into one of two lists, in turn) and becomes the
 * base of the next rounds.  When the range is small, or the loop would turn
 * right, it is written out and the loop above finishes the job from there. */
typedef struct {
    const float *l;      /* (n) base values */
    const int32_t *ids;  /* (n) base ids; NULL: the positions */
    uint32_t n, nch;
    const sk_kernels *k;
    uint32_t *raw;   /* (nch) members by base place, per chunk */
    uint32_t *pos;   /* (nch) members by position, per chunk */
    uint32_t *next;  /* (nch) scratch for the next round's raw */
    bool bounded;    /* members: better than (bv, bid); else the whole base */
    float bv;
    int32_t bid;
    int nrel;
    uint32_t rel_from[SEL_RELOC]; /* the tokens at these base places sit ... */
    uint32_t rel_pos[SEL_RELOC];  /* ... at these positions */
} replay;

static inline int32_t id_at(const replay *r, uint32_t i)
{
    return r->ids ? r->ids[i] : (int32_t)i;
}

static inline bool member(const replay *r, uint32_t i)
{
    return !r->bounded || better(r->l[i], id_at(r, i), r->bv, r->bid);
}

static uint32_t chunk_end(const replay *r, uint32_t q)
{
    return r->n - q * SEL_CHUNK < SEL_CHUNK ? r->n : (q + 1) * SEL_CHUNK;
}

static int rel_find(const replay *r, uint32_t from)
{
    for (int e = 0; e < r->nrel; e++)
        if (r->rel_from[e] == from)
            return e;
    return -1;
}

static uint32_t position_of(const replay *r, uint32_t i)
{
    int e = rel_find(r, i);
    return e >= 0 ? r->rel_pos[e] : i;
}

static bool chunk_touched(const replay *r, uint32_t q)
{
    for (int e = 0; e < r->nrel; e++)
        if (r->rel_from[e] / SEL_CHUNK == q || r->rel_pos[e] / SEL_CHUNK == q)
            return true;
    return false;
}

/* The base place of the member at position j, or -1. */
static int64_t occupant(const replay *r, uint32_t j)
{
    bool moved_away = false;
    for (int e = 0; e < r->nrel; e++) {
        if (r->rel_pos[e] == j && member(r, r->rel_from[e]))
            return r->rel_from[e];
        moved_away = moved_away || r->rel_from[e] == j;
    }
    return !moved_away && member(r, j) ? (int64_t)j : -1;
}

/* The base place of the member with `rank` members before it. */
static uint32_t at_rank(const replay *r, uint32_t rank)
{
    if (!r->bounded && r->nrel == 0) /* a fresh base: every place, in order */
        return rank;
    uint32_t q = 0;
    while (q + 1 < r->nch && rank >= r->pos[q])
        rank -= r->pos[q++];
    uint32_t j = q * SEL_CHUNK, e = chunk_end(r, q);
    bool touched = chunk_touched(r, q);
    if (!touched && r->bounded) /* skip ahead 64 at a time, counting members */
        for (uint32_t c; e - j > 64 && rank >= (c = r->k->count_better(r->l, r->ids, j, j + 64, r->bv, r->bid));
             j += 64)
            rank -= c;
    for (; j < e; j++) {
        int64_t o = touched ? occupant(r, j) : member(r, j) ? (int64_t)j : -1;
        if (o >= 0 && rank-- == 0)
            return (uint32_t)o;
    }
    return 0; /* not reached: the counts say the member exists */
}

/* pos[] from raw[] and the moved members. */
static void count_positions(replay *r)
{
    memcpy(r->pos, r->raw, r->nch * sizeof *r->pos);
    for (int e = 0; e < r->nrel; e++) {
        r->pos[r->rel_from[e] / SEL_CHUNK]--;
        r->pos[r->rel_pos[e] / SEL_CHUNK]++;
    }
}

/* Writes the members out in position order (ids and values); returns how
 * many. */
static uint32_t write_range(const replay *r, int32_t *idx, float *val)
{
    uint32_t c = 0;
    for (uint32_t q = 0; q < r->nch; q++) {
        if (r->pos[q] == 0)
            continue;
        uint32_t a = q * SEL_CHUNK, e = chunk_end(r, q);
        if (!r->bounded && !chunk_touched(r, q)) {
            for (uint32_t j = a; j < e; j++, c++) {
                idx[c] = id_at(r, j);
                val[c] = r->l[j];
            }
        } else if (!chunk_touched(r, q)) {
            c += r->k->collect_better(r->l, r->ids, a, e, r->bv, r->bid, idx + c, val + c);
        } else {
            for (uint32_t j = a; j < e; j++) {
                int64_t o = occupant(r, j);
                if (o >= 0) {
                    idx[c] = id_at(r, (uint32_t)o);
                    val[c++] = r->l[o];
                }
            }
        }
    }
    return c;
}

/* Makes the base (l, ids)[0..n), every entry a member. */
static void set_base(replay *r, const float *l, const int32_t *ids, uint32_t n)
{
    r->l = l;
    r->ids = ids;
    r->n = n;
    r->nch = (n + SEL_CHUNK - 1) / SEL_CHUNK;
    r->bounded = false;
    r->nrel = 0;
    for (uint32_t q = 0; q < r->nch; q++)
        r->raw[q] = chunk_end(r, q) - q * SEL_CHUNK;
    count_positions(r);
}

/* Makes the pivot at base place p the bound: the last member (place last)
 * takes p's position, p leaves, moved tokens no longer members are
 * forgotten; raw[] becomes next[]. */
static void narrow(replay *r, uint32_t p, uint32_t last)
{
    if (last != p) {
        uint32_t slot = position_of(r, p);
        int e = rel_find(r, last);
        if (e < 0) {
            e = r->nrel++;
            r->rel_from[e] = last;
        }
        r->rel_pos[e] = slot;
    }
    r->bounded = true;
    r->bv = r->l[p];
    r->bid = id_at(r, p);
    int kept = 0;
    for (int e = 0; e < r->nrel; e++)
        if (member(r, r->rel_from[e])) {
            r->rel_from[kept] = r->rel_from[e];
            r->rel_pos[kept++] = r->rel_pos[e];
        }
    r->nrel = kept;
    uint32_t *t = r->raw;
    r->raw = r->next;
    r->next = t;
    count_positions(r);
}

/* Leaves in (idx, val)[0..k) what select_top over the identity order of
 * logits[0..n) leaves there, in the same order. */
static void select_top_replay(sampler *s, const float *logits, uint32_t n, uint32_t k)
{
    uint32_t nch = (n + SEL_CHUNK - 1) / SEL_CHUNK;
    replay r = {.k = &s->k, .raw = s->chunks, .pos = s->chunks + nch, .next = s->chunks + 2 * nch};
    set_base(&r, logits, NULL, n);
    uint32_t c = n; /* members */
    int lists = 0;
    while (c > SEL_SMALL && r.nrel < SEL_RELOC) {
        if (c <= r.n / 4) { /* fewer to count from here on: two lists in turn */
            int32_t *ids = lists % 2 ? s->aux_idx : s->list_idx;
            float *vals = lists % 2 ? s->aux_val : s->ex;
            write_range(&r, ids, vals);
            set_base(&r, vals, ids, c);
            lists++;
        }
        uint32_t p = at_rank(&r, c / 2), last = at_rank(&r, c - 1);
        float pv = r.l[p];
        int32_t pid = id_at(&r, p);
        uint32_t store = 0;
        for (uint32_t q = 0; q < r.nch; q++) { /* the pivot's betters are all members */
            r.next[q] = r.raw[q] ? s->k.count_better(r.l, r.ids, q * SEL_CHUNK, chunk_end(&r, q), pv, pid) : 0;
            store += r.next[q];
        }
        if (store == k || store + 1 == k) { /* done: the betters, then the pivot */
            narrow(&r, p, last);
            write_range(&r, s->idx, s->val);
            s->idx[store] = pid;
            s->val[store] = pv;
            return;
        }
        if (store < k) /* the loop turns right here: let it take this round */
            break;
        narrow(&r, p, last);
        c = store;
    }
    c = write_range(&r, s->idx, s->val);
    select_top(s->idx, s->val, 0, c, k);
}

/* ---- top-p and the draw ------------------------------------------------------------------- */

/* True when every partial sum, in double, of n floats in [lo, hi] (lo > 0)
 * is exact, so that any summation order gives the same bits: all of them
 * are multiples of the unit in the last place of lo, and below 2^53 such
 * units when n * hi < 2^29 * lo (2^28 here, for margin). */
static bool exact_sum_ok(double n, double lo, double hi)
{
    return lo > 0 && n * hi < 0x1p28 * lo;
}

/* Per-bucket sums of ex[i] into mass[bucket[i]] in index order.  When the
 * sums are exact (ratio: a bound on max/min of the values in one bucket)
 * they are gathered in four interleaved banks instead, which avoids
 * chains of dependent updates and gives the same bits. */
static void bucket_masses(const uint8_t *bucket, const float *ex, uint32_t n, double ratio, double *mass)
{
    memset(mass, 0, SK_BUCKETS * sizeof *mass);
    if (!exact_sum_ok(n, 1.0, ratio)) {
        for (uint32_t i = 0; i < n; i++)
            mass[bucket[i]] += ex[i];
        return;
    }
    double bank[4][SK_BUCKETS];
    memset(bank, 0, sizeof bank);
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        bank[0][bucket[i]] += ex[i];
        bank[1][bucket[i + 1]] += ex[i + 1];
        bank[2][bucket[i + 2]] += ex[i + 2];
        bank[3][bucket[i + 3]] += ex[i + 3];
    }
    for (; i < n; i++)
        bank[0][bucket[i]] += ex[i];
    for (int b = 0; b < SK_BUCKETS; b++)
        mass[b] = (bank[0][b] + bank[1][b]) + (bank[2][b] + bank[3][b]);
}

/* top-p on unsorted candidates: keeps the smallest best-first prefix whose
 * mass reaches `target` (in units of exp(l - max)).  The candidates in
 * buckets better than the one the cut falls in stay in their order; those
 * of that bucket follow, sorted, up to the cut.  Returns the count kept.
 * ids_ascend: the candidates come in id order. */
static uint32_t cut_top_p(sampler *s, uint32_t n, float max, double target, bool ids_ascend)
{
    int32_t *idx = s->idx;
    float *val = s->val;
    float lo = s->k.min(val, n, max), elo, ehi;
    float span = max - lo, scale = span > 0 ? (SK_BUCKETS - 1) / span : 0;
    s->k.buckets(val, s->bucket, n, max, scale);
    s->k.exps(val, s->ex, n, max, 1.0f, &elo, &ehi);
    /* values of one bucket lie within a logit width of span / 255 (or of
     * the whole span, when the scale overflows), up to the rounding of the
     * bucket index and of the argument and result of exp */
    double ratio = exp(1.01 * span / (SK_BUCKETS - 1) + 1e-6 * (span + 1.0)) * 1.00001;
    double mass[SK_BUCKETS], cum = 0;
    bucket_masses(s->bucket, s->ex, n, ratio, mass);
    int cross = -1;
    for (int b = 0; b < SK_BUCKETS && cross < 0; b++) {
        if (cum + mass[b] >= target)
            cross = b;
        else
            cum += mass[b];
    }
    if (cross < 0)
        return n; /* the candidates hold less than top-p: keep them all */
    uint32_t c, kept = s->k.split(idx, val, s->bucket, n, cross, s->aux_idx, s->aux_val, &c);
    if (ids_ascend && c > 64)
        radix_best_first(s->aux_idx, s->aux_val, c, idx + kept, val + kept);
    else
        sort_best_first(s->aux_idx, s->aux_val, c, idx + kept, val + kept);
    s->k.exps(s->aux_val, s->ex, c, max, 1.0f, &elo, &ehi); /* ex[] is free again */
    for (uint32_t i = 0; i < c; i++) {
        cum += s->ex[i];
        idx[kept] = s->aux_idx[i];
        val[kept++] = s->aux_val[i];
        if (cum >= target)
            break;
    }
    return kept;
}

/* The draw from softmax(val / temp) over (idx, val)[0..n): one uniform,
 * scaled by the total weight, against the running sum in array order. */
static int32_t draw(sampler *s, uint32_t n, float max)
{
    float *w = s->val, lo, hi;
    s->k.exps(w, w, n, max, 1.0f / s->p.temp, &lo, &hi);
    bool exact = exact_sum_ok(n, lo, hi);
    double sum = 0;
    if (exact) { /* any order: four independent sums */
        double a[4] = {0, 0, 0, 0};
        uint32_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; j++)
                a[j] += w[i + j];
        for (; i < n; i++)
            a[0] += w[i];
        sum = (a[0] + a[1]) + (a[2] + a[3]);
    } else {
        for (uint32_t i = 0; i < n; i++)
            sum += w[i];
    }
    double u = rng_uniform(s->rng) * sum, cum = 0;
    uint32_t i = 0;
    if (exact) { /* running sums are exact too: skip whole blocks */
        for (; i + 64 <= n; i += 64) {
            double b[4] = {0, 0, 0, 0};
            for (uint32_t j = 0; j < 64; j += 4)
                for (int t = 0; t < 4; t++)
                    b[t] += w[i + j + t];
            double block = (b[0] + b[1]) + (b[2] + b[3]);
            if (u < cum + block)
                break;
            cum += block;
        }
    }
    for (; i < n; i++) {
        cum += w[i];
        if (u < cum)
            return s->idx[i];
    }
    return s->idx[n - 1];
}

/* ---- the top-K entry point ------------------------------------------------------------ */

/* Keeps the smallest best-first prefix whose probability mass reaches
 * top_p; probabilities are exp(l - log_z).  Needs (idx, val) sorted. */
static uint32_t cut_top_p_sorted(const float *val, uint32_t n, float top_p, double log_z)
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
static uint32_t cut_min_p(int32_t *idx, float *val, uint32_t n, float min_p)
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

/* Draws from softmax(val / temp) over the kept candidates (exact exp: the
 * candidates are few). */
static int32_t draw_sorted(sampler *s, const int32_t *idx, float *val, uint32_t n)
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
    double u = rng_uniform(s->rng) * sum, cum = 0;
    for (uint32_t i = 0; i < n; i++) {
        cum += val[i];
        if (u < cum)
            return idx[i];
    }
    return idx[n - 1];
}

static double logsumexp(const float *val, uint32_t n)
{
    double m = val[0], z = 0;
    for (uint32_t i = 0; i < n; i++)
        z += exp((double)val[i] - m);
    return m + log(z);
}

/* top-k, top-p, min-p, temperature and the draw over sorted candidates;
 * log_z: logsumexp of the whole distribution. */
static int32_t sample_sorted(sampler *s, uint32_t n, double log_z)
{
    const sampler_params *p = &s->p;
    if (p->top_k > 0 && (uint32_t)p->top_k < n) {
        n = (uint32_t)p->top_k;
        log_z = logsumexp(s->val, n); /* top-p weighs the k best only, as sampler_sample does */
    }
    if (p->top_p < 1.0f)
        n = cut_top_p_sorted(s->val, n, p->top_p, log_z);
    n = cut_min_p(s->idx, s->val, n, p->min_p);
    return draw_sorted(s, s->idx, s->val, n);
}

/* ---- entry points ------------------------------------------------------------------------ */

int32_t sampler_sample(sampler *s, float *logits)
{
    const sampler_params *p = &s->p;
    apply_penalties(s, logits);
    uint32_t n = s->n_vocab, m = 0;
    if (p->temp <= 0.0f)
        return (int32_t)s->k.argmax(logits, n);
    bool top_k = p->top_k > 0 && (uint32_t)p->top_k < n, min_p = p->min_p > 0;
    float lmp = min_p ? logf(p->min_p) : -FLT_MAX;
    /* min-p keeps a best-first prefix, as top-p does: filtering first keeps
     * the same tokens and leaves fewer to weigh.  -inf (masked) and NaN
     * logits never qualify. */
    int mode = top_k ? SK_MAX_ONLY : min_p ? SK_NEAR_MAX : SK_AT_LEAST;
    float max = s->k.scan(logits, n, mode, lmp, s->idx, s->val, &m);
    if (!isfinite(max)) /* every logit masked (or +inf): the greedy answer */
        return (int32_t)s->k.argmax(logits, n);
    float floor_l = min_p ? max + lmp : -FLT_MAX;
    double z = 0;
    if (top_k) { /* top-p then weighs the k best only, as in llama.cpp */
        select_top_replay(s, logits, n, (uint32_t)p->top_k);
        m = (uint32_t)p->top_k;
        if (p->top_p < 1.0f)
            z = s->k.mass(s->val, m, max, s->pad);
        uint32_t k = 0;
        for (uint32_t i = 0; i < m; i++)
            if (s->val[i] >= floor_l)
                swap_at(s->idx, s->val, i, k++);
        m = k;
    } else {
        if (p->top_p < 1.0f)
            z = s->k.mass(logits, n, max, s->pad);
        if (min_p) { /* the scan's list is a superset */
            uint32_t k = 0;
            for (uint32_t i = 0; i < m; i++) { /* stores always, advances when kept */
                float v = s->val[i];
                s->idx[k] = s->idx[i];
                s->val[k] = v;
                k += v >= floor_l;
            }
            m = k;
        }
    }
    if (m == 0) /* every logit masked: nothing better than the greedy answer */
        return (int32_t)s->k.argmax(logits, n);
    if (p->top_p < 1.0f)
        m = cut_top_p(s, m, max, z * p->top_p, !top_k);
    return draw(s, m, max);
}

int32_t sampler_sample_topk(sampler *s, const int32_t *ids, const float *logits, uint32_t k, float log_z)
{
    if (k == 0)
        return -1;
    if (k > s->n_vocab)
        k = s->n_vocab;
    bool pen = penalties_on(&s->p);
    double z = exp((double)log_z - logits[0]), moved = 0, now = 0;
    for (uint32_t i = 0; i < k; i++) {
        s->idx[i] = ids[i];
        float l = logits[i];
        /* Penalties reach only the candidates the GPU returned. */
        if (pen && ids[i] >= 0 && (uint32_t)ids[i] < s->n_vocab && s->count[ids[i]]) {
            moved += exp((double)l - logits[0]);
            l = penalized(&s->p, l, s->count[ids[i]]);
            now += exp((double)l - logits[0]);
        }
        s->val[i] = l;
    }
    if (pen) { /* the order and the total mass may have changed */
        sort_desc(s->idx, s->val, k);
        if (isfinite(logits[0]) && isfinite(log_z))
            log_z = (float)(logits[0] + log(fmax(z - moved, 0) + now));
    }
    if (s->p.temp <= 0.0f) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < k; i++)
            if (better(s->val[i], s->idx[i], s->val[best], s->idx[best]))
                best = i;
        return s->idx[best];
    }
    return sample_sorted(s, k, (double)log_z);
}
