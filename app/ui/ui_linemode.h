/* ui_linemode.h: the chat on a terminal that cannot place the cursor
 * (TERM=dumb, TERM unset or unknown to terminfo, an Emacs shell buffer):
 * lines in, answers printed as they stream, the same session and /commands
 * as the full-screen UI.
 *
 * Promises:
 *  - nothing but text is written: no escape sequence of any kind (no
 *    curses, no bracketed paste, no mouse reporting), and all model and
 *    file text is shown inert (tsafe_sanitize);
 *  - the terminal's own line editing is used (canonical mode, untouched): a
 *    line is a message or a /command; a line ending in '\' continues on the
 *    next, so a message may have several lines;
 *  - Ctrl-C stops the answer, twice quits; Ctrl-D on an empty line quits;
 *    the conversation is saved after every turn as in the full-screen UI. */
#ifndef GLM_UI_LINEMODE_H
#define GLM_UI_LINEMODE_H

#include "ui_app.h"

/* Runs the chat in line mode until the user quits; `why` says why the
 * screen is not used (shown once).  Returns the exit status. */
int ui_linemode_run(const ui_app_config *config, const char *why);

#endif
