/* ref_engine.c: the CPU reference forward pass as an engine backend
 * ("ref"): logits, the top candidates and logsumexp of the last position,
 * a per-stage timing table for the side pane, and drafting with the NextN
 * block (the reference of engine.h's draft and verify). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ref_forward.h"
#include "engine/spec_host.h"

typedef struct {
    const model *m;
    rf_state *rf;
    float *last;        /* (n_vocab) last position's logits when the caller wants no logits */
    spec_host *spec;    /* drafting (when rf_has_nextn) */
    char description[160];
} ref_engine;

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
    if (!r->rf || !r->last || (rf_has_nextn(r->rf) && !(r->spec = spec_host_new(m->cfg.n_vocab, err)))) {
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
    spec_host_free(r->spec);
    free(r);
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
    engine_last_row_outputs(logits + (out->all_positions && out->logits ? (uint64_t)(n - 1) * V : 0), V, out);
    return 0;
}

static void ref_get_stats(void *impl, engine_stats *st)
{
    ref_engine *r = impl;
    st->spec_host_seconds = spec_host_seconds(r->spec);
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

/* The reference forward pass as spec_host.h calls it. */
static int fwd_nextn_rows(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *buf,
                          float **at, err_t *err)
{
    *at = buf;
    return rf_nextn_eval(fwd, tokens, n, pos, h, buf, false, err);
}

static const float *fwd_nextn_out(void *fwd)
{
    return rf_nextn_out(fwd);
}

static int fwd_eval_all(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, float *buf, float **at,
                        err_t *err)
{
    *at = buf;
    return rf_eval(fwd, tokens, n, pos, buf, true, err);
}

static const spec_host_fwd ref_fwd = {fwd_nextn_rows, fwd_nextn_out, fwd_eval_all};

static int ref_draft(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_draft_req *req,
                     err_t *err)
{
    ref_engine *r = impl;
    if (!r->spec)
        return err_set(err, "this engine keeps no NextN state");
    return spec_host_draft(r->spec, &ref_fwd, r->rf, tokens, n, pos, req, err);
}

static int ref_verify(void *impl, const int32_t *tokens, uint32_t pos, const engine_verify_req *req, err_t *err)
{
    ref_engine *r = impl;
    if (!r->spec)
        return err_set(err, "this engine keeps no NextN state");
    return spec_host_verify(r->spec, &ref_fwd, r->rf, tokens, pos, req, err);
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
