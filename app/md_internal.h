/* md_internal.h: the parts of md_render shared between its files, not for
 * other modules.
 *
 *   md_blocks.c  the line walker: containers (quotes, lists), fences,
 *                headings, rules, tables, paragraphs -> a stream of blocks
 *   md_inline.c  a paragraph's inline Markdown -> styled runs of sanitized text
 *   md_table.c   a table block -> aligned rows, or "header: value" records
 *   md_render.c  blocks -> wrapped, prefixed display lines; md_code_blocks()
 *
 * Why a walker with a callback: md_render() and md_code_blocks() must agree
 * on what is code (one fence parser), so both are fed by the same walk. */
#ifndef GLM_MD_INTERNAL_H
#define GLM_MD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "md_render.h"

/* ---- blocks (md_blocks.c) ---------------------------------------------------------- */

typedef enum { MDB_BLANK, MDB_PARA, MDB_HEADING, MDB_RULE, MDB_CODE, MDB_TABLE } mdb_type;

typedef struct {
    size_t off, len;
} md_range;

#define MD_MAX_BULLET 16

typedef struct {
    mdb_type type;
    int quote;            /* block-quote depth */
    int depth;            /* list nesting, 0 outside lists */
    int bullet_col;       /* display column of the item's bullet (depth > 0) */
    int text_col;         /* display column of the item's text (depth > 0) */
    bool item_start;      /* the first block of a list item: draws the bullet */
    bool ordered;
    char bullet[MD_MAX_BULLET]; /* ordered: the number as written ("12."); else "-", "*" or "+" */
    int heading;          /* MDB_HEADING: 1..6 */
    const md_range *lines; /* PARA, HEADING: lines with their indentation trimmed;
                             CODE: content lines; TABLE: the rows, the delimiter row second */
    size_t n_lines;
    md_range lang;        /* CODE: the info string's first word */
    bool closed;          /* CODE: the closing fence was seen */
    uint32_t code_index;  /* CODE: 1-based */
    bool last;            /* the block runs to the end of the text (it may still grow) */
} md_block;

typedef void (*md_block_fn)(void *user, const md_block *b);

/* The walker's line list, kept by the caller between walks. */
typedef struct {
    md_range *lines;
    size_t cap;
} md_walk_mem;

/* Walks text[0..n) and calls fn once per block, in order.  Blank lines are
 * MDB_BLANK blocks (one per blank line; the renderer collapses them). */
void mdb_walk(const char *text, size_t n, md_walk_mem *mem, md_block_fn fn, void *user);

/* ---- inline runs (md_inline.c) ------------------------------------------------------- */

typedef struct {
    size_t off, len;      /* bytes in the run text (sanitized; '\n' marks a line break) */
    uint8_t flags;        /* MD_BOLD ... */
} md_run;

typedef struct {
    sbuf text;
    md_run *runs;
    size_t n, cap;
    int col;              /* display column at text offset col_off (measured only when a */
    size_t col_off;       /* tab needs it: columns count from the last line break) */
    bool sealed;          /* the next run starts anew (no merge with the last) */
} md_runs;

void mdr_clear(md_runs *r);
void mdr_free(md_runs *r);
/* Appends raw text as one run: sanitized, tabs expanded (a run with the
 * last run's flags extends it unless sealed). */
void mdr_add(md_runs *r, const char *s, size_t n, uint8_t flags);
/* Appends text that is sanitized already (copies between run lists). */
void mdr_copy(md_runs *r, const char *s, size_t n, uint8_t flags);
/* Ends the current run: what comes next is a new run, at column 0. */
void mdr_seal(md_runs *r);

/* Working memory of the inline parser, kept between calls. */
typedef struct md_inline_mem md_inline_mem;
void mdi_mem_free(md_inline_mem **mem);

/* Parses one paragraph's raw text (lines joined by '\n') and appends its
 * runs to out, every run's flags or-ed with `base`.  streaming: an emphasis
 * or code span still open at the end styles to the end. */
void mdi_parse(md_inline_mem **mem, const char *s, size_t n, uint8_t base, bool streaming, md_runs *out);

/* ---- output (md_render.c) --------------------------------------------------------------- */

/* ui_text_width() with a shortcut for printable ASCII (one cell a byte). */
int md_width(const char *s, size_t n);

/* The prefix drawn before a block's lines, in four fixed parts (empty when
 * unused): quote bars, indentation, a bullet, the gap after the bullet. */
enum { MDP_BARS, MDP_INDENT, MDP_BULLET, MDP_GAP, MDP_PARTS };
typedef struct {
    struct {
        uint8_t kind;     /* md_span_kind */
        uint8_t len;
        char s[44];
        int width;
    } part[MDP_PARTS];
    int width;
} md_prefix;

void mdo_line_begin(md_doc *d, md_line_kind kind);
void mdo_span(md_doc *d, md_span_kind kind, uint8_t flags, uint8_t heading, const char *s, size_t n);
/* n cells of MD_SPAN_PAD. */
void mdo_pad(md_doc *d, int cells);
void mdo_prefix(md_doc *d, const md_prefix *p);
/* Wraps the runs r->runs[first_run .. first_run + n_runs) at `width` cells
 * (the whole line: the prefixes' cells are taken off) into lines of `kind`,
 * the first line after `first`, later ones after `cont`. */
void mdo_wrap(md_doc *d, const md_runs *r, size_t first_run, size_t n_runs, int width, const md_prefix *first,
              const md_prefix *cont, md_line_kind kind, uint8_t heading);
/* Appends line `l` of `src` (its spans) to the current line of d. */
void mdo_copy_line(md_doc *d, const md_doc *src, const md_line *l);

/* ---- tables (md_table.c) ------------------------------------------------------------ */

typedef struct md_table_mem md_table_mem;
void mdt_mem_free(md_table_mem **mem);
/* Renders a table block; prefix (quote bars, list indentation) before every
 * line, `width` the cells of the whole line. */
void mdt_render(md_doc *d, md_table_mem **mem, md_inline_mem **imem, const md_block *b, const char *text,
                const md_prefix *prefix, int width, unsigned opts);
/* Cells of one table row: their trimmed ranges (offsets from s) into out
 * (at most max); returns the row's cell count (which may exceed max). */
size_t mdt_split_row(const char *s, size_t len, md_range *out, size_t max);

/* Scratch of md_render (md_doc.scratch). */
struct md_scratch {
    md_walk_mem walk;
    md_runs runs;
    sbuf para;
    md_inline_mem *imem;
    md_table_mem *tmem;
};

#endif
