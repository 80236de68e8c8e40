/* md_render.h: an answer's Markdown as display lines for the chat view.
 *
 * md_render() turns an answer's text (untrusted UTF-8, possibly still
 * streaming in) and a width in terminal cells into lines of styled spans.
 * The parsing is md4c's (CommonMark with GitHub's tables, strikethrough,
 * task lists and permissive autolinks; no indented code blocks, no raw HTML
 * blocks); this module is the terminal layout: **bold**, *italic*, ~~strike~~,
 * `code`, links shown as "text (url)", headings, lists with their bullets by
 * depth and their numbers, task boxes, block quotes with bars, tables drawn
 * with box characters and aligned by display width, fenced code (verbatim,
 * with its language tag) and rules.  Every newline in prose is kept as a line
 * break (answers mean them), and blank lines between blocks are kept where
 * the text has them (runs collapse to one).  HTML entities are decoded
 * (numbers and the common names), inline HTML is shown as written except
 * <br>, which breaks the line; a link's target shows up to 200 bytes, and
 * an answer whose links would have md4c read more than 16 bytes of targets
 * per byte of text (a long reference used very often) shows as written.
 * MDR_OPT_RAW renders the text as written.
 *
 * Promises:
 *  - Pure: no I/O, no global state, safe from any thread on its own doc.
 *    The doc keeps its buffers between calls, so re-rendering a streaming
 *    answer reuses them (md4c allocates its own working memory per call).
 *    Out of memory aborts, as sbuf does.
 *  - Any input renders, none crashes: bytes that are not UTF-8, unterminated
 *    fences, emphasis, code spans, links and tables included.  A fence still
 *    open at the end is a code block to the end; with MDR_OPT_STREAMING an
 *    emphasis or code span still open in the text's last block is styled to
 *    the end instead of showing its markers (the text may yet close it), and
 *    a table's delimiter row still being written is not shown as text.
 *  - Safe to draw: span text is tsafe_sanitize()d with markers (control
 *    characters in their inert form, bad UTF-8 as U+FFFD), tabs are expanded
 *    to spaces, and no span holds a newline.
 *  - Fits the width: every line is at most `width` cells as ui_text_width()
 *    counts them (wide characters 2, combining 0), except that one unit
 *    wider than the room left (a wide character, a control character's
 *    inert form) gets a line of its own, and code block lines are never
 *    wrapped unless MDR_OPT_WRAP_CODE is given (md_line.width tells the
 *    caller what to clip).  List and quote continuation lines keep their
 *    indentation, which gives way first on narrow widths; a too-wide table
 *    shrinks its widest columns, wrapping their cells, and below a minimum
 *    shows each row as "header: value" lines (over 32 columns: as text).
 *  - One parser: md_code_blocks() returns exactly the blocks that md_render()
 *    draws as code, numbered 1..N in the same order. */
#ifndef GLM_MD_RENDER_H
#define GLM_MD_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbuf.h"

/* md4c owns the MD_ names; md_render's constants are MDR_. */
typedef enum {
    MDR_SPAN_TEXT,         /* prose: paragraphs, headings, items, quotes, table cells (see flags) */
    MDR_SPAN_PAD,          /* blank cells: indentation and table padding */
    MDR_SPAN_BULLET,       /* a list item's marker: a bullet by depth, its number ("3."), a task box */
    MDR_SPAN_QUOTE_BAR,    /* one bar per block-quote level */
    MDR_SPAN_CODE,         /* a line of a fenced code block, verbatim */
    MDR_SPAN_CODE_LANG,    /* a code block's header: its language tag ("code" when none) */
    MDR_SPAN_TABLE_BORDER, /* the bars between cells, the line under the header row */
    MDR_SPAN_RULE,         /* a thematic break across the width */
} md_span_kind;

/* md_span.flags, inline styles of MDR_SPAN_TEXT (bold-italic is both bits). */
enum {
    MDR_BOLD = 1,
    MDR_ITALIC = 2,
    MDR_CODE_INLINE = 4,
    MDR_STRIKE = 8,
    MDR_LINK = 16,       /* a link's text */
    MDR_URL = 32,        /* a link's target, shown after its text */
    MDR_TABLE_CELL = 64, /* text in a table cell */
    MDR_TABLE_HEAD = 128 /* text in the table's header row */
};

typedef enum {
    MDR_LINE_TEXT,        /* paragraph, list item, quote */
    MDR_LINE_HEADING,
    MDR_LINE_BLANK,       /* between blocks (where the text has them; runs collapse to one) */
    MDR_LINE_CODE,
    MDR_LINE_CODE_HEADER,
    MDR_LINE_TABLE,
    MDR_LINE_RULE,
} md_line_kind;

typedef struct {
    size_t off, len;     /* bytes in the doc's text (md_span_text) */
    int width;           /* display cells */
    uint8_t kind;        /* md_span_kind */
    uint8_t flags;       /* MDR_BOLD ... */
    uint8_t heading;     /* 1..6 in a heading, else 0 */
} md_span;

typedef struct {
    size_t first, n;     /* spans[first .. first + n) */
    int width;           /* display cells of all its spans */
    uint8_t kind;        /* md_line_kind */
    bool cont;           /* a code line broken by MDR_OPT_WRAP_CODE: continues the one above */
    uint32_t code_index; /* code and code header lines: the block's number (1-based), else 0 */
} md_line;

typedef struct md_scratch md_scratch;

typedef struct {
    sbuf text;           /* all span text */
    md_span *spans;
    size_t n_spans, cap_spans;
    md_line *lines;
    size_t n_lines, cap_lines;
    uint32_t n_code_blocks;
    md_scratch *scratch; /* reused working memory */
} md_doc;

enum {
    MDR_OPT_RAW = 1,          /* no Markdown: the text as written, wrapped at words */
    MDR_OPT_STREAMING = 2,    /* the text may continue (see Promises) */
    MDR_OPT_ASCII = 4,        /* ASCII bullets, bars and borders (locale not UTF-8) */
    MDR_OPT_WRAP_CODE = 8,    /* break code lines at the width (md_line.cont) */
    MDR_OPT_CODE_NUMBERS = 16 /* code headers show the block's number: "[2] python" */
};

/* A zeroed md_doc is ready; md_doc_free() releases it (and leaves it zeroed). */
void md_doc_free(md_doc *d);

/* Renders text[0..n) at `width` cells (values below 1 count as 1) into d,
 * replacing what d held.  Text beyond 4 GiB - 1 (md4c's sizes) is not shown. */
void md_render(md_doc *d, const char *text, size_t n, int width, unsigned opts);

/* A span's text (not NUL-terminated: use span->len). */
const char *md_span_text(const md_doc *d, const md_span *s);
/* A line's text, spans concatenated, appended to out (for tests and copies). */
void md_line_str(const md_doc *d, const md_line *l, sbuf *out);

/* ---- fenced code blocks ------------------------------------------------------- */

typedef struct {
    char *text;          /* the lines between the fences exactly as written (quote
                            markers and the fence's indentation removed), joined
                            by '\n', no newline after the last; malloc'd */
    size_t len;
    char lang[48];       /* the info string's first word ("" when none), raw
                            bytes: untrusted, sanitize before showing */
    size_t n_lines;
    bool closed;         /* its closing fence was seen */
} md_code_block;

/* The fenced code blocks of text[0..n), in order (block i is number i + 1).
 * Returns the count; *out (malloc'd, NULL when none) is freed with
 * md_code_blocks_free(). */
size_t md_code_blocks(const char *text, size_t n, md_code_block **out);
void md_code_blocks_free(md_code_block *blocks, size_t count);

#endif
