/* ui_keys.h: the chat's keyboard: what the UI takes for itself (Esc,
 * Ctrl-C, F1, F5, pastes, resizes), what goes to the panels (ui_screen_key:
 * scrolling, F2-F4, editing keys) and to readline, and what a finished
 * line does (/command, message, the end of an /edit). */
#ifndef GLM_UI_KEYS_H
#define GLM_UI_KEYS_H

#include <stdbool.h>
#include <wchar.h>

#include "chat_commands.h"
#include "sbuf.h"
#include "ui_frontend.h"
#include "ui_screen.h"
#include "ui_session.h"

typedef struct {
    ui_session *session;
    ui_screen *screen;
    chatcmd_ctx *commands;
    const ui_frontend *fe;
    bool in_paste;      /* between bracketed paste's begin and end */
    sbuf paste;
    double ctrl_c_at;   /* ui_term_now() of the last Ctrl-C */
    char *cleared;      /* the line Ctrl-C cleared, for Ctrl-Y on the empty line after it; NULL */
    double esc_at;      /* a lone Esc on an idle line, waiting for the key after it (0: none) */
    unsigned changed;   /* from the line handler, which readline calls inside a key */
} ui_keys;

void ui_keys_init(ui_keys *k, ui_session *s, ui_screen *scr, chatcmd_ctx *commands, const ui_frontend *fe);
void ui_keys_free(ui_keys *k);

/* readline callbacks (user is the ui_keys). */
void ui_keys_on_line(void *user, char *line);
void ui_keys_on_matches(void *user, char **matches, int n, int max_len);
/* One key from wget_wch (r: OK or KEY_CODE_YES); returns what changed
 * (UI_CHANGED_*, UI_QUIT, UI_QUIT_NOW). */
unsigned ui_keys_handle(ui_keys *k, int r, wint_t ch);
/* Ctrl-C (the key, or SIGINT): stop the answer, clear the line; twice: quit. */
unsigned ui_keys_ctrl_c(ui_keys *k);

/* A lone Esc on an idle line waits UI_KEYS_ESC_S for a key: one within
 * that is Alt + the key (a terminal or tmux under load may send Alt-Enter's
 * two bytes apart); after it the Esc was only an Esc and the next key is
 * typed as it is (readline's keyseq-timeout, which a callback readline
 * cannot keep).  ui_keys_tick() ends the wait; ui_keys_wait_s() says how
 * long the loop may sleep (-1: no wait). */
#define UI_KEYS_ESC_S 0.5
unsigned ui_keys_tick(ui_keys *k, double now);
double ui_keys_wait_s(const ui_keys *k, double now);

#endif
