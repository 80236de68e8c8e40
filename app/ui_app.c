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
#include "text_safe.h"
#include "ui_input.h"
#include "ui_term.h"
#include "ui_text.h"

#define FRAME_S 0.025          /* at most 40 frames a second */
#define STATS_S 0.1            /* side pane refresh: at most 10 a second */
#define STATUS_S 4.0           /* transient status messages */
#define DOUBLE_KEY_S 2.0       /* Ctrl-C twice */

static double mono_now(void)
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
    a->status_until = mono_now() + STATUS_S;
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

static void new_autosave_path(ui_app *a)
{
    time_t t = time(NULL);
    struct tm tm;
    char stamp[32] = "conversation";
    if (localtime_r(&t, &tm))
        strftime(stamp, sizeof stamp, "%Y-%m-%d_%H%M%S", &tm);
    for (int i = 1; i < 1000; i++) {
        int n = i == 1 ? snprintf(a->autosave_path, sizeof a->autosave_path, "%s/%s.json", a->c.conv_dir, stamp)
                       : snprintf(a->autosave_path, sizeof a->autosave_path, "%s/%s-%d.json", a->c.conv_dir, stamp, i);
        struct stat st;
        if (n > 0 && (size_t)n < sizeof a->autosave_path && stat(a->autosave_path, &st) != 0)
            return;
    }
}

bool ui_app_autosave(ui_app *a)
{
    if (!worth_saving(&a->chat.conv)) {
        a->unsaved = false;
        return true;
    }
    if (!a->autosave_path[0])
        new_autosave_path(a);
    ui_app_fill_metadata(a, &a->chat.conv);
    err_t err;
    if (conv_save(&a->chat.conv, a->autosave_path, &err) != 0) {
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

static void send_message(ui_app *a, const char *text)
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
    send_message(a, q);
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
    double now = mono_now();
    if (a->unsaved && now - a->quit_at > DOUBLE_KEY_S * 2) {
        a->quit_at = now;
        ui_app_status(a, TH_ERROR, "The conversation is NOT saved (see above): /save FILE, or quit again to leave");
        return;
    }
    a->quit = true;
}

/* ---- input ------------------------------------------------------------------------------------ */

static void on_line(void *user, char *line)
{
    ui_app *a = user;
    if (!line) {
        ui_app_request_quit(a);
        return;
    }
    const char *text = line;
    size_t len = strlen(text);
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
        line[--len] = 0;
    if (a->edit_index >= 0 && text[0] != '/' ) {
        if (!text[0]) {
            a->edit_index = -1;
            ui_app_status(a, TH_STATUS_MSG, "Edit cancelled");
        } else if (!a->job) {
            conv_truncate(&a->chat.conv, (size_t)a->edit_index);
            a->edit_index = -1;
            send_message(a, text);
        }
        free(line);
        return;
    }
    if (!text[0]) {
        free(line);
        return;
    }
    if (text[0] == '/' && text[1] != '/')
        chatcmd_run(a, text);
    else
        send_message(a, text[0] == '/' ? text + 1 : text);
    free(line);
    a->dirty = true;
}

static void on_matches(void *user, char **matches, int n, int max_len)
{
    ui_app *a = user;
    sbuf s = {0};
    for (int i = 1; i <= n && s.len < 200; i++) {
        sbuf_adds(&s, matches[i]);
        sbuf_adds(&s, "  ");
    }
    ui_app_status(a, TH_STATUS_MSG, "%s", sbuf_str(&s));
    sbuf_free(&s);
}

static void feed_wchar(wint_t ch)
{
    sbuf b = {0};
    tsafe_encode(&b, (uint32_t)ch);
    ui_input_feed(b.s, b.len);
    sbuf_free(&b);
}

static void cancel_answer(ui_app *a)
{
    if (!a->job)
        return;
    decoder_cancel(a->dec);
    ui_app_status(a, TH_STATUS_MSG, "Stopping...");
}

static void on_ctrl_c(ui_app *a)
{
    double now = mono_now();
    if (now - a->ctrl_c_at < DOUBLE_KEY_S) {
        a->quit = true; /* twice: leave now (the conversation is saved on the way out) */
        return;
    }
    a->ctrl_c_at = now;
    if (a->job) {
        cancel_answer(a);
        ui_app_status(a, TH_STATUS_MSG, "Stopping the answer (Ctrl-C again quits)");
    } else if (!ui_input_empty()) {
        ui_input_clear();
        a->edit_index = -1;
        ui_app_status(a, TH_STATUS_MSG, "Line cleared (Ctrl-C again quits)");
    } else {
        ui_app_status(a, TH_STATUS_MSG, "Press Ctrl-C again to quit");
    }
}

/* Keys readline knows by their escape sequences. */
static const char *key_sequence(int key)
{
    switch (key) {
    case KEY_LEFT: return "\033[D";
    case KEY_RIGHT: return "\033[C";
    case KEY_UP: return "\033[A";
    case KEY_DOWN: return "\033[B";
    case KEY_HOME: return "\033[H";
    case KEY_END: return "\033[F";
    case KEY_DC: return "\033[3~";
    case KEY_BACKSPACE: return "\177";
    case KEY_ENTER: return "\r";
    case KEY_IC: return "\033[2~";
    default: return NULL;
    }
}

static void handle_function_key(ui_app *a, int key)
{
    if (key == UI_KEY_PASTE_BEGIN) {
        a->in_paste = true;
        sbuf_clear(&a->paste);
        return;
    }
    if (key == KEY_RESIZE) {
        memset(&a->lay, 0, sizeof a->lay);
        a->dirty = true;
        return;
    }
    if (key == KEY_F(1)) {
        ui_app_note(a, TH_NOTICE, "%s", chatcmd_help());
        return;
    }
    if (key == KEY_F(2)) {
        a->want_pane = a->lay.pane_shown ? 0 : 1;
        memset(&a->lay, 0, sizeof a->lay);
        a->dirty = true;
        return;
    }
    int r = ui_chatview_panel.key(&a->view, key);
    if (!r)
        r = ui_sidepane_panel.key(&a->pane, key);
    if (r) {
        a->dirty = true;
        return;
    }
    const char *seq = key_sequence(key);
    if (seq)
        ui_input_feed(seq, strlen(seq));
    a->dirty = true;
}

static void end_paste(ui_app *a)
{
    a->in_paste = false;
    /* Pasted line ends (\r\n or \r) become \n: the paste stays one message. */
    sbuf t = {0};
    const char *p = sbuf_str(&a->paste);
    for (size_t i = 0; i < a->paste.len; i++) {
        if (p[i] == '\r') {
            sbuf_addc(&t, '\n');
            if (i + 1 < a->paste.len && p[i + 1] == '\n')
                i++;
        } else {
            sbuf_addc(&t, p[i]);
        }
    }
    ui_input_insert(sbuf_str(&t));
    sbuf_free(&t);
    sbuf_clear(&a->paste);
    a->dirty = true;
}

static void handle_escape(ui_app *a)
{
    wint_t next;
    int r = wget_wch(a->w_input, &next);
    if (r == ERR) {
        /* A lone Esc: stop the answer, or leave /edit; else it is readline's (vi mode). */
        if (a->job) {
            cancel_answer(a);
            if (a->replay_active)
                ui_app_status(a, TH_STATUS_MSG, "Stopping the replay");
        } else if (a->edit_index >= 0) {
            a->edit_index = -1;
            ui_input_clear();
            ui_app_status(a, TH_STATUS_MSG, "Edit cancelled");
        } else {
            ui_input_feed("\033", 1);
        }
        return;
    }
    if (r == KEY_CODE_YES) {
        handle_function_key(a, (int)next); /* Alt + a function key: as the key */
        return;
    }
    if (next == '\r' || next == '\n') {
        ui_input_insert("\n"); /* Alt-Enter */
        return;
    }
    /* Alt + key: readline's meta bindings (M-b, M-f, ...). */
    sbuf b = {0};
    sbuf_addc(&b, '\033');
    tsafe_encode(&b, (uint32_t)next);
    ui_input_feed(b.s, b.len);
    sbuf_free(&b);
}

static void handle_key(ui_app *a, int r, wint_t ch)
{
    a->dirty = true;
    if (a->in_paste) {
        if (r == KEY_CODE_YES && ch == UI_KEY_PASTE_END)
            end_paste(a);
        else if (r == OK)
            tsafe_encode(&a->paste, (uint32_t)ch);
        return;
    }
    if (r == KEY_CODE_YES) {
        handle_function_key(a, (int)ch);
        return;
    }
    if (ch == 27)
        handle_escape(a);
    else if (ch == 3)
        on_ctrl_c(a);
    else
        feed_wchar(ch);
}

/* ---- drawing ------------------------------------------------------------------------------------ */

static void make_window(WINDOW **w, ui_rect r)
{
    if (*w)
        delwin(*w);
    *w = NULL;
    if (r.h > 0 && r.w > 0)
        *w = newwin(r.h, r.w, r.y, r.x);
}

static void relayout(ui_app *a)
{
    int left = a->lay.chat.w > 0 ? a->lay.chat.w : COLS;
    ui_layout nl;
    ui_layout_compute(&nl, LINES, COLS, a->want_pane, a->cfg.side_width, ui_input_rows(left));
    if (nl.chat.w != left)
        ui_layout_compute(&nl, LINES, COLS, a->want_pane, a->cfg.side_width, ui_input_rows(nl.chat.w));
    if (a->w_chat && !memcmp(&nl, &a->lay, sizeof nl))
        return;
    a->lay = nl;
    make_window(&a->w_chat, nl.chat);
    make_window(&a->w_input, nl.input);
    make_window(&a->w_pane, nl.pane);
    make_window(&a->w_status, nl.status);
    if (a->w_input) {
        keypad(a->w_input, TRUE);
        nodelay(a->w_input, TRUE);
    }
    ui_input_resize(nl.input.h, nl.input.w);
    wbkgdset(stdscr, (chtype)theme_attr(TH_NORMAL));
    werase(stdscr);
    clearok(curscr, TRUE);
}

static void draw_rules(ui_app *a)
{
    wattrset(stdscr, theme_attr(TH_BORDER));
    if (a->lay.rule_y >= 0) {
        mvwhline(stdscr, a->lay.rule_y, 0, ACS_HLINE, a->lay.chat.w);
        /* The rule names the template and the file the conversation goes to. */
        char label[PATH_MAX + 64];
        const char *file = a->autosave_path[0] ? strrchr(a->autosave_path, '/') : NULL;
        int n = snprintf(label, sizeof label, " %s%s", tmpl_name(a->chat.tmpl), a->chat.thinking ? ", thinking" : "");
        if (n > 0 && (size_t)n < sizeof label)
            snprintf(label + n, sizeof label - (size_t)n, "%s%s ", file ? " | " : "", file ? file + 1 : "");
        sbuf s = {0};
        tsafe_sanitize(&s, label, strlen(label), false);
        int lw = ui_text_width(s.s, s.len);
        if (lw + 4 < a->lay.chat.w)
            mvwaddstr(stdscr, a->lay.rule_y, a->lay.chat.w - lw - 2, s.s);
        sbuf_free(&s);
    }
    if (a->lay.sep_x >= 0)
        mvwvline(stdscr, 0, a->lay.sep_x, ACS_VLINE, LINES - 1);
}

static const char *state_text(ui_app *a, char *buf, size_t cap)
{
    if (a->load_failed)
        snprintf(buf, cap, "The model is not available; /quit leaves");
    else if (!a->ready)
        snprintf(buf, cap, "Loading the model...");
    else if (a->gen == GEN_REPLAY)
        snprintf(buf, cap, "Replaying turn %d of %d | Esc stops", a->replay_turn, a->replay_turns);
    else if (a->job)
        snprintf(buf, cap, "Answering | %.1f tok/s | Esc stops", a->pane.st.decode_tps);
    else if (a->edit_index >= 0)
        snprintf(buf, cap, "Editing your last message: Enter regenerates, Esc cancels");
    else
        snprintf(buf, cap, "Ready");
    return buf;
}

static void draw_status(ui_app *a)
{
    WINDOW *w = a->w_status;
    if (!w)
        return;
    int wd = getmaxx(w);
    wbkgdset(w, (chtype)theme_attr(TH_STATUS));
    werase(w);
    static const char *const keys[][2] = {{"F1", "help"}, {"F2", "pane"}, {"F3", "think"},
                                          {"PgUp", "scroll"}, {"^C^C", "quit"}};
    int kw = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        kw += (int)(strlen(keys[i][0]) + strlen(keys[i][1]) + 2);
    char buf[512];
    bool transient = mono_now() < a->status_until;
    const char *msg = transient ? a->status : state_text(a, buf, sizeof buf);
    if (transient && a->job) {
        /* While answering, how to stop it stays in view. */
        char state[160];
        snprintf(buf, sizeof buf, "%s | %s", state_text(a, state, sizeof state), a->status);
        msg = buf;
    }
    int room = wd - 1 - (kw + 1 < wd / 2 ? kw + 1 : 0);
    sbuf s = {0};
    tsafe_sanitize(&s, msg, strlen(msg), false);
    wattrset(w, theme_attr(transient ? a->status_el : TH_STATUS));
    /* Clip by cells. */
    size_t i = 0;
    int cells = 0;
    while (i < s.len) {
        uint32_t cp;
        size_t l = tsafe_decode(s.s + i, s.len - i, &cp);
        int cw = ui_cp_width(cp);
        if (cells + cw > room)
            break;
        cells += cw;
        i += l;
    }
    mvwaddstr(w, 0, 0, " ");
    waddnstr(w, s.s, (int)i);
    waddstr(w, " ");
    sbuf_free(&s);
    if (kw + 1 < wd / 2) {
        int x = wd - kw;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            wattrset(w, theme_attr(TH_STATUS_KEY));
            mvwaddstr(w, 0, x, keys[k][0]);
            x += (int)strlen(keys[k][0]);
            wattrset(w, theme_attr(TH_STATUS));
            mvwprintw(w, 0, x, " %s ", keys[k][1]);
            x += (int)strlen(keys[k][1]) + 2;
        }
    }
}

static void draw(ui_app *a)
{
    relayout(a);
    if (a->job && a->gen == GEN_CHAT) {
        /* Refresh the live header with the rate so far. */
        if (a->pane.st.busy && a->pane.st.decode_tps > 0) {
            snprintf(a->live_meta, sizeof a->live_meta, "%.1f tok/s", a->pane.st.decode_tps);
            ui_chatview_live_changed(&a->view);
        }
    }
    draw_rules(a);
    wnoutrefresh(stdscr);
    if (a->w_chat) {
        ui_chatview_panel.draw(&a->view, a->w_chat);
        wnoutrefresh(a->w_chat);
    }
    if (a->w_pane) {
        ui_sidepane_panel.draw(&a->pane, a->w_pane);
        wnoutrefresh(a->w_pane);
    }
    draw_status(a);
    if (a->w_status)
        wnoutrefresh(a->w_status);
    if (a->w_input) {
        ui_input_draw(a->w_input, theme_attr(TH_INPUT), theme_attr(TH_PROMPT), theme_attr(TH_CONTROL));
        wnoutrefresh(a->w_input); /* last: the cursor stays in the input */
    }
    doupdate();
    a->dirty = false;
    a->last_draw = mono_now();
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
        on_ctrl_c(a);
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
        double now = mono_now();
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
            handle_key(a, r, ch);
        dec_event ev;
        while (a->dec && decoder_next(a->dec, &ev)) {
            handle_event(a, &ev);
            decoder_event_free(&ev);
        }
        now = mono_now();
        poll_stats(a, now);
        if (ui_input_changed())
            a->dirty = true;
        if (a->status_until > 0 && now >= a->status_until) {
            a->status_until = 0;
            a->dirty = true;
        }
        if (a->dirty && now - a->last_draw >= FRAME_S)
            draw(a);
    }
}

/* On the way out: stop the answer (keeping what it said), then save. */
static void wind_down(ui_app *a)
{
    if (a->job && a->dec) {
        decoder_cancel(a->dec);
        dec_event ev;
        double end = mono_now() + 5.0;
        while (a->job && mono_now() < end && decoder_wait(a->dec, &ev, 200)) {
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
    ui_input_init(config->history_path, on_line, on_matches, a);
    rl_attempted_completion_function = chatcmd_complete;
    if (ui_term_start(a->cfg.mouse, &err) != 0) {
        fprintf(stderr, "glmchat: %s\n", err.msg);
        ui_input_shutdown();
        chat_free(&a->chat);
        free(a);
        return 1;
    }
    ui_app_apply_theme(a, &config->th);
    start(a);
    draw(a);
    run_loop(a);
    wind_down(a);
    decoder_free(a->dec);
    ui_input_shutdown();
    ui_term_restore();
    int code = a->exit_code;
    if (a->autosave_path[0] && !a->unsaved && worth_saving(&a->chat.conv))
        printf("glmchat: conversation saved in %s\n", a->autosave_path);
    else if (a->unsaved) {
        fprintf(stderr, "glmchat: the conversation could not be saved\n");
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
