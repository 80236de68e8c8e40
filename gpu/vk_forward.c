/* vk_forward.c: the decode graph -- one token through the whole model,
 * recorded once into a command buffer and replayed for every token.
 *
 * Per layer (GLM-4.7-Flash), each line one dependent step; dispatches joined
 * by "||" are independent and run together.  Between two steps the next
 * step's workgroups wait on a counter the previous step's workgroups
 * increment (shaders/dep_flag.glsl; all nine boundaries by default on NVIDIA
 * and lavapipe, GLMCHAT_DEP_FLAGS below), or, where a kernel cannot, the
 * step ends with a pipeline barrier:
 *
 *   [q_a | kv] = W.norm(x)                            (attn_norm fused; one matrix)
 *   q = q_b . norm(q_a)                               (q_a_norm fused)
 *   qa = k_b . q_nope per head  ||  kv_store          (cache row, rotated q)
 *   attention partials over chunks of the cache       (indirect grid)
 *   combine + v_b per head
 *   x += attn_output . o
 *   router + top-k  ||  shared expert gate/up + SiLU  (ffn_norm fused)
 *   gate/up + SiLU of the routed experts
 *   x += sum_k w_k down_k . h_k + down_s . h_s
 *
 * Without q compression (DeepSeek-V2-Lite) q comes from q_a's step and k_b runs beside kv_store;
 * dense layers have gate/up then down.  The position, the token and the
 * chunking live in the params buffer the host writes before each submit. */
#include <string.h>

#include "vk_engine.h"

#define TRY(x)               \
    do {                     \
        if ((x) < 0)         \
            return -1;       \
    } while (0)

static vk_vec V(vk_buf b, uint32_t off)
{
    return (vk_vec){b, off};
}

/* Dependencies by counter (shaders/dep_flag.glsl): where both sides' kernels
 * can, a step's dispatches each count their finished workgroups and the
 * next step's dispatches, recorded with no pipeline barrier between, wait on
 * that count after issuing their weight loads (a barrier costs 2.9 us on the
 * H200, a wait ~1 us, and the loads overlap the producer's tail).  Each bit
 * of GLMCHAT_DEP_FLAGS turns one boundary of a layer into a counter (all
 * nine by default where the device is known): */
enum {
    DEP_QA = 0,     /* [q_a | kv_a] -> q_b */
    DEP_OUT = 1,    /* attn_output -> router || shared gate/up */
    DEP_ROUTE = 2,  /* router || shared gate/up -> routed gate/up */
    DEP_GU = 3,     /* routed gate/up -> down */
    DEP_DOWN = 4,   /* down -> the next layer's [q_a | kv_a] */
    DEP_ATTN = 5,   /* attention -> combine + v_b */
    DEP_VB = 6,     /* combine + v_b -> attn_output */
    DEP_QB = 7,     /* q_b -> k_b || kv_store */
    DEP_KB = 8,     /* k_b || kv_store -> attention */
};
#define DEP_ALL 511u

static bool dep_wanted(const vk_engine *e, uint32_t b)
{
    return (e->dep_mask >> b & 1) != 0;
}

static vk_vec dep_word(const vk_engine *e, uint32_t il, uint32_t b)
{
    return V(e->dep, 1 + il * VK_DEP_PER_LAYER + b);
}

/* A consumer's wait on the pending counter (or nothing: a barrier was recorded). */
static vk_dep dep_wait_pending(const vk_engine *e)
{
    /* GLMCHAT_DEP_STALL=1 (fault injection, for the tests): every wait
     * expects one workgroup more than there is, so each gives up and the
     * engine must fall back to the graph with barriers */
    uint32_t extra = vk_env_u32("GLMCHAT_DEP_STALL", 0, 0, 1);
    uint32_t n = e->pend_n ? e->pend_n + extra : 0; /* 0: the attention's running total */
    return e->pend ? (vk_dep){.wait = &e->pend_word, .wait_n = n, .params = e->params} : (vk_dep){0};
}

/* After a step's producers: either the counter they signalled becomes the
 * next step's wait, or a barrier. */
static void dep_close(vk_engine *e, vk_rec *r, bool linked, vk_vec word, uint32_t n)
{
    e->pend = linked;
    if (linked) {
        e->pend_word = word;
        e->pend_n = n;
        vk_rec_link(r);
    } else {
        vk_rec_barrier(r);
    }
}

static uint32_t groups_of(const vk_call *k)
{
    return k->groups[0] * k->groups[1] * k->groups[2];
}

static int call(vk_engine *e, vk_rec *r, int rc, const vk_call *k)
{
    if (rc < 0)
        return -1;
    vk_rec_call(r, k);
    return r->status;
}

/* The router's operands of MoE layer il (token slot 0). */
static vk_router_args router_args(const vk_engine *e, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    uint32_t K = c->n_expert_used, ids_off = il * e->n_batch * K;
    return (vk_router_args){.w = &L->router, .x = V(e->x, 0), .norm = L->ffn_norm, .eps = c->rms_eps,
                            .logits = V(e->rlogits, 0), .ids = V(e->ids, ids_off), .wts = V(e->wts, ids_off),
                            .bias = L->has_bias ? &L->exp_probs_b : NULL, .counter = V(e->counters, 0),
                            .n_used = K, .gating = c->gating, .nz = 1, .norm_w = c->expert_weights_norm,
                            .scale = c->expert_weights_scale == 1.0f ? 0.0f : c->expert_weights_scale};
}

static vk_glu_args shexp_args(const vk_engine *e, uint32_t il, const vk_vec *fn)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    return (vk_glu_args){.name = "shexp_gate_up", .gate = &L->gate_sh, .up = &L->up_sh, .x = V(e->x, 0), .norm = fn,
                         .eps = c->rms_eps, .h = V(e->h, c->n_expert_used * e->h_z), .h_z = e->h_z, .nz = 1};
}

/* Whether MoE layer il's router step (the router, and the shared gate/up
 * beside it) can wait on a counter instead of a barrier. */
static bool moe_step_waits(const vk_engine *e, uint32_t il)
{
    const vk_layer_w *L = &e->w.layers[il];
    if (!L->is_moe)
        return false;
    vk_router_args ra = router_args(e, il);
    vk_vec fn = L->ffn_norm;
    vk_glu_args gs = shexp_args(e, il, &fn);
    return vk_router_deps(&e->kb, &ra) && (!L->has_shared || vk_glu_deps(&e->kb, &gs));
}

/* The attention block of one layer for one token (token slot 0). */
static int attention(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_attn_geom *g = &e->ag;
    vk_kb *kb = &e->kb;
    uint32_t qw = c->qk_nope + c->qk_rope;
    vk_call k;
    vk_vec an = L->attn_norm;
    vk_buf ind = e->params;
    ind.off += VKP_ATTN_IND * 4;
    ind.size = 12;
    vk_attn_args at = {.g = g, .qa = V(e->qa, 0), .qa_z = c->n_head * g->RS, .cache = V(e->cache[il], 0),
                       .part = V(e->part, 0), .chunk_cap = e->part_cap, .kq_scale = c->kq_scale,
                       .params = e->params, .indirect = &ind, .nz = 1};

    /* q (via q_a and q_b, or directly) and kv, from the normalized x: one
     * matvec over the merged matrix, or two beside each other */
    bool lora = c->q_lora_rank > 0;
    uint32_t nq = lora ? c->q_lora_rank : c->n_head * qw;
    vk_vec qa_raw = V(e->qa_raw, 0), q = V(e->q, 0), kv = V(e->kv, 0), qn = L->q_a_norm;
    if (L->qkv_merged) {
        *(lora ? &qa_raw : &q) = V(e->qkv, 0);
        kv = V(e->qkv, nq);
    }
    vk_mv_args qb = {.name = "attn_q_b", .w = &L->q_b, .x = qa_raw, .y = q, .nz = 1, .norm = &qn,
                     .eps = c->rms_eps};
    vk_mv_args m = {.name = lora ? "attn_q_a+kv_a" : "attn_q+kv_a", .w = &L->qkv_a, .x = V(e->x, 0),
                    .y = V(e->qkv, 0), .nz = 1, .norm = &an, .eps = c->rms_eps};
    vk_mv_args qm = {.name = lora ? "attn_q_a" : "attn_q", .w = lora ? &L->q_a : &L->q, .x = V(e->x, 0),
                     .y = lora ? qa_raw : q, .nz = 1, .norm = &an, .eps = c->rms_eps};
    vk_mv_args kva = {.name = "attn_kv_a_mqa", .w = &L->kv_a, .x = V(e->x, 0), .y = kv, .nz = 1, .norm = &an,
                      .eps = c->rms_eps};
    /* the step's dispatches wait on the previous layer's down (a pending
     * counter) or follow its barrier; they signal q_b's counter */
    vk_vec w_qa = dep_word(e, il, DEP_QA);
    bool link = dep_wanted(e, DEP_QA) && lora && vk_mv_deps(kb, &qb) &&
                (L->qkv_merged ? vk_mv_deps(kb, &m) : vk_mv_deps(kb, &qm) && vk_mv_deps(kb, &kva));
    m.dep = qm.dep = kva.dep = dep_wait_pending(e);
    if (link)
        m.dep.signal = qm.dep.signal = kva.dep.signal = &w_qa;
    uint32_t n_qa = 0;
    if (L->qkv_merged) {
        TRY(call(e, r, vk_k_mv(kb, &m, &k), &k));
        n_qa += groups_of(&k);
    } else {
        TRY(call(e, r, vk_k_mv(kb, &qm, &k), &k));
        n_qa += groups_of(&k);
        TRY(call(e, r, vk_k_mv(kb, &kva, &k), &k));
        n_qa += groups_of(&k);
    }
    dep_close(e, r, link, w_qa, n_qa);
    vk_kv_store_args ks = {.g = g, .kv = kv, .kv_z = c->kv_lora_rank + c->qk_rope,
                           .norm = L->kv_a_norm, .eps = c->rms_eps, .cache = V(e->cache[il], 0), .rope_cs = e->rope,
                           .q = q, .q_z = c->n_head * qw, .qa = V(e->qa, 0), .qa_z = c->n_head * g->RS,
                           .params = e->params, .nz = 1};
    /* absorbed query per head || new cache row + rotated query rope part */
    vk_mv_args kb_args = {.name = "attn_k_b", .w = &L->k_b, .x = q, .x_z = qw, .y = V(e->qa, 0),
                          .y_z = g->RS, .nz = c->n_head};
    if (lora) {
        /* k_b and kv_store wait on q_b's counter */
        vk_vec w_qb = dep_word(e, il, DEP_QB);
        bool link_qb = dep_wanted(e, DEP_QB) && vk_mv_deps(kb, &qb) && vk_mv_deps(kb, &kb_args);
        qb.dep = dep_wait_pending(e);
        if (link_qb)
            qb.dep.signal = &w_qb;
        TRY(call(e, r, vk_k_mv(kb, &qb, &k), &k));
        dep_close(e, r, link_qb, w_qb, groups_of(&k));
    }
    /* ... and the attention on theirs */
    vk_vec w_kb = dep_word(e, il, DEP_KB);
    bool link_kb = dep_wanted(e, DEP_KB) && vk_attn_deps(kb, &at) && vk_mv_deps(kb, &kb_args);
    kb_args.dep = ks.dep = dep_wait_pending(e);
    if (link_kb)
        kb_args.dep.signal = ks.dep.signal = &w_kb;
    uint32_t n_kb = 0;
    TRY(call(e, r, vk_k_mv(kb, &kb_args, &k), &k));
    n_kb += groups_of(&k);
    TRY(call(e, r, vk_k_kv_store(kb, &ks, &k), &k));
    n_kb += groups_of(&k);
    dep_close(e, r, link_kb, w_kb, n_kb);

    /* attention over the cache, split in chunks (grid from the params) */
    vk_attn_vb_args vb = {.g = g, .v_b = &L->v_b, .part = V(e->part, 0), .chunk_cap = e->part_cap,
                          .params = e->params, .o = V(e->o, 0), .o_z = c->n_head * c->v_head, .nz = 1};
    vk_mv_args ao = {.name = "attn_output", .w = &L->attn_out, .x = V(e->o, 0), .y = V(e->x, 0), .nz = 1,
                     .accumulate = true};
    /* the combine waits on the attention's counter (its grid follows the
     * context: the host keeps the running total), attn_output on the combine's */
    vk_vec w_attn = dep_word(e, il, DEP_ATTN), w_vb = dep_word(e, il, DEP_VB);
    bool link_attn = dep_wanted(e, DEP_ATTN) && vk_attn_deps(kb, &at) && vk_attn_vb_deps(kb, &vb);
    bool link_vb = dep_wanted(e, DEP_VB) && vk_attn_vb_deps(kb, &vb) && vk_mv_deps(kb, &ao);
    at.dep = dep_wait_pending(e);
    if (link_attn)
        at.dep.signal = &w_attn;
    TRY(call(e, r, vk_k_attn(kb, &at, &k), &k));
    dep_close(e, r, link_attn, w_attn, 0);
    vb.dep = dep_wait_pending(e);
    if (link_vb)
        vb.dep.signal = &w_vb;
    TRY(call(e, r, vk_k_attn_vb(kb, &vb, &k), &k));
    dep_close(e, r, link_vb, w_vb, groups_of(&k));

    /* x += attn_output . o */
    ao.dep = dep_wait_pending(e);
    /* the router and the shared gate/up wait on this dispatch's counter */
    vk_vec w_out = dep_word(e, il, DEP_OUT);
    bool link_out = dep_wanted(e, DEP_OUT) && moe_step_waits(e, il) && vk_mv_deps(kb, &ao);
    if (link_out)
        ao.dep.signal = &w_out;
    TRY(call(e, r, vk_k_mv(kb, &ao, &k), &k));
    dep_close(e, r, link_out, w_out, groups_of(&k));
    return 0;
}

static int ffn_dense(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    vk_call k;
    vk_vec fn = L->ffn_norm;
    vk_glu_args gu = {.name = "ffn_gate_up", .gate = &L->ffn_gate, .up = &L->ffn_up, .x = V(e->x, 0), .norm = &fn,
                      .eps = c->rms_eps, .h = V(e->h, 0), .h_z = 0, .nz = 1};
    TRY(call(e, r, vk_k_glu(&e->kb, &gu, &k), &k));
    vk_rec_barrier(r);
    vk_mv_args dn = {.name = "ffn_down", .w = &L->ffn_down, .x = V(e->h, 0), .y = V(e->x, 0), .nz = 1,
                     .accumulate = true};
    TRY(call(e, r, vk_k_mv(&e->kb, &dn, &k), &k));
    vk_rec_barrier(r);
    return 0;
}

/* Whether layer il's first step ([q_a | kv_a]) can wait on a counter. */
static bool first_step_waits(const vk_engine *e, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    bool lora = c->q_lora_rank > 0;
    vk_mv_args m = {.w = &L->qkv_a, .nz = 1}, qm = {.w = lora ? &L->q_a : &L->q, .nz = 1}, kva = {.w = &L->kv_a, .nz = 1};
    return L->qkv_merged ? vk_mv_deps(&e->kb, &m) : vk_mv_deps(&e->kb, &qm) && vk_mv_deps(&e->kb, &kva);
}

static int ffn_moe(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    vk_call k;
    uint32_t K = c->n_expert_used, ids_off = il * e->n_batch * K;
    vk_vec fn = L->ffn_norm, ids = V(e->ids, ids_off);
    vk_glu_args gu = {.name = "moe_gate_up", .gate = &L->gate_exps, .up = &L->up_exps, .x = V(e->x, 0),
                      .norm = &fn, .eps = c->rms_eps, .h = V(e->h, 0), .h_z = e->h_z, .nz = K, .ids = &ids};
    vk_moe_down_args da = {.name = "moe_down", .down = &L->down_exps, .shared = L->has_shared ? &L->down_sh : NULL,
                           .h = V(e->h, 0), .h_z = e->h_z, .nz = K, .ids = ids, .wts = V(e->wts, ids_off),
                           .y = V(e->x, 0)};
    /* the router, and beside it the shared expert's gate/up: it does not wait
     * for the routing, and the router's few bytes leave the memory system
     * idle (gpu/PERF.md runs 11, 16); both wait on attn_output's counter (or
     * followed its barrier) and signal the routed gate/up's */
    vk_router_args ra = router_args(e, il);
    vk_glu_args gs = shexp_args(e, il, &fn);
    vk_vec w_route = dep_word(e, il, DEP_ROUTE);
    bool route_linked = dep_wanted(e, DEP_ROUTE) && vk_router_deps(&e->kb, &ra) &&
                        (!L->has_shared || vk_glu_deps(&e->kb, &gs)) && vk_glu_deps(&e->kb, &gu);
    ra.dep = gs.dep = dep_wait_pending(e);
    if (route_linked)
        ra.dep.signal = gs.dep.signal = &w_route;
    uint32_t n_route = 0;
    TRY(call(e, r, vk_k_router(&e->kb, &ra, &k), &k));
    n_route += groups_of(&k);
    if (L->has_shared) {
        TRY(call(e, r, vk_k_glu(&e->kb, &gs, &k), &k));
        n_route += groups_of(&k);
    }
    dep_close(e, r, route_linked, w_route, n_route);

    /* the routed experts' gate/up; the down waits on its counter */
    vk_vec w_gu = dep_word(e, il, DEP_GU);
    bool link = dep_wanted(e, DEP_GU) && vk_glu_deps(&e->kb, &gu) && vk_moe_down_deps(&e->kb, &da);
    gu.dep = dep_wait_pending(e);
    if (link)
        gu.dep.signal = &w_gu;
    TRY(call(e, r, vk_k_glu(&e->kb, &gu, &k), &k));
    uint32_t n_gu = groups_of(&k);
    dep_close(e, r, link, w_gu, n_gu);

    /* the next layer's first step waits on the down's counter */
    vk_vec w_down = dep_word(e, il, DEP_DOWN);
    bool next = dep_wanted(e, DEP_DOWN) && il + 1 < c->n_layer && first_step_waits(e, il + 1) &&
                vk_moe_down_deps(&e->kb, &da);
    da.dep = dep_wait_pending(e);
    /* the down reads the expert ids before its wait (to load their weights
     * early): with no barrier since the router, it waits for the router first */
    if (da.dep.wait && route_linked) {
        da.ids_wait = &w_route;
        da.ids_wait_n = n_route;
    }
    if (next)
        da.dep.signal = &w_down;
    TRY(call(e, r, vk_k_moe_down(&e->kb, &da, &k), &k));
    dep_close(e, r, next, w_down, groups_of(&k));
    return 0;
}

/* Output norm + head, then the top-K + logsumexp (or the logits to the host). */
static int head(vk_engine *e, vk_rec *r, bool logits_to_host)
{
    const model_config *c = &e->m->cfg;
    vk_call k;
    vk_vec on = e->w.output_norm;
    vk_buf lg = logits_to_host ? e->host_logits : e->logits;
    vk_mv_args hd = {.name = "output", .w = &e->w.output, .x = V(e->x, 0), .y = V(lg, 0), .nz = 1, .norm = &on,
                     .eps = c->rms_eps};
    TRY(call(e, r, vk_k_mv(&e->kb, &hd, &k), &k));
    vk_rec_barrier(r);
    vk_topk_args tk = {.logits = V(lg, 0), .n = c->n_vocab, .params = e->params, .geom = e->tg,
                       .cand_v = e->topk_v, .cand_i = e->topk_i, .ms = e->topk_ms, .counter = e->topk_cnt,
                       .out_ids = e->out_ids, .out_vals = e->out_vals};
    TRY(call(e, r, vk_k_topk(&e->kb, &tk, &k), &k));
    return 0;
}

int vk_fwd_record_decode(vk_engine *e, vk_rec *r, bool logits_to_host)
{
    const model_config *c = &e->m->cfg;
    vk_call k;
    /* counters by default where measured and checked (NVIDIA: in-order
     * workgroup launch, the H200; lavapipe: the CI runs that graph) */
    bool dep_known = e->c.props.vendorID == 0x10DE || e->c.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    e->dep_mask = e->dep_off ? 0 : vk_env_u32("GLMCHAT_DEP_FLAGS", dep_known ? DEP_ALL : 0, 0, DEP_ALL);
    e->pend = false;
    vk_rec_segment(r, 0);
    vk_buf tok = e->params;
    vk_embed_args em = {.w = &e->w.tok_embd, .tokens = V(tok, VKP_TOKENS), .x = V(e->x, 0), .nz = 1};
    TRY(call(e, r, vk_k_embed(&e->kb, &em, &k), &k));
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
