/* ui_frontend.h: what the chat session (app/ui_session.h) and the /commands
 * (app/chat_commands.h) may ask of the screen without knowing it, and the
 * flags with which they report what they changed.
 *
 * Promises:
 *  - nothing here needs curses: the screen implements ui_frontend
 *    (app/ui_app.c), a test implements it by recording the calls;
 *  - the calls are made in the order the user should see their effects:
 *    a note written after a new conversation began stays on the screen, a
 *    replay turn's rows come between the notes around it;
 *  - everything else the screen shows (messages, the streaming answer,
 *    statistics, the status line's state) it reads from the session when a
 *    call returns UI_CHANGED_* flags, so nothing is drawn twice. */
#ifndef GLM_UI_FRONTEND_H
#define GLM_UI_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { UI_INFO, UI_ERROR } ui_level;

/* What a session call, a /command or a key changed (a bit set). */
enum {
    UI_CHANGED_CONVERSATION = 1u << 0, /* messages added, edited or removed */
    UI_CHANGED_SETTINGS = 1u << 1,     /* template, thinking, sampling, the file saved to */
    UI_CHANGED_STATE = 1u << 2,        /* loading, answering, editing, replaying (the status line) */
    UI_CHANGED_LIVE = 1u << 3,         /* the answer being generated: started, grew, ended */
    UI_CHANGED_STATS = 1u << 4,        /* a new statistics snapshot */
    UI_CHANGED_PREFILL = 1u << 5,      /* a prompt was evaluated (one prefill-rate sample) */
    UI_CHANGED_ENGINE = 1u << 6,       /* load progress, the backend */
    UI_CHANGED_THEME = 1u << 7,        /* the theme to show changed */
    UI_CHANGED_LAYOUT = 1u << 8,       /* the screen's parts moved */
    UI_QUIT = 1u << 9,                 /* leave (an unsaved conversation asks again first) */
    UI_QUIT_NOW = 1u << 10,            /* leave at once (Ctrl-C twice) */
};

/* One turn of /replay as the session sees it; the strings are valid for the
 * duration of the call that passes it (the screen keeps copies). */
typedef struct {
    int turn, n_turns;
    const char *user;       /* the recorded question */
    const char *old_answer; /* the recorded answer */
    double old_tps;
    const char *new_answer; /* the new answer so far */
    double new_tps;
    bool done, stopped;
} ui_replay_turn;

typedef struct {
    void *user;
    /* A lasting note in the chat (help, /stats, errors). */
    void (*note)(void *user, ui_level level, const char *text);
    /* A transient message in the status line; "" takes it away. */
    void (*status)(void *user, ui_level level, const char *text);
    /* Replaces the input line (/edit brings a message back). */
    void (*set_input)(void *user, const char *text);
    /* A message that was not answered after all (stopped before its
     * answer began, or larger than the context) goes back to the input
     * line, ahead of whatever was typed since, which must not be lost;
     * `why` is one line for the user. */
    void (*restore_input)(void *user, const char *text, const char *why);
    /* A different conversation begins (/clear, /load): the notes and the
     * scroll position of the old one go. */
    void (*new_conversation)(void *user);
    /* A replay turn began (is_new) or its new answer grew or ended. */
    void (*replay_turn)(void *user, const ui_replay_turn *turn, bool is_new);
    /* Bytes for the terminal itself that change nothing on the screen (a
     * clipboard request, /copy); false when this frontend sends none. */
    bool (*write_terminal)(void *user, const char *bytes, size_t n);
} ui_frontend;

void ui_note(const ui_frontend *fe, ui_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ui_status(const ui_frontend *fe, ui_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
