/* md_inline.c: a paragraph's inline Markdown -> runs of styled, sanitized
 * text.  Three passes over the raw text:
 *   1. backtick runs, each paired with the next run of the same length
 *      (code spans bind tighter than anything else);
 *   2. tokens: text, escapes, code spans, emphasis delimiter runs with
 *      CommonMark's flanking rules, brackets closed into [links](url),
 *      <autolinks>;
 *   3. emphasis: CommonMark's delimiter stack (with its "rule of 3" and
 *      per-kind search floors, so no input makes it quadratic).
 * A style covers a range of tokens; ranges are kept as +1/-1 marks on the
 * tokens and summed on the way out, so nesting costs nothing extra. */
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"
#include "text_safe.h"
#include "ui_text.h"

#define MAX_TICKS 32   /* longer backtick runs never open a code span */
#define MAX_URL 2048   /* bytes of a link target looked at */
#define NONE ((size_t)-1)

enum { TK_TEXT, TK_DELIM, TK_CODE, TK_BRACKET, TK_HIDDEN, TK_URL, TK_AUTOLINK };
enum { ST_BOLD, ST_ITALIC, ST_STRIKE, ST_LINK, ST_COUNT };

typedef struct {
    uint8_t type;
    char ch;                /* TK_DELIM: '*', '_' or '~' */
    bool can_open, can_close;
    bool active;            /* TK_BRACKET: may still open a link */
    int count, remaining;   /* TK_DELIM: run length, characters not used by a match */
    size_t off, len;        /* source bytes */
    int32_t delta[ST_COUNT];/* style ranges starting (+1) or ending (-1) here */
} token;

typedef struct {
    size_t pos, len, next_same;
} tick_run;

struct md_inline_mem {
    token *tk;
    size_t n_tk, cap_tk;
    size_t *stack, *brackets;
    size_t n_stack, n_brackets, cap_stack, cap_brackets;
    tick_run *ticks;
    size_t n_ticks, cap_ticks;
};

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * size);
    if (!q)
        abort();
    *cap = c;
    return q;
}

void mdi_mem_free(md_inline_mem **mem)
{
    if (!*mem)
        return;
    free((*mem)->tk);
    free((*mem)->stack);
    free((*mem)->brackets);
    free((*mem)->ticks);
    free(*mem);
    *mem = NULL;
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
    r->runs = grow(r->runs, &r->cap, r->n + 1, sizeof *r->runs);
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

/* ---- character classes (ASCII; other bytes count as letters) ------------------------------ */

static bool ascii_punct(unsigned char c)
{
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

static bool white(const char *s, size_t n, size_t i)
{
    return i >= n || s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r';
}

/* ---- pass 1: backtick runs ------------------------------------------------------------ */

static void find_ticks(md_inline_mem *m, const char *s, size_t n)
{
    m->n_ticks = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '`') {
            i++;
            continue;
        }
        size_t k = i;
        while (k < n && s[k] == '`')
            k++;
        m->ticks = grow(m->ticks, &m->cap_ticks, m->n_ticks + 1, sizeof *m->ticks);
        m->ticks[m->n_ticks++] = (tick_run){i, k - i, NONE};
        i = k;
    }
    size_t last[MAX_TICKS + 1];
    for (size_t k = 0; k <= MAX_TICKS; k++)
        last[k] = NONE;
    for (size_t t = m->n_ticks; t-- > 0;) {
        size_t len = m->ticks[t].len;
        if (len > MAX_TICKS)
            continue;
        m->ticks[t].next_same = last[len];
        last[len] = t;
    }
}

/* ---- pass 2: tokens -------------------------------------------------------------------- */

static size_t push(md_inline_mem *m, uint8_t type, size_t off, size_t len)
{
    m->tk = grow(m->tk, &m->cap_tk, m->n_tk + 1, sizeof *m->tk);
    token *t = &m->tk[m->n_tk];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->off = off;
    t->len = len;
    return m->n_tk++;
}

static void push_text(md_inline_mem *m, size_t from, size_t to)
{
    if (to > from)
        push(m, TK_TEXT, from, to - from);
}

/* streaming: a run at the very end after a space may open what comes next. */
static void push_delim(md_inline_mem *m, const char *s, size_t n, size_t i, size_t k, bool streaming)
{
    char prev = i ? s[i - 1] : ' ', next = i + k < n ? s[i + k] : ' ';
    bool prev_ws = i == 0 || white(s, n, i - 1), next_ws = white(s, n, i + k);
    bool prev_p = !prev_ws && ascii_punct((unsigned char)prev), next_p = !next_ws && ascii_punct((unsigned char)next);
    bool left = !next_ws && (!next_p || prev_ws || prev_p);
    bool right = !prev_ws && (!prev_p || next_ws || next_p);
    token *t = &m->tk[push(m, TK_DELIM, i, k)];
    t->ch = s[i];
    t->count = t->remaining = (int)k;
    if (s[i] == '_') {
        t->can_open = left && (!right || prev_p);
        t->can_close = right && (!left || next_p);
    } else {
        t->can_open = left;
        t->can_close = right;
    }
    if (streaming && i + k == n && (prev_ws || prev_p))
        t->can_open = true;
}

/* "(dest)" at s[p] (just after ']'): the target's range and the byte after ')'. */
static bool link_dest(const char *s, size_t n, size_t p, size_t *off, size_t *len, size_t *end)
{
    if (p >= n || s[p] != '(')
        return false;
    p++;
    while (p < n && (s[p] == ' ' || s[p] == '\t'))
        p++;
    size_t start = p;
    int depth = 0;
    for (; p < n && p - start < MAX_URL; p++) {
        char c = s[p];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || (c == ')' && depth == 0))
            break;
        if (c == '(')
            depth++;
        else if (c == ')')
            depth--;
        else if (c == '\\' && p + 1 < n)
            p++;
    }
    size_t stop = p;
    /* An optional "title" (dropped). */
    while (p < n && (s[p] == ' ' || s[p] == '\t'))
        p++;
    if (p < n && (s[p] == '"' || s[p] == '\'')) {
        const char *q = memchr(s + p + 1, s[p], n - p - 1 < MAX_URL ? n - p - 1 : MAX_URL);
        if (!q)
            return false;
        p = (size_t)(q - s) + 1;
        while (p < n && (s[p] == ' ' || s[p] == '\t'))
            p++;
    }
    if (p >= n || s[p] != ')')
        return false;
    *off = start;
    *len = stop - start;
    *end = p + 1;
    return true;
}

/* "<scheme:...>" at s[i]: the URL's range. */
static bool autolink(const char *s, size_t n, size_t i, size_t *len)
{
    static const char *const schemes[] = {"http://", "https://", "mailto:", "ftp://"};
    bool ok = false;
    for (size_t k = 0; k < 4 && !ok; k++) {
        size_t l = strlen(schemes[k]);
        ok = n - i - 1 >= l && !strncmp(s + i + 1, schemes[k], l);
    }
    if (!ok)
        return false;
    for (size_t p = i + 1; p < n && p - i < MAX_URL; p++) {
        unsigned char c = (unsigned char)s[p];
        if (c == '>') {
            *len = p - i - 1;
            return true;
        }
        if (c <= ' ' || c == '<')
            return false;
    }
    return false;
}

/* ']' at s[i] closes the innermost bracket into a link when "(dest)" follows. */
static bool close_link(md_inline_mem *m, const char *s, size_t n, size_t i, size_t *text_start, size_t *next)
{
    if (!m->n_brackets)
        return false;
    size_t b = m->brackets[--m->n_brackets];
    size_t uoff, ulen, end;
    if (!m->tk[b].active || !link_dest(s, n, i + 1, &uoff, &ulen, &end))
        return false;
    push_text(m, *text_start, i);
    /* "![alt](src)": an image shows as its alt text, a link to it. */
    if (b > 0 && m->tk[b - 1].type == TK_TEXT && m->tk[b].off > 0 && s[m->tk[b].off - 1] == '!' &&
        m->tk[b - 1].off + m->tk[b - 1].len == m->tk[b].off)
        m->tk[b - 1].len--;
    m->tk[b].type = TK_HIDDEN;
    m->tk[b].delta[ST_LINK]++;
    size_t close = push(m, TK_HIDDEN, i, 1);
    m->tk[close].delta[ST_LINK]--;
    /* The target shows after the text unless it is the text. */
    size_t text_len = i - m->tk[b].off - 1;
    if (ulen && !(ulen == text_len && !memcmp(s + uoff, s + m->tk[b].off + 1, ulen)))
        push(m, TK_URL, uoff, ulen);
    for (size_t k = 0; k < m->n_brackets; k++)
        m->tk[m->brackets[k]].active = false; /* no links inside links */
    *text_start = *next = end;
    return true;
}

static void tokenize(md_inline_mem *m, const char *s, size_t n, bool streaming)
{
    m->n_tk = m->n_brackets = 0;
    size_t text_start = 0, ti = 0;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '\\' && i + 1 < n && (s[i + 1] == '\n' || ascii_punct((unsigned char)s[i + 1]))) {
            push_text(m, text_start, i);
            text_start = i + 1; /* the escaped character (or the line break) is text */
            i += 2;
            continue;
        }
        if (c == '`') {
            while (ti < m->n_ticks && m->ticks[ti].pos + m->ticks[ti].len <= i)
                ti++;
            const tick_run *t = &m->ticks[ti];
            if (t->pos != i) { /* the rest of a run whose first tick was escaped */
                i = t->pos + t->len;
                continue;
            }
            if (t->next_same != NONE || (streaming && t->len <= MAX_TICKS)) {
                push_text(m, text_start, i);
                size_t from = i + t->len;
                size_t to = t->next_same != NONE ? m->ticks[t->next_same].pos : n;
                push(m, TK_CODE, from, to - from);
                i = t->next_same != NONE ? to + t->len : n;
                ti = t->next_same != NONE ? t->next_same + 1 : m->n_ticks;
                text_start = i;
                continue;
            }
            i += t->len;
            continue;
        }
        if (c == '*' || c == '_' || c == '~') {
            size_t k = i;
            while (k < n && s[k] == c)
                k++;
            if (c == '~' && k - i != 2) {
                i = k;
                continue;
            }
            push_text(m, text_start, i);
            push_delim(m, s, n, i, k - i, streaming);
            i = text_start = k;
            continue;
        }
        if (c == '[') {
            push_text(m, text_start, i);
            size_t b = push(m, TK_BRACKET, i, 1);
            m->tk[b].active = true;
            m->brackets = grow(m->brackets, &m->cap_brackets, m->n_brackets + 1, sizeof *m->brackets);
            m->brackets[m->n_brackets++] = b;
            i = text_start = i + 1;
            continue;
        }
        size_t next;
        if (c == ']' && close_link(m, s, n, i, &text_start, &next)) {
            i = next;
            continue;
        }
        size_t ulen;
        if (c == '<' && autolink(s, n, i, &ulen)) {
            push_text(m, text_start, i);
            push(m, TK_AUTOLINK, i + 1, ulen);
            i = text_start = i + ulen + 2;
            continue;
        }
        i++;
    }
    push_text(m, text_start, n);
}

/* ---- pass 3: emphasis -------------------------------------------------------------------- */

static int kind_of(char ch)
{
    return ch == '*' ? 0 : ch == '_' ? 1 : 2;
}

/* Styles tokens (o, c) exclusive. */
static void add_range(md_inline_mem *m, size_t o, size_t c, int style)
{
    m->tk[o + 1].delta[style]++;
    m->tk[c].delta[style]--;
}

static void process_emphasis(md_inline_mem *m)
{
    /* floor[kind][closer can open][closer count % 3]: below it no opener for
     * such a closer exists (CommonMark's openers_bottom). */
    size_t floor[3][2][3] = {{{0}}};
    m->n_stack = 0;
    for (size_t c = 0; c < m->n_tk; c++) {
        token *t = &m->tk[c];
        if (t->type != TK_DELIM)
            continue;
        size_t *fl = &floor[kind_of(t->ch)][t->can_open][t->count % 3];
        while (t->can_close && t->remaining > 0) {
            size_t j = m->n_stack;
            token *o = NULL;
            while (j > *fl) {
                token *cand = &m->tk[m->stack[j - 1]];
                bool odd = (cand->can_close || t->can_open) && (cand->count + t->count) % 3 == 0 &&
                           !(cand->count % 3 == 0 && t->count % 3 == 0);
                if (cand->ch == t->ch && cand->remaining > 0 && !(t->ch != '~' && odd)) {
                    o = cand;
                    break;
                }
                j--;
            }
            if (!o) {
                *fl = m->n_stack;
                break;
            }
            size_t oi = m->stack[j - 1];
            int use = t->ch == '~' ? 2 : (o->remaining >= 2 && t->remaining >= 2 ? 2 : 1);
            if (o->remaining < use || t->remaining < use)
                break;
            o->remaining -= use;
            t->remaining -= use;
            add_range(m, oi, c, t->ch == '~' ? ST_STRIKE : use == 2 ? ST_BOLD : ST_ITALIC);
            /* Openers between the pair can no longer match. */
            m->n_stack = o->remaining > 0 ? j : j - 1;
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 2; b++)
                    for (int k = 0; k < 3; k++)
                        if (floor[a][b][k] > m->n_stack)
                            floor[a][b][k] = m->n_stack;
        }
        if (t->can_open && t->remaining > 0) {
            m->stack = grow(m->stack, &m->cap_stack, m->n_stack + 1, sizeof *m->stack);
            m->stack[m->n_stack++] = c;
        }
    }
}

/* Streaming: openers still waiting style everything after them. */
static void close_at_end(md_inline_mem *m)
{
    for (size_t j = 0; j < m->n_stack; j++) {
        size_t oi = m->stack[j];
        token *o = &m->tk[oi];
        if (o->remaining <= 0)
            continue;
        if (oi + 1 >= m->n_tk) { /* nothing after it yet: just hide it */
            o->remaining = 0;
            continue;
        }
        if (o->ch == '~')
            m->tk[oi + 1].delta[ST_STRIKE]++;
        if (o->ch != '~' && o->remaining >= 2)
            m->tk[oi + 1].delta[ST_BOLD]++;
        if (o->ch != '~' && o->remaining != 2)
            m->tk[oi + 1].delta[ST_ITALIC]++;
        o->remaining = 0;
    }
}

/* ---- out: runs ----------------------------------------------------------------------------- */

/* Code span text: line breaks become spaces; one space each side is padding. */
static void add_code(md_runs *out, const char *s, size_t n, uint8_t flags)
{
    bool all_space = true;
    for (size_t i = 0; i < n && all_space; i++)
        all_space = s[i] == ' ' || s[i] == '\n';
    if (n >= 2 && !all_space && (s[0] == ' ' || s[0] == '\n') && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        s++, n -= 2;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\n')
            continue;
        mdr_add(out, s + start, i - start, flags);
        if (i < n)
            mdr_add(out, " ", 1, flags);
        start = i + 1;
    }
}

static void emit(const md_inline_mem *m, const char *s, uint8_t base, md_runs *out)
{
    int32_t level[ST_COUNT] = {0};
    for (size_t i = 0; i < m->n_tk; i++) {
        const token *t = &m->tk[i];
        for (int k = 0; k < ST_COUNT; k++)
            level[k] += t->delta[k];
        uint8_t f = base;
        f |= level[ST_BOLD] > 0 ? MD_BOLD : 0;
        f |= level[ST_ITALIC] > 0 ? MD_ITALIC : 0;
        f |= level[ST_STRIKE] > 0 ? MD_STRIKE : 0;
        f |= level[ST_LINK] > 0 ? MD_LINK : 0;
        switch (t->type) {
        case TK_TEXT:
        case TK_BRACKET:
            mdr_add(out, s + t->off, t->len, f);
            break;
        case TK_DELIM:
            if (t->remaining > 0)
                mdr_add(out, s + t->off, (size_t)t->remaining, f);
            break;
        case TK_CODE:
            add_code(out, s + t->off, t->len, f | MD_CODE_INLINE);
            break;
        case TK_URL:
            mdr_add(out, " ", 1, f);
            mdr_add(out, "(", 1, f | MD_URL);
            mdr_add(out, s + t->off, t->len, f | MD_URL);
            mdr_add(out, ")", 1, f | MD_URL);
            break;
        case TK_AUTOLINK:
            mdr_add(out, s + t->off, t->len, f | MD_LINK);
            break;
        default:
            break;
        }
    }
}

void mdi_parse(md_inline_mem **mem, const char *s, size_t n, uint8_t base, bool streaming, md_runs *out)
{
    if (!*mem) {
        *mem = calloc(1, sizeof **mem);
        if (!*mem)
            abort();
    }
    md_inline_mem *m = *mem;
    find_ticks(m, s, n);
    tokenize(m, s, n, streaming);
    process_emphasis(m);
    if (streaming)
        close_at_end(m);
    emit(m, s, base, out);
}
