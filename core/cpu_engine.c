/* cpu_engine.c: the fast CPU forward pass (cpu_forward.h) as an engine
 * backend ("cpu"): logits, the top candidates and logsumexp of the last
 * position, and the per-step table for the side pane and `bench
 * --profile` -- the single-token evals' once there are some (what a chat
 * spends its time on), the prompt's before. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_engine.h"
#include "cpu_forward.h"

typedef struct {
    const model *m;
    cf_state *cf;
    float *last;        /* (n_vocab) last position's logits when the caller wants no logits */
    char description[160];
} cpu_engine;

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

static int cpu_create(void **impl, const model *m, engine_params *p, err_t *err)
{
    if (p->n_ctx == 0) {
        p->n_ctx = auto_ctx(m, p->kv == KV_F16);
        if (p->n_batch > p->n_ctx)
            p->n_batch = p->n_ctx;
    }
    cpu_engine *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(err, "out of memory");
    r->m = m;
    cf_params cp = {.n_ctx = p->n_ctx, .n_batch = p->n_batch, .kv_f16 = p->kv == KV_F16, .n_threads = p->n_threads};
    r->cf = cf_new(m, &cp, err);
    r->last = malloc(m->cfg.n_vocab * sizeof(float));
    if (!r->cf || !r->last) {
        if (r->cf && !r->last)
            err_set(err, "out of memory");
        cf_free(r->cf);
        free(r->last);
        free(r);
        return -1;
    }
    int nt = cf_threads(r->cf);
    snprintf(r->description, sizeof r->description, "CPU (8-bit activations, %s kernels), %d thread%s, KV %s",
             cf_kernels(r->cf)->name, nt, nt == 1 ? "" : "s", p->kv == KV_F16 ? "f16" : "f32");
    *impl = r;
    return 0;
}

static void cpu_destroy(void *impl)
{
    cpu_engine *r = impl;
    cf_free(r->cf);
    free(r->last);
    free(r);
}

/* "a ranks before b": higher logit, then lower id. */
static bool ranks_before(float la, int32_t ia, float lb, int32_t ib)
{
    return la > lb || (la == lb && ia < ib);
}

/* The k best of n logits, best first. */
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

static int cpu_eval(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_output *out,
                    err_t *err)
{
    cpu_engine *r = impl;
    uint32_t V = r->m->cfg.n_vocab;
    bool want_last = out->top_k > 0 || out->log_z;
    float *logits = out->logits;
    if (!logits && want_last)
        logits = r->last;
    if (cf_eval(r->cf, tokens, n, pos, logits, out->all_positions && out->logits, err) < 0)
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

static void stats_of(const cf_profile *pp, engine_stats *st)
{
    const cf_profile p = *pp;
    st->n_kernels = 0;
    if (p.tokens == 0)
        return;
    double tok = (double)p.tokens;
    for (int i = 0; i < CF_ST_COUNT && st->n_kernels < ENGINE_MAX_KERNEL_STATS; i++) {
        const cf_step_stat *s = &p.step[i];
        if (s->calls == 0 && s->seconds == 0)
            continue;
        engine_kernel_stat *k = &st->kernels[st->n_kernels++];
        snprintf(k->name, sizeof k->name, "%s", s->name);
        k->calls_per_token = (double)s->calls / tok;
        k->us_per_token = s->seconds * 1e6 / tok;
        k->bytes_per_token = s->bytes / tok;
        k->gbps = s->seconds > 0 ? s->bytes / s->seconds / 1e9 : 0;
    }
    st->dispatches_per_token = (uint32_t)((double)p.steps / (double)p.evals + 0.5);
    st->us_per_token_measured = p.seconds * 1e6 / tok;
}

static void cpu_get_stats(void *impl, engine_stats *st)
{
    cpu_engine *r = impl;
    cf_profile p;
    cf_profile_get(r->cf, true, &p);
    if (p.tokens == 0)
        cf_profile_get(r->cf, false, &p);
    stats_of(&p, st);
}

void cpu_engine_prompt_stats(void *impl, engine_stats *st)
{
    cf_profile p;
    cf_profile_get(((cpu_engine *)impl)->cf, false, &p);
    memset(st, 0, sizeof *st);
    stats_of(&p, st);
}

void cpu_engine_reset_profile(void *impl)
{
    cf_profile_reset(((cpu_engine *)impl)->cf);
}

static const char *cpu_describe(void *impl)
{
    return ((cpu_engine *)impl)->description;
}

const engine_backend cpu_engine_backend = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .eval = cpu_eval,
    .get_stats = cpu_get_stats,
    .describe = cpu_describe,
};
