/* chat_commands.h: the /commands of the chat, their help, tab completion,
 * and the "did you mean" hint for unknown ones.  A line starting with "//"
 * is sent as a message starting with "/".
 *
 * The commands act on the session (app/ui/ui_session.h) and tell the user
 * through the frontend (app/ui/ui_frontend.h); they never draw.  Each returns
 * what it changed (UI_CHANGED_*, UI_QUIT) for the screen to act on.  A new
 * command is one function and one row of the table in chat_commands.c (its
 * name, argument kind for completion, whether it may run during an answer,
 * and its line in /help). */
#ifndef GLM_CHAT_COMMANDS_H
#define GLM_CHAT_COMMANDS_H

#include "theme.h"
#include "ui_frontend.h"
#include "ui_session.h"

typedef struct {
    ui_session *session;
    const ui_frontend *fe;
    theme *theme;       /* the screen's: /theme shows it, and replaces it with UI_CHANGED_THEME */
    double clear_at;    /* when /clear asked to be typed again (conv_now() seconds) */
    bool bang;          /* while a command runs: it was given with '!' ("/export! FILE") */
} chatcmd_ctx;

/* Runs a line that starts with '/'; returns what it changed. */
unsigned chatcmd_run(chatcmd_ctx *c, const char *line);
/* The help text, grouped by topic. */
const char *chatcmd_help(void);
/* The command closest to `name` (without '/') by edit distance, NULL when
 * none is close enough to be a plausible typo. */
const char *chatcmd_closest(const char *name);
int chatcmd_edit_distance(const char *a, const char *b);
/* readline's attempted-completion hook. */
char **chatcmd_complete(const char *text, int start, int end);

#endif
