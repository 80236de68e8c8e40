/* bench_text.c: tokenizer throughput and sampler time per token.
 *
 *   bench_text [MB]   (default 4)
 *
 * Tokenizer: a few MB of mixed text (English prose, code, numbers, CJK,
 * Cyrillic, emoji, whitespace runs) generated from a fixed seed, encoded
 * whole on one core with each fixture vocabulary; reports MB/s.
 * Sampler: the GLM defaults (temperature 1, top-p 0.95, min-p 0.01) and
 * greedy on a 154880-entry vocabulary of random logits, and the top-K
 * entry point on 64 candidates; reports microseconds per token. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "sampler.h"
#include "tokenizer.h"

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

static void bench_sampler(void)
{
    enum { V = 154880, ITERS = 200 };
    float *base = malloc(V * sizeof *base), *l = malloc(V * sizeof *l);
    const char *names[] = {"GLM defaults, LM-like logits", "GLM defaults, flat logits (worst case)",
                           "top-p .95 only, LM-like logits", "greedy"};
    for (int mode = 0; mode < 4; mode++) {
        for (int i = 0; i < V; i++) {
            /* LM-like: Gaussian logits (sd 3, Box-Muller); flat: exponential
             * tail where a third of the vocabulary passes min-p */
            double u1 = (next() + 1.0) / (1 << 24), u2 = (next() + 1.0) / (1 << 24);
            base[i] = mode == 1 ? (float)(4.0 * log(u1)) : (float)(3.0 * sqrt(-2 * log(u1)) * cos(6.2831853 * u2));
        }
        sampler_params p;
        sampler_params_default(&p);
        if (mode == 2)
            p.min_p = 0;
        if (mode == 3)
            p.temp = 0;
        sampler *s = sampler_new(&p, V);
        double total = 0;
        for (int i = 0; i < ITERS; i++) {
            memcpy(l, base, V * sizeof *l);
            double t0 = now();
            int32_t id = sampler_sample(s, l);
            total += now() - t0;
            sampler_accept(s, id);
        }
        printf("  sample   %-40s %7.1f us/token (vocab %d)\n", names[mode], total / ITERS * 1e6, V);
        sampler_free(s);
    }
    int32_t ids[64];
    float cl[64];
    for (int k = 0; k < 64; k++) {
        ids[k] = k;
        cl[k] = 10.0f - 0.1f * k;
    }
    sampler_params p;
    sampler_params_default(&p);
    sampler *s = sampler_new(&p, V);
    double t0 = now();
    for (int i = 0; i < 10000; i++)
        sampler_sample_topk(s, ids, cl, 64, 11.0f);
    printf("  sample   %-40s %7.2f us/token\n", "top-K entry, 64 candidates", (now() - t0) / 10000 * 1e6);
    sampler_free(s);
    free(base);
    free(l);
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
