/* ui_keys.c: keys and lines: what goes to readline, what the UI takes
 * (Esc, Ctrl-C, F1, pastes), what the panels take, and what a finished
 * line does. */
#include "ui_keys.h"

#include <stdlib.h>
#include <string.h>

#include "text_safe.h"
#include "ui_input.h"
#include "ui_term.h"

#define DOUBLE_KEY_S 2.0 /* Ctrl-C twice */

void ui_keys_init(ui_keys *k, ui_session *s, ui_screen *scr, chatcmd_ctx *commands, const ui_frontend *fe)
{
    memset(k, 0, sizeof *k);
    k->session = s;
    k->screen = scr;
    k->commands = commands;
    k->fe = fe;
}

void ui_keys_free(ui_keys *k)
{
    sbuf_free(&k->paste);
    free(k->cleared);
    k->cleared = NULL;
}

/* ---- lines ------------------------------------------------------------------------------- */

/* A line while /edit is on: the new text of the message (empty: no edit). */
static void edit_line(ui_keys *k, const char *text)
{
    if (!text[0]) {
        k->changed |= ui_session_edit_cancel(k->session);
        ui_status(k->fe, UI_INFO, "Edit cancelled");
    } else if (!ui_session_edit_finish(k->session, text, &k->changed)) {
        /* Nothing the user wrote is dropped: the line comes back. */
        ui_input_set_line(text);
    }
}

void ui_keys_on_line(void *user, char *line)
{
    ui_keys *k = user;
    if (!line) {
        k->changed |= UI_QUIT; /* Ctrl-D on an empty line */
        return;
    }
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == ' '))
        line[--len] = 0;
    if (ui_session_edit_text(k->session) && line[0] != '/')
        edit_line(k, line);
    else if (line[0] == '/' && line[1] != '/')
        k->changed |= chatcmd_run(k->commands, line);
    else if (line[0])
        k->changed |= ui_session_send(k->session, line[0] == '/' ? line + 1 : line);
    free(line);
}

void ui_keys_on_matches(void *user, char **matches, int n, int max_len)
{
    ui_keys *k = user;
    sbuf s = {0};
    for (int i = 1; i <= n && s.len < 200; i++) {
        sbuf_adds(&s, matches[i]);
        sbuf_adds(&s, "  ");
    }
    ui_status(k->fe, UI_INFO, "%s", sbuf_str(&s));
    sbuf_free(&s);
}

/* ---- keys --------------------------------------------------------------------------------- */

static void feed_wchar(wint_t ch)
{
    sbuf b = {0};
    tsafe_encode(&b, (uint32_t)ch);
    ui_input_feed(b.s, b.len);
    sbuf_free(&b);
}

unsigned ui_keys_ctrl_c(ui_keys *k)
{
    double now = ui_term_now();
    if (now - k->ctrl_c_at < DOUBLE_KEY_S)
        return UI_QUIT_NOW; /* twice: leave now (the conversation is saved on the way out) */
    k->ctrl_c_at = now;
    unsigned changed = 0;
    if (ui_session_busy(k->session)) {
        changed |= ui_session_cancel(k->session);
        ui_status(k->fe, UI_INFO, "Stopping the answer (Ctrl-C again quits)");
    } else if (!ui_input_empty()) {
        /* Kept for Ctrl-Y: a long paste or a message that came back is not
         * lost to one key (issue 28.11). */
        free(k->cleared);
        k->cleared = strdup(ui_input_text());
        ui_input_clear();
        changed |= ui_session_edit_cancel(k->session);
        ui_status(k->fe, UI_INFO, "Line cleared: Ctrl-Y brings it back (Ctrl-C again quits)");
    } else {
        ui_status(k->fe, UI_INFO, "Press Ctrl-C again to quit");
    }
    return changed;
}

static void handle_function_key(ui_keys *k, int key)
{
    if (key == UI_KEY_PASTE_BEGIN) {
        k->in_paste = true;
        sbuf_clear(&k->paste);
    } else if (key == KEY_RESIZE) {
        k->changed |= UI_CHANGED_LAYOUT;
    } else if (key == KEY_F(1)) {
        ui_note(k->fe, UI_INFO, "%s", chatcmd_help());
    } else if (key == KEY_F(5)) {
        bool raw = !k->screen->view.raw;
        ui_chatview_set_raw(&k->screen->view, raw);
        ui_screen_dirty(k->screen, UI_SLOT_CHAT);
        ui_status(k->fe, UI_INFO, "%s",
                  raw ? "Answers as written (F5: rendered from their Markdown)"
                      : "Answers rendered from their Markdown (F5: as written)");
    } else {
        /* The panels' keys: scrolling, F2-F4, and the input's editing keys. */
        ui_screen_key(k->screen, key);
    }
}

static void end_paste(ui_keys *k)
{
    k->in_paste = false;
    /* Pasted line ends (\r\n or \r) become \n: the paste stays one message. */
    sbuf t = {0};
    const char *p = sbuf_str(&k->paste);
    for (size_t i = 0; i < k->paste.len; i++) {
        if (p[i] == '\r') {
            sbuf_addc(&t, '\n');
            if (i + 1 < k->paste.len && p[i + 1] == '\n')
                i++;
        } else {
            sbuf_addc(&t, p[i]);
        }
    }
    ui_input_insert(sbuf_str(&t));
    sbuf_free(&t);
    sbuf_clear(&k->paste);
}

/* Alt + a key (Esc and the key after it). */
static void alt_key(ui_keys *k, int r, wint_t next)
{
    if (r == KEY_CODE_YES) {
        handle_function_key(k, (int)next); /* Alt + a function key: as the key */
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

unsigned ui_keys_tick(ui_keys *k, double now)
{
    if (k->esc_at > 0 && now - k->esc_at >= UI_KEYS_ESC_S) {
        k->esc_at = 0;
        ui_status(k->fe, UI_INFO, "Esc stops an answer or leaves /edit: nothing to stop now");
    }
    unsigned changed = k->changed;
    k->changed = 0;
    return changed;
}

double ui_keys_wait_s(const ui_keys *k, double now)
{
    if (k->esc_at <= 0)
        return -1;
    double left = k->esc_at + UI_KEYS_ESC_S - now;
    return left > 0 ? left : 0;
}

static void handle_escape(ui_keys *k)
{
    wint_t next;
    WINDOW *w = ui_screen_input_window(k->screen);
    int r = w ? wget_wch(w, &next) : ERR;
    if (r == ERR) {
        /* A lone Esc: stop the answer, or leave /edit; in vi mode it is
         * readline's.  In Emacs mode readline would take it as the Meta
         * prefix of the next key, typed maybe much later, which it would
         * then eat (issue 28.11): it goes no further, and only a key
         * within UI_KEYS_ESC_S makes it Alt. */
        if (ui_session_busy(k->session)) {
            k->changed |= ui_session_cancel(k->session);
            if (ui_session_replaying(k->session, NULL, NULL))
                ui_status(k->fe, UI_INFO, "Stopping the replay");
        } else if (ui_session_edit_text(k->session)) {
            k->changed |= ui_session_edit_cancel(k->session);
            ui_input_clear();
            ui_status(k->fe, UI_INFO, "Edit cancelled");
        } else if (ui_input_vi_mode()) {
            ui_input_feed("\033", 1);
        } else {
            k->esc_at = ui_term_now();
        }
        return;
    }
    alt_key(k, r, next);
}

unsigned ui_keys_handle(ui_keys *k, int r, wint_t ch)
{
    if (k->esc_at > 0) {
        /* The key after a lone Esc: Alt + it when soon enough. */
        bool soon = ui_term_now() - k->esc_at < UI_KEYS_ESC_S;
        k->esc_at = 0;
        if (soon && !k->in_paste && ch != 27 && !(r == KEY_CODE_YES && ch == UI_KEY_PASTE_BEGIN)) {
            alt_key(k, r, ch);
            unsigned changed = k->changed;
            k->changed = 0;
            return changed;
        }
    }
    if (k->in_paste) {
        if (r == KEY_CODE_YES && ch == UI_KEY_PASTE_END)
            end_paste(k);
        else if (r == OK)
            tsafe_encode(&k->paste, (uint32_t)ch);
    } else if (r == KEY_CODE_YES) {
        handle_function_key(k, (int)ch);
    } else if (ch == 27) {
        handle_escape(k);
    } else if (ch == 3) {
        k->changed |= ui_keys_ctrl_c(k);
    } else if (ch == 25 && k->cleared && ui_input_empty()) {
        /* Ctrl-Y on the line Ctrl-C emptied: what it cleared comes back
         * (elsewhere Ctrl-Y is readline's yank). */
        ui_input_set_line(k->cleared);
        free(k->cleared);
        k->cleared = NULL;
    } else {
        feed_wchar(ch);
    }
    unsigned changed = k->changed;
    k->changed = 0;
    return changed;
}
