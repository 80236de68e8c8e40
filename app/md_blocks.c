/* md_blocks.c: md_render's line walker.  Each line is stripped of its
 * block-quote markers, placed in the list it belongs to by its indentation,
 * and classified: fence, heading, rule, table, paragraph or blank.  Lines of
 * one paragraph (or code block, or table) are gathered into one block.
 *
 * What it follows of CommonMark/GFM, and where it is simpler on purpose:
 * fences close only on a fence of the same kind at least as long, so code is
 * never parsed; fences do not close when a list ends (models often forget to
 * indent code inside items), only when the quote they were in ends; a line
 * that is not indented enough for the current list item continues its
 * paragraph (lazily) or else ends the item; a quote ends at the first line
 * without its '>' (no lazy quote continuation). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"

#define MAX_DEPTH 16         /* list nesting kept; deeper items become siblings */
#define MAX_TEXT_COL 40      /* display indentation of nested items stops growing */
#define MAX_LANG 40          /* bytes of a fence's language tag kept */

typedef struct {
    int src_text;            /* source column where the item's text starts */
    int bullet_col, text_col;
    bool ordered;
    char bullet[MD_MAX_BULLET];
} list_item;

typedef struct {
    const char *t;
    size_t n;
    md_block_fn fn;
    void *user;
    /* the block being gathered */
    bool open;
    md_block b;
    md_range *lines;
    size_t n_lines, cap_lines;
    size_t end;              /* byte after its last line */
    /* an open fence */
    bool in_fence;
    char fence_ch;
    int fence_len, fence_col, fence_quote;
    /* an open table */
    bool in_table;
    int table_quote;
    /* the list items the current line may belong to */
    list_item items[MAX_DEPTH];
    int depth, list_quote;
    bool after_blank;
    uint32_t n_code;
} walker;

typedef enum { LC_PARA, LC_FENCE, LC_HEADING, LC_RULE, LC_TABLE } line_class;

/* ---- small scanners ------------------------------------------------------------- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* Skips spaces and tabs from p; *col advances (tabs to the next multiple of 4). */
static size_t skip_indent(const char *s, size_t len, size_t p, int *col)
{
    while (p < len && is_space(s[p])) {
        *col = s[p] == '\t' ? (*col / 4 + 1) * 4 : *col + 1;
        p++;
    }
    return p;
}

static size_t trim_end(const char *s, size_t len)
{
    while (len && (is_space(s[len - 1]) || s[len - 1] == '\r'))
        len--;
    return len;
}

/* Strips up to `max` block-quote markers ("> ", up to 3 spaces before each);
 * returns the byte after them and their count in *depth. */
static size_t strip_quotes(const char *s, size_t len, int max, int *depth)
{
    size_t p = 0;
    int d = 0;
    while (d < max) {
        size_t q = p;
        while (q < len && q - p < 3 && s[q] == ' ')
            q++;
        if (q >= len || s[q] != '>')
            break;
        p = q + 1;
        if (p < len && is_space(s[p]))
            p++;
        d++;
    }
    *depth = d;
    return p;
}

/* Removes up to `cols` columns of indentation (a tab that would overshoot stays). */
static size_t strip_cols(const char *s, size_t len, int cols)
{
    size_t p = 0;
    int col = 0;
    while (p < len && is_space(s[p])) {
        int next = s[p] == '\t' ? (col / 4 + 1) * 4 : col + 1;
        if (next > cols)
            break;
        col = next;
        p++;
    }
    return p;
}

static bool fence_open(const char *s, size_t len, char *ch, int *count, md_range *lang, size_t base)
{
    if (!len || (s[0] != '`' && s[0] != '~'))
        return false;
    size_t k = 0;
    while (k < len && s[k] == s[0])
        k++;
    if (k < 3)
        return false;
    if (s[0] == '`' && memchr(s + k, '`', len - k))
        return false; /* a backtick fence's info string holds no backtick */
    size_t p = k;
    while (p < len && is_space(s[p]))
        p++;
    size_t e = p;
    while (e < len && !is_space(s[e]) && e - p < MAX_LANG)
        e++;
    *ch = s[0];
    *count = k > INT_MAX ? INT_MAX : (int)k;
    *lang = (md_range){base + p, e - p};
    return true;
}

static bool fence_close(const walker *w, const char *s, size_t len)
{
    int col = 0;
    size_t p = skip_indent(s, len, 0, &col);
    if (col > w->fence_col + 3)
        return false;
    size_t k = 0;
    while (p + k < len && s[p + k] == w->fence_ch)
        k++;
    if ((int)k < w->fence_len || k < 3)
        return false;
    for (p += k; p < len; p++)
        if (!is_space(s[p]) && s[p] != '\r')
            return false;
    return true;
}

static int heading_level(const char *s, size_t len)
{
    int k = 0;
    while ((size_t)k < len && s[k] == '#')
        k++;
    if (k < 1 || k > 6 || ((size_t)k < len && !is_space(s[k])))
        return 0;
    return k;
}

/* The heading's text: after the #'s, without a closing run of #'s. */
static md_range heading_text(const char *s, size_t len, int level, size_t base)
{
    size_t p = (size_t)level;
    while (p < len && is_space(s[p]))
        p++;
    size_t e = trim_end(s, len);
    size_t h = e;
    while (h > p && s[h - 1] == '#')
        h--;
    if (h == p || is_space(s[h - 1]))
        e = trim_end(s, h);
    if (e < p)
        e = p;
    return (md_range){base + p, e - p};
}

static bool is_rule(const char *s, size_t len)
{
    char c = 0;
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (is_space(s[i]) || s[i] == '\r')
            continue;
        if ((s[i] != '-' && s[i] != '*' && s[i] != '_') || (c && s[i] != c))
            return false;
        c = s[i];
        n++;
    }
    return n >= 3;
}

typedef struct {
    size_t text;             /* bytes from the marker to the item's text */
    int text_cols;           /* columns from the marker to the item's text */
    bool ordered;
    char bullet[MD_MAX_BULLET];
} item_marker;

static bool list_marker(const char *s, size_t len, item_marker *m)
{
    size_t k = 0;
    if (len && (s[0] == '-' || s[0] == '*' || s[0] == '+')) {
        k = 1;
        m->ordered = false;
    } else {
        while (k < len && k < 9 && s[k] >= '0' && s[k] <= '9')
            k++;
        if (k == 0 || k >= len || (s[k] != '.' && s[k] != ')'))
            return false;
        k++;
        m->ordered = true;
    }
    if (k < len && !is_space(s[k]) && s[k] != '\r')
        return false;
    memcpy(m->bullet, s, k);
    m->bullet[k] = 0;
    int col = (int)k;
    size_t p = skip_indent(s, len, k, &col);
    if (p >= trim_end(s, len) || col - (int)k > 4) {
        /* Empty, or text indented as code after the marker: one space counts. */
        m->text = k < len ? k + 1 : k;
        m->text_cols = (int)k + 1;
    } else {
        m->text = p;
        m->text_cols = col;
    }
    return true;
}

/* A GFM delimiter row: only | : - and spaces, at least one '|' and one '-'. */
static bool delimiter_row(const char *s, size_t len)
{
    bool bar = false, dash = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '|')
            bar = true;
        else if (c == '-')
            dash = true;
        else if (c != ':' && !is_space(c) && c != '\r')
            return false;
    }
    return bar && dash;
}

/* The next line, stripped of `quote` quote markers, is a delimiter row. */
static bool table_follows(const walker *w, size_t next, int quote)
{
    if (next >= w->n)
        return false;
    const char *s = w->t + next;
    const char *nl = memchr(s, '\n', w->n - next);
    size_t len = nl ? (size_t)(nl - s) : w->n - next;
    int q;
    size_t p = strip_quotes(s, len, INT_MAX, &q);
    return q == quote && delimiter_row(s + p, len - p);
}

static line_class classify(const walker *w, const char *s, size_t len, int quote, size_t next)
{
    char ch;
    int count;
    md_range lang;
    if (fence_open(s, len, &ch, &count, &lang, 0))
        return LC_FENCE;
    if (heading_level(s, len))
        return LC_HEADING;
    if (is_rule(s, len))
        return LC_RULE;
    if (memchr(s, '|', len) && table_follows(w, next, quote))
        return LC_TABLE;
    return LC_PARA;
}

/* ---- blocks ------------------------------------------------------------------------ */

static void add_line(walker *w, size_t off, size_t len, size_t next)
{
    if (w->n_lines == w->cap_lines) {
        size_t cap = w->cap_lines ? w->cap_lines * 2 : 16;
        md_range *l = realloc(w->lines, cap * sizeof *l);
        if (!l)
            abort();
        w->lines = l;
        w->cap_lines = cap;
    }
    w->lines[w->n_lines++] = (md_range){off, len};
    w->end = next;
}

static void flush(walker *w)
{
    if (!w->open)
        return;
    w->b.lines = w->lines;
    w->b.n_lines = w->n_lines;
    w->b.last = w->end >= w->n;
    w->fn(w->user, &w->b);
    w->open = false;
    w->n_lines = 0;
}

/* Starts gathering a block in the current list context. */
static void open_block(walker *w, mdb_type type, int quote, bool item_start)
{
    flush(w);
    memset(&w->b, 0, sizeof w->b);
    w->b.type = type;
    w->b.quote = quote;
    w->b.depth = w->depth;
    w->b.item_start = item_start;
    if (w->depth > 0) {
        const list_item *it = &w->items[w->depth - 1];
        w->b.bullet_col = it->bullet_col;
        w->b.text_col = it->text_col;
        w->b.ordered = it->ordered;
        memcpy(w->b.bullet, it->bullet, sizeof w->b.bullet);
    }
    w->open = true;
    w->n_lines = 0;
}

static void push_item(walker *w, int col, const item_marker *m)
{
    while (w->depth > 0 && col < w->items[w->depth - 1].src_text)
        w->depth--;
    if (w->depth == MAX_DEPTH)
        w->depth--;
    list_item *it = &w->items[w->depth];
    it->src_text = col + m->text_cols;
    it->bullet_col = w->depth > 0 ? w->items[w->depth - 1].text_col : 0;
    if (it->bullet_col > MAX_TEXT_COL)
        it->bullet_col = MAX_TEXT_COL;
    int bullet_w = m->ordered ? (int)strlen(m->bullet) : 1;
    it->text_col = it->bullet_col + bullet_w + 1;
    it->ordered = m->ordered;
    memcpy(it->bullet, m->bullet, sizeof it->bullet);
    w->depth++;
}

/* Acts on a line's content s[0..len) (container markers and indentation
 * gone; `base` its offset in the text, `col` its column). */
static void content_line(walker *w, const char *s, size_t len, size_t base, int col, int quote, size_t next,
                         bool item_start, size_t *skip_to)
{
    len = trim_end(s, len);
    switch (classify(w, s, len, quote, next)) {
    case LC_FENCE: {
        open_block(w, MDB_CODE, quote, item_start);
        int count;
        fence_open(s, len, &w->fence_ch, &count, &w->b.lang, base);
        w->fence_len = count;
        w->fence_col = col;
        w->fence_quote = quote;
        w->in_fence = true;
        w->b.code_index = ++w->n_code;
        w->end = next;
        return;
    }
    case LC_HEADING: {
        open_block(w, MDB_HEADING, quote, item_start);
        w->b.heading = heading_level(s, len);
        md_range r = heading_text(s, len, w->b.heading, base);
        add_line(w, r.off, r.len, next);
        flush(w);
        return;
    }
    case LC_RULE:
        open_block(w, MDB_RULE, quote, item_start);
        w->end = next;
        flush(w);
        return;
    case LC_TABLE: {
        open_block(w, MDB_TABLE, quote, item_start);
        add_line(w, base, len, next);
        /* The delimiter row is the next line: take it now. */
        const char *d = w->t + next;
        const char *nl = memchr(d, '\n', w->n - next);
        size_t dlen = nl ? (size_t)(nl - d) : w->n - next;
        int q;
        size_t p = strip_quotes(d, dlen, INT_MAX, &q);
        size_t after = nl ? next + dlen + 1 : w->n;
        add_line(w, next + p, trim_end(d + p, dlen - p), after);
        *skip_to = after;
        w->in_table = true;
        w->table_quote = quote;
        return;
    }
    case LC_PARA:
        if (!(w->open && w->b.type == MDB_PARA && !w->after_blank && !item_start && w->b.quote == quote &&
              w->b.depth == w->depth))
            open_block(w, MDB_PARA, quote, item_start);
        if (len)
            add_line(w, base, len, next);
        else
            w->end = next;
        return;
    }
}

static void blank_line(walker *w, int quote, size_t next)
{
    flush(w);
    memset(&w->b, 0, sizeof w->b);
    w->b.type = MDB_BLANK;
    w->b.quote = quote;
    w->open = true;
    w->end = next;
    flush(w);
    w->after_blank = true;
}

/* One source line s = text[off .. off+len) ('\n' excluded); next: the
 * offset of the line after it.  Returns where the walk goes on. */
static size_t walk_line(walker *w, size_t off, size_t len, size_t next)
{
    const char *s = w->t + off;
    int q;
    if (w->in_fence) {
        size_t p = strip_quotes(s, len, w->fence_quote, &q);
        if (q == w->fence_quote) {
            if (fence_close(w, s + p, len - p)) {
                w->b.closed = true;
                w->end = next;
                w->in_fence = false;
                flush(w);
                return next;
            }
            size_t c = p + strip_cols(s + p, len - p, w->fence_col);
            size_t e = len;
            if (e > c && s[e - 1] == '\r')
                e--;
            add_line(w, off + c, e - c, next);
            return next;
        }
        w->in_fence = false; /* the quote it was in ended: so does the fence */
        flush(w);
    }
    size_t p = strip_quotes(s, len, INT_MAX, &q);
    if (w->in_table) {
        size_t e = trim_end(s + p, len - p);
        int col = 0;
        size_t c = skip_indent(s + p, e, 0, &col);
        if (q == w->table_quote && c < e && memchr(s + p, '|', e)) {
            add_line(w, off + p + c, e - c, next);
            return next;
        }
        w->in_table = false;
        flush(w);
    }
    if (q != w->list_quote) {
        w->depth = 0;
        w->list_quote = q;
    }
    const char *r = s + p;
    size_t rl = len - p;
    int col = 0;
    size_t c = skip_indent(r, rl, 0, &col);
    if (c >= trim_end(r, rl)) {
        blank_line(w, q, next);
        return next;
    }
    size_t skip_to = next;
    item_marker m;
    if (!is_rule(r + c, rl - c) && list_marker(r + c, rl - c, &m)) {
        flush(w);
        push_item(w, col, &m);
        size_t t = c + m.text;
        int tcol = col + m.text_cols;
        t = skip_indent(r, rl, t, &tcol);
        content_line(w, r + t, rl - t, off + p + t, tcol, q, next, true, &skip_to);
        w->after_blank = false;
        return skip_to;
    }
    if (w->depth > 0 && col < w->items[w->depth - 1].src_text) {
        bool lazy = w->open && w->b.type == MDB_PARA && !w->after_blank && w->b.quote == q &&
                    classify(w, r + c, trim_end(r + c, rl - c), q, next) == LC_PARA;
        if (lazy) {
            add_line(w, off + p + c, trim_end(r + c, rl - c), next);
            return next;
        }
        while (w->depth > 0 && col < w->items[w->depth - 1].src_text)
            w->depth--;
    }
    content_line(w, r + c, rl - c, off + p + c, col, q, next, false, &skip_to);
    w->after_blank = false;
    return skip_to;
}

void mdb_walk(const char *text, size_t n, md_walk_mem *mem, md_block_fn fn, void *user)
{
    walker w;
    memset(&w, 0, sizeof w);
    w.t = text;
    w.n = n;
    w.fn = fn;
    w.user = user;
    w.lines = mem->lines;
    w.cap_lines = mem->cap;
    for (size_t off = 0; off < n;) {
        const char *nl = memchr(text + off, '\n', n - off);
        size_t len = nl ? (size_t)(nl - (text + off)) : n - off;
        size_t next = nl ? off + len + 1 : n;
        off = walk_line(&w, off, len, next);
    }
    flush(&w);
    mem->lines = w.lines;
    mem->cap = w.cap_lines;
}
