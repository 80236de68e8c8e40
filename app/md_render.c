/* md_render.c: md_render's blocks -> prefixed, wrapped display lines, and
 * md_code_blocks() on the same walk.  See md_internal.h for the map. */
#include "md_render.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"
#include "text_safe.h"
#include "ui_text.h"

#define MAX_BARS 8          /* quote levels drawn; deeper quotes look the same */
#define MIN_CONTENT 10      /* cells of text a prefix leaves at least, when it can */

/* ---- the doc ------------------------------------------------------------------------ */

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

void md_doc_free(md_doc *d)
{
    sbuf_free(&d->text);
    free(d->spans);
    free(d->lines);
    if (d->scratch) {
        free(d->scratch->walk.lines);
        mdr_free(&d->scratch->runs);
        sbuf_free(&d->scratch->para);
        mdi_mem_free(&d->scratch->imem);
        mdt_mem_free(&d->scratch->tmem);
        free(d->scratch);
    }
    memset(d, 0, sizeof *d);
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

int md_width(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return ui_text_width(s, n);
    return n > INT_MAX ? INT_MAX : (int)n;
}

void mdo_line_begin(md_doc *d, md_line_kind kind)
{
    d->lines = grow(d->lines, &d->cap_lines, d->n_lines + 1, sizeof *d->lines);
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
    d->spans = grow(d->spans, &d->cap_spans, d->n_spans + 1, sizeof *d->spans);
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
        mdo_span(d, MD_SPAN_PAD, 0, 0, spaces, (size_t)k);
        cells -= k;
    }
}

void mdo_prefix(md_doc *d, const md_prefix *p)
{
    for (int i = 0; i < MDP_PARTS; i++)
        mdo_span(d, p->part[i].kind, 0, 0, p->part[i].s, p->part[i].len);
}

void mdo_copy_line(md_doc *d, const md_doc *src, const md_line *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const md_span *s = &src->spans[l->first + i];
        mdo_span(d, s->kind, s->flags, s->heading, md_span_text(src, s), s->len);
    }
}

/* ---- prefixes --------------------------------------------------------------------------- */

static void set_part(md_prefix *p, int part, md_span_kind kind, const char *s, size_t n)
{
    if (n > sizeof p->part[0].s)
        n = sizeof p->part[0].s;
    p->part[part].kind = (uint8_t)kind;
    p->part[part].len = (uint8_t)n;
    memcpy(p->part[part].s, s, n);
    p->part[part].width = md_width(s, n);
    p->width = 0;
    for (int i = 0; i < MDP_PARTS; i++)
        p->width += p->part[i].width;
}

static void set_bars(md_prefix *p, int quote, bool ascii, bool trailing_space)
{
    char buf[MAX_BARS * 4];
    size_t n = 0;
    for (int i = 0; i < quote && i < MAX_BARS; i++) {
        const char *bar = ascii ? "| " : "\xe2\x94\x82 "; /* │ */
        memcpy(buf + n, bar, strlen(bar));
        n += strlen(bar);
    }
    if (n && !trailing_space)
        n--;
    set_part(p, MDP_BARS, MD_SPAN_QUOTE_BAR, buf, n);
}

static void set_indent(md_prefix *p, int cells)
{
    static const char spaces[] = "                                            ";
    if (cells > (int)sizeof spaces - 1)
        cells = (int)sizeof spaces - 1;
    set_part(p, MDP_INDENT, MD_SPAN_PAD, spaces, cells > 0 ? (size_t)cells : 0);
}

static const char *bullet_glyph(int depth, bool ascii)
{
    static const char *const fancy[] = {"\xe2\x80\xa2", "\xe2\x97\xa6", "\xe2\x96\xaa"}; /* • ◦ ▪ */
    static const char *const plain[] = {"*", "-", "+"};
    int k = (depth - 1) % 3;
    return ascii ? plain[k] : fancy[k];
}

/* Gives the text at least MIN_CONTENT cells (or half a narrow width) by
 * dropping indentation, then all but one bar, then the bars, then the bullet. */
static void fit_prefix(md_prefix *p, int width)
{
    int want = width < 2 * MIN_CONTENT ? width / 2 : MIN_CONTENT;
    if (width - p->width >= want)
        return;
    set_part(p, MDP_INDENT, MD_SPAN_PAD, "", 0);
    if (width - p->width >= want)
        return;
    if (p->part[MDP_BARS].len > 4) {
        size_t one = p->part[MDP_BARS].s[0] == '|' ? 2 : 4;
        char bar[4];
        memcpy(bar, p->part[MDP_BARS].s, one);
        set_part(p, MDP_BARS, MD_SPAN_QUOTE_BAR, bar, one);
    }
    if (width - p->width >= want)
        return;
    set_part(p, MDP_BARS, MD_SPAN_QUOTE_BAR, "", 0);
    if (width - p->width >= want)
        return;
    set_part(p, MDP_BULLET, MD_SPAN_BULLET, "", 0);
    set_part(p, MDP_GAP, MD_SPAN_PAD, "", 0);
}

/* A block's prefixes: its first line (with the bullet when it starts an
 * item) and the lines after it. */
static void block_prefixes(const md_block *b, int width, unsigned opts, md_prefix *first, md_prefix *cont)
{
    bool ascii = opts & MD_OPT_ASCII;
    memset(first, 0, sizeof *first);
    set_bars(first, b->quote, ascii, true);
    *cont = *first;
    if (b->depth > 0) {
        set_indent(cont, b->text_col);
        if (b->item_start) {
            set_indent(first, b->bullet_col);
            const char *g = b->ordered ? b->bullet : bullet_glyph(b->depth, ascii);
            set_part(first, MDP_BULLET, MD_SPAN_BULLET, g, strlen(g));
            set_part(first, MDP_GAP, MD_SPAN_PAD, " ", 1);
        } else {
            set_indent(first, b->text_col);
        }
    }
    fit_prefix(first, width);
    fit_prefix(cont, width);
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
            mdo_span(c->d, MD_SPAN_TEXT, run->flags, c->heading, t + s, e - s);
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

/* ---- blocks ------------------------------------------------------------------------------- */

typedef struct {
    md_doc *d;
    const char *t;
    int width;
    unsigned opts;
    bool any;                /* something drawn: blank lines before it are dropped */
    bool blank_pending;      /* blank lines wait for the next block (none at the end) */
    int blank_quote;
} render_ctx;

static void render_text(render_ctx *r, const md_block *b, const md_prefix *first, const md_prefix *cont)
{
    md_scratch *s = r->d->scratch;
    sbuf_clear(&s->para);
    for (size_t i = 0; i < b->n_lines; i++) {
        if (i)
            sbuf_addc(&s->para, '\n');
        sbuf_add(&s->para, r->t + b->lines[i].off, b->lines[i].len);
    }
    mdr_clear(&s->runs);
    mdi_parse(&s->imem, sbuf_str(&s->para), s->para.len, 0, (r->opts & MD_OPT_STREAMING) && b->last, &s->runs);
    bool heading = b->type == MDB_HEADING;
    mdo_wrap(r->d, &s->runs, 0, s->runs.n, r->width, first, cont, heading ? MD_LINE_HEADING : MD_LINE_TEXT,
             heading ? (uint8_t)b->heading : 0);
}

static void render_rule(render_ctx *r, const md_prefix *first)
{
    mdo_line_begin(r->d, MD_LINE_RULE);
    mdo_prefix(r->d, first);
    const char *dash = r->opts & MD_OPT_ASCII ? "-" : "\xe2\x94\x80"; /* ─ */
    for (int i = first->width; i < r->width; i++)
        mdo_span(r->d, MD_SPAN_RULE, 0, 0, dash, strlen(dash));
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
    mdo_line_begin(c->d, MD_LINE_CODE);
    md_line *l = &c->d->lines[c->d->n_lines - 1];
    l->code_index = c->index;
    l->cont = c->more;
    c->more = true;
    mdo_prefix(c->d, c->prefix);
    mdo_span(c->d, MD_SPAN_CODE, 0, 0, c->s + sp.off, sp.len);
}

static void render_code(render_ctx *r, const md_block *b, const md_prefix *first, const md_prefix *cont)
{
    md_doc *d = r->d;
    d->n_code_blocks = b->code_index;
    /* The header: the language tag, cut to the width. */
    sbuf *h = &d->scratch->para;
    sbuf_clear(h);
    if (r->opts & MD_OPT_CODE_NUMBERS)
        sbuf_printf(h, "[%u] ", b->code_index);
    if (b->lang.len)
        tsafe_sanitize(h, r->t + b->lang.off, b->lang.len, true);
    else
        sbuf_adds(h, "code");
    mdo_line_begin(d, MD_LINE_CODE_HEADER);
    d->lines[d->n_lines - 1].code_index = b->code_index;
    mdo_prefix(d, first);
    int room = r->width - first->width > 1 ? r->width - first->width : 1;
    size_t keep = 0;
    for (size_t p = 0; p < h->len;) {
        uint32_t cp;
        size_t l = tsafe_decode(h->s + p, h->len - p, &cp);
        if (md_width(h->s, p + l) > room)
            break;
        p += l;
        keep = p;
    }
    mdo_span(d, MD_SPAN_CODE_LANG, 0, 0, sbuf_str(h), keep);
    /* The lines, verbatim. */
    int content = r->width - cont->width > 1 ? r->width - cont->width : 1;
    for (size_t i = 0; i < b->n_lines; i++) {
        sbuf_clear(h);
        expand_code_line(h, r->t + b->lines[i].off, b->lines[i].len);
        code_ctx c = {d, sbuf_str(h), cont, b->code_index, false};
        if (r->opts & MD_OPT_WRAP_CODE)
            ui_wrap(c.s, h->len, content, UI_WRAP_CHARS, code_emit, &c);
        else
            code_emit(&c, (ui_span){0, h->len, 0});
    }
}

static void on_block(void *user, const md_block *b)
{
    render_ctx *r = user;
    if (b->type == MDB_BLANK) {
        if (r->any) {
            r->blank_quote = r->blank_pending && r->blank_quote < b->quote ? r->blank_quote : b->quote;
            r->blank_pending = true;
        }
        return;
    }
    if (r->blank_pending) {
        md_prefix bars = {0};
        set_bars(&bars, r->blank_quote, r->opts & MD_OPT_ASCII, false);
        fit_prefix(&bars, r->width);
        mdo_line_begin(r->d, MD_LINE_BLANK);
        mdo_prefix(r->d, &bars);
        r->blank_pending = false;
    }
    r->any = true;
    md_prefix first, cont;
    block_prefixes(b, r->width, r->opts, &first, &cont);
    switch (b->type) {
    case MDB_PARA:
    case MDB_HEADING:
        render_text(r, b, &first, &cont);
        break;
    case MDB_RULE:
        render_rule(r, &first);
        break;
    case MDB_CODE:
        render_code(r, b, &first, &cont);
        break;
    case MDB_TABLE:
        if (b->item_start) { /* the bullet on a line of its own */
            mdo_line_begin(r->d, MD_LINE_TEXT);
            mdo_prefix(r->d, &first);
        }
        mdt_render(r->d, &r->d->scratch->tmem, &r->d->scratch->imem, b, r->t, &cont, r->width, r->opts);
        break;
    case MDB_BLANK:
        break;
    }
}

static void render_raw(md_doc *d, const char *text, size_t n, int width)
{
    md_runs *runs = &d->scratch->runs;
    mdr_clear(runs);
    if (n && text[n - 1] == '\n')
        n--; /* no empty line after the last one */
    mdr_add(runs, text, n, 0);
    md_prefix none = {0};
    mdo_wrap(d, runs, 0, runs->n, width, &none, &none, MD_LINE_TEXT, 0);
}

void md_render(md_doc *d, const char *text, size_t n, int width, unsigned opts)
{
    if (width < 1)
        width = 1;
    sbuf_clear(&d->text);
    d->n_spans = d->n_lines = 0;
    d->n_code_blocks = 0;
    if (!d->scratch && !(d->scratch = calloc(1, sizeof *d->scratch)))
        abort();
    if (opts & MD_OPT_RAW) {
        render_raw(d, text, n, width);
        return;
    }
    render_ctx r = {d, text, width, opts, false, false, 0};
    mdb_walk(text, n, &d->scratch->walk, on_block, &r);
}

/* ---- code blocks ------------------------------------------------------------------------------ */

typedef struct {
    const char *t;
    md_code_block *v;
    size_t n, cap;
} code_list;

static void collect_code(void *user, const md_block *b)
{
    code_list *c = user;
    if (b->type != MDB_CODE)
        return;
    c->v = grow(c->v, &c->cap, c->n + 1, sizeof *c->v);
    md_code_block *k = &c->v[c->n++];
    memset(k, 0, sizeof *k);
    sbuf s = {0};
    for (size_t i = 0; i < b->n_lines; i++) {
        if (i)
            sbuf_addc(&s, '\n');
        sbuf_add(&s, c->t + b->lines[i].off, b->lines[i].len);
    }
    k->len = s.len;
    k->text = sbuf_take(&s);
    size_t ll = b->lang.len < sizeof k->lang - 1 ? b->lang.len : sizeof k->lang - 1;
    memcpy(k->lang, c->t + b->lang.off, ll);
    k->lang[ll] = 0;
    k->n_lines = b->n_lines;
    k->closed = b->closed;
}

size_t md_code_blocks(const char *text, size_t n, md_code_block **out)
{
    code_list c = {text, NULL, 0, 0};
    md_walk_mem mem = {0};
    mdb_walk(text, n, &mem, collect_code, &c);
    free(mem.lines);
    *out = c.v;
    return c.n;
}

void md_code_blocks_free(md_code_block *blocks, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(blocks[i].text);
    free(blocks);
}
