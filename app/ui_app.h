/* ui_app.h: the interactive chat: the screen's panels, the chat session,
 * the decode thread, and the loop that ties them together.  The /commands
 * (app/chat_commands.c) act on this state through the functions below. */
#ifndef GLM_UI_APP_H
#define GLM_UI_APP_H

#include <curses.h>
#include <limits.h>
#include <stdbool.h>

#include "chat.h"
#include "decoder.h"
#include "model.h"
#include "settings.h"
#include "theme.h"
#include "tokenizer.h"
#include "ui_chatview.h"
#include "ui_layout.h"
#include "ui_sidepane.h"

typedef enum { GEN_NONE, GEN_CHAT, GEN_REPLAY } ui_gen_kind;

/* What cmd_chat hands over: an opened model and the choices made. */
typedef struct {
    settings cfg;                   /* settings file + command line */
    const model *m;
    const tokenizer *tok;
    const tmpl_preset *tmpl;
    const engine_backend *be;       /* the backend to start */
    const engine_backend *fallback; /* when `be` fails to start (backend auto), else NULL */
    engine_params params;
    char model_path[PATH_MAX];
    char model_name[128];
    char fingerprint[72];
    uint64_t model_size;
    const char *demo_note;          /* non-NULL: running the built-in demo model */
    const char *model_lines[4];     /* summary for the side pane */
    int n_model_lines;
    uint64_t seed;                  /* the session's seed (given or random) */
    const char *conversation_file;  /* -C FILE: autosave into it */
    conversation *initial;          /* loaded from -C FILE (moved into the chat), or NULL */
    theme th;                       /* checked by the caller */
    const char *history_path;
    char conv_dir[PATH_MAX];        /* where autosaves go */
} ui_app_config;

typedef struct ui_app {
    ui_app_config c;
    settings cfg;                   /* current settings (/set changes them) */
    chat_session chat;
    decoder *dec;
    bool ready, load_failed;
    theme th;
    /* the screen */
    WINDOW *w_chat, *w_input, *w_pane, *w_status;
    ui_layout lay;
    int want_pane;                  /* 1, 0, -1 auto */
    ui_chatview view;
    ui_sidepane pane;
    bool dirty;
    double last_draw, last_stats;
    uint64_t last_seq;
    char status[256];
    double status_until;
    theme_el status_el;
    /* generation */
    int job;
    ui_gen_kind gen;
    chat_stream stream;
    char live_meta[128];
    uint32_t gen_prompt, gen_reused;
    double gen_prefill_tps;
    char *queued;                   /* a message typed while busy */
    long edit_index;                /* /edit: message index being rewritten, -1 */
    /* replay */
    chat_session replay;
    bool replay_active;
    size_t replay_next;
    int replay_turn, replay_turns;
    ui_replay_turn *replay_cur;
    double replay_old_sum, replay_new_sum;
    /* saving */
    char autosave_path[PATH_MAX];
    bool unsaved;                   /* changes not on disk (a save failed) */
    /* keys */
    bool in_paste;
    sbuf paste;
    double ctrl_c_at, quit_at, clear_at;
    bool quit;
    int exit_code;
} ui_app;

/* Runs the chat until the user quits; returns the exit status. */
int ui_app_run(const ui_app_config *config);

/* For the commands. */
void ui_app_note(ui_app *a, theme_el el, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ui_app_status(ui_app *a, theme_el el, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool ui_app_busy(const ui_app *a);
/* Sends the conversation as it is for an answer. */
void ui_app_answer(ui_app *a);
/* The conversation was edited: redraw it and save it. */
void ui_app_conversation_changed(ui_app *a);
/* Saves to the autosave file (made on first use); false on failure (noted). */
bool ui_app_autosave(ui_app *a);
/* Fills the conversation's metadata (model, template, sampling) for saving. */
void ui_app_fill_metadata(ui_app *a, conversation *c);
void ui_app_start_replay(ui_app *a, conversation *loaded, const char *name);
void ui_app_apply_theme(ui_app *a, const theme *t);
void ui_app_request_quit(ui_app *a);
/* A line the user wrote, as a message (queued while an answer runs). */
void ui_app_send_message(ui_app *a, const char *text);
void ui_app_cancel_answer(ui_app *a);
/* Monotonic seconds. */
double ui_app_now(void);
/* The sampler settings for the next answer (template family defaults,
 * then the settings file, the command line and /set). */
void ui_app_sampling(const ui_app *a, sampler_params *sp);

#endif
