/* text_safe.c: UTF-8 decoding and sanitizing of untrusted text. */
#include "text_safe.h"

#include <stdio.h>

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

void tsafe_sanitize(sbuf *out, const char *s, size_t n, bool markers)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = tsafe_decode(s + i, n - i, &cp);
        char form[16];
        if (cp == '\n' || cp == '\t') {
            sbuf_addc(out, (char)cp);
        } else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || is_bidi_control(cp)) {
            if (cp < 0x20 || cp == 0x7f)
                snprintf(form, sizeof form, "^%c", (char)(cp ^ 0x40));
            else
                snprintf(form, sizeof form, "<U+%04X>", (unsigned)cp);
            if (markers)
                sbuf_addc(out, TSAFE_MARK_ON);
            sbuf_adds(out, form);
            if (markers)
                sbuf_addc(out, TSAFE_MARK_OFF);
        } else if (cp == 0xfffd && len == 1) {
            tsafe_encode(out, 0xfffd);
        } else {
            sbuf_add(out, s + i, len);
        }
        i += len;
    }
}

void tsafe_one_line(sbuf *out, const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\n' && s[i] != '\t')
            continue;
        tsafe_sanitize(out, s + start, i - start, false);
        if (i < n)
            sbuf_adds(out, s[i] == '\n' ? "^J" : "^I");
        start = i + 1;
    }
}
