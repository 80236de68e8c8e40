/* test_sampler.c: the sampler's filters, determinism and distribution,
 * and its agreement with the plain statement of its definition.
 *
 * Distribution checks draw many samples with a fixed seed and compare the
 * counts with the expected probabilities by Pearson's chi-square; with a
 * fixed seed the statistic is one fixed number, so the test cannot flake,
 * and the bound (the 0.1% critical value) still catches a wrong
 * distribution, which moves the statistic by orders of magnitude.
 *
 * The oracle (sampler_ref.h) is the definition of core/sample/sampler.h written
 * out with a full sort; the sampler must pick exactly the same token for
 * the same seed, on every vector level the CPU has, so those comparisons
 * demand equality, not closeness.  (The GPU kernels are held to the same
 * sampler in test_vk_sampler.c.) */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "sample/sampler.h"
#include "sample/sampler_kernels.h"
#include "sampler_ref.h"
#include "logit_rng.h"
#include "testlib.h"

static sampler_params plain(void)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1234;
    return p;
}

/* chi-square of counts against softmax(logits / temp) over n tokens */
static double chi_square(const int *counts, const float *logits, int n, float temp, int draws)
{
    double m = -INFINITY, z = 0, chi = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, logits[i]);
    for (int i = 0; i < n; i++)
        z += exp((logits[i] - m) / temp);
    for (int i = 0; i < n; i++) {
        double e = draws * exp((logits[i] - m) / temp) / z;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi;
}

static void test_greedy_ties_lowest_id(void)
{
    sampler_params p = plain();
    p.temp = 0.0f;
    sampler *s = sampler_new(&p, 8);
    float l[8] = {0.1f, 2.0f, -1.0f, 3.5f, 0.0f, 3.5f, 1.0f, 3.5f};
    CHECK(sampler_sample(s, l) == 3, "greedy should pick id 3 (first of the tied maxima)");
    float n[8] = {NAN, 2.0f, NAN, -1.0f, 2.0f, 0.0f, 1.0f, 1.5f};
    CHECK(sampler_sample(s, n) == 1, "NaN counts as -inf: greedy should pick id 1");
    sampler_free(s);
}

static void test_distribution_chi_square(void)
{
    enum { N = 8, DRAWS = 200000 };
    const float temps[] = {1.0f, 0.5f, 2.0f};
    float logits[N] = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -1.0f, 0.7f};
    for (int t = 0; t < 3; t++) {
        sampler_params p = plain();
        p.temp = temps[t];
        sampler *s = sampler_new(&p, N);
        int counts[N] = {0};
        for (int i = 0; i < DRAWS; i++) {
            float l[N];
            memcpy(l, logits, sizeof l);
            int32_t id = sampler_sample(s, l);
            CHECK(id >= 0 && id < N, "id %d out of range", id);
            if (id >= 0 && id < N)
                counts[id]++;
        }
        double chi = chi_square(counts, logits, N, temps[t], DRAWS);
        /* 7 degrees of freedom: P(chi2 > 24.32) = 0.001 */
        CHECK(chi < 24.32, "temp %.1f: chi-square %.2f exceeds 24.32", temps[t], chi);
        sampler_free(s);
    }
}

static void test_same_seed_same_tokens(void)
{
    enum { V = 1000, STEPS = 200 };
    float *base = malloc(V * sizeof *base), *l = malloc(V * sizeof *l);
    uint32_t x = 99;
    for (int i = 0; i < V; i++) {
        x = x * 1664525u + 1013904223u;
        base[i] = (float)(x >> 8) / (float)(1 << 24) * 4.0f;
    }
    int32_t a[STEPS], b[STEPS], c[STEPS];
    sampler_params p = plain();
    p.top_p = 0.9f;
    for (int run = 0; run < 3; run++) {
        p.seed = run < 2 ? 42 : 43;
        sampler *s = sampler_new(&p, V);
        for (int i = 0; i < STEPS; i++) {
            memcpy(l, base, V * sizeof *l);
            int32_t id = sampler_sample(s, l);
            (run == 0 ? a : run == 1 ? b : c)[i] = id;
        }
        sampler_free(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed gave different tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "a different seed gave the same 200 tokens");
    /* reset replays the same stream */
    p.seed = 42;
    sampler *s = sampler_new(&p, V);
    for (int i = 0; i < 10; i++) {
        memcpy(l, base, V * sizeof *l);
        sampler_sample(s, l);
    }
    sampler_reset(s);
    memcpy(l, base, V * sizeof *l);
    CHECK(sampler_sample(s, l) == a[0], "reset did not restart the RNG");
    sampler_free(s);
    free(base);
    free(l);
}

/* Draws many tokens and records which ids ever appear. */
static void seen_ids(const sampler_params *p, const float *logits, int n, int draws, int *seen)
{
    sampler *s = sampler_new(p, (uint32_t)n);
    float *l = malloc((size_t)n * sizeof *l);
    for (int i = 0; i < draws; i++) {
        memcpy(l, logits, (size_t)n * sizeof *l);
        int32_t id = sampler_sample(s, l);
        if (id >= 0 && id < n)
            seen[id]++;
    }
    free(l);
    sampler_free(s);
}

static void test_filters(void)
{
    /* probabilities 0.5, 0.3, 0.15, 0.05 */
    float l[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    int seen[4];
    sampler_params p = plain();

    p.top_k = 2;
    memset(seen, 0, sizeof seen);
    seen_ids(&p, l, 4, 4000, seen);
    CHECK(seen[0] && seen[1] && !seen[2] && !seen[3], "top-k 2 drew %d %d %d %d", seen[0], seen[1], seen[2], seen[3]);

    p = plain();
    p.top_p = 0.79f; /* 0.5 + 0.3 reaches it: two tokens */
    memset(seen, 0, sizeof seen);
    seen_ids(&p, l, 4, 4000, seen);
    CHECK(seen[0] && seen[1] && !seen[2] && !seen[3], "top-p 0.79 drew %d %d %d %d", seen[0], seen[1], seen[2], seen[3]);
    p.top_p = 0.81f; /* needs the third */
    memset(seen, 0, sizeof seen);
    seen_ids(&p, l, 4, 4000, seen);
    CHECK(seen[2] && !seen[3], "top-p 0.81 drew %d %d %d %d", seen[0], seen[1], seen[2], seen[3]);

    p = plain();
    p.min_p = 0.2f; /* keeps p >= 0.1 */
    memset(seen, 0, sizeof seen);
    seen_ids(&p, l, 4, 4000, seen);
    CHECK(seen[0] && seen[1] && seen[2] && !seen[3], "min-p 0.2 drew %d %d %d %d", seen[0], seen[1], seen[2], seen[3]);

    /* top-k 2 keeps the 0.5 : 0.3 ratio among the survivors */
    p = plain();
    p.top_k = 2;
    memset(seen, 0, sizeof seen);
    seen_ids(&p, l, 4, 80000, seen);
    int c2[2] = {seen[0], seen[1]};
    double chi = chi_square(c2, l, 2, 1.0f, seen[0] + seen[1]);
    CHECK(chi < 10.83, "top-k renormalisation chi-square %.2f (1 dof, 0.1%% = 10.83)", chi);
}

static void test_penalties(void)
{
    sampler_params p = plain();
    p.temp = 0.0f;
    p.repeat_penalty = 2.0f;
    p.penalty_window = 2;
    sampler *s = sampler_new(&p, 4);
    /* token 0 leads by a little; once seen its logit 3 becomes 1.5 */
    float l[4] = {3.0f, 2.0f, -1.0f, 0.0f};
    CHECK(sampler_sample(s, l) == 0, "before any penalty, 0 should win");
    sampler_accept(s, 0);
    float l2[4] = {3.0f, 2.0f, -1.0f, 0.0f};
    CHECK(sampler_sample(s, l2) == 1, "repeat penalty should make 1 win");
    CHECK_NEAR(l2[0], 1.5f, 1e-6);
    float l3[4] = {3.0f, 2.0f, -1.0f, 0.0f};
    sampler_accept(s, 0);
    sampler_sample(s, l3); /* counted twice, but the repeat penalty applies once */
    CHECK_NEAR(l3[0], 1.5f, 1e-6);
    /* the window forgets: two other tokens push 0 out */
    sampler_accept(s, 2);
    sampler_accept(s, 3);
    float l4[4] = {3.0f, 2.0f, -1.0f, 0.0f};
    CHECK(sampler_sample(s, l4) == 0, "token 0 left the window and should win again");
    CHECK_NEAR(l4[2], -2.0f, 1e-6); /* negative logits are multiplied */
    sampler_free(s);

    p = plain();
    p.temp = 0.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    s = sampler_new(&p, 3);
    sampler_accept(s, 1);
    sampler_accept(s, 1);
    float l5[3] = {1.0f, 1.9f, 0.0f};
    CHECK(sampler_sample(s, l5) == 0, "presence + frequency penalties should demote 1");
    CHECK_NEAR(l5[1], 1.9f - 0.5f - 2 * 0.25f, 1e-6);
    sampler_free(s);
}

/* Full 154880-entry vocabulary: the partial-selection top-p must keep
 * exactly the tokens a full sort keeps. */
static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void test_full_vocab_top_p(void)
{
    enum { V = 154880 };
    float *base = malloc(V * sizeof *base), *l = malloc(V * sizeof *l), *sorted = malloc(V * sizeof *sorted);
    for (int flat = 0; flat < 2; flat++) {
        uint32_t x = 7 + (uint32_t)flat;
        for (int i = 0; i < V; i++) {
            x = x * 1664525u + 1013904223u;
            double u = (double)(x >> 8) / (double)(1 << 24);
            /* peaked: a few hundred strong logits; flat: spread over ~all */
            base[i] = flat ? (float)(u * 0.5) : (float)(u < 0.002 ? 8 + 4 * u : 10 * u - 5);
        }
        memcpy(sorted, base, V * sizeof *sorted);
        qsort(sorted, V, sizeof *sorted, cmp_desc);
        double m = sorted[0], z = 0, cum = 0;
        for (int i = 0; i < V; i++)
            z += exp(sorted[i] - m);
        float cutoff = sorted[V - 1];
        for (int i = 0; i < V; i++) {
            cum += exp(sorted[i] - m) / z;
            if (cum >= 0.9) {
                cutoff = sorted[i];
                break;
            }
        }
        sampler_params p = plain();
        p.top_p = 0.9f;
        sampler *s = sampler_new(&p, V);
        int bad = 0;
        for (int k = 0; k < 50; k++) {
            memcpy(l, base, V * sizeof *l);
            int32_t id = sampler_sample(s, l);
            if (id < 0 || id >= V || base[id] < cutoff)
                bad++;
        }
        CHECK(bad == 0, "%s: %d of 50 draws fell outside the top-p set", flat ? "flat" : "peaked", bad);
        sampler_free(s);
    }
    free(base);
    free(l);
    free(sorted);
}

/* Masked (-inf) logits are never drawn, and an all-masked row does not crash. */
static void test_masked_logits(void)
{
    enum { V = 1000 };
    float l[V];
    sampler_params p = plain();
    p.top_p = 0.9f;
    sampler *s = sampler_new(&p, V);
    for (int k = 0; k < 50; k++) {
        for (int i = 0; i < V; i++)
            l[i] = i % 10 == 3 ? (float)(i % 7) * 0.1f : -INFINITY;
        int32_t id = sampler_sample(s, l);
        CHECK(id >= 0 && id < V && id % 10 == 3, "drew masked token %d", id);
    }
    for (int i = 0; i < V; i++)
        l[i] = -INFINITY;
    int32_t id = sampler_sample(s, l);
    CHECK(id >= 0 && id < V, "all-masked row gave %d", id);
    sampler_free(s);
}


/* ---- agreement with the previous implementation ------------------------------------ */

enum {
    D_LM,        /* Gaussian, sd 3: a language model's spread */
    D_LM_WIDE,   /* a few strong tokens far above a Gaussian bulk */
    D_FLAT,      /* 4 log u: a third of the vocabulary within min-p 0.01 */
    D_PEAKED,    /* one or two clear winners */
    D_TIES,      /* values on a 1/4 grid: many exact ties */
    D_MASKED,    /* 40% -inf */
    D_NAN,       /* a few NaN, sometimes at id 0 */
    D_CONST,     /* every logit equal */
    D_FINITE_MASK, /* some -1e9 and -FLT_MAX "masks" */
    D_ASCENDING, /* sorted upwards: worst case for running maxima */
    D_DESCENDING,
    D_ONE,       /* a single finite logit, the rest -inf */
    D_TINY_SPAN, /* logits 1e-40 apart: the bucket scale overflows */
    D_HUGE_SPAN, /* +-3e38: the span overflows */
    D_COUNT
};

static const char *const dist_names[D_COUNT] = {"lm", "lm-wide", "flat", "peaked", "ties", "masked",
                                                "nan", "const", "finite-mask", "ascending", "descending", "one",
                                                "tiny-span", "huge-span"};

static void make_logits(float *l, uint32_t n, int dist, uint64_t *x)
{
    for (uint32_t i = 0; i < n; i++) {
        float g = rs_gauss(x), v = 3 * g;
        double u = rs_unit(x);
        switch (dist) {
        case D_LM_WIDE: v = u < 0.001 ? (float)(18 + 4 * u * 1000) : 2 * g; break;
        case D_FLAT: v = 4 * logf((float)u); break;
        case D_PEAKED: v = i % 9973 == 17 ? 12.0f + (float)u : (float)(u * 4 - 2); break;
        case D_TIES: v = roundf(3 * g * 4) / 4; break;
        case D_MASKED: v = u < 0.4 ? -INFINITY : v; break;
        case D_NAN: v = u < 0.002 || (i == 0 && (rs_next(x) & 3) == 0) ? NAN : v; break;
        case D_CONST: v = 1.5f; break;
        case D_FINITE_MASK: v = u < 0.05 ? -1e9f : u < 0.07 ? -FLT_MAX : v; break;
        case D_ASCENDING: v = (float)i * 0.001f; break;
        case D_DESCENDING: v = -(float)i * 0.001f; break;
        case D_ONE: v = i == n / 3 ? 0.5f : -INFINITY; break;
        case D_TINY_SPAN: v = u < 0.3 ? 1e-40f : u < 0.6 ? 0.0f : -2e-40f; break;
        case D_HUGE_SPAN: v = u < 0.01 ? 3e38f : u < 0.02 ? -3e38f : v; break;
        default: break;
        }
        l[i] = v;
    }
}

typedef struct {
    float temp, top_p, min_p;
    int top_k;
    bool penalties;
} combo;

/* Draws `steps` tokens from both samplers (same seed, same logits, tokens
 * accepted into both windows) and counts disagreements; a token or a
 * penalised logit that differs is a failure. */
static int compare_run(const combo *c, int dist, uint32_t n, uint64_t seed, int steps, int level, char *why,
                       size_t why_len)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temp = c->temp;
    p.top_p = c->top_p;
    p.min_p = c->min_p;
    p.top_k = c->top_k;
    p.seed = seed;
    p.penalty_window = 16;
    if (c->penalties) {
        p.repeat_penalty = 1.3f;
        p.presence_penalty = 0.4f;
        p.frequency_penalty = 0.2f;
    }
    sampler *fast = sampler_new(&p, n);
    ref_sampler *ref = ref_sampler_new(&p, n);
    float *base = malloc(n * sizeof *base), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    float *c2 = malloc(n * sizeof *c2);
    uint32_t *P = malloc(n * sizeof *P);
    int bad = 0;
    if (!fast || !ref || !base || !a || !b || !c2 || !P) {
        snprintf(why, why_len, "out of memory");
        bad = 1;
        steps = 0;
    } else {
        sampler_set_simd(fast, level);
    }
    uint64_t x = seed * 7919 + (uint64_t)dist;
    for (int step = 0; step < steps; step++) {
        if (step % 4 == 0) /* new logits now and then; in between the window moves */
            make_logits(base, n, dist, &x);
        memcpy(a, base, n * sizeof *a);
        memcpy(b, base, n * sizeof *b);
        memcpy(c2, base, n * sizeof *c2);
        sampler_request rq;
        sampler_prepare(fast, &rq);
        int32_t ta = sampler_pick(fast, &rq, a, NULL), tb = ref_sampler_sample(ref, b);
        /* sampler_probs_pick: sampler_pick's token from the same pass that
         * gives P, which weighs that token, and P sums to 1 within a unit
         * per token (each kept token's share is floored) */
        int32_t tp = sampler_probs_pick(fast, &rq, c2, P);
        uint64_t sum = 0, kept = 0;
        for (uint32_t i = 0; i < n; i++)
            sum += P[i], kept += P[i] != 0;
        if (tp != ta || P[ta] == 0 || sum > SAMPLER_PROB_ONE || sum + n < SAMPLER_PROB_ONE) {
            if (!bad)
                snprintf(why, why_len, "%s n=%u T=%g top-k %d top-p %g min-p %g pen %d seed %llu step %d: "
                         "probs_pick %d, pick %d, P of it %u, P sums to %llu over %llu tokens",
                         dist_names[dist], n, (double)c->temp, c->top_k, (double)c->top_p, (double)c->min_p,
                         c->penalties, (unsigned long long)seed, step, tp, ta, P[ta < 0 ? 0 : ta],
                         (unsigned long long)sum, (unsigned long long)kept);
            bad++;
        }
        bool same_logits = true; /* the penalised logits (the sampler leaves them canonical) */
        for (uint32_t i = 0; i < n; i++) {
            float ca = sk_canon(a[i]), cb = sk_canon(b[i]);
            same_logits = same_logits && memcmp(&ca, &cb, sizeof ca) == 0;
        }
        if (ta != tb || !same_logits) {
            if (!bad)
                snprintf(why, why_len, "%s n=%u T=%g top-k %d top-p %g min-p %g pen %d seed %llu step %d: %d vs %d%s",
                         dist_names[dist], n, (double)c->temp, c->top_k, (double)c->top_p, (double)c->min_p,
                         c->penalties, (unsigned long long)seed, step, ta, tb, same_logits ? "" : " (logits)");
            bad++;
        }
        sampler_accept(fast, tb);
        ref_sampler_accept(ref, tb);
    }
    free(base);
    free(a);
    free(b);
    free(c2);
    free(P);
    sampler_free(fast);
    ref_sampler_free(ref);
    return bad;
}

static const combo combos[] = {
    {1.0f, 0.95f, 0.01f, 0, false}, /* GLM defaults */
    {0.0f, 1.0f, 0.0f, 0, false},   /* greedy */
    {0.0f, 0.9f, 0.05f, 0, true},   /* greedy with penalties */
    {0.3f, 0.95f, 0.0f, 0, false},  /* deepseek2 preset */
    {0.7f, 0.8f, 0.0f, 20, false},  /* chatml preset */
    {0.6f, 0.9f, 0.0f, 0, false},   /* llama3 preset */
    {1.0f, 1.0f, 0.0f, 0, false},   /* temperature only */
    {1.3f, 1.0f, 0.05f, 0, false},  /* min-p only */
    {1.0f, 0.5f, 0.0f, 0, true},    /* top-p only, penalties */
    {1.0f, 0.95f, 0.01f, 40, true}, /* everything */
    {0.8f, 1.0f, 0.0f, 1, false},   /* top-k 1 */
    {1.0f, 0.99f, 0.2f, 2, false},
    {2.0f, 0.9999f, 0.0f, 1000, false},
    {1.0f, 0.3f, 0.01f, 5000, false},
    {0.5f, 0.0f, 0.0f, 0, false}, /* top-p 0: the best token */
};
#define N_COMBOS (sizeof combos / sizeof combos[0])

/* Every combination and distribution at each size, on vector levels
 * [lo, best]. */
/* The sanitizer run (TEST_QUICK, tests/run.sh), which looks for memory
 * errors in the host code: two steps a run where there are more (a draw
 * after accepted tokens still happens), one on the full vocabulary; every
 * size, setting and distribution still runs. */
static bool quick_run(void)
{
    const char *q = getenv("TEST_QUICK");
    return q && strcmp(q, "1") == 0;
}

static void check_agreement(const uint32_t *sizes, int n_sizes, int steps, uint64_t seed0, int lo)
{
    char why[200] = "";
    int bad = 0, runs = 0;
    if (quick_run())
        steps = steps > 2 ? 2 : 1;
    for (int level = lo; level <= sk_best_level(); level++)
        for (int si = 0; si < n_sizes; si++)
            for (size_t c = 0; c < N_COMBOS; c++)
                for (int d = 0; d < D_COUNT; d++) {
                    if (d == D_TINY_SPAN && sizes[si] > 40000)
                        continue; /* subnormal arithmetic: slow in both, and covered at smaller sizes */
                    combo cb = combos[c];
                    if (cb.top_k >= (int)sizes[si] && c % 2) /* also top-k >= the vocabulary */
                        cb.top_k = (int)sizes[si] + (int)c;
                    bad += compare_run(&cb, d, sizes[si], seed0 + (uint64_t)(c * 131 + (size_t)d), steps, level,
                                       bad ? (char[200]){0} : why, sizeof why) > 0;
                    runs++;
                }
    CHECK(bad == 0, "%d of %d runs disagree with the definition; first: %s", bad, runs, why);
}

/* Small and block-edge vocabularies: every combination, many steps. */
static void test_same_tokens_small_vocab(void)
{
    static const uint32_t sizes[] = {1, 2, 3, 7, 16, 33, 100, 257, 1000};
    check_agreement(sizes, (int)(sizeof sizes / sizeof sizes[0]), 24, 100, 0);
}

/* Around the selection's thresholds: lists of SELECT_SMALL (48) tokens are
 * walked, longer ones go through the 2048-bucket histograms. */
static void test_same_tokens_selection_edges(void)
{
    static const uint32_t sizes[] = {47, 48, 49, 2047, 2049, 9000};
    check_agreement(sizes, (int)(sizeof sizes / sizeof sizes[0]), 3, 200, 0);
}

/* The real vocabulary size, on the vector level this CPU uses (the others:
 * above and test_kernels_agree). */
static void test_same_tokens_full_vocab(void)
{
    static const uint32_t sizes[] = {154880};
    check_agreement(sizes, 1, 2, 300, sk_best_level());
}

/* top-k alone over many k: the unit-weight selection must find the k-th
 * token of the order exactly (seen through the draw: with top-p and min-p
 * off every token of C can be drawn). */
static void test_same_tokens_top_k_sweep(void)
{
    enum { N = 60000 };
    char why[200] = "";
    int bad = 0, runs = 0;
    uint64_t x = 5;
    for (int level = 0; level <= sk_best_level(); level++)
        for (int r = 0; r < 40; r++) {
            combo c = {1.0f, 1.0f, 0.0f, 0, false};
            uint64_t u = rs_next(&x);
            c.top_k = u % 3 == 0 ? 1 + (int)(u % 300) : u % 3 == 1 ? 1 + (int)(u % 30000) : N - 1 - (int)(u % 200);
            int d = (int)(rs_next(&x) % D_COUNT);
            bad += compare_run(&c, d, N, 1000 + (uint64_t)r, 3, level, bad ? (char[200]){0} : why, sizeof why) > 0;
            runs++;
        }
    CHECK(bad == 0, "%d of %d top-k runs disagree with the definition; first: %s", bad, runs, why);
}

/* The passes, level by level, against the portable code. */
static void test_kernels_agree(void)
{
    enum { N = 154880 };
    float *l = malloc(N * sizeof *l), *c1 = malloc(N * sizeof *c1), *c2 = malloc(N * sizeof *c2);
    uint32_t *k1 = malloc(N * sizeof *k1), *k2 = malloc(N * sizeof *k2);
    int32_t *i1 = malloc(N * sizeof *i1), *i2 = malloc(N * sizeof *i2);
    sk_kernels ref, k;
    sk_get(&ref, 0);
    uint64_t x = 77;
    int bad = 0;
    static const uint32_t sizes[] = {1, 7, 8, 9, 31, 100, 4095, 4097, 20000, 154880};
    for (int level = 1; level <= sk_best_level(); level++) {
        sk_get(&k, level);
        for (int d = 0; d < D_COUNT; d++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                uint32_t n = sizes[si], f1, f2;
                make_logits(l, n, d, &x);
                uint32_t b1 = ref.best(l, n, &f1), b2 = k.best(l, n, &f2);
                bad += b1 != b2 || f1 != f2;
                memcpy(c1, l, n * sizeof *l);
                memcpy(c2, l, n * sizeof *l);
                b1 = ref.keys(c1, k1, n, &f1);
                b2 = k.keys(c2, k2, n, &f2);
                bad += b1 != b2 || f1 != f2 || memcmp(c1, c2, n * sizeof *c1) || memcmp(k1, k2, n * sizeof *k1);
                float mx = sk_key_value(b1);
                if (!isfinite(mx))
                    continue;
                uint32_t bk = k1[n / 3], bid = n / 2;
                for (int t = 0; t < 3; t++) {
                    float inv_t = t == 0 ? 1.0f : t == 1 ? 1.0f / 0.7f : 1e6f;
                    bad += ref.mass(c1, k1, n, UINT32_MAX, UINT32_MAX, mx, inv_t) !=
                           k.mass(c1, k1, n, UINT32_MAX, UINT32_MAX, mx, inv_t);
                    bad += ref.mass(c1, k1, n, bk, bid, mx, inv_t) != k.mass(c1, k1, n, bk, bid, mx, inv_t);
                }
                uint32_t m1 = ref.collect(k1, n, bk, i1), m2 = k.collect(k1, n, bk, i2);
                bad += m1 != m2 || memcmp(i1, i2, m1 * sizeof *i1);
                /* a list's weights (i1: ids ascending, gaps) at each temperature */
                for (int t = 0; t < 3 && m1 == m2; t++) {
                    float inv_t = t == 0 ? 1.0f : t == 1 ? 1.0f / 0.7f : 1e6f;
                    uint32_t *w1 = (uint32_t *)k2, *w2 = (uint32_t *)i2; /* scratch: k2 and i2 are free here */
                    bad += ref.weights(c1, i1, m1, mx, inv_t, w1) != k.weights(c1, i1, m1, mx, inv_t, w2) ||
                           memcmp(w1, w2, m1 * sizeof *w1);
                }
            }
    }
    CHECK(bad == 0, "%d kernel results differ from the portable code", bad);
    free(l);
    free(c1);
    free(c2);
    free(k1);
    free(k2);
    free(i1);
    free(i2);
}

/* sk_fast_exp is 2^n * poly(t) with n = rint(x / ln 2): against that form
 * written with rintf and ldexpf on every kind of input; and the key order
 * against the float order. */
static void test_fast_exp_and_keys(void)
{
    uint64_t x = 11;
    int bad = 0;
    const float special[] = {0.0f, -0.0f, -87.0f, -87.00001f, -86.99999f, -FLT_MAX, -INFINITY, NAN, -1e-45f, -0.5f,
                             -0.34657359f, -125.0f};
    for (int i = 0; i < 2000000 + (int)(sizeof special / sizeof special[0]); i++) {
        float v;
        if (i < (int)(sizeof special / sizeof special[0])) {
            v = special[i];
        } else {
            uint32_t bits = 0x80000000u | (uint32_t)(rs_next(&x) % 0x42B00001u); /* [-88, -0] */
            memcpy(&v, &bits, sizeof v);
        }
        float c = v > -87.0f ? v : -87.0f, y = c * 1.44269504f, nr = rintf(y), t = (y - nr) * 0.693147181f;
        float poly = 1.0f + t * (1.0f + t * (0.5f + t * (1.0f / 6 + t * (1.0f / 24 + t * (1.0f / 120 + t * (1.0f / 720))))));
        float want = ldexpf(poly, (int)nr), got = sk_fast_exp(v);
        bad += memcmp(&want, &got, sizeof got) != 0;
        float a = sk_canon(rs_gauss(&x) * 100), b = sk_canon(rs_gauss(&x) * 100);
        bad += (sk_key(a) < sk_key(b)) != (a > b) || sk_key_value(sk_key(a)) != a;
    }
    bad += sk_key(sk_canon(NAN)) != sk_key(-INFINITY) || sk_key(sk_canon(-0.0f)) != sk_key(0.0f) ||
           sk_key(sk_canon(1e-40f)) != sk_key(0.0f) || sk_q31(1.0f) != 0x80000000u || sk_q31(sk_fast_exp(-87)) != 0;
    CHECK(bad == 0, "%d values differ", bad);
}

/* sampler_prepare + sampler_pick is a pure function of the request and
 * the logits: another sampler (other window, other RNG state) given the
 * same request picks the same token; prepare draws one uniform per
 * non-greedy token from the seeded stream. */
static void test_request_is_the_whole_input(void)
{
    enum { V = 3000 };
    float *base = malloc(V * sizeof *base), *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    uint64_t x = 5;
    make_logits(base, V, D_LM, &x);
    sampler_params p;
    sampler_params_default(&p);
    p.repeat_penalty = 1.2f;
    p.frequency_penalty = 0.1f;
    sampler *s = sampler_new(&p, V), *other = sampler_new(&p, V);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        sampler_request rq;
        sampler_prepare(s, &rq);
        memcpy(a, base, V * sizeof *a);
        memcpy(b, base, V * sizeof *b);
        int32_t ta = sampler_pick(s, &rq, a, NULL), tb = sampler_pick(other, &rq, b, NULL);
        bad += ta != tb;
        sampler_accept(s, ta);
    }
    CHECK(bad == 0, "%d picks differ between samplers given the same request", bad);
    sampler_reset(s);
    sampler_request r1, r2;
    sampler_prepare(s, &r1);
    sampler_prepare(s, &r2);
    CHECK(r1.uniform != r2.uniform, "two requests drew the same uniform");
    p.temp = 0;
    sampler_set_params(s, &p);
    sampler_reset(s);
    sampler_prepare(s, &r1);
    CHECK(r1.greedy && r1.uniform == 0, "a greedy request should draw nothing");
    sampler_free(s);
    sampler_free(other);
    free(base);
    free(a);
    free(b);
}

/* Issue 28.2: a temperature whose inverse overflows a float (below ~3e-39)
 * made every weight 0, and the draw read past its lists (ASan: pick).
 * Such a temperature, and NaN, are greedy; on every vector level. */
static void test_tiny_temperature_is_greedy(void)
{
    enum { V = 5000 };
    float *base = malloc(V * sizeof *base), *a = malloc(V * sizeof *a);
    uint64_t x = 11;
    make_logits(base, V, D_LM, &x);
    base[777] = 40.0f; /* the greedy token */
    static const float temps[] = {1e-39f, 2.9e-39f, 1e-45f, NAN, -NAN};
    for (int level = 0; level <= sampler_set_simd(NULL, 99); level++)
        for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
            sampler_params p = plain();
            p.temp = temps[t];
            p.top_p = 0.95f;
            p.min_p = 0.01f;
            sampler *s = sampler_new(&p, V);
            sampler_set_simd(s, level);
            memcpy(a, base, V * sizeof *a);
            /* as the decoder asks: with the token's probability (main read
             * logits[-1] for it: ASan's heap-buffer-overflow in pick) */
            sampler_request rq;
            sampler_prepare(s, &rq);
            float prob = 0;
            int32_t tok = sampler_pick(s, &rq, a, &prob);
            CHECK(tok == 777 && prob == 1.0f, "level %d, temp %g: token %d (p %g), expected the greedy 777", level,
                  (double)temps[t], tok, (double)prob);
            sampler_free(s);
        }
    free(base);
    free(a);
}

/* Whatever a request says -- one not made by sampler_prepare -- the token
 * is in range: an inverse temperature that is not a finite number >= 0 is
 * greedy (it would leave the draw no weight), any other setting is used. */
static void test_any_request_picks_in_range(void)
{
    enum { V = 3000 };
    float *base = malloc(V * sizeof *base), *a = malloc(V * sizeof *a);
    uint64_t x = 12;
    make_logits(base, V, D_LM, &x);
    base[1234] = 50.0f;
    sampler_params p = plain();
    sampler *s = sampler_new(&p, V);
    static const float inv_ts[] = {INFINITY, -INFINITY, NAN, -1.0f, -0.0f, 0.0f, FLT_MAX, 1e-40f, 3.0f};
    static const uint32_t top_ks[] = {0, 1, 7, V - 1, V, UINT32_MAX};
    static const uint32_t top_ps[] = {0, 1, 0xF3333333u, UINT32_MAX};
    static const float log_min_ps[] = {0.0f, -1e-30f, -4.6f, 5.0f, -INFINITY, INFINITY, NAN};
    int bad = 0, greedy_bad = 0;
    for (size_t i = 0; i < sizeof inv_ts / sizeof inv_ts[0]; i++)
        for (size_t k = 0; k < sizeof top_ks / sizeof top_ks[0]; k++)
            for (size_t q = 0; q < sizeof top_ps / sizeof top_ps[0]; q++)
                for (size_t m = 0; m < sizeof log_min_ps / sizeof log_min_ps[0]; m++)
                    for (uint32_t u = 0; u < 3; u++) {
                        sampler_request rq = {.inv_temp = inv_ts[i], .top_k = top_ks[k], .top_p_on = q > 0,
                                              .top_p_q32 = top_ps[q], .min_p_on = m > 0, .log_min_p = log_min_ps[m],
                                              .rp = 1, .inv_rp = 1, .uniform = u == 0 ? 0 : u == 1 ? 0x80000000u : UINT32_MAX};
                        memcpy(a, base, V * sizeof *a);
                        int32_t tok = sampler_pick(s, &rq, a, NULL);
                        bad += tok < 0 || tok >= V;
                        bool draws = inv_ts[i] >= 0.0f && inv_ts[i] <= FLT_MAX;
                        greedy_bad += !draws && tok != 1234;
                        CHECK(sampler_request_draws(&rq) == draws, "inv_t %g: draws says %d", (double)inv_ts[i],
                              sampler_request_draws(&rq));
                    }
    CHECK(bad == 0, "%d requests picked a token out of range", bad);
    CHECK(greedy_bad == 0, "%d requests without a usable inverse temperature were not greedy", greedy_bad);
    sampler_free(s);
    free(base);
    free(a);
}

/* The one check every entry path calls (issue 28.2): NaN, infinities,
 * subnormals, negative and huge values are refused with one line naming
 * the value; zero and the documented ranges pass. */
static void test_settings_check(void)
{
    err_t err;
    struct {
        sampler_setting which;
        double v;
        bool ok;
    } cases[] = {
        {SAMPLER_TEMP, 0, true},       {SAMPLER_TEMP, 0.001, true},  {SAMPLER_TEMP, 100, true},
        {SAMPLER_TEMP, 0.7, true},     {SAMPLER_TEMP, 1e-39, false}, {SAMPLER_TEMP, 2.9e-39, false},
        {SAMPLER_TEMP, 1e-4, false},   {SAMPLER_TEMP, -1, false},    {SAMPLER_TEMP, 101, false},
        {SAMPLER_TEMP, NAN, false},    {SAMPLER_TEMP, INFINITY, false}, {SAMPLER_TEMP, 1e300, false},
        {SAMPLER_TOP_K, 0, true},      {SAMPLER_TOP_K, 40, true},    {SAMPLER_TOP_K, 2.5, false},
        {SAMPLER_TOP_K, -1, false},    {SAMPLER_TOP_K, 1e7, false},  {SAMPLER_TOP_P, 0, true},
        {SAMPLER_TOP_P, 1, true},      {SAMPLER_TOP_P, 1e-40, false}, {SAMPLER_TOP_P, 1.5, false},
        {SAMPLER_TOP_P, -NAN, false},  {SAMPLER_MIN_P, 0.05, true},  {SAMPLER_MIN_P, 1e-39, false},
        {SAMPLER_MIN_P, -0.1, false},  {SAMPLER_REPEAT_PENALTY, 1, true}, {SAMPLER_REPEAT_PENALTY, 0, false},
        {SAMPLER_REPEAT_PENALTY, 1e30, false}, {SAMPLER_PRESENCE_PENALTY, -2, true},
        {SAMPLER_PRESENCE_PENALTY, 1e-41, false}, {SAMPLER_FREQUENCY_PENALTY, 2, true},
        {SAMPLER_FREQUENCY_PENALTY, -INFINITY, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err.msg[0] = 0;
        int rc = sampler_check(cases[i].which, "the-key", cases[i].v, &err);
        CHECK((rc == 0) == cases[i].ok, "case %zu (%g): rc %d, '%.300s'", i, cases[i].v, rc, err.msg);
        if (rc)
            CHECK(!strncmp(err.msg, "the-key: ", 9) && !strchr(err.msg, '\n'), "case %zu: '%.300s'", i, err.msg);
    }
    sampler_params p;
    sampler_params_default(&p);
    CHECK(sampler_params_check(&p, &err) == 0, "the defaults: %.300s", err.msg);
    p.temp = 1e-39f;
    CHECK(sampler_params_check(&p, &err) != 0 && strstr(err.msg, "temp: "), "a subnormal temp passed: '%.300s'", err.msg);
}

int main(void)
{
    RUN(test_masked_logits);
    RUN(test_greedy_ties_lowest_id);
    RUN(test_distribution_chi_square);
    RUN(test_same_seed_same_tokens);
    RUN(test_filters);
    RUN(test_penalties);
    RUN(test_full_vocab_top_p);
    RUN(test_fast_exp_and_keys);
    RUN(test_request_is_the_whole_input);
    RUN(test_kernels_agree);
    RUN(test_same_tokens_small_vocab);
    RUN(test_same_tokens_selection_edges);
    RUN(test_same_tokens_top_k_sweep);
    RUN(test_same_tokens_full_vocab);
    RUN(test_tiny_temperature_is_greedy);
    RUN(test_any_request_picks_in_range);
    RUN(test_settings_check);
    TESTS_DONE();
}
