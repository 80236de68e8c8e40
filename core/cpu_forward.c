/* cpu_forward.c: the fast CPU forward pass (cpu_forward.h): the steps of
 * a run, the attention half of a block, the head; then set-up.
 *
 * Read forward() first: the model in order, one line per step; each step
 * ends with cf_step_end() (a barrier).  Per-token work (norms, RoPE, the
 * cache write, preparing activations) is split over threads by token;
 * matrices by rows (cpu_mm_step); attention by (token, head).  The FFN
 * half of a block is cpu_ffn.c. */
#include "cpu_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rope.h"

/* at most 14 characters: the side pane's column */
static const char *const step_names[CF_ST_COUNT] = {
    "embedding", "q_a+kv_a", "q_b", "k_b absorb", "attention", "v_b", "attn out",
    "router", "exp gate/up", "exp down", "dense gate/up", "dense down", "head",
};

/* ======================================================================
 * Steps and the profile
 * ====================================================================== */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cf_step_end(cf_state *s, int tid, cf_step st, double bytes, bool count)
{
    cpu_pool_barrier(s->pool);
    if (tid != 0)
        return;
    double t = now_seconds();
    cf_step_stat *ps = &s->cur->step[st];
    ps->seconds += t - s->t_step;
    ps->bytes += bytes;
    ps->calls += count;
    s->cur->steps++;
    s->t_step = t;
}

/* ======================================================================
 * Building blocks
 * ====================================================================== */

/* RMSNorm's scale: the mean of squares summed in double as ggml does, in
 * four partial sums (a single chain of dependent double adds would take
 * 4 cycles an element, a few microseconds a row on one thread while the
 * others wait). */
static float rms_scale(const float *x, uint64_t n, float eps)
{
    double p[4] = {0, 0, 0, 0};
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            p[k] += (double)(x[i + k] * x[i + k]);
    for (; i < n; i++)
        p[0] += (double)(x[i] * x[i]);
    double sum = (p[0] + p[1]) + (p[2] + p[3]);
    return 1.0f / sqrtf((float)(sum / (double)n) + eps);
}

void cf_rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps)
{
    float scale = rms_scale(x, n, eps);
    for (uint64_t i = 0; i < n; i++)
        out[i] = (x[i] * scale) * w[i];
}

void cf_norm_prepare(const cf_state *s, const cf_act *a, float *dst, const float *src, const float *w,
                     uint32_t first, uint32_t end, unsigned mask, int tid, int nth)
{
    const uint32_t rows = end - first;
    const uint64_t n = a->n;
    /* pieces of whole 256-element blocks when there are fewer rows than
     * threads (one token: each thread takes a piece of its row) */
    uint64_t per = n, segs = 1;
    if (rows < (uint32_t)nth && n % 256 == 0) {
        segs = ((uint64_t)nth + rows - 1) / rows;
        segs = segs < n / 256 ? segs : n / 256;
        per = (n / 256 + segs - 1) / segs * 256;
        segs = (n + per - 1) / per;
    }
    for (uint64_t it = (uint64_t)tid; it < rows * segs; it += (uint64_t)nth) {
        const uint64_t r = first + it / segs, from = it % segs * per, to = from + per < n ? from + per : n;
        const float *x = src + r * n;
        float *o = dst + r * n;
        const float scale = rms_scale(x, n, s->c->rms_eps);
        for (uint64_t i = from; i < to; i++)
            o[i] = (x[i] * scale) * w[i];
        cf_prepare(s, a, o, r, n, from, to, mask);
    }
}

/* RoPE, ggml mode NORM (adjacent pairs), angles from rope.h. */
static void rope_apply(float *v, const float *cs, uint32_t n_dims)
{
    for (uint32_t i = 0; i < n_dims; i += 2) {
        float x0 = v[i], x1 = v[i + 1];
        v[i] = x0 * cs[i] - x1 * cs[i + 1];
        v[i + 1] = x0 * cs[i + 1] + x1 * cs[i];
    }
}

unsigned cf_kinds(const cf_state *s, const mtensor *w0, const mtensor *w1, const mtensor *w2, const mtensor *w3)
{
    const mtensor *w[4] = {w0, w1, w2, w3};
    unsigned mask = 0;
    for (int i = 0; i < 4 && w[i]; i++)
        if (w[i]->data)
            mask |= 1u << cpu_kernels_act(s->k, w[i]->type);
    return mask;
}

void cf_prepare(const cf_state *s, const cf_act *a, const float *src_row, uint64_t r, uint64_t n, uint64_t from,
                uint64_t to, unsigned mask)
{
    for (int kind = CPU_ACT_Q8_32; kind < CPU_ACT_KINDS; kind++)
        if (mask & (1u << kind))
            s->k->prepare[kind](src_row, n, from, to, a->rows[kind] + r * a->stride[kind]);
}

void cf_job_input(const cf_state *s, cpu_mm *job, const cf_act *a, const mtensor *w)
{
    cpu_act_kind kind = cpu_kernels_act(s->k, w->type);
    job->x = a->rows[kind];
    job->xs = a->stride[kind];
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

static void head(cf_state *s, int tid, int nth)
{
    const model_config *c = s->c;
    uint32_t first = s->all_logits ? 0 : s->n - 1;
    unsigned mask = cf_kinds(s, &s->m->output, NULL, NULL, NULL);
    cf_norm_prepare(s, &s->xn_a, s->xn, s->x, s->output_norm, first, s->n, mask, tid, nth);
    cf_step_end(s, tid, CF_ST_HEAD, 0, false);
    cpu_mm job = job_of(s, &s->m->output, &s->xn_a, first, s->logits, c->n_vocab, s->n - first);
    double bytes = cpu_mm_step(s->pool, s->k, &job, 1, s->n_threads);
    cf_step_end(s, tid, CF_ST_HEAD, bytes, true);
}

/* One eval: every thread, the model in order. */
static void forward(void *arg, int tid, int nth)
{
    cf_state *s = arg;
    embed(s, tid, nth);
    for (uint32_t il = 0; il < s->c->n_layer; il++) {
        attention_block(s, il, tid, nth);
        cf_ffn(s, il, tid);
    }
    if (s->logits)
        head(s, tid, nth);
}

int cf_eval(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, bool all_positions,
            err_t *err)
{
    const model_config *c = s->c;
    if (n == 0)
        return 0;
    if (n > s->n_batch)
        return err_set(err, "%u tokens in one call, at most %u (n_batch)", n, s->n_batch);
    if ((uint64_t)pos + n > s->n_ctx)
        return err_set(err, "context full: %u + %u tokens exceed the %u-token context", pos, n, s->n_ctx);
    for (uint32_t t = 0; t < n; t++)
        if (tokens[t] < 0 || (uint32_t)tokens[t] >= c->n_vocab)
            return err_set(err, "token id %d is out of range (vocabulary of %u)", tokens[t], c->n_vocab);
    s->tokens = tokens;
    s->n = n;
    s->pos = pos;
    s->logits = logits;
    s->all_logits = all_positions;
    s->cur = &s->prof[n == 1];
    double t0 = now_seconds();
    s->t_step = t0;
    cpu_pool_run(s->pool, forward, s);
    s->cur->seconds += now_seconds() - t0;
    s->cur->evals++;
    s->cur->tokens += n;
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
    s->vecs = calloc(s->c->n_layer, sizeof *s->vecs);
    if (!s->vecs)
        return err_set(err, "out of memory");
    bool ok = (s->output_norm = vec_f32(&m->output_norm)) != NULL;
    for (uint32_t il = 0; il < s->c->n_layer && ok; il++) {
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

/* The kinds weights of every layer's tensor named by `off` (an offset into
 * model_layer; the output head when off is -1) multiply with. */
static unsigned kinds_of(const cf_state *s, long off)
{
    unsigned mask = 0;
    for (uint32_t il = 0; il < s->c->n_layer; il++) {
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
                        kinds_of(s, OFF(ffn_up)) | 1u << cpu_kernels_act(s->k, s->m->output.type);
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
    s->kv = calloc(c->n_layer, sizeof *s->kv);
    if (!s->kv)
        return err_set(err, "out of memory");
    for (uint32_t il = 0; il < c->n_layer; il++)
        if (!(s->kv[il] = malloc(per_layer)))
            return err_set(err, "cannot allocate the KV cache: %u layers x %.1f MiB for %u tokens", c->n_layer,
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
    cf_profile_reset(s);
    s->pool = cpu_pool_new(p->n_threads, err);
    if (!s->pool) {
        free(s);
        return NULL;
    }
    s->n_threads = cpu_pool_size(s->pool);
    if (alloc_vectors(s, err) < 0 || alloc_activations(s, err) < 0 || alloc_cache(s, err) < 0) {
        cf_free(s);
        return NULL;
    }
    populate_weights(s);
    return s;
}

void cf_free(cf_state *s)
{
    if (!s)
        return;
    cpu_pool_free(s->pool);
    if (s->vecs) {
        for (uint32_t il = 0; il < s->c->n_layer; il++) {
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
        for (uint32_t il = 0; il < s->c->n_layer; il++)
            free(s->kv[il]);
        free(s->kv);
    }
    cf_act *acts[] = {&s->xn_a, &s->q_a_a, &s->qn_a, &s->ctx_a, &s->heads_a, &s->h_a[0], &s->h_a[1]};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        act_free(acts[i]);
    void *bufs[] = {s->output_norm, s->x, s->xn, s->q_a, s->q, s->kv_a, s->q_mla, s->ctx, s->heads, s->rope_cs,
                    s->router, s->sel_score, s->sel, s->sel_w, s->pair_tok, s->pair_at, s->exp_start, s->cursor,
                    s->hg[0], s->hu[0], s->hg[1], s->hu[1], s->moe_out, s->units, s->jobs, s->scores, s->att_part};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s);
}

int cf_threads(const cf_state *s)
{
    return s->n_threads;
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
