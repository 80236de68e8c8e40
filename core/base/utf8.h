/* utf8.h: UTF-8 decoding and encoding helpers shared by the tokenizer.
 *
 * Two decoders on purpose: utf8_decode_lax() reads bytes the way llama.cpp
 * does before pre-tokenizing (only the lead byte's length and the
 * continuation bits are checked; each byte that cannot start a sequence
 * becomes U+FFFD), so token ids match it even on odd input.
 * utf8_valid_prefix() is the strict check (no overlongs, no surrogates,
 * nothing above U+10FFFF) used for text that leaves the program. */
#ifndef GLM_UTF8_H
#define GLM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one code point at s[0..n) (n >= 1); stores its byte length in
 * *used (>= 1).  Invalid input gives U+FFFD and *used = 1. */
uint32_t utf8_decode_lax(const unsigned char *s, size_t n, size_t *used);

/* Writes cp as UTF-8 into out (4 bytes room); returns the byte count.
 * Values above U+10FFFF are written as U+FFFD. */
size_t utf8_encode(uint32_t cp, char *out);

/* Strict check of the sequence starting at s[0] (n >= 1 bytes available):
 * returns its length (1..4) when it is a complete valid sequence, 0 when
 * the bytes so far are a valid but incomplete prefix, and -k when the
 * first k bytes (k >= 1) form an invalid (maximal) subpart to be replaced
 * by one U+FFFD. */
int utf8_check(const unsigned char *s, size_t n);

#endif
