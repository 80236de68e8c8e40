/* ui_text.h: display widths and wrapping of (sanitized) text.
 *
 * Untrusted text reaches the screen only after tsafe_sanitize() (core/base/text_safe.h)
 * with markers; this module measures and wraps such text in display cells:
 * wide (CJK) characters take two, combining characters none and stay with
 * their base character, marked control forms are never split. */
#ifndef GLM_UI_TEXT_H
#define GLM_UI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/text_safe.h"

#define UI_TAB_WIDTH 4

/* Cells of a code point on the terminal: 0 (combining), 1 or 2. */
int ui_cp_width(uint32_t cp);
/* Display cells of sanitized text (markers count 0, tabs advance to the next
 * multiple of UI_TAB_WIDTH from column 0). */
int ui_text_width(const char *s, size_t n);

typedef struct {
    size_t off, len; /* byte range of the visual line in the wrapped text */
    int width;       /* its display cells */
} ui_span;

typedef enum {
    UI_WRAP_WORDS,   /* break at spaces; words longer than the width are split */
    UI_WRAP_CHARS,   /* verbatim: break at the width exactly (code blocks) */
} ui_wrap_mode;

/* Wraps one logical line (no '\n') of sanitized text to `width` cells.
 * Calls emit once per visual line (at least once, for an empty line).
 * Never splits a UTF-8 sequence, a base character from its combining marks,
 * or a marked control form. */
void ui_wrap(const char *s, size_t n, int width, ui_wrap_mode mode,
             void (*emit)(void *user, ui_span span), void *user);

#endif
