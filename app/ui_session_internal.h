/* ui_session_internal.h: the session's state, shared by the files that make
 * up the module (ui_session.c: the engine, answers and chatting;
 * ui_session_files.c: saving and loading; ui_session_replay.c: /replay).
 * Nothing outside those files includes this. */
#ifndef GLM_UI_SESSION_INTERNAL_H
#define GLM_UI_SESSION_INTERNAL_H

#include "ui_session.h"

typedef enum { GEN_NONE, GEN_CHAT, GEN_REPLAY } uis_gen;

struct ui_session {
    ui_session_config c;
    const ui_frontend *fe;
    unsigned changed;               /* UI_CHANGED_* since the last public call returned */
    settings cfg;                   /* current settings (/set changes them) */
    chat_session chat;
    decoder *dec;
    bool ready, load_failed;
    bool closing;                   /* winding down: queued messages are kept, not answered */
    /* the engine, as the side pane shows it */
    char backend[256];              /* as decoder_describe() gives it (up to 255 bytes) */
    bool loading;
    char load_stage[64];
    double load_frac;
    dec_stats stats;
    bool have_stats;
    uint64_t last_seq;
    double prefill_sample;
    /* the answer being generated */
    int job;                        /* the decoder's job id, 0: none */
    uis_gen gen;
    chat_stream stream;
    char live_meta[128];
    uint32_t gen_prompt, gen_reused;
    uint64_t gen_seed;              /* the seed the answer is sampled with (recorded with it) */
    double gen_prefill_tps;
    char *queued;                   /* a message typed while busy */
    long edit_index;                /* /edit: the message being rewritten, -1 */
    /* /replay */
    chat_session replay;
    bool replay_active;
    size_t replay_next;             /* where to look for the next question */
    size_t replay_question;         /* the current question's index */
    int replay_turn, replay_turns;
    double replay_new_tps;
    bool replay_done, replay_stopped;
    double replay_old_sum, replay_new_sum;
    /* the context */
    bool ctx_announce;              /* say what context the engine chose when it is ready (/set ctx 0) */
    uint32_t ctx_prompt;            /* tokens of the last prompt */
    size_t ctx_dropped;             /* exchanges it left out (context-overflow trim) */
    size_t ctx_dropped_noted;       /* ... as the chat was last told */
    /* saving */
    char autosave_path[PATH_MAX];
    bool autosave_ours;             /* made by this session: it goes when nothing is left to keep */
    bool unsaved;                   /* changes not on disk (a save failed) */
    char loaded_from[PATH_MAX];     /* /load's file while nothing new was added ("" otherwise) */
    /* the model */
    chat_model *own_model;          /* opened by /model (the first is the caller's), NULL */
};

/* What changed since the last public call returned (and forgets it). */
unsigned uis_take_changes(ui_session *s);

/* Starts an answer to the first n_msgs messages of chat, sampled with
 * `seed`; -1 when it could not start (noted), -2 when the last message
 * alone (with the system prompt) is larger than the context allows. */
int uis_submit(ui_session *s, chat_session *chat, size_t n_msgs, uis_gen kind, uint64_t seed);
/* The seed for a new answer: the one the user set (command line, settings
 * file, /set seed), else a new one for every answer -- so /retry gives
 * another answer, and each answer records its own. */
uint64_t uis_answer_seed(const ui_session *s);
/* The answer is over: forget its stream. */
void uis_end_generation(ui_session *s);

/* The context of the conversation starts anew (/clear, /load): nothing left out yet. */
void uis_context_reset(ui_session *s);

/* The conversation changed: tell the screen and save it. */
void uis_conversation_changed(ui_session *s);
bool uis_autosave(ui_session *s);
bool uis_worth_saving(const conversation *c);

/* /replay's side of the decoder's events. */
void uis_replay_text(ui_session *s);
void uis_replay_done(ui_session *s, const dec_event *ev);
void uis_replay_end(ui_session *s);

#endif
