/* vk_engine.h: the Vulkan engine's state, shared by vk_engine.c (the
 * engine_backend), vk_forward.c (the decode graph), vk_prefill.c (the
 * prompt graph) and vk_profiler.c.  Internal to gpu/. */
#ifndef GLM_VK_ENGINE_H
#define GLM_VK_ENGINE_H

#include "engine.h"
#include "model.h"
#include "vk_kernels.h"
#include "vk_sample.h"
#include "vk_weights.h"

/* Profiling state of one recorded command buffer. */
typedef struct {
    VkCommandBuffer cb;
    VkQueryPool qpool;       /* VK_NULL_HANDLE when untimed */
    uint32_t nq, qcap;
    int32_t *q_disp;         /* per query: dispatch index, or a mark (< 0) */
} vk_variant;

/* A program family: the same graph recorded as several variants. */
typedef struct {
    vk_prog prog;
    vk_variant plain;        /* no timestamps (PROFILE_OFF) */
    vk_variant *sampled;     /* one per layer: that layer + head/tail timed */
    uint32_t n_sampled;
    vk_variant full;         /* every dispatch timed (bench --profile) */
    uint32_t next_sample;
} vk_family;

typedef struct {
    double *last_us;         /* per dispatch: the latest measurement */
    uint32_t *seen;          /* per dispatch: measurements so far */
    uint32_t n_disp;
    double token_us;         /* the latest whole-token GPU time */
    uint64_t tokens_timed;
} vk_profile;

typedef struct {
    vk_ctx c;
    vk_pipes pipes;
    vk_tuning tune;          /* filled once at create (defaults, GLMCHAT_DEP_FLAGS, engine_params.tune) */
    vk_kb kb;
    err_t kerr;
    const model *m;
    engine_params p;
    char desc[1024];

    vk_arena wts_arena, act_arena, host_arena, bar_arena;
    vk_weights w;
    vk_attn_geom ag;
    vk_topk_geom tg;
    uint32_t n_batch;        /* tokens per prefill graph */

    /* activations (device), sized for n_batch tokens (B) */
    vk_buf x;                /* (B, n_embd) the residual stream */
    vk_buf q_comp;           /* (B, q_lora) the compressed query: q_a's output, before attn_q_a_norm */
    vk_buf kv;               /* (B, kv_lora + rope) kv_a_mqa's output: [latent | k_rope] */
    vk_buf q;                /* (B, n_head, nope + rope) */
    vk_buf q_abs;            /* (B, n_head, RS) absorbed queries [k_b . q_nope | rotated q_rope | 0] */
    vk_buf part;             /* decode attention partials (vk_attn_part_heads, VK_PART_HDR) */
    vk_buf o;                /* (B, n_head, v_head) attention output */
    vk_buf h;                /* (B, n_used + 1, h_z) expert hidden states, the shared expert's last */
    vk_buf rlogits;          /* (B, n_expert) router logits */
    vk_buf ids, wts;         /* (n_layer, B, n_used) chosen experts and their weights */
    vk_buf counters;         /* the router's finished-workgroup counters */
    vk_buf logits;           /* (n_vocab) for the top-K */
    vk_buf qkv;              /* decode: [q_a or q | kv] of the merged matvec (vk_layer_w.qkv_a) */
    vk_buf dep;              /* decode: word 0 failed waits, then VK_DEP_PER_LAYER counters per
                                layer (shaders/dep_flag.glsl); host-visible */
    uint32_t dep_mask;       /* which barriers of a layer are counters instead (tune.dep_flags) */
    bool dep_off;            /* a wait gave up once: the graph is recorded with barriers only */
    uint32_t dep_fallbacks;  /* times that happened (0 or 1) */
    vk_buf qkv_ll, q_ll;     /* decode with LL: qkv, q as tagged words (value, tag), dep_flag.glsl */
    bool ll;                 /* the decode graph keeps qkv, q in qkv_ll, q_ll (tune.ll; off with dep_off) */
    uint32_t epoch;          /* decode submits so far (params[VKP_EPOCH]) */
    uint32_t attn_total;     /* decode attention workgroups so far (params[VKP_ATTN_TOTAL]) */
    /* recording: the counter the next dispatches wait on instead of a barrier */
    vk_vec pend_word;
    uint32_t pend_n;
    bool pend;
    /* prefill only: normalized inputs (x_norm, q_comp_norm), expert hidden
     * states and outputs per (token, slot) pair (hp, yp), attention partials,
     * the expert work list */
    vk_buf x_norm, q_comp_norm, hp, yp, part_pf, moe_list, moe_tiles, moe_ind;
    vk_buf topk_v, topk_i, topk_ms, topk_cnt;
    /* sampling (vk_sample.h): the K best, the slices' parts, counters, the
     * state and bins of the full-vocabulary selection (device) */
    vk_sample_geom sg;
    vk_buf smp_cand_v, smp_cand_i, smp_ms, smp_part, smp_count, smp_state, smp_hist;
    uint32_t h_z, part_cap, part_cap_prefill;
    vk_buf *cache;           /* per layer */
    vk_buf rope;             /* (cos, sin) per position and pair */
    /* host-visible */
    vk_buf params;           /* VKP_* words + token ids */
    vk_buf smp_words;        /* SMP_* words: one token's sampling */
    vk_buf smp_result;       /* SMPR_* words: the token */
    vk_buf out_ids, out_vals;  /* top-K read back */
    vk_buf host_logits;      /* [n_batch][n_vocab] when logits are asked for */

    vk_family decode;        /* one token, sampled (or its top-K) */
    vk_family sample;        /* sampling alone: the token after a prompt */
    vk_family select[VK_SEL_SETS]; /* the full-vocabulary selection (sample_select's passes), by VK_SEL_* set */
    uint32_t select_set;     /* recording: the set being recorded */
    vk_family prefill;       /* n_batch tokens (indirect grids), last token's top-K */
    vk_family prefill_logits;
    VkCommandBuffer copy_logits; /* the logits to host memory, after a decode */
    bool have_prefill;

    vk_profile prof_decode, prof_select[VK_SEL_SETS], prof_sample, prof_prefill;
    uint64_t decoded;        /* decode submits */
    uint64_t selects[VK_SEL_SETS]; /* of which needed the full-vocabulary selection, by set */
    uint64_t prefills;       /* prefill submits (every few are timed) */
    uint64_t sampled_prompts; /* runs of the sampling program after a prompt */
    double decode_gpu_us;    /* from timestamps, recent */
} vk_engine;

#define VK_DEP_PER_LAYER 16u

/* Graph recording (vk_forward.c, vk_prefill.c): the token's work into r. */
int vk_fwd_record_decode(vk_engine *e, vk_rec *r, bool logits_to_host);
int vk_fwd_record_prefill(vk_engine *e, vk_rec *r, bool logits_to_host);
/* Sampling of the logits buffer alone (after a prompt), and the
 * full-vocabulary selection (vk_forward.c; the bool is unused). */
int vk_fwd_record_sample(vk_engine *e, vk_rec *r, bool unused);
int vk_fwd_record_select(vk_engine *e, vk_rec *r, bool unused);
/* The sampling kernels' operands. */
vk_sample_bufs vk_engine_sample_bufs(const vk_engine *e);

/* Profiler (vk_profiler.c).  Variants: plain only; + fully timed; + one
 * sampled variant per layer. */
enum { VK_FAMILY_PLAIN = 0, VK_FAMILY_FULL = 1, VK_FAMILY_SAMPLED = 2 };
int vk_family_build(vk_engine *e, vk_family *f, int (*rec)(vk_engine *, vk_rec *, bool), bool logits, int variants,
                    err_t *err);
void vk_family_free(vk_engine *e, vk_family *f);
/* The variant to submit for this token under profile mode `mode`. */
vk_variant *vk_family_pick(vk_family *f, profile_mode mode);
void vk_profile_collect(vk_engine *e, vk_family *f, vk_variant *v, vk_profile *pr);
void vk_profile_report(const vk_engine *e, const vk_family *f, const vk_profile *pr, engine_stats *st);
/* Adds f's kernels to st's table as run `weight` times per token (a program
 * that runs for some tokens only). */
void vk_profile_add(const vk_family *f, const vk_profile *pr, double weight, engine_stats *st);
void vk_profile_free(vk_profile *pr);

#endif
