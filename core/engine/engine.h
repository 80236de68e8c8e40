/* engine.h: the backend-neutral inference interface.
 *
 * One small struct of function pointers (as calm's Transformer.forward)
 * drives both the CPU reference (core/ref/ref_engine.c) and the Vulkan core
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
 *
 * Speculative decoding with the model's NextN (MTP) block -- optional
 * entries draft and verify; a backend without them, a model without the
 * block, or params.draft off means no drafting (engine_can_draft) and no
 * cost.  Where a backend has them, it promises:
 *  - NextN state: with params.draft on and the block in the file, eval
 *    keeps each evaluated position's final hidden state h_p (after
 *    output_norm, on the device for a GPU); NextN row p is made from
 *    (h_{p-1}, token x_p), h_{-1} = 0, and has its own latent cache
 *    (ref_forward.h says what the block computes).  Forgetting positions
 *    (engine_rewind) forgets its rows too; engine.c keeps the book of which
 *    rows are made from the cache's own tokens (engine.nx_past).
 *  - draft(tokens, n, pos, req): makes rows pos..pos+n-1 from tokens[0..n)
 *    (tokens[n-1] is the newest token, not in the main cache yet), then, if
 *    req->k > 0, drafts k tokens: d_1 from the NextN logits of row
 *    pos+n-1, d_i from row pos+n-2+i made from (the previous row's output
 *    after its head norm, d_{i-1}) -- llama.cpp's MTP draft loop -- each
 *    drawn by the sampler's definition with req->rq[i] (q_i: no penalties;
 *    greedy: the best).  Only the k ids come back; the backend keeps q_1..
 *    q_k for the verify that follows.  The chained rows are scratch.
 *  - verify(tokens[0..k], pos, req): evaluates the k+1 tokens at pos..pos+k
 *    as eval does, with each position's distribution p_i (the sampler's
 *    definition with req->rq[i], penalties included) exactly what eval of
 *    the same tokens one at a time gives -- bit for bit, or greedy output
 *    would change with drafting -- and decides on the backend
 *    (sampler_spec.h): the drafts d_1.. are tested in order against p_0..
 *    with req->accept_u; at the first rejection the token is the residual
 *    draw of (p_i, q_{i+1}) with rq[i].uniform; after k acceptances the
 *    bonus token is sampler_pick of p_k with rq[k].uniform.  It returns only
 *    j (drafts kept) and that token: no distribution leaves the device.
 *    own_drafts false (drafts from elsewhere) means q one-hot on them.
 *    The cache then holds positions pos..pos+k; engine_verify keeps
 *    pos..pos+j (the last token and the accepted drafts) and forgets the
 *    rest.
 *  - Exactness: greedy output is token for token the output without
 *    drafting; sampled output follows the same distribution (the random
 *    stream is consumed differently: the same seed and settings give the
 *    same output, which differs from the output without drafting).
 */
#ifndef GLM_ENGINE_H
#define GLM_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "model/model.h"
#include "sample/sampler.h"

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
    /* Max tokens per backend eval call (a prompt chunk's ceiling);
     * ENGINE_BATCH_AUTO: the backend's choice, written back here when the
     * engine opens -- the Vulkan core the largest its memory plan holds
     * beside the weights and the cache (vk_engine.c), the others
     * ENGINE_DEFAULT_BATCH.  engine_params_default sets the default. */
    uint32_t n_batch;
    int n_threads;         /* CPU backend threads (0: all cores) */
    int device_index;      /* Vulkan device, -1: best available */
    /* The most device memory a GPU backend may place the model, its KV
     * cache and activations in, in bytes (`--gpu-mem`); 0: what the device
     * has free.  A context left to the engine (n_ctx 0) is the largest
     * that fits under it; the CPU backends have no use for it. */
    uint64_t gpu_mem;
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
    /* NextN drafting: ENGINE_DRAFT_OFF (the default: nothing kept for it),
     * ENGINE_DRAFT_AUTO, or a fixed number of drafts per step (1..
     * ENGINE_MAX_DRAFT).  Non-zero makes a backend that can draft keep the
     * NextN state when the model has the block; the number is the
     * decoder's policy (decoder.h).  engine_open turns AUTO into OFF on a
     * backend where drafting does not pay (engine_backend.draft_pays). */
    int draft;
    /* A GPU backend's routed experts in host memory (llama.cpp's
     * --n-cpu-moe): N keeps those of blocks 0..N-1 in the mapped file,
     * computed by the CPU, and the rest of the model on the device (0:
     * none); ENGINE_CPU_MOE_AUTO (engine_params_default) as many of the
     * first blocks as the device's memory needs, none when all fits. */
    int n_cpu_moe;
    /* Every position's logits of a multi-token eval will be asked for
     * (engine_output.all_positions: `glmchat logits`, the oracle checks).
     * A GPU backend then keeps n_batch rows of them in host memory and
     * records the prompt graph that writes them there; without it that
     * memory is one row (the chat, bench and -p never read more: n_batch x
     * n_vocab floats of pinned memory are 0.63 GB for GLM-4.7-Flash at a
     * batch of 1024), and such a request of a prompt batch is an error.
     * The last position's logits need no flag.  The CPU backends write
     * into the caller's buffer and ignore it. */
    bool all_logits;
} engine_params;

#define ENGINE_CPU_MOE_AUTO (-1)

#define ENGINE_BATCH_AUTO 0u
/* The batch of engine_params_default and of backends that do not plan
 * one.  On the CPU a larger one did not pay: tiny-glm-a Q4_0, 2 threads,
 * pp1024 in whole chunks of 256 ~4,500 tokens/s, of 1024 ~4,700-5,400 (a
 * loaded 2-core machine; within its noise), and the chat cuts chunks by
 * time anyway.  The tests' chunking stays what it was. */
#define ENGINE_DEFAULT_BATCH 256u

#define ENGINE_DRAFT_OFF 0
#define ENGINE_DRAFT_AUTO (-1)
#define ENGINE_MAX_DRAFT (SAMPLER_SPEC_SLOTS - 1)

/* What a draft call asks for (engine.h's Promises). */
typedef struct {
    uint32_t k;                  /* drafts, 0..ENGINE_MAX_DRAFT (0: the rows only) */
    const sampler_request *rq;   /* [k] q_i's sampling (sampler_prepare_draft) */
    int32_t *ids;                /* [k] out: d_1..d_k */
} engine_draft_req;

/* What a verify call asks for (engine.h's Promises). */
typedef struct {
    uint32_t k;                  /* drafts: tokens[1..k] */
    /* [k+1] rq[i]: the sampler's request for the token after tokens[0..i]
     * (sampler_prepare_ahead: the window with d_1..d_i); its uniform draws
     * the residual (i < k) or the bonus token (i = k) */
    const sampler_request *rq;
    const uint32_t *accept_u;    /* [k] the acceptance tests' bits */
    bool own_drafts;             /* the drafts of the draft call just before (else q one-hot) */
    uint32_t *n_accepted;        /* out: j */
    int32_t *token;              /* out: the token after d_1..d_j */
} engine_verify_req;

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

/* For backends: out's top_k (best first: higher logit, then lower id;
 * -1 / -inf past the vocabulary) and log_z from the last position's
 * logits `last` (n_vocab of them), where out asks for them. */
void engine_last_row_outputs(const float *last, uint32_t n_vocab, const engine_output *out);

typedef struct {
    char name[48];
    double calls_per_token;
    double us_per_token;
    double bytes_per_token; /* read + written */
    double gbps;
} engine_kernel_stat;

#define ENGINE_MAX_KERNEL_STATS 64

/* Where a decoded token's time goes when the routed experts of some layers
 * are in host memory (the Vulkan core's --n-cpu-moe): means per token over
 * the tokens measured, each a sum over the token's parts or host layers.
 * GPU figures are from timestamps, host figures from the host's clock. */
typedef struct {
    uint32_t layers;       /* host layers (0: no split, the rest is 0) */
    uint64_t tokens;       /* tokens measured */
    double token_us;       /* host: the first part submitted -> the last seen finished */
    double gpu_us;         /* the GPU parts (layers + 1 of them), first dispatch to last */
    double idle_us;        /* the GPU between them: a part ended -> the queue reached the next one (a
                              device that runs one submit at a time counts a side part here too) */
    double wait_us;        /* host: a part submitted -> seen finished */
    double cpu_us;         /* the CPU's routed experts */
    double turn_us;        /* host: a part seen finished -> the next submitted (the CPU's experts and the submits) */
    double side_us;        /* the shared experts' side parts on the GPU, during the host's turns */
    /* prompt batches that brought the host layers' experts to the GPU
     * (the Vulkan core's hx_stream): totals over the engine's life, host clock */
    uint64_t streamed;     /* batches */
    double stream_s;       /* their time: the first part submitted -> the last seen finished */
    double layout_s;       /* of which the host laid the experts out */
    double stall_s;        /* of which the host waited for a staging buffer the GPU still copied from */
    uint64_t packed_bytes; /* host memory of the CPU's packed copies of the experts (0: the file's rows) */
} engine_split_stat;

typedef struct {
    double prefill_tps;          /* last prefill call */
    double decode_tps;           /* recent single-token evals */
    uint64_t n_prefill_tokens;   /* totals over the engine's life */
    uint64_t n_decode_tokens;
    double prefill_seconds;
    double decode_seconds;
    uint32_t dispatches_per_token; /* dependent dispatches per decoded token (0: n/a) */
    double us_per_token_measured;  /* GPU time of a token from timestamps (0: n/a) */
    /* the two above are the CPU backend's: its steps (each ends at a barrier
     * of its threads) and its own clock, not GPU dispatches and timestamps */
    bool cpu_steps;
    uint32_t n_kernels;
    engine_kernel_stat kernels[ENGINE_MAX_KERNEL_STATS];
    engine_split_stat split;     /* experts in host memory (layers 0: none) */
    /* speculative steps over the engine's life (their tokens and time are
     * also in n_decode_tokens and decode_seconds, not in decode_tps) */
    uint64_t spec_steps, spec_drafted, spec_accepted;
    uint64_t spec_tokens;        /* tokens they produced: accepted + one per step */
    double spec_seconds;         /* drafting and verifying */
    double spec_host_seconds;    /* of spec_seconds, the host's draws and acceptance tests
                                  * (spec_host.c), the forward passes left out */
    /* The Vulkan core: 1 + the submits (decodes and verifies) before the
     * latest one whose dependency wait or tagged-word poll gave up, while
     * its programs join their steps by barriers since (slower); 0 if none
     * did, or once the counters were tried again and held */
    uint64_t sync_gave_up_at;
    uint32_t sync_give_ups;      /* how many gave up in the session */
    uint64_t sync_retry_at;      /* on barriers: the submit at which the counters are
                                  * tried again; 0: barriers for good */
} engine_stats;

/* How far inside an eval a backend honours the cancel flag
 * (engine_backend.set_cancel). */
typedef enum {
    ENGINE_CANCEL_BETWEEN_EVALS = 0, /* only between chunks */
    /* between the layers whose routed experts are in host memory (the
     * Vulkan backend's split): a chunk's fixed part, those experts' weights
     * read once a chunk (~0.4 s on the H200's host at N = 47), is held to a
     * quarter of a chunk (ENGINE_CHUNK_FIXED_SHARE_CANCELLABLE) instead of
     * half, since Esc no longer waits for the chunk; the time target holds
     * for the longest stretch between two looks at the flag (eval_stretch:
     * one host layer's turn where all are in host memory, the GPU's rest of
     * the model after the last host layer where few are) */
    ENGINE_CANCEL_HOST_LAYERS = 1,
    /* between every layer (the CPU backend): chunks are also cut to
     * ENGINE_CHUNK_S_CANCELLABLE -- about a second, where the CPU backend
     * reads a prompt near its whole-chunk speed (run 40: 0.16 s chunks of
     * 4-7 tokens read Q4_0 at 47 against 77 tokens/s on 16 threads) and
     * the progress line still moves every second */
    ENGINE_CANCEL_EVERY_LAYER = 2,
} engine_cancel_reach;
#define ENGINE_CHUNK_S_CANCELLABLE 1.0
#define ENGINE_CHUNK_FIXED_SHARE_CANCELLABLE 0.25

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
    /* Optional: the engine's cancel flag, which eval then also checks
     * within a multi-token eval (between layers) and returns 1 when it saw
     * it set, keeping nothing of that eval (its positions count as not
     * written).  Returns how far in this instance does (the Vulkan backend
     * only with experts in host memory), which sets how the prompt's
     * chunks are cut (engine_cancel_reach). */
    engine_cancel_reach (*set_cancel)(void *impl, const atomic_bool *flag);
    /* Optional, with set_cancel: of the last multi-token eval, the longest
     * stretch in seconds during which the cancel flag was not looked at
     * (from its start to the first look, between two looks, from the last
     * look to its end); 0 where it is not known (the whole eval counts).
     * Where it is a small share of a chunk, the chunk may be that much
     * longer for the same Esc bound (engine_next_chunk). */
    double (*eval_stretch)(void *impl);
    /* create() chooses n_batch when it is ENGINE_BATCH_AUTO (and writes
     * it back); otherwise engine_open gives such a backend
     * ENGINE_DEFAULT_BATCH. */
    bool plans_batch;
    /* NextN drafting (both or neither; see the Promises above). */
    bool draft_pays; /* ENGINE_DRAFT_AUTO drafts here: verifying k+1 tokens at once costs far
                      * less than k+1 single-token evals (a GPU, where step latency bounds a
                      * token); elsewhere auto is off and only a fixed k drafts */
    int (*draft)(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_draft_req *req,
                 err_t *err);
    int (*verify)(void *impl, const int32_t *tokens, uint32_t pos, const engine_verify_req *req, err_t *err);
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
    /* Backends that time every step of every eval (the CPU backends): the
     * per-step figures of the prompt tokens evaluated since the last
     * reset_profile (per prompt token), and the start of a new table
     * (which also starts the Vulkan core's engine_split_stat anew). */
    void (*prompt_stats)(void *impl, engine_stats *st);
    void (*reset_profile)(void *impl);
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
    uint64_t spec_steps, spec_drafted, spec_accepted, spec_tokens;
    double spec_seconds;
} engine_counters;

typedef struct {
    const engine_backend *be;
    void *impl;
    const model *m;
    engine_params params;
    uint32_t n_past;
    atomic_bool cancel;
    engine_cancel_reach cancel_reach; /* how far inside an eval the backend checks cancel (set_cancel) */
    engine_counters counters;
    sampler *pick;         /* sampling on the CPU: scratch */
    float *pick_logits;    /* (n_vocab) */
    /* the latest prompt chunks: tokens and seconds (params.chunk_seconds) */
    uint32_t chunk_n[ENGINE_CHUNK_HISTORY];
    double chunk_s[ENGINE_CHUNK_HISTORY];
    uint32_t chunks_seen;
    double chunk_a, chunk_b; /* the last line fitted to them: seconds a chunk, a token */
    bool chunk_fitted;
    /* the latest chunk's longest stretch without a look at the cancel flag,
     * as a share of its time (backend eval_stretch; 0: unknown) */
    double chunk_stretch_share;
    /* an eval has run: the first pays first-use costs (the driver's lazy
     * work, cold caches; 0.19-0.23 s for a 16-token chunk on the H200 that
     * then reads 512 tokens in 0.073-0.087 s), so its time is left out of
     * the chunk history, where it made the line's slope negative and the
     * next chunks half the batch (run 42) */
    bool evaluated;
    /* Called after each chunk of a prompt (tokens done of the call's
     * total, seconds since it began), on the caller's thread. */
    void (*prompt_progress)(void *user, uint32_t done, uint32_t total, double seconds);
    void *prompt_progress_user;
    /* drafting (engine_can_draft): */
    int32_t *tokens;       /* (n_ctx) what the cache holds, for the NextN rows */
    uint32_t nx_past;      /* NextN rows 0..nx_past-1 are made from the cache's tokens */
    uint32_t draft_pos;    /* the row the last draft call made from draft_last (UINT32_MAX: none) */
    int32_t draft_last;
    uint32_t draft_k;
    int32_t draft_ids[ENGINE_MAX_DRAFT];
} engine;

int engine_open(engine *e, const engine_backend *be, const model *m, const engine_params *p, err_t *err);
void engine_close(engine *e);
/* Returns 0, -1 on error, or 1 when cancelled (n_past then counts the chunks done). */
int engine_eval(engine *e, const int32_t *tokens, uint32_t n_tokens, const engine_output *out, err_t *err);
void engine_rewind(engine *e, uint32_t n_past);
void engine_request_cancel(engine *e);
void engine_clear_cancel(engine *e);
void engine_get_stats(engine *e, engine_stats *st);
/* The next prompt chunk's tokens with `left` to go: n_batch, or what
 * params.chunk_seconds allows by the chunks before (engine.c); at most
 * left.  engine_note_chunk records a chunk's size and time (engine_eval
 * does, for every chunk of a prompt).  Exposed for the tests of the fit. */
uint32_t engine_next_chunk(const engine *e, uint32_t left);
void engine_note_chunk(engine *e, uint32_t n, double seconds);
/* params.chunk_seconds for the calls that follow (bench: whole chunks for
 * the prompt figure). */
void engine_set_chunk_seconds(engine *e, double seconds);

/* ---- speculative decoding (see the Promises) ---- */

/* The backend drafts, the model has a NextN block, params.draft is on. */
bool engine_can_draft(const engine *e);
/* Brings the NextN rows up to date with the cache (in chunks of n_batch;
 * 1 when cancelled between them), then makes the row of `last` -- the
 * token for position n_past -- and drafts req->k tokens from it. */
int engine_draft(engine *e, int32_t last, const engine_draft_req *req, err_t *err);
/* Verifies tokens[0..k] = [last, d_1..d_k] at n_past (k + 1 <= n_batch);
 * n_past then counts last and the accepted drafts. */
int engine_verify(engine *e, const int32_t *tokens, const engine_verify_req *req, err_t *err);
/* One speculative step after `last` (the sampled token for position
 * n_past; smp holds the window with it): k drafts (or forced[0..k), drafts
 * from elsewhere: forced acceptance when they are the greedy continuation;
 * the NextN block still runs, so the cost is the real one), one verify;
 * out[0..*n_out) = the accepted drafts and the token after them (not yet
 * evaluated).  Random bits from smp, in this order: the k drafts, the k
 * acceptance tests, the k + 1 verify requests (none when greedy).
 * Needs n_past + k + 1 <= n_ctx and k + 1 <= n_batch. */
int engine_spec_step(engine *e, sampler *smp, int32_t last, uint32_t k, const int32_t *forced, int32_t *out,
                     uint32_t *n_out, err_t *err);

/* The CPU reference backend (core/ref/ref_engine.c): the oracle ("ref"). */
extern const engine_backend ref_engine_backend;
/* The fast CPU backend (core/cpu/cpu_engine.c): 8-bit activations, integer
 * kernels ("cpu"). */
extern const engine_backend cpu_engine_backend;

#endif
