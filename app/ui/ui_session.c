/* ui_session.c: the chat session: the decode thread's events, answers,
 * the queue, /edit, the system prompt, /clear, settings.  Starting and
 * ending an answer on the decoder is ui_session_answer.c, saving and
 * loading ui_session_files.c, /replay ui_session_replay.c, /model
 * ui_session_model.c.
 *
 * The files call one way (tests/t_layers.sh): ui_session_model.c -> this
 * file -> ui_session_replay.c, ui_session_files.c -> ui_session_answer.c. */
#include "ui_session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool has_system(const conversation *c)
{
    return c->n && !strcmp(c->msgs[0].role, "system");
}

/* ---- life ------------------------------------------------------------------------------ */

ui_session *ui_session_new(const ui_session_config *c, const ui_frontend *fe)
{
    ui_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->c = *c;
    s->c.initial = NULL;
    s->fe = fe;
    s->cfg = c->cfg;
    s->edit_index = -1;
    chat_init(&s->chat, c->tok, c->tmpl, s->cfg.think);
    if (c->initial) {
        conv_free(&s->chat.conv);
        s->chat.conv = *c->initial;
        conv_init(c->initial); /* moved */
    }
    if (c->conversation_file)
        snprintf(s->autosave_path, sizeof s->autosave_path, "%s", c->conversation_file);
    snprintf(s->backend, sizeof s->backend, "%s", c->be->name);
    conv_cleanup_tmp(s->c.conv_dir);
    return s;
}

void ui_session_free(ui_session *s)
{
    if (!s)
        return;
    decoder_free(s->dec);
    if (s->own_model) {
        chat_model_close(s->own_model);
        free(s->own_model);
    }
    chat_free(&s->chat);
    if (s->replay_active)
        chat_free(&s->replay);
    chat_stream_free(&s->stream);
    free(s->queued);
    free(s);
}

/* ---- answers --------------------------------------------------------------------------------- */

/* 0 when the answer started; -1 when it could not (told), -2 as uis_submit. */
static int answer(ui_session *s)
{
    if (!s->ready) {
        ui_status(s->fe, UI_ERROR, "%s",
                  s->load_failed ? "The model is not available (see the error above)"
                                 : "The model is still loading; try again in a moment");
        return -1;
    }
    return uis_submit(s, &s->chat, s->chat.conv.n, GEN_CHAT, uis_answer_seed(s));
}

/* The last message leaves the conversation (and its file) and goes back
 * to the input line, with a message queued after it. */
static void give_back_last(ui_session *s, const char *why)
{
    conversation *c = &s->chat.conv;
    sbuf text = {0};
    sbuf_adds(&text, c->msgs[c->n - 1].content);
    if (s->queued) {
        sbuf_adds(&text, "\n\n");
        sbuf_adds(&text, s->queued);
        free(s->queued);
        s->queued = NULL;
    }
    conv_truncate(c, c->n - 1);
    uis_conversation_changed(s);
    s->fe->restore_input(s->fe->user, sbuf_str(&text), why);
    sbuf_free(&text);
}

static void send_message(ui_session *s, const char *text);

static void send_queued(ui_session *s)
{
    if (!s->queued || s->job || (!s->ready && !s->closing))
        return;
    char *q = s->queued;
    s->queued = NULL;
    send_message(s, q);
    free(q);
}

static void send_message(ui_session *s, const char *text)
{
    if ((s->job || !s->ready) && !s->closing) {
        /* Typed while busy (or loading): sent as soon as possible. */
        if (s->queued) {
            size_t n = strlen(s->queued) + strlen(text) + 3;
            char *q = malloc(n);
            if (q) {
                snprintf(q, n, "%s\n\n%s", s->queued, text);
                free(s->queued);
                s->queued = q;
            }
        } else {
            s->queued = strdup(text);
        }
        ui_status(s->fe, UI_INFO, "Queued: sent when %s", s->job ? "this answer is done" : "the model is loaded");
        return;
    }
    conv_msg *m = conv_add(&s->chat.conv, "user", text, NULL);
    m->time = conv_now();
    uis_conversation_changed(s);
    /* (On the way out the message is kept, not answered.)  One larger than
     * the context comes back: it can never be answered as it is. */
    if (!s->closing && answer(s) == -2)
        give_back_last(s, "Too large for the context");
}

unsigned ui_session_send(ui_session *s, const char *text)
{
    send_message(s, text);
    return uis_take_changes(s);
}

unsigned ui_session_answer(ui_session *s)
{
    if (answer(s) == -2)
        give_back_last(s, "Too large for the context");
    return uis_take_changes(s);
}

unsigned ui_session_retry(ui_session *s)
{
    conversation *c = &s->chat.conv;
    size_t n = c->n;
    if (n && !strcmp(c->msgs[n - 1].role, "assistant"))
        n--;
    if (!n || strcmp(c->msgs[n - 1].role, "user") != 0) {
        ui_status(s->fe, UI_ERROR, "Nothing to retry: there is no message of yours to answer");
        return uis_take_changes(s);
    }
    conv_truncate(c, n);
    uis_conversation_changed(s);
    if (answer(s) == -2)
        give_back_last(s, "Too large for the context");
    return uis_take_changes(s);
}

unsigned ui_session_cancel(ui_session *s)
{
    if (s->job) {
        decoder_cancel(s->dec);
        ui_status(s->fe, UI_INFO, "Stopping...");
    }
    return uis_take_changes(s);
}

/* ---- the decode thread's events --------------------------------------------------------------- */


/* A failed answer keeps what it said before the failure, marked with why
 * (conv_set_error): the user's message keeps its answer, so the file stays
 * a conversation of turns and /retry has an answer to replace. */
static void record_failed(ui_session *s, const char *why)
{
    chat_stream *st = &s->stream;
    chat_stream_finish(st);
    conversation *c = &s->chat.conv;
    if (!c->n || strcmp(c->msgs[c->n - 1].role, "user") != 0)
        return;
    conv_msg *m = conv_add(c, "assistant", sbuf_str(&st->content), st->reasoning.len ? sbuf_str(&st->reasoning) : NULL);
    m->time = conv_now();
    m->prefill_tps = s->gen_prefill_tps;
    conv_set_error(m, why ? why : "unknown error");
    s->changed |= UI_CHANGED_CONVERSATION;
}

static void finish_chat(ui_session *s, const dec_event *ev)
{
    chat_stream *st = &s->stream;
    chat_stream_finish(st);
    conversation *c = &s->chat.conv;
    bool asked = c->n && !strcmp(c->msgs[c->n - 1].role, "user");
    /* The user message's tokens: what this turn had to evaluate. */
    if (asked)
        c->msgs[c->n - 1].n_tokens = s->gen_prompt - s->gen_reused;
    bool empty = st->content.len == 0 && st->reasoning.len == 0;
    /* An answer the model ended or ran out of room for is kept even when it
     * has no text (a stop token first, or tokens that spell nothing), so the
     * turn shows and /retry has an answer to replace; only an answer stopped
     * before it began goes. */
    bool keep_empty = empty && asked && ev->stop != DEC_STOP_CANCEL;
    if (!empty || keep_empty) {
        conv_msg *m = conv_add(c, "assistant", sbuf_str(&st->content), st->reasoning.len ? sbuf_str(&st->reasoning) : NULL);
        m->time = conv_now();
        m->n_tokens = ev->n_gen;
        m->tps = ev->decode_tps;
        m->prefill_tps = s->gen_prefill_tps;
        m->stopped = ev->stop == DEC_STOP_CANCEL;
        conv_set_seed(m, s->gen_seed);
    }
    uis_end_generation(s);
    if (ev->stop == DEC_STOP_CANCEL && empty && asked && !s->closing) {
        /* Stopped before a word of the answer: the message was not really
         * sent; it comes back for the user to send again, change or drop. */
        give_back_last(s, "Stopped before the answer began");
        send_queued(s);
        return;
    }
    uis_conversation_changed(s);
    switch (ev->stop) {
    case DEC_STOP_CANCEL:
        ui_status(s->fe, UI_INFO, "%s", empty ? "Stopped before the answer began" : "Stopped; the partial answer is kept");
        break;
    case DEC_STOP_LIMIT:
        ui_status(s->fe, UI_INFO, "Stopped at n-predict (%u tokens); /set n-predict changes it", ev->n_gen);
        break;
    case DEC_STOP_EOS:
        if (empty)
            ui_status(s->fe, UI_INFO, "The model ended its answer without any text (%u tokens)", ev->n_gen);
        break;
    case DEC_STOP_CTX:
        ui_note(s->fe, UI_ERROR,
                "The context is full (%u tokens): the answer stopped there. /set ctx N makes it larger; %s",
                decoder_n_ctx(s->dec),
                s->cfg.ctx_overflow == CHAT_CTX_TRIM ? "the next message leaves the oldest turns out"
                                                     : "/undo or /clear make room (context-overflow stop)");
        break;
    default:
        break;
    }
    send_queued(s);
}

/* The first backend did not start: the fallback (backend auto), else the end. */
static void on_load_error(ui_session *s, const char *msg)
{
    err_t err;
    if (s->c.fallback) {
        const engine_backend *fb = s->c.fallback;
        s->c.fallback = NULL;
        ui_note(s->fe, UI_INFO, "The %s backend did not start (%s); using the %s backend.", s->c.be->name, msg,
                fb->name);
        decoder_free(s->dec);
        s->c.be = fb;
        s->dec = decoder_start(fb, s->c.m, s->c.tok, &s->c.params, &err);
        if (s->dec)
            return;
        msg = err.msg;
    }
    ui_note(s->fe, UI_ERROR, "The model could not be started: %s", msg);
    s->load_failed = true;
    s->loading = false;
    s->changed |= UI_CHANGED_ENGINE | UI_CHANGED_STATE;
}

/* Takes the decoder's latest statistics when they are new. */
static void take_stats(ui_session *s)
{
    if (!s->dec || !s->ready)
        return;
    dec_stats st;
    decoder_get_stats(s->dec, &st);
    if (st.seq == s->last_seq)
        return;
    s->last_seq = st.seq;
    s->stats = st;
    s->have_stats = true;
    s->changed |= UI_CHANGED_STATS | UI_CHANGED_STATE;
    if (s->job && s->gen == GEN_CHAT && st.busy && st.decode_tps > 0) {
        /* The live header shows the rate so far. */
        snprintf(s->live_meta, sizeof s->live_meta, "%.1f tok/s", st.decode_tps);
        s->changed |= UI_CHANGED_LIVE;
    }
}

static void handle_event(ui_session *s, const dec_event *ev)
{
    switch (ev->type) {
    case DEC_EV_PROGRESS:
        s->loading = true;
        snprintf(s->load_stage, sizeof s->load_stage, "%s", ev->text ? ev->text : "");
        s->load_frac = ev->total ? (double)ev->done / ev->total : 0;
        ui_status(s->fe, UI_INFO, "Loading the model: %s %.0f%%", s->load_stage, 100.0 * s->load_frac);
        s->changed |= UI_CHANGED_ENGINE;
        break;
    case DEC_EV_READY:
        s->ready = true;
        s->loading = false;
        snprintf(s->backend, sizeof s->backend, "%s", ev->text ? ev->text : "");
        s->fe->status(s->fe->user, UI_INFO, "");
        if (s->ctx_announce)
            ui_note(s->fe, UI_INFO, "The context is %u tokens: the largest that fits (at most %u and the model's)",
                    decoder_n_ctx(s->dec), ENGINE_AUTO_CTX_CAP);
        s->ctx_announce = false;
        s->changed |= UI_CHANGED_ENGINE | UI_CHANGED_STATE;
        send_queued(s);
        break;
    case DEC_EV_ERROR:
        if (ev->job == 0) {
            on_load_error(s, ev->text);
            break;
        }
        if (ev->job != (uint32_t)s->job)
            break;
        ui_note(s->fe, UI_ERROR, "The answer failed: %s (/retry tries again)", ev->text);
        if (s->gen == GEN_REPLAY)
            uis_replay_end(s);
        else
            record_failed(s, ev->text);
        uis_end_generation(s);
        uis_autosave(s);
        break;
    case DEC_EV_PREFILL:
        if (ev->job != (uint32_t)s->job)
            break;
        s->gen_reused = ev->n_reused;
        s->gen_prefill_tps = ev->prefill_tps;
        s->prefill_sample = ev->prefill_tps;
        snprintf(s->live_meta, sizeof s->live_meta, "%u new prompt tokens at %.0f tok/s", ev->n_prompt - ev->n_reused,
                 ev->prefill_tps);
        s->changed |= UI_CHANGED_PREFILL | UI_CHANGED_LIVE;
        break;
    case DEC_EV_TEXT:
        if (ev->job != (uint32_t)s->job || !ev->len)
            break;
        chat_stream_feed(&s->stream, ev->text, ev->len);
        if (s->gen == GEN_REPLAY)
            uis_replay_text(s);
        else
            s->changed |= UI_CHANGED_LIVE;
        break;
    case DEC_EV_DONE:
        if (ev->job != (uint32_t)s->job)
            break;
        /* The job's final figures came before its DONE: shown with the
         * answer, not at the next poll or turn. */
        take_stats(s);
        if (s->gen == GEN_REPLAY)
            uis_replay_done(s, ev);
        else
            finish_chat(s, ev);
        break;
    }
}

unsigned ui_session_start(ui_session *s)
{
    err_t err;
    s->dec = decoder_start(s->c.be, s->c.m, s->c.tok, &s->c.params, &err);
    if (!s->dec) {
        ui_note(s->fe, UI_ERROR, "The model could not be started: %s", err.msg);
        s->load_failed = true;
        s->changed |= UI_CHANGED_STATE;
    }
    return uis_take_changes(s);
}

int ui_session_fd(const ui_session *s)
{
    return s->dec ? decoder_fd(s->dec) : -1;
}

unsigned ui_session_pump(ui_session *s)
{
    dec_event ev;
    while (s->dec && decoder_next(s->dec, &ev)) {
        handle_event(s, &ev);
        decoder_event_free(&ev);
    }
    return uis_take_changes(s);
}

bool ui_session_wait(ui_session *s, int timeout_ms, unsigned *changed)
{
    dec_event ev;
    if (!s->dec || !decoder_wait(s->dec, &ev, timeout_ms))
        return false;
    handle_event(s, &ev);
    decoder_event_free(&ev);
    *changed |= uis_take_changes(s);
    return true;
}

unsigned ui_session_poll_stats(ui_session *s)
{
    take_stats(s);
    return uis_take_changes(s);
}

void ui_session_wind_down(ui_session *s)
{
    s->closing = true;
    if (s->job && s->dec) {
        decoder_cancel(s->dec);
        dec_event ev;
        double end = mono_now() + 5.0;
        while (s->job && mono_now() < end && decoder_wait(s->dec, &ev, 200)) {
            handle_event(s, &ev);
            decoder_event_free(&ev);
        }
    }
    decoder_free(s->dec);
    s->dec = NULL;
    if (s->job)
        uis_end_generation(s); /* it did not stop in time: what it said is lost */
    send_queued(s);            /* kept, unanswered: nothing the user wrote is lost */
    /* Every change was saved as it happened; a conversation without a file
     * of its own yet (/load, nothing new since) is in the file it came
     * from, and quitting must not leave a copy of it (issue 28.8). */
    if (s->unsaved || (s->autosave_path[0] && uis_worth_saving(&s->chat.conv)))
        uis_autosave(s);
    s->changed = 0;
}

/* ---- what the screen shows ------------------------------------------------------------------- */

const conversation *ui_session_conv(const ui_session *s)
{
    return &s->chat.conv;
}

bool ui_session_ready(const ui_session *s)
{
    return s->ready;
}

bool ui_session_load_failed(const ui_session *s)
{
    return s->load_failed;
}

bool ui_session_busy(const ui_session *s)
{
    return s->job != 0;
}

bool ui_session_replaying(const ui_session *s, int *turn, int *n_turns)
{
    if (turn)
        *turn = s->replay_turn;
    if (n_turns)
        *n_turns = s->replay_turns;
    return s->replay_active;
}

const char *ui_session_edit_text(const ui_session *s)
{
    if (s->edit_index < 0 || (size_t)s->edit_index >= s->chat.conv.n)
        return NULL;
    return s->chat.conv.msgs[s->edit_index].content;
}

bool ui_session_has_turns(const ui_session *s)
{
    return s->chat.conv.n > (has_system(&s->chat.conv) ? 1u : 0u);
}

const chat_stream *ui_session_live(const ui_session *s, int *job)
{
    bool live = s->job && s->gen == GEN_CHAT;
    if (job)
        *job = live ? s->job : 0;
    return live ? &s->stream : NULL;
}

const char *ui_session_live_meta(const ui_session *s)
{
    return s->live_meta;
}

const dec_stats *ui_session_stats(const ui_session *s)
{
    return s->have_stats ? &s->stats : NULL;
}

double ui_session_prefill_tps(const ui_session *s)
{
    return s->prefill_sample;
}

const char *ui_session_backend(const ui_session *s)
{
    return s->backend;
}

bool ui_session_loading(const ui_session *s, const char **stage, double *frac)
{
    if (stage)
        *stage = s->load_stage;
    if (frac)
        *frac = s->load_frac;
    return s->loading;
}

decoder *ui_session_decoder(ui_session *s)
{
    return s->ready ? s->dec : NULL;
}

const settings *ui_session_settings(const ui_session *s)
{
    return &s->cfg;
}

const tmpl_preset *ui_session_template(const ui_session *s)
{
    return s->chat.tmpl;
}

bool ui_session_thinking(const ui_session *s)
{
    return s->chat.thinking;
}

/* ---- /edit, the system prompt, /clear ----------------------------------------------------------- */

unsigned ui_session_edit(ui_session *s)
{
    long u = conv_last(&s->chat.conv, "user");
    if (u < 0) {
        ui_status(s->fe, UI_ERROR, "Nothing to edit: you have not written anything yet");
        return uis_take_changes(s);
    }
    s->edit_index = u;
    ui_status(s->fe, UI_INFO, "Editing your last message: Enter sends it and regenerates, Esc cancels");
    s->changed |= UI_CHANGED_STATE;
    return uis_take_changes(s);
}

unsigned ui_session_edit_cancel(ui_session *s)
{
    if (s->edit_index >= 0)
        s->changed |= UI_CHANGED_STATE;
    s->edit_index = -1;
    return uis_take_changes(s);
}

bool ui_session_edit_finish(ui_session *s, const char *text, unsigned *changed)
{
    if (s->job) {
        ui_status(s->fe, UI_ERROR, "Wait for the answer to finish (or stop it with Esc), then press Enter");
        *changed |= uis_take_changes(s);
        return false;
    }
    if (s->edit_index >= 0 && (size_t)s->edit_index < s->chat.conv.n) {
        conv_truncate(&s->chat.conv, (size_t)s->edit_index);
        uis_conversation_changed(s);
    }
    s->edit_index = -1;
    s->changed |= UI_CHANGED_STATE;
    send_message(s, text);
    *changed |= uis_take_changes(s);
    return true;
}

unsigned ui_session_set_system(ui_session *s, const char *text)
{
    conversation *c = &s->chat.conv;
    bool had = has_system(c);
    conv_set_system(c, text ? text : "");
    bool has = has_system(c);
    /* The system prompt comes and goes at index 0: the message being
     * edited moves with the rest (issue 17: it used to point at the answer
     * before it, which the edit then deleted). */
    if (s->edit_index >= 0) {
        s->edit_index += (long)has - (long)had;
        if (s->edit_index < 0)
            s->edit_index = -1;
    }
    uis_conversation_changed(s);
    return uis_take_changes(s);
}

unsigned ui_session_clear(ui_session *s)
{
    conversation *c = &s->chat.conv;
    if (s->unsaved && ui_session_has_turns(s))
        uis_autosave(s);
    /* The system prompt is a setting of the chat: it stays. */
    conv_truncate(c, has_system(c) ? 1 : 0);
    c->created = conv_now();
    /* The next turn starts a new file (also after -C FILE: the old
     * conversation stays in its file). */
    s->autosave_path[0] = 0;
    s->loaded_from[0] = 0;
    s->autosave_ours = false;
    s->edit_index = -1;
    uis_context_reset(s);
    s->fe->new_conversation(s->fe->user);
    uis_conversation_changed(s);
    s->changed |= UI_CHANGED_STATE | UI_CHANGED_STATS;
    return uis_take_changes(s);
}

unsigned ui_session_undo(ui_session *s)
{
    conversation *c = &s->chat.conv;
    long u = conv_last(c, "user");
    if (u < 0) {
        ui_status(s->fe, UI_ERROR, "Nothing to undo: there is no message of yours left");
        return uis_take_changes(s);
    }
    size_t removed = c->n - (size_t)u;
    conv_truncate(c, (size_t)u);
    s->edit_index = -1;
    /* Shorter now: the next prompt leaves out only what it must. */
    uis_context_reset(s);
    uis_conversation_changed(s);
    ui_status(s->fe, UI_INFO, "Removed your last exchange (%zu message%s); /undo again removes the one before", removed,
              removed == 1 ? "" : "s");
    s->changed |= UI_CHANGED_STATE;
    return uis_take_changes(s);
}

/* ---- settings ---------------------------------------------------------------------------------- */

int ui_session_set(ui_session *s, const char *key, const char *value, err_t *err)
{
    if (!settings_is_sampling_key(key) && strcmp(key, "context-overflow") != 0)
        return err_set(err, "'%s' is not a setting (temp, top-k, top-p, min-p, repeat-penalty, presence-penalty, "
                       "frequency-penalty, seed, n-predict, context-overflow)",
                       key);
    settings trial = s->cfg;
    if (settings_set(&trial, key, value, err) != 0)
        return -1;
    s->cfg = trial;
    return 0;
}

/* The smallest context whose room for the prompt (what answer_reserve
 * leaves) holds `prompt` tokens; the room grows with the context. */
static uint32_t ctx_for_prompt(uint32_t prompt, int n_predict)
{
    uint32_t lo = 16, hi = 1u << 24;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (mid - chat_answer_reserve(mid, n_predict) >= prompt)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Whether a context of n_ctx tokens holds the next answer to the
 * conversation: the shortest prompt context-overflow allows (under stop all
 * of it; under trim the system prompt and the last exchange -- or the
 * system prompt alone when the last message is answered, as the next one
 * starts an exchange of its own) with room for the answer.  When not, one
 * line says what it needs. */
static bool ctx_holds_conversation(ui_session *s, uint32_t n_ctx)
{
    const conversation *c = &s->chat.conv;
    if (c->n == 0)
        return true;
    bool answered = !strcmp(c->msgs[c->n - 1].role, "assistant");
    bool trim = s->cfg.ctx_overflow == CHAT_CTX_TRIM;
    size_t n_msgs = trim && answered ? (has_system(c) ? 1 : 0) : c->n;
    uint32_t reserve = chat_answer_reserve(n_ctx, s->cfg.n_predict);
    chat_fit fit;
    err_t err;
    if (chat_prompt_fit(&s->chat, n_msgs, n_ctx, reserve, s->cfg.ctx_overflow, &fit, &err) != 0) {
        ui_note(s->fe, UI_ERROR, "/set ctx %u: %s", n_ctx, err.msg);
        return false;
    }
    bool fits = fit.fits;
    uint32_t least = trim && fit.n_least ? fit.n_least : fit.n_full;
    chat_fit_free(&fit);
    if (fits)
        return true;
    const char *what = !trim ? "the whole conversation, as context-overflow is stop"
                       : answered ? "the system prompt"
                                  : "the system prompt and the last exchange";
    ui_note(s->fe, UI_ERROR,
            "/set ctx %u: too small for this conversation: it needs at least %u tokens (a prompt of %u: %s; "
            "and room for the answer); the context stays as it is",
            n_ctx, ctx_for_prompt(least, s->cfg.n_predict), least, what);
    return false;
}

unsigned ui_session_set_ctx(ui_session *s, uint32_t n_ctx)
{
    if (s->job) {
        ui_status(s->fe, UI_ERROR, "/set ctx: wait for the answer to finish, or stop it with Esc");
        return uis_take_changes(s);
    }
    /* 0 means what -c 0 means: the engine's choice, the largest context
     * that fits (engine.h).  s->c.params.n_ctx is what the running engine
     * was asked for. */
    bool running = s->dec && s->ready;
    if (running && (n_ctx ? decoder_n_ctx(s->dec) == n_ctx : s->c.params.n_ctx == 0)) {
        ui_status(s->fe, UI_INFO, "The context is %u tokens already%s", decoder_n_ctx(s->dec),
                  n_ctx ? "" : " (the largest that fits)");
        return uis_take_changes(s);
    }
    if (n_ctx && !ctx_holds_conversation(s, n_ctx))
        return uis_take_changes(s);
    s->cfg.n_ctx = n_ctx;
    /* The KV cache is made for one size: the engine starts again with the new one. */
    s->c.params.n_ctx = n_ctx;
    s->ctx_announce = n_ctx == 0;
    decoder_free(s->dec);
    s->dec = NULL;
    s->ready = false;
    s->load_failed = false;
    s->have_stats = false;
    s->last_seq = 0;
    uis_context_reset(s);
    if (n_ctx)
        ui_note(s->fe, UI_INFO, "Starting the model again with a context of %u tokens...", n_ctx);
    else
        ui_note(s->fe, UI_INFO, "Starting the model again with the largest context that fits...");
    err_t err;
    s->dec = decoder_start(s->c.be, s->c.m, s->c.tok, &s->c.params, &err);
    if (!s->dec) {
        ui_note(s->fe, UI_ERROR, "The model could not be started: %s", err.msg);
        s->load_failed = true;
    }
    s->changed |= UI_CHANGED_ENGINE | UI_CHANGED_STATE | UI_CHANGED_STATS | UI_CHANGED_SETTINGS;
    return uis_take_changes(s);
}

uint32_t ui_session_n_ctx(const ui_session *s, size_t *dropped, uint32_t *prompt)
{
    if (dropped)
        *dropped = s->ctx_dropped;
    if (prompt)
        *prompt = s->ctx_prompt;
    return s->dec && s->ready ? decoder_n_ctx(s->dec) : 0;
}

unsigned ui_session_set_template(ui_session *s, const tmpl_preset *tmpl)
{
    chat_set_template(&s->chat, tmpl);
    return UI_CHANGED_SETTINGS | uis_take_changes(s);
}

unsigned ui_session_set_thinking(ui_session *s, bool on)
{
    s->chat.thinking = on;
    return UI_CHANGED_SETTINGS | uis_take_changes(s);
}
