/* md_runs.c: styled runs of sanitized text (what md4c's text callbacks
 * become before a block is wrapped), and the HTML entities md4c leaves to
 * its user. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"
#include "text_safe.h"
#include "ui_text.h"

int md_width(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return ui_text_width(s, n);
    return n > INT_MAX ? INT_MAX : (int)n;
}

void *md_grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * size);
    if (!q)
        abort();
    *cap = c;
    return q;
}

/* ---- runs ---------------------------------------------------------------------------- */

void mdr_clear(md_runs *r)
{
    sbuf_clear(&r->text);
    r->n = 0;
    r->col = 0;
    r->col_off = 0;
    r->sealed = false;
}

void mdr_free(md_runs *r)
{
    sbuf_free(&r->text);
    free(r->runs);
    memset(r, 0, sizeof *r);
}

/* Makes text[start ..] a run (or the end of the last one). */
static void add_run(md_runs *r, size_t start, uint8_t flags)
{
    size_t len = r->text.len - start;
    if (!len)
        return;
    if (r->n && !r->sealed && r->runs[r->n - 1].flags == flags) {
        r->runs[r->n - 1].len += len;
        return;
    }
    r->runs = md_grow(r->runs, &r->cap, r->n + 1, sizeof *r->runs);
    r->runs[r->n++] = (md_run){start, len, flags};
    r->sealed = false;
}

void mdr_add(md_runs *r, const char *s, size_t n, uint8_t flags)
{
    size_t start = r->text.len;
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\t' && s[i] != '\n')
            continue;
        tsafe_sanitize(&r->text, s + seg, i - seg, true);
        if (i < n && s[i] == '\n') {
            sbuf_addc(&r->text, '\n');
            r->col = 0;
            r->col_off = r->text.len;
        } else if (i < n) {
            r->col += md_width(sbuf_str(&r->text) + r->col_off, r->text.len - r->col_off);
            for (int to = (r->col / UI_TAB_WIDTH + 1) * UI_TAB_WIDTH; r->col < to; r->col++)
                sbuf_addc(&r->text, ' ');
            r->col_off = r->text.len;
        }
        seg = i + 1;
    }
    add_run(r, start, flags);
}

void mdr_copy(md_runs *r, const char *s, size_t n, uint8_t flags)
{
    size_t start = r->text.len;
    sbuf_add(&r->text, s, n);
    add_run(r, start, flags);
}

void mdr_seal(md_runs *r)
{
    r->sealed = true;
    r->col = 0;
    r->col_off = r->text.len;
}

void mdr_truncate(md_runs *r, size_t first)
{
    if (first >= r->n)
        return;
    r->text.len = r->runs[first].off;
    if (r->text.s)
        r->text.s[r->text.len] = 0;
    r->n = first;
    r->col = 0;
    r->col_off = r->text.len;
    r->sealed = true;
}

void mdr_cut(md_runs *r, size_t off)
{
    if (off >= r->text.len)
        return;
    while (r->n && r->runs[r->n - 1].off >= off)
        r->n--;
    if (r->n && r->runs[r->n - 1].off + r->runs[r->n - 1].len > off)
        r->runs[r->n - 1].len = off - r->runs[r->n - 1].off;
    r->text.len = off;
    r->text.s[off] = 0;
    r->col = 0;
    r->col_off = off;
}

/* ---- entities ------------------------------------------------------------------------- */

/* The named entities answers use; others show as written.  (HTML has some
 * 2,000 names; md4c reports any "&name;" and leaves the meaning to us.) */
static const struct {
    const char *name;
    uint32_t cp;
} entities[] = {
    {"amp", '&'},       {"lt", '<'},          {"gt", '>'},          {"quot", '"'},      {"apos", '\''},
    {"nbsp", 0xa0},     {"copy", 0xa9},       {"reg", 0xae},        {"trade", 0x2122},  {"hellip", 0x2026},
    {"mdash", 0x2014},  {"ndash", 0x2013},    {"lsquo", 0x2018},    {"rsquo", 0x2019},  {"ldquo", 0x201c},
    {"rdquo", 0x201d},  {"laquo", 0xab},      {"raquo", 0xbb},      {"bull", 0x2022},   {"middot", 0xb7},
    {"deg", 0xb0},      {"plusmn", 0xb1},     {"times", 0xd7},      {"divide", 0xf7},   {"micro", 0xb5},
    {"para", 0xb6},     {"sect", 0xa7},       {"euro", 0x20ac},     {"pound", 0xa3},    {"yen", 0xa5},
    {"cent", 0xa2},     {"larr", 0x2190},     {"rarr", 0x2192},     {"uarr", 0x2191},   {"darr", 0x2193},
    {"harr", 0x2194},   {"lArr", 0x21d0},     {"rArr", 0x21d2},     {"hArr", 0x21d4},   {"le", 0x2264},
    {"ge", 0x2265},     {"ne", 0x2260},       {"asymp", 0x2248},    {"infin", 0x221e},  {"sum", 0x2211},
    {"minus", 0x2212},  {"radic", 0x221a},    {"alpha", 0x3b1},     {"beta", 0x3b2},    {"gamma", 0x3b3},
    {"delta", 0x3b4},   {"epsilon", 0x3b5},   {"lambda", 0x3bb},    {"mu", 0x3bc},      {"pi", 0x3c0},
    {"sigma", 0x3c3},   {"theta", 0x3b8},     {"omega", 0x3c9},     {"Delta", 0x394},   {"Sigma", 0x3a3},
    {"Omega", 0x3a9},   {"ensp", 0x2002},     {"emsp", 0x2003},     {"thinsp", 0x2009}, {"zwj", 0x200d},
    {"zwnj", 0x200c},   {"shy", 0xad},        {"iexcl", 0xa1},      {"iquest", 0xbf},   {"frac12", 0xbd},
    {"frac14", 0xbc},   {"frac34", 0xbe},     {"sup2", 0xb2},       {"sup3", 0xb3},     {"check", 0x2713},
};

/* The code point of "&#...;" (s[0..n) with its '&' and ';'), U+FFFD for
 * zero, surrogates and values beyond Unicode (as CommonMark says). */
static uint32_t numeric_entity(const char *s, size_t n)
{
    bool hex = n > 3 && (s[2] == 'x' || s[2] == 'X');
    uint32_t v = 0;
    for (size_t i = hex ? 3 : 2; i + 1 < n; i++) {
        char c = s[i];
        uint32_t dig = c >= '0' && c <= '9' ? (uint32_t)(c - '0')
                       : hex && c >= 'a' && c <= 'f' ? (uint32_t)(c - 'a' + 10)
                       : hex && c >= 'A' && c <= 'F' ? (uint32_t)(c - 'A' + 10)
                                                     : 16;
        if (dig >= (hex ? 16u : 10u))
            return 0xfffd;
        v = v * (hex ? 16 : 10) + dig;
        if (v > 0x10ffff)
            return 0xfffd;
    }
    if (v == 0 || (v >= 0xd800 && v <= 0xdfff))
        return 0xfffd;
    return v;
}

uint32_t md_entity_cp(const char *s, size_t n)
{
    if (n >= 4 && s[0] == '&' && s[1] == '#' && s[n - 1] == ';')
        return numeric_entity(s, n);
    if (n >= 3 && s[0] == '&' && s[n - 1] == ';')
        for (size_t i = 0; i < sizeof entities / sizeof entities[0]; i++)
            if (strlen(entities[i].name) == n - 2 && !memcmp(entities[i].name, s + 1, n - 2))
                return entities[i].cp;
    return 0;
}

void mdr_add_entity(md_runs *r, const char *s, size_t n, uint8_t flags)
{
    uint32_t cp = md_entity_cp(s, n);
    if (!cp) {
        mdr_add(r, s, n, flags);
        return;
    }
    /* UTF-8, through mdr_add, so that a control character's entity is made
     * inert (and "&#9;" is a tab, expanded) like any other text. */
    char u[4];
    size_t k;
    if (cp < 0x80) {
        u[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        k = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        k = 4;
    }
    mdr_add(r, u, k, flags);
}
