/* sampler.h: token sampling over a candidate list or the full vocabulary.
 *
 * Promises: greedy, temperature, top-k, top-p, min-p, repetition / presence
 * / frequency penalties over a window of recent tokens; a seedable RNG (same
 * seed, same candidates -> same token, on every CPU and vector level); no
 * allocation per token (buffers sized once at sampler_new).  On a 154880
 * vocabulary a full-vocabulary draw takes ~0.07 ms with the GLM defaults
 * and ~0.01 ms greedy on one AVX-512 core (make bench). */
#ifndef GLM_SAMPLER_H
#define GLM_SAMPLER_H

#include <stdint.h>

typedef struct {
    float temp;            /* 0: greedy (lowest id on ties) */
    int top_k;             /* 0: off */
    float top_p;           /* 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 1: off */
    float presence_penalty;
    float frequency_penalty;
    int penalty_window;    /* recent tokens the penalties look at */
    uint64_t seed;
} sampler_params;

void sampler_params_default(sampler_params *p);

typedef struct sampler sampler;

sampler *sampler_new(const sampler_params *p, uint32_t n_vocab);
void sampler_free(sampler *s);
void sampler_set_params(sampler *s, const sampler_params *p); /* reseeds when seed changed */
/* Records a token in the penalty window (prompt and generated tokens). */
void sampler_accept(sampler *s, int32_t id);
void sampler_reset(sampler *s);

/* Vector code for the passes over the whole vocabulary: 0 portable C,
 * 1 AVX2, 2 AVX-512 (x86-64).  sampler_new picks the best the CPU runs;
 * every level gives the same tokens, so this is for tests and benchmarks.
 * Returns the level now in use (never above what the CPU supports); with
 * s NULL, only what that level would be. */
int sampler_set_simd(sampler *s, int level);

/* Samples from full logits (n_vocab floats; modified in place). */
int32_t sampler_sample(sampler *s, float *logits);
/* Samples from the K best candidates (ids, logits descending) of a
 * distribution whose full logsumexp is log_z (used by the GPU path, which
 * reads back only the top candidates). */
int32_t sampler_sample_topk(sampler *s, const int32_t *ids, const float *logits, uint32_t k, float log_z);

#endif
