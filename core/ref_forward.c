/* ref_forward.c: deepseek2 forward pass in plain f32 C.
 *
 * Read it top to bottom: the run state, the building blocks (matmul over
 * stored rows, RMSNorm, RoPE/YaRN, softmax), then the model in order:
 * embedding, per block attention (MLA, absorbed) and FFN (dense or MoE),
 * output norm and head.  FIXTURES.md ("What the computation is") is the
 * specification; comments below say where llama.cpp's choices matter. */
#include "ref_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rope.h"
#include "threadpool.h"

/* ======================================================================
 * Run state
 * ====================================================================== */

/* One matrix-times-activations job: rows [0, n_rows) of matrix e of w
 * against n_tok inputs.  Input t is x + (xrow ? xrow[t] : t) * xs; output
 * element (t, r) goes to y[t * ys + r]. */
typedef struct {
    const mtensor *w;
    uint32_t e;
    uint64_t n_rows;
    const float *x;
    uint64_t xs;
    const uint32_t *xrow;
    float *y;
    uint64_t ys;
    uint32_t n_tok;
} mm_job;

typedef struct {
    float *attn_norm;   /* (n_embd) */
    float *q_a_norm;    /* (q_lora) */
    float *kv_a_norm;   /* (kv_lora) */
    float *ffn_norm;    /* (n_embd) */
    float *exp_probs_b; /* (n_expert), NULL without selection bias */
} layer_vecs;

typedef struct {
    uint64_t calls;
    double seconds;
    double bytes;
} stage_acc;

struct rf_state {
    const model *m;
    const model_config *c;
    threadpool *tp;
    int n_threads;
    uint32_t n_ctx, n_batch;
    bool kv_f16;
    uint32_t kv_row;          /* kv_lora + rope: one cached position */

    /* weights converted for the forward pass: the small vectors in f32 */
    layer_vecs *vecs;         /* (n_layer) */
    float *output_norm;       /* (n_embd) */

    /* activations, sized for n_batch tokens */
    float *x;                 /* (n_batch, n_embd) residual stream */
    float *xn;                /* (n_batch, n_embd) normalized input of a sub-block */
    float *tmp;               /* (n_batch, n_embd) sub-block output */
    float *q_a;               /* (n_batch, q_lora) compressed q */
    float *q;                 /* (n_batch, n_head, nope + rope) */
    float *kv_a;              /* (n_batch, kv_lora + rope) latent | k_rope */
    float *q_mla;             /* (n_batch, n_head, kv_lora + rope) absorbed q_nope | roped q_rope */
    float *ctx;               /* (n_batch, n_head, kv_lora) attention-weighted latent */
    float *heads;             /* (n_batch, n_head * v_head) */
    float *rope_cs;           /* (n_batch, rope) cos, sin per pair */
    float *hg, *hu;           /* (n_batch, ff_max) gate / up activations */
    float *router;            /* (n_batch, n_expert) router logits, then probs */
    float *sel_score;         /* (n_expert) probs + selection bias of one token */
    int32_t *sel;             /* (n_batch, n_used) chosen experts, best first */
    float *sel_w;             /* (n_batch, n_used) their weights */
    uint32_t *pair_tok;       /* (n_batch * n_used) token of each pair, grouped by expert */
    uint32_t *pair_at;        /* (n_batch * n_used) where pair (t, slot) landed */
    uint32_t *exp_start;      /* (n_expert + 1) first pair of each expert */
    float *moe_g, *moe_u;     /* (n_batch * n_used, n_ff_exp) */
    float *moe_out;           /* (n_batch * n_used, n_embd) */

    /* latent KV cache: per block (n_ctx, kv_lora + rope), f32 or f16 */
    void **kv;
    uint32_t n_blocks;        /* blocks with a cache and vectors: n_layer, + 1 with the NextN block */

    /* the NextN block (rf_params.nextn on a model that has it), block n_layer */
    void *hidden;             /* (n_ctx, n_embd) f32/f16 as the cache: each position's final hidden state */
    float *nx_cat;            /* (n_batch, 2 n_embd) [enorm(embedding) | hnorm(h)] */
    float *nx_h;              /* (n_batch, n_embd) h rows read from `hidden` */
    float *nx_out;            /* (n_embd) the last row's normed output of the latest NextN call */
    float *nx_enorm, *nx_hnorm, *nx_head_norm; /* (n_embd) */

    /* per thread: attention scores */
    float *score_scratch;     /* (n_threads, n_ctx) */

    mm_job *jobs;             /* a batch of matmuls run as one parallel loop */
    uint64_t *job_end;        /* cumulative rows */
    uint32_t max_jobs;

    stage_acc stages[RF_ST_COUNT];
    uint64_t n_tokens_done;
    int32_t *route_log;       /* (n_layer, n_batch, n_used) or NULL: rf_record_routing */
};

static const char *const stage_names[RF_ST_COUNT] = {
    "embedding", "attn q/kv proj", "rope+absorb", "attention", "attn v+out",
    "ffn dense", "moe router", "moe experts", "moe shared", "output head", "nextn in+head",
};

/* ======================================================================
 * Timing
 * ====================================================================== */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void stage_add(rf_state *s, int st, double t0, double bytes)
{
    s->stages[st].calls++;
    s->stages[st].seconds += now_seconds() - t0;
    s->stages[st].bytes += bytes;
}

/* ======================================================================
 * Building blocks
 * ====================================================================== */

/* f32 dots with 8 partial sums: a fixed summation order (results do not
 * depend on threads or batch) that compilers can vectorize. */
static float dot_f32(const float *a, const float *b, uint64_t n)
{
    float acc[8] = {0}, tail = 0.0f;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += a[i + k] * b[i + k];
    for (; i < n; i++)
        tail += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

static float dot_f16(const uint16_t *a, const float *b, uint64_t n)
{
    float acc[8] = {0}, tail = 0.0f;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += quant_f16_to_f32(a[i + k]) * b[i + k];
    for (; i < n; i++)
        tail += quant_f16_to_f32(a[i]) * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

typedef struct {
    rf_state *s;
    uint32_t n_jobs;
} mm_batch;

/* Rows per inner step: small enough that the rows stay in cache while every
 * token of the job is multiplied with them. */
enum { MM_ROWS = 16 };

/* Parallel body over the concatenated rows of every job in the batch.  Each
 * (token, row) product is one quant_matvec row: the stored row against f32
 * activations, the weights exactly dequantized in registers; the result of
 * a row does not depend on which rows or tokens share the call. */
static void mm_body(void *p, uint64_t begin, uint64_t end, int tid)
{
    mm_batch *b = p;
    rf_state *s = b->s;
    (void)tid;
    uint32_t j = 0;
    for (uint64_t g = begin; g < end;) {
        while (s->job_end[j] <= g)
            j++;
        const mm_job *jb = &s->jobs[j];
        uint64_t r = g - (s->job_end[j] - jb->n_rows);
        uint64_t stop = end < s->job_end[j] ? end : s->job_end[j];
        uint64_t n = stop - g < MM_ROWS ? stop - g : MM_ROWS;
        const char *rows = (const char *)mtensor_matrix(jb->w, jb->e) + r * jb->w->nb1;
        for (uint32_t t = 0; t < jb->n_tok; t++) {
            const float *x = jb->x + (uint64_t)(jb->xrow ? jb->xrow[t] : t) * jb->xs;
            quant_matvec(jb->w->type, rows, jb->w->nb1, n, x, jb->w->ne[0], jb->y + (uint64_t)t * jb->ys + r);
        }
        g += n;
    }
}

/* Runs the first n_jobs of s->jobs as one parallel loop; returns the weight
 * bytes read (for the stage statistics). */
static double mm_run(rf_state *s, uint32_t n_jobs)
{
    uint64_t total = 0;
    double bytes = 0;
    for (uint32_t j = 0; j < n_jobs; j++) {
        total += s->jobs[j].n_rows;
        s->job_end[j] = total;
        bytes += (double)s->jobs[j].n_rows * (double)s->jobs[j].w->nb1;
    }
    /* Chunks of at least ~64k multiply-adds: below that, handing work to
     * another thread costs more than it saves (the tiny test models). */
    double macs = 0;
    for (uint32_t j = 0; j < n_jobs; j++)
        macs += (double)s->jobs[j].n_rows * (double)s->jobs[j].w->ne[0] * s->jobs[j].n_tok;
    double per_row = total ? macs / (double)total : 1;
    uint64_t grain = (uint64_t)(65536.0 / per_row) + 1;
    uint64_t even = (total + (uint64_t)s->n_threads * 4 - 1) / ((uint64_t)s->n_threads * 4);
    mm_batch b = {s, n_jobs};
    threadpool_for(s->tp, total, grain > even ? grain : even, mm_body, &b);
    return bytes;
}

/* y = W x for n_tok inputs of contiguous rows (the common case). */
static mm_job mm_simple(const mtensor *w, const float *x, uint64_t xs, float *y, uint64_t ys, uint32_t n_tok)
{
    return (mm_job){.w = w, .e = 0, .n_rows = w->ne[1], .x = x, .xs = xs, .y = y, .ys = ys, .n_tok = n_tok};
}

/* RMSNorm as ggml: mean of squares summed in double, then x*scale*w. */
static void rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (uint64_t i = 0; i < n; i++)
        out[i] = (x[i] * scale) * w[i];
}

static float silu(float x)
{
    return x / (1.0f + expf(-x));
}

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

/* ---- RoPE (ggml mode NORM: adjacent pairs) with YaRN: the angles from rope.h ---- */

static void rope_apply(float *v, const float *cs, uint32_t n_dims)
{
    for (uint32_t i = 0; i < n_dims; i += 2) {
        float x0 = v[i], x1 = v[i + 1];
        v[i] = x0 * cs[i] - x1 * cs[i + 1];
        v[i + 1] = x0 * cs[i + 1] + x1 * cs[i];
    }
}

/* ======================================================================
 * The model, in order
 * ====================================================================== */

static void embed(rf_state *s, const int32_t *tokens, uint32_t n)
{
    double t0 = now_seconds();
    const mtensor *te = &s->m->tok_embd;
    for (uint32_t t = 0; t < n; t++)
        quant_dequant_row(te->type, (const char *)te->data + (uint64_t)tokens[t] * te->nb1,
                          s->x + (uint64_t)t * s->c->n_embd, s->c->n_embd);
    stage_add(s, RF_ST_EMBED, t0, (double)n * (double)te->nb1);
}

/* ---- attention ---------------------------------------------------------- */

/* q and kv projections: q = q_b · rmsnorm(q_a · x) (or attn_q · x), and
 * kv_a = kv_a_mqa · x = [latent | k_rope] with the latent normalized. */
static void attn_project(rf_state *s, const model_layer *L, const layer_vecs *v, uint32_t n)
{
    const model_config *c = s->c;
    double t0 = now_seconds(), bytes = 0;
    uint64_t qw = (uint64_t)c->n_head * (c->qk_nope + c->qk_rope);
    for (uint32_t t = 0; t < n; t++)
        rmsnorm(s->xn + (uint64_t)t * c->n_embd, s->x + (uint64_t)t * c->n_embd, v->attn_norm, c->n_embd,
                c->rms_eps);
    if (c->q_lora_rank > 0) {
        s->jobs[0] = mm_simple(&L->q_a, s->xn, c->n_embd, s->q_a, c->q_lora_rank, n);
        s->jobs[1] = mm_simple(&L->kv_a_mqa, s->xn, c->n_embd, s->kv_a, s->kv_row, n);
        bytes += mm_run(s, 2);
        for (uint32_t t = 0; t < n; t++) {
            float *qa = s->q_a + (uint64_t)t * c->q_lora_rank;
            rmsnorm(qa, qa, v->q_a_norm, c->q_lora_rank, c->rms_eps);
        }
        s->jobs[0] = mm_simple(&L->q_b, s->q_a, c->q_lora_rank, s->q, qw, n);
        bytes += mm_run(s, 1);
    } else {
        s->jobs[0] = mm_simple(&L->q, s->xn, c->n_embd, s->q, qw, n);
        s->jobs[1] = mm_simple(&L->kv_a_mqa, s->xn, c->n_embd, s->kv_a, s->kv_row, n);
        bytes += mm_run(s, 2);
    }
    for (uint32_t t = 0; t < n; t++) {
        float *lat = s->kv_a + (uint64_t)t * s->kv_row;
        rmsnorm(lat, lat, v->kv_a_norm, c->kv_lora_rank, c->rms_eps);
    }
    stage_add(s, RF_ST_ATTN_PROJ, t0, bytes);
}

/* RoPE on q_rope (every head) and k_rope (shared); then the absorption
 * q_mla[h] = [attn_k_b[h] · q_nope[h] | q_rope[h]], which makes the score a
 * single dot with a cached [latent | k_rope] row. */
static void rope_absorb(rf_state *s, const model_layer *L, uint32_t n, uint32_t pos)
{
    const model_config *c = s->c;
    double t0 = now_seconds();
    uint32_t hd = c->qk_nope + c->qk_rope;
    for (uint32_t t = 0; t < n; t++) {
        float *cs = s->rope_cs + (uint64_t)t * c->qk_rope;
        rope_cos_sin(c, (float)(pos + t), cs);
        for (uint32_t h = 0; h < c->n_head; h++) {
            float *qr = s->q + ((uint64_t)t * c->n_head + h) * hd + c->qk_nope;
            rope_apply(qr, cs, c->qk_rope);
            float *dst = s->q_mla + ((uint64_t)t * c->n_head + h) * s->kv_row + c->kv_lora_rank;
            memcpy(dst, qr, c->qk_rope * sizeof(float));
        }
        rope_apply(s->kv_a + (uint64_t)t * s->kv_row + c->kv_lora_rank, cs, c->qk_rope);
    }
    for (uint32_t h = 0; h < c->n_head; h++)
        s->jobs[h] = (mm_job){
            .w = &L->k_b, .e = h, .n_rows = c->kv_lora_rank, .x = s->q + (uint64_t)h * hd,
            .xs = (uint64_t)c->n_head * hd, .y = s->q_mla + (uint64_t)h * s->kv_row,
            .ys = (uint64_t)c->n_head * s->kv_row, .n_tok = n,
        };
    double bytes = mm_run(s, c->n_head);
    stage_add(s, RF_ST_ROPE_ABSORB, t0, bytes);
}

static void kv_store(rf_state *s, uint32_t il, uint32_t n, uint32_t pos)
{
    uint64_t w = s->kv_row;
    for (uint32_t t = 0; t < n; t++) {
        const float *src = s->kv_a + (uint64_t)t * w;
        if (s->kv_f16) {
            uint16_t *dst = (uint16_t *)s->kv[il] + (uint64_t)(pos + t) * w;
            for (uint64_t i = 0; i < w; i++)
                dst[i] = quant_f32_to_f16(src[i]);
        } else {
            memcpy((float *)s->kv[il] + (uint64_t)(pos + t) * w, src, w * sizeof(float));
        }
    }
}

typedef struct {
    rf_state *s;
    uint32_t il, pos;
} attn_ctx;

/* One (token, head): causal softmax of kq_scale * q_mla · K over positions
 * 0..pos+t, then the probability-weighted sum of cached latents. */
static void attn_body(void *p, uint64_t begin, uint64_t end, int tid)
{
    attn_ctx *a = p;
    rf_state *s = a->s;
    const model_config *c = s->c;
    uint64_t w = s->kv_row, lora = c->kv_lora_rank;
    float *score = s->score_scratch + (uint64_t)tid * s->n_ctx;
    const void *kv = s->kv[a->il];
    for (uint64_t i = begin; i < end; i++) {
        uint32_t t = (uint32_t)(i / c->n_head), h = (uint32_t)(i % c->n_head);
        uint32_t n_kv = a->pos + t + 1;
        const float *q = s->q_mla + ((uint64_t)t * c->n_head + h) * w;
        for (uint32_t j = 0; j < n_kv; j++)
            score[j] = c->kq_scale * (s->kv_f16 ? dot_f16((const uint16_t *)kv + (uint64_t)j * w, q, w)
                                                : dot_f32((const float *)kv + (uint64_t)j * w, q, w));
        softmax(score, n_kv);
        float *out = s->ctx + ((uint64_t)t * c->n_head + h) * lora;
        memset(out, 0, lora * sizeof(float));
        for (uint32_t j = 0; j < n_kv; j++) {
            float pj = score[j];
            if (s->kv_f16) {
                const uint16_t *lat = (const uint16_t *)kv + (uint64_t)j * w;
                for (uint64_t k = 0; k < lora; k++)
                    out[k] += pj * quant_f16_to_f32(lat[k]);
            } else {
                const float *lat = (const float *)kv + (uint64_t)j * w;
                for (uint64_t k = 0; k < lora; k++)
                    out[k] += pj * lat[k];
            }
        }
    }
}

static void attend(rf_state *s, uint32_t il, uint32_t n, uint32_t pos)
{
    double t0 = now_seconds();
    kv_store(s, il, n, pos);
    attn_ctx a = {s, il, pos};
    /* bytes: each (token, head) reads its visible cache rows (twice) */
    double rows = (double)s->c->n_head * ((double)n * pos + (double)n * (n + 1) / 2.0);
    double per_task = 2.0 * rows * (double)s->kv_row / ((double)n * s->c->n_head);
    threadpool_for(s->tp, (uint64_t)n * s->c->n_head, (uint64_t)(65536.0 / per_task) + 1, attn_body, &a);
    stage_add(s, RF_ST_ATTENTION, t0, rows * (double)s->kv_row * (s->kv_f16 ? 2.0 : 4.0));
}

/* heads[h] = attn_v_b[h] · ctx[h]; x += attn_output · heads. */
static void attn_output(rf_state *s, const model_layer *L, uint32_t n)
{
    const model_config *c = s->c;
    double t0 = now_seconds();
    uint64_t lora = c->kv_lora_rank, hv = (uint64_t)c->n_head * c->v_head;
    for (uint32_t h = 0; h < c->n_head; h++)
        s->jobs[h] = (mm_job){
            .w = &L->v_b, .e = h, .n_rows = c->v_head, .x = s->ctx + h * lora,
            .xs = c->n_head * lora, .y = s->heads + (uint64_t)h * c->v_head, .ys = hv, .n_tok = n,
        };
    double bytes = mm_run(s, c->n_head);
    s->jobs[0] = mm_simple(&L->attn_out, s->heads, hv, s->tmp, c->n_embd, n);
    bytes += mm_run(s, 1);
    for (uint64_t i = 0; i < (uint64_t)n * c->n_embd; i++)
        s->x[i] += s->tmp[i];
    stage_add(s, RF_ST_ATTN_OUT, t0, bytes);
}

static void attention(rf_state *s, uint32_t il, uint32_t n, uint32_t pos)
{
    const model_layer *L = &s->m->layers[il];
    attn_project(s, L, &s->vecs[il], n);
    rope_absorb(s, L, n, pos);
    attend(s, il, n, pos);
    attn_output(s, L, n);
}

/* ---- feed-forward ------------------------------------------------------- */

/* h = silu(g) * u, row by row (width w, rows `rows` apart). */
static void swiglu(float *g, const float *u, uint64_t n_rows, uint64_t w)
{
    for (uint64_t i = 0; i < n_rows * w; i++)
        g[i] = silu(g[i]) * u[i];
}

/* tmp = down(silu(gate·xn) * up·xn) for a dense or shared-expert FFN. */
static double swiglu_ffn(rf_state *s, const mtensor *gate, const mtensor *up, const mtensor *down, uint32_t n)
{
    const model_config *c = s->c;
    uint64_t ff = gate->ne[1];
    s->jobs[0] = mm_simple(gate, s->xn, c->n_embd, s->hg, ff, n);
    s->jobs[1] = mm_simple(up, s->xn, c->n_embd, s->hu, ff, n);
    double bytes = mm_run(s, 2);
    swiglu(s->hg, s->hu, n, ff);
    s->jobs[0] = mm_simple(down, s->hg, ff, s->tmp, c->n_embd, n);
    return bytes + mm_run(s, 1);
}

/* Top-k of one token's selection scores (probs + bias): best first, the
 * lowest expert index winning ties. */
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

/* Routing of one token: probs from sigmoid or softmax of the router logits;
 * experts chosen on probs + exp_probs_b (the bias only selects); weights
 * are the unbiased probs, normalized to sum 1 (sum clamped as llama.cpp)
 * when expert_weights_norm, then scaled unless the scale is 0 or 1. */
static void route_token(const model_config *c, const float *bias, float *logit, float *sel_score,
                        int32_t *sel, float *w)
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

static void moe_route(rf_state *s, uint32_t il, const model_layer *L, const layer_vecs *v, uint32_t n)
{
    const model_config *c = s->c;
    double t0 = now_seconds();
    s->jobs[0] = mm_simple(&L->gate_inp, s->xn, c->n_embd, s->router, c->n_expert, n);
    double bytes = mm_run(s, 1);
    uint32_t K = c->n_expert_used;
    for (uint32_t t = 0; t < n; t++)
        route_token(c, v->exp_probs_b, s->router + (uint64_t)t * c->n_expert, s->sel_score,
                    s->sel + (uint64_t)t * K, s->sel_w + (uint64_t)t * K);
    if (s->route_log)
        memcpy(s->route_log + (uint64_t)il * s->n_batch * K, s->sel, (uint64_t)n * K * sizeof *s->sel);
    /* Group the (token, slot) pairs by expert: each expert's rows are then
     * read once for all the tokens that chose it. */
    memset(s->exp_start, 0, (c->n_expert + 1) * sizeof *s->exp_start);
    for (uint64_t i = 0; i < (uint64_t)n * K; i++)
        s->exp_start[s->sel[i] + 1]++;
    for (uint32_t e = 0; e < c->n_expert; e++)
        s->exp_start[e + 1] += s->exp_start[e];
    uint32_t *cursor = s->pair_at + (uint64_t)n * K; /* spare room: see rf_new */
    memcpy(cursor, s->exp_start, c->n_expert * sizeof *cursor);
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t k = 0; k < K; k++) {
            uint32_t e = (uint32_t)s->sel[(uint64_t)t * K + k];
            uint32_t at = cursor[e]++;
            s->pair_tok[at] = t;
            s->pair_at[(uint64_t)t * K + k] = at;
        }
    stage_add(s, RF_ST_ROUTER, t0, bytes);
}

/* Every chosen expert's SwiGLU over the tokens that chose it, then
 * tmp[t] = sum over slots (best first) of weight * expert output. */
static void moe_experts(rf_state *s, const model_layer *L, uint32_t n)
{
    const model_config *c = s->c;
    double t0 = now_seconds();
    uint64_t ff = c->n_ff_exp, H = c->n_embd;
    uint32_t nj = 0;
    for (uint32_t e = 0; e < c->n_expert; e++) {
        uint32_t a = s->exp_start[e], m = s->exp_start[e + 1] - a;
        if (m == 0)
            continue;
        s->jobs[nj++] = (mm_job){.w = &L->gate_exps, .e = e, .n_rows = ff, .x = s->xn, .xs = H,
                                 .xrow = s->pair_tok + a, .y = s->moe_g + a * ff, .ys = ff, .n_tok = m};
        s->jobs[nj++] = (mm_job){.w = &L->up_exps, .e = e, .n_rows = ff, .x = s->xn, .xs = H,
                                 .xrow = s->pair_tok + a, .y = s->moe_u + a * ff, .ys = ff, .n_tok = m};
    }
    double bytes = mm_run(s, nj);
    uint64_t n_pairs = (uint64_t)n * c->n_expert_used;
    swiglu(s->moe_g, s->moe_u, n_pairs, ff);
    nj = 0;
    for (uint32_t e = 0; e < c->n_expert; e++) {
        uint32_t a = s->exp_start[e], m = s->exp_start[e + 1] - a;
        if (m > 0)
            s->jobs[nj++] = (mm_job){.w = &L->down_exps, .e = e, .n_rows = H, .x = s->moe_g + a * ff,
                                     .xs = ff, .y = s->moe_out + a * H, .ys = H, .n_tok = m};
    }
    bytes += mm_run(s, nj);
    for (uint32_t t = 0; t < n; t++) {
        float *dst = s->tmp + (uint64_t)t * H;
        for (uint32_t k = 0; k < c->n_expert_used; k++) {
            uint64_t i = (uint64_t)t * c->n_expert_used + k;
            const float *eo = s->moe_out + (uint64_t)s->pair_at[i] * H;
            float w = s->sel_w[i];
            for (uint64_t d = 0; d < H; d++)
                dst[d] = k == 0 ? w * eo[d] : dst[d] + w * eo[d];
        }
    }
    stage_add(s, RF_ST_EXPERTS, t0, bytes);
}

static void ffn(rf_state *s, uint32_t il, uint32_t n)
{
    const model_config *c = s->c;
    const model_layer *L = &s->m->layers[il];
    const layer_vecs *v = &s->vecs[il];
    uint64_t H = c->n_embd;
    for (uint32_t t = 0; t < n; t++)
        rmsnorm(s->xn + t * H, s->x + t * H, v->ffn_norm, H, c->rms_eps);
    if (!L->is_moe) {
        double t0 = now_seconds();
        double bytes = swiglu_ffn(s, &L->ffn_gate, &L->ffn_up, &L->ffn_down, n);
        for (uint64_t i = 0; i < n * H; i++)
            s->x[i] += s->tmp[i];
        stage_add(s, RF_ST_FFN_DENSE, t0, bytes);
        return;
    }
    moe_route(s, il, L, v, n);
    moe_experts(s, L, n);
    /* x += routed + shared, in llama.cpp's order; the shared expert (not
     * weighted) reuses tmp, so the routed sum moves to moe_u, which is
     * free once the experts' SwiGLU is done */
    if (c->n_expert_shared > 0) {
        double t0 = now_seconds();
        float *routed = s->moe_u;
        memcpy(routed, s->tmp, n * H * sizeof(float));
        double bytes = swiglu_ffn(s, &L->gate_shexp, &L->up_shexp, &L->down_shexp, n);
        for (uint64_t i = 0; i < n * H; i++)
            s->x[i] += routed[i] + s->tmp[i];
        stage_add(s, RF_ST_SHARED, t0, bytes);
    } else {
        for (uint64_t i = 0; i < n * H; i++)
            s->x[i] += s->tmp[i];
    }
}

/* ---- output ----------------------------------------------------------- */

static void head(rf_state *s, uint32_t n, float *logits, bool all)
{
    const model_config *c = s->c;
    double t0 = now_seconds();
    uint64_t H = c->n_embd;
    uint32_t first = all ? 0 : n - 1, rows = all ? n : 1;
    for (uint32_t t = first; t < n; t++)
        rmsnorm(s->xn + t * H, s->x + t * H, s->output_norm, H, c->rms_eps);
    s->jobs[0] = mm_simple(&s->m->output, s->xn + first * H, H, logits, c->n_vocab, rows);
    double bytes = mm_run(s, 1);
    stage_add(s, RF_ST_HEAD, t0, bytes);
}

/* ======================================================================
 * The NextN (MTP) block, for drafting (rf_has_nextn)
 * ====================================================================== */

/* Row p of a (n_ctx, n_embd) array stored as the KV cache is (f32 / f16). */
static void hidden_write(rf_state *s, uint32_t p, const float *src)
{
    uint64_t H = s->c->n_embd;
    if (s->kv_f16) {
        uint16_t *dst = (uint16_t *)s->hidden + (uint64_t)p * H;
        for (uint64_t i = 0; i < H; i++)
            dst[i] = quant_f32_to_f16(src[i]);
    } else {
        memcpy((float *)s->hidden + (uint64_t)p * H, src, H * sizeof(float));
    }
}

static void hidden_read(const rf_state *s, uint32_t p, float *dst)
{
    uint64_t H = s->c->n_embd;
    if (s->kv_f16) {
        const uint16_t *src = (const uint16_t *)s->hidden + (uint64_t)p * H;
        for (uint64_t i = 0; i < H; i++)
            dst[i] = quant_f16_to_f32(src[i]);
    } else {
        memcpy(dst, (const float *)s->hidden + (uint64_t)p * H, H * sizeof(float));
    }
}

/* The main model's final hidden states h = output_norm(x) of this call's
 * positions, for the NextN rows that will pair them with the next tokens. */
static void nextn_keep_hidden(rf_state *s, uint32_t n, uint32_t pos)
{
    uint64_t H = s->c->n_embd;
    for (uint32_t t = 0; t < n; t++) {
        rmsnorm(s->xn + t * H, s->x + t * H, s->output_norm, H, s->c->rms_eps);
        hidden_write(s, pos + t, s->xn + t * H);
    }
}

/* x = eh_proj · [enorm(embedding of x_p) | hnorm(h_{p-1})] for each row. */
static void nextn_input(rf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h)
{
    const model_config *c = s->c;
    const model_layer *L = &s->m->layers[c->n_layer];
    double t0 = now_seconds();
    uint64_t H = c->n_embd;
    const mtensor *te = L->nextn_embed_tokens.data ? &L->nextn_embed_tokens : &s->m->tok_embd;
    for (uint32_t t = 0; t < n; t++) {
        float *cat = s->nx_cat + t * 2 * H, *hrow = s->nx_h + t * H;
        quant_dequant_row(te->type, (const char *)te->data + (uint64_t)tokens[t] * te->nb1, s->tmp + t * H, H);
        rmsnorm(cat, s->tmp + t * H, s->nx_enorm, H, c->rms_eps);
        if (h)
            memcpy(hrow, h + t * H, H * sizeof(float));
        else if (pos + t == 0)
            memset(hrow, 0, H * sizeof(float)); /* no position before the first: h = 0 (llama.cpp) */
        else
            hidden_read(s, pos + t - 1, hrow);
        rmsnorm(cat + H, hrow, s->nx_hnorm, H, c->rms_eps);
    }
    s->jobs[0] = mm_simple(&L->nextn_eh_proj, s->nx_cat, 2 * H, s->x, H, n);
    double bytes = mm_run(s, 1) + (double)n * (double)te->nb1;
    stage_add(s, RF_ST_NEXTN, t0, bytes);
}

/* out = head_norm(x) (kept for a chained step), logits = head · out. */
static void nextn_head(rf_state *s, uint32_t n, float *logits, bool all)
{
    const model_config *c = s->c;
    const model_layer *L = &s->m->layers[c->n_layer];
    double t0 = now_seconds();
    uint64_t H = c->n_embd;
    uint32_t first = all ? 0 : n - 1, rows = all ? n : 1;
    for (uint32_t t = first; t < n; t++)
        rmsnorm(s->xn + t * H, s->x + t * H, s->nx_head_norm, H, c->rms_eps);
    memcpy(s->nx_out, s->xn + (uint64_t)(n - 1) * H, H * sizeof(float));
    double bytes = 0;
    if (logits) {
        const mtensor *w = L->nextn_shared_head_head.data ? &L->nextn_shared_head_head : &s->m->output;
        s->jobs[0] = mm_simple(w, s->xn + first * H, H, logits, c->n_vocab, rows);
        bytes = mm_run(s, 1);
    }
    stage_add(s, RF_ST_NEXTN, t0, bytes);
}

bool rf_has_nextn(const rf_state *s)
{
    return s->hidden != NULL;
}

int rf_nextn_eval(rf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *logits,
                  bool all, err_t *err)
{
    const model_config *c = s->c;
    if (!s->hidden)
        return err_set(err, "the model has no NextN block, or it was not enabled");
    if (n == 0)
        return 0;
    if (n > s->n_batch)
        return err_set(err, "%u NextN rows in one call, at most %u (n_batch)", n, s->n_batch);
    if ((uint64_t)pos + n > s->n_ctx)
        return err_set(err, "context full: NextN rows %u + %u exceed the %u-token context", pos, n, s->n_ctx);
    for (uint32_t t = 0; t < n; t++)
        if (tokens[t] < 0 || (uint32_t)tokens[t] >= c->n_vocab)
            return err_set(err, "token id %d is out of range (vocabulary of %u)", tokens[t], c->n_vocab);
    nextn_input(s, tokens, n, pos, h);
    attention(s, c->n_layer, n, pos);
    ffn(s, c->n_layer, n);
    nextn_head(s, n, logits, all);
    return 0;
}

const float *rf_nextn_out(const rf_state *s)
{
    return s->nx_out;
}

int rf_hidden(const rf_state *s, uint32_t pos, float *out, err_t *err)
{
    if (!s->hidden)
        return err_set(err, "no hidden states kept (no NextN block, or not enabled)");
    if (pos >= s->n_ctx)
        return err_set(err, "position %u is outside the %u-token context", pos, s->n_ctx);
    hidden_read(s, pos, out);
    return 0;
}

int rf_eval(rf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits,
            bool all_positions, err_t *err)
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
    embed(s, tokens, n);
    for (uint32_t il = 0; il < c->n_layer; il++) {
        attention(s, il, n, pos);
        ffn(s, il, n);
    }
    if (s->hidden)
        nextn_keep_hidden(s, n, pos);
    if (logits)
        head(s, n, logits, all_positions);
    s->n_tokens_done += n;
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

/* n elements of `size` bytes; clears *ok on failure. */
static void *alloc_n(uint64_t n, size_t size, bool *ok)
{
    void *p = malloc((n ? n : 1) * size);
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

static int alloc_vectors(rf_state *s, err_t *err)
{
    const model *m = s->m;
    s->vecs = calloc(s->n_blocks, sizeof *s->vecs);
    if (!s->vecs)
        return err_set(err, "out of memory");
    bool ok = (s->output_norm = vec_f32(&m->output_norm)) != NULL;
    for (uint32_t il = 0; il < s->n_blocks && ok; il++) {
        const model_layer *L = &m->layers[il];
        layer_vecs *v = &s->vecs[il];
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

static int alloc_activations(rf_state *s, err_t *err)
{
    const model_config *c = s->c;
    uint64_t B = s->n_batch, H = c->n_embd, K = c->n_expert_used;
    uint64_t ff_max = max_u64(c->n_ff_dense, (uint64_t)c->n_ff_exp * c->n_expert_shared);
    uint64_t qw = (uint64_t)c->n_head * (c->qk_nope + c->qk_rope);
    bool ok = true;
    s->x = alloc_floats(B * H, &ok);
    s->xn = alloc_floats(B * H, &ok);
    s->tmp = alloc_floats(B * H, &ok);
    s->q_a = alloc_floats(B * c->q_lora_rank, &ok);
    s->q = alloc_floats(B * qw, &ok);
    s->kv_a = alloc_floats(B * s->kv_row, &ok);
    s->q_mla = alloc_floats(B * c->n_head * s->kv_row, &ok);
    s->ctx = alloc_floats(B * c->n_head * c->kv_lora_rank, &ok);
    s->heads = alloc_floats(B * c->n_head * c->v_head, &ok);
    s->rope_cs = alloc_floats(B * c->qk_rope, &ok);
    s->hg = alloc_floats(B * ff_max, &ok);
    s->hu = alloc_floats(B * ff_max, &ok);
    s->router = alloc_floats(B * c->n_expert, &ok);
    s->sel_score = alloc_floats(c->n_expert, &ok);
    s->sel = alloc_n(B * K, sizeof *s->sel, &ok);
    s->sel_w = alloc_floats(B * K, &ok);
    s->pair_tok = alloc_n(B * K, sizeof *s->pair_tok, &ok);
    s->pair_at = alloc_n(B * K + c->n_expert, sizeof *s->pair_at, &ok); /* + a cursor per expert */
    s->exp_start = alloc_n((uint64_t)c->n_expert + 1, sizeof *s->exp_start, &ok);
    /* moe_u also holds the routed sum while the shared expert runs */
    s->moe_g = alloc_floats(B * K * c->n_ff_exp, &ok);
    s->moe_u = alloc_floats(max_u64(B * K * c->n_ff_exp, B * H), &ok);
    s->moe_out = alloc_floats(B * K * H, &ok);
    s->max_jobs = 2 * c->n_expert + c->n_head + 4;
    s->jobs = calloc(s->max_jobs, sizeof *s->jobs);
    s->job_end = calloc(s->max_jobs, sizeof *s->job_end);
    if (!ok || !s->jobs || !s->job_end)
        return err_set(err, "out of memory for activations of %llu tokens (n_batch)", (unsigned long long)B);
    return 0;
}

static int alloc_cache_scratch(rf_state *s, err_t *err)
{
    uint64_t per_layer = (uint64_t)s->n_ctx * s->kv_row * (s->kv_f16 ? 2 : 4);
    s->kv = calloc(s->n_blocks, sizeof *s->kv);
    if (!s->kv)
        return err_set(err, "out of memory");
    for (uint32_t il = 0; il < s->n_blocks; il++)
        if (!(s->kv[il] = malloc(per_layer)))
            return err_set(err, "cannot allocate the KV cache: %u layers x %.1f MiB for %u tokens",
                           s->n_blocks, (double)per_layer / 1048576.0, s->n_ctx);
    s->score_scratch = malloc((uint64_t)s->n_threads * s->n_ctx * sizeof(float));
    if (!s->score_scratch)
        return err_set(err, "out of memory for thread scratch");
    return 0;
}

/* The NextN block's vectors, the kept hidden states and its input rows
 * (its cache and block vectors come with the others: n_blocks). */
static int alloc_nextn(rf_state *s, err_t *err)
{
    const model_layer *L = &s->m->layers[s->c->n_layer];
    uint64_t H = s->c->n_embd;
    bool ok = true;
    s->nx_enorm = vec_f32(&L->nextn_enorm);
    s->nx_hnorm = vec_f32(&L->nextn_hnorm);
    s->nx_head_norm = vec_f32(L->nextn_shared_head_norm.data ? &L->nextn_shared_head_norm : &s->m->output_norm);
    s->nx_cat = alloc_floats((uint64_t)s->n_batch * 2 * H, &ok);
    s->nx_h = alloc_floats((uint64_t)s->n_batch * H, &ok);
    s->nx_out = calloc(H, sizeof(float));
    uint64_t bytes = (uint64_t)s->n_ctx * H * (s->kv_f16 ? 2 : 4);
    s->hidden = malloc(bytes);
    if (!s->hidden)
        return err_set(err, "cannot allocate the NextN block's hidden states: %.1f MiB for %u tokens",
                       (double)bytes / 1048576.0, s->n_ctx);
    if (!ok || !s->nx_enorm || !s->nx_hnorm || !s->nx_head_norm || !s->nx_out)
        return err_set(err, "out of memory for the NextN block");
    return 0;
}

rf_state *rf_new(const model *m, const rf_params *p, err_t *err)
{
    if (p->n_ctx == 0 || p->n_batch == 0) {
        err_set(err, "n_ctx and n_batch must be at least 1");
        return NULL;
    }
    if (m->cfg.legacy_kv_b && !m->layers[0].k_b.data) {
        err_set(err, "this model was loaded without layout conversion and cannot be run");
        return NULL;
    }
    rf_state *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, "out of memory");
        return NULL;
    }
    s->m = m;
    s->c = &m->cfg;
    s->n_ctx = p->n_ctx;
    s->n_batch = p->n_batch;
    s->kv_f16 = p->kv_f16;
    s->kv_row = m->cfg.kv_lora_rank + m->cfg.qk_rope;
    bool nextn = p->nextn && m->cfg.n_nextn > 0;
    s->n_blocks = m->cfg.n_layer + (nextn ? 1 : 0);
    s->tp = threadpool_new(p->n_threads, err);
    if (!s->tp) {
        free(s);
        return NULL;
    }
    s->n_threads = threadpool_size(s->tp);
    if (alloc_vectors(s, err) < 0 || alloc_activations(s, err) < 0 || alloc_cache_scratch(s, err) < 0 ||
        (nextn && alloc_nextn(s, err) < 0)) {
        rf_free(s);
        return NULL;
    }
    return s;
}

void rf_free(rf_state *s)
{
    if (!s)
        return;
    threadpool_free(s->tp);
    if (s->vecs) {
        for (uint32_t il = 0; il < s->n_blocks; il++) {
            layer_vecs *v = &s->vecs[il];
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
    void *nextn_bufs[] = {s->hidden, s->nx_cat, s->nx_h, s->nx_out, s->nx_enorm, s->nx_hnorm, s->nx_head_norm};
    for (size_t i = 0; i < sizeof nextn_bufs / sizeof nextn_bufs[0]; i++)
        free(nextn_bufs[i]);
    void *bufs[] = {s->output_norm, s->x, s->xn, s->tmp, s->q_a, s->q, s->kv_a, s->q_mla, s->ctx,
                    s->heads, s->rope_cs, s->hg, s->hu, s->router, s->sel_score, s->sel, s->sel_w, s->pair_tok,
                    s->pair_at, s->exp_start, s->moe_g, s->moe_u, s->moe_out, s->jobs, s->job_end,
                    s->score_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s);
}

int rf_threads(const rf_state *s)
{
    return s->n_threads;
}

void rf_record_routing(rf_state *s, int32_t *sel)
{
    s->route_log = sel;
}

uint64_t rf_stage_stats(const rf_state *s, rf_stage_stat *out)
{
    for (int i = 0; i < RF_ST_COUNT; i++)
        out[i] = (rf_stage_stat){stage_names[i], s->stages[i].calls, s->stages[i].seconds, s->stages[i].bytes};
    return s->n_tokens_done;
}
