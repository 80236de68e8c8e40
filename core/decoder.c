/* decoder.c: the decode thread and its event queue. */
#include "decoder.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define STATS_INTERVAL_S 0.05   /* publish statistics at most 20x/s */
#define PROGRESS_INTERVAL_S 0.05
#define TOPK_CANDIDATES 64      /* candidates read back when top-k sampling allows it */

struct decoder {
    /* fixed at start */
    const engine_backend *be;
    const model *m;
    const tokenizer *tok;
    engine_params params;
    uint32_t n_vocab;
    pthread_t thread;
    int efd;

    /* shared, under lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    dec_event *queue;           /* ring of events */
    size_t q_head, q_len, q_cap;
    bool quit, ready, failed;
    bool have_job, running, reset_kv;
    uint32_t job_id, next_id;
    int32_t *job_prompt;        /* the pending job, copied */
    uint32_t job_n_prompt;
    int32_t *job_stop;
    uint32_t job_n_stop;
    int job_n_predict;
    sampler_params job_sampling;
    dec_stats stats;
    char describe[256];
    uint32_t n_ctx;

    atomic_bool cancel;

    /* thread-only */
    engine eng;
    bool eng_open;
    sampler *smp;
    float *logits;              /* [n_vocab] */
    int32_t *kv_tokens;         /* [n_ctx]: what the cache holds */
    uint32_t kv_n;
    char *piece;                /* tok_stream output, TOK_STREAM_CAP bytes */
    size_t piece_cap;
    double last_stats, last_progress;
    engine_stats scratch;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the event queue ---------------------------------------------------------- */

static void post(decoder *d, const dec_event *ev)
{
    pthread_mutex_lock(&d->lock);
    if (d->q_len == d->q_cap) {
        size_t cap = d->q_cap ? d->q_cap * 2 : 256;
        dec_event *q = malloc(cap * sizeof *q);
        if (!q) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        for (size_t i = 0; i < d->q_len; i++)
            q[i] = d->queue[(d->q_head + i) % d->q_cap];
        free(d->queue);
        d->queue = q;
        d->q_cap = cap;
        d->q_head = 0;
    }
    d->queue[(d->q_head + d->q_len++) % d->q_cap] = *ev;
    uint64_t one = 1;
    /* The counter only saturates after 2^64-2 posts; a failed write would
     * only delay the UI until its next wake-up, never lose the event. */
    if (write(d->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        perror("glmchat: decoder eventfd");
    pthread_mutex_unlock(&d->lock);
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (!p) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    return memcpy(p, s, n);
}

static void post_simple(decoder *d, dec_ev_type type, uint32_t job, const char *text)
{
    dec_event ev = {.type = type, .job = job, .text = text ? dupstr(text) : NULL};
    post(d, &ev);
}

bool decoder_next(decoder *d, dec_event *ev)
{
    bool got = false;
    pthread_mutex_lock(&d->lock);
    if (d->q_len > 0) {
        *ev = d->queue[d->q_head];
        d->q_head = (d->q_head + 1) % d->q_cap;
        d->q_len--;
        got = true;
    }
    if (d->q_len == 0) {
        /* Drained under the lock, so a concurrent post re-arms it. */
        uint64_t v;
        if (read(d->efd, &v, sizeof v) < 0 && errno != EAGAIN)
            perror("glmchat: decoder eventfd");
    }
    pthread_mutex_unlock(&d->lock);
    return got;
}

bool decoder_wait(decoder *d, dec_event *ev, int timeout_ms)
{
    double end = now_s() + timeout_ms / 1000.0;
    for (;;) {
        if (decoder_next(d, ev))
            return true;
        int left = timeout_ms < 0 ? -1 : (int)((end - now_s()) * 1000.0);
        if (timeout_ms >= 0 && left <= 0)
            return false;
        struct pollfd pfd = {.fd = d->efd, .events = POLLIN};
        if (poll(&pfd, 1, left) < 0 && errno != EINTR)
            return false;
    }
}

void decoder_event_free(dec_event *ev)
{
    free(ev->text);
    ev->text = NULL;
}

int decoder_fd(const decoder *d)
{
    return d->efd;
}

/* ---- statistics --------------------------------------------------------------------- */

static void publish_stats(decoder *d, bool force, double decode_tps, double prefill_tps)
{
    double t = now_s();
    if (!force && t - d->last_stats < STATS_INTERVAL_S)
        return;
    d->last_stats = t;
    engine_get_stats(&d->eng, &d->scratch);
    pthread_mutex_lock(&d->lock);
    d->stats.engine = d->scratch;
    d->stats.n_past = d->kv_n;
    d->stats.n_ctx = d->n_ctx;
    d->stats.busy = d->running;
    if (decode_tps >= 0)
        d->stats.decode_tps = decode_tps;
    if (prefill_tps >= 0)
        d->stats.prefill_tps = prefill_tps;
    d->stats.seq++;
    pthread_mutex_unlock(&d->lock);
}

void decoder_get_stats(decoder *d, dec_stats *out)
{
    pthread_mutex_lock(&d->lock);
    *out = d->stats;
    out->busy = d->running || d->have_job;
    pthread_mutex_unlock(&d->lock);
}

/* ---- the job -------------------------------------------------------------------------- */

static bool is_stop(const int32_t *stop, uint32_t n, int32_t tok)
{
    for (uint32_t i = 0; i < n; i++)
        if (stop[i] == tok)
            return true;
    return false;
}

/* Full logits unless the settings only ever look at a few candidates. */
static uint32_t candidates_for(const sampler_params *sp)
{
    bool penalties = sp->repeat_penalty != 1.0f || sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f;
    if (penalties)
        return 0;
    if (sp->top_k > 0 && sp->top_k <= TOPK_CANDIDATES)
        return (uint32_t)sp->top_k;
    return 0;
}

typedef struct {
    uint32_t k;
    int32_t ids[TOPK_CANDIDATES];
    float vals[TOPK_CANDIDATES];
    float log_z;
    engine_output out;
} eval_out;

static void eval_out_init(eval_out *o, decoder *d, uint32_t k)
{
    memset(o, 0, sizeof *o);
    o->k = k;
    if (k) {
        o->out.top_k = k;
        o->out.top_ids = o->ids;
        o->out.top_logits = o->vals;
        o->out.log_z = &o->log_z;
    } else {
        o->out.logits = d->logits;
    }
}

static int32_t sample(decoder *d, eval_out *o)
{
    if (o->k)
        return sampler_sample_topk(d->smp, o->ids, o->vals, o->k, o->log_z);
    return sampler_sample(d->smp, d->logits);
}

/* Rewinds the cache to the longest prefix it shares with the prompt. */
static uint32_t reuse_prefix(decoder *d, const int32_t *prompt, uint32_t n)
{
    uint32_t p = 0;
    uint32_t lim = d->kv_n < n ? d->kv_n : n;
    while (p < lim && d->kv_tokens[p] == prompt[p])
        p++;
    /* At least one token must be evaluated to get logits for the next one. */
    if (p == n)
        p = n - 1;
    engine_rewind(&d->eng, p);
    d->kv_n = p;
    return p;
}

static void finish(decoder *d, uint32_t job, dec_stop stop, uint32_t n_gen, double tps, tok_stream *ts)
{
    size_t n = tok_stream_flush(ts, d->piece, d->piece_cap);
    if (n > 0) {
        dec_event t = {.type = DEC_EV_TEXT, .job = job, .text = dupstr(d->piece), .token = -1};
        post(d, &t);
    }
    publish_stats(d, true, tps, -1);
    dec_event ev = {.type = DEC_EV_DONE, .job = job, .stop = stop, .n_gen = n_gen, .decode_tps = tps};
    post(d, &ev);
}

static void fail_job(decoder *d, uint32_t job, const err_t *err)
{
    /* The cache may hold half a chunk: start clean next time. */
    engine_rewind(&d->eng, 0);
    d->kv_n = 0;
    post_simple(d, DEC_EV_ERROR, job, err->msg);
}

static void run_job(decoder *d, uint32_t job, const int32_t *prompt, uint32_t n_prompt, const int32_t *stop,
                    uint32_t n_stop, int n_predict, const sampler_params *sp)
{
    err_t err = {{0}};
    uint32_t reused = reuse_prefix(d, prompt, n_prompt);
    eval_out o;
    eval_out_init(&o, d, candidates_for(sp));
    tok_stream ts;
    tok_stream_init(&ts, d->tok);

    /* Prefill: one engine call; the engine splits it into n_batch chunks and
     * checks the cancel flag between them. */
    double t0 = now_s();
    int rc = engine_eval(&d->eng, prompt + reused, n_prompt - reused, &o.out, &err);
    double prefill_s = now_s() - t0;
    if (rc < 0)
        return fail_job(d, job, &err);
    memcpy(d->kv_tokens + reused, prompt + reused, (d->eng.n_past - reused) * sizeof *prompt);
    d->kv_n = d->eng.n_past;
    if (rc == 1 || atomic_load(&d->cancel))
        return finish(d, job, DEC_STOP_CANCEL, 0, 0, &ts);
    double prefill_tps = prefill_s > 0 ? (n_prompt - reused) / prefill_s : 0;
    dec_event pe = {.type = DEC_EV_PREFILL, .job = job, .n_prompt = n_prompt, .n_reused = reused,
                    .prefill_tps = prefill_tps};
    post(d, &pe);
    publish_stats(d, true, -1, prefill_tps);

    sampler_set_params(d->smp, sp);
    sampler_reset(d->smp);
    for (uint32_t i = 0; i < n_prompt; i++)
        sampler_accept(d->smp, prompt[i]);

    uint32_t n_gen = 0;
    double t1 = now_s(), tps = 0;
    for (;;) {
        int32_t tok = sample(d, &o);
        if (is_stop(stop, n_stop, tok))
            return finish(d, job, DEC_STOP_EOS, n_gen, tps, &ts);
        sampler_accept(d->smp, tok);
        n_gen++;
        size_t n = tok_stream_feed(&ts, tok, d->piece, d->piece_cap);
        d->piece[n < d->piece_cap ? n : d->piece_cap - 1] = 0;
        dec_event te = {.type = DEC_EV_TEXT, .job = job, .text = dupstr(d->piece), .token = tok};
        post(d, &te);
        if (atomic_load(&d->cancel))
            return finish(d, job, DEC_STOP_CANCEL, n_gen, tps, &ts);
        if (n_predict >= 0 && n_gen >= (uint32_t)n_predict)
            return finish(d, job, DEC_STOP_LIMIT, n_gen, tps, &ts);
        if (d->kv_n + 1 > d->n_ctx)
            return finish(d, job, DEC_STOP_CTX, n_gen, tps, &ts);
        rc = engine_eval(&d->eng, &tok, 1, &o.out, &err);
        if (rc < 0)
            return fail_job(d, job, &err);
        if (rc == 1)
            return finish(d, job, DEC_STOP_CANCEL, n_gen, tps, &ts);
        d->kv_tokens[d->kv_n++] = tok;
        double el = now_s() - t1;
        tps = el > 0 ? n_gen / el : 0;
        publish_stats(d, false, tps, -1);
    }
}

/* ---- the thread ------------------------------------------------------------------------ */

static void on_progress(void *user, const char *stage, uint64_t done, uint64_t total)
{
    decoder *d = user;
    double t = now_s();
    if (done < total && t - d->last_progress < PROGRESS_INTERVAL_S)
        return;
    d->last_progress = t;
    dec_event ev = {.type = DEC_EV_PROGRESS, .text = dupstr(stage ? stage : ""), .done = done, .total = total};
    post(d, &ev);
}

static int open_engine(decoder *d, err_t *err)
{
    engine_params p = d->params;
    p.progress = on_progress;
    p.progress_user = d;
    if (engine_open(&d->eng, d->be, d->m, &p, err) != 0)
        return -1;
    d->eng_open = true;
    d->n_ctx = d->eng.params.n_ctx;
    sampler_params sp;
    sampler_params_default(&sp);
    d->smp = sampler_new(&sp, d->n_vocab);
    d->logits = malloc((size_t)d->n_vocab * sizeof *d->logits);
    d->kv_tokens = malloc((size_t)d->n_ctx * sizeof *d->kv_tokens);
    d->piece_cap = TOK_STREAM_CAP(tok_max_piece(d->tok));
    d->piece = malloc(d->piece_cap);
    if (!d->smp || !d->logits || !d->kv_tokens || !d->piece)
        return err_set(err, "out of memory for the decoder's buffers");
    return 0;
}

static void *thread_main(void *arg)
{
    decoder *d = arg;
    err_t err = {{0}};
    if (open_engine(d, &err) != 0) {
        pthread_mutex_lock(&d->lock);
        d->failed = true;
        pthread_mutex_unlock(&d->lock);
        post_simple(d, DEC_EV_ERROR, 0, err.msg);
        return NULL;
    }
    const char *desc = d->be->describe ? d->be->describe(d->eng.impl) : d->be->name;
    pthread_mutex_lock(&d->lock);
    snprintf(d->describe, sizeof d->describe, "%s", desc ? desc : d->be->name);
    d->ready = true;
    pthread_mutex_unlock(&d->lock);
    publish_stats(d, true, 0, 0);
    post_simple(d, DEC_EV_READY, 0, d->describe);

    for (;;) {
        pthread_mutex_lock(&d->lock);
        while (!d->quit && !d->have_job)
            pthread_cond_wait(&d->cond, &d->lock);
        if (d->quit) {
            pthread_mutex_unlock(&d->lock);
            break;
        }
        /* Take the job: the arrays move to this thread. */
        int32_t *prompt = d->job_prompt, *stop = d->job_stop;
        uint32_t n_prompt = d->job_n_prompt, n_stop = d->job_n_stop, job = d->job_id;
        int n_predict = d->job_n_predict;
        sampler_params sp = d->job_sampling;
        bool reset = d->reset_kv;
        d->job_prompt = d->job_stop = NULL;
        d->have_job = false;
        d->reset_kv = false;
        d->running = true;
        pthread_mutex_unlock(&d->lock);

        if (reset)
            d->kv_n = 0;
        run_job(d, job, prompt, n_prompt, stop, n_stop, n_predict, &sp);
        free(prompt);
        free(stop);
        pthread_mutex_lock(&d->lock);
        d->running = false;
        d->stats.busy = false;
        pthread_mutex_unlock(&d->lock);
    }
    return NULL;
}

/* ---- the UI side -------------------------------------------------------------------------- */

decoder *decoder_start(const engine_backend *be, const model *m, const tokenizer *tok,
                       const engine_params *p, err_t *err)
{
    decoder *d = calloc(1, sizeof *d);
    if (!d) {
        err_set(err, "out of memory");
        return NULL;
    }
    d->be = be;
    d->m = m;
    d->tok = tok;
    d->params = *p;
    d->n_vocab = m->cfg.n_vocab;
    d->next_id = 1;
    atomic_init(&d->cancel, false);
    d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (d->efd < 0) {
        err_set(err, "eventfd: %s", strerror(errno));
        free(d);
        return NULL;
    }
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cond, NULL);
    int rc = pthread_create(&d->thread, NULL, thread_main, d);
    if (rc != 0) {
        err_set(err, "cannot start the decode thread: %s", strerror(rc));
        close(d->efd);
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->cond);
        free(d);
        return NULL;
    }
    return d;
}

void decoder_free(decoder *d)
{
    if (!d)
        return;
    decoder_cancel(d);
    pthread_mutex_lock(&d->lock);
    d->quit = true;
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    if (d->eng_open)
        engine_close(&d->eng);
    sampler_free(d->smp);
    free(d->logits);
    free(d->kv_tokens);
    free(d->piece);
    free(d->job_prompt);
    free(d->job_stop);
    for (size_t i = 0; i < d->q_len; i++)
        free(d->queue[(d->q_head + i) % d->q_cap].text);
    free(d->queue);
    close(d->efd);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cond);
    free(d);
}

int decoder_submit(decoder *d, const dec_job *job, err_t *err)
{
    if (job->n_prompt == 0)
        return err_set(err, "empty prompt");
    pthread_mutex_lock(&d->lock);
    int rc = -1;
    if (d->failed)
        err_set(err, "the engine failed to load");
    else if (!d->ready)
        err_set(err, "the model is still loading");
    else if (d->running || d->have_job)
        err_set(err, "busy with another answer");
    else if (job->n_prompt >= d->n_ctx)
        err_set(err, "the conversation is %u tokens, the context holds %u: start a new one (/clear) or raise -c",
                job->n_prompt, d->n_ctx);
    else {
        d->job_prompt = malloc(job->n_prompt * sizeof *job->prompt);
        d->job_stop = malloc((job->n_stop ? job->n_stop : 1) * sizeof *job->stop);
        if (!d->job_prompt || !d->job_stop) {
            free(d->job_prompt);
            free(d->job_stop);
            d->job_prompt = d->job_stop = NULL;
            err_set(err, "out of memory");
        } else {
            memcpy(d->job_prompt, job->prompt, job->n_prompt * sizeof *job->prompt);
            if (job->n_stop)
                memcpy(d->job_stop, job->stop, job->n_stop * sizeof *job->stop);
            d->job_n_prompt = job->n_prompt;
            d->job_n_stop = job->n_stop;
            d->job_n_predict = job->n_predict;
            d->job_sampling = job->sampling;
            d->job_id = d->next_id++;
            /* Cleared here, not on the thread, so a cancel right after
             * submitting is never lost. */
            atomic_store(&d->cancel, false);
            engine_clear_cancel(&d->eng);
            d->have_job = true;
            d->stats.busy = true;
            rc = (int)d->job_id;
            pthread_cond_signal(&d->cond);
        }
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void decoder_cancel(decoder *d)
{
    atomic_store(&d->cancel, true);
    pthread_mutex_lock(&d->lock);
    bool open = d->ready;
    pthread_mutex_unlock(&d->lock);
    if (open)
        engine_request_cancel(&d->eng);
}

bool decoder_busy(decoder *d)
{
    pthread_mutex_lock(&d->lock);
    bool b = d->running || d->have_job;
    pthread_mutex_unlock(&d->lock);
    return b;
}

void decoder_reset_cache(decoder *d)
{
    pthread_mutex_lock(&d->lock);
    d->reset_kv = true;
    pthread_mutex_unlock(&d->lock);
}

const char *decoder_describe(decoder *d)
{
    return d->describe;
}

uint32_t decoder_n_ctx(const decoder *d)
{
    return d->n_ctx;
}
