/* engine.c: the backend-neutral half of the engine API: prompt chunking by
 * n_batch, cancellation between chunks, position bookkeeping, tokens/s,
 * sampling on the CPU for backends that do not sample themselves, and the
 * speculative step around a backend's draft and verify; for backends, the
 * last position's top-K and logsumexp (engine_last_row_outputs). */
#include "engine.h"

#include <math.h>
#include <stdint.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

void engine_params_default(engine_params *p)
{
    memset(p, 0, sizeof *p);
    p->n_ctx = 4096;
    p->kv = KV_F32;
    p->n_batch = ENGINE_DEFAULT_BATCH;
    p->n_threads = 0;
    p->device_index = -1;
    p->profile = PROFILE_SAMPLED;
    p->n_cpu_moe = ENGINE_CPU_MOE_AUTO;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int engine_open(engine *e, const engine_backend *be, const model *m, const engine_params *p, err_t *err)
{
    memset(e, 0, sizeof *e);
    atomic_init(&e->cancel, false);
    if (p->draft < ENGINE_DRAFT_AUTO || p->draft > ENGINE_MAX_DRAFT)
        return err_set(err, "%d drafts per step: 1..%d, or auto", p->draft, ENGINE_MAX_DRAFT);
    e->be = be;
    e->m = m;
    e->params = *p;
    if (e->params.n_batch == ENGINE_BATCH_AUTO && !be->plans_batch)
        e->params.n_batch = ENGINE_DEFAULT_BATCH;
    if (e->params.draft == ENGINE_DRAFT_AUTO && !be->draft_pays)
        e->params.draft = ENGINE_DRAFT_OFF; /* auto drafts only where it speeds decoding up */
    if (e->params.n_ctx && e->params.n_batch > e->params.n_ctx)
        e->params.n_batch = e->params.n_ctx;
    sampler_params sp;
    sampler_params_default(&sp);
    e->pick = sampler_new(&sp, m->cfg.n_vocab);
    e->pick_logits = malloc((size_t)m->cfg.n_vocab * sizeof *e->pick_logits);
    if (!e->pick || !e->pick_logits) {
        engine_close(e);
        return err_set(err, "out of memory for the sampler (%u tokens)", m->cfg.n_vocab);
    }
    if (be->create(&e->impl, m, &e->params, err) < 0) {
        e->be = NULL;
        e->impl = NULL;
        engine_close(e);
        return -1;
    }
    e->cancel_reach = be->set_cancel ? be->set_cancel(e->impl, &e->cancel) : ENGINE_CANCEL_BETWEEN_EVALS;
    e->draft_pos = UINT32_MAX;
    if (engine_can_draft(e) && !(e->tokens = malloc(((size_t)e->params.n_ctx + 1) * sizeof *e->tokens))) {
        engine_close(e);
        return err_set(err, "out of memory for the drafting state (%u tokens)", e->params.n_ctx);
    }
    return 0;
}

bool engine_can_draft(const engine *e)
{
    return e->be && e->be->draft && e->be->verify && e->params.draft != ENGINE_DRAFT_OFF && e->m->cfg.n_nextn > 0;
}

void engine_close(engine *e)
{
    if (e->be && e->impl)
        e->be->destroy(e->impl);
    e->be = NULL;
    e->impl = NULL;
    sampler_free(e->pick);
    free(e->pick_logits);
    free(e->tokens);
    e->pick = NULL;
    e->pick_logits = NULL;
    e->tokens = NULL;
}

/* tokens[0..n) are now in the cache at pos: their record, and the NextN
 * row of `pos` when the draft call before made it from the same token. */
static void note_cached(engine *e, const int32_t *tokens, uint32_t n, uint32_t pos)
{
    if (!e->tokens)
        return;
    memcpy(e->tokens + pos, tokens, n * sizeof *tokens);
    if (e->draft_pos == pos && e->draft_last == tokens[0] && e->nx_past == pos)
        e->nx_past = pos + 1;
    e->draft_pos = UINT32_MAX;
}

/* What chunk [done, done+n) of a call must produce: every position's
 * logits go to their rows; the last-position outputs only with the last
 * chunk.  cpu_pick: the token is sampled here from the last logits, which
 * then go to e->pick_logits unless the caller wants them. */
static engine_output chunk_output(const engine *e, const engine_output *out, uint32_t done, bool last,
                                  uint32_t n_vocab, bool cpu_pick)
{
    engine_output o = {0};
    if (!out)
        return o;
    if (out->all_positions && out->logits) {
        o.logits = out->logits + (uint64_t)done * n_vocab;
        o.all_positions = true;
    }
    if (last) {
        if (!out->all_positions)
            o.logits = out->logits;
        o.top_k = out->top_k;
        o.top_ids = out->top_ids;
        o.top_logits = out->top_logits;
        o.log_z = out->log_z;
        if (cpu_pick) {
            if (!o.logits)
                o.logits = e->pick_logits;
        } else {
            o.sample = out->sample;
            o.token = out->token;
            o.token_prob = out->token_prob;
        }
    }
    return o;
}

/* The token from the last logits of a call (the caller's, or ours). */
static void pick_on_cpu(engine *e, const engine_output *out, uint32_t n_tokens, uint32_t n_vocab)
{
    const float *last = e->pick_logits;
    if (out->logits)
        last = out->logits + (out->all_positions ? (uint64_t)(n_tokens - 1) * n_vocab : 0);
    if (last != e->pick_logits) /* the caller's logits stay as the model gave them */
        memcpy(e->pick_logits, last, (size_t)n_vocab * sizeof *last);
    int32_t tok = sampler_pick(e->pick, out->sample, e->pick_logits, out->token_prob);
    if (out->token)
        *out->token = tok;
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

void engine_last_row_outputs(const float *last, uint32_t n_vocab, const engine_output *out)
{
    if (out->top_k > 0) {
        uint32_t k = out->top_k < n_vocab ? out->top_k : n_vocab;
        top_k(last, n_vocab, k, out->top_ids, out->top_logits);
        for (uint32_t i = k; i < out->top_k; i++) {
            out->top_ids[i] = -1;
            out->top_logits[i] = -INFINITY;
        }
    }
    if (out->log_z)
        *out->log_z = log_sum_exp(last, n_vocab);
}

/* The next prompt chunk: n_batch, or what params.chunk_seconds allows.  A
 * chunk takes about a + b * n seconds (a: the submit, the graph's fixed
 * cost -- ~0.2 s on lavapipe, ~35 ms on an H200 at Q4_0; b: per token).
 * engine_note_chunk fits the line to the latest chunks by least squares,
 * but only where their sizes differ by enough to tell a from b (a spread
 * of CHUNK_SPREAD of their mean): once the chunks have settled at one
 * size (as they should), a fit of nearly equal sizes is noise, and one of
 * equal sizes has no slope at all -- the chunks fell to the target / mean
 * time, then climbed back, over and over (lavapipe: 37 tokens, then 100).
 * Between fits the last line is scaled to the latest chunks' mean time
 * (the machine got slower, the prompt deeper).  The chunk is what fits
 * the target, but at least a / b tokens, so that the fixed part never
 * takes more than half of a chunk's time (a quarter, 3 a / b tokens, where
 * the backend stops within a chunk: engine.h), and at most CHUNK_GROWTH times
 * the largest chunk seen: a line fitted to small chunks is a guess far
 * past them (a short first chunk, PROBE_CHUNK, starts it). */
#define PROBE_CHUNK 16
#define CHUNK_SPREAD 0.1
#define CHUNK_GROWTH 4

typedef struct {
    uint32_t k, largest;
    double mn, mt, vn, cv; /* means of sizes and times; the sizes' variance and covariance (sums) */
} chunk_sums;

static chunk_sums chunk_history(const engine *e)
{
    chunk_sums h = {.k = e->chunks_seen < ENGINE_CHUNK_HISTORY ? e->chunks_seen : ENGINE_CHUNK_HISTORY};
    for (uint32_t i = 0; i < h.k; i++) {
        h.mn += e->chunk_n[i] / (double)h.k;
        h.mt += e->chunk_s[i] / h.k;
        h.largest = e->chunk_n[i] > h.largest ? e->chunk_n[i] : h.largest;
    }
    for (uint32_t i = 0; i < h.k; i++) {
        h.vn += (e->chunk_n[i] - h.mn) * (e->chunk_n[i] - h.mn);
        h.cv += (e->chunk_n[i] - h.mn) * (e->chunk_s[i] - h.mt);
    }
    return h;
}

void engine_note_chunk(engine *e, uint32_t n, double seconds)
{
    uint32_t at = e->chunks_seen++ % ENGINE_CHUNK_HISTORY;
    e->chunk_n[at] = n;
    e->chunk_s[at] = seconds;
    chunk_sums h = chunk_history(e);
    double spread = CHUNK_SPREAD * h.mn;
    if (h.k >= 2 && h.vn >= h.k * spread * spread && h.cv > 0) {
        e->chunk_b = h.cv / h.vn;
        e->chunk_a = h.mt - e->chunk_b * h.mn;
        e->chunk_a = e->chunk_a > 0 ? e->chunk_a : 0;
        e->chunk_fitted = true;
    }
}

uint32_t engine_next_chunk(const engine *e, uint32_t left)
{
    uint32_t nb = e->params.n_batch, n = nb;
    chunk_sums h = chunk_history(e);
    double target = e->params.chunk_seconds;
    if (target > 0 && e->cancel_reach == ENGINE_CANCEL_EVERY_LAYER && target < ENGINE_CHUNK_S_CANCELLABLE)
        target = ENGINE_CHUNK_S_CANCELLABLE;
    /* Esc waits for the longest stretch without a look at the flag, not
     * for the chunk: the chunk may be as much longer as that stretch is a
     * smaller share of it (a line fitted to small chunks still grows them
     * by at most CHUNK_GROWTH) */
    if (target > 0 && e->cancel_reach == ENGINE_CANCEL_HOST_LAYERS && e->chunk_stretch_share > 0)
        target /= e->chunk_stretch_share;
    /* the fixed part's largest share of a chunk, as a floor on its tokens */
    double fixed_share = e->cancel_reach != ENGINE_CANCEL_BETWEEN_EVALS ? ENGINE_CHUNK_FIXED_SHARE_CANCELLABLE : 0.5;
    if (target > 0) {
        double fit = PROBE_CHUNK;
        if (h.k > 0) {
            double a = 0, b = h.mt / h.mn; /* one size seen: all of it per token, until a line is fitted */
            if (e->chunk_fitted) {
                double scale = h.mt / (e->chunk_a + e->chunk_b * h.mn);
                a = e->chunk_a * scale;
                b = e->chunk_b * scale;
            }
            fit = b > 0 ? (target - a) / b : nb;
            double floor_n = b > 0 ? a * (1 - fixed_share) / fixed_share / b : 0;
            if (floor_n > fit)
                fit = floor_n;
            if (fit > (double)CHUNK_GROWTH * h.largest)
                fit = (double)CHUNK_GROWTH * h.largest;
        }
        n = fit < 1 ? 1 : fit > nb ? nb : (uint32_t)fit;
    }
    return left < n ? left : n;
}

static void count_tokens(engine_counters *c, uint32_t n, double dt)
{
    if (n == 1) {
        c->n_decode_tokens++;
        c->decode_seconds += dt;
        c->recent_decode_s[c->recent_at] = dt;
        c->recent_at = (c->recent_at + 1) % ENGINE_RECENT_DECODES;
        if (c->n_recent < ENGINE_RECENT_DECODES)
            c->n_recent++;
    } else {
        c->n_prefill_tokens += n;
        c->prefill_seconds += dt;
        c->last_prefill_tps = dt > 0 ? n / dt : 0;
    }
}

int engine_eval(engine *e, const int32_t *tokens, uint32_t n_tokens, const engine_output *out, err_t *err)
{
    const uint32_t n_vocab = e->m->cfg.n_vocab;
    if (!e->impl)
        return err_set(err, "the engine is not open");
    if (n_tokens == 0)
        return err_set(err, "nothing to evaluate (0 tokens)");
    if ((uint64_t)e->n_past + n_tokens > e->params.n_ctx)
        return err_set(err, "context full: %u tokens in the cache + %u new exceed the %u-token context",
                       e->n_past, n_tokens, e->params.n_ctx);
    for (uint32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab)
            return err_set(err, "token id %d (at %u) is out of range: the vocabulary has %u tokens",
                           tokens[i], i, n_vocab);
    /* the backend samples unless it cannot, or the caller also wants the
     * logits (which the GPU's penalties would change in place) */
    bool cpu_pick = out && out->sample && (!e->be->samples || out->logits);
    double t0 = now_seconds();
    uint32_t done = 0;
    while (done < n_tokens) {
        if (atomic_load(&e->cancel)) {
            if (done > 0)
                count_tokens(&e->counters, done, now_seconds() - t0);
            return 1;
        }
        uint32_t n = n_tokens > 1 ? engine_next_chunk(e, n_tokens - done) : 1;
        engine_output o = chunk_output(e, out, done, done + n == n_tokens, n_vocab, cpu_pick);
        double c0 = now_seconds();
        int rc = e->be->eval(e->impl, tokens + done, n, e->n_past, &o, err);
        if (rc < 0)
            return -1;
        if (rc == 1) { /* cancelled inside the chunk (set_cancel): nothing of it kept */
            if (done > 0)
                count_tokens(&e->counters, done, now_seconds() - t0);
            return 1;
        }
        note_cached(e, tokens + done, n, e->n_past);
        e->n_past += n;
        done += n;
        bool first = !e->evaluated;
        e->evaluated = true;
        if (n_tokens > 1) { /* a prompt: the chunk's time for the next ones, and the progress */
            double s = now_seconds() - c0, stretch = e->be->eval_stretch ? e->be->eval_stretch(e->impl) : 0;
            if (!first) /* the first eval's first-use costs are no chunk's (engine.h) */
                engine_note_chunk(e, n, s);
            e->chunk_stretch_share = stretch > 0 && s > 0 ? (stretch < s ? stretch / s : 1) : 0;
            if (e->prompt_progress)
                e->prompt_progress(e->prompt_progress_user, done, n_tokens, now_seconds() - t0);
        }
    }
    if (cpu_pick)
        pick_on_cpu(e, out, n_tokens, n_vocab);
    count_tokens(&e->counters, n_tokens, now_seconds() - t0);
    return 0;
}

void engine_rewind(engine *e, uint32_t n_past)
{
    if (n_past < e->n_past)
        e->n_past = n_past;
    if (e->nx_past > e->n_past)
        e->nx_past = e->n_past;
    if (e->draft_pos != UINT32_MAX && e->draft_pos > e->n_past)
        e->draft_pos = UINT32_MAX;
}

void engine_request_cancel(engine *e)
{
    atomic_store(&e->cancel, true);
}

void engine_clear_cancel(engine *e)
{
    atomic_store(&e->cancel, false);
}

void engine_get_stats(engine *e, engine_stats *st)
{
    memset(st, 0, sizeof *st);
    if (e->be && e->impl && e->be->get_stats)
        e->be->get_stats(e->impl, st);
    const engine_counters *c = &e->counters;
    st->prefill_tps = c->last_prefill_tps;
    st->n_prefill_tokens = c->n_prefill_tokens;
    st->n_decode_tokens = c->n_decode_tokens;
    st->prefill_seconds = c->prefill_seconds;
    st->decode_seconds = c->decode_seconds;
    double recent = 0;
    for (uint32_t i = 0; i < c->n_recent; i++)
        recent += c->recent_decode_s[i];
    st->decode_tps = recent > 0 ? c->n_recent / recent : 0;
    st->spec_steps = c->spec_steps;
    st->spec_drafted = c->spec_drafted;
    st->spec_accepted = c->spec_accepted;
    st->spec_tokens = c->spec_tokens;
    st->spec_seconds = c->spec_seconds;
}

void engine_set_chunk_seconds(engine *e, double seconds)
{
    e->params.chunk_seconds = seconds;
}

/* ---- speculative decoding ------------------------------------------------------------ */

static int check_token(const engine *e, int32_t t, err_t *err)
{
    if (t < 0 || (uint32_t)t >= e->m->cfg.n_vocab)
        return err_set(err, "token id %d is out of range: the vocabulary has %u tokens", t, e->m->cfg.n_vocab);
    return 0;
}

int engine_draft(engine *e, int32_t last, const engine_draft_req *req, err_t *err)
{
    if (!e->impl || !engine_can_draft(e))
        return err_set(err, "drafting is not available (no NextN block, drafting off, or a backend without it)");
    uint32_t k = req->k;
    if (k > ENGINE_MAX_DRAFT)
        return err_set(err, "%u drafts asked for, at most %d", k, ENGINE_MAX_DRAFT);
    if ((uint64_t)e->n_past + (k ? k : 1) > e->params.n_ctx)
        return err_set(err, "context full: no room for %u drafts after %u tokens (context %u)", k, e->n_past,
                       e->params.n_ctx);
    if (check_token(e, last, err) < 0)
        return -1;
    /* the rows the cache's tokens still lack, then the row of `last`
     * (tokens has a spare slot past n_ctx - 1 for it) */
    double t0 = now_seconds();
    e->tokens[e->n_past] = last;
    e->draft_pos = UINT32_MAX;
    uint32_t from = e->nx_past, end = e->n_past + 1;
    while (from < end) {
        if (atomic_load(&e->cancel))
            return 1;
        uint32_t n = end - from < e->params.n_batch ? end - from : e->params.n_batch;
        bool final = from + n == end;
        engine_draft_req rows = {0};
        if (e->be->draft(e->impl, e->tokens + from, n, from, final ? req : &rows, err) < 0)
            return -1;
        from += n;
        e->nx_past = from < e->n_past ? from : e->n_past;
    }
    for (uint32_t i = 0; i < k; i++)
        if (check_token(e, req->ids[i], err) < 0)
            return err_prefix(err, "draft %u", i + 1);
    e->draft_pos = e->n_past;
    e->draft_last = last;
    e->draft_k = k;
    memcpy(e->draft_ids, req->ids, k * sizeof *req->ids);
    double dt = now_seconds() - t0;
    e->counters.spec_seconds += dt;
    e->counters.decode_seconds += dt;
    return 0;
}

int engine_verify(engine *e, const int32_t *tokens, const engine_verify_req *req, err_t *err)
{
    if (!e->impl || !engine_can_draft(e))
        return err_set(err, "verifying drafts is not available (no NextN block, drafting off, or a backend without it)");
    uint32_t k = req->k;
    if (k == 0 || k > ENGINE_MAX_DRAFT)
        return err_set(err, "%u drafts to verify, expected 1 to %d", k, ENGINE_MAX_DRAFT);
    if (k + 1 > e->params.n_batch)
        return err_set(err, "%u drafts need a batch of %u tokens (n_batch %u)", k, k + 1, e->params.n_batch);
    if ((uint64_t)e->n_past + k + 1 > e->params.n_ctx)
        return err_set(err, "context full: %u tokens in the cache + %u to verify exceed the %u-token context",
                       e->n_past, k + 1, e->params.n_ctx);
    for (uint32_t i = 0; i <= k; i++)
        if (check_token(e, tokens[i], err) < 0)
            return -1;
    if (req->own_drafts && (e->draft_pos != e->n_past || e->draft_last != tokens[0] || e->draft_k != k ||
                            memcmp(e->draft_ids, tokens + 1, k * sizeof *tokens) != 0))
        return err_set(err, "verify: these are not the drafts of the draft call just before");
    double t0 = now_seconds();
    uint32_t pos = e->n_past;
    if (e->be->verify(e->impl, tokens, pos, req, err) < 0)
        return -1;
    uint32_t j = *req->n_accepted;
    if (j > k || check_token(e, *req->token, err) < 0)
        return err_set(err, "verify: the backend kept %u of %u drafts, token %d", j, k, *req->token);
    note_cached(e, tokens, j + 1, pos);
    e->n_past = pos + j + 1;
    /* decoded tokens (the recent single-token rate stays that) */
    engine_counters *c = &e->counters;
    double dt = now_seconds() - t0;
    c->spec_steps++;
    c->spec_drafted += k;
    c->spec_accepted += j;
    c->spec_tokens += j + 1;
    c->spec_seconds += dt;
    c->n_decode_tokens += j + 1;
    c->decode_seconds += dt;
    return 0;
}

int engine_spec_step(engine *e, sampler *smp, int32_t last, uint32_t k, const int32_t *forced, int32_t *out,
                     uint32_t *n_out, err_t *err)
{
    if (k == 0 || k > ENGINE_MAX_DRAFT)
        return err_set(err, "%u drafts per step, expected 1 to %d", k, ENGINE_MAX_DRAFT);
    sampler_request drq[ENGINE_MAX_DRAFT], vrq[ENGINE_MAX_DRAFT + 1];
    uint32_t accept_u[ENGINE_MAX_DRAFT];
    int32_t toks[ENGINE_MAX_DRAFT + 1];
    for (uint32_t i = 0; i < k; i++)
        sampler_prepare_draft(smp, &drq[i]);
    engine_draft_req dr = {.k = k, .rq = drq, .ids = toks + 1};
    int rc = engine_draft(e, last, &dr, err);
    if (rc != 0)
        return rc;
    if (forced)
        memcpy(toks + 1, forced, k * sizeof *forced);
    toks[0] = last;
    for (uint32_t i = 0; i < k; i++)
        accept_u[i] = drq[0].greedy ? 0 : sampler_uniform(smp);
    for (uint32_t i = 0; i <= k; i++)
        sampler_prepare_ahead(smp, toks + 1, i, i, &vrq[i]);
    uint32_t j = 0;
    int32_t next = -1;
    engine_verify_req vr = {.k = k, .rq = vrq, .accept_u = accept_u, .own_drafts = !forced, .n_accepted = &j,
                            .token = &next};
    if (engine_verify(e, toks, &vr, err) < 0)
        return -1;
    memcpy(out, toks + 1, j * sizeof *out);
    out[j] = next;
    *n_out = j + 1;
    return 0;
}
