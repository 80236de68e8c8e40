/* vk_forward.c: the decode graph -- one token through the whole model,
 * recorded at start-up into each command buffer of its family (plain,
 * fully timed, one per layer: vk_profiler.c), again with barriers only if
 * a dependency wait gives up (vk_engine.c), and replayed for every token -- and
 * the sampling programs.  Each NODE line below is one kernel call of the
 * table the planner records (vk_sync.h), with what it reads and writes.
 * Per layer (GLM-4.7-Flash), each line one dependent step; calls joined by
 * "||" touch nothing the other writes and run together:
 *
 *   [q_a | kv] = W.norm(x)                            (attn_norm fused; one matrix)
 *   q = q_b . norm(q_a)                               (q_a_norm fused)
 *   q_abs = k_b . q_nope per head  ||  kv_store       (cache row, rotated q)
 *   attention partials over chunks of the cache       (indirect grid)
 *   combine + v_b per head
 *   x += attn_output . o
 *   router + top-k  ||  shared expert gate/up + SiLU  (ffn_norm fused)
 *   gate/up + SiLU of the routed experts  (|| shared down, if of another type)
 *   x += sum_k w_k down_k . h_k + down_s . h_s
 *
 * Without q compression (DeepSeek-V2-Lite) q comes from q_a's step and k_b
 * runs beside kv_store; dense layers have gate/up then down; a layer whose
 * routed experts are in host memory (vk_hostmoe.c) has router + top-k ||
 * norm(x) for the CPU, the shared expert during the CPU's turn, then
 * x += the CPU's sum.  The position,
 * the token and the chunking live in the params buffer the host writes
 * before each submit.
 *
 * Between two steps the planner puts a counter the next step waits on
 * (where both kernels can and the boundary's bit of tune.dep_flags is set:
 * all nine by default on NVIDIA and lavapipe, GLMCHAT_DEP_FLAGS), tagged
 * words, or a barrier.  With tagged words (tune.ll; on by default where the
 * counters are) qkv and q live in qkv_ll and q_ll (shaders/dep_flag.glsl):
 * q_b and k_b || kv_store poll the words they read for their writer's tag,
 * so nothing else stands between those three steps (gpu/PERF.md run 30; x,
 * o and h as tagged words measured slower and were removed). */
#include <stdlib.h>

#include "vk_engine.h"

/* ---- the boundaries of a layer ---------------------------------------------------------
 * Each a bit of tune.dep_flags (GLMCHAT_DEP_FLAGS: the man page), given to
 * the step after it (the nodes that may wait there): */
enum {
    DEP_QA = 1u << 0,    /* [q_a | kv_a] -> q_b */
    DEP_OUT = 1u << 1,   /* attn_output -> router || shared gate/up */
    DEP_ROUTE = 1u << 2, /* router || shared gate/up -> routed gate/up */
    DEP_GU = 1u << 3,    /* routed gate/up -> down */
    DEP_DOWN = 1u << 4,  /* down -> the next layer's [q_a | kv_a] */
    DEP_ATTN = 1u << 5,  /* attention -> combine + v_b */
    DEP_VB = 1u << 6,    /* combine + v_b -> attn_output */
    DEP_QB = 1u << 7,    /* q_b -> k_b || kv_store */
    DEP_KB = 1u << 8,    /* k_b || kv_store -> attention */
};

/* ---- what the calls read and write --------------------------------------------------------- */
enum {
    R_X = 1u << 0,          /* the residual stream */
    R_Q_COMP = 1u << 1,     /* q_a's output */
    R_KV = 1u << 2,         /* kv_a_mqa's: [latent | k_rope] */
    R_Q_NOPE = 1u << 3,     /* q's nope parts (k_b's input) */
    R_Q_ROPE = 1u << 4,     /* q's rope parts (kv_store's) */
    R_Q_ABS = 1u << 5,      /* the absorbed queries' k_b parts */
    R_Q_ABS_ROPE = 1u << 6, /* their rotated rope parts */
    R_CACHE = 1u << 7,      /* the KV cache */
    R_PART = 1u << 8,       /* the attention partials */
    R_O = 1u << 9,          /* the attention output */
    R_ROUTE = 1u << 10,     /* the router's: expert ids and weights, logits, counters */
    R_H = 1u << 11,         /* the routed experts' hidden states (a dense FFN's) */
    R_H_SH = 1u << 12,      /* the shared expert's */
    R_Y_SH = 1u << 13,      /* the shared expert's down, where it runs apart */
    R_LOGITS = 1u << 14,
    R_CAND = 1u << 15,      /* sampling: the candidates, the host's top-K */
    R_TOKEN = 1u << 16,     /* sampling: the token, the selection's state */
    R_XN_HOST = 1u << 17,   /* a host layer's ffn-normed x, for the CPU (vk_hostmoe.c) */
    R_Y_HOST = 1u << 18,    /* the CPU's routed experts' sum */
    R_HID = 1u << 19,       /* drafting: the kept hidden states (output_norm(x) per position) */
    R_NX_E = 1u << 20,      /* the NextN block's token embedding */
    R_NX_CAT_E = 1u << 21,  /* its input's halves: enorm(e) */
    R_NX_CAT_H = 1u << 22,  /* ... hnorm(h) */
    R_NX_OUT = 1u << 23,    /* head_norm(x) of its row, to the host */
    R_SEL_GRID = 1u << 24,  /* sampling: the grids of the selections after sample_pick */
};

/* Q: both parts of q. */
#define R_Q (R_Q_NOPE | R_Q_ROPE)

/* ---- a token's operands ---------------------------------------------------------------------
 * Where one token's activations live in the engine's buffers: the decode
 * graph's token is column 0 (every offset 0, the params buffer, the
 * router's counter at the start of its buffer); column c of the verify
 * (vk_fwd_record's VK_PROGRAM_VERIFY) is token slot c of the batch-sized
 * buffers (the decode-only ones are sized for VK_VCOLS slots where the
 * engine drafts), with its own params words and router counter (slices of
 * vparams and counters VK_VCOL_ALIGN bytes apart: a binding's offset).
 * The offsets are floats. */
typedef struct {
    const vk_bufs *b;
    uint32_t x, q_comp, kv, q, qkv, q_abs, part, o, h, rlogits, ids, x_norm, logits;
    vk_buf params, counters, logits_buf;
    uint32_t col; /* its index: the columns before it write the cache rows just below its position */
} vcol;

static vcol column(const vk_engine *e, uint32_t c, bool verify)
{
    const model_config *m = &e->m->cfg;
    const vk_bufs *b = &e->b;
    uint32_t qw = m->qk_nope + m->qk_rope, K = m->n_expert_used;
    uint32_t nq = m->q_lora_rank ? m->q_lora_rank : m->n_head * qw;
    vcol v = {.b = b, .params = b->params, .counters = b->counters, .logits_buf = b->logits, .col = c};
    v.x = c * m->n_embd;
    v.q_comp = c * (m->q_lora_rank ? m->q_lora_rank : 1);
    v.kv = c * (m->kv_lora_rank + m->qk_rope);
    v.q = c * m->n_head * qw;
    v.qkv = c * (nq + m->kv_lora_rank + m->qk_rope);
    v.q_abs = c * m->n_head * b->ag.RS;
    v.part = c * vk_attn_part_floats(e);
    v.o = c * m->n_head * m->v_head;
    v.h = c * (K + 1) * b->h_z;
    v.rlogits = c * (m->n_expert ? m->n_expert : 1);
    v.ids = c * K;
    v.x_norm = c * m->n_embd;
    if (verify) { /* the head writes straight to host memory (as a prompt's every-position head does) */
        v.logits_buf = b->host_logits;
        v.logits = c * m->n_vocab;
        v.params = vk_vcol_params(e, c);
        v.counters = vk_buf_slice(b->counters, c, VK_VCOL_ALIGN);
    }
    return v;
}

/* ---- the layer ------------------------------------------------------------------------------ */

/* The attention block of layer il for one token (column v); `tagged`: qkv
 * and q as tagged words. */
/* Layer il's attention, up to the new cache row alone where kv_only (the
 * absorbed queries' k_b and everything after it left out). */
static void attention_steps(vk_graph *g, const vk_engine *e, const vcol *v, uint32_t il, bool tagged, bool kv_only)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_bufs *b = v->b;
    const vk_attn_geom *ag = &b->ag;
    bool lora = c->q_lora_rank > 0;
    uint32_t qw = c->qk_nope + c->qk_rope, nq = lora ? c->q_lora_rank : c->n_head * qw;
    /* q_a (or q) and kv: one matvec over the merged matrix, or two */
    vk_buf qkv_buf = tagged ? b->qkv_ll : b->qkv;
    uint32_t qkv_off = tagged ? 0 : v->qkv; /* (the tagged words: the decode's token alone) */
    vk_vec x = V(b->x, v->x), q_comp = V(b->q_comp, v->q_comp), q = tagged ? V(b->q_ll, 0) : V(b->q, v->q),
           kv = V(b->kv, v->kv);
    if (L->qkv_merged) {
        *(lora ? &q_comp : &q) = V(qkv_buf, qkv_off);
        kv = V(qkv_buf, qkv_off + nq);
    }
    vk_res q_out = lora ? R_Q_COMP : R_Q; /* what q_a's (or q's) rows are */
    vk_res tag_qkv = tagged ? R_Q_COMP | R_KV : 0, tag_q = tagged ? R_Q : 0;
    /* the steps after the previous layer's MoE down may wait on its counter
     * (after the embedding or a dense layer's FFN: a barrier) */
    uint32_t after_down = il > 0 && e->w.layers[il - 1].is_moe ? DEP_DOWN : 0;
    vk_buf ind = v->params;
    ind.off += VKP_ATTN_IND * 4;
    ind.size = 12;

    /* [q_a | kv] = W . norm(x) */
    if (L->qkv_merged) {
        vk_mv_args m = {.name = lora ? "attn_q_a+kv_a" : "attn_q+kv_a", .w = &L->qkv_a, .x = x, .y = V(qkv_buf, qkv_off),
                        .nz = 1, .norm = &L->attn_norm, .eps = c->rms_eps};
        NODE(g, MV(m), .reads = R_X, .writes = q_out | R_KV, .tagged_out = tag_qkv, .dep_bit = after_down);
    } else {
        vk_mv_args qm = {.name = lora ? "attn_q_a" : "attn_q", .w = lora ? &L->q_a : &L->q, .x = x,
                         .y = lora ? q_comp : q, .nz = 1, .norm = &L->attn_norm, .eps = c->rms_eps};
        vk_mv_args kva = {.name = "attn_kv_a_mqa", .w = &L->kv_a, .x = x, .y = kv, .nz = 1, .norm = &L->attn_norm,
                          .eps = c->rms_eps};
        NODE(g, MV(qm), .reads = R_X, .writes = q_out, .dep_bit = after_down);
        NODE(g, MV(kva), .reads = R_X, .writes = R_KV, .dep_bit = after_down);
    }

    /* q = q_b . norm(q_a) */
    if (lora) {
        vk_mv_args qb = {.name = "attn_q_b", .w = &L->q_b, .x = q_comp, .y = q, .nz = 1, .norm = &L->q_a_norm,
                         .eps = c->rms_eps};
        NODE(g, MV(qb), .reads = R_Q_COMP, .writes = R_Q, .tagged_in = {tag_qkv & R_Q_COMP}, .tagged_out = tag_q,
             .dep_bit = DEP_QA);
    }

    /* absorbed query per head || new cache row + rotated query rope part
     * (without q compression the step after [q | kv] waits behind a barrier) */
    uint32_t after_q = lora ? DEP_QB : 0;
    vk_mv_args kb = {.name = "attn_k_b", .w = &L->k_b, .x = q, .x_z = qw, .y = V(b->q_abs, v->q_abs),
                     .y_z = ag->RS, .nz = c->n_head};
    vk_kv_store_args ks = {.g = ag, .kv = kv, .kv_z = c->kv_lora_rank + c->qk_rope, .norm = L->kv_a_norm,
                           .eps = c->rms_eps, .cache = V(b->cache[il], 0), .rope_cs = b->rope, .q = q,
                           .q_z = c->n_head * qw, .q_abs = V(b->q_abs, v->q_abs), .q_abs_z = c->n_head * ag->RS,
                           .params = v->params, .nz = 1};
    if (!kv_only)
        NODE(g, MV(kb), .reads = R_Q_NOPE, .writes = R_Q_ABS, .tagged_in = {tag_q & R_Q_NOPE}, .dep_bit = after_q);
    NODE(g, KV_STORE(ks), .reads = R_KV | R_Q_ROPE, .writes = R_CACHE | R_Q_ABS_ROPE,
         .tagged_in = {tag_qkv & R_KV, tag_q & R_Q_ROPE}, .dep_bit = after_q);
    if (kv_only)
        return;

    /* attention partials over chunks of the cache (grid from the params) */
    vk_attn_args at = {.g = ag, .q_abs = V(b->q_abs, v->q_abs), .q_abs_z = c->n_head * ag->RS,
                       .cache = V(b->cache[il], 0), .part = V(b->part, v->part), .chunk_cap = b->part_cap,
                       .kq_scale = c->kq_scale, .params = v->params, .indirect = vk_graph_buf(g, ind), .nz = 1,
                       .early_lag = v->col};
    NODE(g, ATTN(at), .reads = R_Q_ABS | R_Q_ABS_ROPE | R_CACHE, .writes = R_PART, .dep_bit = DEP_KB);

    /* combine + v_b per head */
    vk_attn_vb_args vb = {.g = ag, .v_b = &L->v_b, .part = V(b->part, v->part), .chunk_cap = b->part_cap,
                          .params = v->params, .o = V(b->o, v->o), .o_z = c->n_head * c->v_head, .nz = 1};
    NODE(g, ATTN_VB(vb), .reads = R_PART, .writes = R_O, .dep_bit = DEP_ATTN);

    /* x += attn_output . o */
    vk_mv_args ao = {.name = "attn_output", .w = &L->attn_out, .x = V(b->o, v->o), .y = x, .nz = 1,
                     .accumulate = true};
    NODE(g, MV(ao), .reads = R_O | R_X, .writes = R_X, .dep_bit = DEP_VB);
}

static void attention(vk_graph *g, const vk_engine *e, const vcol *v, uint32_t il, bool tagged)
{
    attention_steps(g, e, v, il, tagged, false);
}

/* The dense FFN (behind barriers: its boundaries have no bits). */
static void ffn_dense(vk_graph *g, const vk_engine *e, const vcol *v, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    vk_vec x = V(v->b->x, v->x), h = V(v->b->h, v->h);

    /* h = silu(gate . norm(x)) * (up . norm(x)) */
    vk_glu_args gu = {.name = "ffn_gate_up", .gate = &L->ffn_gate, .up = &L->ffn_up, .x = x, .norm = &L->ffn_norm,
                      .eps = c->rms_eps, .h = h, .h_z = 0, .nz = 1};
    NODE(g, GLU(gu), .reads = R_X, .writes = R_H);

    /* x += down . h */
    vk_mv_args dn = {.name = "ffn_down", .w = &L->ffn_down, .x = h, .y = x, .nz = 1, .accumulate = true};
    NODE(g, MV(dn), .reads = R_H | R_X, .writes = R_X);
}

/* The shared expert's down as a matvec of its own, into x_norm (a prompt
 * batch's buffer, idle in decode), where its type differs from the routed
 * experts' down: the down kernel then adds that product instead of reading
 * a second type (vk_moe_down_args.shared_out).  False: the down takes both
 * matrices (same type, or kernels that cannot split). */
static bool shared_down_split(vk_graph *g, const vk_engine *e, const vcol *v, uint32_t il, vk_mv_args *sd,
                              vk_moe_down_args *da)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    if (!L->has_shared || L->down_sh.type == L->down_exps.type)
        return false;
    vk_vec out = V(v->b->x_norm, v->x_norm);
    *sd = (vk_mv_args){.name = "shexp_down", .w = &L->down_sh, .x = V(v->b->h, v->h + c->n_expert_used * v->b->h_z),
                       .y = out, .nz = 1};
    vk_moe_down_args split = *da;
    split.shared = NULL;
    split.shared_out = &out;
    if (!vk_mv_deps(&e->kb, sd) || !vk_moe_down_deps(&e->kb, &split))
        return false;
    split.shared_out = vk_graph_vec(g, out);
    *da = split;
    return true;
}

/* The MoE FFN of layer il (column v). */
static void ffn_moe(vk_graph *g, const vk_engine *e, const vcol *v, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_bufs *b = v->b;
    uint32_t K = c->n_expert_used, ids_off = il * b->n_batch * K + v->ids;
    vk_vec x = V(b->x, v->x), ids = V(b->ids, ids_off), wts = V(b->wts, ids_off);

    /* router + top-k || shared expert gate/up: the shared expert does not
     * wait for the routing, and the router's few bytes leave the memory
     * system idle (gpu/PERF.md runs 11, 16) */
    vk_router_args ra = {.w = &L->router, .x = x, .norm = L->ffn_norm, .eps = c->rms_eps,
                         .logits = V(b->rlogits, v->rlogits), .ids = ids, .wts = wts,
                         .bias = L->has_bias ? &L->exp_probs_b : NULL, .counter = V(v->counters, 0), .n_used = K, .gating = c->gating, .nz = 1,
                         .norm_w = c->expert_weights_norm,
                         .scale = c->expert_weights_scale == 1.0f ? 0.0f : c->expert_weights_scale};
    NODE(g, ROUTER(ra), .reads = R_X, .writes = R_ROUTE, .dep_bit = DEP_OUT);
    if (L->has_shared) {
        vk_glu_args gs = {.name = "shexp_gate_up", .gate = &L->gate_sh, .up = &L->up_sh, .x = x, .norm = &L->ffn_norm,
                          .eps = c->rms_eps, .h = V(b->h, v->h + K * b->h_z), .h_z = b->h_z, .nz = 1};
        NODE(g, GLU(gs), .reads = R_X, .writes = R_H_SH, .dep_bit = DEP_OUT);
    }

    /* gate/up + SiLU of the routed experts (|| the shared expert's down
     * where it runs apart) */
    vk_glu_args gu = {.name = "moe_gate_up", .gate = &L->gate_exps, .up = &L->up_exps, .x = x, .norm = &L->ffn_norm,
                      .eps = c->rms_eps, .h = V(b->h, v->h), .h_z = b->h_z, .nz = K, .ids = vk_graph_vec(g, ids)};
    vk_moe_down_args da = {.name = "moe_down", .down = &L->down_exps, .shared = L->has_shared ? &L->down_sh : NULL,
                           .h = V(b->h, v->h), .h_z = b->h_z, .nz = K, .ids = ids, .wts = wts, .y = x};
    vk_mv_args sd;
    bool split = shared_down_split(g, e, v, il, &sd, &da);
    NODE(g, GLU(gu), .reads = R_X | R_ROUTE, .writes = R_H, .dep_bit = DEP_ROUTE);
    if (split)
        NODE(g, MV(sd), .reads = R_H_SH, .writes = R_Y_SH, .dep_bit = DEP_ROUTE);

    /* x += sum_k w_k down_k . h_k + down_s . h_s; the down reads the expert
     * ids before its wait (to load their weights early) */
    vk_res shared_in = split ? R_Y_SH : L->has_shared ? R_H_SH : 0;
    NODE(g, MOE_DOWN(da), .reads = R_H | shared_in | R_ROUTE | R_X, .writes = R_X, .reads_early = R_ROUTE,
         .dep_bit = DEP_GU);
}

/* The MoE FFN of layer il whose routed experts are in host memory
 * (vk_hostmoe.c): router + top-k (into host-visible ids and weights) ||
 * the ffn-normed x for the CPU, where the part ends (cut[0]); then the
 * shared expert, x += down_s . h_s, which the GPU runs while the CPU
 * computes the routed sum (a side part, up to cut[1]); then the next part
 * adds that sum into x. */
static void ffn_moe_host(vk_graph *g, const vk_engine *e, uint32_t il, uint32_t *cut)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_bufs *b = &e->b;
    const vk_hostmoe *hx = &e->hx;
    vk_vec x = V(b->x, 0);
    vk_router_args ra = {.w = &L->router, .x = x, .norm = L->ffn_norm, .eps = c->rms_eps, .logits = V(b->rlogits, 0),
                         .ids = V(hx->ids, 0), .wts = V(hx->wts, 0), .bias = L->has_bias ? &L->exp_probs_b : NULL,
                         .counter = V(b->counters, 0), .n_used = c->n_expert_used, .gating = c->gating, .nz = 1,
                         .norm_w = c->expert_weights_norm,
                         .scale = c->expert_weights_scale == 1.0f ? 0.0f : c->expert_weights_scale};
    NODE(g, ROUTER(ra), .reads = R_X, .writes = R_ROUTE, .dep_bit = DEP_OUT);
    vk_rmsnorm_args xn = {.x = x, .y = V(hx->xn, 0), .w = L->ffn_norm, .n = c->n_embd, .x_z = c->n_embd,
                          .y_z = c->n_embd, .nz = 1, .eps = c->rms_eps, .params = b->params};
    NODE(g, RMSNORM(xn), .reads = R_X, .writes = R_XN_HOST);
    cut[0] = g->n;
    vk_vec h_sh = V(b->h, c->n_expert_used * b->h_z);
    if (L->has_shared) {
        vk_glu_args gs = {.name = "shexp_gate_up", .gate = &L->gate_sh, .up = &L->up_sh, .x = x, .norm = &L->ffn_norm,
                          .eps = c->rms_eps, .h = h_sh, .h_z = b->h_z, .nz = 1};
        NODE(g, GLU(gs), .reads = R_X, .writes = R_H_SH);
        vk_mv_args sd = {.name = "shexp_down", .w = &L->down_sh, .x = h_sh, .y = x, .nz = 1, .accumulate = true};
        NODE(g, MV(sd), .reads = R_H_SH | R_X, .writes = R_X);
    }
    cut[1] = g->n;
    /* x += y: moe_combine with one slot of weight 1 (exact) */
    vk_moe_combine_args add = {.y = V(hx->y, 0), .x = x, .wts = V(hx->one, 0), .H = c->n_embd, .K = 1,
                               .max_tokens = 1, .params = b->params};
    NODE(g, MOE_COMBINE(add), .reads = R_Y_HOST | R_X, .writes = R_X);
}

/* ---- the NextN block (drafting) --------------------------------------------------------
 * Only where engine_params.draft is on and the file has the block
 * (vk_weights.has_nextn).  Its rows, one token a submit, as
 * core/ref/ref_forward.h defines them:
 *
 *   e = enorm(embedding of x_p)  ||  hn = hnorm(h_{p-1})  (kept row, or given)
 *   x = eh_proj . [e | hn]
 *   its own layer (n_layer): attention over its own latent cache, its FFN
 *   out = head_norm(x) (to the host)  ||  logits = head . head_norm(x) (to the host)
 *
 * All behind barriers: its steps share no counters with the decode graph's
 * (whose words count per decode submit). */

/* h_p = output_norm(x) into the kept row of the decode's position. */
static void keep_hidden(vk_graph *g, const vk_engine *e, const vcol *v)
{
    const model_config *c = &e->m->cfg;
    vk_rmsnorm_args kh = {.x = V(e->b.x, v->x), .y = V(e->b.hid, 0), .w = e->w.output_norm, .n = c->n_embd,
                          .x_z = c->n_embd, .y_z = c->n_embd, .nz = 1, .eps = c->rms_eps, .params = v->params,
                          .y_at_pos = true};
    NODE(g, RMSNORM(kh), .reads = R_X, .writes = R_HID);
}

/* One NextN row at params' position; `given`: h from the host (nx_hin, a
 * chained draft's row) instead of the kept row before the position;
 * `kv_only`: the row's cache row alone -- what a row whose logits and
 * output no one reads leaves for the rows after it (the same kernels on
 * the same inputs as the whole row's, so the same bits). */
static void nextn(vk_graph *g, const vk_engine *e, bool given, bool kv_only)
{
    const model_config *c = &e->m->cfg;
    const vk_nextn_w *nw = &e->w.nextn;
    const vk_bufs *b = &e->b;
    uint32_t H = c->n_embd, il = c->n_layer;
    g->segment = 0;
    vk_embed_args em = {.w = nw->own_embed ? &nw->embed : &e->w.tok_embd, .tokens = V(b->params, VKP_TOKENS),
                        .x = V(b->nx_e, 0), .nz = 1};
    NODE(g, EMBED(em), .writes = R_NX_E);
    /* [enorm(e) | hnorm(h)] */
    vk_rmsnorm_args en = {.x = V(b->nx_e, 0), .y = V(b->nx_cat, 0), .w = nw->enorm, .n = H, .x_z = H, .y_z = H,
                          .nz = 1, .eps = c->rms_eps, .params = b->params};
    vk_rmsnorm_args hn = {.x = V(given ? b->nx_hin : b->hid, 0), .y = V(b->nx_cat, H), .w = nw->hnorm, .n = H,
                          .x_z = H, .y_z = H, .nz = 1, .eps = c->rms_eps, .params = b->params,
                          .x_prev_pos = !given};
    NODE(g, RMSNORM(en), .reads = R_NX_E, .writes = R_NX_CAT_E);
    NODE(g, RMSNORM(hn), .reads = given ? 0 : R_HID, .writes = R_NX_CAT_H);
    /* x = eh_proj . [e | hn] */
    vk_mv_args ep = {.name = "nextn_eh_proj", .w = &nw->eh_proj, .x = V(b->nx_cat, 0), .y = V(b->x, 0), .nz = 1};
    NODE(g, MV(ep), .reads = R_NX_CAT_E | R_NX_CAT_H, .writes = R_X);
    /* its layer */
    g->segment = 1;
    vcol v0 = column(e, 0, false);
    attention_steps(g, e, &v0, il, false, kv_only);
    if (kv_only)
        goto done;
    if (e->w.layers[il].is_moe)
        ffn_moe(g, e, &v0, il);
    else
        ffn_dense(g, e, &v0, il);
    /* out = head_norm(x) || logits = head . head_norm(x) */
    g->segment = 2;
    const vk_vec *hnw = nw->own_head_norm ? &nw->head_norm : &e->w.output_norm;
    vk_rmsnorm_args on = {.x = V(b->x, 0), .y = V(b->nx_out, 0), .w = *hnw, .n = H, .x_z = H, .y_z = H, .nz = 1,
                          .eps = c->rms_eps, .params = b->params};
    NODE(g, RMSNORM(on), .reads = R_X, .writes = R_NX_OUT);
    vk_mv_args hd = {.name = "nextn_head", .w = nw->own_head ? &nw->head : &e->w.output, .x = V(b->x, 0),
                     .y = V(b->host_logits, 0), .nz = 1, .norm = hnw, .eps = c->rms_eps};
    NODE(g, MV(hd), .reads = R_X, .writes = R_LOGITS);
done:
    for (uint32_t i = 0; i < g->n; i++)
        g->nodes[i].dep_bit = 0; /* barriers only (see above) */
}

/* The sampling kernels' operands, in the engine's buffers. */
static vk_sample_bufs sample_bufs(const vk_engine *e)
{
    vk_buf ind = e->b.smp_words;
    ind.off += SMP_PICK_IND * 4;
    ind.size = 12;
    vk_buf sel_ind[2] = {e->b.smp_state, e->b.smp_state};
    for (int i = 0; i < 2; i++) {
        sel_ind[i].off += (SST_IND + 3u * i) * 4u;
        sel_ind[i].size = 12;
    }
    return (vk_sample_bufs){.g = &e->b.sg, .logits = {e->b.logits, 0}, .smp = e->b.smp_words, .cand_v = e->b.smp_cand_v,
                            .cand_i = e->b.smp_cand_i, .ms = e->b.smp_ms, .part = e->b.smp_part, .counter = e->b.smp_count,
                            .result = e->b.smp_result, .state = e->b.smp_state, .hist = e->b.smp_hist,
                            .pick_ind = ind, .sel_ind = {sel_ind[0], sel_ind[1]}, .out_ids = e->b.out_ids,
                            .out_vals = e->b.out_vals};
}

/* ---- the token out ------------------------------------------------------------------
 * Sampling (core/sample/sampler.h's definition) on the logits buffer: the
 * penalties and the K best tokens (sample_cand), then the token or the
 * verdict that the candidates cannot hold the kept tokens (sample_pick,
 * its grid from the sampling words; where min-p binds first on a flat
 * distribution it draws over the whole vocabulary itself).  Then the top-p
 * cut and the draw over the whole vocabulary (sample_select, five passes
 * and one) on grids that sample_pick leaves empty unless it gave that
 * verdict: a flat distribution costs no second submit (run 45: that round
 * trip was most of the chat sampler's cost against greedy), a peaked one
 * six empty dispatches.  A top-k beyond the candidates to be found too (rare) still
 * takes the host's program of all three (finish_sample).  The host reads
 * back a few words. */
static void sample(vk_graph *g, const vk_engine *e)
{
    vk_sample_bufs sb = sample_bufs(e);
    NODE(g, SAMPLE_CAND(sb), .reads = R_LOGITS, .writes = R_LOGITS | R_CAND | R_SEL_GRID);
    NODE(g, SAMPLE_PICK(sb, true), .reads = R_LOGITS | R_CAND | R_SEL_GRID, .writes = R_TOKEN | R_SEL_GRID);
    for (uint32_t sel = 1; sel < 3; sel++)
        for (uint32_t pass = 0; pass < vk_sample_passes(sel); pass++)
            NODE(g, SAMPLE_SELECT(sb, sel, pass, true), .reads = R_LOGITS | R_TOKEN | R_SEL_GRID, .grid = R_SEL_GRID,
                 .writes = R_TOKEN);
}

/* Output norm + head, then (`sampled`) sampling (beside the head, with
 * drafting on: the position's hidden state kept for the NextN block). */
static void head(vk_graph *g, const vk_engine *e, const vcol *v, bool sampled)
{
    const model_config *c = &e->m->cfg;
    vk_mv_args hd = {.name = "output", .w = &e->w.output, .x = V(e->b.x, v->x), .y = V(v->logits_buf, v->logits),
                     .nz = 1, .norm = &e->w.output_norm, .eps = c->rms_eps};
    NODE(g, MV(hd), .reads = R_X, .writes = R_LOGITS);
    if (e->w.has_nextn)
        keep_hidden(g, e, v);
    if (sampled)
        sample(g, e);
}

/* The decode graph's table for the token of column v; `tagged`: qkv and q
 * as tagged words; cut[2i], cut[2i + 1] (when given) get where host layer
 * i's side part begins and ends (vk_engine.h: vk_hostmoe_record_part);
 * `sampled`: the sampling kernels after the head. */
static void decode(vk_graph *g, const vk_engine *e, const vcol *v, bool tagged, uint32_t *cut, bool sampled)
{
    uint32_t n_cut = 0, scratch[2];
    const model_config *c = &e->m->cfg;
    g->segment = 0;
    vk_embed_args em = {.w = &e->w.tok_embd, .tokens = V(v->params, VKP_TOKENS), .x = V(e->b.x, v->x), .nz = 1};
    NODE(g, EMBED(em), .writes = R_X);
    for (uint32_t il = 0; il < c->n_layer; il++) {
        g->segment = (int)il + 1;
        attention(g, e, v, il, tagged);
        if (e->w.layers[il].host_exps)
            ffn_moe_host(g, e, il, cut ? &cut[2 * n_cut++] : scratch);
        else if (e->w.layers[il].is_moe)
            ffn_moe(g, e, v, il);
        else
            ffn_dense(g, e, v, il);
    }
    g->segment = (int)c->n_layer + 1;
    head(g, e, v, sampled);
}

/* Whether the decode graph can keep qkv and q as tagged words: q
 * compression (q_b between) and one q_a|kv_a matrix in every layer (one
 * buffer of tagged words); the kernels' part the planner checks. */
static bool tagged_layout(const vk_engine *e)
{
    if (e->m->cfg.q_lora_rank == 0)
        return false;
    for (uint32_t il = 0; il < e->m->cfg.n_layer; il++)
        if (!e->w.layers[il].qkv_merged)
            return false;
    return true;
}

/* The kept tokens and the draw over the whole vocabulary (a flat
 * distribution; submitted after sample_pick asked for it): the selections
 * of `set` (VK_SEL_*: the top-k bound, the top-p cut; five passes each) and
 * the draw (one) (shaders/sample_select.comp). */
static void select_all(vk_graph *g, const vk_engine *e, uint32_t set)
{
    vk_sample_bufs sb = sample_bufs(e);
    for (uint32_t sel = 0; sel < 3; sel++) {
        if ((sel == 0 && !(set & VK_SEL_TOPK)) || (sel == 1 && !(set & VK_SEL_TOPP)))
            continue;
        for (uint32_t pass = 0; pass < vk_sample_passes(sel); pass++)
            NODE(g, SAMPLE_SELECT(sb, sel, pass, false), .reads = R_LOGITS | R_TOKEN, .writes = R_TOKEN);
    }
}

/* ---- the verify -------------------------------------------------------------------------
 * n tokens at positions pos..pos+n-1 (column c: its own params words)
 * through the decode graph in one program, every position's logits to host
 * memory.  Each column's table is the decode graph's -- the same calls in
 * the same order, on the column's own slots -- so each column's arithmetic
 * is a single-token decode's, bit for bit (what engine.h's verify
 * promises).  The tables are interleaved call by call: the n calls of a
 * step touch nothing of each other's and run together, each weight read by
 * the n columns at about the same time (from L2 after the first).  (Each
 * decode kernel's grid fills the GPU for one token, so a column more still
 * costs ~40 % of a token: gpu/PERF.md run 53.)  Steps are joined as the
 * decode's are, by counters where the decode's are (words of the verify's
 * own, counting every column's workgroups; each kernel's epoch from its
 * column's params), but by a barrier after the attention, whose grid
 * follows each column's context; no tagged words (one token's).
 *
 * The planner sees each column's buffers as its own bits (VERIFY_OWN, 15 a
 * column); the KV cache is one bit a column for the row it writes, and
 * column c's attention reads the rows of columns 0..c. */
#define VERIFY_OWN                                                                                                 \
    (R_X | R_Q_COMP | R_KV | R_Q_NOPE | R_Q_ROPE | R_Q_ABS | R_Q_ABS_ROPE | R_PART | R_O | R_ROUTE | R_H |      \
     R_H_SH | R_Y_SH | R_LOGITS | R_HID)
enum { VERIFY_OWN_BITS = 15, VERIFY_CACHE_BIT = VERIFY_OWN_BITS * VK_VCOLS };
_Static_assert(VERIFY_CACHE_BIT + VK_VCOLS <= 64, "a vk_res holds every column's bits");

/* r (a column's bits in the decode graph's names) as column c's bits;
 * false where r holds a bit the verify has no column bit for. */
static bool column_res(vk_res r, uint32_t c, bool reads, vk_res *out)
{
    vk_res o = 0;
    uint32_t j = 0;
    for (uint32_t bit = 0; bit < 64; bit++) {
        vk_res m = (vk_res)1 << bit;
        if (!(VERIFY_OWN & m))
            continue;
        if (r & m)
            o |= (vk_res)1 << (c * VERIFY_OWN_BITS + j);
        j++;
    }
    if (r & R_CACHE)
        o |= reads ? (((vk_res)2 << c) - 1) << VERIFY_CACHE_BIT : (vk_res)1 << (VERIFY_CACHE_BIT + c);
    *out = o;
    return !(r & ~(VERIFY_OWN | R_CACHE));
}

static int verify(vk_engine *e, vk_rec *r, uint32_t n)
{
    uint32_t cap = 24 + 12 * e->m->cfg.n_layer;
    vk_graph cols[VK_VCOLS], g;
    uint32_t made = 0;
    int rc = 0;
    if (n < 2 || n > VK_VCOLS || n > e->b.n_batch || e->hx.n_layers)
        return r->status = err_set(r->err, "internal: a verify of %u columns", n);
    for (; made < n && !rc; made++) {
        if ((rc = vk_graph_init(&cols[made], cap, r->err)))
            break;
        vcol v = column(e, made, true);
        decode(&cols[made], e, &v, false, NULL, false);
        rc = cols[made].status;
    }
    if (!rc && !(rc = vk_graph_init(&g, n * cap, r->err))) {
        for (uint32_t i = 0; i < cols[0].n && !rc; i++)
            for (uint32_t c = 0; c < n && !rc; c++) {
                vk_node nd = cols[c].nodes[i];
                if (cols[c].n != cols[0].n || nd.grid || nd.tagged_in[0] || nd.tagged_in[1] || nd.tagged_out ||
                    !column_res(nd.reads, c, true, &nd.reads) || !column_res(nd.writes, c, false, &nd.writes) ||
                    !column_res(nd.reads_early, c, true, &nd.reads_early)) {
                    rc = err_set(r->err, "internal: the decode graph's call %u has no verify columns", i);
                    break;
                }
                /* after the attention (its grid the columns' own), a barrier */
                if (nd.dep_bit == DEP_ATTN)
                    nd.dep_bit = 0;
                nd.dep_params = vk_graph_buf(&g, vk_vcol_params(e, c));
                vk_graph_add(&g, &nd);
            }
        /* the planner's counters in the verify's own words: its steps count
         * every column's workgroups */
        vk_sync vs = e->rec.sync;
        vs.counters = vk_vdep(e, n);
        if (!rc)
            rc = vk_sync_record(&vs, &g, r);
        vk_graph_free(&g);
    }
    for (uint32_t c = 0; c < made; c++)
        vk_graph_free(&cols[c]);
    if (rc && !r->status)
        r->status = -1;
    return rc < 0 || r->status ? -1 : 0;
}

int vk_fwd_record(vk_engine *e, vk_rec *r, vk_program what, uint32_t set)
{
    if (what == VK_PROGRAM_VERIFY)
        return verify(e, r, set);
    if (what == VK_PROGRAM_PREFILL || what == VK_PROGRAM_PREFILL_LOGITS)
        return vk_fwd_record_prefill(e, r, what == VK_PROGRAM_PREFILL_LOGITS);
    if (what == VK_PROGRAM_NEXTN_KV_BATCH)
        return vk_fwd_record_nextn_kv_batch(e, r);
    if (what == VK_PROGRAM_PREFILL_PART || what == VK_PROGRAM_PREFILL_LOGITS_PART)
        return vk_fwd_record_prefill_part(e, r, what == VK_PROGRAM_PREFILL_LOGITS_PART, false, (int)set);
    if (what == VK_PROGRAM_PREFILL_STREAM_PART || what == VK_PROGRAM_PREFILL_LOGITS_STREAM_PART)
        return vk_fwd_record_prefill_part(e, r, what == VK_PROGRAM_PREFILL_LOGITS_STREAM_PART, true, (int)set);
    if (what == VK_PROGRAM_DECODE_PART || what == VK_PROGRAM_DECODE_SIDE) {
        /* the whole table, cut where each host layer hands over (without
         * tagged words: kept simple, the counters within a part stay) */
        vk_graph g;
        uint32_t *cut = calloc(2 * e->hx.n_layers + 1, sizeof *cut);
        if (!cut || vk_graph_init(&g, 24 + 12 * e->m->cfg.n_layer, r->err)) {
            free(cut);
            if (!cut)
                err_set(r->err, "out of host memory");
            return r->status = -1;
        }
        vcol v0 = column(e, 0, false);
        decode(&g, e, &v0, false, cut, true);
        int rc = g.status ? -1 : vk_hostmoe_record_part(e, r, &g, cut, set, what == VK_PROGRAM_DECODE_SIDE, true);
        vk_graph_free(&g);
        free(cut);
        return rc < 0 ? -1 : r->status;
    }
    vk_graph g;
    bool tagged = what == VK_PROGRAM_DECODE && vk_sync_tagged(&e->rec.sync) && tagged_layout(e);
    for (;;) {
        if (vk_graph_init(&g, 24 + 12 * e->m->cfg.n_layer, r->err))
            return r->status = -1;
        g.segment = -1; /* the sampling programs: timed whole (vk_profiler.c) */
        vcol v0 = column(e, 0, false);
        if (what == VK_PROGRAM_DECODE)
            decode(&g, e, &v0, tagged, NULL, true);
        else if (what == VK_PROGRAM_NEXTN || what == VK_PROGRAM_NEXTN_GIVEN || what == VK_PROGRAM_NEXTN_KV)
            nextn(&g, e, what == VK_PROGRAM_NEXTN_GIVEN, what == VK_PROGRAM_NEXTN_KV);
        else if (what == VK_PROGRAM_SAMPLE)
            sample(&g, e);
        else
            select_all(&g, e, set);
        int rc = vk_sync_record(&e->rec.sync, &g, r);
        vk_graph_free(&g);
        if (rc != VK_SYNC_UNTAGGED)
            return rc < 0 ? -1 : r->status;
        tagged = false; /* a kernel cannot take them: the graph again without */
    }
}
