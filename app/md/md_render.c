/* md_render.c: md4c parses, we lay out.  md4c calls us as it walks the
 * document (enter/leave block, enter/leave span, text); we keep the stack of
 * containers (quotes, lists, items) that make each line's prefix, gather a
 * block's inline text into styled runs, and draw the block when it ends.
 * md_code_blocks() takes the same walk without drawing.  See md_internal.h
 * for the map; what md4c does not report (blank lines between blocks,
 * whether a fence closed, a streaming answer's open markers) md_source.c
 * reads from the source around its text. */
#include <limits.h>
#include <md4c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"
#include "base/text_safe.h"

#define MAX_BARS 8          /* quote levels drawn; deeper quotes look the same */
#define MAX_INDENT 40       /* cells of list indentation; deeper items stop moving right */
#define MAX_URL_SHOWN 200   /* bytes of a link's target shown (a reference may repeat a long one) */
#define MAX_LANG 47         /* bytes of a code block's language tag kept */
#define NONE MDS_NONE

typedef enum { CT_QUOTE, CT_LIST, CT_ITEM } container_type;

typedef struct {
    uint8_t type;           /* container_type */
    bool ordered;           /* CT_LIST */
    char delim;             /* CT_LIST, ordered: '.' or ')' */
    unsigned next;          /* CT_LIST, ordered: the next item's number */
    int lists;              /* lists around it (a list: its own included) */
    bool pending;           /* CT_ITEM: its marker is not drawn yet */
    uint8_t marker_len;     /* CT_ITEM */
    int marker_w;
    char marker[32];
} container;

typedef struct {
    size_t href_off, href_len; /* in scratch.hrefs */
    size_t text_off;           /* where its text starts in the runs */
} open_link;

/* A streaming answer's emphasis or code marker that nothing closed (yet). */
typedef struct {
    size_t off;             /* in the runs' text */
    size_t len;
    char ch;
} open_mark;

struct md_scratch {
    sbuf source;            /* the text md4c parses: a copy, MD_SOURCE_PAD NULs after it */
    md_runs runs;           /* the paragraph or heading being gathered */
    md_runs tmp;            /* open markers resolved */
    sbuf code, lang, hrefs, buf;
    container *stack;
    size_t cap_stack;
    open_link *links;
    size_t cap_links;
    open_mark *marks;
    size_t cap_marks;
    md_table *table;
};

enum { LEAF_NONE, LEAF_INLINE, LEAF_CODE, LEAF_TABLE };

typedef struct {
    md_doc *d;              /* NULL: only code blocks are gathered (md_code_blocks) */
    md_scratch *s;
    md_src src;             /* the source: src.s[0 .. src.n) */
    int width;
    unsigned opts;
    size_t depth;           /* containers open */
    size_t common;          /* of them, those open since the last block was drawn */
    bool any;               /* a block was drawn */
    size_t prev_end;        /* the source offset after the last block drawn */
    int em, strong, del, code_span;
    size_t n_links;
    size_t target_bytes;    /* link targets md4c has read (target_budget()) */
    /* the leaf block open */
    int leaf;
    int heading;
    size_t leaf_start, leaf_end; /* the source its text came from (leaf_start NONE: none yet) */
    uint8_t base;           /* flags of all its text (table cells) */
    md_runs *target;        /* where its text goes */
    size_t n_marks;
    size_t marks_cell;      /* tables: the cell the marks are in */
    size_t n_cells;         /* tables: cells begun */
    /* a code block */
    char fence;
    size_t info_at;         /* its info string's offset, NONE when none */
    size_t nl_before, nl_after; /* newlines before its first source line, after its last */
    size_t indent;          /* columns of indentation md4c gave for the line's start */
    uint32_t n_code;
    /* md_code_blocks */
    md_code_block *blocks;
    size_t n_blocks, cap_blocks;
} walker;

/* ---- the doc ------------------------------------------------------------------------ */

void md_scratch_free(md_scratch *s)
{
    if (!s)
        return;
    sbuf_free(&s->source);
    mdr_free(&s->runs);
    mdr_free(&s->tmp);
    sbuf_free(&s->code);
    sbuf_free(&s->lang);
    sbuf_free(&s->hrefs);
    sbuf_free(&s->buf);
    free(s->stack);
    free(s->links);
    free(s->marks);
    mdt_free(s->table);
    free(s);
}

void md_doc_free(md_doc *d)
{
    md_scratch_free(d->scratch);
    d->scratch = NULL;
    mdo_free_lines(d);
}

/* ---- prefixes --------------------------------------------------------------------------- */

static const char *bullet_glyph(int lists, bool ascii)
{
    static const char *const fancy[] = {"\xe2\x80\xa2", "\xe2\x97\xa6", "\xe2\x96\xaa"}; /* • ◦ ▪ */
    static const char *const plain[] = {"*", "-", "+"};
    int k = (lists - 1) % 3;
    return ascii ? plain[k] : fancy[k];
}

/* The prefix of the containers stack[0 .. upto): on a block's first line an
 * item whose marker is not drawn yet shows it. */
static void make_prefix(const walker *w, size_t upto, bool first_line, md_prefix *p)
{
    static const char spaces[] = "                                        ";
    bool ascii = w->opts & MDR_OPT_ASCII;
    const char *bar = ascii ? "| " : "\xe2\x94\x82 "; /* │ */
    int bars = 0, indent = 0;
    mdp_clear(p);
    for (size_t i = 0; i < upto; i++) {
        const container *c = &w->s->stack[i];
        if (c->type == CT_QUOTE) {
            if (bars++ < MAX_BARS)
                mdp_add(p, MDR_SPAN_QUOTE_BAR, MDP_BAR, bar, strlen(bar));
        } else if (c->type == CT_ITEM) {
            if (first_line && c->pending) {
                mdp_add(p, MDR_SPAN_BULLET, MDP_BULLET, c->marker, c->marker_len);
                mdp_add(p, MDR_SPAN_PAD, MDP_BULLET, " ", 1);
            } else {
                int cells = c->marker_w + 1;
                if (indent + cells > MAX_INDENT)
                    cells = MAX_INDENT - indent;
                indent += cells;
                mdp_add(p, MDR_SPAN_PAD, MDP_INDENT, spaces, (size_t)cells);
            }
        }
    }
    mdp_fit(p, w->width);
}

/* A block's first-line and later-line prefixes; the items' markers are
 * drawn from here on. */
static void block_prefixes(walker *w, md_prefix *first, md_prefix *cont)
{
    make_prefix(w, w->depth, true, first);
    make_prefix(w, w->depth, false, cont);
    for (size_t i = 0; i < w->depth; i++)
        w->s->stack[i].pending = false;
}

/* Before a block that starts at source offset `start` (NONE: not known):
 * a blank line where the text has one. */
static void block_gap(walker *w, size_t start)
{
    if (w->any && start != NONE && start > w->prev_end && mds_blank_line_between(&w->src, w->prev_end, start)) {
        md_prefix bars;
        make_prefix(w, w->common, false, &bars);
        mdp_bars_only(&bars);
        mdp_fit(&bars, w->width);
        mdo_line_begin(w->d, MDR_LINE_BLANK);
        mdo_prefix(w->d, &bars);
    }
    w->any = true;
    w->common = w->depth;
}

/* ---- inline text ---------------------------------------------------------------------------- */

static uint8_t flags_now(const walker *w)
{
    uint8_t f = w->base;
    f |= w->strong ? MDR_BOLD : 0;
    f |= w->em ? MDR_ITALIC : 0;
    f |= w->del ? MDR_STRIKE : 0;
    f |= w->code_span ? MDR_CODE_INLINE : 0;
    f |= w->n_links ? MDR_LINK : 0;
    return f;
}

static void note_source(walker *w, const char *s, size_t n)
{
    if (!mds_holds(&w->src, s))
        return;
    size_t off = (size_t)(s - w->src.s);
    if (w->leaf_start == NONE || off < w->leaf_start)
        w->leaf_start = off;
    if (off + n > w->leaf_end)
        w->leaf_end = off + n;
}

static void begin_inline(walker *w, int heading)
{
    w->leaf = LEAF_INLINE;
    w->heading = heading;
    w->leaf_start = NONE;
    w->leaf_end = 0;
    w->base = 0;
    w->target = &w->s->runs;
    mdr_clear(w->target);
    w->n_marks = 0;
}

/* Normal text; in a streaming answer, marker runs that may open are noted. */
static void add_text(walker *w, const char *s, size_t n)
{
    uint8_t f = flags_now(w);
    if (!(w->opts & MDR_OPT_STREAMING) || !mds_holds(&w->src, s) || w->code_span) {
        mdr_add(w->target, s, n, f);
        return;
    }
    if (w->leaf == LEAF_TABLE && w->marks_cell != w->n_cells) {
        w->n_marks = 0; /* only the last cell's marks can still open */
        w->marks_cell = w->n_cells;
    }
    size_t at = (size_t)(s - w->src.s), seg = 0;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c != '*' && c != '_' && c != '~' && c != '`') {
            i++;
            continue;
        }
        size_t k = i;
        while (k < n && s[k] == c)
            k++;
        if (mds_may_open(&w->src, at + i, k - i, c)) {
            mdr_add(w->target, s + seg, i - seg, f);
            w->s->marks = md_grow(w->s->marks, &w->s->cap_marks, w->n_marks + 1, sizeof *w->s->marks);
            w->s->marks[w->n_marks++] = (open_mark){w->target->text.len, k - i, c};
            mdr_add(w->target, s + i, k - i, f);
            seg = k;
        }
        i = k;
    }
    mdr_add(w->target, s + seg, n - seg, f);
}

/* Open markers style everything after them, and are not shown: the runs
 * from first_run on are rewritten. */
static void resolve_marks(walker *w, md_runs *r, size_t first_run)
{
    md_runs *t = &w->s->tmp;
    mdr_clear(t);
    const char *text = sbuf_str(&r->text);
    uint8_t add = 0;
    size_t mi = 0;
    bool code = false;
    for (size_t k = first_run; k < r->n; k++) {
        size_t a = r->runs[k].off, e = a + r->runs[k].len;
        while (a < e) {
            const open_mark *m = !code && mi < w->n_marks ? &w->s->marks[mi] : NULL;
            if (!m || m->off >= e) {
                mdr_copy(t, text + a, e - a, r->runs[k].flags | add);
                break;
            }
            if (m->off > a)
                mdr_copy(t, text + a, m->off - a, r->runs[k].flags | add);
            a = m->off + m->len;
            if (m->ch == '`') {
                add |= MDR_CODE_INLINE;
                code = true; /* markers inside code are text */
            } else if (m->ch == '~') {
                add |= MDR_STRIKE;
            } else {
                add |= m->len == 1 ? MDR_ITALIC : m->len == 2 ? MDR_BOLD : MDR_BOLD | MDR_ITALIC;
            }
            mi++;
        }
    }
    mdr_truncate(r, first_run);
    for (size_t k = 0; k < t->n; k++)
        mdr_copy(r, sbuf_str(&t->text) + t->runs[k].off, t->runs[k].len, t->runs[k].flags);
}

static bool streaming_tail(const walker *w)
{
    return (w->opts & MDR_OPT_STREAMING) && w->n_marks && w->leaf_start != NONE && mds_reaches_end(&w->src, w->leaf_end);
}

/* ---- links ----------------------------------------------------------------------------- */

/* An md4c attribute's text, entities decoded, into out. */
static void attribute(sbuf *out, const MD_ATTRIBUTE *a)
{
    if (!a->text || !a->size)
        return;
    for (size_t i = 0; a->substr_offsets[i] < a->size; i++) {
        const char *s = a->text + a->substr_offsets[i];
        size_t n = a->substr_offsets[i + 1] - a->substr_offsets[i];
        uint32_t cp = 0;
        if (a->substr_types[i] == MD_TEXT_NULLCHAR)
            cp = 0xfffd;
        else if (a->substr_types[i] == MD_TEXT_ENTITY)
            cp = md_entity_cp(s, n);
        if (cp)
            tsafe_encode(out, cp);
        else
            sbuf_add(out, s, n);
    }
}

/* md4c 0.4.8 reads a link's whole target at every link: one long target
 * of a reference definition used by many "[a]" costs their product (60 KB
 * of text took 0.7 s).  Past this many target bytes in all, the walk stops
 * and the text shows as written. */
static size_t target_budget(size_t n)
{
    return 16 * n + ((size_t)1 << 20);
}

/* False when the targets read so far are over the budget. */
static bool link_enter(walker *w, const MD_ATTRIBUTE *href)
{
    w->target_bytes += href->size;
    if (w->target_bytes > target_budget(w->src.n))
        return false;
    if (w->leaf == LEAF_NONE)
        begin_inline(w, 0);
    md_scratch *s = w->s;
    if (!w->n_links)
        sbuf_clear(&s->hrefs);
    s->links = md_grow(s->links, &s->cap_links, w->n_links + 1, sizeof *s->links);
    open_link *l = &s->links[w->n_links++];
    l->href_off = s->hrefs.len;
    attribute(&s->hrefs, href);
    l->href_len = s->hrefs.len - l->href_off;
    l->text_off = w->target->text.len;
    return true;
}

/* The target shows after the text, unless it is the text (autolinks). */
static void link_leave(walker *w)
{
    if (!w->n_links)
        return;
    const open_link *l = &w->s->links[w->n_links - 1];
    const char *url = sbuf_str(&w->s->hrefs) + l->href_off;
    size_t ulen = l->href_len;
    const char *text = sbuf_str(&w->target->text) + l->text_off;
    size_t tlen = w->target->text.len - l->text_off;
    bool same = ulen == tlen && !memcmp(url, text, tlen);
    static const char *const schemes[] = {"http://", "https://", "mailto:"};
    for (size_t i = 0; i < 3 && !same; i++) {
        size_t k = strlen(schemes[i]);
        same = ulen == k + tlen && !memcmp(url, schemes[i], k) && !memcmp(url + k, text, tlen);
    }
    w->n_links--;
    uint8_t f = flags_now(w); /* outside the link (unless in another) */
    if (same || !ulen)
        return;
    size_t shown = ulen;
    if (shown > MAX_URL_SHOWN) {
        shown = MAX_URL_SHOWN;
        while (shown > 0 && ((unsigned char)url[shown] & 0xc0) == 0x80)
            shown--; /* not inside a UTF-8 sequence */
    }
    mdr_add(w->target, " ", 1, f);
    mdr_add(w->target, "(", 1, f | MDR_URL);
    mdr_add(w->target, url, shown, f | MDR_URL);
    if (shown < ulen)
        mdr_add(w->target, "\xe2\x80\xa6", 3, f | MDR_URL); /* … */
    mdr_add(w->target, ")", 1, f | MDR_URL);
}

/* ---- blocks ------------------------------------------------------------------------------ */

/* A streaming paragraph whose last line is a table's delimiter row still
 * being written ("| a | b |" over "|---|--") would show as text for a token
 * or two: that line waits. */
static void hold_delimiter_row(walker *w, md_runs *r)
{
    if (!(w->opts & MDR_OPT_STREAMING) || w->leaf_start == NONE || !mds_reaches_end(&w->src, w->leaf_end))
        return;
    size_t ls = mds_line_start(&w->src, w->leaf_end - 1);
    const char *nl = r->text.len ? memrchr(r->text.s, '\n', r->text.len) : NULL;
    if (ls <= w->leaf_start || !nl || !mds_delimiter_row(&w->src, ls))
        return;
    size_t cut = (size_t)(nl - r->text.s);
    mdr_cut(r, cut);
    while (w->n_marks && w->s->marks[w->n_marks - 1].off >= cut)
        w->n_marks--;
}

static void flush_inline(walker *w)
{
    if (w->leaf != LEAF_INLINE)
        return;
    w->leaf = LEAF_NONE;
    if (!w->d)
        return;
    md_runs *r = w->target;
    hold_delimiter_row(w, r);
    if (streaming_tail(w))
        resolve_marks(w, r, 0);
    block_gap(w, w->leaf_start);
    md_prefix first, cont;
    block_prefixes(w, &first, &cont);
    mdo_wrap(w->d, r, 0, r->n, w->width, &first, &cont, w->heading ? MDR_LINE_HEADING : MDR_LINE_TEXT,
             (uint8_t)w->heading);
    if (w->leaf_start == NONE)
        return;
    w->prev_end = w->heading ? mds_heading_end(&w->src, w->leaf_start, w->leaf_end) : w->leaf_end;
}

static void code_enter(walker *w, const MD_BLOCK_CODE_DETAIL *cd)
{
    w->leaf = LEAF_CODE;
    w->fence = cd->fence_char ? cd->fence_char : '`';
    w->leaf_start = NONE;
    w->leaf_end = 0;
    w->nl_before = w->nl_after = w->indent = 0;
    w->info_at = cd->info.size && mds_holds(&w->src, cd->info.text) ? (size_t)(cd->info.text - w->src.s) : NONE;
    sbuf_clear(&w->s->code);
    sbuf_clear(&w->s->lang);
    attribute(&w->s->lang, &cd->lang);
    if (w->s->lang.len > MAX_LANG)
        w->s->lang.len = MAX_LANG;
}

static bool all_spaces(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ')
            return false;
    return n > 0;
}

/* A code line's text.  md4c hands a line's indentation as spaces it makes
 * up (a Makefile's tab would be copied as four spaces): the indentation is
 * taken from the source instead, as written, but for a tab that the
 * containers' indentation took part of (its rest stays spaces, as
 * CommonMark says). */
static void code_text(walker *w, const char *s, size_t n)
{
    sbuf *code = &w->s->code;
    bool line_start = !code->len || code->s[code->len - 1] == '\n';
    if (!mds_holds(&w->src, s) && line_start && all_spaces(s, n)) {
        w->indent = n; /* until the line's text says where it ends */
        return;
    }
    if (mds_holds(&w->src, s)) {
        if (w->indent)
            mds_indent(&w->src, (size_t)(s - w->src.s), w->indent, code);
        note_source(w, s, n);
        w->nl_after = 0;
    } else {
        sbuf_add(code, "                                ", w->indent < 32 ? w->indent : 32);
        if (n == 1 && s[0] == '\n') {
            if (w->leaf_start == NONE)
                w->nl_before++;
            else
                w->nl_after++;
        }
    }
    w->indent = 0;
    sbuf_add(code, s, n);
}

/* The first line after the last block drawn. */
static size_t after_last_block(const walker *w)
{
    return w->any ? mds_line_end(&w->src, w->prev_end) + 1 : 0;
}

/* The code block's opening fence line: from its info string, or back from
 * its first line, or the first fence after the last block. */
static size_t code_fence_line(const walker *w)
{
    if (w->info_at != NONE)
        return mds_line_start(&w->src, w->info_at);
    if (w->leaf_start != NONE) {
        size_t ls = mds_line_start(&w->src, w->leaf_start);
        for (size_t k = 0; k <= w->nl_before && ls > 0; k++)
            ls = mds_line_start(&w->src, ls - 1);
        return ls;
    }
    return mds_first_line(&w->src, after_last_block(w), mds_fence_line, w->fence);
}

static void flush_code(walker *w)
{
    w->leaf = LEAF_NONE;
    md_scratch *s = w->s;
    uint32_t index = ++w->n_code;
    /* Closed: the line after its last one (blank lines in it counted) is a fence. */
    size_t fence = code_fence_line(w);
    size_t after = w->leaf_start != NONE ? mds_line_end(&w->src, w->leaf_end) + 1 : fence != NONE ? mds_line_end(&w->src, fence) + 1 : w->src.n;
    size_t skip = w->leaf_start != NONE ? (w->nl_after ? w->nl_after - 1 : 0) : w->nl_before;
    for (size_t k = 0; k < skip && after < w->src.n; k++)
        after = mds_line_end(&w->src, after) + 1;
    bool closed = after < w->src.n && mds_fence_line(&w->src, after, w->fence);
    if (!w->d) {
        w->blocks = md_grow(w->blocks, &w->cap_blocks, w->n_blocks + 1, sizeof *w->blocks);
        md_code_block *b = &w->blocks[w->n_blocks++];
        memset(b, 0, sizeof *b);
        size_t len = s->code.len;
        if (len && s->code.s[len - 1] == '\n')
            len--;
        b->text = malloc(len + 1);
        if (!b->text)
            abort();
        memcpy(b->text, sbuf_str(&s->code), len);
        b->text[len] = 0;
        b->len = len;
        for (size_t i = 0; i < s->code.len; i++)
            b->n_lines += s->code.s[i] == '\n';
        if (s->code.len && s->code.s[s->code.len - 1] != '\n')
            b->n_lines++;
        memcpy(b->lang, sbuf_str(&s->lang), s->lang.len);
        b->lang[s->lang.len] = 0;
        b->closed = closed;
    } else {
        block_gap(w, fence);
        md_prefix first, cont;
        block_prefixes(w, &first, &cont);
        mdo_code(w->d, &s->buf, sbuf_str(&s->lang), s->lang.len, sbuf_str(&s->code), s->code.len, index, &first,
                 &cont, w->width, w->opts);
    }
    if (closed)
        w->prev_end = mds_line_end(&w->src, after);
    else if (w->leaf_start != NONE)
        w->prev_end = w->leaf_end;
    else if (fence != NONE)
        w->prev_end = mds_line_end(&w->src, fence);
}

static void draw_rule(walker *w)
{
    size_t at = mds_first_line(&w->src, after_last_block(w), mds_rule_line, 0);
    block_gap(w, at);
    md_prefix first, cont;
    block_prefixes(w, &first, &cont);
    mdo_rule(w->d, &first, w->width, w->opts & MDR_OPT_ASCII);
    if (at != NONE)
        w->prev_end = mds_line_end(&w->src, at);
}

static void table_enter(walker *w, const MD_BLOCK_TABLE_DETAIL *td)
{
    w->leaf = LEAF_TABLE;
    w->leaf_start = NONE;
    w->leaf_end = 0;
    w->n_marks = 0;
    w->n_cells = 0;
    w->marks_cell = NONE;
    if (!w->s->table)
        w->s->table = mdt_new();
    mdt_begin(w->s->table, td->col_count);
    w->target = mdt_runs(w->s->table);
}

static void table_cell(walker *w, const MD_BLOCK_TD_DETAIL *cd, bool head)
{
    md_align al = cd->align == MD_ALIGN_RIGHT ? MDT_RIGHT : cd->align == MD_ALIGN_CENTER ? MDT_CENTER : MDT_LEFT;
    mdt_cell(w->s->table, al);
    w->n_cells++;
    w->base = MDR_TABLE_CELL | (head ? MDR_TABLE_HEAD : 0);
}

static void flush_table(walker *w)
{
    w->leaf = LEAF_NONE;
    w->base = 0;
    md_table *t = w->s->table;
    if (streaming_tail(w)) {
        size_t first_run, cell = mdt_last_text_cell(t, &first_run);
        if (cell != NONE && cell + 1 == w->marks_cell) {
            resolve_marks(w, mdt_runs(t), first_run);
            mdt_cells_fix(t, cell);
        }
    }
    block_gap(w, w->leaf_start);
    md_prefix first, cont;
    bool pending = false;
    for (size_t i = 0; i < w->depth; i++)
        pending |= w->s->stack[i].type == CT_ITEM && w->s->stack[i].pending;
    block_prefixes(w, &first, &cont);
    if (pending) { /* the bullet on a line of its own */
        mdp_trim(&first);
        mdo_line_begin(w->d, MDR_LINE_TEXT);
        mdo_prefix(w->d, &first);
    }
    mdt_render(w->d, t, &cont, w->width, w->opts);
    if (w->leaf_start != NONE)
        w->prev_end = w->leaf_end;
}

/* ---- containers ---------------------------------------------------------------------------- */

static container *push(walker *w, container_type type)
{
    w->s->stack = md_grow(w->s->stack, &w->s->cap_stack, w->depth + 1, sizeof *w->s->stack);
    container *c = &w->s->stack[w->depth++];
    memset(c, 0, sizeof *c);
    c->type = (uint8_t)type;
    return c;
}

static void pop(walker *w)
{
    if (w->depth)
        w->depth--;
    if (w->common > w->depth)
        w->common = w->depth;
}

static void list_enter(walker *w, bool ordered, unsigned start, char delim)
{
    int lists = (w->depth ? w->s->stack[w->depth - 1].lists : 0) + 1;
    container *c = push(w, CT_LIST);
    c->ordered = ordered;
    c->next = start;
    c->delim = delim == ')' ? ')' : '.';
    c->lists = lists;
}

static void item_enter(walker *w, const MD_BLOCK_LI_DETAIL *li)
{
    /* md4c opens an item right inside its list. */
    container *list = w->depth && w->s->stack[w->depth - 1].type == CT_LIST ? &w->s->stack[w->depth - 1] : NULL;
    char marker[32];
    bool ascii = w->opts & MDR_OPT_ASCII;
    const char *box = li->is_task ? (li->task_mark == ' ' ? "[ ]" : "[x]") : NULL;
    if (list && list->ordered)
        snprintf(marker, sizeof marker, "%u%c%s%s", list->next++, list->delim, box ? " " : "", box ? box : "");
    else
        snprintf(marker, sizeof marker, "%s", box ? box : bullet_glyph(list ? list->lists : 1, ascii));
    int lists = list ? list->lists : 1;
    container *c = push(w, CT_ITEM);
    c->lists = lists;
    c->pending = true;
    c->marker_len = (uint8_t)strlen(marker);
    memcpy(c->marker, marker, c->marker_len);
    c->marker_w = md_width(c->marker, c->marker_len);
}

/* An item with nothing in it still shows its marker. */
static void item_leave(walker *w)
{
    if (w->d && w->depth && w->s->stack[w->depth - 1].pending) {
        block_gap(w, NONE);
        md_prefix first, cont;
        block_prefixes(w, &first, &cont);
        mdp_trim(&first);
        mdo_line_begin(w->d, MDR_LINE_TEXT);
        mdo_prefix(w->d, &first);
    }
    pop(w);
}

/* ---- md4c's callbacks ------------------------------------------------------------------------ */

static int enter_block(MD_BLOCKTYPE type, void *detail, void *user)
{
    walker *w = user;
    if (type != MD_BLOCK_TH && type != MD_BLOCK_TD)
        flush_inline(w);
    switch (type) {
    case MD_BLOCK_QUOTE: {
        int lists = w->depth ? w->s->stack[w->depth - 1].lists : 0;
        push(w, CT_QUOTE)->lists = lists;
        break;
    }
    case MD_BLOCK_UL:
        list_enter(w, false, 1, 0);
        break;
    case MD_BLOCK_OL: {
        const MD_BLOCK_OL_DETAIL *ol = detail;
        list_enter(w, true, ol->start, ol->mark_delimiter);
        break;
    }
    case MD_BLOCK_LI:
        item_enter(w, detail);
        break;
    case MD_BLOCK_HR:
        if (w->d)
            draw_rule(w);
        break;
    case MD_BLOCK_H:
        begin_inline(w, (int)((const MD_BLOCK_H_DETAIL *)detail)->level);
        break;
    case MD_BLOCK_CODE:
        code_enter(w, detail);
        break;
    case MD_BLOCK_HTML: /* not parsed (MD_FLAG_NOHTMLBLOCKS); shown as text if ever */
    case MD_BLOCK_P:
        begin_inline(w, 0);
        break;
    case MD_BLOCK_TABLE:
        table_enter(w, detail);
        break;
    case MD_BLOCK_TH:
    case MD_BLOCK_TD:
        if (w->leaf == LEAF_TABLE)
            table_cell(w, detail, type == MD_BLOCK_TH);
        break;
    default:
        break;
    }
    return 0;
}

static int leave_block(MD_BLOCKTYPE type, void *detail, void *user)
{
    walker *w = user;
    switch (type) {
    case MD_BLOCK_H:
    case MD_BLOCK_P:
    case MD_BLOCK_HTML:
        flush_inline(w);
        break;
    case MD_BLOCK_CODE:
        if (w->leaf == LEAF_CODE)
            flush_code(w);
        break;
    case MD_BLOCK_TABLE:
        if (w->leaf == LEAF_TABLE) {
            if (w->d)
                flush_table(w);
            w->leaf = LEAF_NONE;
            w->base = 0;
        }
        break;
    case MD_BLOCK_LI:
        flush_inline(w);
        item_leave(w);
        break;
    case MD_BLOCK_QUOTE:
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        flush_inline(w);
        pop(w);
        break;
    default:
        break;
    }
    return 0;
}

static int enter_span(MD_SPANTYPE type, void *detail, void *user)
{
    walker *w = user;
    if (w->leaf == LEAF_NONE)
        begin_inline(w, 0); /* a tight list item's text */
    switch (type) {
    case MD_SPAN_EM: w->em++; break;
    case MD_SPAN_STRONG: w->strong++; break;
    case MD_SPAN_DEL: w->del++; break;
    case MD_SPAN_CODE: w->code_span++; break;
    case MD_SPAN_A: return link_enter(w, &((const MD_SPAN_A_DETAIL *)detail)->href) ? 0 : -1;
    case MD_SPAN_IMG: return link_enter(w, &((const MD_SPAN_IMG_DETAIL *)detail)->src) ? 0 : -1;
    default: break;
    }
    return 0;
}

static int leave_span(MD_SPANTYPE type, void *detail, void *user)
{
    walker *w = user;
    switch (type) {
    case MD_SPAN_EM: w->em -= w->em > 0; break;
    case MD_SPAN_STRONG: w->strong -= w->strong > 0; break;
    case MD_SPAN_DEL: w->del -= w->del > 0; break;
    case MD_SPAN_CODE: w->code_span -= w->code_span > 0; break;
    case MD_SPAN_A:
    case MD_SPAN_IMG:
        if (w->leaf != LEAF_CODE && w->leaf != LEAF_NONE)
            link_leave(w);
        break;
    default: break;
    }
    return 0;
}

/* "<br>", "<br/>", "<br />" in any case. */
static bool is_br(const char *s, size_t n)
{
    if (n < 4 || s[0] != '<' || (s[1] | 0x20) != 'b' || (s[2] | 0x20) != 'r')
        return false;
    size_t i = 3;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i < n && s[i] == '/')
        i++;
    return i + 1 == n && s[i] == '>';
}

static int md_text(MD_TEXTTYPE type, const MD_CHAR *s, MD_SIZE size, void *user)
{
    walker *w = user;
    if (w->leaf == LEAF_CODE) {
        code_text(w, s, size);
        return 0;
    }
    if (w->leaf == LEAF_NONE)
        begin_inline(w, 0); /* a tight list item's text */
    if (!w->d)
        return 0;
    note_source(w, s, size);
    uint8_t f = flags_now(w);
    switch (type) {
    case MD_TEXT_NULLCHAR:
        mdr_add(w->target, "\xef\xbf\xbd", 3, f);
        break;
    case MD_TEXT_BR:
    case MD_TEXT_SOFTBR: /* answers mean their newlines */
        mdr_add(w->target, "\n", 1, f);
        break;
    case MD_TEXT_ENTITY:
        mdr_add_entity(w->target, s, size, f);
        break;
    case MD_TEXT_HTML:
        if (is_br(s, size))
            mdr_add(w->target, "\n", 1, f);
        else
            mdr_add(w->target, s, size, f);
        break;
    case MD_TEXT_NORMAL:
        add_text(w, s, size);
        break;
    default: /* code span text */
        mdr_add(w->target, s, size, f);
        break;
    }
    return 0;
}

/* ---- entry points ---------------------------------------------------------------------------- */

static md_scratch *scratch_of(md_doc *d)
{
    if (!d->scratch && !(d->scratch = calloc(1, sizeof *d->scratch)))
        abort();
    return d->scratch;
}

/* Parses text[0..n) with md4c, from a copy followed by NULs: md4c 0.4.8
 * reads past the end it is given (a link destination at the very end,
 * "[a](b", looks at the byte after; a ')' there made it report a text of
 * 3 GB), and a streaming answer's text goes on in memory after n. */
static int walk(walker *w, const char *text, size_t n)
{
    static const char pad[MD_SOURCE_PAD];
    sbuf *src = &w->s->source;
    sbuf_clear(src);
    sbuf_add(src, text ? text : "", n);
    sbuf_add(src, pad, sizeof pad);
    w->src.s = sbuf_str(src);
    w->src.n = n;
    MD_PARSER parser = {0, MD_PARSE_FLAGS, enter_block, leave_block, enter_span, leave_span, md_text, NULL, NULL};
    return md_parse(w->src.s, (MD_SIZE)n, &parser, w);
}

/* md4c's sizes are 32-bit. */
static size_t parse_size(size_t n)
{
    return n > UINT_MAX ? UINT_MAX : n;
}

static void render_raw(md_doc *d, const char *text, size_t n, int width)
{
    md_runs *runs = &d->scratch->runs;
    mdr_clear(runs);
    if (n && text[n - 1] == '\n')
        n--; /* no empty line after the last one */
    mdr_add(runs, text, n, 0);
    md_prefix none;
    mdp_clear(&none);
    mdo_wrap(d, runs, 0, runs->n, width, &none, &none, MDR_LINE_TEXT, 0);
}

static void doc_reset(md_doc *d)
{
    sbuf_clear(&d->text);
    d->n_spans = d->n_lines = 0;
    d->n_code_blocks = 0;
}

void md_render(md_doc *d, const char *text, size_t n, int width, unsigned opts)
{
    if (width < 1)
        width = 1;
    doc_reset(d);
    md_scratch *s = scratch_of(d);
    n = parse_size(n);
    if (opts & MDR_OPT_RAW) {
        render_raw(d, text, n, width);
        return;
    }
    walker w = {.d = d, .s = s, .width = width, .opts = opts};
    if (walk(&w, text, n) != 0) { /* out of md4c's memory or the link budget: the text as written */
        doc_reset(d);
        render_raw(d, text, n, width);
        return;
    }
    d->n_code_blocks = w.n_code;
}

size_t md_code_blocks(const char *text, size_t n, md_code_block **out)
{
    md_scratch *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    walker w = {.s = s};
    if (walk(&w, text, parse_size(n)) != 0) {
        md_code_blocks_free(w.blocks, w.n_blocks);
        w.blocks = NULL;
        w.n_blocks = 0;
    }
    md_scratch_free(s);
    *out = w.blocks;
    return w.n_blocks;
}

void md_code_blocks_free(md_code_block *blocks, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(blocks[i].text);
    free(blocks);
}
