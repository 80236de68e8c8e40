/* cpu_engine.c: the fast CPU forward pass (cpu_forward.h) as an engine
 * backend ("cpu"): logits, the top candidates and logsumexp of the last
 * position, the per-step table for the side pane and `bench --profile` --
 * the single-token evals' once there are some (what a chat spends its time
 * on), the prompt's before -- and drafting with the NextN block (engine.h's
 * draft and verify, decided in spec_host.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "cpu_forward.h"
#include "engine/spec_host.h"

typedef struct {
    const model *m;
    cf_state *cf;
    float *last;        /* (n_vocab) last position's logits when the caller wants no logits */
    spec_host *spec;    /* drafting (when cf_has_nextn) */
    char description[160];
} cpu_engine;

/* The context when none is given: the model's trained one, at most
 * ENGINE_AUTO_CTX_CAP, and a KV cache (with drafting, the NextN block's
 * and the kept hidden states too) within half the memory available now
 * (in steps of 256 tokens). */
static uint32_t auto_ctx(const model *m, bool kv_f16, bool nextn)
{
    const model_config *c = &m->cfg;
    uint32_t n = c->n_ctx_train && c->n_ctx_train < ENGINE_AUTO_CTX_CAP ? c->n_ctx_train : ENGINE_AUTO_CTX_CAP;
    nextn = nextn && c->n_nextn > 0;
    double per_token = ((double)(c->n_layer + nextn) * (c->kv_lora_rank + c->qk_rope) + (nextn ? c->n_embd : 0)) *
                       (kv_f16 ? 2 : 4);
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
        p->n_ctx = auto_ctx(m, p->kv == KV_F16, p->draft != ENGINE_DRAFT_OFF);
        if (p->n_batch > p->n_ctx)
            p->n_batch = p->n_ctx;
    }
    cpu_engine *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(err, "out of memory");
    r->m = m;
    cf_params cp = {.n_ctx = p->n_ctx, .n_batch = p->n_batch, .kv_f16 = p->kv == KV_F16, .n_threads = p->n_threads,
                    .nextn = p->draft != ENGINE_DRAFT_OFF};
    r->cf = cf_new(m, &cp, err);
    r->last = malloc(m->cfg.n_vocab * sizeof(float));
    if (!r->cf || !r->last || (cf_has_nextn(r->cf) && !(r->spec = spec_host_new(m->cfg.n_vocab, err)))) {
        if (r->cf && !r->last)
            err_set(err, "out of memory");
        cf_free(r->cf);
        free(r->last);
        free(r);
        return -1;
    }
    int nt = cf_threads(r->cf);
    char packed[48] = "";
    if (cf_packed_bytes(r->cf)) /* memory of its own, beside the mapped file */
        snprintf(packed, sizeof packed, "; rows packed, %.1f MiB", (double)cf_packed_bytes(r->cf) / 1048576.0);
    snprintf(r->description, sizeof r->description, "CPU (8-bit activations, %s kernels%s), %d thread%s, KV %s%s",
             cf_kernels(r->cf)->name, packed, nt, nt == 1 ? "" : "s", p->kv == KV_F16 ? "f16" : "f32",
             r->spec ? ", NextN drafting" : "");
    *impl = r;
    return 0;
}

static void cpu_destroy(void *impl)
{
    cpu_engine *r = impl;
    cf_free(r->cf);
    free(r->last);
    spec_host_free(r->spec);
    free(r);
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
    int rc = cf_eval(r->cf, tokens, n, pos, logits, out->all_positions && out->logits, err);
    if (rc != 0)
        return rc; /* -1, or 1: stopped by the cancel flag (cpu_set_cancel) */
    if (!want_last)
        return 0;
    engine_last_row_outputs(logits + (out->all_positions && out->logits ? (uint64_t)(n - 1) * V : 0), V, out);
    return 0;
}

static engine_cancel_reach cpu_set_cancel(void *impl, const atomic_bool *flag)
{
    cf_set_cancel(((cpu_engine *)impl)->cf, flag);
    return ENGINE_CANCEL_EVERY_LAYER;
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
    st->cpu_steps = true;
}

static void cpu_get_stats(void *impl, engine_stats *st)
{
    cpu_engine *r = impl;
    cf_profile p;
    cf_profile_get(r->cf, true, &p);
    if (p.tokens == 0)
        cf_profile_get(r->cf, false, &p);
    stats_of(&p, st);
    st->spec_host_seconds = spec_host_seconds(r->spec);
}

static void cpu_prompt_stats(void *impl, engine_stats *st)
{
    cf_profile p;
    cf_profile_get(((cpu_engine *)impl)->cf, false, &p);
    memset(st, 0, sizeof *st);
    stats_of(&p, st);
}

static void cpu_reset_profile(void *impl)
{
    cf_profile_reset(((cpu_engine *)impl)->cf);
}

static const char *cpu_describe(void *impl)
{
    return ((cpu_engine *)impl)->description;
}

/* ---- drafting (engine.h's draft and verify) ------------------------------------ */

/* The fast forward pass as spec_host.h calls it. */
static int fwd_nextn_rows(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *buf,
                          float **at, err_t *err)
{
    *at = buf;
    return cf_nextn_eval(fwd, tokens, n, pos, h, buf, false, err);
}

static const float *fwd_nextn_out(void *fwd)
{
    return cf_nextn_out(fwd);
}

/* cf_eval_verify: every position's logits, bit for bit the single-token
 * evals' (cpu_forward.h's batch independence). */
static int fwd_eval_all(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, float *buf, float **at,
                        err_t *err)
{
    *at = buf;
    return cf_eval_verify(fwd, tokens, n, pos, buf, err);
}

static const spec_host_fwd cpu_fwd = {fwd_nextn_rows, fwd_nextn_out, fwd_eval_all};

static int cpu_draft(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_draft_req *req,
                     err_t *err)
{
    cpu_engine *r = impl;
    if (!r->spec)
        return err_set(err, "this engine keeps no NextN state");
    return spec_host_draft(r->spec, &cpu_fwd, r->cf, tokens, n, pos, req, err);
}

static int cpu_verify(void *impl, const int32_t *tokens, uint32_t pos, const engine_verify_req *req, err_t *err)
{
    cpu_engine *r = impl;
    if (!r->spec)
        return err_set(err, "this engine keeps no NextN state");
    return spec_host_verify(r->spec, &cpu_fwd, r->cf, tokens, pos, req, err);
}

const engine_backend cpu_engine_backend = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .eval = cpu_eval,
    .get_stats = cpu_get_stats,
    .describe = cpu_describe,
    /* A decoded token streams the weights it uses; checking k + 1 tokens at
     * once saves the reads they share (attention, shared expert, dense
     * block, head) but not their routed experts, which differ per token,
     * nor the multiply-adds -- and each draft costs a NextN block and a
     * head.  Measured (README, "CPU speed": cpu_bench --draft): even with
     * every draft kept a step gains at most ~10 %, at real acceptance it
     * loses, so auto does not draft here; --draft K still does. */
    .draft_pays = false,
    .set_cancel = cpu_set_cancel,
    .draft = cpu_draft,
    .verify = cpu_verify,
    .prompt_stats = cpu_prompt_stats,
    .reset_profile = cpu_reset_profile,
};
