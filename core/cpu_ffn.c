/* cpu_ffn.c: the FFN half of a block in the fast CPU forward pass: a dense
 * SwiGLU, or MoE routing with the routed and shared experts.
 *
 * The layer's FFNs (each routed expert with the tokens that chose it, the
 * shared experts, or the dense block) are "units"; two steps run them all:
 *  - gate/up: work items are (unit, 128 or 256 rows of its hidden width):
 *    both matrices' rows for every token of the unit, SwiGLU, and those
 *    rows of the hidden activation prepared for down.  Items of the same
 *    expert spread over threads when there are fewer experts than threads
 *    (decode: 4 experts + shared), whole experts' worth when there are many
 *    (a prompt chunk reaching most of the 64);
 *  - down: work items are rows of the output (n_embd): each takes those rows
 *    of every unit's down matrix and adds the weighted sum into the residual
 *    at once -- no reduction step, and every byte of every matrix read once.
 * Routing (a few microseconds) runs on thread 0 between them.
 *
 * The expressions and their order are the reference's (ref_forward.c):
 * sigmoid / softmax gating, selection on probs + exp_probs_b, weights
 * normalized and scaled, the routed sum in slot order, then + shared. */
#include "cpu_state.h"

#include <math.h>
#include <string.h>

/* Output rows per down item. */
enum { DOWN_ROWS = 64 };

/* ======================================================================
 * Routing (thread 0)
 * ====================================================================== */

/* In-place softmax; the sum in double as ggml does. */
static void softmax(float *x, uint64_t n)
{
    float mx = -INFINITY;
    for (uint64_t i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (uint64_t i = 0; i < n; i++)
        x[i] *= inv;
}

/* Top-k of one token's selection scores: best first, the lowest expert
 * index winning ties. */
static void top_k(const float *score, uint32_t n_expert, uint32_t k, int32_t *out)
{
    for (uint32_t slot = 0; slot < k; slot++) {
        int32_t best = -1;
        for (uint32_t e = 0; e < n_expert; e++) {
            bool taken = false;
            for (uint32_t j = 0; j < slot; j++)
                taken |= out[j] == (int32_t)e;
            if (!taken && (best < 0 || score[e] > score[best]))
                best = (int32_t)e;
        }
        out[slot] = best;
    }
}

static void route_token(const model_config *c, const float *bias, float *logit, float *sel_score, int32_t *sel,
                        float *w)
{
    uint32_t E = c->n_expert, K = c->n_expert_used;
    if (c->gating == MODEL_GATING_SIGMOID)
        for (uint32_t e = 0; e < E; e++)
            logit[e] = 1.0f / (1.0f + expf(-logit[e]));
    else
        softmax(logit, E);
    for (uint32_t e = 0; e < E; e++)
        sel_score[e] = bias ? logit[e] + bias[e] : logit[e];
    top_k(sel_score, E, K, sel);
    float sum = 0.0f;
    for (uint32_t k = 0; k < K; k++) {
        w[k] = logit[sel[k]];
        sum += w[k];
    }
    if (c->expert_weights_norm) {
        float d = sum > 6.103515625e-5f ? sum : 6.103515625e-5f;
        for (uint32_t k = 0; k < K; k++)
            w[k] /= d;
    }
    if (c->expert_weights_scale != 0.0f && c->expert_weights_scale != 1.0f)
        for (uint32_t k = 0; k < K; k++)
            w[k] *= c->expert_weights_scale;
}

/* Gate/up rows per work item: whole blocks of down's activation form. */
static uint32_t unit_rows(const cf_state *s, const mtensor *down)
{
    return cpu_act_block(cpu_kernels_act(s->k, down->type)) > 128 ? 256 : 128;
}

static uint32_t ceil_div(uint64_t a, uint64_t b)
{
    return (uint32_t)((a + b - 1) / b);
}

/* Every token's experts; the (token, slot) pairs grouped by expert; the
 * layer's units: each chosen expert, then the shared experts. */
static void route(cf_state *s, const model_layer *L, const cf_layer_vecs *v)
{
    const model_config *c = s->c;
    const uint32_t n = s->n, K = c->n_expert_used, E = c->n_expert;
    for (uint32_t t = 0; t < n; t++)
        route_token(c, v->exp_probs_b, s->router + (uint64_t)t * E, s->sel_score, s->sel + (uint64_t)t * K,
                    s->sel_w + (uint64_t)t * K);
    memset(s->exp_start, 0, (E + 1) * sizeof *s->exp_start);
    for (uint64_t i = 0; i < (uint64_t)n * K; i++)
        s->exp_start[s->sel[i] + 1]++;
    for (uint32_t e = 0; e < E; e++)
        s->exp_start[e + 1] += s->exp_start[e];
    memcpy(s->cursor, s->exp_start, E * sizeof *s->cursor);
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t k = 0; k < K; k++) {
            uint32_t at = s->cursor[s->sel[(uint64_t)t * K + k]]++;
            s->pair_tok[at] = t;
            s->pair_at[(uint64_t)t * K + k] = at;
        }
    s->n_units = 0;
    for (uint32_t e = 0; e < E; e++) {
        uint32_t a = s->exp_start[e], m = s->exp_start[e + 1] - a;
        if (m)
            s->units[s->n_units++] = (cf_ffn_unit){
                .gate = &L->gate_exps, .up = &L->up_exps, .down = &L->down_exps, .e = e, .n_tok = m,
                .tok = s->pair_tok + a, .hid_row = a, .hid = 0, .out_row = a,
                .units = ceil_div(c->n_ff_exp, unit_rows(s, &L->down_exps)),
            };
    }
    if (c->n_expert_shared > 0)
        s->units[s->n_units++] = (cf_ffn_unit){
            .gate = &L->gate_shexp, .up = &L->up_shexp, .down = &L->down_shexp, .n_tok = n, .hid = 1,
            .out_row = n * K, .units = ceil_div(L->gate_shexp.ne[1], unit_rows(s, &L->down_shexp)),
        };
}

/* ======================================================================
 * The two steps
 * ====================================================================== */

static float silu(float x)
{
    return x / (1.0f + expf(-x));
}

static uint64_t hid_stride(const cf_state *s, int hid)
{
    return hid == 0 ? s->c->n_ff_exp : s->ff_sd;
}

/* Gate/up items: rows [r0, r1) of unit u's gate and up for its tokens,
 * SwiGLU, those rows prepared for down.  Returns the bytes read. */
static double gate_up(cf_state *s, int tid)
{
    (void)tid;
    uint64_t total = 0;
    double bytes = 0;
    for (uint32_t i = 0; i < s->n_units; i++) {
        total += s->units[i].units;
        bytes += (double)s->units[i].gate->nb1 * (double)s->units[i].gate->ne[1] * 2;
    }
    uint32_t ui = 0;
    uint64_t u_first = 0; /* items come in increasing order per thread */
    for (uint64_t it = cpu_pool_take(s->pool, 1); it < total; it = cpu_pool_take(s->pool, 1)) {
        while (it >= u_first + s->units[ui].units)
            u_first += s->units[ui++].units;
        const cf_ffn_unit *u = &s->units[ui];
        const uint64_t ff = u->gate->ne[1], stride = hid_stride(s, u->hid);
        const uint32_t rows = unit_rows(s, u->down);
        const uint64_t r0 = (it - u_first) * rows, r1 = r0 + rows < ff ? r0 + rows : ff;
        float *g = s->hg[u->hid] + (uint64_t)u->hid_row * stride, *up = s->hu[u->hid] + (uint64_t)u->hid_row * stride;
        cpu_mm jg = {.w = u->gate, .e = u->e, .n_tok = u->n_tok, .xrow = u->tok, .y = g, .ys = stride};
        cpu_mm ju = {.w = u->up, .e = u->e, .n_tok = u->n_tok, .xrow = u->tok, .y = up, .ys = stride};
        cf_job_input(s, &jg, &s->xn_a, u->gate);
        cf_job_input(s, &ju, &s->xn_a, u->up);
        cpu_mm_rows(s->k, &jg, r0, r1);
        cpu_mm_rows(s->k, &ju, r0, r1);
        unsigned mask = cf_kinds(s, u->down, NULL, NULL, NULL);
        for (uint32_t t = 0; t < u->n_tok; t++) {
            float *gt = g + t * stride, *ut = up + t * stride;
            for (uint64_t r = r0; r < r1; r++)
                gt[r] = silu(gt[r]) * ut[r];
            cf_prepare(s, &s->h_a[u->hid], gt, u->hid_row + t, ff, r0, r1, mask);
        }
    }
    return bytes;
}

/* Down items: output rows [r0, r1) of every unit for its tokens, then
 * x += (sum over slots of weight x expert) + shared, or x += dense, for
 * those rows. */
static double down(cf_state *s, bool moe)
{
    const model_config *c = s->c;
    const uint64_t H = c->n_embd, K = c->n_expert_used;
    double bytes = 0;
    for (uint32_t i = 0; i < s->n_units; i++)
        bytes += (double)s->units[i].down->nb1 * (double)H;
    for (uint64_t r0 = cpu_pool_take(s->pool, DOWN_ROWS); r0 < H; r0 = cpu_pool_take(s->pool, DOWN_ROWS)) {
        const uint64_t r1 = r0 + DOWN_ROWS < H ? r0 + DOWN_ROWS : H;
        for (uint32_t i = 0; i < s->n_units; i++) {
            const cf_ffn_unit *u = &s->units[i];
            cpu_mm j = {.w = u->down, .e = u->e, .n_tok = u->n_tok, .y = s->moe_out + (uint64_t)u->out_row * H, .ys = H};
            cf_job_input(s, &j, &s->h_a[u->hid], u->down);
            j.x += (uint64_t)u->hid_row * j.xs;
            cpu_mm_rows(s->k, &j, r0, r1);
        }
        for (uint32_t t = 0; t < s->n; t++) {
            float *x = s->x + t * H;
            if (!moe) {
                const float *o = s->moe_out + t * H;
                for (uint64_t r = r0; r < r1; r++)
                    x[r] += o[r];
                continue;
            }
            const float *shared = c->n_expert_shared ? s->moe_out + (K * s->n + t) * H : NULL;
            for (uint64_t r = r0; r < r1; r++) {
                float acc = 0;
                for (uint64_t k = 0; k < K; k++) {
                    uint64_t i = t * K + k;
                    float term = s->sel_w[i] * s->moe_out[(uint64_t)s->pair_at[i] * H + r];
                    acc = k == 0 ? term : acc + term;
                }
                x[r] += shared ? acc + shared[r] : acc;
            }
        }
    }
    return bytes;
}

void cf_ffn(cf_state *s, uint32_t il, int tid)
{
    const model_config *c = s->c;
    const model_layer *L = &s->m->layers[il];
    const cf_layer_vecs *v = &s->vecs[il];
    const int nth = s->n_threads;
    /* ffn norm; the normalized x prepared for what reads it */
    unsigned mask = L->is_moe ? cf_kinds(s, &L->gate_inp, &L->gate_exps, &L->up_exps, &L->gate_shexp) |
                                    cf_kinds(s, &L->up_shexp, NULL, NULL, NULL)
                              : cf_kinds(s, &L->ffn_gate, &L->ffn_up, NULL, NULL);
    cf_norm_prepare(s, &s->xn_a, s->xn, s->x, v->ffn_norm, 0, s->n, mask, tid, nth);
    if (!L->is_moe) {
        if (tid == 0) {
            s->units[0] = (cf_ffn_unit){.gate = &L->ffn_gate, .up = &L->ffn_up, .down = &L->ffn_down,
                                        .n_tok = s->n, .hid = 1,
                                        .units = ceil_div(L->ffn_gate.ne[1], unit_rows(s, &L->ffn_down))};
            s->n_units = 1;
        }
        cf_step_end(s, tid, CF_ST_DENSE_GATE_UP, 0, false);
        double bytes = gate_up(s, tid);
        cf_step_end(s, tid, CF_ST_DENSE_GATE_UP, bytes, true);
        bytes = down(s, false);
        cf_step_end(s, tid, CF_ST_DENSE_DOWN, bytes, true);
        return;
    }
    cf_step_end(s, tid, CF_ST_ROUTER, 0, false);
    /* router logits */
    cpu_mm jr = {.w = &L->gate_inp, .n_tok = s->n, .y = s->router, .ys = c->n_expert};
    cf_job_input(s, &jr, &s->xn_a, &L->gate_inp);
    double bytes = cpu_mm_step(s->pool, s->k, &jr, 1, nth);
    cf_step_end(s, tid, CF_ST_ROUTER, bytes, false);
    if (tid == 0)
        route(s, L, v);
    cf_step_end(s, tid, CF_ST_ROUTER, 0, true);
    bytes = gate_up(s, tid);
    cf_step_end(s, tid, CF_ST_EXP_GATE_UP, bytes, true);
    bytes = down(s, true);
    cf_step_end(s, tid, CF_ST_EXP_DOWN, bytes, true);
}
