/* cpu_forward.c: the fast CPU forward pass (cpu_forward.h): the steps of
 * a run, the attention half of a block, the head; then set-up.
 *
 * Read forward() first: the model in order, one line per step; each step
 * ends with cf_step_end() (a barrier).  Per-token work (norms, RoPE, the
 * cache write, preparing activations) is split over threads by token;
 * matrices by rows (cpu_mm_step); attention by (token, head).  The FFN
 * half of a block is cpu_ffn.c; the steps' ends and the building blocks
 * both halves use, cpu_steps.c.  The NextN block (drafting) runs as a
 * block n_layer between its own input and head (nextn_forward()). */
#include "cpu_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "model/rope.h"

/* at most 14 characters: the side pane's column */
static const char *const step_names[CF_ST_COUNT] = {
    "embedding", "q_a+kv_a", "q_b", "k_b absorb", "attention", "v_b", "attn out",
    "router", "exp gate/up", "exp down", "dense gate/up", "dense down", "head", "nextn in/head",
};

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ======================================================================
 * Building blocks
 * ====================================================================== */

/* RoPE, ggml mode NORM (adjacent pairs), angles from rope.h. */
static void rope_apply(float *v, const float *cs, uint32_t n_dims)
{
    for (uint32_t i = 0; i < n_dims; i += 2) {
        float x0 = v[i], x1 = v[i + 1];
        v[i] = x0 * cs[i] - x1 * cs[i + 1];
        v[i + 1] = x0 * cs[i + 1] + x1 * cs[i];
    }
}

/* A job over the rows of matrix w for n tokens: inputs from a (from row
 * x0 on), outputs y (ys floats apart). */
static cpu_mm job_of(const cf_state *s, const mtensor *w, const cf_act *a, uint32_t x0, float *y, uint64_t ys,
                     uint32_t n)
{
    cpu_mm j = {.w = w, .n_tok = n, .y = y, .ys = ys};
    cf_job_input(s, &j, a, w);
    j.x += x0 * j.xs;
    return j;
}

/* ======================================================================
 * The model, in order
 * ====================================================================== */

static void embed(cf_state *s, int tid, int nth)
{
    const mtensor *te = &s->m->tok_embd;
    for (uint32_t t = (uint32_t)tid; t < s->n; t += (uint32_t)nth)
        quant_dequant_row(te->type, (const char *)te->data + (uint64_t)s->tokens[t] * te->nb1,
                          s->x + (uint64_t)t * s->c->n_embd, s->c->n_embd);
    cf_step_end(s, tid, CF_ST_EMBED, (double)s->n * (double)te->nb1, true);
}

/* Attention runs over chunks of ATT_CHUNK cached positions: for each, the
 * scores' max m, the sum l of exp(score - m) and the latents weighted by
 * those exponentials; chunks merge in order (the online softmax of flash
 * attention).  A (token, head) done in one go and one done chunk by chunk
 * on different threads then merged execute the same operations in the same
 * order -- the same bits either way, so the choice may follow the shape. */
enum { ATT_CHUNK = 256 };

/* The partial of query q over cached positions [j0, j1) of layer il. */
static void attend_chunk(const cf_state *s, uint32_t il, const float *q, uint32_t j0, uint32_t j1, float *score,
                         float *m_out, float *l_out, float *acc)
{
    const uint64_t w = s->kv_row, lora = s->c->kv_lora_rank;
    const void *kv = s->kv[il];
    float m = -INFINITY, l = 0;
    for (uint32_t j = j0; j < j1; j++) {
        float sc = s->c->kq_scale * (s->kv_f16 ? s->k->dot_f16((const uint16_t *)kv + (uint64_t)j * w, q, w)
                                               : s->k->dot_f32((const float *)kv + (uint64_t)j * w, q, w));
        score[j - j0] = sc;
        m = sc > m ? sc : m;
    }
    memset(acc, 0, lora * sizeof(float));
    for (uint32_t j = j0; j < j1; j++) {
        float p = expf(score[j - j0] - m);
        l += p;
        if (s->kv_f16)
            s->k->axpy_f16(acc, p, (const uint16_t *)kv + (uint64_t)j * w, lora);
        else
            s->k->axpy_f32(acc, p, (const float *)kv + (uint64_t)j * w, lora);
    }
    *m_out = m;
    *l_out = l;
}

/* (m, l, acc) and a later chunk's (mc, lc, accc) into (m, l, acc). */
static void merge_chunk(float *m, float *l, float *acc, float mc, float lc, const float *accc, uint64_t lora)
{
    const float mn = *m > mc ? *m : mc, a = expf(*m - mn), b = expf(mc - mn);
    *l = *l * a + lc * b;
    for (uint64_t k = 0; k < lora; k++)
        acc[k] = acc[k] * a + accc[k] * b;
    *m = mn;
}

/* ctx row i = acc / l, prepared for attn_v_b. */
static void finish_head(const cf_state *s, float *acc, float l, uint64_t i, unsigned mask)
{
    const uint64_t lora = s->c->kv_lora_rank;
    const float inv = 1.0f / l;
    for (uint64_t k = 0; k < lora; k++)
        acc[k] *= inv;
    cf_prepare(s, &s->ctx_a, acc, i, lora, 0, lora, mask);
}

/* The attention half of block il: x += W_o (attention of the token over
 * the cache), MLA absorbed. */
static void attention_block(cf_state *s, uint32_t il, int tid, int nth)
{
    const model_config *c = s->c;
    const model_layer *L = &s->m->layers[il];
    const cf_layer_vecs *v = &s->vecs[il];
    const uint32_t n = s->n, H = c->n_embd, hd = c->qk_nope + c->qk_rope, nh = c->n_head;
    const uint64_t qw = (uint64_t)nh * hd;
    const bool lora = c->q_lora_rank > 0;
    const mtensor *wq = lora ? &L->q_a : &L->q;
    cpu_mm *jobs = s->jobs + (uint64_t)tid * (nh + 4);

    /* attn norm; the normalized x prepared for q_a (or q) and kv_a_mqa */
    unsigned mask = cf_kinds(s, wq, &L->kv_a_mqa, NULL, NULL);
    cf_norm_prepare(s, &s->xn_a, s->xn, s->x, v->attn_norm, 0, n, mask, tid, nth);
    cf_step_end(s, tid, CF_ST_QKV_A, 0, false);

    /* q_a (or q) and kv_a_mqa = [latent | k_rope] */
    jobs[0] = job_of(s, wq, &s->xn_a, 0, lora ? s->q_a : s->q, lora ? c->q_lora_rank : qw, n);
    jobs[1] = job_of(s, &L->kv_a_mqa, &s->xn_a, 0, s->kv_a, s->kv_row, n);
    double bytes = cpu_mm_step(s->pool, s->k, jobs, 2, s->n_threads);
    cf_step_end(s, tid, CF_ST_QKV_A, bytes, true);

    /* q_a norm (prepared for q_b); latent norm, k_rope's RoPE, the cache row */
    mask = lora ? cf_kinds(s, &L->q_b, NULL, NULL, NULL) : 0;
    for (uint32_t t = (uint32_t)tid; t < n; t += (uint32_t)nth) {
        if (lora) {
            float *qa = s->q_a + (uint64_t)t * c->q_lora_rank;
            cf_rmsnorm(qa, qa, v->q_a_norm, c->q_lora_rank, c->rms_eps);
            cf_prepare(s, &s->q_a_a, qa, t, c->q_lora_rank, 0, c->q_lora_rank, mask);
        }
        float *kv = s->kv_a + (uint64_t)t * s->kv_row, *cs = s->rope_cs + (uint64_t)t * c->qk_rope;
        cf_rmsnorm(kv, kv, v->kv_a_norm, c->kv_lora_rank, c->rms_eps);
        rope_cos_sin(c, (float)(s->pos + t), cs);
        rope_apply(kv + c->kv_lora_rank, cs, c->qk_rope);
        uint64_t at = (uint64_t)(s->pos + t) * s->kv_row;
        if (s->kv_f16)
            for (uint32_t i = 0; i < s->kv_row; i++)
                ((uint16_t *)s->kv[il])[at + i] = quant_f32_to_f16(kv[i]);
        else
            memcpy((float *)s->kv[il] + at, kv, s->kv_row * sizeof(float));
    }
    cf_step_end(s, tid, CF_ST_Q_B, 0, false);

    /* q = q_b . q_a */
    if (lora) {
        jobs[0] = job_of(s, &L->q_b, &s->q_a_a, 0, s->q, qw, n);
        bytes = cpu_mm_step(s->pool, s->k, jobs, 1, s->n_threads);
        cf_step_end(s, tid, CF_ST_Q_B, bytes, true);
    }

    /* q_rope's RoPE into q_mla's tail; q_nope prepared for attn_k_b */
    mask = cf_kinds(s, &L->k_b, NULL, NULL, NULL);
    for (uint64_t i = (uint64_t)tid; i < (uint64_t)n * nh; i += (uint64_t)nth) {
        const uint64_t t = i / nh;
        float *qh = s->q + i * hd, *dst = s->q_mla + i * s->kv_row + c->kv_lora_rank;
        memcpy(dst, qh + c->qk_nope, c->qk_rope * sizeof(float));
        rope_apply(dst, s->rope_cs + t * c->qk_rope, c->qk_rope);
        cf_prepare(s, &s->qn_a, qh, i, c->qk_nope, 0, c->qk_nope, mask);
    }
    cf_step_end(s, tid, CF_ST_K_B, 0, false);

    /* absorption: q_mla[t][h] head = attn_k_b[h] . q_nope[t][h] */
    for (uint32_t h = 0; h < nh; h++) {
        jobs[h] = job_of(s, &L->k_b, &s->qn_a, h, s->q_mla + (uint64_t)h * s->kv_row, (uint64_t)nh * s->kv_row, n);
        jobs[h].e = h;
        jobs[h].xs *= nh; /* token t's row of head h: t * nh + h */
    }
    bytes = cpu_mm_step(s->pool, s->k, jobs, nh, s->n_threads);
    cf_step_end(s, tid, CF_ST_K_B, bytes, true);

    /* attention: softmax(kq_scale q . K) . latent per (token, head), over
     * chunks of positions (see attend_chunk); one token at depth: every
     * (chunk, head) on its own, then a step that merges the chunks */
    const uint64_t lora_n = c->kv_lora_rank;
    const uint32_t n_kv_max = s->pos + n, chunks = (n_kv_max + ATT_CHUNK - 1) / ATT_CHUNK;
    mask = cf_kinds(s, &L->v_b, NULL, NULL, NULL);
    float *scratch = s->scores + (uint64_t)tid * (ATT_CHUNK + lora_n);
    double kv_bytes = (double)n_kv_max * (double)s->kv_row * (s->kv_f16 ? 2 : 4);
    if (n == 1 && chunks > 1) {
        for (uint64_t i = cpu_pool_take(s->pool, 1); i < (uint64_t)chunks * nh; i = cpu_pool_take(s->pool, 1)) {
            const uint32_t ch = (uint32_t)(i / nh), h = (uint32_t)(i % nh);
            float *part = s->att_part + i * (lora_n + 2);
            attend_chunk(s, il, s->q_mla + (uint64_t)h * s->kv_row, ch * ATT_CHUNK,
                         ch + 1 < chunks ? (ch + 1) * ATT_CHUNK : n_kv_max, scratch, part, part + 1, part + 2);
        }
        cf_step_end(s, tid, CF_ST_ATTENTION, kv_bytes, false);
        for (uint32_t h = (uint32_t)tid; h < nh; h += (uint32_t)nth) {
            float *out = s->ctx + (uint64_t)h * lora_n, m, l;
            const float *p0 = s->att_part + (uint64_t)h * (lora_n + 2);
            m = p0[0];
            l = p0[1];
            memcpy(out, p0 + 2, lora_n * sizeof(float));
            for (uint32_t ch = 1; ch < chunks; ch++) {
                const float *pc = s->att_part + ((uint64_t)ch * nh + h) * (lora_n + 2);
                merge_chunk(&m, &l, out, pc[0], pc[1], pc + 2, lora_n);
            }
            finish_head(s, out, l, h, mask);
        }
    } else {
        for (uint64_t i = cpu_pool_take(s->pool, 1); i < (uint64_t)n * nh; i = cpu_pool_take(s->pool, 1)) {
            const uint32_t t = (uint32_t)(i / nh), n_kv = s->pos + t + 1;
            const float *q = s->q_mla + i * s->kv_row;
            float *out = s->ctx + i * lora_n, m, l;
            attend_chunk(s, il, q, 0, n_kv < ATT_CHUNK ? n_kv : ATT_CHUNK, scratch, &m, &l, out);
            for (uint32_t j0 = ATT_CHUNK; j0 < n_kv; j0 += ATT_CHUNK) {
                float mc, lc, *acc = scratch + ATT_CHUNK;
                attend_chunk(s, il, q, j0, j0 + ATT_CHUNK < n_kv ? j0 + ATT_CHUNK : n_kv, scratch, &mc, &lc, acc);
                merge_chunk(&m, &l, out, mc, lc, acc, lora_n);
            }
            finish_head(s, out, l, i, mask);
        }
    }
    cf_step_end(s, tid, CF_ST_ATTENTION, n == 1 && chunks > 1 ? 0 : kv_bytes, true);

    /* heads[t][h] = attn_v_b[h] . ctx[t][h] */
    for (uint32_t h = 0; h < nh; h++) {
        jobs[h] = job_of(s, &L->v_b, &s->ctx_a, h, s->heads + (uint64_t)h * c->v_head, (uint64_t)nh * c->v_head, n);
        jobs[h].e = h;
        jobs[h].xs *= nh;
    }
    bytes = cpu_mm_step(s->pool, s->k, jobs, nh, s->n_threads);
    cf_step_end(s, tid, CF_ST_V_B, bytes, true);

    /* x += attn_output . heads */
    const uint64_t hv = (uint64_t)nh * c->v_head;
    mask = cf_kinds(s, &L->attn_out, NULL, NULL, NULL);
    {
        /* pieces of whole 256-element blocks, spread over threads */
        const uint64_t segs = hv % 256 == 0 && n < (uint32_t)nth ? hv / 256 : 1, per = hv / segs;
        for (uint64_t it = (uint64_t)tid; it < n * segs; it += (uint64_t)nth) {
            const uint64_t t = it / segs, from = it % segs * per;
            cf_prepare(s, &s->heads_a, s->heads + t * hv, t, hv, from, from + per, mask);
        }
    }
    cf_step_end(s, tid, CF_ST_ATTN_OUT, 0, false);
    jobs[0] = job_of(s, &L->attn_out, &s->heads_a, 0, s->x, H, n);
    jobs[0].accumulate = true;
    bytes = cpu_mm_step(s->pool, s->k, jobs, 1, s->n_threads);
    cf_step_end(s, tid, CF_ST_ATTN_OUT, bytes, true);
}

/* Row p of the kept hidden states, stored as the KV cache is (f32 / f16). */
static void hidden_write(const cf_state *s, uint32_t p, const float *src)
{
    const uint64_t H = s->c->n_embd;
    if (s->kv_f16) {
        uint16_t *dst = (uint16_t *)s->hidden + (uint64_t)p * H;
        for (uint64_t i = 0; i < H; i++)
            dst[i] = quant_f32_to_f16(src[i]);
    } else {
        memcpy((float *)s->hidden + (uint64_t)p * H, src, H * sizeof(float));
    }
}

static void hidden_read(const cf_state *s, uint32_t p, float *dst)
{
    const uint64_t H = s->c->n_embd;
    if (s->kv_f16) {
        const uint16_t *src = (const uint16_t *)s->hidden + (uint64_t)p * H;
        for (uint64_t i = 0; i < H; i++)
            dst[i] = quant_f16_to_f32(src[i]);
    } else {
        memcpy(dst, (const float *)s->hidden + (uint64_t)p * H, H * sizeof(float));
    }
}

/* Output norm h = output_norm(x) of the rows the head reads -- of every
 * row when the NextN block keeps them (the pairs (h_p, x_{p+1}) of its
 * rows) -- then the states kept and the logits. */
static void head(cf_state *s, int tid, int nth)
{
    const model_config *c = s->c;
    const uint64_t H = c->n_embd;
    const uint32_t first = s->all_logits ? 0 : s->n - 1;
    unsigned mask = s->logits ? cf_kinds(s, &s->m->output, NULL, NULL, NULL) : 0;
    if (s->hidden && first > 0) /* rows kept, not multiplied: normed only */
        cf_norm_prepare(s, &s->xn_a, s->xn, s->x, s->output_norm, 0, first, 0, tid, nth);
    cf_norm_prepare(s, &s->xn_a, s->xn, s->x, s->output_norm, first, s->n, mask, tid, nth);
    cf_step_end(s, tid, CF_ST_HEAD, 0, false);
    if (s->hidden)
        for (uint32_t t = (uint32_t)tid; t < s->n; t += (uint32_t)nth)
            hidden_write(s, s->pos + t, s->xn + t * H);
    double bytes = 0;
    if (s->logits) {
        cpu_mm job = job_of(s, &s->m->output, &s->xn_a, first, s->logits, c->n_vocab, s->n - first);
        bytes = cpu_mm_step(s->pool, s->k, &job, 1, s->n_threads);
    }
    cf_step_end(s, tid, CF_ST_HEAD, bytes, s->logits != NULL);
}

/* One eval: every thread, the model in order. */
static void forward(void *arg, int tid, int nth)
{
    cf_state *s = arg;
    embed(s, tid, nth);
    for (uint32_t il = 0; il < s->c->n_layer; il++) {
        if (s->may_stop) { /* a prompt: every thread stops at the same layer */
            if (tid == 0)
                s->stopped = atomic_load_explicit(s->cancel, memory_order_relaxed);
            cpu_pool_barrier(s->pool);
            if (s->stopped)
                return;
        }
        attention_block(s, il, tid, nth);
        cf_ffn(s, il, tid);
    }
    if (s->logits || s->hidden)
        head(s, tid, nth);
}

/* ======================================================================
 * The NextN (MTP) block, for drafting (cf_has_nextn)
 * ====================================================================== */

/* x = eh_proj . [enorm(embedding of x_p) | hnorm(h_{p-1})] for each row. */
static void nextn_input(cf_state *s, int tid, int nth)
{
    const model_config *c = s->c;
    const model_layer *L = &s->m->layers[c->n_layer];
    const uint64_t H = c->n_embd;
    const mtensor *te = L->nextn_embed_tokens.data ? &L->nextn_embed_tokens : &s->m->tok_embd;
    unsigned mask = cf_kinds(s, &L->nextn_eh_proj, NULL, NULL, NULL);
    for (uint32_t t = (uint32_t)tid; t < s->n; t += (uint32_t)nth) {
        float *cat = s->nx_cat + t * 2 * H, *e = s->xn + t * H, *h = s->nx_h + t * H;
        quant_dequant_row(te->type, (const char *)te->data + (uint64_t)s->tokens[t] * te->nb1, e, H);
        cf_rmsnorm(cat, e, s->nx_enorm, H, c->rms_eps);
        if (s->nx_hin)
            memcpy(h, s->nx_hin + t * H, H * sizeof(float));
        else if (s->pos + t == 0)
            memset(h, 0, H * sizeof(float)); /* no position before the first: h = 0 (llama.cpp) */
        else
            hidden_read(s, s->pos + t - 1, h);
        cf_rmsnorm(cat + H, h, s->nx_hnorm, H, c->rms_eps);
        cf_prepare(s, &s->nx_cat_a, cat, t, 2 * H, 0, 2 * H, mask);
    }
    cf_step_end(s, tid, CF_ST_NEXTN, (double)s->n * (double)te->nb1, false);
    cpu_mm job = job_of(s, &L->nextn_eh_proj, &s->nx_cat_a, 0, s->x, H, s->n);
    double bytes = cpu_mm_step(s->pool, s->k, &job, 1, s->n_threads);
    cf_step_end(s, tid, CF_ST_NEXTN, bytes, false);
}

/* out = head_norm(x) (the last row's kept for a chained step), logits =
 * head . out. */
static void nextn_head(cf_state *s, int tid, int nth)
{
    const model_config *c = s->c;
    const model_layer *L = &s->m->layers[c->n_layer];
    const uint64_t H = c->n_embd;
    const mtensor *w = L->nextn_shared_head_head.data ? &L->nextn_shared_head_head : &s->m->output;
    const uint32_t first = s->all_logits ? 0 : s->n - 1;
    unsigned mask = s->logits ? cf_kinds(s, w, NULL, NULL, NULL) : 0;
    cf_norm_prepare(s, &s->xn_a, s->xn, s->x, s->nx_head_norm, first, s->n, mask, tid, nth);
    cf_step_end(s, tid, CF_ST_NEXTN, 0, false);
    if (tid == 0)
        memcpy(s->nx_out, s->xn + (uint64_t)(s->n - 1) * H, H * sizeof(float));
    double bytes = 0;
    if (s->logits) {
        cpu_mm job = job_of(s, w, &s->xn_a, first, s->logits, c->n_vocab, s->n - first);
        bytes = cpu_mm_step(s->pool, s->k, &job, 1, s->n_threads);
    }
    cf_step_end(s, tid, CF_ST_NEXTN, bytes, true);
}

/* One NextN run: every thread, the block in order. */
static void nextn_forward(void *arg, int tid, int nth)
{
    cf_state *s = arg;
    nextn_input(s, tid, nth);
    attention_block(s, s->c->n_layer, tid, nth);
    cf_ffn(s, s->c->n_layer, tid);
    nextn_head(s, tid, nth);
}

/* The checks every run makes; 0 when the tokens fit at pos. */
static int check_run(const cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, const char *what, err_t *err)
{
    if (n > s->n_batch)
        return err_set(err, "%u %s in one call, at most %u (n_batch)", n, what, s->n_batch);
    if ((uint64_t)pos + n > s->n_ctx)
        return err_set(err, "context full: %u + %u %s exceed the %u-token context", pos, n, what, s->n_ctx);
    for (uint32_t t = 0; t < n; t++)
        if (tokens[t] < 0 || (uint32_t)tokens[t] >= s->c->n_vocab)
            return err_set(err, "token id %d is out of range (vocabulary of %u)", tokens[t], s->c->n_vocab);
    return 0;
}

/* One pool run of fn over the current eval's fields, its time booked in
 * s->cur (tokens: the main model's tokens it evaluates). */
static void run_booked(cf_state *s, cpu_pool_fn fn, uint32_t tokens)
{
    double t0 = now_seconds();
    s->t_step = t0;
    cpu_pool_run(s->pool, fn, s);
    s->cur->seconds += now_seconds() - t0;
    if (tokens) {
        s->cur->evals++;
        s->cur->tokens += tokens;
    }
}

static int eval_main(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, bool all_positions,
                     bool decode, err_t *err)
{
    if (n == 0)
        return 0;
    if (check_run(s, tokens, n, pos, "tokens", err) < 0)
        return -1;
    s->tokens = tokens;
    s->n = n;
    s->pos = pos;
    s->logits = logits;
    s->all_logits = all_positions;
    s->cur = &s->prof[decode];
    s->stopped = false;
    s->may_stop = s->cancel && !decode && n > 1; /* not a verify: its caller keeps every row */
    run_booked(s, forward, n);
    return s->stopped ? 1 : 0;
}

int cf_eval(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, bool all_positions,
            err_t *err)
{
    return eval_main(s, tokens, n, pos, logits, all_positions, n == 1, err);
}

void cf_set_cancel(cf_state *s, const atomic_bool *flag)
{
    s->cancel = flag;
}

int cf_eval_verify(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, err_t *err)
{
    return eval_main(s, tokens, n, pos, logits, true, true, err);
}

bool cf_has_nextn(const cf_state *s)
{
    return s->hidden != NULL;
}

int cf_nextn_eval(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *logits,
                  bool all, err_t *err)
{
    if (!s->hidden)
        return err_set(err, "the model has no NextN block, or it was not enabled");
    if (n == 0)
        return 0;
    if (check_run(s, tokens, n, pos, "NextN rows", err) < 0)
        return -1;
    s->tokens = tokens;
    s->n = n;
    s->pos = pos;
    s->logits = logits;
    s->all_logits = all;
    s->nx_hin = h;
    run_booked(s, nextn_forward, 0);
    s->nx_hin = NULL;
    return 0;
}

const float *cf_nextn_out(const cf_state *s)
{
    return s->nx_out;
}

int cf_hidden(const cf_state *s, uint32_t pos, float *out, err_t *err)
{
    if (!s->hidden)
        return err_set(err, "no hidden states kept (no NextN block, or not enabled)");
    if (pos >= s->n_ctx)
        return err_set(err, "position %u is outside the %u-token context", pos, s->n_ctx);
    hidden_read(s, pos, out);
    return 0;
}

/* ======================================================================
 * Set-up
 * ====================================================================== */

static float *vec_f32(const mtensor *t)
{
    if (!t->data)
        return NULL;
    float *v = malloc(t->ne[0] * sizeof(float));
    if (v)
        quant_dequant_row(t->type, t->data, v, t->ne[0]);
    return v;
}

static int alloc_vectors(cf_state *s, err_t *err)
{
    const model *m = s->m;
    s->vecs = calloc(s->n_blocks, sizeof *s->vecs);
    if (!s->vecs)
        return err_set(err, "out of memory");
    bool ok = (s->output_norm = vec_f32(&m->output_norm)) != NULL;
    for (uint32_t il = 0; il < s->n_blocks && ok; il++) {
        const model_layer *L = &m->layers[il];
        cf_layer_vecs *v = &s->vecs[il];
        v->attn_norm = vec_f32(&L->attn_norm);
        v->kv_a_norm = vec_f32(&L->kv_a_norm);
        v->ffn_norm = vec_f32(&L->ffn_norm);
        v->q_a_norm = vec_f32(&L->q_a_norm);
        v->exp_probs_b = vec_f32(&L->exp_probs_b);
        ok = v->attn_norm && v->kv_a_norm && v->ffn_norm && (v->q_a_norm || !L->q_a_norm.data) &&
             (v->exp_probs_b || !L->exp_probs_b.data);
    }
    return ok ? 0 : err_set(err, "out of memory");
}

static void *alloc_n(uint64_t n, size_t size, bool *ok)
{
    uint64_t bytes = (n ? n : 1) * size;
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
        *ok = false;
    return p;
}

static float *alloc_floats(uint64_t n, bool *ok)
{
    return alloc_n(n, sizeof(float), ok);
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* The kinds weights of every block's tensor named by `off` (an offset into
 * model_layer) multiply with. */
static unsigned kinds_of(const cf_state *s, long off)
{
    unsigned mask = 0;
    for (uint32_t il = 0; il < s->n_blocks; il++) {
        const mtensor *w = (const mtensor *)((const char *)&s->m->layers[il] + off);
        if (w->data)
            mask |= 1u << cpu_kernels_act(s->k, w->type);
    }
    return mask;
}

/* Activation a: rows of n elements, the float source `src` (rows `src_stride`
 * floats apart) serving as its F32 form; prepared buffers for the kinds of
 * `mask`. */
static void act_init(cf_act *a, uint64_t rows, uint64_t n, float *src, uint64_t src_stride, unsigned mask, bool *ok)
{
    memset(a, 0, sizeof *a);
    a->n = n;
    a->rows[CPU_ACT_F32] = (uint8_t *)src;
    a->stride[CPU_ACT_F32] = src_stride * sizeof(float);
    for (int k = CPU_ACT_Q8_32; k < CPU_ACT_KINDS; k++) {
        if (!(mask & (1u << k)))
            continue;
        a->stride[k] = cpu_act_row_bytes((cpu_act_kind)k, n);
        a->rows[k] = alloc_n(rows * a->stride[k], 1, ok);
        a->owned[k] = true;
    }
}

static void act_free(cf_act *a)
{
    for (int k = 0; k < CPU_ACT_KINDS; k++)
        if (a->owned[k])
            free(a->rows[k]);
}

#define OFF(field) ((long)offsetof(model_layer, field))

static int alloc_activations(cf_state *s, err_t *err)
{
    const model_config *c = s->c;
    uint64_t B = s->n_batch, H = c->n_embd, K = c->n_expert_used, nh = c->n_head;
    uint64_t hd = c->qk_nope + c->qk_rope;
    bool ok = true;
    s->ff_sd = (uint32_t)max_u64(c->n_ff_dense, (uint64_t)c->n_ff_exp * c->n_expert_shared);
    s->x = alloc_floats(B * H, &ok);
    s->xn = alloc_floats(B * H, &ok);
    unsigned xn_kinds = kinds_of(s, OFF(q_a)) | kinds_of(s, OFF(q)) | kinds_of(s, OFF(kv_a_mqa)) |
                        kinds_of(s, OFF(gate_inp)) | kinds_of(s, OFF(gate_exps)) | kinds_of(s, OFF(up_exps)) |
                        kinds_of(s, OFF(gate_shexp)) | kinds_of(s, OFF(up_shexp)) | kinds_of(s, OFF(ffn_gate)) |
                        kinds_of(s, OFF(ffn_up)) | kinds_of(s, OFF(nextn_shared_head_head)) |
                        1u << cpu_kernels_act(s->k, s->m->output.type);
    act_init(&s->xn_a, B, H, s->xn, H, xn_kinds, &ok);
    s->q_a = alloc_floats(B * c->q_lora_rank, &ok);
    act_init(&s->q_a_a, B, c->q_lora_rank, s->q_a, c->q_lora_rank, kinds_of(s, OFF(q_b)), &ok);
    s->q = alloc_floats(B * nh * hd, &ok);
    act_init(&s->qn_a, B * nh, c->qk_nope, s->q, hd, kinds_of(s, OFF(k_b)), &ok);
    s->kv_a = alloc_floats(B * s->kv_row, &ok);
    s->q_mla = alloc_floats(B * nh * s->kv_row, &ok);
    s->ctx = alloc_floats(B * nh * c->kv_lora_rank, &ok);
    act_init(&s->ctx_a, B * nh, c->kv_lora_rank, s->ctx, c->kv_lora_rank, kinds_of(s, OFF(v_b)), &ok);
    s->heads = alloc_floats(B * nh * c->v_head, &ok);
    act_init(&s->heads_a, B, nh * c->v_head, s->heads, nh * c->v_head, kinds_of(s, OFF(attn_out)), &ok);
    s->rope_cs = alloc_floats(B * c->qk_rope, &ok);
    s->router = alloc_floats(B * c->n_expert, &ok);
    s->sel_score = alloc_floats(c->n_expert, &ok);
    s->sel = alloc_n(B * K, sizeof *s->sel, &ok);
    s->sel_w = alloc_floats(B * K, &ok);
    s->pair_tok = alloc_n(B * K, sizeof *s->pair_tok, &ok);
    s->pair_at = alloc_n(B * K, sizeof *s->pair_at, &ok);
    s->exp_start = alloc_n((uint64_t)c->n_expert + 1, sizeof *s->exp_start, &ok);
    s->cursor = alloc_n((uint64_t)c->n_expert + 1, sizeof *s->cursor, &ok);
    s->hg[0] = alloc_floats(B * K * c->n_ff_exp, &ok);
    s->hu[0] = alloc_floats(B * K * c->n_ff_exp, &ok);
    act_init(&s->h_a[0], B * K, c->n_ff_exp, s->hg[0], c->n_ff_exp, kinds_of(s, OFF(down_exps)), &ok);
    s->hg[1] = alloc_floats(B * s->ff_sd, &ok);
    s->hu[1] = alloc_floats(B * s->ff_sd, &ok);
    /* the dense FFN and the shared experts share the buffer but may differ
     * in width: the wider one sets the row stride of the prepared forms */
    act_init(&s->h_a[1], B, s->ff_sd, s->hg[1], s->ff_sd, kinds_of(s, OFF(down_shexp)) | kinds_of(s, OFF(ffn_down)),
             &ok);
    s->moe_out = alloc_floats((B * K + B) * H, &ok);
    s->units = alloc_n((uint64_t)c->n_expert + 2, sizeof *s->units, &ok);
    s->jobs = alloc_n((uint64_t)s->n_threads * (nh + 4), sizeof *s->jobs, &ok);
    if (!ok)
        return err_set(err, "out of memory for activations of %llu tokens (n_batch)", (unsigned long long)B);
    return 0;
}

static int alloc_cache(cf_state *s, err_t *err)
{
    const model_config *c = s->c;
    uint64_t per_layer = (uint64_t)s->n_ctx * s->kv_row * (s->kv_f16 ? 2 : 4);
    s->kv = calloc(s->n_blocks, sizeof *s->kv);
    if (!s->kv)
        return err_set(err, "out of memory");
    for (uint32_t il = 0; il < s->n_blocks; il++)
        if (!(s->kv[il] = malloc(per_layer)))
            return err_set(err, "cannot allocate the KV cache: %u layers x %.1f MiB for %u tokens", s->n_blocks,
                           (double)per_layer / 1048576.0, s->n_ctx);
    /* per thread: a chunk's scores and a chunk's weighted latents; the
     * chunks' partials of one token (a merge step's inputs) */
    s->scores = malloc((uint64_t)s->n_threads * (ATT_CHUNK + c->kv_lora_rank) * sizeof(float));
    uint64_t chunks = (s->n_ctx + ATT_CHUNK - 1) / ATT_CHUNK;
    s->att_part = malloc(chunks * c->n_head * (c->kv_lora_rank + 2) * sizeof(float));
    if (!s->scores || !s->att_part)
        return err_set(err, "out of memory for thread scratch");
    return 0;
}

/* The NextN block's vectors, the kept hidden states and its input rows
 * (its cache and block vectors come with the others: n_blocks). */
static int alloc_nextn(cf_state *s, err_t *err)
{
    const model_layer *L = &s->m->layers[s->c->n_layer];
    const uint64_t H = s->c->n_embd, B = s->n_batch;
    bool ok = true;
    s->nx_enorm = vec_f32(&L->nextn_enorm);
    s->nx_hnorm = vec_f32(&L->nextn_hnorm);
    s->nx_head_norm = vec_f32(L->nextn_shared_head_norm.data ? &L->nextn_shared_head_norm : &s->m->output_norm);
    s->nx_cat = alloc_floats(B * 2 * H, &ok);
    act_init(&s->nx_cat_a, B, 2 * H, s->nx_cat, 2 * H, kinds_of(s, OFF(nextn_eh_proj)), &ok);
    s->nx_h = alloc_floats(B * H, &ok);
    s->nx_out = alloc_floats(H, &ok);
    if (!ok || !s->nx_enorm || !s->nx_hnorm || !s->nx_head_norm)
        return err_set(err, "out of memory for the NextN block");
    memset(s->nx_out, 0, H * sizeof(float));
    uint64_t bytes = (uint64_t)s->n_ctx * H * (s->kv_f16 ? 2 : 4);
    if (!(s->hidden = malloc(bytes)))
        return err_set(err, "cannot allocate the NextN block's hidden states: %.1f MiB for %u tokens",
                       (double)bytes / 1048576.0, s->n_ctx);
    return 0;
}

/* Maps every page of the file's weights in now, each thread a slice, as
 * llama.cpp's MAP_POPULATE does: a page first touched during a token costs
 * a fault (a microsecond or so per 4 KiB), which on a MoE model whose
 * experts come into use one by one would blur the first hundreds of
 * tokens.  Pages not in the page cache are read now instead of then. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
typedef struct {
    const uint8_t *start;
    uint64_t len;
} populate_job;

static void populate_slice(void *arg, int tid, int nth)
{
    const populate_job *j = arg;
    const uint64_t page = 4096, per = (j->len / (uint64_t)nth + page - 1) / page * page;
    const uint64_t a = (uint64_t)tid * per, b = a + per < j->len ? a + per : j->len;
    if (a >= b)
        return;
    /* madvise wants a page-aligned start: the slice's page, which a mapping
     * of the file always holds; where it fails (kernels before 5.14, memory
     * that is no mapping of ours), a read of a byte of every page of the
     * slice itself */
    const uintptr_t first = (uintptr_t)(j->start + a), aligned = first / page * page;
    if (madvise((void *)aligned, (uintptr_t)(j->start + b) - aligned, MADV_POPULATE_READ) == 0)
        return;
    volatile uint8_t sink = 0;
    for (uint64_t o = a; o < b; o += page)
        sink ^= j->start[o];
    (void)sink;
}

static void populate_weights(cf_state *s)
{
    const gguf_ctx *g = s->m->gguf;
    const uint8_t *base = gguf_file_data(g);
    const uint64_t off = gguf_data_offset(g), size = gguf_file_size(g);
    if (!base || size <= off)
        return;
    populate_job j = {base + off, size - off};
    cpu_pool_run(s->pool, populate_slice, &j);
}

/* The Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4 matrices packed (cpu_pack.h) for the kernel set, when it has a
 * packed kernel: made once here, on the pool, while the file's pages are
 * fresh from populate_weights.  The head (output) too; the embedding is a
 * table of rows, read one row a token. */
static int pack_weights(cf_state *s, err_t *err)
{
    s->packs = cpu_packs_new(err);
    if (!s->packs)
        return -1;
    for (uint32_t il = 0; il < s->n_blocks; il++)
        if (cpu_packs_add_layer(s->packs, s->pool, s->k, &s->m->layers[il], err) < 0)
            return -1;
    const mtensor *out = &s->m->output;
    if (cpu_pack_wanted(s->k, out) && cpu_pack_fits(cpu_pack_bytes(out)))
        return cpu_packs_add(s->packs, s->pool, s->k, out, err);
    return 0;
}

cf_state *cf_new(const model *m, const cf_params *p, err_t *err)
{
    if (p->n_ctx == 0 || p->n_batch == 0) {
        err_set(err, "n_ctx and n_batch must be at least 1");
        return NULL;
    }
    if (m->cfg.legacy_kv_b && !m->layers[0].k_b.data) {
        err_set(err, "this model was loaded without layout conversion and cannot be run");
        return NULL;
    }
    const cpu_kernels *k = p->kernels ? p->kernels : cpu_kernels_best(err);
    if (!k)
        return NULL;
    cf_state *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, "out of memory");
        return NULL;
    }
    s->m = m;
    s->c = &m->cfg;
    s->k = k;
    s->n_ctx = p->n_ctx;
    s->n_batch = p->n_batch;
    s->kv_f16 = p->kv_f16;
    s->kv_row = m->cfg.kv_lora_rank + m->cfg.qk_rope;
    const bool nextn = p->nextn && m->cfg.n_nextn > 0;
    s->n_blocks = m->cfg.n_layer + (nextn ? 1 : 0);
    cf_profile_reset(s);
    s->cur = &s->prof[0];
    s->pool = cpu_pool_new(p->n_threads, err);
    if (!s->pool) {
        free(s);
        return NULL;
    }
    s->n_threads = cpu_pool_size(s->pool);
    if (alloc_vectors(s, err) < 0 || alloc_activations(s, err) < 0 || alloc_cache(s, err) < 0 ||
        (nextn && alloc_nextn(s, err) < 0)) {
        cf_free(s);
        return NULL;
    }
    populate_weights(s);
    if (pack_weights(s, err) < 0) {
        cf_free(s);
        return NULL;
    }
    return s;
}

void cf_free(cf_state *s)
{
    if (!s)
        return;
    cpu_pool_free(s->pool);
    cpu_packs_free(s->packs);
    if (s->vecs) {
        for (uint32_t il = 0; il < s->n_blocks; il++) {
            cf_layer_vecs *v = &s->vecs[il];
            free(v->attn_norm);
            free(v->q_a_norm);
            free(v->kv_a_norm);
            free(v->ffn_norm);
            free(v->exp_probs_b);
        }
        free(s->vecs);
    }
    if (s->kv) {
        for (uint32_t il = 0; il < s->n_blocks; il++)
            free(s->kv[il]);
        free(s->kv);
    }
    cf_act *acts[] = {&s->xn_a, &s->q_a_a, &s->qn_a, &s->ctx_a, &s->heads_a, &s->h_a[0], &s->h_a[1], &s->nx_cat_a};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        act_free(acts[i]);
    void *bufs[] = {s->output_norm, s->x, s->xn, s->q_a, s->q, s->kv_a, s->q_mla, s->ctx, s->heads, s->rope_cs,
                    s->router, s->sel_score, s->sel, s->sel_w, s->pair_tok, s->pair_at, s->exp_start, s->cursor,
                    s->hg[0], s->hu[0], s->hg[1], s->hu[1], s->moe_out, s->units, s->jobs, s->scores, s->att_part,
                    s->hidden, s->nx_cat, s->nx_h, s->nx_out, s->nx_enorm, s->nx_hnorm, s->nx_head_norm};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s);
}

int cf_threads(const cf_state *s)
{
    return s->n_threads;
}

uint64_t cf_packed_bytes(const cf_state *s)
{
    return cpu_packs_bytes(s->packs);
}

const cpu_kernels *cf_kernels(const cf_state *s)
{
    return s->k;
}

void cf_profile_get(const cf_state *s, bool decode, cf_profile *out)
{
    *out = s->prof[decode ? 1 : 0];
}

void cf_profile_reset(cf_state *s)
{
    for (int i = 0; i < 2; i++) {
        memset(&s->prof[i], 0, sizeof s->prof[i]);
        for (int st = 0; st < CF_ST_COUNT; st++)
            s->prof[i].step[st].name = step_names[st];
    }
}
