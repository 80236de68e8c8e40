/* vk_kernels.h: one builder per kernel.  Each turns the operands of an
 * operation into a vk_call (pipeline with its specialization, bindings,
 * push constants, grid), choosing team sizes and tiles for the device.  The
 * forward passes and the kernel test use the same builders, so the test
 * covers the host-side choices too. */
#ifndef GLM_VK_KERNELS_H
#define GLM_VK_KERNELS_H

#include "params.h"
#include "vk_core.h"
#include "vk_tuning.h"

/* What every builder works with: the device, the pipeline cache, the
 * engine's tuning table (filled once) and where an error goes. */
typedef struct {
    vk_ctx *c;
    vk_pipes *pipes;
    const vk_tuning *tune;
    err_t *err;
} vk_kb;

/* An f32 operand: buffer + offset in floats. */
typedef struct vk_vec_s {
    vk_buf b;
    uint32_t off;
} vk_vec;

/* A dependency between two decode dispatches recorded without a pipeline
 * barrier between them (shaders/dep_flag.glsl): the producer's workgroups
 * each add 1 to counter `signal` when their results are written; the
 * consumer issues what does not depend on the producer, then waits until
 * counter `wait` reaches params[VKP_EPOCH] * wait_n (the producers'
 * workgroups; several producers may share one counter), or with wait_n = 0
 * params[VKP_ATTN_TOTAL] (the decode attention's workgroups so far: its grid
 * follows the context).  A wait that gives
 * up adds 1 to word 0 of the counters' buffer.  Only for the calls whose
 * vk_*_deps() says the kernel can. */
typedef struct {
    const struct vk_vec_s *signal, *wait;
    uint32_t wait_n;
    vk_buf params;      /* for the epoch */
    /* LL (shaders/dep_flag.glsl): the input x (ll_in) and/or the output y
     * (ll_out, never accumulated) as tagged words -- 8 bytes a float, (value
     * bits, tag), the operand's offset counted in words -- tag
     * params[VKP_EPOCH] * VK_LL_SITES + site; an input word is polled until
     * it carries its site's tag.  0: plain floats.  Needs params and, for
     * word 0 (give-ups), the counters' buffer: ll_fails, or the signal /
     * wait's.  Only for the x-stationary matvec (vk_mv_deps) and kv_store
     * (decode's qkv and q, gpu/PERF.md run 30). */
    uint32_t ll_in, ll_out;
    vk_buf ll_fails;
} vk_dep;

/* ---- decode matrix-vector ---------------------------------------------------------
 * y[y.off + z*y_z + r] (=|+=) sum_k W[m(z)][r][k] * xin[z][k] for r < W.N, z < nz,
 * xin[z] = x[x.off + z*x_z ...] or rmsnorm(x) * norm when norm is given;
 * m(z) = z, or ids[ids.off + z] when ids is given. */
typedef struct {
    const char *name;
    const vk_tensor *w;
    vk_vec x;
    uint32_t x_z;
    vk_vec y;
    uint32_t y_z;
    uint32_t nz;
    const vk_vec *norm;
    float eps;
    bool accumulate;
    const vk_vec *ids;
    /* prefill: the input is the batch's last token (last_row = its row
     * stride; needs the params buffer) */
    uint32_t last_row;
    vk_buf params;
    vk_dep dep;         /* decode: signal and/or wait (vk_mv_deps) */
} vk_mv_args;
int vk_k_mv(const vk_kb *k, const vk_mv_args *a, vk_call *out);
/* Whether vk_k_mv's kernel for a can signal / wait (the x-stationary one). */
bool vk_mv_deps(const vk_kb *k, const vk_mv_args *a);
/* Whether the x-stationary decode matvecs (vk_k_mv where vk_mv_deps holds,
 * tagged or not; vk_k_glu, vk_k_moe_down, vk_k_attn_vb) of weights of `type`
 * run on 8-bit integer dot products (the idot knob; the types of
 * vk_idot_type on a device with them): their input is then
 * quantized per 32 elements, d = max|x| / 127, q = round(x / d) (ties to
 * even), as llama.cpp's q8_1 -- the results carry that rounding. */
bool vk_k_idot(const vk_kb *k, uint32_t type);
/* The weight types that have integer-dot units (shaders/mv_xs_common.glsl IDOT_ON). */
bool vk_idot_type(uint32_t type);
/* the shared memory bytes the -DIDOT builds add to an x-stationary kernel staging ksh elements */
uint64_t vk_k_idot_shared(const vk_kb *k, uint32_t type, uint32_t ksh);

/* h[z][r] = silu(G[m(z)][r] . n) * (U[m(z)][r] . n), n = rmsnorm(x) * norm (or x). */
typedef struct {
    const char *name;
    const vk_tensor *gate, *up;
    vk_vec x;
    const vk_vec *norm;
    float eps;
    vk_vec h;
    uint32_t h_z;
    uint32_t nz;
    const vk_vec *ids;
    vk_dep dep;         /* decode: signal and/or wait (vk_glu_deps) */
} vk_glu_args;
int vk_k_glu(const vk_kb *k, const vk_glu_args *a, vk_call *out);
/* Whether vk_k_glu's kernel for a can signal / wait (the x-stationary one). */
bool vk_glu_deps(const vk_kb *k, const vk_glu_args *a);

/* y[r] += sum_{z<nz} wt[z] * (D[ids[z]][r] . h[z]) + (S[r] . h_s)   (S optional),
 * or + ysh[r], the shared expert's product computed beforehand. */
typedef struct {
    const char *name;
    const vk_tensor *down;      /* routed experts */
    const vk_tensor *shared;    /* shared expert(s), may be NULL */
    /* instead of shared: its product S . h_s, computed beforehand (a file
     * whose shared down has another type than the routed ones: one
     * x-stationary kernel reads one type); x-stationary kernel only
     * (vk_moe_down_deps) */
    const vk_vec *shared_out;
    vk_vec h;                   /* h[z] at h.off + z*h_z; shared input at h.off + nz*h_z */
    uint32_t h_z;
    uint32_t nz;
    vk_vec ids, wts;
    vk_vec y;                   /* residual stream, accumulated into */
    vk_dep dep;                 /* decode: signal and/or wait (vk_moe_down_deps) */
    /* with dep.wait: the ids' producer (the router) when it too ran with no
     * barrier since -- awaited before the ids are read (the down's weight
     * loads then still overlap the gate/up) */
    const vk_vec *ids_wait;
    uint32_t ids_wait_n;
} vk_moe_down_args;
int vk_k_moe_down(const vk_kb *k, const vk_moe_down_args *a, vk_call *out);
bool vk_moe_down_deps(const vk_kb *k, const vk_moe_down_args *a);

/* ---- attention (MLA, absorbed) ---------------------------------------------------- */

/* The parameter words the host writes before each submit: VKP_* in
 * shaders/params.h. */

/* Geometry of the attention kernels for a model on a device. */
typedef struct {
    uint32_t n_head, kv_lora, rope, nope, v_head;
    uint32_t RS;          /* cache row stride: kv_lora + rope rounded up to 8 */
    uint32_t hg;          /* heads per attention workgroup */
    uint32_t wgs;         /* attention workgroup size (4 latent dims per thread) */
    uint32_t n_hgroups;
    uint32_t cmax;        /* longest chunk */
    uint32_t max_chunks;  /* chunks a decode step may use */
    uint32_t min_chunk;   /* shortest chunk a decode step cuts */
    bool kv_f16;
    /* Decode on tensor cores (attn_fd.comp): fd_mt head tiles of 16 rows
     * per workgroup, fd_hg workgroups per chunk; the decode grid is then
     * (chunks, fd_hg, tokens) -- dec_groups_y is the y the host writes. */
    bool fd;
    uint32_t fd_mt, fd_hg;  /* head tiles per workgroup, workgroups per chunk (head groups) */
    /* A prompt batch on attn_fd with (token, head) pairs as rows: 16-row
     * tiles per workgroup (2), or 0 for the decode layout (grid z = tokens;
     * where the flat one's shared memory does not fit). */
    uint32_t fd_pf_mt;
    uint32_t dec_groups_y;
} vk_attn_geom;

/* Cache rows past n_ctx that must exist (zeroed): attn_fd reads whole
 * 32-position tiles. */
#define VK_CACHE_PAD_ROWS 32u
/* An attention partial (per token, chunk, head): VK_PART_HDR words, then
 * the kv_lora latent sums (shaders/params.h). */
/* Head rows per token in the decode partials: attn_fd writes whole 16-row
 * head tiles (the rows past n_head are scratch). */
uint32_t vk_attn_part_heads(const vk_attn_geom *g);

int vk_attn_geom_init(const vk_kb *k, vk_attn_geom *g, uint32_t n_head, uint32_t kv_lora, uint32_t rope,
                      uint32_t nope, uint32_t v_head, bool kv_f16, uint32_t n_ctx, err_t *err);
/* Chunking of a decode step over n_kv positions. */
void vk_attn_chunks(const vk_attn_geom *g, uint32_t n_kv, uint32_t *n_chunks, uint32_t *chunk_len);
/* Chunking of a prefill batch (at most `cap` chunks: partials per token). */
void vk_attn_chunks_prefill(uint32_t n_kv, uint32_t cap, uint32_t *n_chunks, uint32_t *chunk_len);
/* A prompt batch's attention grid y and z for n_tok tokens (x: chunks). */
void vk_attn_prefill_grid(const vk_attn_geom *g, uint32_t n_tok, uint32_t *y, uint32_t *z);
/* Whether a prompt batch's attention with chunk_cap chunks a token writes
 * the latent outputs itself (vk_attn_args.o; no partials, no
 * attn_combine): attn_fd's flat rows with one chunk a token. */
bool vk_attn_writes_latents(const vk_attn_geom *g, uint32_t chunk_cap);

typedef struct {
    const vk_attn_geom *g;
    vk_vec kv;            /* kv_a_mqa output of token z at kv.off + z*kv_z */
    uint32_t kv_z;
    vk_vec norm;          /* attn_kv_a_norm */
    float eps;
    vk_vec cache;         /* this layer's cache (offset in elements) */
    vk_buf rope_cs;       /* (cos, sin) per position and pair */
    vk_vec q;             /* q of token z at q.off + z*q_z (heads of nope+rope) */
    uint32_t q_z;
    vk_vec q_abs;         /* absorbed query of token z at q_abs.off + z*q_abs_z (heads of RS) */
    uint32_t q_abs_z;
    vk_buf params;
    uint32_t nz;
    vk_dep dep;           /* decode: signal and/or wait (any device); LL: kv as tagged words of site dep.ll_in */
    uint32_t ll_q;        /* with dep.ll_in: q as tagged words of this site */
} vk_kv_store_args;
int vk_k_kv_store(const vk_kb *k, const vk_kv_store_args *a, vk_call *out);

typedef struct {
    const vk_attn_geom *g;
    vk_vec q_abs;
    uint32_t q_abs_z;
    vk_vec cache;
    vk_vec part;          /* (m, l, 2 pad, o[kv_lora]) per token, chunk, head (VK_PART_HDR) */
    uint32_t chunk_cap;   /* chunks per (token, head) in part */
    float kq_scale;
    vk_buf params;
    const vk_buf *indirect;  /* grid from the params buffer */
    uint32_t n_chunks, nz;   /* otherwise */
    bool prefill;            /* chunk length from VKP_CHUNK_PF (else VKP_CHUNK) */
    vk_dep dep;              /* decode: signal and/or wait (vk_attn_deps) */
    /* with dep.wait: the cache rows just below the position that the step
     * waited on writes too (a verify column's predecessors' rows): no
     * loads of them before the wait */
    uint32_t early_lag;
    /* prefill where vk_attn_writes_latents: o_lat of (token z, head h) at
     * o.off + z*o_z + h*o_h (kv_lora values, all multiples of 4), as
     * vk_attn_combine_args.o; may be the q_abs rows themselves */
    vk_vec o;
    uint32_t o_z, o_h;
} vk_attn_args;
int vk_k_attn(const vk_kb *k, const vk_attn_args *a, vk_call *out);
/* Whether vk_k_attn's kernel can signal and wait (attn_fd). */
bool vk_attn_deps(const vk_attn_args *a);

typedef struct {
    const vk_attn_geom *g;
    const vk_tensor *v_b;
    vk_vec part;
    uint32_t chunk_cap;
    vk_buf params;
    vk_vec o;             /* out of token z at o.off + z*o_z: heads of v_head */
    uint32_t o_z, nz;
    vk_dep dep;           /* decode: signal and/or wait (vk_attn_vb_deps) */
} vk_attn_vb_args;
int vk_k_attn_vb(const vk_kb *k, const vk_attn_vb_args *a, vk_call *out);
bool vk_attn_vb_deps(const vk_kb *k, const vk_attn_vb_args *a);

/* Prefill: the chunk partials of each (token, head) combined into the
 * latent attention output o_lat[z][h] at o.off + z*o_z + h*o_h (kv_lora
 * values), for v_b as a batched-head mat-mat (vk_k_mm, z = head).  Chunk
 * count from VKP_NCHUNK_PF; chunk_cap <= 64. */
typedef struct {
    const vk_attn_geom *g;
    vk_vec part;
    uint32_t chunk_cap;
    vk_buf params;
    vk_vec o;
    uint32_t o_z, o_h, nz;
} vk_attn_combine_args;
int vk_k_attn_combine(const vk_kb *k, const vk_attn_combine_args *a, vk_call *out);

/* ---- router, embedding, sampling ----------------------------------------------------- */

typedef struct {
    const vk_tensor *w;         /* ffn_gate_inp (n_embd -> n_expert) */
    vk_vec x;
    uint32_t x_z;
    vk_vec norm;
    float eps;
    vk_vec logits;              /* scratch [nz][n_expert] */
    vk_vec ids, wts;            /* out [nz][n_used] */
    const vk_vec *bias;         /* exp_probs_b, optional */
    vk_vec counter;             /* [nz] words, zero between uses */
    uint32_t n_used, gating, nz;
    bool norm_w;
    float scale;
    vk_buf params;              /* given: tokens past the batch are skipped */
    vk_dep dep;                 /* decode: signal and/or wait (vk_router_deps) */
} vk_router_args;
int vk_k_router(const vk_kb *k, const vk_router_args *a, vk_call *out);
bool vk_router_deps(const vk_kb *k, const vk_router_args *a);

typedef struct {
    const vk_tensor *w;         /* token_embd (n_embd x n_vocab) */
    vk_vec tokens;              /* int ids */
    vk_vec x;
    uint32_t x_z, nz;
    bool check_batch;           /* tokens is the params buffer: skip tokens past the batch */
} vk_embed_args;
int vk_k_embed(const vk_kb *k, const vk_embed_args *a, vk_call *out);

/* Scratch of the top-K kernel for rows of n: */
typedef struct {
    uint32_t n_slices, slice;
} vk_topk_geom;
int vk_topk_geom_init(uint32_t n, uint32_t k, vk_topk_geom *g, err_t *err);

typedef struct {
    vk_vec logits;
    uint32_t n, k;              /* k: when params is not given */
    vk_buf params;              /* K read from params[VKP_TOPK] (<= 64) when given */
    vk_topk_geom geom;
    vk_buf cand_v, cand_i, ms, counter; /* [n_slices*k] floats, words; [n_slices] vec2; 1 word */
    vk_buf out_ids, out_vals;           /* [k] ints; [k+1] floats (values, logsumexp) */
} vk_topk_args;
int vk_k_topk(const vk_kb *k, const vk_topk_args *a, vk_call *out);

/* ---- prefill ------------------------------------------------------------------------ */

typedef struct {
    vk_vec x, y, w;
    uint32_t n, x_z, y_z, nz;
    float eps;
    vk_buf params;
    /* rows by cache position (pc_prefill.h): y row pos0 + t; x row pos0 + t - 1 */
    bool y_at_pos, x_prev_pos;
    /* where set: y also in fp16 here (y's element layout; y.off, y_z and n
     * multiples of 8), as the tensor-core mat-mat packs its inputs, for
     * vk_mm_args.x16 */
    const vk_buf *y16;
} vk_rmsnorm_args;
int vk_k_rmsnorm(const vk_kb *k, const vk_rmsnorm_args *a, vk_call *out);

/* Y[row][n] (=|+=) W[m] . X[row] for the batch's tokens (grid for `max_tokens`,
 * tokens past params[1] skipped), or silu(W.X) * (W2.X) with `up`; with
 * `tiles`, rows come from the expert work list (indirect grid).  `x_split`
 * (not with `up`): on tensor cores, each activation as an fp16 pair hi + lo
 * (~2^-22 relative instead of fp16's 2^-11; twice the activation MMAs) --
 * for the prefill's k_b / v_b; the fp32 kernel ignores it. */
typedef struct {
    const char *name;
    const vk_tensor *w, *up;
    vk_vec x;
    uint32_t x_stride, x_z, x_div;
    vk_vec y;
    uint32_t y_stride, y_z;
    uint32_t nz, max_tokens;
    bool accumulate, x_split;
    vk_buf params;
    const vk_buf *list, *tiles, *indirect;  /* expert mode */
    uint32_t tile;                          /* expert mode: pairs per tile (vk_mm_expert_bm) */
    /* where set: x's fp16 twin (vk_rmsnorm_args.y16), which the tensor-core
     * kernel reads instead of x (the same values it would pack from x; the
     * fp32 kernel reads x) */
    const vk_buf *x16;
    /* where set (a store or gate/up on tensor cores; y.off, y_stride, y_z
     * and N multiples of 8): y's fp16 twin written too, for a later x16 */
    const vk_buf *y16;
} vk_mm_args;
int vk_k_mm(const vk_kb *k, const vk_mm_args *a, vk_call *out);
/* Whether vk_k_mm runs a mat-mat of w (and up) on tensor cores (mm_coop),
 * the kernel that reads and writes fp16 twins. */
bool vk_mm_on_tensor_cores(const vk_kb *k, const vk_tensor *w, const vk_tensor *up);
/* Tokens per tile the expert pass uses for these weights (moe_group must
 * cut tiles the same). */
uint32_t vk_mm_expert_bm(const vk_kb *k, const vk_tensor *w);
/* Output rows per workgroup of the kernel vk_k_mm picks for these weights
 * (the expert passes' indirect grids are cut with it). */
uint32_t vk_mm_bn(const vk_kb *k, const vk_tensor *w, const vk_tensor *up);
/* The shader vk_k_mm runs for these weights ("mm" or "mm_coop"). */
const char *vk_mm_kernel(const vk_kb *k, const vk_tensor *w, const vk_tensor *up);

typedef struct {
    vk_vec ids;                 /* [T][K] */
    uint32_t K, n_expert;
    vk_buf list, tiles, indirect, params;
    uint32_t x_gu, x_dn;        /* workgroups across the gate/up and down outputs */
    uint32_t tile;              /* pairs per tile (vk_mm_expert_bm) */
} vk_moe_group_args;
int vk_k_moe_group(const vk_kb *k, const vk_moe_group_args *a, vk_call *out);

typedef struct {
    vk_vec y;                   /* [T*K][H] expert outputs */
    vk_vec x, wts;
    uint32_t H, K, max_tokens;
    vk_buf params;
} vk_moe_combine_args;
int vk_k_moe_combine(const vk_kb *k, const vk_moe_combine_args *a, vk_call *out);

#endif
