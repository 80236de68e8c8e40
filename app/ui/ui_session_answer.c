/* ui_session_answer.c: the session's answers on the decoder: the prompt
 * fitted to the context (what it leaves out told in the chat), the job
 * submitted, and its end; and what every part of the session shares: the
 * changes since the last public call, the sampling settings.
 *
 * Why a file of its own: the chat (ui_session.c), saving
 * (ui_session_files.c) and /replay (ui_session_replay.c) all start answers
 * or report changes, and ui_session.c hands the decoder's events to the
 * other two; with these here every file of the session calls one way. */
#include "ui_session_internal.h"

#include <stdio.h>
#include <string.h>

/* Public calls return what changed since the last one returned. */
unsigned uis_take_changes(ui_session *s)
{
    unsigned ch = s->changed;
    s->changed = 0;
    return ch;
}

void uis_context_reset(ui_session *s)
{
    s->ctx_dropped = s->ctx_dropped_noted = 0;
    s->ctx_prompt = 0;
}

/* What the prompt left out, told in the chat when more goes than before. */
static void note_context(ui_session *s, const chat_fit *fit)
{
    s->ctx_prompt = fit->n_ids;
    s->ctx_dropped = fit->n_dropped_exchanges;
    if (s->ctx_dropped > s->ctx_dropped_noted) {
        sbuf why = {0};
        chat_fit_describe(fit, &why);
        ui_note(s->fe, UI_INFO, "%s (/set context-overflow stop refuses instead; /set ctx N changes the size)",
                sbuf_str(&why));
        sbuf_free(&why);
    }
    s->ctx_dropped_noted = s->ctx_dropped;
}

/* A prompt that does not fit: is the last message (with the system prompt)
 * too large for the context on its own?  Then no policy helps, and it is
 * given back instead of staying unanswered in the conversation (noted). */
static bool last_message_too_large(ui_session *s, chat_session *chat, size_t n_msgs, uint32_t n_ctx,
                                   uint32_t reserve, const chat_fit *fit)
{
    uint32_t least = fit->n_least;
    if (fit->policy != CHAT_CTX_TRIM || !least) {
        chat_fit alone;
        err_t err;
        if (chat_prompt_fit(chat, n_msgs, n_ctx, reserve, CHAT_CTX_TRIM, &alone, &err) != 0)
            return false;
        bool fits = alone.fits;
        least = alone.n_least ? alone.n_least : alone.n_full;
        chat_fit_free(&alone);
        if (fits)
            return false;
    }
    ui_note(s->fe, UI_ERROR,
            "Not sent: your message is too large for the context: with the system prompt it is %u tokens, and "
            "the context holds %u with %u kept for the answer. Shorten it, or make the context larger "
            "(/set ctx N).",
            least, n_ctx, reserve);
    return true;
}

uint64_t uis_answer_seed(const ui_session *s)
{
    return s->cfg.has_seed ? s->cfg.seed : settings_random_seed();
}

int uis_submit(ui_session *s, chat_session *chat, size_t n_msgs, uis_gen kind, uint64_t seed)
{
    err_t err;
    chat_fit fit;
    uint32_t n_ctx = decoder_n_ctx(s->dec);
    uint32_t reserve = chat_answer_reserve(n_ctx, s->cfg.n_predict);
    /* What the last prompt left out stays out: its start, and so the KV
     * cache, stays the same from one answer to the next. */
    size_t kept_out = kind == GEN_CHAT ? s->ctx_dropped : 0;
    if (chat_prompt_fit_from(chat, n_msgs, n_ctx, reserve, s->cfg.ctx_overflow, kept_out, &fit, &err) != 0) {
        ui_note(s->fe, UI_ERROR, "Cannot build the prompt: %s", err.msg);
        return -1;
    }
    if (fit.fits && fit.n_dropped_exchanges > kept_out) {
        /* More must go: a quarter of the room's worth at once, so that the
         * next answers find their whole prompt but the new turn in the
         * cache instead of reading it all again each time. */
        chat_fit more;
        uint32_t slack = (n_ctx - reserve) / 4;
        if (chat_prompt_fit_from(chat, n_msgs, n_ctx, reserve + slack, s->cfg.ctx_overflow, fit.n_dropped_exchanges,
                                 &more, &err) == 0 &&
            more.fits) {
            chat_fit_free(&fit);
            fit = more;
            fit.reserve = reserve; /* what the answer has; the rest is the slack */
        } else {
            chat_fit_free(&more);
        }
    }
    if (!fit.fits) {
        int rc = kind == GEN_CHAT && last_message_too_large(s, chat, n_msgs, n_ctx, reserve, &fit) ? -2 : -1;
        if (rc == -1) {
            sbuf why = {0};
            chat_fit_describe(&fit, &why);
            ui_note(s->fe, UI_ERROR, "Not answered: %s", sbuf_str(&why));
            sbuf_free(&why);
        }
        chat_fit_free(&fit);
        return rc;
    }
    if (kind == GEN_CHAT) {
        note_context(s, &fit);
        s->changed |= UI_CHANGED_STATS; /* the side pane's context */
    }
    dec_job job = {.prompt = fit.ids, .n_prompt = fit.n_ids, .n_predict = s->cfg.n_predict, .stop = s->chat.stop,
                   .n_stop = s->cfg.ignore_eos ? 0 : s->chat.n_stop};
    ui_session_sampling(s, &job.sampling);
    job.sampling.seed = seed;
    int id = decoder_submit(s->dec, &job, &err);
    uint32_t n = fit.n_ids;
    bool opens = fit.opens_think;
    chat_fit_free(&fit);
    if (id < 0) {
        ui_note(s->fe, UI_ERROR, "Cannot answer: %s", err.msg);
        return -1;
    }
    s->job = id;
    s->gen = kind;
    s->gen_seed = seed;
    if (kind == GEN_CHAT)
        s->c.seed = seed; /* the conversation's record: its latest answer's */
    if (s->have_stats) {
        s->stats.decode_tps = 0; /* the last answer's rate is not this one's */
        s->changed |= UI_CHANGED_STATS;
    }
    s->gen_prompt = n;
    s->gen_reused = 0;
    s->gen_prefill_tps = 0;
    chat_stream_init(&s->stream, opens);
    snprintf(s->live_meta, sizeof s->live_meta, "reading %u tokens...", n);
    s->changed |= UI_CHANGED_LIVE | UI_CHANGED_STATE;
    return 0;
}

void uis_end_generation(ui_session *s)
{
    chat_stream_free(&s->stream);
    s->job = 0;
    s->gen = GEN_NONE;
    s->changed |= UI_CHANGED_LIVE | UI_CHANGED_STATE;
}

void ui_session_sampling(const ui_session *s, sampler_params *sp)
{
    settings_to_sampler(&s->cfg, s->chat.tmpl, s->c.m->gguf, s->c.seed, sp);
}
