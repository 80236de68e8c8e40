/* md_bench.c: what re-rendering a streaming answer's Markdown costs.
 *
 *   md_bench [KB] [WIDTH]   (defaults 32, 100)
 *
 * A long answer (prose with bold, italic, code and links, nested lists,
 * quotes, tables, fenced code) generated from a fixed seed is rendered the
 * way the chat view renders a streaming answer (md_render with
 * MDR_OPT_STREAMING, code wrapped and numbered), on one core:
 *  - the whole answer, many times: microseconds per re-render and MB/s;
 *  - streamed: every prefix that ends on a 4-byte step (a token or so),
 *    re-rendered in order as tokens arrive: the total, and the mean per
 *    token over the last quarter of the answer (the longest prefixes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "md_render.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine may be shared */
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint32_t rng = 2024;
static uint32_t next(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

static const char *pick(const char *const *v, size_t n)
{
    return v[next() % n];
}

#define PICK(v) pick(v, sizeof v / sizeof v[0])

/* A paragraph of words with some inline Markdown. */
static void prose(sbuf *s, int words)
{
    static const char *const w[] = {"the", "model", "returns", "a", "value", "which", "is", "then", "used", "by",
                                    "every", "caller", "of", "this", "function", "漢字", "café", "naïve", "and"};
    for (int i = 0; i < words; i++) {
        const char *word = PICK(w);
        switch (next() % 14) {
        case 0: sbuf_printf(s, "**%s**", word); break;
        case 1: sbuf_printf(s, "*%s*", word); break;
        case 2: sbuf_printf(s, "`%s()`", word); break;
        case 3: sbuf_printf(s, "[%s](https://example.org/%s)", word, word); break;
        default: sbuf_adds(s, word); break;
        }
        sbuf_adds(s, i + 1 < words ? " " : ".");
    }
}

static char *make_answer(size_t bytes, size_t *len)
{
    sbuf s = {0};
    int section = 0;
    while (s.len < bytes) {
        sbuf_printf(&s, "## Section %d\n\n", ++section);
        prose(&s, 40 + (int)(next() % 40));
        sbuf_adds(&s, "\n\n");
        for (int i = 0; i < 4; i++) {
            sbuf_printf(&s, "%d. **Step %d:** ", i + 1, i + 1);
            prose(&s, 12);
            sbuf_adds(&s, "\n   - ");
            prose(&s, 8);
            sbuf_adds(&s, "\n");
        }
        sbuf_adds(&s, "\n> ");
        prose(&s, 25);
        sbuf_adds(&s, "\n\n| name | value | note |\n|:-----|------:|------|\n");
        for (int r = 0; r < 5; r++) {
            sbuf_printf(&s, "| row%d | %u | ", r, next() % 100000);
            prose(&s, 4);
            sbuf_adds(&s, " |\n");
        }
        sbuf_adds(&s, "\n```python\n");
        for (int l = 0; l < 12; l++)
            sbuf_printf(&s, "    result_%d = compute(values[%d], scale=%u)  # step %d\n", l, l, next() % 100, l);
        sbuf_adds(&s, "```\n\n");
        prose(&s, 30);
        sbuf_adds(&s, "\n\n");
    }
    *len = s.len;
    return sbuf_take(&s);
}

int main(int argc, char **argv)
{
    size_t kb = argc > 1 ? (size_t)atoi(argv[1]) : 32;
    int width = argc > 2 ? atoi(argv[2]) : 100;
    size_t n;
    char *text = make_answer(kb * 1024, &n);
    unsigned opts = MDR_OPT_STREAMING | MDR_OPT_WRAP_CODE | MDR_OPT_CODE_NUMBERS;
    md_doc d = {0};

    /* The whole answer, re-rendered (warm: the doc's buffers have grown). */
    md_render(&d, text, n, width, opts);
    int reps = 0;
    double t0 = now(), t;
    do {
        md_render(&d, text, n, width, opts);
        reps++;
    } while ((t = now() - t0) < 1.0);
    printf("md_bench: answer of %zu bytes, width %d: %zu lines, %zu spans\n", n, width, d.n_lines, d.n_spans);
    printf("  whole answer: %.1f us per re-render (%.1f MB/s, %d runs)\n", t / reps * 1e6, n * reps / t / 1e6, reps);

    /* Streamed: every 4-byte prefix in order. */
    size_t steps = 0, tail_steps = 0;
    double tail = 0;
    t0 = now();
    for (size_t k = 4; k <= n; k += 4) {
        double a = now();
        md_render(&d, text, k, width, opts);
        if (k >= n - n / 4) {
            tail += now() - a;
            tail_steps++;
        }
        steps++;
    }
    t = now() - t0;
    printf("  streamed: %zu re-renders in %.2f s; the last quarter %.1f us per token\n", steps, t,
           tail / (tail_steps ? tail_steps : 1) * 1e6);
    md_doc_free(&d);
    free(text);
    return 0;
}
