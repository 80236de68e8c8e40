/* error.c: formatting of err_t messages.
 *
 * Messages quote file names and file contents (a model's metadata, a
 * conversation's fields, a theme's values), so every message is kept in the
 * one-line inert form of text_safe.h as it is made: whichever of the many
 * places prints it, no escape sequence from a file reaches a terminal. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "text_safe.h"

int err_set(err_t *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    /* Formatted aside first: an argument may be e->msg itself. */
    char raw[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    tsafe_one_line_buf(e->msg, sizeof e->msg, raw, strlen(raw));
    return -1;
}

int err_prefix(err_t *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char raw[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    size_t at = n < 0 ? 0 : (size_t)n < sizeof raw ? (size_t)n : sizeof raw - 1;
    /* then ": " and as much of the old message as fits */
    for (const char *p = ": "; *p && at + 1 < sizeof raw; p++)
        raw[at++] = *p;
    size_t m = strnlen(e->msg, sizeof raw - 1 - at);
    memcpy(raw + at, e->msg, m);
    raw[at + m] = 0;
    tsafe_one_line_buf(e->msg, sizeof e->msg, raw, strlen(raw));
    return -1;
}
