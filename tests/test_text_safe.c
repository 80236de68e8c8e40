/* test_text_safe.c: the one sanitiser (core/text_safe.h) and the error
 * messages it keeps inert (core/error.c): C0 and C1 controls (encoded, and
 * raw 0x9b bytes in invalid UTF-8), bidi controls, the one-line form, the
 * fixed-buffer form's cut at whole pieces, and that sanitized text is a
 * fixed point (issue 28.3). */
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "text_safe.h"
#include "testlib.h"

/* True when s holds a byte a terminal could obey: C0 but \n and \t (when
 * allowed), DEL, a raw C1 byte, or an encoded C1 or bidi control. */
static bool obeyable(const char *s, size_t n, bool newline_ok)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = tsafe_decode(s + i, n - i, &cp);
        if ((unsigned char)s[i] >= 0x80 && cp == 0xfffd && len == 1)
            return true; /* invalid UTF-8, e.g. a raw 0x9b */
        if (tsafe_is_control(cp) && !(newline_ok && (cp == '\n' || cp == '\t')))
            return true;
        i += len;
    }
    return false;
}

static const char planted[] = "a\x1b]52;c;aGk=\x07 b\xc2\x9b"
                              "31m c\x9b"
                              "2J d\xe2\x80\xae"
                              "e\x7f f\n\tg\x01";

static void test_sanitize_forms(void)
{
    sbuf b = {0};
    tsafe_sanitize(&b, planted, sizeof planted - 1, false);
    CHECK(!strcmp(sbuf_str(&b), "a^[]52;c;aGk=^G b<U+009B>31m c\xef\xbf\xbd"
                                "2J d<U+202E>e^? f\n\tg^A"),
          "'%s'", sbuf_str(&b));
    CHECK(!obeyable(b.s, b.len, true), "something obeyable is left");
    sbuf_free(&b);
    tsafe_one_line(&b, planted, sizeof planted - 1);
    CHECK(strstr(sbuf_str(&b), " f^J^Ig^A") && !obeyable(b.s, b.len, false), "'%s'", sbuf_str(&b));
    /* a fixed point: sanitizing the result again changes nothing */
    sbuf again = {0};
    tsafe_one_line(&again, b.s, b.len);
    CHECK(!strcmp(sbuf_str(&again), sbuf_str(&b)), "not a fixed point: '%s'", sbuf_str(&again));
    sbuf_free(&again);
    sbuf_free(&b);
}

/* The fixed-buffer form equals tsafe_one_line when it fits, and is cut at
 * whole characters and inert forms otherwise, always NUL-terminated. */
static void test_one_line_buf(void)
{
    sbuf b = {0};
    tsafe_one_line(&b, planted, sizeof planted - 1);
    char buf[256];
    size_t n = tsafe_one_line_buf(buf, sizeof buf, planted, sizeof planted - 1);
    CHECK(n == b.len && !strcmp(buf, sbuf_str(&b)), "'%s'", buf);
    for (size_t cap = 1; cap <= b.len + 1; cap++) {
        char small[256];
        memset(small, 'X', sizeof small);
        size_t m = tsafe_one_line_buf(small, cap, planted, sizeof planted - 1);
        CHECK(m < cap && small[m] == 0 && !strncmp(small, b.s, m), "cap %zu: '%s'", cap, small);
        CHECK(!obeyable(small, m, false) && tsafe_valid(small, m), "cap %zu cut a piece: '%s'", cap, small);
        /* never half an inert form: what is kept ends where a piece ends */
        CHECK(m == 0 || small[m - 1] != '^', "cap %zu ends inside ^X", cap);
    }
    sbuf_free(&b);
}

/* Every error message is inert, whatever it quotes and however it is
 * made (issue 28.3: a GGUF key's value reached the terminal raw). */
static void test_error_messages_inert(void)
{
    err_t e;
    err_set(&e, "%s: rope.scaling.type '%s' is not supported", "m.gguf", "\x1b]52;c;aGk=\x07");
    CHECK(!strcmp(e.msg, "m.gguf: rope.scaling.type '^[]52;c;aGk=^G' is not supported"), "'%.400s'", e.msg);
    err_set(&e, "name %s", "x\xc2\x9b" "31m y\x9b" "2J\nz");
    CHECK(!obeyable(e.msg, strlen(e.msg), false) && strstr(e.msg, "x<U+009B>31m y\xef\xbf\xbd" "2J^Jz"), "'%.400s'",
          e.msg);
    err_prefix(&e, "%s", "dir\x1b[2J");
    CHECK(!strncmp(e.msg, "dir^[[2J: name x<U+009B>", 24), "'%.400s'", e.msg);
    /* an argument that is the message itself */
    err_set(&e, "again: %s", e.msg);
    CHECK(!strncmp(e.msg, "again: dir^[[2J: name", 21), "'%.400s'", e.msg);
    /* long: cut, still inert and valid */
    char big[3000];
    for (size_t i = 0; i < sizeof big - 1; i++)
        big[i] = i % 3 ? '\x1b' : 'a';
    big[sizeof big - 1] = 0;
    err_set(&e, "%s", big);
    CHECK(strlen(e.msg) < sizeof e.msg && !obeyable(e.msg, strlen(e.msg), false), "long message");
    err_prefix(&e, "%s", big);
    CHECK(strlen(e.msg) < sizeof e.msg && !obeyable(e.msg, strlen(e.msg), false), "long prefix");
}

int main(void)
{
    RUN(test_sanitize_forms);
    RUN(test_one_line_buf);
    RUN(test_error_messages_inert);
    TESTS_DONE();
}
