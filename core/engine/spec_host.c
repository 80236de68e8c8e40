/* spec_host.c: drafting and verifying on the host (spec_host.h), the
 * decisions by sampler_spec.h's rule on the sampler's integer weights. */
#include "spec_host.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/sampler_spec.h"

struct spec_host {
    uint32_t V;
    sampler *scratch;   /* sampler_probs / sampler_pick work space (requests carry the settings) */
    float *logits;      /* (ENGINE_MAX_DRAFT + 1, V) NextN logits, then the verified positions' */
    uint32_t *q;        /* (ENGINE_MAX_DRAFT, V) the last draft call's q_i (sampler_probs) */
    uint32_t *p;        /* (V) */
    uint32_t n_q;       /* drafts of the last draft call */
    double host_s;      /* spec_host_seconds */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double spec_host_seconds(const spec_host *h)
{
    return h ? h->host_s : 0;
}

void spec_host_free(spec_host *h)
{
    if (!h)
        return;
    sampler_free(h->scratch);
    free(h->logits);
    free(h->q);
    free(h->p);
    free(h);
}

spec_host *spec_host_new(uint32_t V, err_t *err)
{
    spec_host *h = calloc(1, sizeof *h);
    if (!h) {
        err_set(err, "out of memory for drafting");
        return NULL;
    }
    sampler_params sp;
    sampler_params_default(&sp);
    h->V = V;
    h->scratch = sampler_new(&sp, V);
    h->logits = malloc((size_t)(ENGINE_MAX_DRAFT + 1) * V * sizeof *h->logits);
    h->q = malloc((size_t)ENGINE_MAX_DRAFT * V * sizeof *h->q);
    h->p = malloc((size_t)V * sizeof *h->p);
    if (!h->scratch || !h->logits || !h->q || !h->p) {
        spec_host_free(h);
        err_set(err, "out of memory for drafting (vocabulary of %u)", V);
        return NULL;
    }
    return h;
}

/* q_i = the draft request's distribution of the NextN logits in
 * h->logits, and d_i drawn from it by the sampler's own draw (one pass:
 * sampler_probs_pick). */
static int32_t draw_draft(spec_host *h, const sampler_request *rq, uint32_t *q)
{
    return sampler_probs_pick(h->scratch, rq, h->logits, q);
}

int spec_host_draft(spec_host *h, const spec_host_fwd *f, void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos,
                    const engine_draft_req *req, err_t *err)
{
    uint32_t k = req->k;
    h->n_q = 0;
    if (f->nextn_rows(fwd, tokens, n, pos, NULL, k ? h->logits : NULL, err) < 0)
        return -1;
    for (uint32_t i = 0; i < k; i++) {
        /* the next row: (the previous row's output, the draft just made) */
        if (i > 0 && f->nextn_rows(fwd, &req->ids[i - 1], 1, pos + n - 1 + i, f->nextn_out(fwd), h->logits, err) < 0)
            return -1;
        double t0 = mono_s();
        req->ids[i] = draw_draft(h, &req->rq[i], h->q + (size_t)i * h->V);
        h->host_s += mono_s() - t0;
    }
    h->n_q = k;
    return 0;
}

int spec_host_verify(spec_host *h, const spec_host_fwd *f, void *fwd, const int32_t *tokens, uint32_t pos,
                     const engine_verify_req *req, err_t *err)
{
    uint32_t V = h->V, k = req->k;
    if (req->own_drafts && h->n_q != k)
        return err_set(err, "verify: %u drafts, the draft call made %u", k, h->n_q);
    if (f->eval_all(fwd, tokens, k + 1, pos, h->logits, err) < 0)
        return -1;
    double t0 = mono_s();
    h->n_q = 0;
    for (uint32_t i = 0; i < k; i++) {
        int32_t draft = tokens[i + 1];
        const uint32_t *q = req->own_drafts ? h->q + (size_t)i * V : NULL;
        sampler_probs(h->scratch, &req->rq[i], h->logits + (size_t)i * V, h->p);
        if (!sampler_spec_accept(h->p[draft], q ? q[draft] : SAMPLER_PROB_ONE, req->accept_u[i])) {
            *req->n_accepted = i;
            *req->token = sampler_spec_residual(h->p, q, draft, V, req->rq[i].uniform);
            h->host_s += mono_s() - t0;
            return 0;
        }
    }
    *req->n_accepted = k;
    *req->token = sampler_pick(h->scratch, &req->rq[k], h->logits + (size_t)k * V, NULL);
    h->host_s += mono_s() - t0;
    return 0;
}
