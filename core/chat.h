/* chat.h: a chat session apart from any UI: the conversation, its template,
 * turning messages into prompt tokens, and splitting a streamed answer into
 * reasoning and content.  Used by the chat UI, `-p` and replay.
 *
 * Promises:
 *  - chat_prompt() renders the messages with the session's template and
 *    encodes template text with special tokens parsed, but the text of a
 *    message that contains special-token text (e.g. a user typing
 *    "<|assistant|>") as plain text: no message can inject a control token.
 *  - chat_stream follows <think>...</think> across token boundaries, also
 *    when the prompt already opened the reasoning block. */
#ifndef GLM_CHAT_H
#define GLM_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_template.h"
#include "conversation.h"
#include "error.h"
#include "sbuf.h"
#include "tokenizer.h"

#define CHAT_MAX_STOP 16

typedef struct {
    conversation conv;
    const tokenizer *tok;
    const tmpl_preset *tmpl;
    bool thinking;                 /* enable_thinking for templates that know it */
    int32_t stop[CHAT_MAX_STOP];   /* tokens that end an answer */
    uint32_t n_stop;
} chat_session;

/* conv is initialised empty. */
void chat_init(chat_session *s, const tokenizer *tok, const tmpl_preset *tmpl, bool thinking);
void chat_free(chat_session *s);
void chat_set_template(chat_session *s, const tmpl_preset *tmpl);

/* The prompt for an answer to the first n_msgs messages: malloc'd ids in
 * *ids.  *opens_think tells whether the prompt ends inside a reasoning block
 * (the answer starts as reasoning). */
int chat_prompt(const chat_session *s, size_t n_msgs, int32_t **ids, uint32_t *n_ids, bool *opens_think,
                err_t *err);

/* ---- the streamed answer ---- */
typedef struct {
    bool in_think;     /* inside <think> ... </think> */
    bool started;      /* any non-space content seen (a later <think> is text) */
    sbuf reasoning, content;
    char hold[16];     /* a possible partial tag at the end of the input so far */
    size_t n_hold;
} chat_stream;

void chat_stream_init(chat_stream *st, bool opens_think);
/* Feeds n bytes of answer text (a NUL byte becomes U+FFFD). */
void chat_stream_feed(chat_stream *st, const char *text, size_t n);
/* Flushes a held partial tag and trims the reasoning. */
void chat_stream_finish(chat_stream *st);
void chat_stream_free(chat_stream *st);

#endif
