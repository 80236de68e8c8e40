/* sbuf.c: growable strings. */
#include "sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void grow(sbuf *b, size_t need)
{
    if (need + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    b->s = s;
    b->cap = cap;
}

void sbuf_add(sbuf *b, const char *s, size_t n)
{
    grow(b, b->len + n);
    if (n)
        memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void sbuf_adds(sbuf *b, const char *s)
{
    sbuf_add(b, s, strlen(s));
}

void sbuf_addc(sbuf *b, char c)
{
    sbuf_add(b, &c, 1);
}

void sbuf_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    grow(b, b->len + (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sbuf_clear(sbuf *b)
{
    b->len = 0;
    if (b->s)
        b->s[0] = 0;
}

void sbuf_free(sbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

const char *sbuf_str(const sbuf *b)
{
    return b->s ? b->s : "";
}

char *sbuf_take(sbuf *b)
{
    if (!b->s)
        grow(b, 0), b->s[0] = 0;
    char *s = b->s;
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}
