/* ui_term.h: the terminal: curses start-up, and getting it back to how it
 * was on every way out (normal exit, atexit, fatal signals), plus the
 * signals the UI cares about as readable events.
 *
 * Promise: after ui_term_start() the terminal is restored (cooked mode,
 * main screen, cursor shown, bracketed paste and mouse reporting off) when
 * the process exits for any reason it can catch: return from main, exit(),
 * SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT (then re-raised, so the exit status
 * and core dumps are unchanged). */
#ifndef GLM_UI_TERM_H
#define GLM_UI_TERM_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/* Key codes for bracketed paste (defined with define_key). */
#define UI_KEY_PASTE_BEGIN (KEY_MAX + 1)
#define UI_KEY_PASTE_END (KEY_MAX + 2)

int ui_term_start(bool mouse, err_t *err);
/* False (and why, one phrase) when the terminal cannot address the cursor
 * (TERM unset, dumb, unknown to terminfo, no cursor_address): the chat then
 * runs in line mode.  Sends nothing to the terminal. */
bool ui_term_can_address(char *why, size_t cap);
/* For line mode: checks for a terminal and installs the signal events,
 * without curses (so nothing needs restoring and no escape is ever sent). */
int ui_term_start_lines(err_t *err);
/* Idempotent; safe to call at any time after start. */
void ui_term_restore(void);
bool ui_term_active(void);

/* Readable when a signal arrived (SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGCONT). */
int ui_term_signal_fd(void);
/* Next pending signal number, 0 when none. */
int ui_term_next_signal(void);
/* Re-reads the terminal size after SIGWINCH and resizes curses. */
void ui_term_resize(void);
/* Monotonic seconds: the UI's clock for frames, expiring messages and
 * keys pressed twice. */
double ui_term_now(void);

#endif
