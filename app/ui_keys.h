/* ui_keys.h: the chat's keyboard: readline's line handler, completion
 * display, and every key the UI takes for itself. */
#ifndef GLM_UI_KEYS_H
#define GLM_UI_KEYS_H

#include <wchar.h>

#include "ui_app.h"

/* readline callbacks (user is the ui_app). */
void ui_keys_on_line(void *user, char *line);
void ui_keys_on_matches(void *user, char **matches, int n, int max_len);
/* One key from wget_wch (r: OK or KEY_CODE_YES). */
void ui_keys_handle(ui_app *a, int r, wint_t ch);
/* Ctrl-C (the key, or SIGINT): stop the answer, clear the line; twice: quit. */
void ui_keys_ctrl_c(ui_app *a);

#endif
