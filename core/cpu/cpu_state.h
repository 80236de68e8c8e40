/* cpu_state.h: the fast CPU forward pass's run state, shared by its parts
 * (cpu_forward.c: set-up, attention, head; cpu_ffn.c: dense and MoE FFN;
 * cpu_steps.c: what both use).
 * Internal to them; the interface is cpu_forward.h. */
#ifndef GLM_CPU_STATE_H
#define GLM_CPU_STATE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "cpu_forward.h"
#include "cpu_matmul.h"
#include "cpu_pack.h"
#include "cpu_pool.h"

/* One activation in every form its consumers read: per kind a buffer of
 * prepared rows, `stride` bytes apart; the F32 form is the float source
 * itself (no copy). */
typedef struct {
    uint8_t *rows[CPU_ACT_KINDS];
    uint64_t stride[CPU_ACT_KINDS];
    uint64_t n; /* elements per row */
    bool owned[CPU_ACT_KINDS];
} cf_act;

typedef struct {
    float *attn_norm;   /* (n_embd) */
    float *q_a_norm;    /* (q_lora) */
    float *kv_a_norm;   /* (kv_lora) */
    float *ffn_norm;    /* (n_embd) */
    float *exp_probs_b; /* (n_expert), NULL without selection bias */
} cf_layer_vecs;

/* One FFN (an expert, the shared experts, a dense block) and its tokens. */
typedef struct {
    const mtensor *gate, *up, *down;
    uint32_t e;         /* matrix index (the expert) */
    uint32_t n_tok;
    const uint32_t *tok;/* rows of xn (NULL: 0..n_tok-1) */
    uint32_t hid_row;   /* its tokens' hidden rows start here, consecutive */
    int hid;            /* hidden buffer: 0 routed pairs, 1 shared/dense */
    uint32_t out_row;   /* its tokens' output rows (moe_out) start here */
    uint32_t units;     /* gate/up work items: ceil(ff / unit rows) */
} cf_ffn_unit;

struct cf_state {
    const model *m;
    const atomic_bool *cancel; /* cf_set_cancel: checked between layers of a multi-token eval */
    bool may_stop;            /* this eval checks it */
    bool stopped;             /* this eval saw it set (written by thread 0 between barriers) */
    const model_config *c;
    const cpu_kernels *k;
    cpu_pool *pool;
    cpu_packs *packs;         /* the Q4_0 matrices packed for k (cpu_pack.h), made at cf_new */
    int n_threads;
    uint32_t n_ctx, n_batch;
    bool kv_f16;
    uint32_t kv_row;          /* kv_lora + rope: one cached position */
    uint32_t ff_sd;           /* hidden width of the shared experts / dense FFN (the larger) */

    uint32_t n_blocks;        /* blocks with a cache and vectors: n_layer, + 1 with the NextN block */
    cf_layer_vecs *vecs;      /* (n_blocks) */
    float *output_norm;       /* (n_embd) */

    /* activations for n_batch tokens */
    float *x;                 /* (B, n_embd) residual stream */
    float *xn;                /* (B, n_embd) normalized input of a sub-block */
    cf_act xn_a;
    float *q_a;               /* (B, q_lora) */
    cf_act q_a_a;
    float *q;                 /* (B, n_head, nope + rope) */
    cf_act qn_a;              /* q_nope: (B * n_head) rows of nope within q */
    float *kv_a;              /* (B, kv_lora + rope) */
    float *q_mla;             /* (B, n_head, kv_lora + rope) absorbed q_nope | roped q_rope */
    float *ctx;               /* (B, n_head, kv_lora) attention-weighted latent */
    cf_act ctx_a;
    float *heads;             /* (B, n_head * v_head) */
    cf_act heads_a;
    float *rope_cs;           /* (B, rope) cos, sin per pair */
    float *router;            /* (B, n_expert) logits, then probs */
    float *sel_score;         /* (n_expert) */
    int32_t *sel;             /* (B, n_used) */
    float *sel_w;             /* (B, n_used) */
    uint32_t *pair_tok;       /* (B * n_used) token of each pair, grouped by expert */
    uint32_t *pair_at;        /* (B * n_used) where pair (t, slot) landed */
    uint32_t *exp_start;      /* (n_expert + 1) */
    uint32_t *cursor;         /* (n_expert) */
    float *hg[2], *hu[2];     /* hidden: [0] (B * n_used, ff_exp), [1] (B, ff_sd) */
    cf_act h_a[2];
    float *moe_out;           /* (B * n_used + B, n_embd) per pair, then shared/dense per token */
    cf_ffn_unit *units;       /* (n_expert + 1) this layer's FFNs */
    uint32_t n_units;

    void **kv;                /* per block (n_ctx, kv_row), f32 or f16 */
    float *scores;            /* (n_threads, ATT_CHUNK + kv_lora) a chunk's scores, weighted latents */
    float *att_part;          /* (chunks of n_ctx, n_head, 2 + kv_lora) one token's partials: m, l, latents */
    cpu_mm *jobs;             /* (n_threads, n_head + 4): each thread's job lists */

    /* the NextN block (cf_params.nextn on a model that has it), block n_layer */
    void *hidden;             /* (n_ctx, n_embd) f32/f16 as the cache: each position's final hidden state */
    float *nx_cat;            /* (B, 2 n_embd) [enorm(embedding) | hnorm(h)] */
    cf_act nx_cat_a;
    float *nx_h;              /* (B, n_embd) the rows' h */
    float *nx_out;            /* (n_embd) the last row's normed output of the latest NextN run */
    float *nx_enorm, *nx_hnorm, *nx_head_norm; /* (n_embd) */
    const float *nx_hin;      /* the current NextN run's given h rows, or NULL */

    /* the current eval */
    const int32_t *tokens;
    uint32_t n, pos;
    float *logits;
    bool all_logits;

    /* profile: [0] prompt, [1] decode; thread 0 writes */
    cf_profile prof[2];
    cf_profile *cur;
    double t_step;
};

/* ---- shared by the parts (cpu_steps.c) ---------------------------------- */

/* Barrier ending a step of kind st; thread 0 books its time (and `bytes`
 * read, and a call when `count`). */
void cf_step_end(cf_state *s, int tid, cf_step st, double bytes, bool count);
/* The act kinds weights w (up to 4, NULL ends) multiply with, as a mask. */
unsigned cf_kinds(const cf_state *s, const mtensor *w0, const mtensor *w1, const mtensor *w2, const mtensor *w3);
/* Prepares elements [from, to) of row r (n elements: the consumer's row
 * length, at most a->n) of activation a, whose floats start at src_row, in
 * the kinds of `mask` (the F32 form needs no work). */
void cf_prepare(const cf_state *s, const cf_act *a, const float *src_row, uint64_t r, uint64_t n, uint64_t from,
                uint64_t to, unsigned mask);
/* The job fields x, xs for weights w reading activation a. */
void cf_job_input(const cf_state *s, cpu_mm *job, const cf_act *a, const mtensor *w);
void cf_rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps);
/* Every thread: rows [first, end) of dst = rmsnorm(src) (rows of a->n,
 * norm weights w), then prepared into the same rows of a in the kinds of
 * `mask`; with fewer rows than threads each row is split into pieces of
 * whole blocks. */
void cf_norm_prepare(const cf_state *s, const cf_act *a, float *dst, const float *src, const float *w,
                     uint32_t first, uint32_t end, unsigned mask, int tid, int nth);

/* ---- cpu_ffn.c ----------------------------------------------------------- */

/* The FFN of layer il for the eval's tokens (every thread): norm, routing
 * or dense, experts, residual into s->x. */
void cf_ffn(cf_state *s, uint32_t il, int tid);

#endif
