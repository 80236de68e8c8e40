/* text_safe.h: UTF-8 decoding and repair, and the inert form of control characters.
 *
 * Model output and loaded files may hold escape sequences meant to drive a
 * terminal (e.g. "\x1b]0;pwned\x07" retitles the window).  tsafe_sanitize()
 * turns every control character into a visible, inert form (ESC -> "^[",
 * DEL -> "^?", C1 controls and bidi overrides -> "<U+XXXX>") and invalid
 * UTF-8 into U+FFFD; \n and \t are kept.  With `markers`, each inert form is
 * bracketed by TSAFE_MARK_ON / TSAFE_MARK_OFF, bytes that sanitized text never
 * otherwise contains, so a UI can draw the forms in their own style. */
#ifndef GLM_TEXT_SAFE_H
#define GLM_TEXT_SAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbuf.h"

#define TSAFE_MARK_ON '\x01'
#define TSAFE_MARK_OFF '\x02'

/* Decodes one sequence at s (n > 0 bytes available): returns its length and
 * the code point, or length 1 and U+FFFD for an invalid byte (overlong
 * forms, surrogates and values above U+10FFFF are invalid). */
size_t tsafe_decode(const char *s, size_t n, uint32_t *cp);
void tsafe_encode(sbuf *out, uint32_t cp);
/* Appends s with every invalid byte replaced by U+FFFD. */
void tsafe_repair(sbuf *out, const char *s, size_t n);
bool tsafe_valid(const char *s, size_t n);
/* Appends the inert form of s (see above). */
void tsafe_sanitize(sbuf *out, const char *s, size_t n, bool markers);
/* The same for text that must stay on one line (error messages): newlines
 * and tabs become ^J and ^I too. */
void tsafe_one_line(sbuf *out, const char *s, size_t n);

#endif
