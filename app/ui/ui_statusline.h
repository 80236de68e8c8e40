/* ui_statusline.h: the bottom line: what the chat is doing (loading,
 * answering at N tok/s, editing, replaying), or for a few seconds a
 * message, and the keys to remember on the right (the way to quit always
 * whole; a message too long for the line is cut with an ellipsis).
 *
 * The status line keeps its data and knows when it changed; the screen
 * draws it only then (and when a message expires). */
#ifndef GLM_UI_STATUSLINE_H
#define GLM_UI_STATUSLINE_H

#include <stdbool.h>

#include "theme.h"
#include "ui_panel.h"

typedef struct {
    char state[160];
    bool busy;          /* an answer runs: its state stays in view beside a message */
    char msg[256];
    theme_el msg_el;
    double msg_until;   /* ui_term_now() seconds; 0: no message */
} ui_statusline;

extern const ui_panel ui_statusline_panel;

/* The state shown when no message is; true when that changed what is shown. */
bool ui_statusline_set_state(ui_statusline *sl, const char *state, bool busy);
/* A message shown until `until` (ui_term_now() seconds); "" takes it away. */
void ui_statusline_message(ui_statusline *sl, theme_el el, const char *text, double until);
/* True once when the message's time is over at `now` (draw again). */
bool ui_statusline_expire(ui_statusline *sl, double now);
/* When the message goes, 0 when none shows. */
double ui_statusline_until(const ui_statusline *sl);

/* How a line of `width` cells is shared: the way to quit always shows
 * whole (when it fits at all); the other keys give way, least important
 * first, before a message of msg_cells is cut to *msg_room cells.
 * *shown: bit k for key k (0: quit, then F1, F2, F3, PgUp). */
void ui_statusline_layout(int width, int msg_cells, unsigned *shown, int *msg_room);

#endif
