/* ui_keys.c: keys and lines: what goes to readline, what the UI takes
 * (Esc, Ctrl-C, F-keys, PgUp/PgDn, pastes), and what a finished line does. */
#include "ui_keys.h"

#include <stdlib.h>
#include <string.h>

#include "chat_commands.h"
#include "text_safe.h"
#include "ui_input.h"
#include "ui_term.h"

#define DOUBLE_KEY_S 2.0 /* Ctrl-C twice */

void ui_keys_on_line(void *user, char *line)
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
    if (a->edit_index >= 0 && text[0] != '/') {
        if (!text[0]) {
            a->edit_index = -1;
            ui_app_status(a, TH_STATUS_MSG, "Edit cancelled");
        } else if (!a->job) {
            conv_truncate(&a->chat.conv, (size_t)a->edit_index);
            a->edit_index = -1;
            ui_app_send_message(a, text);
        } else {
            /* Nothing the user wrote is dropped: the line comes back. */
            ui_input_set_line(text);
            ui_app_status(a, TH_ERROR, "Wait for the answer to finish (or stop it with Esc), then press Enter");
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
        ui_app_send_message(a, text[0] == '/' ? text + 1 : text);
    free(line);
    a->dirty = true;
}

void ui_keys_on_matches(void *user, char **matches, int n, int max_len)
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

void ui_keys_ctrl_c(ui_app *a)
{
    double now = ui_app_now();
    if (now - a->ctrl_c_at < DOUBLE_KEY_S) {
        a->quit = true; /* twice: leave now (the conversation is saved on the way out) */
        return;
    }
    a->ctrl_c_at = now;
    if (a->job) {
        ui_app_cancel_answer(a);
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
            ui_app_cancel_answer(a);
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

void ui_keys_handle(ui_app *a, int r, wint_t ch)
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
        ui_keys_ctrl_c(a);
    else
        feed_wchar(ch);
}

