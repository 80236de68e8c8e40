/* md_lines.c: the doc's display lines: spans appended to the current line,
 * prefixes (quote bars, list indentation, bullets) that give way on narrow
 * widths, styled runs wrapped at the width, rules and code blocks. */
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"
#include "base/text_safe.h"
#include "common/ui_text.h"

#define MIN_CONTENT 10 /* cells of text a prefix leaves at least, when it can */

/* ---- lines and spans -------------------------------------------------------------------- */

void mdo_free_lines(md_doc *d)
{
    sbuf_free(&d->text);
    free(d->spans);
    free(d->lines);
    md_scratch *scratch = d->scratch; /* md_doc_free()'s to free */
    memset(d, 0, sizeof *d);
    d->scratch = scratch;
}

const char *md_span_text(const md_doc *d, const md_span *s)
{
    return sbuf_str(&d->text) + s->off;
}

void md_line_str(const md_doc *d, const md_line *l, sbuf *out)
{
    for (size_t i = 0; i < l->n; i++) {
        const md_span *s = &d->spans[l->first + i];
        sbuf_add(out, md_span_text(d, s), s->len);
    }
}

void mdo_line_begin(md_doc *d, md_line_kind kind)
{
    d->lines = md_grow(d->lines, &d->cap_lines, d->n_lines + 1, sizeof *d->lines);
    md_line *l = &d->lines[d->n_lines++];
    memset(l, 0, sizeof *l);
    l->first = d->n_spans;
    l->kind = (uint8_t)kind;
}

void mdo_span(md_doc *d, md_span_kind kind, uint8_t flags, uint8_t heading, const char *s, size_t n)
{
    if (!n || !d->n_lines)
        return;
    md_line *l = &d->lines[d->n_lines - 1];
    int w = md_width(s, n);
    l->width += w;
    if (l->n) {
        md_span *p = &d->spans[d->n_spans - 1];
        if (p->kind == kind && p->flags == flags && p->heading == heading && p->off + p->len == d->text.len) {
            sbuf_add(&d->text, s, n);
            p->len += n;
            p->width += w;
            return;
        }
    }
    d->spans = md_grow(d->spans, &d->cap_spans, d->n_spans + 1, sizeof *d->spans);
    md_span *sp = &d->spans[d->n_spans++];
    sp->off = d->text.len;
    sp->len = n;
    sp->width = w;
    sp->kind = (uint8_t)kind;
    sp->flags = flags;
    sp->heading = heading;
    sbuf_add(&d->text, s, n);
    l->n++;
}

void mdo_pad(md_doc *d, int cells)
{
    static const char spaces[] = "                                ";
    while (cells > 0) {
        int k = cells < 32 ? cells : 32;
        mdo_span(d, MDR_SPAN_PAD, 0, 0, spaces, (size_t)k);
        cells -= k;
    }
}

void mdo_prefix(md_doc *d, const md_prefix *p)
{
    for (int i = 0; i < p->n; i++)
        mdo_span(d, p->piece[i].kind, 0, 0, p->s + p->piece[i].off, p->piece[i].len);
}

void mdo_copy_line(md_doc *d, const md_doc *src, const md_line *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const md_span *s = &src->spans[l->first + i];
        mdo_span(d, s->kind, s->flags, s->heading, md_span_text(src, s), s->len);
    }
}

/* ---- prefixes ------------------------------------------------------------------------------- */

void mdp_clear(md_prefix *p)
{
    p->len = 0;
    p->n = 0;
    p->width = 0;
}

void mdp_add(md_prefix *p, md_span_kind kind, int cls, const char *s, size_t n)
{
    if (!n || p->len + n > sizeof p->s)
        return;
    int w = md_width(s, n);
    if (p->n && p->piece[p->n - 1].kind == kind && p->piece[p->n - 1].cls == cls && cls == MDP_INDENT &&
        p->piece[p->n - 1].off + p->piece[p->n - 1].len == p->len) { /* its text ends where this one's goes */
        p->piece[p->n - 1].len = (uint16_t)(p->piece[p->n - 1].len + n);
        p->piece[p->n - 1].width += w;
    } else {
        if (p->n == MDP_PIECES)
            return;
        p->piece[p->n].kind = (uint8_t)kind;
        p->piece[p->n].cls = (uint8_t)cls;
        p->piece[p->n].off = (uint16_t)p->len;
        p->piece[p->n].len = (uint16_t)n;
        p->piece[p->n].width = w;
        p->n++;
    }
    memcpy(p->s + p->len, s, n);
    p->len += n;
    p->width += w;
}

/* Drops the pieces `drop` says (piece index -> true). */
static void remove_pieces(md_prefix *p, const bool *drop)
{
    int k = 0;
    p->width = 0;
    for (int i = 0; i < p->n; i++) {
        if (drop[i])
            continue;
        p->piece[k++] = p->piece[i]; /* offsets stay: the text is not moved */
        p->width += p->piece[i].width;
    }
    p->n = k;
}

void mdp_fit(md_prefix *p, int width)
{
    int want = width < 2 * MIN_CONTENT ? width / 2 : MIN_CONTENT;
    bool drop[MDP_PIECES];
    for (int step = 0; step < 4 && width - p->width < want; step++) {
        bool first_bar = true;
        for (int i = 0; i < p->n; i++) {
            int cls = p->piece[i].cls;
            drop[i] = step == 0 ? cls == MDP_INDENT
                    : step == 1 ? cls == MDP_BAR && !first_bar
                    : step == 2 ? cls == MDP_BAR
                                : true;
            if (cls == MDP_BAR)
                first_bar = false;
        }
        remove_pieces(p, drop);
    }
}

void mdp_trim(md_prefix *p)
{
    while (p->n && p->piece[p->n - 1].kind == MDR_SPAN_PAD)
        p->width -= p->piece[--p->n].width;
}

void mdp_bars_only(md_prefix *p)
{
    bool drop[MDP_PIECES];
    for (int i = 0; i < p->n; i++)
        drop[i] = p->piece[i].cls != MDP_BAR;
    remove_pieces(p, drop);
    if (p->n && p->piece[p->n - 1].len > 1 && p->s[p->piece[p->n - 1].off + p->piece[p->n - 1].len - 1] == ' ') {
        p->piece[p->n - 1].len--;
        p->piece[p->n - 1].width--;
        p->width--;
    }
}

/* ---- wrapping ------------------------------------------------------------------------------ */

typedef struct {
    md_doc *d;
    const md_runs *r;
    size_t run, end_run;     /* runs still to place */
    size_t base;             /* offset of the logical line in the run text */
    const md_prefix *first, *cont;
    bool used_first;
    md_line_kind kind;
    uint8_t heading;
} wrap_ctx;

static void wrap_emit(void *user, ui_span sp)
{
    wrap_ctx *c = user;
    size_t a = c->base + sp.off, b = a + sp.len;
    mdo_line_begin(c->d, c->kind);
    mdo_prefix(c->d, c->used_first ? c->cont : c->first);
    c->used_first = true;
    const char *t = sbuf_str(&c->r->text);
    while (c->run < c->end_run && c->r->runs[c->run].off + c->r->runs[c->run].len <= a)
        c->run++;
    for (size_t k = c->run; k < c->end_run && c->r->runs[k].off < b; k++) {
        const md_run *run = &c->r->runs[k];
        size_t s = run->off > a ? run->off : a;
        size_t e = run->off + run->len < b ? run->off + run->len : b;
        if (e > s)
            mdo_span(c->d, MDR_SPAN_TEXT, run->flags, c->heading, t + s, e - s);
    }
}

void mdo_wrap(md_doc *d, const md_runs *r, size_t first_run, size_t n_runs, int width, const md_prefix *first,
              const md_prefix *cont, md_line_kind kind, uint8_t heading)
{
    int pw = first->width > cont->width ? first->width : cont->width;
    int content = width - pw > 1 ? width - pw : 1;
    wrap_ctx c = {d, r, first_run, first_run + n_runs, 0, first, cont, false, kind, heading};
    if (!n_runs) {
        ui_wrap("", 0, content, UI_WRAP_WORDS, wrap_emit, &c);
        return;
    }
    const char *t = sbuf_str(&r->text);
    size_t from = r->runs[first_run].off;
    size_t to = r->runs[first_run + n_runs - 1].off + r->runs[first_run + n_runs - 1].len;
    size_t start = from;
    for (size_t i = from; i <= to; i++) {
        if (i < to && t[i] != '\n')
            continue;
        c.base = start;
        ui_wrap(t + start, i - start, content, UI_WRAP_WORDS, wrap_emit, &c);
        start = i + 1;
    }
}

/* ---- rules and code -------------------------------------------------------------------------- */

void mdo_rule(md_doc *d, const md_prefix *p, int width, bool ascii)
{
    mdo_line_begin(d, MDR_LINE_RULE);
    mdo_prefix(d, p);
    const char *dash = ascii ? "-" : "\xe2\x94\x80"; /* ─ */
    for (int i = p->width; i < width; i++)
        mdo_span(d, MDR_SPAN_RULE, 0, 0, dash, strlen(dash));
}

/* A code line with its tabs expanded (from the code's own column 0). */
static void expand_code_line(sbuf *out, const char *s, size_t n)
{
    int col = 0;
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\t')
            continue;
        size_t before = out->len;
        tsafe_sanitize(out, s + seg, i - seg, true);
        col += md_width(sbuf_str(out) + before, out->len - before);
        if (i < n)
            for (int to = (col / UI_TAB_WIDTH + 1) * UI_TAB_WIDTH; col < to; col++)
                sbuf_addc(out, ' ');
        seg = i + 1;
    }
}

typedef struct {
    md_doc *d;
    const char *s;
    const md_prefix *prefix;
    uint32_t index;
    bool more;               /* lines after the first are continuations */
} code_ctx;

static void code_emit(void *user, ui_span sp)
{
    code_ctx *c = user;
    mdo_line_begin(c->d, MDR_LINE_CODE);
    md_line *l = &c->d->lines[c->d->n_lines - 1];
    l->code_index = c->index;
    l->cont = c->more;
    c->more = true;
    mdo_prefix(c->d, c->prefix);
    mdo_span(c->d, MDR_SPAN_CODE, 0, 0, c->s + sp.off, sp.len);
}

void mdo_code(md_doc *d, sbuf *h, const char *lang, size_t lang_len, const char *code, size_t n, uint32_t index,
              const md_prefix *first, const md_prefix *cont, int width, unsigned opts)
{
    /* The header: the language tag, cut to the width. */
    sbuf_clear(h);
    if (opts & MDR_OPT_CODE_NUMBERS)
        sbuf_printf(h, "[%u] ", index);
    if (lang_len)
        tsafe_sanitize(h, lang, lang_len, true);
    else
        sbuf_adds(h, "code");
    mdo_line_begin(d, MDR_LINE_CODE_HEADER);
    d->lines[d->n_lines - 1].code_index = index;
    mdo_prefix(d, first);
    int room = width - first->width > 1 ? width - first->width : 1;
    size_t keep = 0;
    for (size_t p = 0; p < h->len;) {
        uint32_t cp;
        size_t l = tsafe_decode(h->s + p, h->len - p, &cp);
        if (md_width(h->s, p + l) > room)
            break;
        p += l;
        keep = p;
    }
    mdo_span(d, MDR_SPAN_CODE_LANG, 0, 0, sbuf_str(h), keep);
    /* The lines, verbatim (each ends in '\n'; a last one without is a line too). */
    int content = width - cont->width > 1 ? width - cont->width : 1;
    size_t start = 0;
    for (size_t i = 0; i < n || start < n; i++) {
        if (i < n && code[i] != '\n')
            continue;
        sbuf_clear(h);
        expand_code_line(h, code + start, i - start);
        code_ctx c = {d, sbuf_str(h), cont, index, false};
        if (opts & MDR_OPT_WRAP_CODE)
            ui_wrap(c.s, h->len, content, UI_WRAP_CHARS, code_emit, &c);
        else
            code_emit(&c, (ui_span){0, h->len, 0});
        start = i + 1;
    }
}
