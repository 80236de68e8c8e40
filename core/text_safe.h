/* text_safe.h: UTF-8 decoding and repair, and the inert form of control characters.
 *
 * Model output and loaded files may hold escape sequences meant to drive a
 * terminal (e.g. "\x1b]0;pwned\x07" retitles the window, "\x1b]52;c;...\x07"
 * writes the clipboard).  tsafe_sanitize() turns every control character
 * into a visible, inert form (ESC -> "^[", DEL -> "^?", C1 controls and bidi
 * overrides -> "<U+XXXX>") and invalid UTF-8 into U+FFFD (so a raw 0x9b, an
 * 8-bit CSI to some terminals, never passes); \n and \t are kept.  With
 * `markers`, each inert form is bracketed by TSAFE_MARK_ON / TSAFE_MARK_OFF,
 * bytes that sanitized text never otherwise contains, so a UI can draw the
 * forms in their own style.
 *
 * Promises: this is the one sanitiser of the project.  Every string that
 * came from a file (a model's metadata and vocabulary, a conversation, a
 * theme, the settings) goes through it before it reaches a terminal: error
 * messages (err_set sanitises every err_t, core/error.c), the chat's
 * screen, `-p` on a terminal, `info`, `bench`, `replay`, `tokenize`, and
 * `detokenize` and `template` when their output is a terminal.  Sanitized
 * text is a fixed point: sanitizing it again changes nothing. */
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
/* The code points shown inert instead of obeyed: C0 controls (\n and \t
 * too: callers that keep them handle them first), DEL, the C1 controls
 * U+0080..U+009F and the bidi controls. */
bool tsafe_is_control(uint32_t cp);
/* Appends the inert form of s (see above). */
void tsafe_sanitize(sbuf *out, const char *s, size_t n, bool markers);
/* The same for text that must stay on one line (error messages): newlines
 * and tabs become ^J and ^I too. */
void tsafe_one_line(sbuf *out, const char *s, size_t n);
/* tsafe_one_line into dst (cap > 0 bytes, NUL-terminated), allocating
 * nothing (for error messages); what does not fit is left out, whole
 * characters and inert forms only.  Returns the length written. */
size_t tsafe_one_line_buf(char *dst, size_t cap, const char *s, size_t n);

#endif
