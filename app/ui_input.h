/* ui_input.h: the input area, GNU readline through its callback interface.
 *
 * Keys reach readline byte by byte from the UI's own input loop
 * (rl_callback_read_char); readline never touches the terminal: its
 * redisplay draws into our curses window, so ~/.inputrc, Emacs and vi
 * bindings, history search and completion all work inside the UI.  Lines
 * may hold newlines (Alt-Enter, pastes).  History is kept in
 * $XDG_STATE_HOME/glmchat/history, multi-line entries included. */
#ifndef GLM_UI_INPUT_H
#define GLM_UI_INPUT_H

#include <curses.h>
#include <stdbool.h>
#include <stddef.h>

#include "ui_panel.h"

/* Called with each accepted line (NULL on end of input, Ctrl-D on an empty
 * line); the line is the callee's to free. */
typedef void (*ui_input_line_fn)(void *user, char *line);
/* Shows readline's completion candidates (the UI puts them in the status line). */
typedef void (*ui_input_matches_fn)(void *user, char **matches, int n, int max_len);

void ui_input_init(const char *history_path, ui_input_line_fn on_line, ui_input_matches_fn on_matches,
                   void *user);
void ui_input_shutdown(void);

/* Feeds bytes as typed keys (a UTF-8 character, or an escape sequence). */
void ui_input_feed(const char *bytes, size_t n);
/* Inserts text at the cursor as-is (pastes, Alt-Enter's newline). */
void ui_input_insert(const char *text);
/* Replaces the whole line (/edit) and puts the cursor at its end. */
void ui_input_set_line(const char *text);
/* Puts text back on the line, ahead of what is there (on a line of its own). */
void ui_input_restore(const char *text);
/* Clears the line (leaving /edit). */
void ui_input_clear(void);
/* The line as it is now (valid until the next input call). */
const char *ui_input_text(void);
/* True in readline's vi editing mode (where Esc is a key of its own). */
bool ui_input_vi_mode(void);
bool ui_input_empty(void);

/* Display rows the line needs at `width` columns (for the layout). */
int ui_input_rows(int width);
/* Draws prompt + line into w and leaves the cursor at readline's point. */
void ui_input_draw(WINDOW *w, int attr_text, int attr_prompt, int attr_control);
/* True when readline asked for a redisplay since the last draw. */
bool ui_input_changed(void);
void ui_input_set_prompt(const char *prompt);

/* The input as a screen panel (no state of its own: readline's): draws
 * with the theme's input colours, takes the editing keys curses decoded
 * (arrows, Home, End, Delete...) and hands them to readline. */
extern const ui_panel ui_input_panel;
void ui_input_resize(int rows, int cols);

#endif
