/* ref_engine.c: the CPU reference forward pass as an engine backend
 * ("ref"): logits, the top candidates and logsumexp of the last position,
 * a per-stage timing table for the side pane, and drafting with the NextN
 * block (the reference of engine.h's draft and verify). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "ref_forward.h"
#include "sampler_spec.h"

/* What drafting needs (allocated when rf_has_nextn). */
typedef struct {
    sampler *scratch;   /* sampler_probs / sampler_pick work space (requests carry the settings) */
    float *logits;      /* (ENGINE_MAX_DRAFT + 1, n_vocab) NextN logits, then the verified positions' */
    float *work;        /* (n_vocab) logits as the sampler penalises them */
    uint32_t *q;        /* (ENGINE_MAX_DRAFT, n_vocab) the last draft call's q_i (sampler_probs) */
    uint32_t *p;        /* (n_vocab) */
    uint32_t n_q;       /* drafts of the last draft call */
} ref_drafting;

typedef struct {
    const model *m;
    rf_state *rf;
    float *last;        /* (n_vocab) last position's logits when the caller wants no logits */
    ref_drafting dr;
    char description[160];
} ref_engine;

static void drafting_free(ref_drafting *d)
{
    sampler_free(d->scratch);
    free(d->logits);
    free(d->work);
    free(d->q);
    free(d->p);
    memset(d, 0, sizeof *d);
}

static int drafting_alloc(ref_drafting *d, uint32_t V, err_t *err)
{
    sampler_params sp;
    sampler_params_default(&sp);
    d->scratch = sampler_new(&sp, V);
    d->logits = malloc((size_t)(ENGINE_MAX_DRAFT + 1) * V * sizeof *d->logits);
    d->work = malloc((size_t)V * sizeof *d->work);
    d->q = malloc((size_t)ENGINE_MAX_DRAFT * V * sizeof *d->q);
    d->p = malloc((size_t)V * sizeof *d->p);
    if (!d->scratch || !d->logits || !d->work || !d->q || !d->p) {
        drafting_free(d);
        return err_set(err, "out of memory for drafting (vocabulary of %u)", V);
    }
    return 0;
}

/* The context when none is given: the model's trained one, at most
 * ENGINE_AUTO_CTX_CAP, and a KV cache within half the memory available now
 * (in steps of 256 tokens). */
static uint32_t auto_ctx(const model *m, bool kv_f16)
{
    const model_config *c = &m->cfg;
    uint32_t n = c->n_ctx_train && c->n_ctx_train < ENGINE_AUTO_CTX_CAP ? c->n_ctx_train : ENGINE_AUTO_CTX_CAP;
    double per_token = (double)c->n_layer * (c->kv_lora_rank + c->qk_rope) * (kv_f16 ? 2 : 4);
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && per_token > 0) {
        double fit = 0.5 * (double)pages * (double)page / per_token;
        if (fit < n)
            n = fit < 256 ? 256 : (uint32_t)fit / 256 * 256;
    }
    return n ? n : 1;
}

static int ref_create(void **impl, const model *m, engine_params *p, err_t *err)
{
    if (p->n_ctx == 0) {
        p->n_ctx = auto_ctx(m, p->kv == KV_F16);
        if (p->n_batch > p->n_ctx)
            p->n_batch = p->n_ctx;
    }
    ref_engine *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(err, "out of memory");
    r->m = m;
    rf_params rp = {.n_ctx = p->n_ctx, .n_batch = p->n_batch, .kv_f16 = p->kv == KV_F16,
                    .n_threads = p->n_threads, .nextn = p->draft != ENGINE_DRAFT_OFF};
    r->rf = rf_new(m, &rp, err);
    r->last = malloc(m->cfg.n_vocab * sizeof(float));
    if (!r->rf || !r->last || (rf_has_nextn(r->rf) && drafting_alloc(&r->dr, m->cfg.n_vocab, err) < 0)) {
        if (r->rf && !r->last)
            err_set(err, "out of memory");
        rf_free(r->rf);
        free(r->last);
        free(r);
        return -1;
    }
    snprintf(r->description, sizeof r->description, "CPU reference (f32 activations), %d thread%s, KV %s%s",
             rf_threads(r->rf), rf_threads(r->rf) == 1 ? "" : "s", p->kv == KV_F16 ? "f16" : "f32",
             rf_has_nextn(r->rf) ? ", NextN drafting" : "");
    *impl = r;
    return 0;
}

static void ref_destroy(void *impl)
{
    ref_engine *r = impl;
    rf_free(r->rf);
    free(r->last);
    drafting_free(&r->dr);
    free(r);
}

/* "a ranks before b": higher logit, then lower id. */
static bool ranks_before(float la, int32_t ia, float lb, int32_t ib)
{
    return la > lb || (la == lb && ia < ib);
}

/* The k best of n logits, best first (insertion into a sorted list of k:
 * k is small next to the vocabulary). */
static void top_k(const float *logits, uint32_t n, uint32_t k, int32_t *ids, float *vals)
{
    uint32_t have = 0;
    for (uint32_t i = 0; i < n; i++) {
        float v = logits[i];
        if (have == k && !ranks_before(v, (int32_t)i, vals[k - 1], ids[k - 1]))
            continue;
        uint32_t at = have < k ? have++ : k - 1;
        while (at > 0 && ranks_before(v, (int32_t)i, vals[at - 1], ids[at - 1])) {
            vals[at] = vals[at - 1];
            ids[at] = ids[at - 1];
            at--;
        }
        vals[at] = v;
        ids[at] = (int32_t)i;
    }
}

static float log_sum_exp(const float *x, uint32_t n)
{
    float mx = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += exp((double)x[i] - mx);
    return (float)(mx + log(s));
}

static int ref_eval(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_output *out,
                    err_t *err)
{
    ref_engine *r = impl;
    uint32_t V = r->m->cfg.n_vocab;
    bool want_last = out->top_k > 0 || out->log_z;
    float *logits = out->logits;
    if (!logits && want_last)
        logits = r->last;
    if (rf_eval(r->rf, tokens, n, pos, logits, out->all_positions && out->logits, err) < 0)
        return -1;
    if (!want_last)
        return 0;
    const float *last = logits + (out->all_positions && out->logits ? (uint64_t)(n - 1) * V : 0);
    if (out->top_k > 0) {
        uint32_t k = out->top_k < V ? out->top_k : V;
        top_k(last, V, k, out->top_ids, out->top_logits);
        for (uint32_t i = k; i < out->top_k; i++) {
            out->top_ids[i] = -1;
            out->top_logits[i] = -INFINITY;
        }
    }
    if (out->log_z)
        *out->log_z = log_sum_exp(last, V);
    return 0;
}

static void ref_get_stats(void *impl, engine_stats *st)
{
    ref_engine *r = impl;
    rf_stage_stat s[RF_ST_COUNT];
    uint64_t tokens = rf_stage_stats(r->rf, s);
    st->n_kernels = 0;
    if (tokens == 0)
        return;
    for (int i = 0; i < RF_ST_COUNT && st->n_kernels < ENGINE_MAX_KERNEL_STATS; i++) {
        if (s[i].calls == 0)
            continue;
        engine_kernel_stat *k = &st->kernels[st->n_kernels++];
        snprintf(k->name, sizeof k->name, "%s", s[i].name);
        /* A stage runs once per layer for a decoded token and once per
         * layer for a whole prompt chunk, and its bytes are read once per
         * call: calls and GB/s over both would mean nothing, so they stay
         * 0, which the side pane takes for "not given" (bytes stay: tools
         * subtract a prompt's share, tests/tools/cpu_bench.c). */
        k->us_per_token = s[i].seconds * 1e6 / (double)tokens;
        k->bytes_per_token = s[i].bytes / (double)tokens;
    }
}

/* ---- drafting (engine.h's draft and verify) ------------------------------------ */

/* q_i = the draft request's distribution of the NextN logits in
 * dr->logits, and d_i drawn from it by the sampler's own draw. */
static int32_t draw_draft(ref_drafting *d, const sampler_request *rq, uint32_t V, uint32_t *q)
{
    memcpy(d->work, d->logits, (size_t)V * sizeof *d->work);
    sampler_probs(d->scratch, rq, d->work, q);
    memcpy(d->work, d->logits, (size_t)V * sizeof *d->work);
    return sampler_pick(d->scratch, rq, d->work, NULL);
}

static int ref_draft(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_draft_req *req,
                     err_t *err)
{
    ref_engine *r = impl;
    ref_drafting *d = &r->dr;
    uint32_t V = r->m->cfg.n_vocab, k = req->k;
    if (!rf_has_nextn(r->rf))
        return err_set(err, "this engine keeps no NextN state");
    d->n_q = 0;
    if (rf_nextn_eval(r->rf, tokens, n, pos, NULL, k ? d->logits : NULL, false, err) < 0)
        return -1;
    for (uint32_t i = 0; i < k; i++) {
        /* the next row: (the previous row's output, the draft just made) */
        if (i > 0 && rf_nextn_eval(r->rf, &req->ids[i - 1], 1, pos + n - 1 + i, rf_nextn_out(r->rf), d->logits,
                                   false, err) < 0)
            return -1;
        req->ids[i] = draw_draft(d, &req->rq[i], V, d->q + (size_t)i * V);
    }
    d->n_q = k;
    return 0;
}

static int ref_verify(void *impl, const int32_t *tokens, uint32_t pos, const engine_verify_req *req, err_t *err)
{
    ref_engine *r = impl;
    ref_drafting *d = &r->dr;
    uint32_t V = r->m->cfg.n_vocab, k = req->k;
    if (!rf_has_nextn(r->rf))
        return err_set(err, "this engine keeps no NextN state");
    if (req->own_drafts && d->n_q != k)
        return err_set(err, "verify: %u drafts, the draft call made %u", k, d->n_q);
    if (rf_eval(r->rf, tokens, k + 1, pos, d->logits, true, err) < 0)
        return -1;
    for (uint32_t i = 0; i < k; i++) {
        int32_t draft = tokens[i + 1];
        const uint32_t *q = req->own_drafts ? d->q + (size_t)i * V : NULL;
        sampler_probs(d->scratch, &req->rq[i], d->logits + (size_t)i * V, d->p);
        if (!sampler_spec_accept(d->p[draft], q ? q[draft] : SAMPLER_PROB_ONE, req->accept_u[i])) {
            *req->n_accepted = i;
            *req->token = sampler_spec_residual(d->p, q, draft, V, req->rq[i].uniform);
            d->n_q = 0;
            return 0;
        }
    }
    *req->n_accepted = k;
    *req->token = sampler_pick(d->scratch, &req->rq[k], d->logits + (size_t)k * V, NULL);
    d->n_q = 0;
    return 0;
}

static const char *ref_describe(void *impl)
{
    return ((ref_engine *)impl)->description;
}

const engine_backend ref_engine_backend = {
    .name = "ref",
    .create = ref_create,
    .destroy = ref_destroy,
    .eval = ref_eval,
    .get_stats = ref_get_stats,
    .describe = ref_describe,
    /* Its products read each weight row once per token, so k+1 tokens
     * cost k+1 tokens: drafting only slows it down (bench measures it);
     * --draft K still drafts, and it is the oracle of both entries. */
    .draft_pays = false,
    .draft = ref_draft,
    .verify = ref_verify,
};
