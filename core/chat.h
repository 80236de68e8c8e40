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
 *    when the prompt already opened the reasoning block.
 *  - chat_prompt_fit() makes a prompt that leaves `reserve` tokens of the
 *    context for the answer by leaving out the fewest oldest whole exchanges
 *    (a user message and what answered it); never the system prompt, never
 *    the exchange of the last user message.  The conversation itself is not
 *    changed: what was left out is only missing from that prompt.
 *  - chat_prompt_fit() tokenizes no message that cannot be in a prompt that
 *    fits: a text of B bytes is at least B / tok_max_piece() tokens (every
 *    token stands for at most that many bytes), so a message far too long
 *    for the context (over twice its room: a 100 MB paste) is judged from
 *    its length, and the tokens it would take are reported as a lower
 *    bound (chat_fit.bounded). */
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

/* ---- fitting the context ---- */

/* What happens when the conversation outgrows the context. */
typedef enum {
    CHAT_CTX_TRIM,  /* leave the oldest exchanges out of the prompt (with a note) */
    CHAT_CTX_STOP,  /* refuse to answer until the user makes room */
} chat_ctx_policy;

/* "trim" / "stop". */
const char *chat_ctx_policy_name(chat_ctx_policy p);
/* Parses a name of chat_ctx_policy_name(); -1 for anything else. */
int chat_ctx_policy_parse(const char *name, chat_ctx_policy *out);

typedef struct {
    int32_t *ids;                /* the prompt (malloc'd); NULL when !fits */
    uint32_t n_ids;
    bool opens_think;
    bool fits;                   /* n_ids + reserve <= n_ctx */
    size_t first_kept;           /* index of the first message after the system
                                    prompt that is in the prompt */
    size_t n_dropped;            /* messages left out (the oldest, after the system prompt) */
    size_t n_dropped_exchanges;
    uint32_t n_full;             /* tokens of the prompt with every message */
    uint32_t n_least;            /* tokens of the smallest prompt allowed (the system
                                    prompt and the last exchange); 0 when not measured */
    uint32_t n_ctx, reserve;     /* as asked */
    chat_ctx_policy policy;
    bool bounded;                /* n_full / n_least are lower bounds from the messages'
                                    lengths: too long to be worth tokenizing */
} chat_fit;

/* Tokens of an n_ctx context kept free for the answer: n_predict when that
 * is smaller, else a quarter of the context (at most 1024), so a long
 * conversation still leaves room to answer. */
uint32_t chat_answer_reserve(uint32_t n_ctx, int n_predict);

/* The prompt for an answer to the first n_msgs messages within n_ctx tokens,
 * `reserve` of them kept for the answer.  With CHAT_CTX_STOP nothing is left
 * out.  When no allowed prompt fits, out->fits is false (not an error).
 * -1 + err for reserve >= n_ctx or a failure of chat_prompt(). */
int chat_prompt_fit(const chat_session *s, size_t n_msgs, uint32_t n_ctx, uint32_t reserve, chat_ctx_policy policy,
                    chat_fit *out, err_t *err);
/* chat_prompt_fit() leaving out at least the oldest min_dropped exchanges
 * (all that may go, when there are fewer) under CHAT_CTX_TRIM, even when
 * fewer would do: a chat that keeps them out keeps the start of its prompt,
 * and so the KV cache, from one answer to the next. */
int chat_prompt_fit_from(const chat_session *s, size_t n_msgs, uint32_t n_ctx, uint32_t reserve,
                         chat_ctx_policy policy, size_t min_dropped, chat_fit *out, err_t *err);
void chat_fit_free(chat_fit *f);
/* One line for the user about what was left out or why nothing fits
 * (appended to out); nothing when the whole conversation fits. */
void chat_fit_describe(const chat_fit *f, sbuf *out);

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
