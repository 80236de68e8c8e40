/* vk_prefill.c: the prompt graph -- a batch of up to n_batch tokens through
 * the model with matrix-matrix kernels, recorded once for the largest batch;
 * kernels skip the tiles and tokens past the batch's size (params[1]).
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
#include "vk_graph.h"

static uint32_t ceil_bn(uint32_t n, uint32_t bn)
{
    return (n + bn - 1) / bn;
}

static int norm(vk_engine *e, vk_rec *r, vk_buf x, vk_buf y, vk_vec w, uint32_t n)
{
    vk_call k;
    vk_rmsnorm_args a = {.x = V(x, 0), .y = V(y, 0), .w = w, .n = n, .x_z = n, .y_z = n, .nz = e->n_batch,
                         .eps = e->m->cfg.rms_eps, .params = e->params};
    return record(r, vk_k_rmsnorm(&e->kb, &a, &k), &k);
}

/* Y[t] (=|+=) W . X[t] over the batch's tokens. */
static int mm(vk_engine *e, vk_rec *r, const char *name, const vk_tensor *w, const vk_tensor *up, vk_buf x,
              uint32_t x_stride, vk_buf y, uint32_t y_stride, bool acc)
{
    vk_call k;
    vk_mm_args a = {.name = name, .w = w, .up = up, .x = V(x, 0), .x_stride = x_stride, .y = V(y, 0),
                    .y_stride = y_stride, .nz = 1, .max_tokens = e->n_batch, .accumulate = acc,
                    .params = e->params};
    return record(r, vk_k_mm(&e->kb, &a, &k), &k);
}

static int attention(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_attn_geom *g = &e->ag;
    uint32_t H = c->n_embd, qw = c->qk_nope + c->qk_rope, QW = c->n_head * qw;
    uint32_t kvw = c->kv_lora_rank + c->qk_rope;
    vk_call k;

    TRY(norm(e, r, e->x, e->x_norm, L->attn_norm, H));
    vk_rec_barrier(r);
    if (c->q_lora_rank > 0) {
        TRY(mm(e, r, "attn_q_a", &L->q_a, NULL, e->x_norm, H, e->q_comp, c->q_lora_rank, false));
        TRY(mm(e, r, "attn_kv_a_mqa", &L->kv_a, NULL, e->x_norm, H, e->kv, kvw, false));
        vk_rec_barrier(r);
        TRY(norm(e, r, e->q_comp, e->q_comp_norm, L->q_a_norm, c->q_lora_rank));
        vk_rec_barrier(r);
        TRY(mm(e, r, "attn_q_b", &L->q_b, NULL, e->q_comp_norm, c->q_lora_rank, e->q, QW, false));
    } else {
        TRY(mm(e, r, "attn_q", &L->q, NULL, e->x_norm, H, e->q, QW, false));
        TRY(mm(e, r, "attn_kv_a_mqa", &L->kv_a, NULL, e->x_norm, H, e->kv, kvw, false));
    }
    vk_rec_barrier(r);

    /* absorbed queries for every (token, head) || cache rows + rotated q.
     * k_b and v_b run as batched-head mat-mats (each head's matrix read once
     * per batch; tensor cores where the device has them, gpu/PERF.md runs
     * 12-13), their activations split into fp16 pairs hi + lo: rounded to
     * one fp16 they tipped a near tie in the q4_k_m fixture.
     * Per head: q_abs[t][h][:kv_lora] = k_b[h] . q_nope[t][h], all tokens at once. */
    vk_mm_args ab = {.name = "attn_k_b", .w = &L->k_b, .x = V(e->q, 0), .x_stride = QW, .x_z = qw,
                     .y = V(e->q_abs, 0), .y_stride = c->n_head * g->RS, .y_z = g->RS, .nz = c->n_head,
                     .max_tokens = e->n_batch, .x_split = true, .params = e->params};
    TRY(record(r, vk_k_mm(&e->kb, &ab, &k), &k));
    vk_kv_store_args ks = {.g = g, .kv = V(e->kv, 0), .kv_z = kvw, .norm = L->kv_a_norm, .eps = c->rms_eps,
                           .cache = V(e->cache[il], 0), .rope_cs = e->rope, .q = V(e->q, 0), .q_z = QW,
                           .q_abs = V(e->q_abs, 0), .q_abs_z = c->n_head * g->RS, .params = e->params, .nz = e->n_batch};
    TRY(record(r, vk_k_kv_store(&e->kb, &ks, &k), &k));
    vk_rec_barrier(r);

    vk_buf ind = e->params;
    ind.off += VKP_ATTN_IND_PF * 4;
    ind.size = 12;
    /* the latent outputs go where the absorbed queries were (q_abs is dead
     * after the scores, rows of RS >= kv_lora): written by the attention
     * itself where it takes one chunk a token on tensor cores
     * (vk_attn_writes_latents), else combined from the partials; then per
     * head o[t][h][:v_head] = v_b[h] . o_lat[t][h], all tokens at once */
    vk_attn_args at = {.g = g, .q_abs = V(e->q_abs, 0), .q_abs_z = c->n_head * g->RS, .cache = V(e->cache[il], 0),
                       .part = V(e->part_pf, 0), .chunk_cap = e->part_cap_prefill, .kq_scale = c->kq_scale,
                       .params = e->params, .indirect = &ind, .nz = e->n_batch, .prefill = true,
                       .o = V(e->q_abs, 0), .o_z = c->n_head * g->RS, .o_h = g->RS};
    TRY(record(r, vk_k_attn(&e->kb, &at, &k), &k));
    vk_rec_barrier(r);
    if (!vk_attn_writes_latents(g, e->part_cap_prefill)) {
        vk_attn_combine_args cb = {.g = g, .part = V(e->part_pf, 0), .chunk_cap = e->part_cap_prefill,
                                   .params = e->params, .o = V(e->q_abs, 0), .o_z = c->n_head * g->RS,
                                   .o_h = g->RS, .nz = e->n_batch};
        TRY(record(r, vk_k_attn_combine(&e->kb, &cb, &k), &k));
        vk_rec_barrier(r);
    }
    vk_mm_args vb = {.name = "attn_vb", .w = &L->v_b, .x = V(e->q_abs, 0), .x_stride = c->n_head * g->RS,
                     .x_z = g->RS, .y = V(e->o, 0), .y_stride = c->n_head * c->v_head, .y_z = c->v_head,
                     .nz = c->n_head, .max_tokens = e->n_batch, .x_split = true, .params = e->params};
    TRY(record(r, vk_k_mm(&e->kb, &vb, &k), &k));
    vk_rec_barrier(r);
    TRY(mm(e, r, "attn_output", &L->attn_out, NULL, e->o, c->n_head * c->v_head, e->x, H, true));
    vk_rec_barrier(r);
    return 0;
}

static int ffn_dense(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    TRY(norm(e, r, e->x, e->x_norm, L->ffn_norm, c->n_embd));
    vk_rec_barrier(r);
    TRY(mm(e, r, "ffn_gate_up", &L->ffn_gate, &L->ffn_up, e->x_norm, c->n_embd, e->hp, c->n_ff_dense, false));
    vk_rec_barrier(r);
    TRY(mm(e, r, "ffn_down", &L->ffn_down, NULL, e->hp, c->n_ff_dense, e->x, c->n_embd, true));
    vk_rec_barrier(r);
    return 0;
}

static int ffn_moe(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    uint32_t H = c->n_embd, K = c->n_expert_used, F = c->n_ff_exp;
    uint32_t ids_off = il * e->n_batch * K;
    uint32_t fs = L->has_shared ? L->gate_sh.N : 0;
    vk_call k;
    vk_vec bias = L->exp_probs_b;

    TRY(norm(e, r, e->x, e->x_norm, L->ffn_norm, H));
    vk_rec_barrier(r);
    vk_router_args ra = {.w = &L->router, .x = V(e->x, 0), .x_z = H, .norm = L->ffn_norm, .eps = c->rms_eps,
                         .logits = V(e->rlogits, 0), .ids = V(e->ids, ids_off), .wts = V(e->wts, ids_off),
                         .bias = L->has_bias ? &bias : NULL, .counter = V(e->counters, 0), .n_used = K,
                         .gating = c->gating, .nz = e->n_batch, .norm_w = c->expert_weights_norm,
                         .scale = c->expert_weights_scale == 1.0f ? 0.0f : c->expert_weights_scale,
                         .params = e->params};
    TRY(record(r, vk_k_router(&e->kb, &ra, &k), &k));
    /* the shared expert's hidden state lives after the pairs' */
    uint32_t hs_off = e->n_batch * K * F;
    if (L->has_shared) {
        vk_mm_args sg = {.name = "shexp_gate_up", .w = &L->gate_sh, .up = &L->up_sh, .x = V(e->x_norm, 0), .x_stride = H,
                         .y = V(e->hp, hs_off), .y_stride = fs, .nz = 1, .max_tokens = e->n_batch,
                         .params = e->params};
        TRY(record(r, vk_k_mm(&e->kb, &sg, &k), &k));
    }
    vk_rec_barrier(r);

    vk_buf ind = e->moe_ind;
    /* one tile size for the gate/up and down passes over the same list */
    uint32_t tile = vk_mm_expert_bm(&e->kb, &L->gate_exps);
    if (vk_mm_expert_bm(&e->kb, &L->up_exps) != tile || vk_mm_expert_bm(&e->kb, &L->down_exps) != tile)
        tile = 32;
    vk_moe_group_args gr = {.ids = V(e->ids, ids_off), .K = K, .n_expert = c->n_expert, .list = e->moe_list,
                            .tiles = e->moe_tiles, .indirect = e->moe_ind, .params = e->params,
                            .x_gu = ceil_bn(F, vk_mm_bn(&e->kb, &L->gate_exps, &L->up_exps)),
                            .x_dn = ceil_bn(H, vk_mm_bn(&e->kb, &L->down_exps, NULL)),
                            .tile = tile};
    TRY(record(r, vk_k_moe_group(&e->kb, &gr, &k), &k));
    if (L->has_shared) {
        vk_mm_args sd = {.name = "shexp_down", .w = &L->down_sh, .x = V(e->hp, hs_off), .x_stride = fs,
                         .y = V(e->x, 0), .y_stride = H, .nz = 1, .max_tokens = e->n_batch, .accumulate = true,
                         .params = e->params};
        TRY(record(r, vk_k_mm(&e->kb, &sd, &k), &k));
    }
    vk_rec_barrier_indirect(r);

    vk_buf ind_gu = ind, ind_dn = ind;
    ind_gu.size = 12;
    ind_dn.off += 12;
    ind_dn.size = 12;
    vk_mm_args gu = {.name = "moe_gate_up", .w = &L->gate_exps, .up = &L->up_exps, .x = V(e->x_norm, 0), .x_stride = H,
                     .x_div = K, .y = V(e->hp, 0), .y_stride = F, .nz = 1, .max_tokens = e->n_batch * K,
                     .params = e->params, .list = &e->moe_list, .tiles = &e->moe_tiles, .indirect = &ind_gu,
                     .tile = tile};
    TRY(record(r, vk_k_mm(&e->kb, &gu, &k), &k));
    vk_rec_barrier(r);
    vk_mm_args dn = {.name = "moe_down", .w = &L->down_exps, .x = V(e->hp, 0), .x_stride = F, .x_div = 1,
                     .y = V(e->yp, 0), .y_stride = H, .nz = 1, .max_tokens = e->n_batch * K, .params = e->params,
                     .list = &e->moe_list, .tiles = &e->moe_tiles, .indirect = &ind_dn, .tile = tile};
    TRY(record(r, vk_k_mm(&e->kb, &dn, &k), &k));
    vk_rec_barrier(r);
    vk_moe_combine_args cb = {.y = V(e->yp, 0), .x = V(e->x, 0), .wts = V(e->wts, ids_off), .H = H, .K = K,
                              .max_tokens = e->n_batch, .params = e->params};
    TRY(record(r, vk_k_moe_combine(&e->kb, &cb, &k), &k));
    vk_rec_barrier(r);
    return 0;
}

static int head(vk_engine *e, vk_rec *r, bool logits_to_host)
{
    const model_config *c = &e->m->cfg;
    vk_call k;
    if (logits_to_host) {
        /* every position's logits, straight into host memory */
        TRY(norm(e, r, e->x, e->x_norm, e->w.output_norm, c->n_embd));
        vk_rec_barrier(r);
        return mm(e, r, "output", &e->w.output, NULL, e->x_norm, c->n_embd, e->host_logits, c->n_vocab, false);
    }
    vk_vec on = e->w.output_norm;
    vk_mv_args hd = {.name = "output", .w = &e->w.output, .x = V(e->x, 0), .y = V(e->logits, 0), .nz = 1,
                     .norm = &on, .eps = c->rms_eps, .last_row = c->n_embd, .params = e->params};
    TRY(record(r, vk_k_mv(&e->kb, &hd, &k), &k));
    vk_rec_barrier(r);
    vk_topk_args tk = {.logits = V(e->logits, 0), .n = c->n_vocab, .params = e->params, .geom = e->tg,
                       .cand_v = e->topk_v, .cand_i = e->topk_i, .ms = e->topk_ms, .counter = e->topk_cnt,
                       .out_ids = e->out_ids, .out_vals = e->out_vals};
    return record(r, vk_k_topk(&e->kb, &tk, &k), &k);
}

int vk_fwd_record_prefill(vk_engine *e, vk_rec *r, bool logits_to_host)
{
    const model_config *c = &e->m->cfg;
    vk_call k;
    vk_rec_segment(r, 0);
    vk_embed_args em = {.w = &e->w.tok_embd, .tokens = V(e->params, VKP_TOKENS), .x = V(e->x, 0),
                        .x_z = c->n_embd, .nz = e->n_batch, .check_batch = true};
    TRY(record(r, vk_k_embed(&e->kb, &em, &k), &k));
    vk_rec_barrier(r);
    for (uint32_t il = 0; il < c->n_layer; il++) {
        vk_rec_segment(r, (int)il + 1);
        TRY(attention(e, r, il));
        TRY(e->w.layers[il].is_moe ? ffn_moe(e, r, il) : ffn_dense(e, r, il));
    }
    vk_rec_segment(r, (int)c->n_layer + 1);
    TRY(head(e, r, logits_to_host));
    return r->status;
}
