/* md_table.c: a table's cells (gathered from md4c, row by row) -> aligned
 * rows between column bars, a rule under the header row.  Cell widths are
 * display widths of the rendered cells (markers gone, wide characters 2).
 * A table wider than the view shrinks its widest columns first and wraps
 * their cells; when even MIN_COL-cell columns do not fit, each row is shown
 * as "header: value" lines, which stay readable at any width. */
#include <stdlib.h>
#include <string.h>

#include "md_internal.h"
#include "common/ui_text.h"

#define MAX_COLS 32   /* more columns than this: the rows are shown as text */
#define MIN_COL 6     /* a shrunk column keeps this many cells (or its natural width) */

typedef struct {
    size_t run_first, run_n; /* its runs in md_table.runs */
    uint8_t align;           /* md_align */
    int width;               /* natural display width (its widest line) */
    int unit;                /* its widest unbreakable unit (a wide character, a control form) */
} cell;

struct md_table {
    unsigned n_cols;
    md_runs runs;            /* every cell's runs, cell after cell */
    cell *cells;             /* row-major, n_cells / n_cols rows */
    size_t n_cells, cap_cells;
    md_doc sub;              /* one row's cells, wrapped */
    md_runs rec;             /* one "header: value" line, or a row as text */
};

md_table *mdt_new(void)
{
    md_table *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    return t;
}

void mdt_free(md_table *t)
{
    if (!t)
        return;
    mdr_free(&t->runs);
    free(t->cells);
    mdo_free_lines(&t->sub);
    mdr_free(&t->rec);
    free(t);
}

/* ---- gathering ---------------------------------------------------------------------- */

void mdt_begin(md_table *t, unsigned n_cols)
{
    t->n_cols = n_cols ? n_cols : 1;
    t->n_cells = 0;
    mdr_clear(&t->runs);
}

/* Closes the last cell: its run count. */
static void end_cell(md_table *t)
{
    if (t->n_cells) {
        cell *c = &t->cells[t->n_cells - 1];
        c->run_n = t->runs.n - c->run_first;
    }
}

void mdt_cell(md_table *t, md_align align)
{
    end_cell(t);
    t->cells = md_grow(t->cells, &t->cap_cells, t->n_cells + 1, sizeof *t->cells);
    mdr_seal(&t->runs);
    cell *c = &t->cells[t->n_cells++];
    memset(c, 0, sizeof *c);
    c->run_first = t->runs.n;
    c->align = (uint8_t)align;
}

md_runs *mdt_runs(md_table *t)
{
    return &t->runs;
}

size_t mdt_last_text_cell(const md_table *t, size_t *first_run)
{
    for (size_t i = t->n_cells; i-- > 0;) {
        size_t n = i + 1 == t->n_cells ? t->runs.n - t->cells[i].run_first : t->cells[i].run_n;
        if (n) {
            *first_run = t->cells[i].run_first;
            return i;
        }
    }
    return (size_t)-1;
}

void mdt_cells_fix(md_table *t, size_t cell_i)
{
    for (size_t i = cell_i + 1; i < t->n_cells; i++) {
        t->cells[i].run_first = t->runs.n;
        t->cells[i].run_n = 0;
    }
    if (cell_i < t->n_cells)
        t->cells[cell_i].run_n = t->runs.n - t->cells[cell_i].run_first;
}

/* ---- measuring ------------------------------------------------------------------------- */

static void widest(void *user, ui_span sp)
{
    int *w = user;
    if (sp.width > *w)
        *w = sp.width;
}

/* A cell's natural width (its widest line: <br> breaks lines) and its
 * widest unit. */
static void measure(md_table *t, cell *c)
{
    c->width = 0;
    c->unit = 1;
    if (!c->run_n)
        return;
    const md_run *f = &t->runs.runs[c->run_first], *l = &t->runs.runs[c->run_first + c->run_n - 1];
    const char *s = sbuf_str(&t->runs.text) + f->off;
    size_t len = l->off + l->len - f->off, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '\n')
            continue;
        int w = md_width(s + start, i - start);
        c->width = w > c->width ? w : c->width;
        ui_wrap(s + start, i - start, 1, UI_WRAP_CHARS, widest, &c->unit);
        start = i + 1;
    }
}

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
static bool column_widths(const md_table *t, size_t n_rows, size_t n_cols, int avail, int *w)
{
    int nat[MAX_COLS], minw[MAX_COLS];
    long seps = 3 * (long)(n_cols - 1), sum_nat = seps, sum_min = seps;
    int max_nat = 1;
    for (size_t c = 0; c < n_cols; c++) {
        int unit = 1;
        nat[c] = 1;
        for (size_t r = 0; r < n_rows; r++) {
            const cell *ce = &t->cells[r * n_cols + c];
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

static void grid_row(md_doc *d, md_table *t, size_t row, size_t n_cols, const int *w, const md_prefix *prefix,
                     bool ascii)
{
    md_doc *sub = &t->sub;
    sbuf_clear(&sub->text);
    sub->n_spans = sub->n_lines = 0;
    md_prefix none;
    mdp_clear(&none);
    size_t first[MAX_COLS], count[MAX_COLS], height = 1;
    for (size_t c = 0; c < n_cols; c++) {
        const cell *ce = &t->cells[row * n_cols + c];
        first[c] = sub->n_lines;
        if (ce->run_n)
            mdo_wrap(sub, &t->runs, ce->run_first, ce->run_n, w[c], &none, &none, MDR_LINE_TABLE, 0);
        count[c] = sub->n_lines - first[c];
        if (count[c] > height)
            height = count[c];
    }
    const char *bar = ascii ? " | " : " \xe2\x94\x82 "; /* │ */
    for (size_t k = 0; k < height; k++) {
        mdo_line_begin(d, MDR_LINE_TABLE);
        mdo_prefix(d, prefix);
        for (size_t c = 0; c < n_cols; c++) {
            bool last = c + 1 == n_cols;
            if (c)
                mdo_span(d, MDR_SPAN_TABLE_BORDER, 0, 0, bar, strlen(bar));
            if (k >= count[c]) {
                if (!last)
                    mdo_pad(d, w[c]);
                continue;
            }
            const md_line *l = &sub->lines[first[c] + k];
            md_align al = (md_align)t->cells[c].align; /* the header row's, as GFM says */
            int room = w[c] - l->width;
            int left = al == MDT_RIGHT ? room : al == MDT_CENTER ? room / 2 : 0;
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
    mdo_line_begin(d, MDR_LINE_TABLE);
    mdo_prefix(d, prefix);
    for (size_t c = 0; c < n_cols; c++) {
        if (c)
            mdo_span(d, MDR_SPAN_TABLE_BORDER, 0, 0, cross, strlen(cross));
        for (int i = 0; i < w[c]; i++)
            mdo_span(d, MDR_SPAN_TABLE_BORDER, 0, 0, dash, strlen(dash));
    }
}

static void copy_cell(md_table *t, const cell *ce)
{
    for (size_t i = 0; i < ce->run_n; i++) {
        const md_run *r = &t->runs.runs[ce->run_first + i];
        mdr_copy(&t->rec, sbuf_str(&t->runs.text) + r->off, r->len, r->flags);
    }
}

/* Too narrow for columns: each row as "header: value" lines, rows apart. */
static void records(md_doc *d, md_table *t, size_t n_rows, size_t n_cols, const md_prefix *prefix, int width,
                    bool ascii)
{
    md_prefix cont = *prefix;
    if (width - prefix->width >= 8)
        mdp_add(&cont, MDR_SPAN_PAD, MDP_INDENT, "  ", 2);
    const char *dash = ascii ? "-" : "\xe2\x94\x80";
    for (size_t r = n_rows > 1 ? 1 : 0; r < n_rows; r++) {
        if (r > 1) {
            mdo_line_begin(d, MDR_LINE_TABLE);
            mdo_prefix(d, prefix);
            for (int i = prefix->width; i < width && i < prefix->width + 3; i++)
                mdo_span(d, MDR_SPAN_TABLE_BORDER, 0, 0, dash, strlen(dash));
        }
        for (size_t c = 0; c < n_cols; c++) {
            mdr_clear(&t->rec);
            const cell *head = &t->cells[c], *value = &t->cells[r * n_cols + c];
            copy_cell(t, head);
            if (r > 0) {
                if (head->run_n && value->run_n)
                    mdr_copy(&t->rec, ": ", 2, MDR_TABLE_CELL | MDR_TABLE_HEAD);
                mdr_seal(&t->rec);
                copy_cell(t, value);
            }
            if (t->rec.n)
                mdo_wrap(d, &t->rec, 0, t->rec.n, width, prefix, &cont, MDR_LINE_TABLE, 0);
        }
    }
}

/* More columns than MAX_COLS: each row as its cells joined by bars, wrapped. */
static void as_text(md_doc *d, md_table *t, size_t n_rows, size_t n_cols, const md_prefix *prefix, int width)
{
    for (size_t r = 0; r < n_rows; r++) {
        mdr_clear(&t->rec);
        for (size_t c = 0; c < n_cols; c++) {
            if (c)
                mdr_copy(&t->rec, " | ", 3, 0);
            mdr_seal(&t->rec);
            copy_cell(t, &t->cells[r * n_cols + c]);
        }
        if (t->rec.n)
            mdo_wrap(d, &t->rec, 0, t->rec.n, width, prefix, prefix, MDR_LINE_TEXT, 0);
    }
}

void mdt_render(md_doc *d, md_table *t, const md_prefix *prefix, int width, unsigned opts)
{
    end_cell(t);
    bool ascii = opts & MDR_OPT_ASCII;
    size_t n_cols = t->n_cols, n_rows = t->n_cells / n_cols;
    if (!n_rows)
        return;
    for (size_t i = 0; i < n_rows * n_cols; i++)
        measure(t, &t->cells[i]);
    if (n_cols > MAX_COLS) {
        as_text(d, t, n_rows, n_cols, prefix, width);
        return;
    }
    int w[MAX_COLS];
    if (!column_widths(t, n_rows, n_cols, width - prefix->width, w)) {
        records(d, t, n_rows, n_cols, prefix, width, ascii);
        return;
    }
    for (size_t r = 0; r < n_rows; r++) {
        grid_row(d, t, r, n_cols, w, prefix, ascii);
        if (r == 0)
            header_rule(d, n_cols, w, prefix, ascii);
    }
}
