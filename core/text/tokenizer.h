/* tokenizer.h: byte-level BPE (tokenizer.ggml.model = gpt2) read from GGUF.
 *
 * Promises: the same ids as llama.cpp for the pre-tokenizers it names
 * (tokenizer.ggml.pre: glm4, llama-bpe, qwen2, deepseek-v3, deepseek-llm,
 * ...); special tokens are matched only when asked (parse_special), so text
 * a user types can never inject a control token; decoding never splits a
 * UTF-8 sequence across the streaming decoder's output and turns invalid
 * bytes into U+FFFD. */
#ifndef GLM_TOKENIZER_H
#define GLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"

typedef struct tokenizer tokenizer;

tokenizer *tok_load(const gguf_ctx *ctx, err_t *err);
void tok_free(tokenizer *t);

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
enum {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

/* A vocabulary given directly (tok_load builds one from the GGUF keys;
 * tests and tools may build their own).  Strings are copied. */
typedef struct {
    uint32_t n_tokens;
    const gguf_str *tokens;    /* tokenizer.ggml.tokens */
    const int32_t *types;      /* tokenizer.ggml.token_type, or NULL (all normal) */
    uint64_t n_merges;
    const gguf_str *merges;    /* tokenizer.ggml.merges: "left right" */
    const char *pre;           /* tokenizer.ggml.pre, or NULL for "default" */
    int32_t bos, eos, eot, eom; /* -1 when absent */
} tok_vocab;

tokenizer *tok_new(const tok_vocab *v, err_t *err);

/* The pre-tokenizer in use (e.g. "glm4"). */
const char *tok_pre_name(const tokenizer *t);
int32_t tok_eom(const tokenizer *t);   /* -1 when the model has none */
/* Longest piece of any token, in bytes (for sizing stream buffers). */
size_t tok_max_piece(const tokenizer *t);
/* The text of a whole id sequence as llama.cpp's detokenizer writes it
 * (special tokens as their text; for most pre-tokenizers its clean-up of
 * spaces before punctuation and contractions).  malloc'd, NUL-terminated,
 * *len set; NULL + err on an id outside the vocabulary. */
char *tok_decode(const tokenizer *t, const int32_t *ids, size_t n, size_t *len, err_t *err);

uint32_t tok_n_vocab(const tokenizer *t);
int32_t tok_bos(const tokenizer *t);   /* -1 when the model has none */
int32_t tok_eos(const tokenizer *t);
int32_t tok_eot(const tokenizer *t);
/* Id of a token given by its exact text (e.g. "<|user|>"), -1 if absent. */
int32_t tok_find(const tokenizer *t, const char *text);
bool tok_is_control(const tokenizer *t, int32_t id);

/* Encodes len bytes of UTF-8 text.  Writes at most cap ids; returns the
 * number of ids the text needs (may exceed cap: call again with more room),
 * or -1 with err set. */
int64_t tok_encode(const tokenizer *t, const char *text, size_t len, bool parse_special,
                   int32_t *ids, size_t cap, err_t *err);

/* The bytes of one token (byte-level decoding applied); *len set.  Control
 * tokens give their text (e.g. "<|user|>"). */
const char *tok_piece(const tokenizer *t, int32_t id, size_t *len);

/* Streaming decoder: feed ids, get only complete UTF-8 sequences out. */
typedef struct {
    const tokenizer *t;
    unsigned char pending[8];
    size_t n_pending;
} tok_stream;

void tok_stream_init(tok_stream *s, const tokenizer *t);
/* Appends the decodable text of `id` to out (cap bytes incl. NUL); returns
 * bytes written. Incomplete trailing sequences are held back; invalid bytes
 * become U+FFFD.  cap >= TOK_STREAM_CAP(tok_max_piece(t)) always suffices;
 * with less, output past cap is dropped.  Ids outside the vocabulary give
 * nothing. */
#define TOK_STREAM_CAP(max_piece) (3 * ((max_piece) + 8) + 1)
size_t tok_stream_feed(tok_stream *s, int32_t id, char *out, size_t cap);
/* Flushes held-back bytes (as U+FFFD if they never completed). */
size_t tok_stream_flush(tok_stream *s, char *out, size_t cap);

#endif
