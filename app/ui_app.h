/* ui_app.h: the interactive chat: a session (app/ui_session.h) shown on a
 * screen (app/ui_screen.h), driven by one loop over the terminal, the
 * signals and the decode thread's events. */
#ifndef GLM_UI_APP_H
#define GLM_UI_APP_H

#include "theme.h"
#include "ui_session.h"

/* What cmd_chat hands over: an opened model and the choices made. */
typedef struct {
    ui_session_config session;  /* the model, settings, conversation */
    theme th;                   /* checked by the caller */
    const char *history_path;   /* readline's history file */
} ui_app_config;

/* Runs the chat until the user quits; returns the exit status. */
int ui_app_run(const ui_app_config *config);

#endif
