/* vk_engine.h: the Vulkan engine's state, by lifetime, shared by
 * vk_engine.c (the engine_backend), vk_forward.c (the decode graph and the
 * sampling programs), vk_prefill.c (the prompt graph) and vk_profiler.c.
 * Internal to gpu/.
 *
 *   the device     the context, pipelines, tuning table and kernel builders
 *                  (the engine's life)
 *   w              weights and layout: the file's tensors on the device
 *                  (vk_weights.h; the engine's life)
 *   b              what a context allocates: activations for n_batch
 *                  tokens, the KV cache for n_ctx, the host-visible words,
 *                  and the geometry they were sized by
 *   rec            the recorded programs and the planner that records them
 *   prof           the profiler: measurements, and the submits counted
 */
#ifndef GLM_VK_ENGINE_H
#define GLM_VK_ENGINE_H

#include "base/threadpool.h"
#include "cpu/cpu_moe_host.h"
#include "engine/engine.h"
#include "model/model.h"
#include "vk_kernels.h"
#include "vk_sample.h"
#include "vk_sync.h"
#include "vk_weights.h"

/* The verify's columns at most (drafting's k + 1, k <= 3; vk_forward.c's
 * VK_PROGRAM_VERIFY), and the bytes between two columns' params words or
 * router counters (a binding's offset: the most any device may ask). */
#define VK_VCOLS 4u
#define VK_VCOL_ALIGN 256u

/* What a context allocates (sized for n_ctx tokens of cache, n_batch of
 * activations: B below), and the host's side of the counters. */
typedef struct {
    uint32_t n_batch;        /* tokens per prefill graph */
    vk_attn_geom ag;         /* the attention kernels for n_ctx on this device */
    vk_topk_geom tg;
    vk_sample_geom sg;
    uint32_t h_z;            /* floats per expert slot of h */
    uint32_t part_cap, part_cap_prefill; /* attention chunks per (token, head): decode, a prompt batch */
    vk_arena act_arena, host_arena, bar_arena; /* device, host-visible (read back), host-written */

    /* activations (device) */
    vk_buf x;                /* (B, n_embd) the residual stream */
    vk_buf q_comp;           /* (B, q_lora) the compressed query: q_a's output, before attn_q_a_norm */
    vk_buf kv;               /* (B, kv_lora + rope) kv_a_mqa's output: [latent | k_rope] */
    vk_buf q;                /* (B, n_head, nope + rope) */
    vk_buf q_abs;            /* (B, n_head, RS) absorbed queries [k_b . q_nope | rotated q_rope | 0] */
    vk_buf part;             /* decode attention partials (vk_attn_part_heads, VK_PART_HDR), a slot per verify column */
    vk_buf o;                /* (B, n_head, v_head) attention output */
    vk_buf h;                /* (B, n_used + 1, h_z) expert hidden states, the shared expert's last */
    vk_buf rlogits;          /* (B, n_expert) router logits */
    vk_buf ids, wts;         /* (n_layer, B, n_used) chosen experts and their weights */
    vk_buf counters;         /* the router's finished-workgroup counters (B, or a slice a verify column) */
    vk_buf logits;           /* (n_vocab) for the top-K */
    vk_buf qkv;              /* decode: [q_a or q | kv] of the merged matvec (vk_layer_w.qkv_a), a slot a verify column */
    vk_buf qkv_ll, q_ll;     /* decode: qkv and q as tagged words (value, tag; shaders/dep_flag.glsl) */
    /* prefill only: normalized inputs, expert hidden states and outputs
     * per (token, slot) pair, attention partials, the expert work list */
    vk_buf x_norm, q_comp_norm, hp, yp, part_pf, moe_list, moe_tiles, moe_ind;
    /* prefill on tensor cores (act16): the fp16 twins of x_norm and
     * q_comp_norm (written by their rmsnorms), o and hp (by the mat-mats
     * that write them), read by the mat-mats (vk_mm_args.x16 / y16) */
    bool act16, act16_out;  /* act16_out: o's and hp's twins too (--tune act16_out) */
    vk_buf x_norm16, q_comp_norm16, o16, hp16;
    vk_buf topk_v, topk_i, topk_ms, topk_cnt;
    /* sampling (vk_sample.h): the K best, the slices' parts, counters, the
     * state and bins of the full-vocabulary selection */
    vk_buf smp_cand_v, smp_cand_i, smp_ms, smp_part, smp_count, smp_state, smp_hist;
    vk_buf *cache;           /* per layer: (n_ctx + VK_CACHE_PAD_ROWS, RS) */
    vk_buf rope;             /* (n_ctx, rope) (cos, sin) pairs */

    /* host-visible */
    vk_buf dep;              /* decode: word 0 failed waits, then the counters (vk_sync.h) */
    vk_buf params;           /* VKP_* words + token ids */
    vk_buf smp_words;        /* SMP_* words: one token's sampling */
    vk_buf smp_result;       /* SMPR_* words: the token */
    vk_buf out_ids, out_vals;  /* top-K read back */
    vk_buf host_logits;      /* [n_batch][n_vocab] with engine_params.all_logits, else [1][n_vocab]; at least
                                [VK_VCOLS] where the engine drafts (the verify's rows) */
    vk_buf vparams;          /* host-written: the verify columns' params words, VK_VCOL_ALIGN-aligned slices */
    uint32_t vparams_stride; /* bytes a slice */
    vk_buf vdep;             /* host-visible: the verify programs' counters (as dep's), a slice per column count */
    uint32_t vdep_stride;    /* bytes a slice */
    uint32_t vepoch[VK_VCOLS + 1]; /* verify submits of n columns so far (its columns' params[VKP_EPOCH]) */
    /* drafting (vk_weights.has_nextn; vk_forward.c's NextN block) */
    vk_buf hid;              /* (n_ctx, n_embd) output_norm(x) per cache position: h_p */
    vk_buf nx_e, nx_cat;     /* (n_embd) the row's token embedding; (2 n_embd) [enorm(e) | hnorm(h)] */
    vk_buf nx_hin;           /* host-written (n_embd): a given h (a chained draft row) */
    vk_buf nx_out;           /* host-visible (n_embd): head_norm(x) of the latest row */
    uint32_t epoch;          /* decode submits so far (params[VKP_EPOCH]) */
    uint32_t attn_total;     /* decode attention workgroups so far (params[VKP_ATTN_TOTAL]) */
} vk_bufs;

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

/* What a family records. */
typedef enum {
    VK_PROGRAM_DECODE,       /* one token, sampled (or its top-K) */
    VK_PROGRAM_SAMPLE,       /* sampling alone: the token after a prompt */
    VK_PROGRAM_SELECT,       /* the full-vocabulary selection of one set (VK_SEL_*) */
    VK_PROGRAM_PREFILL,      /* n_batch tokens, the last one's top-K */
    VK_PROGRAM_PREFILL_LOGITS, /* n_batch tokens, every position's logits to host memory (all_logits only) */
    VK_PROGRAM_DECODE_PART,  /* one token, part `set` of the decode graph cut at the host layers (vk_hostmoe.c) */
    VK_PROGRAM_DECODE_SIDE,  /* one token, host layer `set`'s side part: what the GPU runs during the CPU's turn */
    VK_PROGRAM_PREFILL_PART, /* n_batch tokens, part `set` of the prompt graph so cut */
    VK_PROGRAM_PREFILL_LOGITS_PART, /* the same with every position's logits to host memory */
    VK_PROGRAM_PREFILL_STREAM_PART, /* n_batch tokens, part `set` of the prompt graph cut before each host
                                       layer's MoE, that layer's experts copied to the device first
                                       (vk_hostmoe_stream.c) */
    VK_PROGRAM_PREFILL_LOGITS_STREAM_PART, /* the same with every position's logits to host memory */
    VK_PROGRAM_NEXTN,        /* one NextN row from the kept h of the position before */
    VK_PROGRAM_NEXTN_GIVEN,  /* ... from the h the host wrote (nx_hin) */
    VK_PROGRAM_NEXTN_KV,     /* a NextN row's cache row alone, from the kept h (a row whose logits and
                                output no one reads: vk_nextn_rows) */
    VK_PROGRAM_NEXTN_KV_BATCH, /* ... of a batch of up to n_batch positions, on the prompt graph's kernels */
    VK_PROGRAM_VERIFY,       /* `set` tokens (2..VK_VCOLS) through the decode graph at once, each position's
                                logits to host memory (drafting's verify; vk_forward.c) */
} vk_program;

/* The recorded programs, and the planner that recorded them. */
typedef struct {
    vk_sync sync;
    vk_family decode;
    vk_family sample;
    vk_family select[VK_SEL_SETS]; /* by VK_SEL_* set */
    vk_family prefill, prefill_logits;
    VkCommandBuffer copy_logits; /* the logits to host memory, after a decode */
    vk_family nextn[2];      /* drafting: VK_PROGRAM_NEXTN, VK_PROGRAM_NEXTN_GIVEN */
    vk_family nextn_kv;      /* drafting: VK_PROGRAM_NEXTN_KV */
    vk_family nextn_kv_batch; /* drafting: VK_PROGRAM_NEXTN_KV_BATCH (where it fits) */
    vk_family verify[VK_VCOLS + 1]; /* drafting: VK_PROGRAM_VERIFY of n columns at [n] (n >= 2; where recorded) */
} vk_programs;

typedef struct {
    double *last_us;         /* per dispatch: the latest measurement */
    uint32_t *seen;          /* per dispatch: measurements so far */
    uint32_t n_disp;
    double token_us;         /* the latest whole-token GPU time */
    uint64_t tokens_timed;
} vk_profile;

/* The profiler's measurements, and the submits they are shares of. */
typedef struct {
    vk_profile decode, select[VK_SEL_SETS], sample, prefill;
    uint64_t decoded;        /* decode submits */
    uint64_t verified;       /* verify submits (drafting; each n columns) */
    uint64_t nx_batched;     /* NextN cache rows made by the batched program (drafting) */
    uint64_t selects[VK_SEL_SETS]; /* of which needed the full-vocabulary selection, by set */
    uint64_t prefills;       /* prefill submits (every few are timed) */
    uint64_t sampled_prompts; /* runs of the sampling program after a prompt */
    uint64_t gave_up_at;     /* engine_stats.sync_gave_up_at (0 once the counters are back) */
    uint32_t give_ups;       /* engine_stats.sync_give_ups */
    uint64_t retry_at;       /* engine_stats.sync_retry_at */
} vk_prof_state;

/* Routed experts in host memory (vk_hostmoe.c): the layers whose experts
 * the CPU computes, the buffers the two sides hand each other, and the
 * decode graph cut into parts at those layers. */
typedef struct {
    bool *host;              /* (n_layer) its routed experts stay in the mapped file */
    uint32_t n_blocks;       /* blocks 0..n_blocks-1 asked for (--n-cpu-moe, or chosen) */
    uint32_t n_layers;       /* of which MoE layers: the host layers */
    uint32_t *layer;         /* (n_layers) their indices, in order */
    bool no_auto;            /* planning: take e->p.n_cpu_moe or none, never choose */
    cpu_moe_host *cpu;
    /* host-visible, written by the GPU: a host layer's ffn-normed x, ids,
     * weights ([n_batch] tokens) */
    vk_buf xn, ids, wts;
    /* host-written, read by the GPU: the routed experts' sums; [n_batch]
     * 1.0s (moe_combine's weights) */
    vk_buf y, one;
    vk_family *parts;        /* (n_parts) the decode graph up to each host layer's router, then the rest */
    vk_family *sides;        /* (n_layers) each host layer's shared expert, run during the CPU's turn */
    vk_family *pf_parts;     /* (n_parts) the same of the prompt graph (n_batch > 1) */
    vk_family pf_last_logits; /* its last part with every position's logits to host memory */
    uint32_t n_parts;        /* n_layers + 1 */
    /* the decode parts' and side parts' begin and end timestamps (2 per
     * part, then 2 per side part), and their sums over measured tokens
     * (engine_split_stat, the means' numerators) */
    VkQueryPool qpool;
    uint64_t *ts;            /* the marks read back */
    /* the kernel table's timings of the parts, then the side parts (each
     * recorded fully timed too, replayed on the tokens vk_hostmoe_decode
     * says) */
    vk_profile *prof;        /* (n_parts + n_layers) */
    uint64_t measured;       /* tokens the sampled profiler asked to time */
    /* --tune hx=2 where the device has timeline semaphores: "part done"
     * (the GPU signals) and "sum written" (the host signals), each one
     * value further per host layer */
    VkSemaphore sem_gpu, sem_host;
    uint64_t val_gpu, val_host;
    engine_split_stat sum;
    /* Prompt batches of at least tune.hx_stream tokens (vk_hostmoe_stream.c):
     * each host layer's experts laid out by the host's threads into one of
     * two host-visible staging buffers, copied to the one device slot, and
     * run by the prompt graph's own MoE kernels */
    uint64_t slot_bytes;     /* the largest host layer's experts in the GPU layout (0: no streaming) */
    vk_buf slot;             /* device-local: the host layer being run */
    vk_buf stage[2];         /* host-visible: the next ones, laid out by the host */
    vk_tensor *st;           /* (3 n_layers) host layer i's gate, up, down experts as tensors in the slot */
    vk_family *ps_parts;     /* (n_parts) the prompt graph cut before each host layer's MoE */
    vk_family ps_last_logits; /* its last part with every position's logits to host memory */
    VkFence ps_fence[3];     /* the parts in flight */
    threadpool *ps_pool;     /* the layout's threads */
    uint64_t ps_batches;     /* engine_split_stat's streamed, stream_s, layout_s, stall_s */
    double ps_s, ps_layout_s, ps_stall_s;
    uint64_t pf_cpu_tokens;  /* prompt batches the CPU's experts computed: tokens, seconds */
    double pf_cpu_s;
    /* the last prompt batch's longest stretch between two looks at the
     * cancel flag, seconds (engine_backend.eval_stretch; 0 after any other
     * eval) */
    double pf_stretch_s;
} vk_hostmoe;

typedef struct {
    vk_ctx c;
    vk_pipes pipes;
    vk_tuning tune;          /* filled once at create (defaults, GLMCHAT_DEP_FLAGS, engine_params.tune) */
    vk_kb kb;
    err_t kerr;              /* the builders' errors (the planner copies them to the recording's) */
    const model *m;
    engine_params p;
    char desc[1536];
    vk_placement place;      /* the fit check's figures (for desc and `info`) */
    bool fit_short;          /* the last fit check failed for want of memory */
    vk_weights w;
    vk_bufs b;
    vk_programs rec;
    vk_prof_state prof;
    vk_hostmoe hx;
    /* the engine's cancel flag (set_cancel), which a prompt batch with
     * experts in host memory checks between host layers; NULL: none */
    const atomic_bool *cancel;
    bool nextn;              /* drafting asked for and the file has the block (set before the plan) */
    struct spec_host *spec;  /* drafting's host side (vk_spec.c) */
} vk_engine;

/* Floats of one token's decode attention partials (a verify column's slot of b.part). */
static inline uint32_t vk_attn_part_floats(const vk_engine *e)
{
    return e->b.part_cap * vk_attn_part_heads(&e->b.ag) * (e->m->cfg.kv_lora_rank + VK_PART_HDR);
}

/* Slice i of b, slices `stride` bytes apart (its mapping too, where mapped). */
static inline vk_buf vk_buf_slice(vk_buf b, uint32_t i, uint32_t stride)
{
    b.off += (uint64_t)i * stride;
    b.size = stride;
    if (b.map)
        b.map += (uint64_t)i * stride;
    return b;
}

/* Verify column c's params words (a slice of b.vparams). */
static inline vk_buf vk_vcol_params(const vk_engine *e, uint32_t c)
{
    return vk_buf_slice(e->b.vparams, c, e->b.vparams_stride);
}

/* The counters of the verify program of n columns (a slice of b.vdep; word 0 its give-ups). */
static inline vk_buf vk_vdep(const vk_engine *e, uint32_t n)
{
    return vk_buf_slice(e->b.vdep, n - 2, e->b.vdep_stride);
}

/* Graph recording (vk_forward.c, vk_prefill.c): program `what` into r;
 * `set`: the selection's VK_SEL_* set (VK_PROGRAM_SELECT). */
int vk_fwd_record(vk_engine *e, vk_rec *r, vk_program what, uint32_t set);
int vk_fwd_record_prefill(vk_engine *e, vk_rec *r, bool logits_to_host);
/* Drafting: the NextN block's cache rows of a batch of positions alone, on
 * the prompt graph's kernels (VK_PROGRAM_NEXTN_KV_BATCH), where the buffers
 * hold them (vk_nextn_kv_batch_fits). */
bool vk_nextn_kv_batch_fits(const vk_engine *e);
int vk_fwd_record_nextn_kv_batch(vk_engine *e, vk_rec *r);
/* Part `part` of the prompt graph cut at the host layers (vk_hostmoe.c);
 * `stream`: cut before each host layer's MoE, which reads the experts'
 * slot (vk_hostmoe_stream.c). */
int vk_fwd_record_prefill_part(vk_engine *e, vk_rec *r, bool logits_to_host, bool stream, int part);

/* Routed experts in host memory (vk_hostmoe.c).  vk_hostmoe_select marks
 * the host layers of blocks 0..n_blocks-1 (0 on success; -1 and err: no
 * memory); vk_hostmoe_start, after the buffers, starts the CPU side and
 * records the decode parts; vk_hostmoe_decode runs one token's parts (the
 * params written), the CPU's between them; vk_hostmoe_free releases all. */
int vk_hostmoe_select(vk_engine *e, uint32_t n_blocks, err_t *err);
int vk_hostmoe_start(vk_engine *e, err_t *err);
/* The parts recorded (again, after vk_hostmoe_unrecord: a wait gave up). */
int vk_hostmoe_record(vk_engine *e, err_t *err);
void vk_hostmoe_unrecord(vk_engine *e);
/* `measure`: a token the sampled profiler times: its breakdown added to
 * hx.sum (vk_hostmoe_split_stat), or on every PARTS_TIMED_EVERY'th of
 * those (every token with PROFILE_FULL) every dispatch timed instead, for
 * the kernel table (vk_hostmoe_kernel_stats). */
int vk_hostmoe_decode(vk_engine *e, bool measure, err_t *err);
/* The parts' kernels into st's table, their dispatches and GPU time per
 * token (replacing the whole graph's, which a split engine never runs). */
void vk_hostmoe_kernel_stats(const vk_engine *e, engine_stats *st);
/* The breakdown's means per token over the tokens measured (st->split). */
void vk_hostmoe_split_stat(const vk_engine *e, engine_split_stat *st);
/* (vk_hostmoe_cut.c) Records part `part` of the whole table g into r, or
 * (`side`) host layer `part`'s side part: host layer i's nodes end part i
 * at cut[2i], its side part runs to cut[2i + 1], where part i + 1 begins.  A part or side part
 * after the first begins with a barrier (it follows another command
 * buffer), a part before a host layer ends with one that makes its writes
 * visible to the host.  `timed` (the decode graph's): begin and end
 * timestamps into hx.qpool for the breakdown (vk_hostmoe.c). */
int vk_hostmoe_record_part(vk_engine *e, vk_rec *r, const vk_graph *g, const uint32_t *cut, uint32_t part,
                           bool side, bool timed);
/* (vk_hostmoe_cut.c) Records part `part` of the prompt graph g cut before
 * each host layer's MoE (cut[i]: where host layer i's MoE begins): a part
 * after the first begins by copying host layer part - 1's experts from
 * staging buffer (part - 1) % 2 into the slot, behind barriers that order
 * the copy after the slot's last readers and before its new ones. */
int vk_hostmoe_stream_record_part(vk_engine *e, vk_rec *r, const vk_graph *g, const uint32_t *cut, uint32_t part);
/* Whether a prompt batch of n tokens brings the host layers' experts to
 * the GPU (vk_hostmoe_stream.c) rather than have the CPU compute them.  A
 * streamed batch costs about the same whatever its size (the layout and
 * the copies: ~10-16 ms a layer on the H200's host), the CPU's about the
 * same per token, and where the two cross depends on the type (run 44:
 * ~64 tokens for Q4_0, ~170 for Q3_K_M).  So once both have run (streamed
 * batches taking streamed_s in all, the CPU's cpu_tokens tokens cpu_s),
 * the cheaper as timed: a streamed batch's mean time against the CPU's
 * mean time per token times n (which, measured on batches of other sizes,
 * leans a little towards streaming: their fixed part counted per token);
 * before that, n >= threshold (0: never). */
bool vk_hostmoe_stream_pick(uint32_t n, uint32_t threshold, uint64_t streamed, double streamed_s,
                            uint64_t cpu_tokens, double cpu_s);
/* (vk_hostmoe_stream.c) The device slot's bytes for the host layers
 * vk_hostmoe_select marked (0 where prompts do not stream: one token a
 * batch, tune.hx_stream 0, no host layer); after the buffers, the slot's
 * tensors and the parts recorded (vk_hostmoe_record calls it); a prompt
 * batch of n tokens through them (as vk_hostmoe_prefill promises);
 * everything released. */
uint64_t vk_hostmoe_stream_bytes(const vk_engine *e);
int vk_hostmoe_stream_record(vk_engine *e, err_t *err);
void vk_hostmoe_stream_unrecord(vk_engine *e);
int vk_hostmoe_stream_prefill(vk_engine *e, uint32_t n, bool logits, err_t *err);
void vk_hostmoe_stream_free(vk_engine *e);
/* A prompt batch of n tokens through the prompt graph's parts (the params
 * written), the CPU's experts between them; `logits`: the last part with
 * every position's logits to host memory (recorded only where
 * engine_params.all_logits).  Returns 1, with nothing in flight, where it
 * saw e->cancel set between two host layers (the batch's positions are
 * then half written: the caller keeps nothing of it).  Sets
 * e->hx.pf_stretch_s. */
int vk_hostmoe_prefill(vk_engine *e, uint32_t n, bool logits, err_t *err);
/* (vk_hostmoe_linked.c) The hand-over.  A token's host-side marks (the
 * host-clock half of engine_split_stat); the host's clock in us; how long
 * the host polls for a part before it sleeps (0: it sleeps at once, hx=0);
 * a graph's parts (the last one `last`) for n tokens linked by the
 * timeline semaphores hx.sem_gpu and hx.sem_host (hx=2; the device has
 * them), the CPU's experts between them, the side parts where recorded;
 * `timed`: the fully timed variants. */
typedef struct {
    double first, seen;      /* the first part submitted; the latest part seen finished */
    double wait, cpu, turn;  /* sums over the token */
} vk_host_marks;
double vk_hostmoe_now_us(void);
uint64_t vk_hostmoe_poll_ns(const vk_engine *e);
int vk_hostmoe_run_linked(vk_engine *e, const vk_family *parts, const vk_family *last, const vk_family *sides,
                          uint32_t n, bool timed, vk_host_marks *hm, err_t *err);
/* Parts joined by counters or tagged words, over all parts. */
uint32_t vk_hostmoe_links(const vk_engine *e);
void vk_hostmoe_free(vk_engine *e);

/* Profiler (vk_profiler.c).  Variants: plain only; + fully timed; + one
 * sampled variant per layer. */
enum { VK_FAMILY_PLAIN = 0, VK_FAMILY_FULL = 1, VK_FAMILY_SAMPLED = 2 };
int vk_family_build(vk_engine *e, vk_family *f, vk_program what, uint32_t set, int variants, err_t *err);
void vk_family_free(vk_engine *e, vk_family *f);
/* Records program `what` once more, into a scratch command buffer, with
 * the listing on (bench --plan). */
int vk_program_list(vk_engine *e, vk_program what, uint32_t set, FILE *f, err_t *err);
/* The variant to submit for this token under profile mode `mode`. */
vk_variant *vk_family_pick(vk_family *f, profile_mode mode);
void vk_profile_collect(vk_engine *e, vk_family *f, vk_variant *v, vk_profile *pr);
void vk_profile_report(const vk_family *f, const vk_profile *pr, engine_stats *st);
/* Adds f's kernels to st's table as run `weight` times per token (a program
 * that runs for some tokens only). */
void vk_profile_add(const vk_family *f, const vk_profile *pr, double weight, engine_stats *st);
void vk_profile_free(vk_profile *pr);

/* Drafting (vk_spec.c): the NextN programs recorded / freed with the
 * engine; one row at the position the params buffer holds (h NULL: from
 * the kept h_{p-1}, else that h, n_embd floats); the latest row's
 * head_norm(x) (n_embd, host memory). */
int vk_spec_build(vk_engine *e, err_t *err);
void vk_spec_free(vk_engine *e);
/* The verify programs recorded (again: after a wait gave up, barriers only) / freed. */
int vk_spec_record_verify(vk_engine *e, err_t *err);
void vk_spec_unrecord_verify(vk_engine *e);
int vk_spec_nextn_submit(vk_engine *e, const float *h, bool kv_only, err_t *err);
const float *vk_spec_nextn_out(const vk_engine *e);
/* vk_engine.c: NextN rows pos..pos+n-1 of tokens (h NULL: from the kept
 * rows, else [n][n_embd] given), the last row's logits (optional) read
 * back -- spec_host.h's nextn_rows. */
int vk_nextn_rows(vk_engine *e, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *logits,
                  err_t *err);
/* vk_engine.c: every position's logits of tokens[0..n) at pos..pos+n-1
 * into [n][n_vocab], bit for bit what n single-token decodes give: the
 * verify program of n columns where one is recorded, else the decode graph
 * once a token (spec_host.h's eval_all).  `columns`: false forces the
 * latter (the tests' comparison). */
int vk_eval_positions(vk_engine *e, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, bool columns,
                      err_t *err);

#endif
