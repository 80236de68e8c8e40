/* test_sampler.c: the sampler's filters, determinism and distribution.
 *
 * Distribution checks draw many samples with a fixed seed and compare the
 * counts with the expected probabilities by Pearson's chi-square; with a
 * fixed seed the statistic is one fixed number, so the test cannot flake,
 * and the bound (the 0.1% critical value) still catches a wrong
 * distribution, which moves the statistic by orders of magnitude. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "sampler.h"
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
    int32_t ids[3] = {7, 5, 3};
    float cl[3] = {3.5f, 3.5f, 3.5f};
    CHECK(sampler_sample_topk(s, ids, cl, 3, 4.0f) == 3, "top-K greedy should also pick the lowest id");
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

static void test_topk_entry_matches_full(void)
{
    enum { V = 5000, K = 64, DRAWS = 4000 };
    float *full = malloc(V * sizeof *full), *l = malloc(V * sizeof *l);
    uint32_t x = 3;
    for (int i = 0; i < V; i++) {
        x = x * 1664525u + 1013904223u;
        float u = (float)((double)(x >> 8) / (1 << 24));
        full[i] = i % 97 == 0 ? 10.0f + u : 3.0f * u; /* 52 strong tokens hold ~98% */
    }
    /* the K best, descending, and the full log-sum-exp */
    int32_t ids[K];
    float cl[K];
    int used[V];
    memset(used, 0, sizeof used);
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int i = 0; i < V; i++)
            if (!used[i] && (best < 0 || full[i] > full[best]))
                best = i;
        used[best] = 1;
        ids[k] = best;
        cl[k] = full[best];
    }
    double m = cl[0], z = 0;
    for (int i = 0; i < V; i++)
        z += exp(full[i] - m);
    float log_z = (float)(m + log(z));
    sampler_params p = plain();
    p.top_p = 0.5f;
    sampler *a = sampler_new(&p, V), *b = sampler_new(&p, V);
    int ca[K] = {0}, cb[K] = {0}, outside = 0;
    for (int i = 0; i < DRAWS; i++) {
        memcpy(l, full, V * sizeof *l);
        int32_t ia = sampler_sample(a, l), ib = sampler_sample_topk(b, ids, cl, K, log_z);
        int fa = -1, fb = -1;
        for (int k = 0; k < K; k++) {
            if (ids[k] == ia)
                fa = k;
            if (ids[k] == ib)
                fb = k;
        }
        if (fa < 0 || fb < 0)
            outside++;
        else {
            ca[fa]++;
            cb[fb]++;
        }
    }
    CHECK(outside == 0, "%d draws outside the top %d", outside, K);
    /* both paths keep the same top-p set: identical supports */
    int diff = 0;
    for (int k = 0; k < K; k++)
        diff += (ca[k] > 0) != (cb[k] > 0);
    CHECK(diff == 0, "the full and top-K paths kept different token sets (%d differ)", diff);
    sampler_free(a);
    sampler_free(b);
    free(full);
    free(l);
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

int main(void)
{
    RUN(test_masked_logits);
    RUN(test_greedy_ties_lowest_id);
    RUN(test_distribution_chi_square);
    RUN(test_same_seed_same_tokens);
    RUN(test_filters);
    RUN(test_penalties);
    RUN(test_full_vocab_top_p);
    RUN(test_topk_entry_matches_full);
    TESTS_DONE();
}
