/* ui_frontend.c: formatted notes and status messages. */
#include "ui_frontend.h"

#include <stdarg.h>
#include <stdio.h>

void ui_note(const ui_frontend *fe, ui_level level, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fe->note(fe->user, level, buf);
}

void ui_status(const ui_frontend *fe, ui_level level, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fe->status(fe->user, level, buf);
}
