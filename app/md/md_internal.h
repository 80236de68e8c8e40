/* md_internal.h: the parts of md_render shared between its files, not for
 * other modules.
 *
 *   md_render.c  md4c's callbacks: the container stack (quotes, lists,
 *                items), inline text gathered into styled runs, blocks
 *                drawn as they end; md_code_blocks() on the same walk
 *   md_source.c  what md4c does not report, read from the source
 *   md_runs.c    styled runs of sanitized text; HTML entities
 *   md_lines.c   the doc's lines and spans (md_span_text, md_line_str
 *                too): prefixes, wrapping runs, code
 *   md_table.c   a table's cells -> aligned rows, or "header: value" records
 *
 * The files call one way, none back up (tests/t_layers.sh keeps it):
 * md_render -> md_table -> md_lines -> md_runs, md_render also using
 * md_lines, md_runs and md_source, md_table also md_runs.  A table's cells
 * are wrapped into a doc of their own with md_lines alone.
 *
 * md_render.h's constants are MDR_: md4c's are MD_. */
#ifndef GLM_MD_INTERNAL_H
#define GLM_MD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <md4c.h>

#include "md_render.h"

/* ---- styled runs (md_runs.c) ----------------------------------------------------------- */

/* p with room for `need` elements of `size` bytes (*cap grows by doubling);
 * out of memory aborts.  Assign the result before taking any pointer into
 * the array: the old one may be gone. */
void *md_grow(void *p, size_t *cap, size_t need, size_t size);

typedef struct {
    size_t off, len;      /* bytes in the run text (sanitized; '\n' marks a line break) */
    uint8_t flags;        /* MDR_BOLD ... */
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
/* Appends raw text: sanitized, tabs expanded ('\n' stays a line break); a
 * run with the last run's flags extends it unless sealed. */
void mdr_add(md_runs *r, const char *s, size_t n, uint8_t flags);
/* Appends text that is sanitized already (copies between run lists). */
void mdr_copy(md_runs *r, const char *s, size_t n, uint8_t flags);
/* Ends the current run: what comes next is a new run, at column 0. */
void mdr_seal(md_runs *r);
/* Drops runs [first ..) and their text. */
void mdr_truncate(md_runs *r, size_t first);
/* Drops the text from byte `off` on (and the runs it leaves empty). */
void mdr_cut(md_runs *r, size_t off);
/* Appends what the HTML entity s[0..n) ("&amp;", "&#233;", "&#x1F600;")
 * stands for, or the entity as written when it names nothing we know. */
void mdr_add_entity(md_runs *r, const char *s, size_t n, uint8_t flags);

/* The code point an HTML entity names ("&amp;", "&#233;", "&#x1F600;";
 * U+FFFD for a number that is none), 0 when it names nothing we know. */
uint32_t md_entity_cp(const char *s, size_t n);

/* ui_text_width() with a shortcut for printable ASCII (one cell a byte). */
int md_width(const char *s, size_t n);

/* ---- prefixes and lines (md_lines.c) ------------------------------------------------------- */

/* What a piece of a prefix is, for giving way on narrow widths: indentation
 * goes first, then all quote bars but one, then the bars, then bullets. */
enum { MDP_INDENT, MDP_BAR, MDP_BULLET };

#define MDP_PIECES 24
#define MDP_BYTES 256

/* The cells drawn before a block's lines, container by container. */
typedef struct {
    char s[MDP_BYTES];
    size_t len;
    struct {
        uint8_t kind;     /* md_span_kind */
        uint8_t cls;      /* MDP_INDENT ... */
        uint16_t off, len;
        int width;
    } piece[MDP_PIECES];
    int n;
    int width;
} md_prefix;

void mdp_clear(md_prefix *p);
/* Appends a piece (adjacent indentation merges; silently dropped when full). */
void mdp_add(md_prefix *p, md_span_kind kind, int cls, const char *s, size_t n);
/* Gives the text at least 10 cells (or half a narrow width), dropping
 * indentation, then all bars but one, then the bars, then the bullets. */
void mdp_fit(md_prefix *p, int width);
/* Drops the blank cells at its end (a line with nothing after it). */
void mdp_trim(md_prefix *p);
/* Keeps the bars only, the last one without its space (a blank line's). */
void mdp_bars_only(md_prefix *p);

/* Frees the doc's text, spans and lines and zeroes it, but for its scratch
 * (md_render's walker state, which md_doc_free() frees): a table's cell
 * doc, which has none, is freed here without calling back into md_render. */
void mdo_free_lines(md_doc *d);
void mdo_line_begin(md_doc *d, md_line_kind kind);
void mdo_span(md_doc *d, md_span_kind kind, uint8_t flags, uint8_t heading, const char *s, size_t n);
/* n cells of MDR_SPAN_PAD. */
void mdo_pad(md_doc *d, int cells);
void mdo_prefix(md_doc *d, const md_prefix *p);
/* Wraps the runs r->runs[first_run .. first_run + n_runs) at `width` cells
 * (the whole line: the prefixes' cells are taken off) into lines of `kind`,
 * the first line after `first`, later ones after `cont`. */
void mdo_wrap(md_doc *d, const md_runs *r, size_t first_run, size_t n_runs, int width, const md_prefix *first,
              const md_prefix *cont, md_line_kind kind, uint8_t heading);
/* Appends line `l` of `src` (its spans) to the current line of d. */
void mdo_copy_line(md_doc *d, const md_doc *src, const md_line *l);
/* A rule across the width after the prefix. */
void mdo_rule(md_doc *d, const md_prefix *p, int width, bool ascii);
/* A fenced code block: its header ("[N] lang", cut to the width) after
 * `first`, then its lines (code[0..n), raw, each ending in '\n') after `cont`,
 * tabs expanded, wrapped only with MDR_OPT_WRAP_CODE. */
void mdo_code(md_doc *d, sbuf *scratch, const char *lang, size_t lang_len, const char *code, size_t n,
              uint32_t index, const md_prefix *first, const md_prefix *cont, int width, unsigned opts);

/* ---- tables (md_table.c) ------------------------------------------------------------ */

typedef enum { MDT_LEFT, MDT_CENTER, MDT_RIGHT } md_align;

typedef struct md_table md_table;
md_table *mdt_new(void);
void mdt_free(md_table *t);
/* Starts a table of n_cols columns (md4c pads every row to it). */
void mdt_begin(md_table *t, unsigned n_cols);
/* Starts the next cell (row by row); its text goes to mdt_runs() (the
 * caller adds MDR_TABLE_CELL, and MDR_TABLE_HEAD in the header row). */
void mdt_cell(md_table *t, md_align align);
md_runs *mdt_runs(md_table *t);
/* The first run of the last cell that has text (SIZE_MAX: none); after its
 * runs were rewritten (md_render's open markers), mdt_cells_fix() counts
 * them again. */
size_t mdt_last_text_cell(const md_table *t, size_t *first_run);
void mdt_cells_fix(md_table *t, size_t cell);
/* Draws the table gathered; prefix (quote bars, list indentation) before
 * every line, `width` the cells of the whole line. */
void mdt_render(md_doc *d, md_table *t, const md_prefix *prefix, int width, unsigned opts);

/* ---- the source around md4c's text (md_source.c) ------------------------------------------ */

#define MDS_NONE ((size_t)-1)

typedef struct {
    const char *s;        /* what md4c parses (followed by MD_SOURCE_PAD NULs) */
    size_t n;
} md_src;

/* p points into the source (md4c's text does, but for what it makes up:
 * "\n" of line breaks, a code block's indentation, U+FFFD). */
bool mds_holds(const md_src *s, const char *p);
size_t mds_line_end(const md_src *s, size_t p);   /* the '\n' (or n) ending p's line */
size_t mds_line_start(const md_src *s, size_t p);
/* A blank line (nothing but container markers) lies wholly between offsets
 * from and to: two blocks there were written apart. */
bool mds_blank_line_between(const md_src *s, size_t from, size_t to);
/* The line at ls (container markers skipped) is a fence of at least three
 * `ch` and nothing else; a thematic break ("---", "* * *"; ch unused). */
bool mds_fence_line(const md_src *s, size_t ls, char ch);
bool mds_rule_line(const md_src *s, size_t ls, char ch);
/* The first line from ls on that is not blank, if `is` says it is the one
 * (a block md4c gave no text of: a rule, an empty code block), else MDS_NONE. */
size_t mds_first_line(const md_src *s, size_t ls, bool (*is)(const md_src *, size_t, char), char ch);
/* A heading whose text is [start, end): where it ends in the source (a
 * setext heading's "===" or "---" underline line belongs to it). */
size_t mds_heading_end(const md_src *s, size_t start, size_t end);
/* The line at ls holds only | - : and blanks, with a bar, under a line
 * with a bar: a table's delimiter row (or what will be one). */
bool mds_delimiter_row(const md_src *s, size_t ls);
/* The run of `len` markers `ch` (* _ ~ `) at offset `at`, left as text by
 * md4c, may open emphasis or code that the rest of a streaming answer
 * closes (CommonMark's flanking rules, simplified to ASCII classes; an
 * escaped one never). */
bool mds_may_open(const md_src *s, size_t at, size_t len, char ch);
/* The last `cols` columns of indentation before offset p (tabs every 4
 * columns from the line's start) as written -- a tab that reaches back
 * before them as the spaces it has after -- appended to out. */
void mds_indent(const md_src *s, size_t p, size_t cols, sbuf *out);
/* Nothing but blanks, table bars and quote markers from p to the end. */
bool mds_reaches_end(const md_src *s, size_t p);

/* ---- md4c (md_render.c) --------------------------------------------------------------- */

/* What md4c parses: GitHub's extensions; fenced code only (an answer's
 * indented lines are prose); HTML only inline (shown as written, <br> a
 * line break) -- an HTML block would swallow the text after it. */
#define MD_PARSE_FLAGS                                                                                          \
    (MD_FLAG_TABLES | MD_FLAG_STRIKETHROUGH | MD_FLAG_TASKLISTS | MD_FLAG_PERMISSIVEAUTOLINKS |                 \
     MD_FLAG_NOINDENTEDCODEBLOCKS | MD_FLAG_NOHTMLBLOCKS)
/* NUL bytes after the text md4c is given (see md_render.c's walk()); the
 * fuzz target checks md4c reads no further. */
#define MD_SOURCE_PAD 16

/* Scratch of md_render (md_doc.scratch): md_render.c's walker state. */
struct md_scratch;
void md_scratch_free(md_scratch *s);

#endif
