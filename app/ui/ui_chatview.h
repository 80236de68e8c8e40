/* ui_chatview.h: the chat pane.
 *
 * Shows the conversation's messages (role colours, reasoning as a foldable
 * block, answers rendered from their Markdown by md_render (or as written,
 * F5), code blocks verbatim), glmchat's own notices, replay comparisons,
 * and the answer being generated; wraps by display cells; keeps a
 * scrollback position that stays put while text streams in below it.
 * All message text is untrusted and drawn only after tsafe_sanitize(). */
#ifndef GLM_UI_CHATVIEW_H
#define GLM_UI_CHATVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "chat/chat.h"
#include "chat/conversation.h"
#include "md/md_render.h"
#include "theme.h"
#include "ui_frontend.h"
#include "ui_panel.h"

typedef struct ui_line ui_line;
typedef struct ui_block ui_block;

typedef struct {
    const conversation *conv;
    ui_block *msg_blocks;      /* one per conversation message (caches) */
    size_t n_msg_blocks;
    ui_block *notes;           /* notices, errors, replays, in order */
    size_t n_notes, cap_notes;
    /* The answer being generated (NULL when none). */
    const chat_stream *live;
    const char *live_meta;
    bool live_think_toggled;
    ui_block *live_block;
    bool had_system;           /* the conversation began with a system prompt (notes move with it) */
    bool raw;                  /* F5: answers as written, not as Markdown */
    md_doc md;                 /* reused by every Markdown rendering */
    int scroll;                /* lines above the bottom, 0: follow */
    int last_total;
    int width, height;
    unsigned seq;
} ui_chatview;

extern const ui_panel ui_chatview_panel;

void ui_chatview_init(ui_chatview *v, const conversation *conv);
void ui_chatview_free(ui_chatview *v);
/* The conversation changed (any edit): re-render its messages. */
void ui_chatview_messages_changed(ui_chatview *v);
/* Drops every notice too (/clear, /load). */
void ui_chatview_reset(ui_chatview *v);

/* A note from glmchat (help, /stats, demo notice); el: TH_NOTICE or TH_ERROR. */
void ui_chatview_note(ui_chatview *v, theme_el el, const char *text);
/* A replay turn begins (a block of its own, after the notes so far), and
 * its new answer grows or ends (the latest block of that turn). */
void ui_chatview_replay(ui_chatview *v, const ui_replay_turn *t);
void ui_chatview_replay_update(ui_chatview *v, const ui_replay_turn *t);

/* The streaming answer: set while generating (NULL when done); set again
 * whenever it grew or its header changed. */
void ui_chatview_set_live(ui_chatview *v, const chat_stream *live, const char *meta);
/* F5: answers as written (true) or rendered from their Markdown. */
void ui_chatview_set_raw(ui_chatview *v, bool raw);
/* F3: folds or unfolds the reasoning of the latest answer. */
void ui_chatview_toggle_think(ui_chatview *v);

void ui_chatview_scroll(ui_chatview *v, int lines);
void ui_chatview_scroll_end(ui_chatview *v);

/* ASCII stand-ins for box and arrow characters when the locale is not UTF-8. */
bool ui_utf8_locale(void);

#endif
