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
 *   q_abs = k_b . q_nope per head  ||  kv_store       (cache row, rotated q)
 *   attention partials over chunks of the cache       (indirect grid)
 *   combine + v_b per head
 *   x += attn_output . o
 *   router + top-k  ||  shared expert gate/up + SiLU  (ffn_norm fused)
 *   gate/up + SiLU of the routed experts  (|| shared down, if of another type)
 *   x += sum_k w_k down_k . h_k + down_s . h_s
 *
 * Without q compression (DeepSeek-V2-Lite) q comes from q_a's step and k_b
 * runs beside kv_store; dense layers have gate/up then down.  The position,
 * the token and the chunking live in the params buffer the host writes
 * before each submit.
 *
 * With LL (tune.ll; on by default where the counters are) qkv and q live
 * in e->qkv_ll and e->q_ll as tagged words (shaders/dep_flag.glsl): q_b
 * and k_b || kv_store poll the words they read for the tag of their
 * producer's write, so they need no counter and no barrier before them
 * (gpu/PERF.md run 30; x, o and h as tagged words measured slower and were
 * removed). */
#include <string.h>

#include "vk_graph.h"

/* ---- steps ------------------------------------------------------------------------------
 * A step's dispatches run together; the next step depends on all of them.
 * Where both sides' kernels can (their vk_*_deps()), the step's dispatches
 * each count their finished workgroups on a counter and the next step's
 * dispatches, recorded with no pipeline barrier between, wait on that count
 * after issuing their weight loads (a wait costs less than a barrier, and
 * the loads overlap the producer's tail: gpu/PERF.md runs 16-17).
 * Elsewhere the step ends with a barrier.  Each bit of
 * tune.dep_flags (GLMCHAT_DEP_FLAGS) turns one boundary of a layer into a
 * counter (all nine by default where the device is known): */
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
    DEP_NONE = 9,   /* a step that always ends with a barrier */
};
#define DEP_ALL 511u

typedef struct {
    vk_engine *e;
    vk_rec *r;
    vk_dep dep;       /* each dispatch's ends: the previous step's counter, this step's */
    vk_vec word;      /* this step's counter */
    bool linked;      /* joined to the next step by the counter, not a barrier */
    bool ll_linked;   /* joined by tagged words: the next step polls what it reads of this one (LL) */
    uint32_t groups;  /* the step's workgroups so far: what the next step waits for */
    vk_call k;        /* the dispatch being recorded */
} step;

/* Opens the step of layer il ending at `boundary`; `kernels_can`: every
 * dispatch of this step can signal and every one of the next step can wait.
 * With LL the steps after q_a|kv_a and q_b read nothing of them but qkv and
 * q, as tagged words: no counter, no barrier. */
static void step_open(step *s, vk_engine *e, vk_rec *r, uint32_t il, uint32_t boundary, bool kernels_can)
{
    memset(s, 0, sizeof *s);
    s->e = e;
    s->r = r;
    s->ll_linked = e->ll && (boundary == DEP_QA || boundary == DEP_QB);
    s->linked = !s->ll_linked && boundary != DEP_NONE && (e->dep_mask >> boundary & 1) && kernels_can;
    if (s->linked)
        s->word = V(e->dep, 1 + il * VK_DEP_PER_LAYER + boundary);
    if (e->pend) {
        /* the previous step's counter (n = 0: the attention's running total,
         * params[VKP_ATTN_TOTAL]); tune.dep_stall = 1 (fault injection, for
         * the tests) makes every wait expect one workgroup more than there
         * is, so each gives up and the engine must fall back to barriers */
        uint32_t stall = e->tune.dep_stall;
        s->dep = (vk_dep){.wait = &e->pend_word, .wait_n = e->pend_n ? e->pend_n + stall : 0, .params = e->params};
    }
    if (s->linked)
        s->dep.signal = &s->word;
}

/* Records a built dispatch of step s (rc: the builder's result). */
static int step_record(step *s, int rc)
{
    if (record(s->r, rc, &s->k) < 0)
        return -1;
    s->groups += s->k.groups[0] * s->k.groups[1] * s->k.groups[2];
    return 0;
}

/* Step s's dependency ends with the LL sites of `ll` (ll_dep) and what they need. */
static vk_dep step_dep(const step *s, const vk_dep *ll)
{
    vk_dep d = s->dep;
    d.ll_in = ll->ll_in;
    d.ll_out = ll->ll_out;
    if (d.ll_in || d.ll_out) {
        d.params = s->e->params;
        d.ll_fails = s->e->dep;
    }
    return d;
}

/* Builds builder's dispatch for `args` (their dep: LL sites only) with the
 * step's dependency ends and records it. */
#define STEP_CALL(s, builder, args) \
    ((args)->dep = step_dep((s), &(args)->dep), step_record((s), builder(&(s)->e->kb, (args), &(s)->k)))

/* Ends the step: its counter becomes what the next step waits on, or
 * tagged words join it to the next, or a barrier. */
static void step_close(step *s)
{
    vk_engine *e = s->e;
    e->pend = s->linked;
    if (s->ll_linked) {
        vk_rec_link(s->r);
    } else if (s->linked) {
        e->pend_word = s->word;
        e->pend_n = s->groups;
        vk_rec_link(s->r);
    } else {
        vk_rec_barrier(s->r);
    }
}

/* ---- qkv and q as tagged words (LL) ------------------------------------------------------
 * Sites (params.h's VK_LL_SITES), two a layer: layer il's q_a|kv_a writes
 * qkv as site 2 il + 1, its q_b q as 2 il + 2.  With tune.dep_stall every
 * read expects VK_LL_STALL_SITE, which nothing writes (each poll gives up:
 * the fall-back's test). */
static uint32_t qkv_site(uint32_t il) { return 2 * il + 1; }
static uint32_t q_site(uint32_t il) { return 2 * il + 2; }

/* An operand's LL sites: its input read as `in`, its output written as
 * `out` (0: not LL); nothing without LL. */
static vk_dep ll_dep(const vk_engine *e, uint32_t in, uint32_t out)
{
    if (!e->ll)
        return (vk_dep){0};
    return (vk_dep){.ll_in = in && e->tune.dep_stall ? VK_LL_STALL_SITE : in, .ll_out = out};
}

/* ---- operands ---------------------------------------------------------------------------- */

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

/* Whether layer il's first step ([q_a | kv_a]) can wait on a counter. */
static bool first_step_waits(const vk_engine *e, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    bool lora = c->q_lora_rank > 0;
    vk_mv_args m = {.w = &L->qkv_a, .nz = 1}, qm = {.w = lora ? &L->q_a : &L->q, .nz = 1}, kva = {.w = &L->kv_a, .nz = 1};
    return L->qkv_merged ? vk_mv_deps(&e->kb, &m) : vk_mv_deps(&e->kb, &qm) && vk_mv_deps(&e->kb, &kva);
}

/* ---- the layer ------------------------------------------------------------------------------ */

/* The attention block of one layer for one token (token slot 0). */
static int attention(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    const vk_attn_geom *g = &e->ag;
    vk_kb *kb = &e->kb;
    bool lora = c->q_lora_rank > 0;
    uint32_t qw = c->qk_nope + c->qk_rope, nq = lora ? c->q_lora_rank : c->n_head * qw;
    /* q_a (or q) and kv: one matvec over the merged matrix, or two */
    vk_vec an = L->attn_norm, qn = L->q_a_norm;
    vk_vec q_comp = V(e->q_comp, 0), q = V(e->q, 0), kv = V(e->kv, 0);
    vk_buf qkv_buf = e->ll ? e->qkv_ll : e->qkv;
    if (L->qkv_merged) {
        *(lora ? &q_comp : &q) = V(qkv_buf, 0);
        kv = V(qkv_buf, nq);
    }
    if (e->ll)
        q = V(e->q_ll, 0);
    /* LL for qkv and q (ll_can: merged, with q compression) */
    uint32_t s_qkv = e->ll ? qkv_site(il) : 0, s_q = e->ll ? q_site(il) : 0;
    vk_mv_args m = {.name = lora ? "attn_q_a+kv_a" : "attn_q+kv_a", .w = &L->qkv_a, .x = V(e->x, 0),
                    .y = V(qkv_buf, 0), .nz = 1, .norm = &an, .eps = c->rms_eps, .dep = ll_dep(e, 0, s_qkv)};
    vk_mv_args qm = {.name = lora ? "attn_q_a" : "attn_q", .w = lora ? &L->q_a : &L->q, .x = V(e->x, 0),
                     .y = lora ? q_comp : q, .nz = 1, .norm = &an, .eps = c->rms_eps};
    vk_mv_args kva = {.name = "attn_kv_a_mqa", .w = &L->kv_a, .x = V(e->x, 0), .y = kv, .nz = 1, .norm = &an,
                      .eps = c->rms_eps};
    vk_mv_args qb = {.name = "attn_q_b", .w = &L->q_b, .x = q_comp, .y = q, .nz = 1, .norm = &qn, .eps = c->rms_eps,
                     .dep = ll_dep(e, s_qkv, s_q)};
    vk_mv_args kb_args = {.name = "attn_k_b", .w = &L->k_b, .x = q, .x_z = qw, .y = V(e->q_abs, 0), .y_z = g->RS,
                          .nz = c->n_head, .dep = ll_dep(e, s_q, 0)};
    vk_kv_store_args ks = {.g = g, .kv = kv, .kv_z = c->kv_lora_rank + c->qk_rope, .norm = L->kv_a_norm,
                           .eps = c->rms_eps, .cache = V(e->cache[il], 0), .rope_cs = e->rope, .q = q,
                           .q_z = c->n_head * qw, .q_abs = V(e->q_abs, 0), .q_abs_z = c->n_head * g->RS, .params = e->params,
                           .nz = 1, .dep = ll_dep(e, s_qkv, 0), .ll_q = s_q};
    if (s_qkv && e->tune.dep_stall)
        ks.ll_q = VK_LL_STALL_SITE;
    vk_buf ind = e->params;
    ind.off += VKP_ATTN_IND * 4;
    ind.size = 12;
    vk_attn_args at = {.g = g, .q_abs = V(e->q_abs, 0), .q_abs_z = c->n_head * g->RS, .cache = V(e->cache[il], 0),
                       .part = V(e->part, 0), .chunk_cap = e->part_cap, .kq_scale = c->kq_scale,
                       .params = e->params, .indirect = &ind, .nz = 1};
    vk_attn_vb_args vb = {.g = g, .v_b = &L->v_b, .part = V(e->part, 0), .chunk_cap = e->part_cap,
                          .params = e->params, .o = V(e->o, 0), .o_z = c->n_head * c->v_head, .nz = 1};
    vk_mv_args ao = {.name = "attn_output", .w = &L->attn_out, .x = V(e->o, 0), .y = V(e->x, 0), .nz = 1,
                     .accumulate = true};
    step s;

    /* [q_a | kv] = W . norm(x) */
    bool qkv_deps = L->qkv_merged ? vk_mv_deps(kb, &m) : vk_mv_deps(kb, &qm) && vk_mv_deps(kb, &kva);
    step_open(&s, e, r, il, DEP_QA, lora && vk_mv_deps(kb, &qb) && qkv_deps);
    if (L->qkv_merged) {
        TRY(STEP_CALL(&s, vk_k_mv, &m));
    } else {
        TRY(STEP_CALL(&s, vk_k_mv, &qm));
        TRY(STEP_CALL(&s, vk_k_mv, &kva));
    }
    step_close(&s);

    /* q = q_b . norm(q_a) */
    if (lora) {
        step_open(&s, e, r, il, DEP_QB, vk_mv_deps(kb, &qb) && vk_mv_deps(kb, &kb_args));
        TRY(STEP_CALL(&s, vk_k_mv, &qb));
        step_close(&s);
    }

    /* absorbed query per head || new cache row + rotated query rope part */
    step_open(&s, e, r, il, DEP_KB, vk_attn_deps(kb, &at) && vk_mv_deps(kb, &kb_args));
    TRY(STEP_CALL(&s, vk_k_mv, &kb_args));
    TRY(STEP_CALL(&s, vk_k_kv_store, &ks));
    step_close(&s);

    /* attention partials over chunks of the cache (grid from the params) */
    step_open(&s, e, r, il, DEP_ATTN, vk_attn_deps(kb, &at) && vk_attn_vb_deps(kb, &vb));
    TRY(STEP_CALL(&s, vk_k_attn, &at));
    s.groups = 0; /* its grid follows the context: the combine waits on the host's running total */
    step_close(&s);

    /* combine + v_b per head */
    step_open(&s, e, r, il, DEP_VB, vk_attn_vb_deps(kb, &vb) && vk_mv_deps(kb, &ao));
    TRY(STEP_CALL(&s, vk_k_attn_vb, &vb));
    step_close(&s);

    /* x += attn_output . o */
    step_open(&s, e, r, il, DEP_OUT, moe_step_waits(e, il) && vk_mv_deps(kb, &ao));
    TRY(STEP_CALL(&s, vk_k_mv, &ao));
    step_close(&s);
    return 0;
}

static int ffn_dense(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    vk_vec fn = L->ffn_norm;
    vk_glu_args gu = {.name = "ffn_gate_up", .gate = &L->ffn_gate, .up = &L->ffn_up, .x = V(e->x, 0), .norm = &fn,
                      .eps = c->rms_eps, .h = V(e->h, 0), .h_z = 0, .nz = 1};
    vk_mv_args dn = {.name = "ffn_down", .w = &L->ffn_down, .x = V(e->h, 0), .y = V(e->x, 0), .nz = 1,
                     .accumulate = true};
    step s;

    /* h = silu(gate . norm(x)) * (up . norm(x)) */
    step_open(&s, e, r, il, DEP_NONE, false);
    TRY(STEP_CALL(&s, vk_k_glu, &gu));
    step_close(&s);

    /* x += down . h */
    step_open(&s, e, r, il, DEP_NONE, false);
    TRY(STEP_CALL(&s, vk_k_mv, &dn));
    step_close(&s);
    return 0;
}

/* The shared expert's down as a matvec of its own, into e->x_norm (a
 * prompt batch's buffer, idle in decode), where its type differs from the
 * routed experts' down: the down kernel then adds that product instead of
 * reading a second type (vk_moe_down_args.shared_out).  False: the down
 * takes both matrices (same type, or kernels that cannot split). */
static bool shared_down_split(const vk_engine *e, uint32_t il, vk_mv_args *sd, vk_moe_down_args *da,
                              vk_vec *out)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    if (!L->has_shared || L->down_sh.type == L->down_exps.type)
        return false;
    *out = V(e->x_norm, 0);
    *sd = (vk_mv_args){.name = "shexp_down", .w = &L->down_sh, .x = V(e->h, c->n_expert_used * e->h_z), .y = *out,
                       .nz = 1};
    vk_moe_down_args split = *da;
    split.shared = NULL;
    split.shared_out = out;
    if (!vk_mv_deps(&e->kb, sd) || !vk_moe_down_deps(&e->kb, &split))
        return false;
    *da = split;
    return true;
}

static int ffn_moe(vk_engine *e, vk_rec *r, uint32_t il)
{
    const model_config *c = &e->m->cfg;
    const vk_layer_w *L = &e->w.layers[il];
    vk_kb *kb = &e->kb;
    uint32_t K = c->n_expert_used, ids_off = il * e->n_batch * K;
    vk_vec fn = L->ffn_norm, ids = V(e->ids, ids_off), ysh;
    vk_router_args ra = router_args(e, il);
    vk_glu_args gs = shexp_args(e, il, &fn);
    vk_glu_args gu = {.name = "moe_gate_up", .gate = &L->gate_exps, .up = &L->up_exps, .x = V(e->x, 0),
                      .norm = &fn, .eps = c->rms_eps, .h = V(e->h, 0), .h_z = e->h_z, .nz = K, .ids = &ids};
    vk_moe_down_args da = {.name = "moe_down", .down = &L->down_exps, .shared = L->has_shared ? &L->down_sh : NULL,
                           .h = V(e->h, 0), .h_z = e->h_z, .nz = K, .ids = ids, .wts = V(e->wts, ids_off),
                           .y = V(e->x, 0)};
    vk_mv_args sd;
    bool split = shared_down_split(e, il, &sd, &da, &ysh);
    step route, s;

    /* router + top-k || shared expert gate/up: the shared expert does not
     * wait for the routing, and the router's few bytes leave the memory
     * system idle (gpu/PERF.md runs 11, 16) */
    step_open(&route, e, r, il, DEP_ROUTE,
              vk_router_deps(kb, &ra) && (!L->has_shared || vk_glu_deps(kb, &gs)) && vk_glu_deps(kb, &gu));
    TRY(STEP_CALL(&route, vk_k_router, &ra));
    if (L->has_shared)
        TRY(STEP_CALL(&route, vk_k_glu, &gs));
    step_close(&route);

    /* gate/up + SiLU of the routed experts (|| the shared expert's down
     * where it runs apart) */
    step_open(&s, e, r, il, DEP_GU, vk_glu_deps(kb, &gu) && vk_moe_down_deps(kb, &da));
    TRY(STEP_CALL(&s, vk_k_glu, &gu));
    if (split)
        TRY(STEP_CALL(&s, vk_k_mv, &sd));
    step_close(&s);

    /* x += sum_k w_k down_k . h_k + down_s . h_s; the down reads the expert
     * ids before its wait (to load their weights early): with no barrier
     * since the router, it waits for the router's counter first */
    step_open(&s, e, r, il, DEP_DOWN,
              il + 1 < c->n_layer && first_step_waits(e, il + 1) && vk_moe_down_deps(kb, &da));
    if (s.dep.wait && route.linked) {
        da.ids_wait = &route.word;
        da.ids_wait_n = route.groups;
    }
    TRY(STEP_CALL(&s, vk_k_moe_down, &da));
    step_close(&s);
    return 0;
}

/* Whether qkv and q can be tagged words: one q_a|kv_a matrix in every
 * layer (one buffer of tagged words), q compression (q_b between),
 * x-stationary q_a|kv_a, q_b and k_b, and the sites fit. */
static bool ll_can(const vk_engine *e)
{
    const model_config *c = &e->m->cfg;
    if (c->q_lora_rank == 0 || q_site(c->n_layer - 1) >= VK_LL_STALL_SITE)
        return false;
    for (uint32_t il = 0; il < c->n_layer; il++) {
        const vk_layer_w *L = &e->w.layers[il];
        vk_mv_args qb = {.w = &L->q_b, .nz = 1}, kb = {.w = &L->k_b, .nz = c->n_head};
        if (!L->qkv_merged || !first_step_waits(e, il) || !vk_mv_deps(&e->kb, &qb) || !vk_mv_deps(&e->kb, &kb))
            return false;
    }
    return true;
}

/* ---- the token out ------------------------------------------------------------------
 * Sampling (core/sampler.h's definition) on the logits buffer: the
 * penalties and the K best tokens (sample_cand), then the token or the
 * verdict that the candidates cannot hold the kept tokens (sample_pick,
 * its grid from the sampling words).  The host reads back a few words. */
int vk_fwd_record_sample(vk_engine *e, vk_rec *r, bool unused)
{
    (void)unused;
    vk_call k;
    vk_sample_bufs b = vk_engine_sample_bufs(e);
    TRY(record(r, vk_k_sample_cand(&e->kb, &b, &k), &k));
    vk_rec_barrier(r);
    TRY(record(r, vk_k_sample_pick(&e->kb, &b, &k), &k));
    return r->status;
}

/* The kept tokens and the draw over the whole vocabulary (a flat
 * distribution; submitted after sample_pick asked for it): the selections
 * of e->select_set (VK_SEL_*: the top-k bound, the top-p cut) and the draw,
 * five passes each (shaders/sample_select.comp). */
int vk_fwd_record_select(vk_engine *e, vk_rec *r, bool unused)
{
    (void)unused;
    vk_call k;
    vk_sample_bufs b = vk_engine_sample_bufs(e);
    for (uint32_t sel = 0; sel < 3; sel++) {
        if ((sel == 0 && !(e->select_set & VK_SEL_TOPK)) || (sel == 1 && !(e->select_set & VK_SEL_TOPP)))
            continue;
        for (uint32_t pass = 0; pass < 5; pass++) {
            TRY(record(r, vk_k_sample_select(&e->kb, &b, sel, pass, &k), &k));
            vk_rec_barrier(r);
        }
    }
    return r->status;
}

/* Output norm + head, then sampling. */
static int head(vk_engine *e, vk_rec *r)
{
    const model_config *c = &e->m->cfg;
    vk_call k;
    vk_vec on = e->w.output_norm;
    vk_mv_args hd = {.name = "output", .w = &e->w.output, .x = V(e->x, 0), .y = V(e->logits, 0), .nz = 1,
                     .norm = &on, .eps = c->rms_eps};
    TRY(record(r, vk_k_mv(&e->kb, &hd, &k), &k));
    vk_rec_barrier(r);
    return vk_fwd_record_sample(e, r, false);
}

int vk_fwd_record_decode(vk_engine *e, vk_rec *r, bool unused)
{
    (void)unused; /* the logits go to the host by a copy after the graph (vk_engine.c) */
    const model_config *c = &e->m->cfg;
    vk_call k;
    /* counters by default where measured and checked (NVIDIA: in-order
     * workgroup launch, the H200; lavapipe: the CI runs that graph) */
    bool dep_known = e->c.props.vendorID == 0x10DE || e->c.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    uint32_t by_device = dep_known ? DEP_ALL : 0;
    e->dep_mask = e->dep_off ? 0 : e->tune.dep_flags == VK_TUNE_AUTO ? by_device : e->tune.dep_flags;
    /* tagged words where measured and checked (run 30): as the counters */
    bool ll_want = !e->dep_off && (e->tune.ll == VK_TUNE_AUTO ? dep_known : e->tune.ll != 0);
    e->ll = ll_want && ll_can(e);
    e->pend = false;
    vk_rec_segment(r, 0);
    vk_buf tok = e->params;
    vk_embed_args em = {.w = &e->w.tok_embd, .tokens = V(tok, VKP_TOKENS), .x = V(e->x, 0), .nz = 1};
    TRY(record(r, vk_k_embed(&e->kb, &em, &k), &k));
    vk_rec_barrier(r);
    for (uint32_t il = 0; il < c->n_layer; il++) {
        vk_rec_segment(r, (int)il + 1);
        TRY(attention(e, r, il));
        TRY(e->w.layers[il].is_moe ? ffn_moe(e, r, il) : ffn_dense(e, r, il));
    }
    vk_rec_segment(r, (int)c->n_layer + 1);
    TRY(head(e, r));
    return r->status;
}
