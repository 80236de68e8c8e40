/* ui_app.c: the interactive chat: events in, frames out.
 *
 * One thread runs the screen: it poll()s the terminal, the signal pipe and
 * the decoder's event fd, so typing, scrolling and resizing stay live while
 * the decode thread generates.  Frames are composed into curses windows and
 * flushed once (wnoutrefresh per window, one doupdate). */
#include "ui_app.h"

#include <errno.h>
#include <poll.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat_commands.h"
#include "chat_setup.h"
#include "ui_frame.h"
#include "ui_keys.h"
#include "text_safe.h"
#include "ui_input.h"
#include "ui_term.h"
#include "ui_text.h"

#define FRAME_S 0.025          /* at most 40 frames a second */
#define STATS_S 0.1            /* side pane refresh: at most 10 a second */
#define STATUS_S 4.0           /* transient status messages */
#define DOUBLE_KEY_S 2.0       /* Ctrl-C twice */

double ui_app_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- notes and the status line ------------------------------------------------------ */

void ui_app_note(ui_app *a, theme_el el, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ui_chatview_note(&a->view, el, buf);
    a->dirty = true;
}

void ui_app_status(ui_app *a, theme_el el, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->status, sizeof a->status, fmt, ap);
    va_end(ap);
    a->status_el = el;
    a->status_until = ui_app_now() + STATUS_S;
    a->dirty = true;
}

bool ui_app_busy(const ui_app *a)
{
    return a->job != 0;
}

void ui_app_sampling(const ui_app *a, sampler_params *sp)
{
    settings_to_sampler(&a->cfg, a->chat.tmpl, a->c.seed, sp);
}

/* ---- saving --------------------------------------------------------------------------- */

void ui_app_fill_metadata(ui_app *a, conversation *c)
{
    conv_set_str(&c->model_path, a->c.demo_note ? "(built-in demo model)" : a->c.model_path);
    conv_set_str(&c->model_name, a->c.model_name);
    conv_set_str(&c->model_fingerprint, a->c.fingerprint[0] ? a->c.fingerprint : NULL);
    c->model_size = a->c.model_size;
    conv_set_str(&c->tmpl, tmpl_name(a->chat.tmpl));
    c->thinking = a->chat.thinking;
    sampler_params sp;
    ui_app_sampling(a, &sp);
    c->sampling = (conv_sampling){true, sp.temp, sp.top_p, sp.min_p, sp.top_k, sp.seed, a->cfg.n_predict};
}

static bool worth_saving(const conversation *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->msgs[i].role, "system") != 0)
            return true;
    return false;
}

bool ui_app_autosave(ui_app *a)
{
    if (!worth_saving(&a->chat.conv)) {
        a->unsaved = false;
        return true;
    }
    ui_app_fill_metadata(a, &a->chat.conv);
    err_t err;
    /* A new file is created exclusively: two UIs started in one second get two files. */
    int rc = a->autosave_path[0] ? conv_save(&a->chat.conv, a->autosave_path, &err)
                                 : conv_save_new(&a->chat.conv, a->c.conv_dir, a->autosave_path,
                                                 sizeof a->autosave_path, &err);
    if (rc != 0) {
        a->unsaved = true;
        ui_app_note(a, TH_ERROR, "Autosave failed: %s", err.msg);
        return false;
    }
    a->unsaved = false;
    return true;
}

void ui_app_conversation_changed(ui_app *a)
{
    ui_chatview_messages_changed(&a->view);
    a->dirty = true;
    ui_app_autosave(a);
}

/* ---- answers ---------------------------------------------------------------------------- */

static int submit(ui_app *a, chat_session *s, size_t n_msgs, ui_gen_kind kind)
{
    err_t err;
    int32_t *ids = NULL;
    uint32_t n = 0;
    bool opens = false;
    if (chat_prompt(s, n_msgs, &ids, &n, &opens, &err) != 0) {
        ui_app_note(a, TH_ERROR, "Cannot build the prompt: %s", err.msg);
        return -1;
    }
    dec_job job = {.prompt = ids, .n_prompt = n, .n_predict = a->cfg.n_predict, .stop = a->chat.stop,
                   .n_stop = a->cfg.ignore_eos ? 0 : a->chat.n_stop};
    ui_app_sampling(a, &job.sampling);
    int id = decoder_submit(a->dec, &job, &err);
    free(ids);
    if (id < 0) {
        ui_app_note(a, TH_ERROR, "Cannot answer: %s", err.msg);
        return -1;
    }
    a->job = id;
    a->gen = kind;
    a->pane.st.decode_tps = 0; /* the last answer's rate is not this one's */
    a->gen_prompt = n;
    a->gen_reused = 0;
    a->gen_prefill_tps = 0;
    chat_stream_init(&a->stream, opens);
    snprintf(a->live_meta, sizeof a->live_meta, "reading %u tokens...", n);
    a->dirty = true;
    return 0;
}

void ui_app_answer(ui_app *a)
{
    if (!a->ready) {
        ui_app_status(a, TH_ERROR, a->load_failed ? "The model is not available (see the error above)"
                                                  : "The model is still loading; try again in a moment");
        return;
    }
    if (submit(a, &a->chat, a->chat.conv.n, GEN_CHAT) == 0)
        ui_chatview_set_live(&a->view, &a->stream, a->live_meta);
}

void ui_app_send_message(ui_app *a, const char *text)
{
    if (a->job || !a->ready) {
        /* Typed while busy (or loading): sent as soon as possible. */
        if (a->queued) {
            size_t n = strlen(a->queued) + strlen(text) + 3;
            char *q = malloc(n);
            if (q) {
                snprintf(q, n, "%s\n\n%s", a->queued, text);
                free(a->queued);
                a->queued = q;
            }
        } else {
            a->queued = strdup(text);
        }
        ui_app_status(a, TH_STATUS_MSG, "Queued: sent when %s", a->job ? "this answer is done" : "the model is loaded");
        return;
    }
    conv_msg *m = conv_add(&a->chat.conv, "user", text, NULL);
    m->time = conv_now();
    ui_app_conversation_changed(a);
    ui_app_answer(a);
}

static void send_queued(ui_app *a)
{
    if (!a->queued || a->job || !a->ready)
        return;
    char *q = a->queued;
    a->queued = NULL;
    ui_app_send_message(a, q);
    free(q);
}

static void end_generation(ui_app *a)
{
    chat_stream_free(&a->stream);
    ui_chatview_set_live(&a->view, NULL, NULL);
    a->job = 0;
    a->gen = GEN_NONE;
    a->dirty = true;
}

static void replay_step(ui_app *a);

static void finish_chat(ui_app *a, const dec_event *ev)
{
    chat_stream *st = &a->stream;
    chat_stream_finish(st);
    conversation *c = &a->chat.conv;
    /* The user message's tokens: what this turn had to evaluate. */
    if (c->n && !strcmp(c->msgs[c->n - 1].role, "user"))
        c->msgs[c->n - 1].n_tokens = a->gen_prompt - a->gen_reused;
    bool empty = st->content.len == 0 && st->reasoning.len == 0;
    if (!empty) {
        conv_msg *m = conv_add(c, "assistant", sbuf_str(&st->content), st->reasoning.len ? sbuf_str(&st->reasoning) : NULL);
        m->time = conv_now();
        m->n_tokens = ev->n_gen;
        m->tps = ev->decode_tps;
        m->prefill_tps = a->gen_prefill_tps;
        m->stopped = ev->stop == DEC_STOP_CANCEL;
    }
    end_generation(a);
    ui_app_conversation_changed(a);
    switch (ev->stop) {
    case DEC_STOP_CANCEL:
        ui_app_status(a, TH_STATUS_MSG, empty ? "Stopped before the answer began" : "Stopped; the partial answer is kept");
        break;
    case DEC_STOP_LIMIT:
        ui_app_status(a, TH_STATUS_MSG, "Stopped at n-predict (%u tokens); /set n-predict changes it", ev->n_gen);
        break;
    case DEC_STOP_CTX:
        ui_app_note(a, TH_ERROR, "The context is full (%u tokens). /clear starts a new conversation; -c sets a larger context.",
                    decoder_n_ctx(a->dec));
        break;
    default:
        break;
    }
    send_queued(a);
}

static void finish_replay(ui_app *a, const dec_event *ev)
{
    chat_stream_finish(&a->stream);
    ui_replay_turn *r = a->replay_cur;
    sbuf_clear(&r->new_answer);
    sbuf_adds(&r->new_answer, sbuf_str(&a->stream.content));
    r->new_tps = ev->decode_tps;
    r->done = true;
    r->stopped = ev->stop == DEC_STOP_CANCEL;
    a->replay_new_sum += ev->decode_tps;
    a->replay_old_sum += r->old_tps;
    ui_chatview_replay_changed(&a->view);
    end_generation(a);
    if (ev->stop == DEC_STOP_CANCEL) {
        ui_app_note(a, TH_NOTICE, "Replay stopped after %d of %d turns.", a->replay_turn, a->replay_turns);
        chat_free(&a->replay);
        a->replay_active = false;
        return;
    }
    replay_step(a);
}

static void on_load_error(ui_app *a, const char *msg)
{
    if (a->c.fallback) {
        const engine_backend *fb = a->c.fallback;
        a->c.fallback = NULL;
        ui_app_note(a, TH_NOTICE, "The %s backend did not start (%s); using the %s backend.", a->c.be->name, msg,
                    fb->name);
        decoder_free(a->dec);
        err_t err;
        a->c.be = fb;
        a->dec = decoder_start(fb, a->c.m, a->c.tok, &a->c.params, &err);
        if (a->dec)
            return;
        msg = err.msg;
        ui_app_note(a, TH_ERROR, "The model could not be started: %s", msg);
    } else {
        ui_app_note(a, TH_ERROR, "The model could not be started: %s", msg);
    }
    a->load_failed = true;
    ui_sidepane_set_loading(&a->pane, false, NULL, 0);
}

static void handle_event(ui_app *a, dec_event *ev)
{
    switch (ev->type) {
    case DEC_EV_PROGRESS:
        ui_sidepane_set_loading(&a->pane, true, ev->text, ev->total ? (double)ev->done / ev->total : 0);
        ui_app_status(a, TH_STATUS_MSG, "Loading the model: %s %.0f%%", ev->text,
                      ev->total ? 100.0 * ev->done / ev->total : 0.0);
        break;
    case DEC_EV_READY:
        a->ready = true;
        ui_sidepane_set_loading(&a->pane, false, NULL, 0);
        ui_sidepane_set_backend(&a->pane, ev->text);
        a->status_until = 0;
        send_queued(a);
        break;
    case DEC_EV_ERROR:
        if (ev->job == 0) {
            on_load_error(a, ev->text);
            break;
        }
        if (ev->job != (uint32_t)a->job)
            break;
        ui_app_note(a, TH_ERROR, "The answer failed: %s", ev->text);
        if (a->gen == GEN_REPLAY) {
            chat_free(&a->replay);
            a->replay_active = false;
        }
        end_generation(a);
        ui_app_autosave(a);
        break;
    case DEC_EV_PREFILL:
        if (ev->job != (uint32_t)a->job)
            break;
        a->gen_reused = ev->n_reused;
        a->gen_prefill_tps = ev->prefill_tps;
        ui_sidepane_add_prefill(&a->pane, ev->prefill_tps);
        snprintf(a->live_meta, sizeof a->live_meta, "%u new prompt tokens at %.0f tok/s", ev->n_prompt - ev->n_reused,
                 ev->prefill_tps);
        ui_chatview_live_changed(&a->view);
        break;
    case DEC_EV_TEXT:
        if (ev->job != (uint32_t)a->job || !ev->len)
            break;
        chat_stream_feed(&a->stream, ev->text, ev->len);
        if (a->gen == GEN_REPLAY) {
            sbuf_clear(&a->replay_cur->new_answer);
            sbuf_adds(&a->replay_cur->new_answer, sbuf_str(&a->stream.content));
            ui_chatview_replay_changed(&a->view);
        } else {
            ui_chatview_live_changed(&a->view);
        }
        a->dirty = true;
        break;
    case DEC_EV_DONE:
        if (ev->job != (uint32_t)a->job)
            break;
        if (a->gen == GEN_REPLAY)
            finish_replay(a, ev);
        else
            finish_chat(a, ev);
        break;
    }
    a->dirty = true;
}

void ui_app_cancel_answer(ui_app *a)
{
    if (!a->job)
        return;
    decoder_cancel(a->dec);
    ui_app_status(a, TH_STATUS_MSG, "Stopping...");
}

/* ---- replay ------------------------------------------------------------------------------ */

static int count_user_turns(const conversation *c)
{
    int n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += !strcmp(c->msgs[i].role, "user");
    return n;
}

void ui_app_start_replay(ui_app *a, conversation *loaded, const char *name)
{
    int turns = count_user_turns(loaded);
    if (turns == 0) {
        ui_app_note(a, TH_ERROR, "/replay: %s has no user messages to replay", name);
        conv_free(loaded);
        return;
    }
    if (!a->ready) {
        ui_app_note(a, TH_ERROR, "/replay: the model is not loaded");
        conv_free(loaded);
        return;
    }
    if (a->replay_active)
        chat_free(&a->replay);
    chat_init(&a->replay, a->c.tok, a->chat.tmpl, a->chat.thinking);
    conv_free(&a->replay.conv);
    a->replay.conv = *loaded;
    a->replay_active = true;
    a->replay_next = 0;
    a->replay_turn = 0;
    a->replay_turns = turns;
    a->replay_old_sum = a->replay_new_sum = 0;
    ui_app_note(a, TH_NOTICE, "Replaying the %d question%s of %s with the current model and settings (Esc stops).",
                turns, turns == 1 ? "" : "s", name);
    replay_step(a);
}

static void replay_step(ui_app *a)
{
    const conversation *c = &a->replay.conv;
    size_t u = a->replay_next;
    while (u < c->n && strcmp(c->msgs[u].role, "user") != 0)
        u++;
    if (u >= c->n) {
        int t = a->replay_turn;
        ui_app_note(a, TH_NOTICE, "Replay done: %d turn%s; new %.1f tok/s on average, recorded %.1f.", t,
                    t == 1 ? "" : "s", t ? a->replay_new_sum / t : 0.0, t ? a->replay_old_sum / t : 0.0);
        chat_free(&a->replay);
        a->replay_active = false;
        return;
    }
    const conv_msg *old = u + 1 < c->n && !strcmp(c->msgs[u + 1].role, "assistant") ? &c->msgs[u + 1] : NULL;
    a->replay_turn++;
    a->replay_next = u + 1;
    a->replay_cur = ui_chatview_replay(&a->view, a->replay_turn, a->replay_turns, c->msgs[u].content,
                                       old ? old->content : "(no recorded answer)", old ? old->tps : 0);
    if (submit(a, &a->replay, u + 1, GEN_REPLAY) != 0) {
        a->replay_cur->done = true;
        chat_free(&a->replay);
        a->replay_active = false;
    }
}

/* ---- themes and quitting ------------------------------------------------------------------- */

void ui_app_apply_theme(ui_app *a, const theme *t)
{
    a->th = *t;
    theme_apply(&a->th);
    clearok(curscr, TRUE);
    a->dirty = true;
}

void ui_app_request_quit(ui_app *a)
{
    double now = ui_app_now();
    if (a->unsaved && now - a->quit_at > DOUBLE_KEY_S * 2) {
        a->quit_at = now;
        ui_app_status(a, TH_ERROR, "The conversation is NOT saved (see above): /save FILE, or quit again to leave");
        return;
    }
    a->quit = true;
}

/* ---- the loop ------------------------------------------------------------------------------------- */

static void poll_stats(ui_app *a, double now)
{
    if (!a->dec || !a->ready || now - a->last_stats < STATS_S)
        return;
    a->last_stats = now;
    dec_stats st;
    decoder_get_stats(a->dec, &st);
    if (st.seq == a->last_seq)
        return;
    a->last_seq = st.seq;
    ui_sidepane_update(&a->pane, &st, a->job != 0 && st.decode_tps > 0);
    a->dirty = true;
}

static void handle_signal(ui_app *a, int sig)
{
    switch (sig) {
    case SIGWINCH:
        ui_term_resize();
        memset(&a->lay, 0, sizeof a->lay);
        a->dirty = true;
        break;
    case SIGINT:
        ui_keys_ctrl_c(a);
        break;
    case SIGCONT:
        clearok(curscr, TRUE);
        a->dirty = true;
        break;
    default: /* SIGTERM, SIGHUP: leave cleanly, saving */
        a->quit = true;
        a->exit_code = 128 + sig;
        break;
    }
}

static int loop_timeout(ui_app *a, double now)
{
    double t = 1.0;
    if (a->dirty)
        t = a->last_draw + FRAME_S - now;
    if ((a->job || !a->ready) && t > STATS_S)
        t = STATS_S;
    if (a->status_until > now && a->status_until - now < t)
        t = a->status_until - now + 0.01;
    return t <= 0 ? 0 : (int)(t * 1000) + 1;
}

static void run_loop(ui_app *a)
{
    while (!a->quit) {
        double now = ui_app_now();
        struct pollfd fds[3] = {{STDIN_FILENO, POLLIN, 0}, {ui_term_signal_fd(), POLLIN, 0},
                                {a->dec ? decoder_fd(a->dec) : -1, POLLIN, 0}};
        int n = poll(fds, 3, loop_timeout(a, now));
        if (n < 0 && errno != EINTR)
            break;
        int sig;
        while ((sig = ui_term_next_signal()) != 0)
            handle_signal(a, sig);
        if (fds[0].revents & (POLLHUP | POLLERR)) {
            a->quit = true; /* the terminal went away */
            a->exit_code = 129;
        }
        wint_t ch;
        int r;
        while (a->w_input && !a->quit && (r = wget_wch(a->w_input, &ch)) != ERR)
            ui_keys_handle(a, r, ch);
        dec_event ev;
        while (a->dec && decoder_next(a->dec, &ev)) {
            handle_event(a, &ev);
            decoder_event_free(&ev);
        }
        now = ui_app_now();
        poll_stats(a, now);
        if (ui_input_changed())
            a->dirty = true;
        if (a->status_until > 0 && now >= a->status_until) {
            a->status_until = 0;
            a->dirty = true;
        }
        if (a->dirty && now - a->last_draw >= FRAME_S)
            ui_frame_draw(a);
    }
}

/* On the way out: stop the answer (keeping what it said), then save. */
static void wind_down(ui_app *a)
{
    if (a->job && a->dec) {
        decoder_cancel(a->dec);
        dec_event ev;
        double end = ui_app_now() + 5.0;
        while (a->job && ui_app_now() < end && decoder_wait(a->dec, &ev, 200)) {
            handle_event(a, &ev);
            decoder_event_free(&ev);
        }
    }
    if (a->unsaved || worth_saving(&a->chat.conv))
        ui_app_autosave(a);
}

static void start(ui_app *a)
{
    ui_chatview_init(&a->view, &a->chat.conv);
    ui_sidepane_init(&a->pane);
    ui_sidepane_set_model(&a->pane, a->c.model_lines, a->c.n_model_lines);
    ui_sidepane_set_backend(&a->pane, a->c.be->name);
    if (a->c.demo_note)
        ui_app_note(a, TH_NOTICE, "%s", a->c.demo_note);
    if (a->c.conversation_file && a->chat.conv.n)
        ui_app_note(a, TH_NOTICE, "Continuing %s (%zu messages); new turns are saved into it.", a->autosave_path,
                    a->chat.conv.n);
    ui_app_note(a, TH_NOTICE, "Type a message and press Enter. F1 or /help lists the commands.");
    err_t err;
    a->dec = decoder_start(a->c.be, a->c.m, a->c.tok, &a->c.params, &err);
    if (!a->dec) {
        ui_app_note(a, TH_ERROR, "The model could not be started: %s", err.msg);
        a->load_failed = true;
    }
}

int ui_app_run(const ui_app_config *config)
{
    ui_app *a = calloc(1, sizeof *a);
    if (!a) {
        fputs("glmchat: out of memory\n", stderr);
        return 1;
    }
    a->c = *config;
    a->cfg = config->cfg;
    a->edit_index = -1;
    a->want_pane = a->cfg.side_pane == SETTINGS_PANE_AUTO ? -1 : a->cfg.side_pane == SETTINGS_PANE_ON;
    chat_init(&a->chat, config->tok, config->tmpl, a->cfg.think);
    if (config->initial) {
        conv_free(&a->chat.conv);
        a->chat.conv = *config->initial;
        conv_init(config->initial);
    }
    if (config->conversation_file)
        snprintf(a->autosave_path, sizeof a->autosave_path, "%s", config->conversation_file);
    conv_cleanup_tmp(a->c.conv_dir);
    err_t err;
    /* Readline first: its set-up calls tgetent(), which would replace the
     * terminal description curses works with (both use libtinfo). */
    ui_input_init(config->history_path, ui_keys_on_line, ui_keys_on_matches, a);
    rl_attempted_completion_function = chatcmd_complete;
    if (ui_term_start(a->cfg.mouse, &err) != 0) {
        chat_error("%s", err.msg);
        ui_input_shutdown();
        chat_free(&a->chat);
        free(a);
        return 1;
    }
    ui_app_apply_theme(a, &config->th);
    start(a);
    ui_frame_draw(a);
    run_loop(a);
    wind_down(a);
    decoder_free(a->dec);
    ui_input_shutdown();
    ui_term_restore();
    int code = a->exit_code;
    if (a->autosave_path[0] && !a->unsaved && worth_saving(&a->chat.conv))
        printf("glmchat: conversation saved in %s\n", a->autosave_path);
    else if (a->unsaved) {
        chat_error("the conversation could not be saved");
        code = code ? code : 1;
    }
    ui_chatview_free(&a->view);
    chat_free(&a->chat);
    if (a->replay_active)
        chat_free(&a->replay);
    chat_stream_free(&a->stream);
    sbuf_free(&a->paste);
    free(a->queued);
    free(a);
    return code;
}
