/* test_clipboard.c: OSC 52 clipboard sequences (app/ui/clipboard.h) byte for
 * byte, plain and wrapped for tmux and GNU screen; the size cap; which
 * wrapping and which notes the environment calls for; picking an answer's
 * code blocks for /copy code [N]. */
#include "ui/clipboard.h"
#include "testlib.h"

static sbuf out;

static const char *osc(const char *text, size_t n, clip_wrap wrap)
{
    static err_t err;
    sbuf_clear(&out);
    if (clip_osc52(text, n, wrap, &out, &err) != 0)
        return err.msg;
    CHECK(out.len == clip_osc52_size(n, wrap), "size %zu, clip_osc52_size says %zu", out.len,
          clip_osc52_size(n, wrap));
    return sbuf_str(&out);
}

static void test_base64_vectors(void)
{
    /* RFC 4648, section 10. */
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        sbuf b = {0};
        clip_base64(in[i], strlen(in[i]), &b);
        CHECK(!strcmp(sbuf_str(&b), want[i]), "'%s' -> '%s'", in[i], sbuf_str(&b));
        sbuf_free(&b);
    }
    sbuf b = {0};
    clip_base64("\xc3\xa9\x00\xff", 4, &b); /* é, a NUL and a high byte */
    CHECK(!strcmp(sbuf_str(&b), "w6kA/w=="), "binary: '%s'", sbuf_str(&b));
    sbuf_free(&b);
}

static void test_plain_sequence(void)
{
    const char *s = osc("hi", 2, CLIP_WRAP_NONE);
    CHECK(!strcmp(s, "\x1b]52;c;aGk=\x07"), "'%s'", s);
    s = osc("h\xc3\xa9llo\n", 7, CLIP_WRAP_NONE);
    CHECK(!strcmp(s, "\x1b]52;c;aMOpbGxvCg==\x07"), "UTF-8 and a newline: '%s'", s);
}

static void test_tmux_passthrough(void)
{
    const char *s = osc("hi", 2, CLIP_WRAP_TMUX);
    CHECK(!strcmp(s, "\x1bPtmux;\x1b\x1b]52;c;aGk=\x07\x1b\\"), "'%s'", s);
}

static void test_screen_chunks(void)
{
    /* 60 bytes -> 80 base64 characters -> a chunk of 76 and one of 4. */
    char text[61];
    memset(text, 'a', 60);
    text[60] = 0;
    sbuf b = {0};
    clip_base64(text, 60, &b);
    CHECK(b.len == 80, "base64 length %zu", b.len);
    sbuf want = {0};
    sbuf_adds(&want, "\x1bP\x1b]52;c;");
    sbuf_add(&want, b.s, 76);
    sbuf_adds(&want, "\x1b\\\x1bP");
    sbuf_add(&want, b.s + 76, 4);
    sbuf_adds(&want, "\x07\x1b\\");
    const char *s = osc(text, 60, CLIP_WRAP_SCREEN);
    CHECK(!strcmp(s, sbuf_str(&want)), "screen: '%s'", s);
    /* Exactly one chunk: no separator. */
    s = osc(text, 57, CLIP_WRAP_SCREEN); /* 76 characters */
    CHECK(strstr(s, "\x1b\\\x1bP") == NULL && strlen(s) == 2 + 7 + 76 + 1 + 2, "one chunk: %zu bytes", strlen(s));
    sbuf_free(&b);
    sbuf_free(&want);
}

static void test_size_cap(void)
{
    const clip_wrap wraps[] = {CLIP_WRAP_NONE, CLIP_WRAP_TMUX, CLIP_WRAP_SCREEN};
    char *big = malloc(CLIP_MAX_SEQ);
    memset(big, 'x', CLIP_MAX_SEQ);
    for (int w = 0; w < 3; w++) {
        /* The largest text that fits, found from the size function, then one byte more. */
        size_t n = 0;
        while (clip_osc52_size(n + 1, wraps[w]) <= CLIP_MAX_SEQ)
            n++;
        CHECK(n > 70000, "wrap %d: only %zu bytes fit", w, n);
        const char *s = osc(big, n, wraps[w]);
        CHECK(out.len == clip_osc52_size(n, wraps[w]) && out.len <= CLIP_MAX_SEQ, "wrap %d at the cap: %.60s", w, s);
        sbuf_clear(&out);
        err_t err = {{0}};
        CHECK(clip_osc52(big, n + 1, wraps[w], &out, &err) != 0 && out.len == 0, "wrap %d: over the cap accepted", w);
        CHECK(strstr(err.msg, "too large to copy") != NULL, "wrap %d: '%.200s'", w, err.msg);
    }
    sbuf_clear(&out);
    err_t err = {{0}};
    CHECK(clip_osc52("", 0, CLIP_WRAP_NONE, &out, &err) != 0 && strstr(err.msg, "nothing to copy"), "empty: '%.200s'",
          err.msg);
    free(big);
}

static void test_environment(void)
{
    clip_env e = {"xterm-256color", NULL, NULL, NULL, NULL};
    CHECK(clip_wrap_for(&e) == CLIP_WRAP_NONE && clip_note(&e) == NULL, "xterm");
    e.tmux = "/tmp/tmux-0/default,123,0";
    e.term = "tmux-256color";
    CHECK(clip_wrap_for(&e) == CLIP_WRAP_TMUX, "tmux");
    e.term = "screen";
    e.sty = "1234.pts-0.host";
    CHECK(clip_wrap_for(&e) == CLIP_WRAP_TMUX, "tmux wins over an inherited STY");
    e.tmux = NULL;
    CHECK(clip_wrap_for(&e) == CLIP_WRAP_SCREEN, "screen");
    e.term = "xterm";
    CHECK(clip_wrap_for(&e) == CLIP_WRAP_NONE, "STY left over from a screen outside: plain");
    clip_env linux_console = {"linux", NULL, NULL, NULL, NULL};
    clip_env dumb = {"dumb", NULL, NULL, NULL, NULL};
    clip_env apple = {"xterm-256color", NULL, NULL, "Apple_Terminal", NULL};
    clip_env vte = {"xterm-256color", NULL, NULL, NULL, "7600"};
    CHECK(clip_note(&linux_console) && clip_note(&dumb) && clip_note(&apple) && clip_note(&vte), "known refusers");
    CHECK(strchr(clip_note(&vte), '\n') == NULL, "one line");
    clip_env now = clip_env_get();
    CHECK((now.term == NULL) == (getenv("TERM") == NULL), "clip_env_get reads TERM");
}

static void test_code_blocks(void)
{
    const char *answer = "Try this:\n\n```python\nprint('a')\n\tx = 1\n```\n\nor\n\n> ~~~sh\n> ls *.c\n> ~~~\n\n"
                         "```\nplain\n```";
    sbuf code = {0};
    clip_block_info info;
    err_t err = {{0}};
    CHECK(clip_code_block(answer, strlen(answer), 1, &code, &info, &err) == 0, "%.200s", err.msg);
    CHECK(!strcmp(sbuf_str(&code), "print('a')\n\tx = 1"), "block 1: '%s'", sbuf_str(&code));
    CHECK(info.index == 1 && info.count == 3 && !strcmp(info.lang, "python") && info.n_lines == 2 && info.closed,
          "info 1");
    sbuf_clear(&code);
    CHECK(clip_code_block(answer, strlen(answer), 2, &code, &info, &err) == 0 && !strcmp(sbuf_str(&code), "ls *.c") &&
              !strcmp(info.lang, "sh"),
          "block 2 (in a quote): '%s'", sbuf_str(&code));
    sbuf_clear(&code);
    CHECK(clip_code_block(answer, strlen(answer), 0, &code, &info, &err) == 0 && !strcmp(sbuf_str(&code), "plain") &&
              info.index == 3,
          "0 picks the last: '%s'", sbuf_str(&code));
    sbuf_clear(&code);
    CHECK(clip_code_block(answer, strlen(answer), 4, &code, &info, &err) != 0 && code.len == 0 &&
              !strcmp(err.msg, "the answer has 3 code blocks: /copy code 1-3"),
          "out of range: '%.200s'", err.msg);
    CHECK(clip_code_block("no code here", 12, 0, &code, &info, &err) != 0 &&
              !strcmp(err.msg, "the answer has no code block"),
          "none: '%.200s'", err.msg);
    /* An answer cut off inside a block (stopped): what there is, marked open. */
    const char *cut = "```c\nint main(void) {\n";
    CHECK(clip_code_block(cut, strlen(cut), 1, &code, &info, &err) == 0 && !strcmp(sbuf_str(&code), "int main(void) {") &&
              !info.closed,
          "open block: '%s'", sbuf_str(&code));
    /* The copied bytes go out as one sequence. */
    sbuf seq = {0};
    CHECK(clip_osc52(code.s, code.len, CLIP_WRAP_NONE, &seq, &err) == 0 &&
              !strcmp(sbuf_str(&seq), "\x1b]52;c;aW50IG1haW4odm9pZCkgew==\x07"),
          "sequence: '%s'", sbuf_str(&seq));
    sbuf_free(&seq);
    sbuf_free(&code);
}

int main(void)
{
    RUN(test_base64_vectors);
    RUN(test_plain_sequence);
    RUN(test_tmux_passthrough);
    RUN(test_screen_chunks);
    RUN(test_size_cap);
    RUN(test_environment);
    RUN(test_code_blocks);
    sbuf_free(&out);
    TESTS_DONE();
}
