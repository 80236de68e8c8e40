/* fuzz_markdown: answers are untrusted (a model's output, a conversation
 * file).  Markdown bytes in, screen lines out: the input's first two bytes
 * pick the options and a width, the rest is the answer, rendered at that
 * width (and as written, when the options say raw), at 13, 80 and (up to
 * 4 KB) 1 cells, and as a streaming prefix -- each output must keep
 * md_render's promises (tests/md_check.h: every line fits its width in
 * display cells, is valid UTF-8, holds no control byte, and the code blocks
 * agree with md_code_blocks()).
 *
 * md4c (a system library, not instrumented) also parses the text directly,
 * ending MD_SOURCE_PAD NULs before a page that may not be read: md_render
 * gives md4c that many NULs after every text (md4c 0.4.8 reads past the end
 * it is given), so a read further than them is a crash here. */
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "md_check.h"
#include "md_internal.h"

#define GUARDED_MAX (1u << 20) /* inputs up to this size get the guard-page parse */

static md_doc doc; /* reused, as the chat view reuses its doc */

static int noop_block(MD_BLOCKTYPE type, void *detail, void *user)
{
    return 0;
}

static int noop_span(MD_SPANTYPE type, void *detail, void *user)
{
    return 0;
}

typedef struct {
    const char *src;
    size_t n;
} source;

static int noop_text(MD_TEXTTYPE type, const MD_CHAR *text, MD_SIZE size, void *user)
{
    /* A text md4c hands out from the source ends within it. */
    const source *s = user;
    if (text >= s->src && text < s->src + s->n && text + size > s->src + s->n)
        abort();
    return 0;
}

/* md4c on text that ends MD_SOURCE_PAD NULs before an unreadable page. */
static void guarded_parse(const char *text, size_t n)
{
    static char *region;
    static size_t region_len;
    long page = sysconf(_SC_PAGESIZE);
    if (!region) {
        region_len = (GUARDED_MAX + MD_SOURCE_PAD + (size_t)page - 1) / (size_t)page * (size_t)page;
        region = mmap(NULL, region_len + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED || mprotect(region + region_len, (size_t)page, PROT_NONE) != 0)
            abort();
    }
    if (n > GUARDED_MAX)
        return;
    char *src = region + region_len - MD_SOURCE_PAD - n;
    memcpy(src, text, n);
    memset(src + n, 0, MD_SOURCE_PAD);
    MD_PARSER p = {0, MD_PARSE_FLAGS, noop_block, noop_block, noop_span, noop_span, noop_text, NULL, NULL};
    source s = {src, n};
    md_parse(src, (MD_SIZE)n, &p, &s);
}

/* Renders and checks the lines; the code blocks too when `blocks`. */
static void render_checked(const char *text, size_t n, int width, unsigned opts, bool blocks)
{
    md_render(&doc, text, n, width, opts);
    sbuf why = {0};
    if (md_check_lines(&doc, width, opts, &why) != 0 ||
        (blocks && !(opts & MDR_OPT_RAW) && md_check_code_blocks(&doc, text, n, &why) != 0)) {
        fprintf(stderr, "fuzz_markdown: width %d, options %u: %s\n", width, opts, sbuf_str(&why));
        abort();
    }
    sbuf_free(&why);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setlocale(LC_ALL, "C.UTF-8"); /* display widths as the chat measures them */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned opts = data[0] & 31;
    int width = 1 + data[1] % 160;
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    guarded_parse(text, n);
    render_checked(text, n, width, opts & ~(unsigned)MDR_OPT_RAW, true);
    render_checked(text, n, width, opts, false);
    /* Width 1 makes a line of every character: only for shorter inputs,
     * so the fuzzer keeps its pace. */
    static const int widths[] = {13, 80, 1};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0] && (widths[i] > 1 || n <= 4096); i++)
        render_checked(text, n, widths[i], opts & ~(unsigned)MDR_OPT_RAW, false);
    render_checked(text, n / 2, width, (opts & ~(unsigned)MDR_OPT_RAW) | MDR_OPT_STREAMING, true);
    return 0;
}
