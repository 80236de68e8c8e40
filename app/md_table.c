/* md_table.c: a GFM table block -> aligned rows between column bars, a rule
 * under the header row.  Cell widths are display widths of the rendered
 * cells (markers gone, wide characters 2).  A table wider than the view
 * shrinks its widest columns first and wraps their cells; when even
 * MIN_COL-cell columns do not fit, each row is shown as "header: value"
 * lines, which stay readable at any width. */
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"
#include "ui_text.h"

#define MAX_COLS 32   /* more columns than this: the rows are shown as text */
#define MIN_COL 6     /* a shrunk column keeps this many cells (or its natural width) */

typedef enum { AL_LEFT, AL_CENTER, AL_RIGHT } align;

typedef struct {
    size_t run_first, run_n; /* its runs in md_table_mem.runs */
    int width;               /* natural display width */
    int unit;                /* its widest unbreakable unit (a wide character, a control form) */
} cell;

struct md_table_mem {
    md_runs runs;            /* every cell's runs, cell after cell */
    cell *cells;             /* row-major, n_rows x n_cols (the delimiter row left out) */
    size_t cap_cells;
    md_doc sub;              /* one row's cells, wrapped */
    md_runs rec;             /* one "header: value" line */
    sbuf joined;             /* rows as text (too many columns) */
};

void mdt_mem_free(md_table_mem **mem)
{
    if (!*mem)
        return;
    mdr_free(&(*mem)->runs);
    free((*mem)->cells);
    md_doc_free(&(*mem)->sub);
    mdr_free(&(*mem)->rec);
    sbuf_free(&(*mem)->joined);
    free(*mem);
    *mem = NULL;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* ---- rows -> cells ------------------------------------------------------------------ */

static md_range trimmed(const char *s, size_t a, size_t b)
{
    while (a < b && is_space(s[a]))
        a++;
    while (b > a && is_space(s[b - 1]))
        b--;
    return (md_range){a, b - a};
}

size_t mdt_split_row(const char *s, size_t len, md_range *out, size_t max)
{
    md_range all = trimmed(s, 0, len);
    size_t a = all.off, b = all.off + all.len;
    if (a < b && s[a] == '|')
        a++;
    if (b > a && s[b - 1] == '|' && !(b - 1 > a && s[b - 2] == '\\'))
        b--;
    size_t count = 0, start = a;
    for (size_t i = a; i <= b;) {
        if (i < b && s[i] == '\\' && i + 1 < b) {
            i += 2;
            continue;
        }
        if (i < b && s[i] == '`') { /* a '|' inside a code span does not split */
            size_t k = i;
            while (k < b && s[k] == '`')
                k++;
            size_t run = k - i, p = k;
            while (p < b) {
                size_t q = p;
                while (q < b && s[q] == '`')
                    q++;
                if (q - p == run)
                    break;
                p = q > p ? q : p + 1;
            }
            i = p < b ? p + run : k;
            continue;
        }
        if (i == b || s[i] == '|') {
            if (count < max)
                out[count] = trimmed(s, start, i);
            count++;
            start = i + 1;
        }
        i++;
    }
    return count;
}

static void alignments(const char *s, size_t len, size_t n_cols, align *al)
{
    md_range d[MAX_COLS];
    size_t n = mdt_split_row(s, len, d, MAX_COLS);
    for (size_t c = 0; c < n_cols; c++) {
        al[c] = AL_LEFT;
        if (c >= n || !d[c].len)
            continue;
        bool left = s[d[c].off] == ':', right = s[d[c].off + d[c].len - 1] == ':';
        al[c] = left && right && d[c].len > 1 ? AL_CENTER : right ? AL_RIGHT : AL_LEFT;
    }
}

static void widest_unit(void *user, ui_span sp)
{
    int *w = user;
    if (sp.width > *w)
        *w = sp.width;
}

/* Parses every cell's inline Markdown into m->runs. */
static void parse_cells(md_table_mem *m, md_inline_mem **imem, const md_block *b, const char *text, size_t n_rows,
                        size_t n_cols, bool streaming)
{
    if (n_rows * n_cols > m->cap_cells) {
        cell *c = realloc(m->cells, n_rows * n_cols * sizeof *c);
        if (!c)
            abort();
        m->cells = c;
        m->cap_cells = n_rows * n_cols;
    }
    mdr_clear(&m->runs);
    for (size_t r = 0; r < n_rows; r++) {
        const md_range *line = &b->lines[r == 0 ? 0 : r + 1];
        const char *row = text + line->off;
        md_range parts[MAX_COLS];
        size_t have = mdt_split_row(row, line->len, parts, MAX_COLS);
        for (size_t c = 0; c < n_cols; c++) {
            cell *ce = &m->cells[r * n_cols + c];
            mdr_seal(&m->runs);
            ce->run_first = m->runs.n;
            if (c < have && parts[c].len) {
                bool open_end = streaming && r + 1 == n_rows && c + 1 == have;
                mdi_parse(imem, row + parts[c].off, parts[c].len, MD_TABLE_CELL | (r == 0 ? MD_TABLE_HEAD : 0),
                          open_end, &m->runs);
            }
            ce->run_n = m->runs.n - ce->run_first;
            ce->width = 0;
            ce->unit = 1;
            if (ce->run_n) {
                const md_run *f = &m->runs.runs[ce->run_first], *l = &m->runs.runs[ce->run_first + ce->run_n - 1];
                const char *t = sbuf_str(&m->runs.text) + f->off;
                size_t len = l->off + l->len - f->off;
                ce->width = md_width(t, len);
                ui_wrap(t, len, 1, UI_WRAP_CHARS, widest_unit, &ce->unit);
            }
        }
    }
}

/* ---- column widths ---------------------------------------------------------------------- */

static long planned(const int *nat, const int *minw, size_t n, int cap)
{
    long sum = 0;
    for (size_t c = 0; c < n; c++) {
        int w = nat[c] < cap ? nat[c] : cap;
        sum += w > minw[c] ? w : minw[c];
    }
    return sum;
}

/* Column widths that fit `avail` cells; false when none do. */
static bool column_widths(const md_table_mem *m, size_t n_rows, size_t n_cols, int avail, int *w)
{
    int nat[MAX_COLS], minw[MAX_COLS];
    long seps = 3 * (long)(n_cols - 1), sum_nat = seps, sum_min = seps;
    int max_nat = 1;
    for (size_t c = 0; c < n_cols; c++) {
        int unit = 1;
        nat[c] = 1;
        for (size_t r = 0; r < n_rows; r++) {
            const cell *ce = &m->cells[r * n_cols + c];
            nat[c] = ce->width > nat[c] ? ce->width : nat[c];
            unit = ce->unit > unit ? ce->unit : unit;
        }
        minw[c] = nat[c] < MIN_COL ? nat[c] : MIN_COL;
        minw[c] = unit > minw[c] ? unit : minw[c]; /* a unit is never split */
        sum_nat += nat[c];
        sum_min += minw[c];
        if (nat[c] > max_nat)
            max_nat = nat[c];
    }
    if (sum_nat <= avail) {
        memcpy(w, nat, n_cols * sizeof *w);
        return true;
    }
    if (sum_min > avail)
        return false;
    /* The largest cap on column widths that fits; the widest shrink first. */
    int lo = 0, hi = max_nat;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (planned(nat, minw, n_cols, mid) + seps <= avail)
            lo = mid;
        else
            hi = mid - 1;
    }
    long left = avail - seps - planned(nat, minw, n_cols, lo);
    for (size_t c = 0; c < n_cols; c++) {
        int cw = nat[c] < lo ? nat[c] : lo;
        w[c] = cw > minw[c] ? cw : minw[c];
        if (left > 0 && w[c] < nat[c]) {
            w[c]++;
            left--;
        }
    }
    return true;
}

/* ---- drawing ------------------------------------------------------------------------------ */

static void grid_row(md_doc *d, md_table_mem *m, size_t row, size_t n_cols, const int *w, const align *al,
                     const md_prefix *prefix, bool ascii)
{
    md_doc *sub = &m->sub;
    sbuf_clear(&sub->text);
    sub->n_spans = sub->n_lines = 0;
    md_prefix none = {0};
    size_t first[MAX_COLS], count[MAX_COLS], height = 1;
    for (size_t c = 0; c < n_cols; c++) {
        const cell *ce = &m->cells[row * n_cols + c];
        first[c] = sub->n_lines;
        if (ce->run_n)
            mdo_wrap(sub, &m->runs, ce->run_first, ce->run_n, w[c], &none, &none, MD_LINE_TABLE, 0);
        count[c] = sub->n_lines - first[c];
        if (count[c] > height)
            height = count[c];
    }
    const char *bar = ascii ? " | " : " \xe2\x94\x82 "; /* │ */
    for (size_t k = 0; k < height; k++) {
        mdo_line_begin(d, MD_LINE_TABLE);
        mdo_prefix(d, prefix);
        for (size_t c = 0; c < n_cols; c++) {
            bool last = c + 1 == n_cols;
            if (c)
                mdo_span(d, MD_SPAN_TABLE_BORDER, 0, 0, bar, strlen(bar));
            if (k >= count[c]) {
                if (!last)
                    mdo_pad(d, w[c]);
                continue;
            }
            const md_line *l = &sub->lines[first[c] + k];
            int room = w[c] - l->width;
            int left = al[c] == AL_RIGHT ? room : al[c] == AL_CENTER ? room / 2 : 0;
            mdo_pad(d, left);
            mdo_copy_line(d, sub, l);
            if (!last)
                mdo_pad(d, room - left);
        }
    }
}

static void header_rule(md_doc *d, size_t n_cols, const int *w, const md_prefix *prefix, bool ascii)
{
    const char *dash = ascii ? "-" : "\xe2\x94\x80", *cross = ascii ? "-+-" : "\xe2\x94\x80\xe2\x94\xbc\xe2\x94\x80";
    mdo_line_begin(d, MD_LINE_TABLE);
    mdo_prefix(d, prefix);
    for (size_t c = 0; c < n_cols; c++) {
        if (c)
            mdo_span(d, MD_SPAN_TABLE_BORDER, 0, 0, cross, strlen(cross));
        for (int i = 0; i < w[c]; i++)
            mdo_span(d, MD_SPAN_TABLE_BORDER, 0, 0, dash, strlen(dash));
    }
}

static void copy_cell(md_table_mem *m, const cell *ce)
{
    for (size_t i = 0; i < ce->run_n; i++) {
        const md_run *r = &m->runs.runs[ce->run_first + i];
        mdr_copy(&m->rec, sbuf_str(&m->runs.text) + r->off, r->len, r->flags);
    }
}

/* Too narrow for columns: each row as "header: value" lines, rows apart. */
static void records(md_doc *d, md_table_mem *m, size_t n_rows, size_t n_cols, const md_prefix *prefix, int width,
                    bool ascii)
{
    md_prefix cont = *prefix;
    if ((size_t)cont.part[MDP_INDENT].len + 2 <= sizeof cont.part[0].s && width - prefix->width >= 8) {
        memset(cont.part[MDP_INDENT].s + cont.part[MDP_INDENT].len, ' ', 2);
        cont.part[MDP_INDENT].len += 2;
        cont.part[MDP_INDENT].kind = MD_SPAN_PAD;
        cont.part[MDP_INDENT].width += 2;
        cont.width += 2;
    }
    const char *dash = ascii ? "-" : "\xe2\x94\x80";
    for (size_t r = n_rows > 1 ? 1 : 0; r < n_rows; r++) {
        if (r > 1) {
            mdo_line_begin(d, MD_LINE_TABLE);
            mdo_prefix(d, prefix);
            for (int i = prefix->width; i < width && i < prefix->width + 3; i++)
                mdo_span(d, MD_SPAN_TABLE_BORDER, 0, 0, dash, strlen(dash));
        }
        for (size_t c = 0; c < n_cols; c++) {
            mdr_clear(&m->rec);
            const cell *head = &m->cells[c], *value = &m->cells[r * n_cols + c];
            copy_cell(m, head);
            if (r > 0) {
                if (head->run_n && value->run_n)
                    mdr_copy(&m->rec, ": ", 2, MD_TABLE_CELL | MD_TABLE_HEAD);
                mdr_seal(&m->rec);
                copy_cell(m, value);
            }
            if (m->rec.n)
                mdo_wrap(d, &m->rec, 0, m->rec.n, width, prefix, &cont, MD_LINE_TABLE, 0);
        }
    }
}

/* More columns than MAX_COLS: the rows as written. */
static void as_text(md_doc *d, md_table_mem *m, md_inline_mem **imem, const md_block *b, const char *text,
                    const md_prefix *prefix, int width)
{
    sbuf_clear(&m->joined);
    for (size_t i = 0; i < b->n_lines; i++) {
        if (i)
            sbuf_addc(&m->joined, '\n');
        sbuf_add(&m->joined, text + b->lines[i].off, b->lines[i].len);
    }
    mdr_clear(&m->rec);
    mdi_parse(imem, sbuf_str(&m->joined), m->joined.len, 0, false, &m->rec);
    mdo_wrap(d, &m->rec, 0, m->rec.n, width, prefix, prefix, MD_LINE_TEXT, 0);
}

void mdt_render(md_doc *d, md_table_mem **mem, md_inline_mem **imem, const md_block *b, const char *text,
                const md_prefix *prefix, int width, unsigned opts)
{
    if (!*mem && !(*mem = calloc(1, sizeof **mem)))
        abort();
    md_table_mem *m = *mem;
    bool ascii = opts & MD_OPT_ASCII;
    md_range head[MAX_COLS];
    size_t n_cols = mdt_split_row(text + b->lines[0].off, b->lines[0].len, head, MAX_COLS);
    if (n_cols > MAX_COLS || b->n_lines < 2) {
        as_text(d, m, imem, b, text, prefix, width);
        return;
    }
    align al[MAX_COLS];
    alignments(text + b->lines[1].off, b->lines[1].len, n_cols, al);
    size_t n_rows = b->n_lines - 1;
    parse_cells(m, imem, b, text, n_rows, n_cols, (opts & MD_OPT_STREAMING) && b->last);
    int w[MAX_COLS];
    if (!column_widths(m, n_rows, n_cols, width - prefix->width, w)) {
        records(d, m, n_rows, n_cols, prefix, width, ascii);
        return;
    }
    for (size_t r = 0; r < n_rows; r++) {
        grid_row(d, m, r, n_cols, w, al, prefix, ascii);
        if (r == 0)
            header_rule(d, n_cols, w, prefix, ascii);
    }
}
