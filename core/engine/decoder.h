/* decoder.h: the decode thread.
 *
 * The UI never waits on the model: a decoder owns the engine on a thread of
 * its own, takes one job at a time (a prompt, stop tokens, sampling), and
 * reports everything as events on a thread-safe queue whose file descriptor
 * becomes readable when events are waiting (for the UI's poll()).
 *
 * Promises:
 *  - the engine is created on the thread (load progress arrives as events,
 *    then READY or ERROR);
 *  - a job reuses the KV cache of the longest common prefix with what the
 *    cache holds (a new turn evaluates only the new tokens; /retry none);
 *  - generated text arrives through the tokenizer's streaming decoder, so
 *    a TEXT event never ends inside a UTF-8 sequence;
 *  - decoder_cancel() stops a job within one token, and during a prompt
 *    within one prompt chunk, which the engine cuts to ~DECODER_CHUNK_S of
 *    work (engine_params.chunk_seconds, unless the caller set it); the
 *    text generated so far has been delivered;
 *  - while a prompt is evaluated the statistics say how far it got (tokens
 *    done of total, tokens/s);
 *  - per-token statistics are published at most every 50 ms (so reading
 *    them never slows decoding) and read without blocking the thread for
 *    longer than a copy; a job's last snapshot (not busy, every count
 *    final) is published before its DONE or ERROR is posted;
 *  - between jobs the memory freed during one goes back to the system
 *    (glibc keeps it otherwise: a long chat's RSS crept up, see decoder.c);
 *  - drafting (engine.h, NextN speculative decoding) where the engine can:
 *    each step drafts k tokens and verifies them in one batched pass, keeps
 *    the accepted ones and forgets the rest; greedy answers are token for
 *    token those without drafting, sampled ones follow the same
 *    distribution (the random stream is consumed differently: the same
 *    seed and settings give the same answer).  Under ENGINE_DRAFT_AUTO k
 *    follows the measured acceptance (decoder.c, "the drafting policy"),
 *    never the clock, so that this holds. */
#ifndef GLM_DECODER_H
#define GLM_DECODER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "base/error.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "text/tokenizer.h"

typedef enum {
    DEC_EV_PROGRESS, /* engine load: text = stage, done / total bytes */
    DEC_EV_READY,    /* engine open: text = the backend's description */
    DEC_EV_PREFILL,  /* prompt evaluated: n_prompt, n_reused, prefill_tps */
    DEC_EV_TEXT,     /* generated text (token = the token it came from) */
    DEC_EV_DONE,     /* job over: stop, n_gen, decode_tps */
    DEC_EV_ERROR,    /* text = one-line message; the job (or the load) failed */
} dec_ev_type;

typedef enum {
    DEC_STOP_EOS,    /* a stop token */
    DEC_STOP_LIMIT,  /* n_predict reached */
    DEC_STOP_CTX,    /* the context is full */
    DEC_STOP_CANCEL, /* decoder_cancel() */
} dec_stop;

typedef struct {
    dec_ev_type type;
    uint32_t job;
    char *text;       /* owned by the event (decoder_event_free); NUL-terminated */
    size_t len;       /* TEXT: bytes in text (model output may hold NUL bytes) */
    int32_t token;
    dec_stop stop;
    uint32_t n_prompt;  /* tokens in the job's prompt */
    uint32_t n_reused;  /* of those, found in the KV cache */
    uint32_t n_gen;     /* tokens generated */
    uint32_t n_after_cancel; /* DONE: tokens generated after decoder_cancel() was called */
    uint32_t n_steps, n_drafted, n_accepted; /* DONE: speculative steps, drafts made, drafts kept */
    double prefill_tps, decode_tps;
    uint64_t done, total;
} dec_event;

typedef struct {
    const int32_t *prompt;  /* the whole context: every message, rendered */
    uint32_t n_prompt;
    int n_predict;          /* -1: until a stop token or the context is full */
    const int32_t *stop;    /* tokens that end the answer */
    uint32_t n_stop;
    sampler_params sampling;
    /* Drafting: DEC_DRAFT_SETTING (engine_params.draft of decoder_start),
     * DEC_DRAFT_OFF, ENGINE_DRAFT_AUTO or 1..ENGINE_MAX_DRAFT drafts per
     * step (where the engine can draft at all). */
    int draft;
    /* Forced acceptance (bench): the drafts are forced[n..], n the tokens
     * generated so far -- the answer's own greedy continuation, computed
     * ahead, so that every draft is kept: the ceiling of drafting.  The
     * NextN block still runs.  Drafting stops where forced runs out. */
    const int32_t *forced;
    uint32_t n_forced;
} dec_job;

#define DEC_DRAFT_SETTING 0
#define DEC_DRAFT_OFF (-2)

typedef struct {
    engine_stats engine;    /* the backend's view (kernels, tokens/s) */
    uint32_t n_past;        /* tokens in the KV cache */
    uint32_t n_ctx;
    bool busy;
    double decode_tps;      /* the current / last job's tokens per second */
    double prefill_tps;     /* the last prompt's, or the running one's so far */
    uint32_t prompt_done;   /* the prompt being evaluated: tokens done of its */
    uint32_t prompt_total;  /* ... new tokens (both 0 when none is) */
    /* drafting, the current / last job's */
    bool draft_on;          /* the job drafts (block, backend and setting allow it) */
    uint32_t draft_k;       /* drafts per step now (0: paused, or not drafting) */
    uint32_t spec_steps, spec_drafted, spec_accepted;
    /* Over the decoder's life, counted as the answers count them (the one
     * source of the chat's figures: an answer's header says n_gen of its
     * DONE, and these are their sums): */
    uint64_t n_prompt_tokens;  /* prompt tokens evaluated (the cache's reuse not counted) */
    uint64_t n_gen_tokens;     /* tokens generated, the first of each answer included */
    double prompt_seconds;     /* time reading prompts */
    double gen_seconds;        /* time generating after them */
    uint64_t seq;           /* increments with every published snapshot */
} dec_stats;

/* The prompt chunks' target time.  Esc must stop a prompt within 0.2 s
 * (issue 25), and the cancel is seen between chunks, so a chunk may take
 * at most that; 0.16 s leaves a fifth of it for the fit's error (a + b n
 * from the last chunks, engine.c: a chunk deeper in the prompt attends to
 * more positions than the ones it was fitted on) and the event's way to
 * the UI.  Large enough for full speed: on an H200 (Q4_0, run 40) a chunk
 * costs ~30 ms + ~0.12 ms a token (pp4096 in whole chunks of 512, 1024 and
 * 2048: 90, 151 and 274 ms a chunk), so 0.16 s reaches the GPU's batch cap
 * of 1024 tokens early in a prompt; 0.15 s settled at ~820 tokens (131 ms)
 * and read pp4096 at 1.09x llama.cpp, 0.12 s at ~1.0x. */
#define DECODER_CHUNK_S 0.16

typedef struct decoder decoder;

/* Starts the thread, which opens the engine (model and tokenizer must
 * outlive the decoder).  NULL + err only when the thread cannot start. */
decoder *decoder_start(const engine_backend *be, const model *m, const tokenizer *tok,
                       const engine_params *p, err_t *err);
/* Cancels any job, joins the thread, closes the engine, frees everything. */
void decoder_free(decoder *d);

/* Readable while events are queued. */
int decoder_fd(const decoder *d);
/* Pops one event without blocking; false when none is queued. */
bool decoder_next(decoder *d, dec_event *ev);
/* Waits up to timeout_ms (-1: forever) for one event; false on timeout. */
bool decoder_wait(decoder *d, dec_event *ev, int timeout_ms);
void decoder_event_free(dec_event *ev);

/* Queues a job (the arrays are copied).  Returns its id (> 0), or -1 when
 * the engine is not ready, a job is running, or the prompt is empty or
 * longer than the context. */
int decoder_submit(decoder *d, const dec_job *job, err_t *err);
void decoder_cancel(decoder *d);
bool decoder_busy(decoder *d);
/* Forgets the KV cache (the next job evaluates its whole prompt). */
void decoder_reset_cache(decoder *d);
void decoder_get_stats(decoder *d, dec_stats *out);
/* The backend's one-line description once READY ("" before). */
const char *decoder_describe(decoder *d);
/* The engine, for a caller that uses it itself while no job runs (bench:
 * prompt speed, the per-kernel table); NULL before READY.  The next job
 * then starts from an empty cache (as after decoder_reset_cache). */
engine *decoder_engine(decoder *d);
uint32_t decoder_n_ctx(const decoder *d);
uint32_t decoder_n_vocab(const decoder *d);

#endif
