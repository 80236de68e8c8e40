/* ui_session.h: the interactive chat apart from its screen: the
 * conversation, the decode thread and the answer it is generating, a
 * message queued while busy, /edit, autosaving, /replay.
 *
 * Promises:
 *  - no curses: the session talks to the user only through the ui_frontend
 *    it is given (notes, status messages, ordered screen events) and
 *    reports every other change as UI_CHANGED_* flags from its calls, for
 *    the screen to read back through the getters below;
 *  - the UI thread owns the session; the decode thread only runs the
 *    engine and answers through events (ui_session_pump);
 *  - every change to the conversation is saved at once: into the -C file,
 *    else into a file of its own in the conversations directory, made on
 *    the first change worth saving (a failure is a note, and
 *    ui_session_unsaved() stays true until a save succeeds); a file of its
 *    own that /undo leaves nothing worth keeping in goes again;
 *  - a conversation longer than the context is answered from a prompt
 *    without its oldest exchanges (noted in the chat when more go), or not
 *    at all, as the context-overflow setting says; the conversation itself
 *    keeps everything;
 *  - a message stopped before a word of its answer leaves the conversation
 *    and comes back through ui_frontend.restore_input, and so does one
 *    that is larger than the context on its own (noted);
 *  - /edit keeps pointing at the message it brought back while messages
 *    before it come and go (a system prompt set or removed).
 *
 * Adding to it: the state lives in
 * ui_session_internal.h; an action changes it, tells the user through the
 * frontend, and returns the UI_CHANGED_* flags it gathered; the screen
 * reads what it shows through a getter here.  A change to the
 * conversation goes through uis_conversation_changed(), which saves it. */
#ifndef GLM_UI_SESSION_H
#define GLM_UI_SESSION_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat.h"
#include "chat_setup.h"
#include "conversation.h"
#include "decoder.h"
#include "engine.h"
#include "model.h"
#include "settings.h"
#include "tokenizer.h"
#include "ui_frontend.h"

typedef struct {
    settings cfg;                   /* settings file + command line */
    const model *m;                 /* the model and tokenizer outlive the session */
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
    const char *backend_note;       /* non-NULL: why backend auto picked the one it did */
    const char *pick_note;          /* non-NULL: which of several files in the models directory was taken */
    uint64_t seed;                  /* the session's seed (given or random) */
    const char *conversation_file;  /* -C FILE: autosave into it */
    conversation *initial;          /* moved into the session (left empty), or NULL */
    char conv_dir[PATH_MAX];        /* where autosaves go */
    const char *model_lines[4];     /* the model's summary for the side pane */
    int n_model_lines;
    /* /model FILE: opens another model as the command line would with
     * -m FILE (its header, tokenizer and template, on the UI thread; the
     * weights then load on the decode thread, as at start); NULL: /model
     * only lists. */
    int (*open_model)(void *user, const char *path, chat_model *out, err_t *err);
    void *open_model_user;
} ui_session_config;

/* Points the model fields of c (model, tokenizer, template, backends,
 * engine parameters, path, name, fingerprint, size, notes, summary) at cm,
 * which must outlive the session (or the next /model). */
void ui_session_config_set_model(ui_session_config *c, const chat_model *cm);

typedef struct ui_session ui_session;

/* NULL when out of memory.  fe must outlive the session. */
ui_session *ui_session_new(const ui_session_config *c, const ui_frontend *fe);
void ui_session_free(ui_session *s);

/* ---- the engine ------------------------------------------------------------------ */

/* Starts the decode thread; the engine loads on it (progress, then ready
 * or an error, arrive through ui_session_pump). */
unsigned ui_session_start(ui_session *s);
/* Readable while decoder events wait; -1 when there is no decoder. */
int ui_session_fd(const ui_session *s);
/* Handles every waiting decoder event. */
unsigned ui_session_pump(ui_session *s);
/* Waits up to timeout_ms for one decoder event and handles it (tests, and
 * the way out); false when none came. */
bool ui_session_wait(ui_session *s, int timeout_ms, unsigned *changed);
/* Takes the decoder's latest statistics when they are new (UI_CHANGED_STATS). */
unsigned ui_session_poll_stats(ui_session *s);
/* On the way out: stops the answer (keeping what it said), ends the decode
 * thread, adds a message still queued to the conversation (unanswered),
 * and saves. */
void ui_session_wind_down(ui_session *s);

/* ---- what the screen shows ---------------------------------------------------------- */

const conversation *ui_session_conv(const ui_session *s);
bool ui_session_ready(const ui_session *s);
bool ui_session_load_failed(const ui_session *s);
bool ui_session_busy(const ui_session *s);
/* True while /replay runs; the turn in progress and the number of turns. */
bool ui_session_replaying(const ui_session *s, int *turn, int *n_turns);
/* The message /edit brought back, NULL when not editing. */
const char *ui_session_edit_text(const ui_session *s);
/* Any message besides the system prompt. */
bool ui_session_has_turns(const ui_session *s);
/* The answer being generated for the chat (not for a replay), NULL when
 * none; *job tells one answer from the next. */
const chat_stream *ui_session_live(const ui_session *s, int *job);
/* Its header: the prompt being read, then the rate. */
const char *ui_session_live_meta(const ui_session *s);
/* The latest statistics (decode_tps 0 from the start of each answer until
 * its first measurement); NULL before the first snapshot. */
const dec_stats *ui_session_stats(const ui_session *s);
/* The latest prompt's prefill rate (UI_CHANGED_PREFILL). */
double ui_session_prefill_tps(const ui_session *s);
/* The backend's description ("NAME" until it is ready). */
const char *ui_session_backend(const ui_session *s);
/* True while the engine loads, with its stage and the fraction done. */
bool ui_session_loading(const ui_session *s, const char **stage, double *frac);
/* The decoder once the engine is ready, else NULL (/stats). */
decoder *ui_session_decoder(ui_session *s);

const settings *ui_session_settings(const ui_session *s);
const tmpl_preset *ui_session_template(const ui_session *s);
bool ui_session_thinking(const ui_session *s);
/* The sampler settings for the next answer (template family defaults,
 * then the settings file, the command line and /set). */
void ui_session_sampling(const ui_session *s, sampler_params *sp);
/* The file new turns are saved into, "" before the first save. */
const char *ui_session_autosave_path(const ui_session *s);
/* Changes not on disk (the last save failed). */
bool ui_session_unsaved(const ui_session *s);
/* At the end: the file that holds the conversation (after /load and
 * nothing new, the file it came from), NULL when there was nothing worth
 * saving or the last save failed. */
const char *ui_session_saved_path(const ui_session *s);

/* ---- chatting -------------------------------------------------------------------------- */

/* A message from the user; queued (and sent when possible) while an answer
 * runs or the model loads. */
unsigned ui_session_send(ui_session *s, const char *text);
/* Answers the conversation as it is. */
unsigned ui_session_answer(ui_session *s);
/* Drops the last answer and answers the last message again. */
unsigned ui_session_retry(ui_session *s);
/* Stops the answer; what it said so far is kept. */
unsigned ui_session_cancel(ui_session *s);
/* /edit: brings the last message of the user back (ui_session_edit_text);
 * the status line says so, or that there is nothing to edit. */
unsigned ui_session_edit(ui_session *s);
unsigned ui_session_edit_cancel(ui_session *s);
/* Replaces the message being edited (and all after it) by text and answers
 * it.  False while an answer runs: the text is not taken (reported). */
bool ui_session_edit_finish(ui_session *s, const char *text, unsigned *changed);
/* Sets the system prompt; "" removes it. */
unsigned ui_session_set_system(ui_session *s, const char *text);
/* A new conversation: the system prompt stays, the next turn goes to a new
 * file (the old conversation stays in its own).  Like /load and /replay,
 * for when no answer runs (the commands refuse otherwise). */
unsigned ui_session_clear(ui_session *s);

/* /undo: removes the last message of the user and everything after it
 * (an answer, a stopped or an unwanted one); the file follows.  Like
 * /clear, for when no answer runs. */
unsigned ui_session_undo(ui_session *s);

/* ---- settings ---------------------------------------------------------------------------- */

/* /set ctx N: starts the engine again with a context of N tokens (0, as
 * with -c 0: the largest that fits, told in a note once it is known).
 * Refused, with one line that says why, while an answer runs and when N
 * cannot hold the next answer to the conversation (its shortest prompt as
 * context-overflow allows, and room for the answer). */
unsigned ui_session_set_ctx(ui_session *s, uint32_t n_ctx);
/* The context the engine has (0 before it is ready); the exchanges the
 * last prompt left out and its tokens. */
uint32_t ui_session_n_ctx(const ui_session *s, size_t *dropped, uint32_t *prompt);

/* /set KEY VALUE for a sampling key or context-overflow; -1 + err for a bad value. */
int ui_session_set(ui_session *s, const char *key, const char *value, err_t *err);
unsigned ui_session_set_template(ui_session *s, const tmpl_preset *tmpl);
unsigned ui_session_set_thinking(ui_session *s, bool on);

/* ---- files ------------------------------------------------------------------------------------ */

/* Fills c's metadata (model, template, sampling) as the session would save it. */
void ui_session_fill_metadata(const ui_session *s, conversation *c);
/* Saves to the autosave file (made on first use); false on failure (noted). */
bool ui_session_autosave(ui_session *s);
/* Saves a copy to path (the autosave file stays the same).  An existing
 * file that is not a conversation is replaced only when `replace`; one that
 * is not a regular file (a device, a FIFO, a directory) never. */
int ui_session_save_copy(ui_session *s, const char *path, bool replace, err_t *err);
/* Writes the conversation as Markdown, atomically, 0600 (also where it
 * replaces a file).  An existing file that is not an export of glmchat is
 * replaced only when `replace`; a symbolic link, a directory, a device, a
 * FIFO or a socket never. */
int ui_session_export(ui_session *s, const char *path, bool replace, err_t *err);
/* Continues a loaded conversation (taken over; c is left empty); `name`
 * for the note.  New turns go to a new file: the loaded one is never
 * written to. */
unsigned ui_session_load(ui_session *s, conversation *c, const char *name);
/* /resume: continues a saved conversation in its own file (taken over; c
 * is left empty): new turns are saved into path. */
unsigned ui_session_resume(ui_session *s, conversation *c, const char *path);
/* ---- the model ------------------------------------------------------------------------ */

/* The model file in use ("(built-in demo model)" for the demo) and its
 * summary for the side pane. */
const char *ui_session_model_path(const ui_session *s);
const char *const *ui_session_model_lines(const ui_session *s, int *n);
/* /model FILE: unloads the model and loads FILE (opened on this thread,
 * its weights on the decode thread with progress, as at start).  The
 * conversation goes on when the new model's template is the one it is
 * rendered with now (another file of the same model); else a new
 * conversation begins, the old one staying in its file.  Refused while an
 * answer runs; a file that does not open leaves everything as it was
 * (noted). */
unsigned ui_session_switch_model(ui_session *s, const char *path);

/* The directory autosaves go into (/list). */
const char *ui_session_conv_dir(const ui_session *s);
/* Re-runs the user messages of a loaded conversation with the current model
 * and settings, the recorded and the new answer side by side (c is taken
 * over and left empty). */
unsigned ui_session_start_replay(ui_session *s, conversation *c, const char *name);

#endif
