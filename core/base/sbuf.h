/* sbuf.h: a growable byte string (always NUL-terminated). */
#ifndef GLM_SBUF_H
#define GLM_SBUF_H

#include <stddef.h>

typedef struct {
    char *s;    /* NULL until the first append; use sbuf_str() for a safe view */
    size_t len;
    size_t cap;
} sbuf;

/* Appends; on allocation failure the process aborts (out of memory is not a
 * condition the UI can recover from meaningfully with a half-built string). */
void sbuf_add(sbuf *b, const char *s, size_t n);
void sbuf_adds(sbuf *b, const char *s);
void sbuf_addc(sbuf *b, char c);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_clear(sbuf *b);
void sbuf_free(sbuf *b);
const char *sbuf_str(const sbuf *b);
/* Hands the string to the caller (malloc'd, never NULL) and empties b. */
char *sbuf_take(sbuf *b);

#endif
