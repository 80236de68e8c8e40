/* pretokenizer.h: splits text into words before BPE, per tokenizer.ggml.pre.
 *
 * Promises: the same word boundaries as llama.cpp for each pre-tokenizer it
 * names (glm4, llama-bpe, qwen2, deepseek-v3, deepseek-llm, gpt-2, default
 * and their aliases).  Text is read code point by code point the way
 * llama.cpp reads it (a byte that cannot start a sequence becomes U+FFFD),
 * and words come out as UTF-8 of those code points.  The regexes run on
 * PCRE2 (JIT when available). */
#ifndef GLM_PRETOKENIZER_H
#define GLM_PRETOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef struct pretok pretok;

/* name: the value of tokenizer.ggml.pre; NULL or "" means "default". */
pretok *pretok_new(const char *name, err_t *err);
void pretok_free(pretok *p);

const char *pretok_name(const pretok *p);
/* Whole words that are themselves tokens skip the merges (llama3 family). */
bool pretok_ignore_merges(const pretok *p);
/* Detokenized text gets llama.cpp's clean-up of spaces before punctuation. */
bool pretok_clean_spaces(const pretok *p);
/* Comma-separated list of the pre-tokenizer names understood. */
const char *pretok_names(void);

/* Calls word(ud, ptr, len) for each word of text[0..len), in order; a
 * non-zero return from word stops the split and is returned.  -1 + err on
 * a regex engine failure. */
typedef int (*pretok_word_fn)(void *ud, const char *word, size_t len);
int pretok_split(const pretok *p, const char *text, size_t len, pretok_word_fn word, void *ud,
                 err_t *err);

#endif
