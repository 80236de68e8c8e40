/* ui_text.c: sanitizing untrusted text, display widths, wrapping. */
#include "ui_text.h"

#include <wchar.h>

/* ---- widths ----------------------------------------------------------------------- */

int ui_cp_width(uint32_t cp)
{
    if (cp >= 0x20 && cp < 0x7f)
        return 1; /* printable ASCII, the common case, without wcwidth() */
    int w = wcwidth((wchar_t)cp);
    if (w >= 0)
        return w > 2 ? 2 : w;
    /* Unprintable in this locale: the drawer shows a one-cell replacement. */
    return 1;
}

/* One unit: a marked control form, or a code point with its combining marks. */
typedef struct {
    size_t end;
    int width;  /* cells at column `col` */
    int space;  /* a break opportunity (space or tab) */
} unit;

static unit next_unit(const char *s, size_t n, size_t pos, int col)
{
    unit u = {pos, 0, 0};
    /* Printable ASCII followed by ASCII (no combining mark can follow): the
     * common case, without decoding. */
    unsigned char c = (unsigned char)s[pos];
    if (c >= 0x20 && c < 0x7f && (pos + 1 == n || (unsigned char)s[pos + 1] < 0x80)) {
        u.end = pos + 1;
        u.width = 1;
        u.space = c == ' ';
        return u;
    }
    if (s[pos] == TSAFE_MARK_ON) {
        size_t p = pos + 1;
        while (p < n && s[p] != TSAFE_MARK_OFF) {
            uint32_t cp;
            p += tsafe_decode(s + p, n - p, &cp);
            u.width += ui_cp_width(cp);
        }
        u.end = p < n ? p + 1 : n;
        return u;
    }
    uint32_t cp;
    size_t p = pos + tsafe_decode(s + pos, n - pos, &cp);
    if (cp == '\t') {
        u.end = p;
        u.width = UI_TAB_WIDTH - col % UI_TAB_WIDTH;
        u.space = 1;
        return u;
    }
    u.width = ui_cp_width(cp);
    u.space = cp == ' ';
    /* Zero-width code points that follow belong to this one. */
    while (p < n && s[p] != TSAFE_MARK_ON && s[p] != TSAFE_MARK_OFF) {
        uint32_t next;
        size_t l = tsafe_decode(s + p, n - p, &next);
        if (next == '\t' || next == ' ' || ui_cp_width(next) != 0 || next < 0x20)
            break;
        p += l;
    }
    if (s[pos] == TSAFE_MARK_OFF)
        u.width = 0;
    u.end = p;
    return u;
}

int ui_text_width(const char *s, size_t n)
{
    int col = 0;
    for (size_t p = 0; p < n;) {
        unit u = next_unit(s, n, p, col);
        col += u.width;
        p = u.end;
    }
    return col;
}

/* ---- wrapping ------------------------------------------------------------------------ */

void ui_wrap(const char *s, size_t n, int width, ui_wrap_mode mode,
             void (*emit)(void *user, ui_span span), void *user)
{
    if (width < 1)
        width = 1;
    size_t start = 0, p = 0;
    int col = 0;
    size_t brk = 0;      /* byte after the last space on this line */
    size_t brk_sp = 0;   /* byte of that space (the line then ends before it) */
    bool have_brk = false, emitted = false;
    while (p < n) {
        unit u = next_unit(s, n, p, col);
        if (col + u.width <= width || p == start) {
            /* It fits (or is alone on the line and must go somewhere). */
            if (u.space && mode == UI_WRAP_WORDS && p > start) {
                brk_sp = p;
                brk = u.end;
                have_brk = true;
            }
            col += u.width;
            p = u.end;
            continue;
        }
        if (mode == UI_WRAP_WORDS && u.space) {
            /* Break at this space; it and the spaces after it are dropped. */
            emit(user, (ui_span){start, p - start, col});
            while (p < n && (s[p] == ' ' || s[p] == '\t'))
                p++;
            start = p;
        } else if (mode == UI_WRAP_WORDS && have_brk) {
            /* Carry the word in progress over to the next line. */
            emit(user, (ui_span){start, brk_sp - start, ui_text_width(s + start, brk_sp - start)});
            start = p = brk;
        } else {
            emit(user, (ui_span){start, p - start, col});
            start = p;
        }
        emitted = true;
        col = 0;
        have_brk = false;
    }
    if (start < n || !emitted)
        emit(user, (ui_span){start, n - start, col});
}
