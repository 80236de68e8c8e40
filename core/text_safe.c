/* text_safe.c: UTF-8 decoding and sanitizing of untrusted text. */
#include "text_safe.h"

#include <stdio.h>
#include <string.h>

size_t tsafe_decode(const char *str, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if ((c & 0xe0) == 0xc0)
        len = 2, v = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        len = 3, v = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        goto bad;
    if (len > n)
        goto bad;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            goto bad;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xfffd;
    return 1;
}

void tsafe_encode(sbuf *out, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        b[2] = (char)(0x80 | (cp >> 6 & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    }
    sbuf_add(out, b, n);
}

void tsafe_repair(sbuf *out, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = tsafe_decode(s + i, n - i, &cp);
        if (cp == 0xfffd && len == 1 && (unsigned char)s[i] >= 0x80)
            tsafe_encode(out, 0xfffd);
        else
            sbuf_add(out, s + i, len);
        i += len;
    }
}

bool tsafe_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = tsafe_decode(s + i, n - i, &cp);
        if (cp == 0xfffd && len == 1 && (unsigned char)s[i] >= 0x80)
            return false;
        i += len;
    }
    return true;
}

/* Code points that reorder or hide text (bidi embeddings, overrides,
 * isolates and marks: "Trojan Source"), shown by number instead of obeyed. */
static bool is_bidi_control(uint32_t cp)
{
    return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e ||
           cp == 0x200f || cp == 0x061c;
}

bool tsafe_is_control(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || is_bidi_control(cp);
}

/* Where sanitized text goes: a growing sbuf, or a fixed buffer that takes
 * whole pieces only (never half a character or half an inert form). */
typedef struct {
    sbuf *sb;
    char *buf;
    size_t cap, len;
    bool full;
} sink;

static void put(sink *k, const char *s, size_t n)
{
    if (k->sb) {
        sbuf_add(k->sb, s, n);
        return;
    }
    if (k->full || k->len + n >= k->cap) {
        k->full = true;
        return;
    }
    memcpy(k->buf + k->len, s, n);
    k->len += n;
    k->buf[k->len] = 0;
}

/* The one sanitiser (see text_safe.h); one_line: \n and \t inert too. */
static void sanitize_to(sink *k, const char *s, size_t n, bool markers, bool one_line)
{
    static const char fffd[] = "\xef\xbf\xbd";
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = tsafe_decode(s + i, n - i, &cp);
        char form[16];
        if ((cp == '\n' || cp == '\t') && !one_line) {
            put(k, s + i, 1);
        } else if (tsafe_is_control(cp)) {
            int fl = cp < 0x20 || cp == 0x7f ? snprintf(form, sizeof form, "^%c", (char)(cp ^ 0x40))
                                             : snprintf(form, sizeof form, "<U+%04X>", (unsigned)cp);
            if (markers) {
                char marked[sizeof form + 2];
                marked[0] = TSAFE_MARK_ON;
                memcpy(marked + 1, form, (size_t)fl);
                marked[fl + 1] = TSAFE_MARK_OFF;
                put(k, marked, (size_t)fl + 2);
            } else {
                put(k, form, (size_t)fl);
            }
        } else if (cp == 0xfffd && len == 1) {
            put(k, fffd, 3);
        } else {
            put(k, s + i, len);
        }
        i += len;
    }
}

void tsafe_sanitize(sbuf *out, const char *s, size_t n, bool markers)
{
    sink k = {.sb = out};
    sanitize_to(&k, s, n, markers, false);
}

void tsafe_one_line(sbuf *out, const char *s, size_t n)
{
    sink k = {.sb = out};
    sanitize_to(&k, s, n, false, true);
}

size_t tsafe_one_line_buf(char *dst, size_t cap, const char *s, size_t n)
{
    sink k = {.buf = dst, .cap = cap};
    dst[0] = 0;
    sanitize_to(&k, s, n, false, true);
    return k.len;
}
