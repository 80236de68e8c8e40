/* chat_commands.h: the /commands of the chat, their help, tab completion,
 * and the "did you mean" hint for unknown ones.  A line starting with "//"
 * is sent as a message starting with "/". */
#ifndef GLM_CHAT_COMMANDS_H
#define GLM_CHAT_COMMANDS_H

#include "ui_app.h"

/* Runs a line that starts with '/'. */
void chatcmd_run(ui_app *a, const char *line);
/* The help text, grouped by topic. */
const char *chatcmd_help(void);
/* The command closest to `name` (without '/') by edit distance, NULL when
 * none is close enough to be a plausible typo. */
const char *chatcmd_closest(const char *name);
int chatcmd_edit_distance(const char *a, const char *b);
/* readline's attempted-completion hook. */
char **chatcmd_complete(const char *text, int start, int end);

#endif
