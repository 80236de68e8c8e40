/* md_check.h: md_render's promises (app/md_render.h), checked on one
 * rendering -- shared by tests/test_markdown.c and tests/fuzz/fuzz_markdown.c.
 *
 * md_check_doc() returns 0 when the doc keeps them, else -1 with the first
 * broken one in `why` (md_check_lines() checks all but the last, which
 * md_check_code_blocks() checks, parsing the text again):
 *  - the lines cover the spans, in order; every span lies in the doc's text
 *    and is not empty;
 *  - no span holds a newline, a tab or ESC, and its width is its text's;
 *  - every line is valid UTF-8 and its width is the sum of its spans';
 *  - every line fits `width`, except unwrapped code lines and a line whose
 *    text after its prefix is one unit wider than the room (a wide
 *    character, a control character's inert form);
 *  - md_code_blocks() finds as many blocks as md_render() drew. */
#ifndef GLM_MD_CHECK_H
#define GLM_MD_CHECK_H

#include <string.h>

#include "md_render.h"
#include "text_safe.h"
#include "ui_text.h"

static void md_check_count_unit(void *user, ui_span sp)
{
    (void)sp;
    (*(int *)user)++;
}

/* The line's text after its prefix (bars, indentation, bullet) is one
 * unbreakable unit. */
static int md_check_one_unit(const md_doc *d, const md_line *l)
{
    size_t k = 0;
    while (k < l->n && (d->spans[l->first + k].kind == MDR_SPAN_PAD || d->spans[l->first + k].kind == MDR_SPAN_BULLET ||
                        d->spans[l->first + k].kind == MDR_SPAN_QUOTE_BAR))
        k++;
    sbuf rest = {0};
    for (; k < l->n; k++)
        sbuf_add(&rest, md_span_text(d, &d->spans[l->first + k]), d->spans[l->first + k].len);
    int units = 0;
    ui_wrap(sbuf_str(&rest), rest.len, 1, UI_WRAP_CHARS, md_check_count_unit, &units);
    sbuf_free(&rest);
    return units == 1;
}

static int md_check_code_blocks(const md_doc *d, const char *text, size_t n, sbuf *why)
{
    md_code_block *b = NULL;
    size_t nb = md_code_blocks(text, n, &b);
    md_code_blocks_free(b, nb);
    if (nb == d->n_code_blocks)
        return 0;
    sbuf_printf(why, "%zu code blocks, md_render drew %u", nb, d->n_code_blocks);
    return -1;
}

static int md_check_lines(const md_doc *d, int width, unsigned opts, sbuf *why)
{
    size_t next_span = 0;
    int rc = 0;
    sbuf line = {0};
    if (width < 1)
        width = 1;
    for (size_t i = 0; i < d->n_lines && !rc; i++) {
        const md_line *l = &d->lines[i];
        int sum = 0;
        sbuf_clear(&line);
        if (l->first != next_span || l->first + l->n > d->n_spans) {
            sbuf_printf(why, "line %zu: spans %zu+%zu, expected from %zu", i, l->first, l->n, next_span);
            rc = -1;
            break;
        }
        next_span = l->first + l->n;
        for (size_t k = 0; k < l->n && !rc; k++) {
            const md_span *s = &d->spans[l->first + k];
            const char *t = md_span_text(d, s);
            if (s->off + s->len > d->text.len || s->len == 0) {
                sbuf_printf(why, "line %zu: span %zu out of the text or empty", i, k);
                rc = -1;
            } else if (memchr(t, '\n', s->len) || memchr(t, '\t', s->len) || memchr(t, '\x1b', s->len)) {
                sbuf_printf(why, "line %zu: newline, tab or ESC in span %zu", i, k);
                rc = -1;
            } else if (s->width != ui_text_width(t, s->len)) {
                sbuf_printf(why, "line %zu: span %zu says %d cells, has %d", i, k, s->width, ui_text_width(t, s->len));
                rc = -1;
            } else {
                sum += s->width;
                sbuf_add(&line, t, s->len);
            }
        }
        if (rc)
            break;
        bool code = l->kind == MDR_LINE_CODE && !(opts & MDR_OPT_WRAP_CODE);
        if (sum != l->width) {
            sbuf_printf(why, "line %zu: width %d, its spans %d", i, l->width, sum);
            rc = -1;
        } else if (!code && l->width > width && !md_check_one_unit(d, l)) {
            sbuf_printf(why, "line %zu is %d cells at width %d: '%s'", i, l->width, width, sbuf_str(&line));
            rc = -1;
        } else if (!tsafe_valid(sbuf_str(&line), line.len)) {
            sbuf_printf(why, "line %zu is not UTF-8", i);
            rc = -1;
        }
    }
    if (!rc && next_span != d->n_spans) {
        sbuf_printf(why, "%zu spans, the lines cover %zu", d->n_spans, next_span);
        rc = -1;
    }
    sbuf_free(&line);
    return rc;
}

static int md_check_doc(const md_doc *d, const char *text, size_t n, int width, unsigned opts, sbuf *why)
{
    if (md_check_lines(d, width, opts, why) != 0)
        return -1;
    return opts & MDR_OPT_RAW ? 0 : md_check_code_blocks(d, text, n, why);
}

#endif
