/* test_markdown.c: Markdown for the chat view (app/md_render.h): inline
 * styles, headings, lists, quotes, fenced code, tables, wrapping by display
 * cells, streaming text, raw mode, the code blocks /copy code takes, and two
 * randomized runs (random bytes, Markdown-ish token soup) that check the
 * promises on every output. */
#include <locale.h>
#include <stdint.h>

#include "md_check.h"
#include "md_render.h"
#include "testlib.h"
#include "text_safe.h"
#include "ui_text.h"

static md_doc doc;
static sbuf out;

/* Renders md and returns its lines joined by '\n' (each line ends in one). */
static const char *render(const char *md, int width, unsigned opts)
{
    md_render(&doc, md, strlen(md), width, opts);
    sbuf_clear(&out);
    for (size_t i = 0; i < doc.n_lines; i++) {
        md_line_str(&doc, &doc.lines[i], &out);
        sbuf_addc(&out, '\n');
    }
    return sbuf_str(&out);
}

/* The first span whose text is exactly `text`, else NULL. */
static const md_span *span_is(const char *text)
{
    for (size_t i = 0; i < doc.n_spans; i++)
        if (doc.spans[i].len == strlen(text) && !memcmp(md_span_text(&doc, &doc.spans[i]), text, doc.spans[i].len))
            return &doc.spans[i];
    return NULL;
}

static int flags_of(const char *text)
{
    const md_span *s = span_is(text);
    return s ? s->flags : -1;
}

static int kind_of(const char *text)
{
    const md_span *s = span_is(text);
    return s ? s->kind : -1;
}

#define EXPECT(md, width, opts, want)                                                              \
    do {                                                                                           \
        const char *got_ = render((md), (width), (opts));                                          \
        CHECK(!strcmp(got_, (want)), "render of '%.40s' at %d:\n%s--- expected:\n%s", (md), (width), \
              got_, (want));                                                                       \
    } while (0)

/* ---- inline -------------------------------------------------------------------- */

static void test_inline_styles(void)
{
    EXPECT("a **b** *c* _d_ ***e*** `f` ~~g~~", 80, 0, "a b c d e f g\n");
    CHECK(flags_of("a ") == 0, "plain");
    CHECK(flags_of("b") == MDR_BOLD, "bold: %d", flags_of("b"));
    CHECK(flags_of("c") == MDR_ITALIC && flags_of("d") == MDR_ITALIC, "italic");
    CHECK(flags_of("e") == (MDR_BOLD | MDR_ITALIC), "bold-italic: %d", flags_of("e"));
    CHECK(flags_of("f") == MDR_CODE_INLINE, "code");
    CHECK(flags_of("g") == MDR_STRIKE, "strike");
    /* Nesting, and a bold inside italic. */
    EXPECT("*it **bo** it*", 80, 0, "it bo it\n");
    CHECK(flags_of("bo") == (MDR_BOLD | MDR_ITALIC) && flags_of("it ") == MDR_ITALIC, "nested");
    /* Not emphasis: intraword underscores, spaced stars, escapes. */
    EXPECT("snake_case_name and 2 * 3 * 4", 80, 0, "snake_case_name and 2 * 3 * 4\n");
    CHECK(flags_of("snake_case_name and 2 * 3 * 4") == 0, "no emphasis");
    EXPECT("\\*not\\* \\`x\\` a\\_b", 80, 0, "*not* `x` a_b\n");
    CHECK(doc.n_spans == 1, "escapes are plain text");
    /* Code spans: markers inside stay, double backticks hold a backtick. */
    EXPECT("`**x**` and `` a`b ``", 80, 0, "**x** and a`b\n");
    CHECK(flags_of("**x**") == MDR_CODE_INLINE && flags_of("a`b") == MDR_CODE_INLINE, "code keeps markers");
    /* Intraword stars do make emphasis (CommonMark). */
    EXPECT("un*frigging*believable", 80, 0, "unfriggingbelievable\n");
    CHECK(flags_of("frigging") == MDR_ITALIC, "intraword *");
}

/* The first answer a fresh doc renders may open with emphasis (models open
 * with **...** all the time): the old parser took a pointer into its token
 * array before growing it (a NULL write at the first token, a stale one when
 * the array grew).  Fresh docs, so nothing is allocated before. */
static void test_opening_emphasis_fresh_doc(void)
{
    static const char *const cases[] = {"*hi* there", "**Answer:** yes", "_a_", "~~x~~ y", "***z***"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        md_doc fresh = {0};
        md_render(&fresh, cases[i], strlen(cases[i]), 80, 0);
        CHECK(fresh.n_lines == 1, "'%s': %zu lines", cases[i], fresh.n_lines);
        CHECK(fresh.n_spans >= 1 && fresh.spans[0].flags != 0, "'%s': the first span is plain", cases[i]);
        md_doc_free(&fresh);
    }
    /* "x _ " then "*a" x40: more tokens than the array's first size. */
    sbuf s = {0};
    sbuf_adds(&s, "x _ ");
    for (int i = 0; i < 40; i++)
        sbuf_adds(&s, "*a");
    for (unsigned opts = 0; opts <= MDR_OPT_STREAMING; opts += MDR_OPT_STREAMING) {
        md_doc fresh = {0};
        md_render(&fresh, s.s, s.len, 80, opts);
        sbuf line = {0};
        if (fresh.n_lines)
            md_line_str(&fresh, &fresh.lines[0], &line);
        CHECK(fresh.n_lines == 1 && !strncmp(sbuf_str(&line), "x _ aaaa", 8), "grown: '%s'", sbuf_str(&line));
        sbuf_free(&line);
        md_doc_free(&fresh);
    }
    sbuf_free(&s);
}

static void test_links(void)
{
    EXPECT("see [the docs](https://x.org/a_(b)) now", 80, 0, "see the docs (https://x.org/a_(b)) now\n");
    CHECK(flags_of("the docs") == MDR_LINK, "link text: %d", flags_of("the docs"));
    CHECK(flags_of("(https://x.org/a_(b))") == MDR_URL, "url: %d", flags_of("(https://x.org/a_(b))"));
    /* A link whose text is its target shows once; autolinks; images. */
    EXPECT("[https://a.b](https://a.b) <https://c.d/e> ![logo](l.png)", 80, 0,
           "https://a.b https://c.d/e logo (l.png)\n");
    CHECK(flags_of("https://a.b") == MDR_LINK && flags_of("https://c.d/e") == MDR_LINK, "autolink");
    CHECK(flags_of("logo") == MDR_LINK, "image alt text");
    /* Not links. */
    EXPECT("[a] (b) [c](d e) x<y>z", 80, 0, "[a] (b) [c](d e) x<y>z\n");
    EXPECT("[**bold link**](u)", 80, 0, "bold link (u)\n");
    CHECK(flags_of("bold link") == (MDR_BOLD | MDR_LINK), "styled link text");
}

static void check_doc(const char *text, size_t n, int width, unsigned opts, const char *what);

static void test_entities_html_autolinks(void)
{
    /* Entities: named ones we know, numbers; unknown names and bad numbers as
     * written; a control character's number made inert like any text. */
    EXPECT("x &amp; y &lt;b&gt; &#233;&#x1F600; &#0; &bogus; &#xZZ;", 80, 0, "x & y <b> é😀 � &bogus; &#xZZ;\n");
    const char *esc = render("a&#27;b", 80, 0);
    CHECK(!strcmp(esc, "a\x01^[\x02" "b\n"), "&#27;: '%s'", esc);
    /* Inline HTML shows as written, except <br>, a line break. */
    EXPECT("a <b>bold</b> c<br>d<BR />e", 80, 0, "a <b>bold</b> c\nd\ne\n");
    /* Bare URLs, www. and e-mail addresses are links, shown once. */
    EXPECT("see www.x.org, https://a.b/c. and a@b.com", 80, 0, "see www.x.org, https://a.b/c. and a@b.com\n");
    CHECK(flags_of("www.x.org") == MDR_LINK && flags_of("https://a.b/c") == MDR_LINK && flags_of("a@b.com") == MDR_LINK,
          "autolinks");
    /* A long target is cut (a reference definition can repeat one). */
    sbuf t = {0};
    sbuf_adds(&t, "[x][r] [x][r]\n\n[r]: http://");
    for (int i = 0; i < 5000; i++)
        sbuf_addc(&t, 'u');
    render(sbuf_str(&t), 80, 0);
    CHECK(doc.text.len < 600, "the target is cut: %zu bytes of text", doc.text.len);
    /* Used 10,000 times, a 30 KB target would have md4c read 300 MB: past
     * its budget the answer shows as written. */
    sbuf_clear(&t);
    sbuf_adds(&t, "[a]: http://");
    for (int i = 0; i < 30000; i++)
        sbuf_addc(&t, 'u');
    sbuf_adds(&t, "\n\n");
    for (int i = 0; i < 10000; i++)
        sbuf_adds(&t, "[a]");
    render(sbuf_str(&t), 80, 0);
    CHECK(doc.n_lines > 1 && !strncmp(md_span_text(&doc, &doc.spans[0]), "[a]:", 4) &&
              !strncmp(md_span_text(&doc, &doc.spans[doc.lines[1].first]), "http://uuu", 10),
          "shown as written: '%.20s'", doc.n_lines ? md_span_text(&doc, &doc.spans[0]) : "");
    check_doc(sbuf_str(&t), t.len, 80, 0, "over the link budget");
    sbuf_free(&t);
}

static void test_unclosed_markers(void)
{
    /* Finished text: what never closed is shown as written. */
    EXPECT("a **b and `c and *d", 80, 0, "a **b and `c and *d\n");
    CHECK(doc.n_spans == 1 && doc.spans[0].flags == 0, "all plain");
    /* Streaming: the last block's open markers style to the end, hidden. */
    EXPECT("a **b", 80, MDR_OPT_STREAMING, "a b\n");
    CHECK(flags_of("b") == MDR_BOLD, "streaming bold");
    EXPECT("x `co", 80, MDR_OPT_STREAMING, "x co\n");
    CHECK(flags_of("co") == MDR_CODE_INLINE, "streaming code");
    EXPECT("***", 80, MDR_OPT_STREAMING, "──────────────────────────────────────────────────────────────────────────────"
                                        "──\n"); /* a whole line of *** is a rule */
    EXPECT("word **", 80, MDR_OPT_STREAMING, "word \n");
    /* Only the last block: an earlier paragraph is finished. */
    EXPECT("a *b\n\nc *d", 80, MDR_OPT_STREAMING, "a *b\n\nc d\n");
    CHECK(flags_of("d") == MDR_ITALIC && flags_of("a *b") == 0, "only the last block");
    /* In a table's last cell; a heading. */
    EXPECT("| a | b |\n|---|---|\n| *x* | **bo", 80, MDR_OPT_STREAMING | MDR_OPT_ASCII, "a | b\n--+---\nx | bo\n");
    CHECK(flags_of("bo") == (MDR_TABLE_CELL | MDR_BOLD) && flags_of("x") == (MDR_TABLE_CELL | MDR_ITALIC), "open cell");
    EXPECT("# Head **bo", 80, MDR_OPT_STREAMING, "Head bo\n");
    CHECK(flags_of("bo") == MDR_BOLD && span_is("bo")->heading == 1, "open heading");
    /* Escaped markers are text; finished text is left alone. */
    EXPECT("a \\*b", 80, MDR_OPT_STREAMING, "a *b\n");
    /* A delimiter row being written does not flash as text. */
    EXPECT("| a | b |\n|---|--", 80, MDR_OPT_STREAMING, "| a | b |\n");
    EXPECT("| a | b |\n|---|--", 80, 0, "| a | b |\n|---|--\n");
    EXPECT("```\n| a |\n|--", 80, MDR_OPT_STREAMING, "code\n| a |\n|--\n"); /* in code: shown */
    /* A table's rows as they come: a row half written is a row. */
    EXPECT("| a | b |\n|---|---|\n| 1 | 2", 80, MDR_OPT_STREAMING | MDR_OPT_ASCII, "a | b\n--+--\n1 | 2\n");
    EXPECT("| a | b |\n|---|---|\n| 1 |", 80, MDR_OPT_STREAMING | MDR_OPT_ASCII, "a | b\n--+--\n1 | \n");
    /* A prefix of a longer text: md4c 0.4.8 reads the byte after a link
     * destination at the end ("[](a" with ')' next reported a 3 GB text). */
    md_render(&doc, "see [](a) and [x](b)", 8, 80, MDR_OPT_STREAMING);
    CHECK(doc.n_lines == 1 && doc.lines[0].width == 8, "prefix of a link: %zu lines, %d wide", doc.n_lines, doc.n_lines ? doc.lines[0].width : -1);
    md_render(&doc, "[x](b)", 5, 80, MDR_OPT_STREAMING);
    CHECK(doc.n_lines == 1 && doc.lines[0].width == 5, "prefix of a link: %zu lines", doc.n_lines);
    /* A streaming prefix of a fenced block is code to the end. */
    EXPECT("x\n```sh\nls -l *.c", 80, MDR_OPT_STREAMING, "x\nsh\nls -l *.c\n");
    CHECK(kind_of("ls -l *.c") == MDR_SPAN_CODE, "open fence is code");
}

/* ---- blocks ---------------------------------------------------------------------- */

static void test_headings(void)
{
    EXPECT("# One\n## Two ##\n###### Six\n####### seven\n#tag", 80, 0, "One\nTwo\nSix\n####### seven\n#tag\n");
    CHECK(doc.lines[0].kind == MDR_LINE_HEADING && span_is("One")->heading == 1, "h1");
    CHECK(span_is("Two")->heading == 2 && span_is("Six")->heading == 6, "h2, h6");
    CHECK(doc.lines[3].kind == MDR_LINE_TEXT, "7 #'s is text");
    EXPECT("# A *b*", 80, 0, "A b\n");
    CHECK(flags_of("b") == MDR_ITALIC && span_is("b")->heading == 1, "styled heading text");
}

static void test_lists(void)
{
    EXPECT("- a\n* b\n+ c", 80, 0, "\xe2\x80\xa2 a\n\xe2\x80\xa2 b\n\xe2\x80\xa2 c\n");
    CHECK(kind_of("\xe2\x80\xa2") == MDR_SPAN_BULLET, "bullet span");
    /* Nested by indentation (2 or 4 spaces), bullets by depth; numbers count
     * from the list's first (CommonMark: "10." continues a list as 2.), with
     * its delimiter. */
    EXPECT("- a\n  - b\n    - c\n      - d\n- e\n    1. f\n    10. g", 80, MDR_OPT_ASCII,
           "* a\n  - b\n    + c\n      * d\n* e\n  1. f\n  2. g\n");
    EXPECT("7) seven\n1) eight\n\n0. zero", 80, 0, "7) seven\n8) eight\n\n0. zero\n");
    CHECK(kind_of("8)") == MDR_SPAN_BULLET, "number span");
    /* Task lists: a box for the bullet, after the number. */
    EXPECT("- [x] done\n- [ ] todo\n1. [X] first", 80, 0, "[x] done\n[ ] todo\n1. [x] first\n");
    CHECK(kind_of("[ ]") == MDR_SPAN_BULLET && flags_of("todo") == 0, "task box span");
    /* An empty item still shows its bullet. */
    EXPECT("- a\n-\n- c", 80, MDR_OPT_ASCII, "* a\n*\n* c\n");
    /* Continuation lines keep the item's indentation. */
    EXPECT("1. one two three four five six\n   - seven eight nine ten", 16, MDR_OPT_ASCII,
           "1. one two three\n   four five six\n   - seven eight\n     nine ten\n");
    /* A paragraph after a blank line inside an item; lazy continuation; the list ends. */
    EXPECT("- item\n\n  more of it\n- next\nlazy line\n\nafter", 40, MDR_OPT_ASCII,
           "* item\n\n  more of it\n* next\n  lazy line\n\nafter\n");
    /* Not lists. */
    EXPECT("-nope\n1.5 litres\n2024 was", 40, 0, "-nope\n1.5 litres\n2024 was\n");
    /* Deep nesting on a narrow screen drops indentation before text. */
    const char *deep = "- a\n  - b\n    - c\n      - d\n        - e\n          - f words here";
    render(deep, 12, MDR_OPT_ASCII);
    for (size_t i = 0; i < doc.n_lines; i++)
        CHECK(doc.lines[i].width <= 12, "line %zu is %d wide", i, doc.lines[i].width);
}

static void test_quotes(void)
{
    EXPECT("> one two three four\n>\n> > deep", 12, 0,
           "\xe2\x94\x82 one two\n\xe2\x94\x82 three four\n\xe2\x94\x82\n\xe2\x94\x82 \xe2\x94\x82 deep\n");
    CHECK(kind_of("\xe2\x94\x82 ") == MDR_SPAN_QUOTE_BAR, "bar span");
    EXPECT("> - a\n> - b\n\nout", 40, MDR_OPT_ASCII, "| * a\n| * b\n\nout\n");
    EXPECT(">no space\n   > indented", 40, MDR_OPT_ASCII, "| no space\n| indented\n");
}

static void test_code_blocks(void)
{
    const char *md = "Run:\n\n```python\ndef f(**kw):\n\treturn `x` # *not* markdown\n```\nafter";
    EXPECT(md, 80, 0, "Run:\n\npython\ndef f(**kw):\n    return `x` # *not* markdown\nafter\n");
    CHECK(doc.lines[2].kind == MDR_LINE_CODE_HEADER && doc.lines[2].code_index == 1, "header line");
    CHECK(kind_of("python") == MDR_SPAN_CODE_LANG, "language tag span");
    CHECK(doc.lines[3].kind == MDR_LINE_CODE && kind_of("def f(**kw):") == MDR_SPAN_CODE, "code line");
    CHECK(doc.n_code_blocks == 1, "%u blocks", doc.n_code_blocks);
    /* Never wrapped (the caller clips) unless asked. */
    render("```\n0123456789abcdef\n```", 8, 0);
    CHECK(doc.n_lines == 2 && doc.lines[1].width == 16, "a long code line stays whole");
    EXPECT("```\n0123456789abcdef\n```", 8, MDR_OPT_WRAP_CODE, "code\n01234567\n89abcdef\n");
    CHECK(!doc.lines[1].cont && doc.lines[2].cont, "continuation marked");
    /* ~~~ fences, a longer closing fence, a shorter one inside, numbering. */
    EXPECT("~~~\na\n~~~~\n````md\n```\nin\n```\n````", 80, MDR_OPT_CODE_NUMBERS, "[1] code\na\n[2] md\n```\nin\n```\n");
    CHECK(doc.n_code_blocks == 2 && doc.lines[2].code_index == 2, "two blocks");
    /* In a quote and in a list item: their markers and indentation go. */
    EXPECT("> ```c\n> int x;\n> ```\n- item\n  ```\n  y\n  ```\n- ```\n  z\n  ```", 80, MDR_OPT_ASCII,
           "| c\n| int x;\n* item\n  code\n  y\n* code\n  z\n");
    /* Unterminated: code to the end (blank lines included). */
    EXPECT("```\na\n\n", 80, 0, "code\na\n\n");
    /* Markdown-looking lines right after a fence are code. */
    EXPECT("```\n# no\n| a | b |\n|---|---|\n```", 80, 0, "code\n# no\n| a | b |\n|---|---|\n");
}

static void test_code_block_list(void)
{
    const char *md = "x\n```sh\nls\tdir\n\ncd ..\n```\n> ~~~py\n> print(1)\n> ~~~\n- a\n  ```\n  indented\n    more\n  ```\n"
                     "```rust\nfn main() {";
    md_code_block *b = NULL;
    size_t n = md_code_blocks(md, strlen(md), &b);
    CHECK(n == 4, "%zu blocks", n);
    if (n == 4) {
        CHECK(!strcmp(b[0].text, "ls\tdir\n\ncd ..") && !strcmp(b[0].lang, "sh") && b[0].closed && b[0].n_lines == 3,
              "block 1: '%s' lang '%s'", b[0].text, b[0].lang);
        CHECK(!strcmp(b[1].text, "print(1)") && !strcmp(b[1].lang, "py"), "block 2 (in a quote): '%s'", b[1].text);
        CHECK(!strcmp(b[2].text, "indented\n  more") && !b[2].lang[0], "block 3 (in an item): '%s'", b[2].text);
        CHECK(!strcmp(b[3].text, "fn main() {") && !b[3].closed, "block 4 (open): '%s'", b[3].text);
    }
    md_code_blocks_free(b, n);
    /* Closed or not, with blank lines and in containers. */
    static const struct {
        const char *md;
        bool closed;
        size_t lines;
    } cases[] = {
        {"```\na\n\n\n```", true, 3},  {"```\na\n\n\n", false, 3}, {"```\n```", true, 0},
        {"```", false, 0},              {"~~~~\n~~~\n~~~~", true, 1},  {"> ```\n> x\n> ```\n", true, 1},
        {"- ```\n  x\n\n  ```", true, 2}, {"text\n```py", false, 0},  {"```\n\n\n```\nz", true, 2},
        {"- ```\n  ```", true, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = md_code_blocks(cases[i].md, strlen(cases[i].md), &b);
        CHECK(n == 1 && b[0].closed == cases[i].closed && b[0].n_lines == cases[i].lines,
              "'%s': %zu blocks, closed %d, %zu lines", cases[i].md, n, n ? b[0].closed : -1, n ? b[0].n_lines : 0);
        md_code_blocks_free(b, n);
    }
    /* Tabs stay tabs (a Makefile's recipe), but for the part of one that a
     * container's indentation took (CommonMark). */
    const char *tabs = "```\n\tx\n  \ty\n```\n> ```\n>\tz\n> ```\n- ```\n  \tw\n  ```";
    n = md_code_blocks(tabs, strlen(tabs), &b);
    CHECK(n == 3 && !strcmp(b[0].text, "\tx\n  \ty") && !strcmp(b[1].text, "  z") && !strcmp(b[2].text, "\tw"),
          "tabs: %zu blocks, '%s'", n, n ? b[0].text : "");
    md_code_blocks_free(b, n);
    n = md_code_blocks(md, strlen(md), &b);
    render(md, 80, 0);
    CHECK(doc.n_code_blocks == n, "md_render sees %u blocks", doc.n_code_blocks);
    md_code_blocks_free(b, n);
    CHECK(md_code_blocks("no code", 7, &b) == 0 && b == NULL, "none");
}

static void test_rules_and_blank_lines(void)
{
    EXPECT("\n\na\n\n\n\nb\n\n---\n* * *\n\n\n", 6, MDR_OPT_ASCII, "a\n\nb\n\n------\n------\n");
    CHECK(doc.lines[1].kind == MDR_LINE_BLANK && doc.lines[4].kind == MDR_LINE_RULE, "kinds");
    CHECK(kind_of("------") == MDR_SPAN_RULE, "rule span");
    /* Right under a paragraph, --- makes it a heading (CommonMark's setext
     * heading); === too. */
    EXPECT("b\n---\nc\n===\nd", 6, MDR_OPT_ASCII, "b\nc\nd\n");
    CHECK(doc.lines[0].kind == MDR_LINE_HEADING && span_is("b")->heading == 2 && span_is("c")->heading == 1,
          "setext headings");
    /* Blank lines where the text has them, between blocks of every kind,
     * in quotes (with the bars of the quote they are in) and lists. */
    EXPECT("# T\ntext\n```\nc\n```\nafter\n\n> q1\n>\n> q2\n\n- i1\n- i2\n\n- i3\n\n| x |\n|---|\n| 1 |\n---",
           40, MDR_OPT_ASCII, "T\ntext\ncode\nc\nafter\n\n| q1\n|\n| q2\n\n* i1\n* i2\n\n* i3\n\nx\n-\n1\n"
           "----------------------------------------\n");
    EXPECT("```\na\n```\n\n```\nb\n```\n```\nc\n```", 40, 0, "code\na\n\ncode\nb\ncode\nc\n");
}

/* ---- tables ----------------------------------------------------------------------------- */

static void test_tables(void)
{
    const char *t = "| Name | Qty | Note |\n|:-----|----:|:----:|\n| apple | 3 | red |\n| 漢字 | 12 | x |";
    EXPECT(t, 80, MDR_OPT_ASCII,
           "Name  | Qty | Note\n"
           "------+-----+-----\n"
           "apple |   3 | red\n"
           "漢字  |  12 |  x\n");
    CHECK(doc.lines[0].kind == MDR_LINE_TABLE, "table lines");
    CHECK(flags_of("Name") == (MDR_TABLE_CELL | MDR_TABLE_HEAD) && flags_of("apple") == MDR_TABLE_CELL, "cell flags");
    CHECK(kind_of(" | ") == MDR_SPAN_TABLE_BORDER, "border span");
    /* Inline styles in cells, an escaped pipe and one in code, missing and
     * extra cells; the table goes on to a blank line.  (md4c 0.4.8 wants 3
     * characters in each delimiter cell: "|--|" is no table.) */
    EXPECT("a | b\n---|---\n**x** | `p|q` \\| r | extra\nonly\n\nafter", 80, MDR_OPT_ASCII,
           "a    | b\n-----+--------\nx    | p|q | r\nonly | \n\nafter\n");
    CHECK(flags_of("x") == (MDR_TABLE_CELL | MDR_BOLD), "bold cell");
    /* <br> breaks a cell's line; the column is as wide as its widest line. */
    EXPECT("| a | b |\n|---|---|\n| one<br>three | 2 |", 80, MDR_OPT_ASCII, "a     | b\n------+--\none   | 2\nthree | \n");
    /* Too wide: the widest column shrinks and wraps; every line fits. */
    const char *wide = "| id | description |\n|---|---|\n| 1 | a rather long description that will not fit |";
    EXPECT(wide, 24, MDR_OPT_ASCII,
           "id | description\n"
           "---+--------------------\n"
           "1  | a rather long\n"
           "   | description that\n"
           "   | will not fit\n");
    /* Narrower than the columns' minimum: "header: value" records. */
    const char *many = "| a1 | b2 | c3 | d4 |\n|---|---|---|---|\n| one | two | three | four |\n| 5 | 6 | 7 | 8 |";
    EXPECT(many, 16, MDR_OPT_ASCII, "a1: one\nb2: two\nc3: three\nd4: four\n---\na1: 5\nb2: 6\nc3: 7\nd4: 8\n");
    for (size_t i = 0; i < doc.n_lines; i++)
        CHECK(doc.lines[i].width <= 16, "record line %zu is %d wide", i, doc.lines[i].width);
    /* Not a table without its delimiter row; a table in a quote. */
    EXPECT("a | b\nc | d", 80, 0, "a | b\nc | d\n");
    EXPECT("> |x|\n> |---|\n> |1|", 80, MDR_OPT_ASCII, "| x\n| -\n| 1\n");
    /* In a list item: the bullet on its own line, the table indented. */
    EXPECT("- |x|\n  |---|\n  |1|", 80, MDR_OPT_ASCII, "*\n  x\n  -\n  1\n");
}

static void test_wide_table_falls_back_to_text(void)
{
    sbuf t = {0};
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 40; c++)
            sbuf_adds(&t, r == 1 ? "|-" : "|x");
        sbuf_adds(&t, "|\n");
    }
    render(sbuf_str(&t), 30, 0);
    CHECK(doc.n_lines >= 3 && doc.lines[0].kind == MDR_LINE_TEXT, "40 columns: shown as text");
    for (size_t i = 0; i < doc.n_lines; i++)
        CHECK(doc.lines[i].width <= 30, "line %zu is %d wide", i, doc.lines[i].width);
    sbuf_free(&t);
}

/* ---- wrapping, safety, raw ------------------------------------------------------------------ */

static void test_wrapping_by_display_cells(void)
{
    /* Wide characters count 2, combining marks 0. */
    EXPECT("漢字漢字 漢字漢字", 9, 0, "漢字漢字\n漢字漢字\n");
    CHECK(doc.lines[0].width == 8, "width %d", doc.lines[0].width);
    EXPECT("e\xcc\x81" "e\xcc\x81" "e\xcc\x81 abc", 7, 0, "e\xcc\x81" "e\xcc\x81" "e\xcc\x81 abc\n");
    CHECK(doc.lines[0].width == 7, "combining width %d", doc.lines[0].width);
    /* Styles survive a wrap; a word longer than the width is split. */
    EXPECT("aa **bb cc** dd", 5, 0, "aa bb\ncc dd\n");
    CHECK(doc.lines[1].n == 2 && doc.spans[doc.lines[1].first].flags == MDR_BOLD, "bold continues on line 2");
    EXPECT("abcdefghij", 4, 0, "abcd\nefgh\nij\n");
    /* Every newline is a line break; tabs become spaces. */
    EXPECT("roses\nviolets\tblue", 80, 0, "roses\nviolets blue\n");
}

static void test_output_is_sanitized(void)
{
    render("evil \x1b]0;title\x07 *x* \xff end\r\n```\n\x1b[2J\tz\n```", 80, 0);
    for (size_t i = 0; i < doc.n_spans; i++) {
        const char *s = md_span_text(&doc, &doc.spans[i]);
        for (size_t k = 0; k < doc.spans[i].len; k++)
            CHECK(s[k] != '\x1b' && s[k] != '\x07' && s[k] != '\n' && s[k] != '\t' && s[k] != '\r',
                  "raw control byte 0x%02x in span %zu", (unsigned char)s[k], i);
        CHECK(tsafe_valid(s, doc.spans[i].len), "span %zu is not valid UTF-8", i);
    }
    const char *all = render("a\x1b" "b", 80, 0);
    CHECK(!strcmp(all, "a\x01^[\x02" "b\n"), "inert form with markers: '%s'", all);
}

static void test_raw_mode(void)
{
    EXPECT("# not a heading\n**kept** as `written`\n\n- x\n", 80, MDR_OPT_RAW,
           "# not a heading\n**kept** as `written`\n\n- x\n");
    CHECK(doc.n_spans == 3, "plain spans only (%zu)", doc.n_spans);
    EXPECT("one two three", 8, MDR_OPT_RAW, "one two\nthree\n");
}

static void test_doc_reuse_is_exact(void)
{
    const char *md = "# T\n\n- a **b**\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```\ncode\n```";
    char first[512];
    snprintf(first, sizeof first, "%s", render(md, 30, 0));
    size_t spans = doc.n_spans;
    render("something else entirely, with `code`", 10, MDR_OPT_STREAMING);
    const char *again = render(md, 30, 0);
    CHECK(!strcmp(first, again) && doc.n_spans == spans, "the same text renders the same");
    md_doc other = {0};
    md_render(&other, md, strlen(md), 30, 0);
    CHECK(other.n_lines == doc.n_lines && other.text.len == doc.text.len &&
              !memcmp(sbuf_str(&other.text), sbuf_str(&doc.text), doc.text.len),
          "a fresh doc renders the same");
    md_doc_free(&other);
    CHECK(other.lines == NULL && other.scratch == NULL, "freed doc is zeroed");
}

/* ---- randomized --------------------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* The promises, checked on one output (tests/md_check.h). */
static void check_doc(const char *text, size_t n, int width, unsigned opts, const char *what)
{
    sbuf why = {0};
    CHECK(md_check_doc(&doc, text, n, width, opts, &why) == 0, "%s: %s", what, sbuf_str(&why));
    sbuf_free(&why);
}

static void fuzz_one(const char *text, size_t n, const char *what)
{
    int width = 1 + (int)(next_rand() % 90);
    unsigned opts = next_rand() % 32;
    md_render(&doc, text, n, width, opts);
    check_doc(text, n, width, opts, what);
    /* As streamed: a prefix of it, rendered as still open. */
    size_t cut = n ? next_rand() % n : 0;
    md_render(&doc, text, cut, width, opts | MDR_OPT_STREAMING);
    check_doc(text, cut, width, opts | MDR_OPT_STREAMING, what);
}

static void test_random_bytes(void)
{
    char buf[600];
    for (int iter = 0; iter < 10000 && !tl_case_failed; iter++) {
        size_t n = next_rand() % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)next_rand();
        fuzz_one(buf, n, "random bytes");
    }
}

static void test_markdown_soup(void)
{
    static const char *const pieces[] = {
        "*", "**", "***", "_", "__", "~~", "~", "`", "``", "```", "~~~", "```py", "\n", "\n\n", " ", "  ", "    ",
        "\t", "#", "# ", "### ", "- ", "* ", "+ ", "1. ", "12) ", "> ", ">", "> > ", "|", " | ", "|---|", "|:--|--:|",
        "---", "[", "]", "](", "(", ")", "](http://x.y)", "<", ">", "<https://a.b>", "!", "\\", "\\*", "word",
        "text here", "漢字", "e\xcc\x81", "\x1b[31m", "\xff", "\xe2\x80\xae", "\r", "\0", "12", ":", "a_b",
    };
    const size_t n_pieces = sizeof pieces / sizeof pieces[0];
    sbuf s = {0};
    for (int iter = 0; iter < 10000 && !tl_case_failed; iter++) {
        sbuf_clear(&s);
        int k = 1 + (int)(next_rand() % 120);
        for (int i = 0; i < k; i++) {
            const char *p = pieces[next_rand() % n_pieces];
            sbuf_add(&s, p, p[0] ? strlen(p) : 1);
        }
        fuzz_one(sbuf_str(&s), s.len, "soup");
    }
    /* Pathological shapes, large: long runs of one marker. */
    static const char *const runs[] = {"*", "_", "[", "`", "> ", "- ", "|", "*a ", "[a](", "``a`", "  - x\n", "\t", "a\t", "](", "| `"};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        sbuf_clear(&s);
        while (s.len < 40000)
            sbuf_adds(&s, runs[r]);
        md_render(&doc, s.s, s.len, 60, MDR_OPT_STREAMING);
        check_doc(s.s, s.len, 60, MDR_OPT_STREAMING, runs[r]);
    }
    sbuf_free(&s);
}

int main(void)
{
    setlocale(LC_ALL, "C.UTF-8");
    RUN(test_opening_emphasis_fresh_doc);
    RUN(test_inline_styles);
    RUN(test_links);
    RUN(test_entities_html_autolinks);
    RUN(test_unclosed_markers);
    RUN(test_headings);
    RUN(test_lists);
    RUN(test_quotes);
    RUN(test_code_blocks);
    RUN(test_code_block_list);
    RUN(test_rules_and_blank_lines);
    RUN(test_tables);
    RUN(test_wide_table_falls_back_to_text);
    RUN(test_wrapping_by_display_cells);
    RUN(test_output_is_sanitized);
    RUN(test_raw_mode);
    RUN(test_doc_reuse_is_exact);
    RUN(test_random_bytes);
    RUN(test_markdown_soup);
    md_doc_free(&doc);
    sbuf_free(&out);
    TESTS_DONE();
}
