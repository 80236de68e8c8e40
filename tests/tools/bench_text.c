/* bench_text.c: tokenizer throughput and sampler time per token.
 *
 *   bench_text [MB]   (default 4)
 *
 * Tokenizer: a few MB of mixed text (English prose, code, numbers, CJK,
 * Cyrillic, emoji, whitespace runs) generated from a fixed seed, encoded
 * whole on one core with each fixture vocabulary; reports MB/s.
 * Sampler: microseconds per token on a 154880-entry vocabulary for the GLM
 * defaults (temperature 1, top-p 0.95, min-p 0.01), other presets and
 * greedy, on language-model-like and flat logits, for the previous sampler
 * (tests/sampler_ref.h) and the current one on the same logits in the same
 * run (they must pick the same tokens; the benchmark checks), plus the
 * top-K entry point on 64 candidates. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/gguf.h"
#include "sample/sampler.h"
#include "text/tokenizer.h"
#include "../sampler_ref.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint32_t rng = 12345;
static uint32_t next(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

static char *make_text(size_t bytes, size_t *len)
{
    static const char *const pieces[] = {
        "the ", "quick ", "brown ", "fox ", "jumps ", "over ", "lazy ", "dogs, ", "and ", "isn't ",
        "it's ", "THE ", "Model ", "tokenizer ", "returns ", "12345 ", "3.14159 ", "2026-11-22 ",
        "\n", "\n\n", "    ", "\t", "int main(void) { return x->y[3] * 2; }\n", "if (a != b) {\n",
        "你好，世界！", "机器学习", "モデル", "привет, мир ", "مرحبا ", "😀 ", "👍🏽 ", "café ", "naïve ",
        "<div class=\"x\">", "&amp; ", "$100 ", "50% ", "#tag ", "@user ", "--flag ", "...",
    };
    const size_t n_pieces = sizeof pieces / sizeof pieces[0];
    char *s = malloc(bytes + 64);
    size_t at = 0;
    while (at < bytes) {
        const char *p = pieces[next() % n_pieces];
        size_t n = strlen(p);
        memcpy(s + at, p, n);
        at += n;
    }
    *len = at;
    return s;
}

static void bench_tokenizer(const char *path, const char *text, size_t len)
{
    err_t err;
    gguf_ctx *ctx = gguf_open(path, &err);
    tokenizer *t = ctx ? tok_load(ctx, &err) : NULL;
    gguf_close(ctx);
    if (!t) {
        printf("  %s: %s\n", path, err.msg);
        return;
    }
    int32_t *ids = malloc(len * sizeof *ids);
    double best = 1e30;
    int64_t n = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        n = tok_encode(t, text, len, true, ids, len, &err);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("  tokenize %-14s %-8s %6.1f MB/s  (%.2f MB -> %lld tokens, %.2f bytes/token, best of 3)\n",
           strrchr(path, '/') + 1, tok_pre_name(t), len / best / 1e6, len / 1e6, (long long)n,
           (double)len / (double)n);
    free(ids);
    tok_free(t);
}

enum { LM_LIKE, FLAT, SD1 };

typedef struct {
    const char *name;
    int dist; /* LM_LIKE, FLAT or SD1 */
    float temp, top_p, min_p;
    int top_k;
} bench_mode;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median time per token of sampler_sample (or the old one) over the
 * logits sets, each sampled `reps` times (the median, because this machine
 * may be shared: preempted draws would swing a mean); *tokens gets the ids
 * drawn. */
static double time_sampler(const bench_mode *m, const float *sets, int n_sets, int reps, int simd, bool old,
                           int32_t *tokens)
{
    enum { V = 154880 };
    sampler_params p;
    sampler_params_default(&p);
    p.temp = m->temp;
    p.top_p = m->top_p;
    p.min_p = m->min_p;
    p.top_k = m->top_k;
    sampler *s = old ? NULL : sampler_new(&p, V);
    ref_sampler *r = old ? ref_sampler_new(&p, V) : NULL;
    if (s)
        sampler_set_simd(s, simd);
    float *l = malloc(V * sizeof *l);
    double *t = malloc((size_t)n_sets * reps * sizeof *t);
    int k = 0;
    for (int set = 0; set < n_sets; set++)
        for (int rep = 0; rep < reps; rep++, k++) {
            memcpy(l, sets + (size_t)set * V, V * sizeof *l);
            double t0 = now();
            tokens[k] = old ? ref_sampler_sample(r, l) : sampler_sample(s, l);
            t[k] = now() - t0;
        }
    qsort(t, (size_t)k, sizeof *t, cmp_double);
    double median = t[k / 2] * 1e6;
    free(t);
    free(l);
    sampler_free(s);
    ref_sampler_free(r);
    return median;
}

static void bench_sampler(void)
{
    enum { V = 154880, SETS = 8, REPS = 25 };
    static const bench_mode modes[] = {
        {"GLM defaults, LM-like logits", LM_LIKE, 1.0f, 0.95f, 0.01f, 0},
        {"GLM defaults, flat logits (worst case)", FLAT, 1.0f, 0.95f, 0.01f, 0},
        {"GLM defaults, sd 1 (the synthetic files)", SD1, 1.0f, 0.95f, 0.01f, 0},
        {"greedy", LM_LIKE, 0.0f, 0.95f, 0.01f, 0},
        {"deepseek2 preset (T .3, top-p .95)", LM_LIKE, 0.3f, 0.95f, 0.0f, 0},
        {"chatml preset (T .7, top-k 20, top-p .8)", LM_LIKE, 0.7f, 0.8f, 0.0f, 20},
        {"temperature only, flat logits", FLAT, 1.0f, 1.0f, 0.0f, 0},
    };
    float *sets = malloc((size_t)SETS * V * sizeof *sets);
    int32_t *a = malloc(SETS * REPS * sizeof *a), *b = malloc(SETS * REPS * sizeof *b);
    int best = sampler_set_simd(NULL, 99);
    static const char *const level_names[] = {"portable C", "AVX2", "AVX-512"};
    printf("  sampler: vocabulary %d, median us/token over %d logit sets x %d draws; vector code: %s\n", V, SETS, REPS,
           level_names[best]);
    printf("  %-49s %10s %10s %8s %10s %10s\n", "", "before", "now", "speedup", "now AVX2", "now C");
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        const bench_mode *m = &modes[mi];
        for (int set = 0; set < SETS; set++)
            for (int i = 0; i < V; i++) {
                /* LM-like: Gaussian logits (sd 3, Box-Muller); flat: exponential
                 * tail where two thirds of the vocabulary pass min-p 0.01 and
                 * top-p cuts first; sd 1: what mkmodel's random files give
                 * (gpu/PERF.md run 51), where min-p binds first */
                double u1 = (next() + 1.0) / (1 << 24), u2 = (next() + 1.0) / (1 << 24);
                double g = sqrt(-2 * log(u1)) * cos(6.2831853 * u2);
                sets[(size_t)set * V + i] = m->dist == FLAT ? (float)(4.0 * log(u1)) : (float)((m->dist == SD1 ? 1.0 : 3.0) * g);
            }
        double t_old = time_sampler(m, sets, SETS, REPS, 0, true, a);
        double t_new = time_sampler(m, sets, SETS, REPS, best, false, b);
        bool same = memcmp(a, b, SETS * REPS * sizeof *a) == 0;
        double t_avx2 = best >= 1 ? time_sampler(m, sets, SETS, 5, 1, false, b) : 0;
        double t_port = time_sampler(m, sets, SETS, 5, 0, false, b);
        printf("  sample   %-40s %7.1f us %7.1f us %7.1fx %7.1f us %7.1f us%s\n", m->name, t_old, t_new, t_old / t_new,
               t_avx2, t_port, same ? "" : "  TOKENS DIFFER");
    }
    free(sets);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    double mb = argc > 1 ? atof(argv[1]) : 4.0;
    size_t len;
    char *text = make_text((size_t)(mb * 1e6), &len);
    bench_tokenizer("tests/data/tokenizer/qwen3.vocab.gguf", text, len);
    bench_tokenizer("tests/data/tokenizer/llama3.vocab.gguf", text, len);
    bench_tokenizer("tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf", text, len);
    bench_sampler();
    free(text);
    return 0;
}
