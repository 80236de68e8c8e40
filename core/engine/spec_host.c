/* spec_host.c: drafting and verifying on the host (spec_host.h), the
 * decisions by sampler_spec.h's rule on the sampler's integer weights.
 *
 * A verify's k + 1 rows are independent until the acceptance tests, which
 * run in order.  After a verify that kept every draft, each row's
 * distribution p_i (and the token after the last draft, drawn from row k)
 * is worked out on a thread of its own first, with a sampler scratch and a
 * p buffer of its own, so the host's part of a step takes about one row's
 * time instead of k + 1 (each row the same pass as on one thread: the same
 * bits).  After a rejection the rows go one at a time and stop at the
 * first rejected draft: where drafts are seldom kept, rows worked out in
 * vain at once cost more than they save (gpu/PERF.md run 55: four rows
 * side by side on flat logits took longer than one alone). */
#include "spec_host.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/threadpool.h"
#include "sample/sampler_spec.h"

enum { ROWS = ENGINE_MAX_DRAFT + 1 };

struct spec_host {
    uint32_t V;
    sampler *scratch[ROWS]; /* sampler work space per verify row (requests carry the settings);
                               [0] also the drafts' */
    float *logits;      /* (ROWS, V) the buffer the backend's passes may fill (spec_host_fwd) */
    uint32_t *q;        /* (ENGINE_MAX_DRAFT, V) the last draft call's q_i (sampler_probs) */
    uint32_t *p;        /* (ENGINE_MAX_DRAFT, V) the verify rows' p_i */
    uint32_t n_q;       /* drafts of the last draft call */
    threadpool *pool;   /* the verify rows' threads (NULL: one core) */
    bool kept_all;      /* the last verify kept every draft */
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
    for (int i = 0; i < ROWS; i++)
        sampler_free(h->scratch[i]);
    threadpool_free(h->pool);
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
    bool ok = true;
    for (int i = 0; i < ROWS; i++)
        ok = (h->scratch[i] = sampler_new(&sp, V)) != NULL && ok;
    h->logits = malloc((size_t)ROWS * V * sizeof *h->logits);
    h->q = malloc((size_t)ENGINE_MAX_DRAFT * V * sizeof *h->q);
    h->p = malloc((size_t)ENGINE_MAX_DRAFT * V * sizeof *h->p);
    if (!ok || !h->logits || !h->q || !h->p) {
        spec_host_free(h);
        err_set(err, "out of memory for drafting (vocabulary of %u)", V);
        return NULL;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 1 && !(h->pool = threadpool_new(cpus < ROWS ? (int)cpus : ROWS, err))) {
        spec_host_free(h);
        return NULL;
    }
    return h;
}

/* q_i = the draft request's distribution of the NextN logits l, and d_i
 * drawn from it by the sampler's own draw (one pass: sampler_probs_pick). */
static int32_t draw_draft(spec_host *h, const sampler_request *rq, float *l, uint32_t *q)
{
    return sampler_probs_pick(h->scratch[0], rq, l, q);
}

int spec_host_draft(spec_host *h, const spec_host_fwd *f, void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos,
                    const engine_draft_req *req, err_t *err)
{
    uint32_t k = req->k;
    h->n_q = 0;
    float *l = NULL;
    if (f->nextn_rows(fwd, tokens, n, pos, NULL, k ? h->logits : NULL, &l, err) < 0)
        return -1;
    for (uint32_t i = 0; i < k; i++) {
        /* the next row: (the previous row's output, the draft just made) */
        if (i > 0 &&
            f->nextn_rows(fwd, &req->ids[i - 1], 1, pos + n - 1 + i, f->nextn_out(fwd), h->logits, &l, err) < 0)
            return -1;
        double t0 = mono_s();
        req->ids[i] = draw_draft(h, &req->rq[i], l, h->q + (size_t)i * h->V);
        h->host_s += mono_s() - t0;
    }
    h->n_q = k;
    return 0;
}

/* One verify row (threadpool body): p_i of row i < k, or the token after
 * the last draft from row k. */
typedef struct {
    spec_host *h;
    const engine_verify_req *req;
    float *logits; /* [k + 1][V] */
    int32_t last_token;
} verify_rows;

static void verify_row(void *ctx, uint64_t begin, uint64_t end, int tid)
{
    (void)tid;
    verify_rows *c = ctx;
    spec_host *h = c->h;
    for (uint64_t i = begin; i < end; i++) {
        float *l = c->logits + i * h->V;
        if (i < c->req->k)
            sampler_probs(h->scratch[i], &c->req->rq[i], l, h->p + i * h->V);
        else
            c->last_token = sampler_pick(h->scratch[i], &c->req->rq[i], l, NULL);
    }
}

int spec_host_verify(spec_host *h, const spec_host_fwd *f, void *fwd, const int32_t *tokens, uint32_t pos,
                     const engine_verify_req *req, err_t *err)
{
    uint32_t V = h->V, k = req->k;
    if (req->own_drafts && h->n_q != k)
        return err_set(err, "verify: %u drafts, the draft call made %u", k, h->n_q);
    float *logits = NULL;
    if (f->eval_all(fwd, tokens, k + 1, pos, h->logits, &logits, err) < 0)
        return -1;
    double t0 = mono_s();
    h->n_q = 0;
    verify_rows c = {h, req, logits, -1};
    bool at_once = h->pool && h->kept_all;
    if (at_once)
        threadpool_for(h->pool, k + 1, 1, verify_row, &c);
    for (uint32_t i = 0; i < k; i++) {
        int32_t draft = tokens[i + 1];
        const uint32_t *q = req->own_drafts ? h->q + (size_t)i * V : NULL, *p = h->p + (size_t)i * V;
        if (!at_once)
            verify_row(&c, i, i + 1, 0);
        if (!sampler_spec_accept(p[draft], q ? q[draft] : SAMPLER_PROB_ONE, req->accept_u[i])) {
            *req->n_accepted = i;
            *req->token = sampler_spec_residual(p, q, draft, V, req->rq[i].uniform);
            h->kept_all = false;
            h->host_s += mono_s() - t0;
            return 0;
        }
    }
    if (!at_once)
        verify_row(&c, k, k + 1, 0);
    *req->n_accepted = k;
    *req->token = c.last_token;
    h->kept_all = true;
    h->host_s += mono_s() - t0;
    return 0;
}
