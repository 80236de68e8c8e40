/* vk_prefill.c: the prompt graph -- a batch of up to n_batch tokens through
 * the model with matrix-matrix kernels, recorded once for the largest batch;
 * kernels skip the tiles and tokens past the batch's size (params[1]).
 * Each NODE line is one kernel call of the table the planner records
 * (vk_sync.h; a prompt batch's steps are joined by barriers).
 *
 * Per layer:
 *   x_norm = norm(x); q_comp, kv = W.x_norm; q = q_b . norm(q_comp)   (tiled mat-mat)
 *   q_abs = k_b . q_nope per head over all tokens (mat-mat)  ||  kv_store
 *   causal attention (one partial per token and head; on tensor cores,
 *   attn_fd with (token, head) pairs as rows, where the device and the f16
 *   cache allow) ; combine into latents (on tensor cores with one chunk a
 *   token, the attention writes the latents itself: no combine)
 *   o = v_b . latent per head over all tokens (mat-mat)
 *   (k_b and v_b take their activations as fp16 pairs hi + lo on tensor
 *    cores)
 *   x += attn_output . o
 *   x_norm = norm(x); router + top-k per token  ||  shared gate/up
 *   moe_group: pairs per expert, tiles, indirect grids  ||  x += shared down
 *   expert gate/up over the tiles ; expert down over the tiles
 *   x += sum_k w_k y_k
 * MoE works on (token, slot) pairs grouped by expert, so each expert's
 * weights are read once per batch, never copied. */
#include <stdlib.h>

#include "vk_engine.h"

/* What the calls read and write. */
enum {
    R_X = 1u << 0,          /* the residual stream */
    R_X_NORM = 1u << 1,     /* norm(x) */
    R_Q_COMP = 1u << 2,     /* q_a's output */
    R_Q_COMP_NORM = 1u << 3,
    R_KV = 1u << 4,         /* kv_a_mqa's: [latent | k_rope] */
    R_Q = 1u << 5,
    R_Q_ABS = 1u << 6,      /* the absorbed queries' k_b parts, then the latent outputs */
    R_Q_ABS_ROPE = 1u << 7, /* their rotated rope parts */
    R_CACHE = 1u << 8,
    R_PART = 1u << 9,       /* the attention partials */
    R_O = 1u << 10,
    R_ROUTE = 1u << 11,     /* the router's: expert ids and weights, logits, counters */
    R_HP = 1u << 12,        /* the pairs' hidden states (a dense FFN's) */
    R_HP_SH = 1u << 13,     /* the shared expert's */
    R_LIST = 1u << 14,      /* the expert work list and its tiles */
    R_GRID = 1u << 15,      /* the expert passes' indirect grids */
    R_YP = 1u << 16,        /* the pairs' outputs */
    R_LOGITS = 1u << 17,
    R_TOPK = 1u << 18,
    R_XN_HOST = 1u << 19,   /* a host layer's ffn-normed x, for the CPU (vk_hostmoe.c) */
    R_Y_HOST = 1u << 20,    /* the CPU's routed experts' sums */
    R_HID = 1u << 21,       /* drafting: the kept hidden states (output_norm(x) per position) */
};

static uint32_t ceil_bn(uint32_t n, uint32_t bn)
{
    return (n + bn - 1) / bn;
}

/* The fp16 twin of x where it has one (vk_bufs.act16: x_norm, q_comp_norm),
 * else NULL: the rmsnorm that writes x writes it too, and every mat-mat that
 * reads x reads it instead (on tensor cores). */
static const vk_buf *twin16(const vk_engine *e, vk_buf x)
{
    if (!e->b.act16)
        return NULL;
    if (x.buf == e->b.x_norm.buf && x.off == e->b.x_norm.off)
        return &e->b.x_norm16;
    if (x.buf == e->b.q_comp_norm.buf && x.off == e->b.q_comp_norm.off)
        return &e->b.q_comp_norm16;
    return NULL;
}

/* The fp16 twin of o or of the hidden states (vk_bufs.act16_out) where the
 * mat-mat that writes them (w, up) runs on tensor cores -- the fp32 kernel
 * (F32 weights, on any device) writes none -- else NULL.  The mat-mat that
 * reads them is given the same answer for the same producer, so it reads a
 * twin only where one was written. */
static const vk_buf *out16(const vk_engine *e, const vk_buf *twin, const vk_tensor *w, const vk_tensor *up)
{
    return e->b.act16_out && vk_mm_on_tensor_cores(&e->kb, w, up) ? twin : NULL;
}

/* y = norm(x) * w for every token of the batch. */
static vk_rmsnorm_args norm(const vk_engine *e, vk_buf x, vk_buf y, vk_vec w, uint32_t n)
{
    return (vk_rmsnorm_args){.x = V(x, 0), .y = V(y, 0), .w = w, .n = n, .x_z = n, .y_z = n, .nz = e->b.n_batch,
                             .eps = e->m->cfg.rms_eps, .params = e->b.params, .y16 = twin16(e, y)};
}

/* Y[t] (=|+=) W . X[t] over the batch's tokens. */
static vk_mm_args mm(const vk_engine *e, const char *name, const vk_tensor *w, const vk_tensor *up, vk_buf x,
                     uint32_t x_stride, vk_buf y, uint32_t y_stride, bool acc)
{
    return (vk_mm_args){.name = name, .w = w, .up = up, .x = V(x, 0), .x_stride = x_stride, .y = V(y, 0),
                        .y_stride = y_stride, .nz = 1, .max_tokens = e->b.n_batch, .accumulate = acc,
                        .params = e->b.params, .x16 = twin16(e, x)};
}

static void attention(vk_graph *g, const vk_engine *e, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_bufs *b = &e->b;
    const vk_attn_geom *ag = &b->ag;
    uint32_t H = c->n_embd, qw = c->qk_nope + c->qk_rope, QW = c->n_head * qw;
    uint32_t kvw = c->kv_lora_rank + c->qk_rope;

    NODE(g, RMSNORM(norm(e, b->x, b->x_norm, L->attn_norm, H)), .reads = R_X, .writes = R_X_NORM);
    if (c->q_lora_rank > 0) {
        NODE(g, MM(mm(e, "attn_q_a", &L->q_a, NULL, b->x_norm, H, b->q_comp, c->q_lora_rank, false)),
             .reads = R_X_NORM, .writes = R_Q_COMP);
        NODE(g, MM(mm(e, "attn_kv_a_mqa", &L->kv_a, NULL, b->x_norm, H, b->kv, kvw, false)), .reads = R_X_NORM,
             .writes = R_KV);
        NODE(g, RMSNORM(norm(e, b->q_comp, b->q_comp_norm, L->q_a_norm, c->q_lora_rank)), .reads = R_Q_COMP,
             .writes = R_Q_COMP_NORM);
        NODE(g, MM(mm(e, "attn_q_b", &L->q_b, NULL, b->q_comp_norm, c->q_lora_rank, b->q, QW, false)),
             .reads = R_Q_COMP_NORM, .writes = R_Q);
    } else {
        NODE(g, MM(mm(e, "attn_q", &L->q, NULL, b->x_norm, H, b->q, QW, false)), .reads = R_X_NORM, .writes = R_Q);
        NODE(g, MM(mm(e, "attn_kv_a_mqa", &L->kv_a, NULL, b->x_norm, H, b->kv, kvw, false)), .reads = R_X_NORM,
             .writes = R_KV);
    }

    /* absorbed queries for every (token, head) || cache rows + rotated q.
     * k_b and v_b run as batched-head mat-mats (each head's matrix read once
     * per batch; tensor cores where the device has them, gpu/PERF.md runs
     * 12-13), their activations split into fp16 pairs hi + lo: rounded to
     * one fp16 they tipped a near tie in the q4_k_m fixture.
     * Per head: q_abs[t][h][:kv_lora] = k_b[h] . q_nope[t][h], all tokens at once. */
    vk_mm_args ab = {.name = "attn_k_b", .w = &L->k_b, .x = V(b->q, 0), .x_stride = QW, .x_z = qw,
                     .y = V(b->q_abs, 0), .y_stride = c->n_head * ag->RS, .y_z = ag->RS, .nz = c->n_head,
                     .max_tokens = b->n_batch, .x_split = true, .params = b->params};
    NODE(g, MM(ab), .reads = R_Q, .writes = R_Q_ABS);
    vk_kv_store_args ks = {.g = ag, .kv = V(b->kv, 0), .kv_z = kvw, .norm = L->kv_a_norm, .eps = c->rms_eps,
                           .cache = V(b->cache[il], 0), .rope_cs = b->rope, .q = V(b->q, 0), .q_z = QW,
                           .q_abs = V(b->q_abs, 0), .q_abs_z = c->n_head * ag->RS, .params = b->params,
                           .nz = b->n_batch};
    NODE(g, KV_STORE(ks), .reads = R_KV | R_Q, .writes = R_CACHE | R_Q_ABS_ROPE);

    vk_buf ind = b->params;
    ind.off += VKP_ATTN_IND_PF * 4;
    ind.size = 12;
    /* the latent outputs go where the absorbed queries were (q_abs is dead
     * after the scores, rows of RS >= kv_lora): written by the attention
     * itself where it takes one chunk a token on tensor cores
     * (vk_attn_writes_latents), else combined from the partials; then per
     * head o[t][h][:v_head] = v_b[h] . o_lat[t][h], all tokens at once */
    bool direct = vk_attn_writes_latents(ag, b->part_cap_prefill);
    vk_attn_args at = {.g = ag, .q_abs = V(b->q_abs, 0), .q_abs_z = c->n_head * ag->RS, .cache = V(b->cache[il], 0),
                       .part = V(b->part_pf, 0), .chunk_cap = b->part_cap_prefill, .kq_scale = c->kq_scale,
                       .params = b->params, .indirect = vk_graph_buf(g, ind), .nz = b->n_batch, .prefill = true,
                       .o = V(b->q_abs, 0), .o_z = c->n_head * ag->RS, .o_h = ag->RS};
    NODE(g, ATTN(at), .reads = R_Q_ABS | R_Q_ABS_ROPE | R_CACHE, .writes = direct ? R_Q_ABS : R_PART);
    if (!direct) {
        vk_attn_combine_args cb = {.g = ag, .part = V(b->part_pf, 0), .chunk_cap = b->part_cap_prefill,
                                   .params = b->params, .o = V(b->q_abs, 0), .o_z = c->n_head * ag->RS,
                                   .o_h = ag->RS, .nz = b->n_batch};
        NODE(g, ATTN_COMBINE(cb), .reads = R_PART, .writes = R_Q_ABS);
    }
    const vk_buf *o16 = out16(e, &b->o16, &L->v_b, NULL);
    vk_mm_args vb = {.name = "attn_vb", .w = &L->v_b, .x = V(b->q_abs, 0), .x_stride = c->n_head * ag->RS,
                     .x_z = ag->RS, .y = V(b->o, 0), .y16 = o16, .y_stride = c->n_head * c->v_head,
                     .y_z = c->v_head, .nz = c->n_head, .max_tokens = b->n_batch, .x_split = true, .params = b->params};
    NODE(g, MM(vb), .reads = R_Q_ABS, .writes = R_O);
    vk_mm_args ao = mm(e, "attn_output", &L->attn_out, NULL, b->o, c->n_head * c->v_head, b->x, H, true);
    ao.x16 = o16;
    NODE(g, MM(ao), .reads = R_O | R_X, .writes = R_X);
}

static void ffn_dense(vk_graph *g, const vk_engine *e, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_bufs *b = &e->b;
    NODE(g, RMSNORM(norm(e, b->x, b->x_norm, L->ffn_norm, c->n_embd)), .reads = R_X, .writes = R_X_NORM);
    const vk_buf *hp16 = out16(e, &b->hp16, &L->ffn_gate, &L->ffn_up);
    vk_mm_args gu = mm(e, "ffn_gate_up", &L->ffn_gate, &L->ffn_up, b->x_norm, c->n_embd, b->hp, c->n_ff_dense, false);
    gu.y16 = hp16;
    NODE(g, MM(gu), .reads = R_X_NORM, .writes = R_HP);
    vk_mm_args dn = mm(e, "ffn_down", &L->ffn_down, NULL, b->hp, c->n_ff_dense, b->x, c->n_embd, true);
    dn.x16 = hp16;
    NODE(g, MM(dn), .reads = R_HP | R_X, .writes = R_X);
}

/* gate_exps, up_exps, down_exps: the routed experts (the layer's own, or a
 * host layer's in the slot they are copied to: vk_hostmoe_stream.c) */
static void ffn_moe(vk_graph *g, const vk_engine *e, uint32_t il, const vk_tensor *gate_exps,
                    const vk_tensor *up_exps, const vk_tensor *down_exps)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_bufs *b = &e->b;
    uint32_t H = c->n_embd, K = c->n_expert_used, F = c->n_ff_exp;
    uint32_t ids_off = il * b->n_batch * K;
    uint32_t fs = L->has_shared ? L->gate_sh.N : 0;

    NODE(g, RMSNORM(norm(e, b->x, b->x_norm, L->ffn_norm, H)), .reads = R_X, .writes = R_X_NORM);
    vk_router_args ra = {.w = &L->router, .x = V(b->x, 0), .x_z = H, .norm = L->ffn_norm, .eps = c->rms_eps,
                         .logits = V(b->rlogits, 0), .ids = V(b->ids, ids_off), .wts = V(b->wts, ids_off),
                         .bias = L->has_bias ? &L->exp_probs_b : NULL, .counter = V(b->counters, 0), .n_used = K,
                         .gating = c->gating, .nz = b->n_batch, .norm_w = c->expert_weights_norm,
                         .scale = c->expert_weights_scale == 1.0f ? 0.0f : c->expert_weights_scale,
                         .params = b->params};
    NODE(g, ROUTER(ra), .reads = R_X, .writes = R_ROUTE);
    /* the shared expert's hidden state lives after the pairs' */
    uint32_t hs_off = b->n_batch * K * F;
    /* the fp16 twins: normalized x, the shared and the routed experts' hidden states */
    const vk_buf *xn16 = twin16(e, b->x_norm), *ex16 = out16(e, &b->hp16, gate_exps, up_exps);
    const vk_buf *sh16 = L->has_shared ? out16(e, &b->hp16, &L->gate_sh, &L->up_sh) : NULL;
    if (L->has_shared) {
        vk_mm_args sg = {.name = "shexp_gate_up", .w = &L->gate_sh, .up = &L->up_sh, .x = V(b->x_norm, 0), .x16 = xn16,
                         .x_stride = H, .y = V(b->hp, hs_off), .y16 = sh16, .y_stride = fs, .nz = 1,
                         .max_tokens = b->n_batch, .params = b->params};
        NODE(g, MM(sg), .reads = R_X_NORM, .writes = R_HP_SH);
    }

    /* one tile size for the gate/up and down passes over the same list */
    uint32_t tile = vk_mm_expert_bm(&e->kb, gate_exps);
    if (vk_mm_expert_bm(&e->kb, up_exps) != tile || vk_mm_expert_bm(&e->kb, down_exps) != tile)
        tile = 32;
    vk_moe_group_args gr = {.ids = V(b->ids, ids_off), .K = K, .n_expert = c->n_expert, .list = b->moe_list,
                            .tiles = b->moe_tiles, .indirect = b->moe_ind, .params = b->params,
                            .x_gu = ceil_bn(F, vk_mm_bn(&e->kb, gate_exps, up_exps)),
                            .x_dn = ceil_bn(H, vk_mm_bn(&e->kb, down_exps, NULL)), .tile = tile};
    NODE(g, MOE_GROUP(gr), .reads = R_ROUTE, .writes = R_LIST | R_GRID);
    if (L->has_shared) {
        vk_mm_args sd = {.name = "shexp_down", .w = &L->down_sh, .x = V(b->hp, hs_off), .x16 = sh16, .x_stride = fs,
                         .y = V(b->x, 0), .y_stride = H, .nz = 1, .max_tokens = b->n_batch, .accumulate = true,
                         .params = b->params};
        NODE(g, MM(sd), .reads = R_HP_SH | R_X, .writes = R_X);
    }

    vk_buf ind_gu = b->moe_ind, ind_dn = b->moe_ind;
    ind_gu.size = 12;
    ind_dn.off += 12;
    ind_dn.size = 12;
    vk_mm_args gu = {.name = "moe_gate_up", .w = gate_exps, .up = up_exps, .x = V(b->x_norm, 0), .x16 = xn16,
                     .x_stride = H, .x_div = K, .y = V(b->hp, 0), .y16 = ex16, .y_stride = F, .nz = 1,
                     .max_tokens = b->n_batch * K, .params = b->params, .list = &b->moe_list, .tiles = &b->moe_tiles,
                     .indirect = vk_graph_buf(g, ind_gu), .tile = tile};
    NODE(g, MM(gu), .reads = R_X_NORM | R_LIST | R_GRID, .writes = R_HP, .grid = R_GRID);
    vk_mm_args dn = {.name = "moe_down", .w = down_exps, .x = V(b->hp, 0), .x16 = ex16, .x_stride = F, .x_div = 1,
                     .y = V(b->yp, 0), .y_stride = H, .nz = 1, .max_tokens = b->n_batch * K, .params = b->params,
                     .list = &b->moe_list, .tiles = &b->moe_tiles, .indirect = vk_graph_buf(g, ind_dn), .tile = tile};
    NODE(g, MM(dn), .reads = R_HP | R_LIST | R_GRID, .writes = R_YP, .grid = R_GRID);
    vk_moe_combine_args cb = {.y = V(b->yp, 0), .x = V(b->x, 0), .wts = V(b->wts, ids_off), .H = H, .K = K,
                              .max_tokens = b->n_batch, .params = b->params};
    NODE(g, MOE_COMBINE(cb), .reads = R_YP | R_ROUTE | R_X, .writes = R_X);
}

/* The MoE FFN of layer il whose routed experts are in host memory
 * (vk_hostmoe.c): the ffn-normed x (for the shared expert, and into host
 * memory for the CPU), router + top-k into host memory, the shared
 * expert's gate/up; the part ends there (cut[0], cut[1]: no side part);
 * the next one adds the CPU's sums (moe_combine, one slot of weight 1) and
 * the shared down. */
static void ffn_moe_host(vk_graph *g, const vk_engine *e, uint32_t il, uint32_t *cut)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_bufs *b = &e->b;
    const vk_hostmoe *hx = &e->hx;
    uint32_t H = c->n_embd, K = c->n_expert_used;
    uint32_t fs = L->has_shared ? L->gate_sh.N : 0, hs_off = b->n_batch * K * c->n_ff_exp;

    NODE(g, RMSNORM(norm(e, b->x, b->x_norm, L->ffn_norm, H)), .reads = R_X, .writes = R_X_NORM);
    NODE(g, RMSNORM(norm(e, b->x, hx->xn, L->ffn_norm, H)), .reads = R_X, .writes = R_XN_HOST);
    vk_router_args ra = {.w = &L->router, .x = V(b->x, 0), .x_z = H, .norm = L->ffn_norm, .eps = c->rms_eps,
                         .logits = V(b->rlogits, 0), .ids = V(hx->ids, 0), .wts = V(hx->wts, 0),
                         .bias = L->has_bias ? &L->exp_probs_b : NULL, .counter = V(b->counters, 0), .n_used = K,
                         .gating = c->gating, .nz = b->n_batch, .norm_w = c->expert_weights_norm,
                         .scale = c->expert_weights_scale == 1.0f ? 0.0f : c->expert_weights_scale,
                         .params = b->params};
    NODE(g, ROUTER(ra), .reads = R_X, .writes = R_ROUTE);
    /* the fp16 twins: normalized x, the shared expert's hidden state */
    const vk_buf *xn16 = twin16(e, b->x_norm);
    const vk_buf *sh16 = L->has_shared ? out16(e, &b->hp16, &L->gate_sh, &L->up_sh) : NULL;
    if (L->has_shared) {
        vk_mm_args sg = {.name = "shexp_gate_up", .w = &L->gate_sh, .up = &L->up_sh, .x = V(b->x_norm, 0), .x16 = xn16,
                         .x_stride = H, .y = V(b->hp, hs_off), .y16 = sh16, .y_stride = fs, .nz = 1,
                         .max_tokens = b->n_batch, .params = b->params};
        NODE(g, MM(sg), .reads = R_X_NORM, .writes = R_HP_SH);
    }
    cut[0] = cut[1] = g->n;
    vk_moe_combine_args add = {.y = V(hx->y, 0), .x = V(b->x, 0), .wts = V(hx->one, 0), .H = H, .K = 1,
                               .max_tokens = b->n_batch, .params = b->params};
    NODE(g, MOE_COMBINE(add), .reads = R_Y_HOST | R_X, .writes = R_X);
    if (L->has_shared) {
        vk_mm_args sd = {.name = "shexp_down", .w = &L->down_sh, .x = V(b->hp, hs_off), .x16 = sh16, .x_stride = fs,
                         .y = V(b->x, 0), .y_stride = H, .nz = 1, .max_tokens = b->n_batch, .accumulate = true,
                         .params = b->params};
        NODE(g, MM(sd), .reads = R_HP_SH | R_X, .writes = R_X);
    }
}

static void head(vk_graph *g, const vk_engine *e, bool logits_to_host)
{
    const model_config *c = &e->m->cfg;
    const vk_bufs *b = &e->b;
    if (e->w.has_nextn) {
        /* drafting: every position's h_p = output_norm(x) kept for the NextN block */
        vk_rmsnorm_args kh = norm(e, b->x, b->hid, e->w.output_norm, c->n_embd);
        kh.y_at_pos = true;
        NODE(g, RMSNORM(kh), .reads = R_X, .writes = R_HID);
    }
    if (logits_to_host) {
        /* every position's logits, straight into host memory */
        NODE(g, RMSNORM(norm(e, b->x, b->x_norm, e->w.output_norm, c->n_embd)), .reads = R_X, .writes = R_X_NORM);
        NODE(g, MM(mm(e, "output", &e->w.output, NULL, b->x_norm, c->n_embd, b->host_logits, c->n_vocab, false)),
             .reads = R_X_NORM, .writes = R_LOGITS);
        return;
    }
    vk_mv_args hd = {.name = "output", .w = &e->w.output, .x = V(b->x, 0), .y = V(b->logits, 0), .nz = 1,
                     .norm = &e->w.output_norm, .eps = c->rms_eps, .last_row = c->n_embd, .params = b->params};
    NODE(g, MV(hd), .reads = R_X, .writes = R_LOGITS);
    vk_topk_args tk = {.logits = V(b->logits, 0), .n = c->n_vocab, .params = b->params, .geom = b->tg,
                       .cand_v = b->topk_v, .cand_i = b->topk_i, .ms = b->topk_ms, .counter = b->topk_cnt,
                       .out_ids = b->out_ids, .out_vals = b->out_vals};
    NODE(g, TOPK(tk), .reads = R_LOGITS, .writes = R_TOPK);
}

/* The prompt graph's table; cut[2i], cut[2i + 1] (when given) get where
 * host layer i's part ends (vk_engine.h: vk_hostmoe_record_part); with
 * `stream`, cut[i] where host layer i's MoE begins, the MoE reading the
 * experts' slot (vk_hostmoe_stream_record_part). */
static void prefill(vk_graph *g, vk_engine *e, bool logits_to_host, uint32_t *cut, bool stream)
{
    const model_config *c = &e->m->cfg;
    uint32_t n_cut = 0, scratch[2];
    g->segment = 0;
    vk_embed_args em = {.w = &e->w.tok_embd, .tokens = V(e->b.params, VKP_TOKENS), .x = V(e->b.x, 0),
                        .x_z = c->n_embd, .nz = e->b.n_batch, .check_batch = true};
    NODE(g, EMBED(em), .writes = R_X);
    for (uint32_t il = 0; il < c->n_layer; il++) {
        g->segment = (int)il + 1;
        attention(g, e, il);
        const vk_layer_w *L = &e->w.layers[il];
        if (L->host_exps && stream) {
            const vk_tensor *st = &e->hx.st[3 * n_cut];
            cut[n_cut++] = g->n;
            ffn_moe(g, e, il, &st[0], &st[1], &st[2]);
        } else if (L->host_exps) {
            ffn_moe_host(g, e, il, cut ? &cut[2 * n_cut++] : scratch);
        } else if (L->is_moe) {
            ffn_moe(g, e, il, &L->gate_exps, &L->up_exps, &L->down_exps);
        } else {
            ffn_dense(g, e, il);
        }
    }
    g->segment = (int)c->n_layer + 1;
    head(g, e, logits_to_host);
}

int vk_fwd_record_prefill_part(vk_engine *e, vk_rec *r, bool logits_to_host, bool stream, int part)
{
    vk_graph g;
    uint32_t *cut = calloc(2 * e->hx.n_layers + 1, sizeof *cut);
    if (!cut || vk_graph_init(&g, 8 + 22 * e->m->cfg.n_layer, r->err)) {
        free(cut);
        if (!cut)
            err_set(r->err, "out of host memory");
        return r->status = -1;
    }
    prefill(&g, e, logits_to_host, cut, stream);
    int rc = g.status                                            ? -1
             : stream ? vk_hostmoe_stream_record_part(e, r, &g, cut, (uint32_t)part)
                      : vk_hostmoe_record_part(e, r, &g, cut, (uint32_t)part, false, false);
    vk_graph_free(&g);
    free(cut);
    return rc < 0 ? -1 : r->status;
}

/* Drafting: the NextN block's cache rows of a batch of positions alone
 * (its logits and outputs unused: the rows a draft call catches up on, up
 * to a whole prompt's after a long one), row p from (h_{p-1}, token p) as
 * vk_forward.c's nextn does for one, on the mat-mat kernels:
 *   e = enorm(embedding of t_p) || hn = hnorm(h_{p-1})   into [e | hn] (yp)
 *   x = eh_proj . [e | hn] ; x_norm = attn_norm(x) ; kv = kv_a . x_norm
 *   kv_store: the cache rows (its rotated queries, from the last layer's q,
 *   go nowhere anyone reads)
 * [e | hn] needs 2 n_embd floats a token: the pairs' outputs hold
 * n_expert_used x n_embd (vk_nextn_kv_batch_fits).  Engines with routed
 * experts in host memory run it too: it reads no expert. */
bool vk_nextn_kv_batch_fits(const vk_engine *e)
{
    const model_config *c = &e->m->cfg;
    return e->nextn && e->b.n_batch > 1 && c->n_expert_used >= 2;
}

int vk_fwd_record_nextn_kv_batch(vk_engine *e, vk_rec *r)
{
    const model_config *c = &e->m->cfg;
    const vk_nextn_w *nw = &e->w.nextn;
    const vk_bufs *b = &e->b;
    const vk_layer_w *L = &e->w.layers[c->n_layer];
    uint32_t H = c->n_embd, kvw = c->kv_lora_rank + c->qk_rope, qw = c->qk_nope + c->qk_rope;
    if (!vk_nextn_kv_batch_fits(e))
        return r->status = err_set(r->err, "internal: the NextN block's batched cache rows do not fit here");
    vk_graph g;
    if (vk_graph_init(&g, 16, r->err))
        return r->status = -1;
    g.segment = 0;
    vk_embed_args em = {.w = nw->own_embed ? &nw->embed : &e->w.tok_embd, .tokens = V(b->params, VKP_TOKENS),
                        .x = V(b->x, 0), .x_z = H, .nz = b->n_batch, .check_batch = true};
    NODE(&g, EMBED(em), .writes = R_X);
    vk_rmsnorm_args en = {.x = V(b->x, 0), .y = V(b->yp, 0), .w = nw->enorm, .n = H, .x_z = H, .y_z = 2 * H,
                          .nz = b->n_batch, .eps = c->rms_eps, .params = b->params};
    vk_rmsnorm_args hn = {.x = V(b->hid, 0), .y = V(b->yp, H), .w = nw->hnorm, .n = H, .x_z = H, .y_z = 2 * H,
                          .nz = b->n_batch, .eps = c->rms_eps, .params = b->params, .x_prev_pos = true};
    NODE(&g, RMSNORM(en), .reads = R_X, .writes = R_YP);
    NODE(&g, RMSNORM(hn), .reads = R_HID, .writes = R_YP);
    NODE(&g, MM(mm(e, "nextn_eh_proj", &nw->eh_proj, NULL, b->yp, 2 * H, b->x, H, false)), .reads = R_YP,
         .writes = R_X);
    NODE(&g, RMSNORM(norm(e, b->x, b->x_norm, L->attn_norm, H)), .reads = R_X, .writes = R_X_NORM);
    NODE(&g, MM(mm(e, "nextn_kv_a_mqa", &L->kv_a, NULL, b->x_norm, H, b->kv, kvw, false)), .reads = R_X_NORM,
         .writes = R_KV);
    vk_kv_store_args ks = {.g = &b->ag, .kv = V(b->kv, 0), .kv_z = kvw, .norm = L->kv_a_norm, .eps = c->rms_eps,
                           .cache = V(b->cache[c->n_layer], 0), .rope_cs = b->rope, .q = V(b->q, 0),
                           .q_z = c->n_head * qw, .q_abs = V(b->q_abs, 0), .q_abs_z = c->n_head * b->ag.RS,
                           .params = b->params, .nz = b->n_batch};
    NODE(&g, KV_STORE(ks), .reads = R_KV | R_Q, .writes = R_CACHE | R_Q_ABS_ROPE);
    int rc = g.status ? -1 : vk_sync_record(&e->rec.sync, &g, r);
    vk_graph_free(&g);
    return rc < 0 ? -1 : r->status;
}

int vk_fwd_record_prefill(vk_engine *e, vk_rec *r, bool logits_to_host)
{
    const model_config *c = &e->m->cfg;
    vk_graph g;
    if (vk_graph_init(&g, 8 + 20 * c->n_layer, r->err))
        return r->status = -1;
    prefill(&g, e, logits_to_host, NULL, false);
    int rc = vk_sync_record(&e->rec.sync, &g, r);
    vk_graph_free(&g);
    return rc < 0 ? -1 : r->status;
}
