/* error.c: formatting of err_t messages. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(err_t *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int err_prefix(err_t *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof e->msg];
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof e->msg - 3)
        n = sizeof e->msg - 3;
    memcpy(e->msg, prefix, n);
    memcpy(e->msg + n, ": ", 2);
    size_t room = sizeof e->msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(e->msg + n + 2, old, m);
    e->msg[n + 2 + m] = 0;
    return -1;
}
