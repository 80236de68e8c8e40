/* engine.h: the backend-neutral inference interface.
 *
 * One small struct of function pointers (as calm's Transformer.forward)
 * drives both the CPU reference (core/ref_engine.c) and the Vulkan core
 * (gpu/vk_engine.c).  core declares it; gpu implements it; app picks one.
 *
 * Promises:
 *  - engine_eval() appends tokens to the KV cache at position n_past and
 *    fills what `out` asks for; a long prompt is split into chunks of at
 *    most params.n_batch tokens -- cut to take about params.chunk_seconds
 *    each when that is set (from the measured time per prompt token) --
 *    and cancellation is honoured between chunks.
 *  - engine_rewind() forgets positions >= n (retry, edit): no recompute.
 *  - Nothing is allocated per token by the backends.
 *  - Statistics are read without stalling the device (earlier tokens'
 *    timestamp queries).
 *  - With no context size given the backend takes the largest its memory
 *    holds for the model (capped), and params.n_ctx says what it took.
 */
#ifndef GLM_ENGINE_H
#define GLM_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "model.h"
#include "sampler.h"

typedef enum { KV_F32 = 0, KV_F16 = 1 } kv_type;

typedef enum {
    PROFILE_OFF = 0,
    PROFILE_SAMPLED = 1, /* rotating subset per token, < 3% overhead (default) */
    PROFILE_FULL = 2     /* every dispatch of every token (bench --profile) */
} profile_mode;

/* A context the caller leaves to the engine (n_ctx 0): the largest the
 * memory holds for the model, at most this and the model's trained one. */
#define ENGINE_AUTO_CTX_CAP 32768u

typedef struct {
    uint32_t n_ctx;        /* KV capacity in tokens; 0: the largest that fits (ENGINE_AUTO_CTX_CAP) */
    kv_type kv;            /* KV cache storage type */
    uint32_t n_batch;      /* max tokens per backend eval call (prefill chunk) */
    int n_threads;         /* CPU backend threads (0: all cores) */
    int device_index;      /* Vulkan device, -1: best available */
    profile_mode profile;
    /* > 0: prompt chunks are cut to take about this long (from the time of
     * earlier chunks, a fixed part and a part per token: where the fixed
     * part alone is longer, chunks stay long enough to amortize it, at
     * least half their time on tokens), so that a cancel is honoured that
     * soon and the progress callback runs that often; 0: chunks of
     * n_batch.  The CPU
     * reference gives the same bits for any chunking; the Vulkan core's
     * attention splits follow the chunk, so its prompt logits may then
     * differ between runs by rounding. */
    double chunk_seconds;
    /* Load progress (weights upload): stage text, bytes done, bytes total. */
    void (*progress)(void *user, const char *stage, uint64_t done, uint64_t total);
    void *progress_user;
    /* Backend tuning overrides, "key=value" each (`--tune`; the Vulkan
     * core's table, gpu/vk_tuning.h), applied when the engine is created. */
    const char *const *tune;
    uint32_t n_tune;
} engine_params;

void engine_params_default(engine_params *p);

/* What one eval call returns; every pointer is caller-owned and optional. */
typedef struct {
    float *logits;         /* [rows][n_vocab]: all positions or only the last */
    bool all_positions;
    uint32_t top_k;        /* > 0: the K best of the last position, descending */
    int32_t *top_ids;      /* [top_k] */
    float *top_logits;     /* [top_k] */
    float *log_z;          /* logsumexp of the last position over the whole vocab */
    /* The token after the last position, as sampler.h defines it for this
     * request (the backend's own sampler, or engine.c's on the logits). */
    const sampler_request *sample;
    int32_t *token;
    float *token_prob;     /* its share of the kept tokens' weight (display) */
} engine_output;

typedef struct {
    char name[48];
    double calls_per_token;
    double us_per_token;
    double bytes_per_token; /* read + written */
    double gbps;
} engine_kernel_stat;

#define ENGINE_MAX_KERNEL_STATS 64

typedef struct {
    double prefill_tps;          /* last prefill call */
    double decode_tps;           /* recent single-token evals */
    uint64_t n_prefill_tokens;   /* totals over the engine's life */
    uint64_t n_decode_tokens;
    double prefill_seconds;
    double decode_seconds;
    uint32_t dispatches_per_token; /* dependent dispatches per decoded token (0: n/a) */
    double us_per_token_measured;  /* GPU time of a token from timestamps (0: n/a) */
    uint32_t n_kernels;
    engine_kernel_stat kernels[ENGINE_MAX_KERNEL_STATS];
} engine_stats;

typedef struct engine_backend {
    const char *name; /* "cpu", "vulkan" */
    /* With p->n_ctx 0 it chooses the context (and writes it to p->n_ctx). */
    int (*create)(void **impl, const model *m, engine_params *p, err_t *err);
    void (*destroy)(void *impl);
    /* Evaluates n_tokens (<= n_batch) at positions pos..pos+n-1. */
    int (*eval)(void *impl, const int32_t *tokens, uint32_t n_tokens, uint32_t pos,
                const engine_output *out, err_t *err);
    void (*get_stats)(void *impl, engine_stats *st);
    /* One line: device / threads, for the side pane and `info`. */
    const char *(*describe)(void *impl);
    /* eval honours engine_output.sample itself (the Vulkan core samples on
     * the GPU); otherwise engine.c samples the last logits on the CPU. */
    bool samples;
    /* Optional (NULL where the backend has none), for `glmchat bench`: */
    /* The profile mode from now on (bench times the prompt untimed, then
     * every dispatch). */
    void (*set_profile)(void *impl, profile_mode mode);
    /* Per-kernel figures of the last fully timed prompt batch (per batch,
     * not per token). */
    void (*prefill_stats)(void *impl, engine_stats *st);
    /* After one eval of n_tokens (<= the prefill batch): per MoE layer, how
     * many distinct experts those tokens chose. */
    int (*routing)(void *impl, uint32_t n_tokens, uint32_t *distinct, uint32_t cap, uint32_t *n_layers,
                   uint32_t *n_expert, err_t *err);
    /* The recorded programs as text, every dispatch and what stands between
     * it and the next (bench --plan). */
    int (*print_plan)(void *impl, FILE *f, err_t *err);
} engine_backend;

#define ENGINE_CHUNK_HISTORY 8

/* Tokens/s bookkeeping kept by engine.c (backend-neutral). */
#define ENGINE_RECENT_DECODES 32
typedef struct {
    double last_prefill_tps;
    uint64_t n_prefill_tokens, n_decode_tokens;
    double prefill_seconds, decode_seconds;
    double recent_decode_s[ENGINE_RECENT_DECODES]; /* ring of single-token eval times */
    uint32_t n_recent, recent_at;
} engine_counters;

typedef struct {
    const engine_backend *be;
    void *impl;
    const model *m;
    engine_params params;
    uint32_t n_past;
    atomic_bool cancel;
    engine_counters counters;
    sampler *pick;         /* sampling on the CPU: scratch */
    float *pick_logits;    /* (n_vocab) */
    /* the latest prompt chunks: tokens and seconds (params.chunk_seconds) */
    uint32_t chunk_n[ENGINE_CHUNK_HISTORY];
    double chunk_s[ENGINE_CHUNK_HISTORY];
    uint32_t chunks_seen;
    /* Called after each chunk of a prompt (tokens done of the call's
     * total, seconds since it began), on the caller's thread. */
    void (*prompt_progress)(void *user, uint32_t done, uint32_t total, double seconds);
    void *prompt_progress_user;
} engine;

int engine_open(engine *e, const engine_backend *be, const model *m, const engine_params *p, err_t *err);
void engine_close(engine *e);
/* Returns 0, -1 on error, or 1 when cancelled (n_past then counts the chunks done). */
int engine_eval(engine *e, const int32_t *tokens, uint32_t n_tokens, const engine_output *out, err_t *err);
void engine_rewind(engine *e, uint32_t n_past);
void engine_request_cancel(engine *e);
void engine_clear_cancel(engine *e);
void engine_get_stats(engine *e, engine_stats *st);
/* params.chunk_seconds for the calls that follow (bench: whole chunks for
 * the prompt figure). */
void engine_set_chunk_seconds(engine *e, double seconds);

/* The CPU reference backend (core/ref_engine.c). */
extern const engine_backend ref_engine_backend;

#endif
