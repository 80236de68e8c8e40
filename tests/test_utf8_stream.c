/* test_utf8_stream.c: the streaming decoder never emits half a character.
 *
 * Multi-byte characters split across tokens (byte tokens fed one by one),
 * emoji and CJK from real encodings, invalid bytes (-> U+FFFD, one per
 * maximal invalid subpart) and sequences cut off at the end. */
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "testlib.h"
#include "text/tokenizer.h"
#include "base/utf8.h"

static tokenizer *tok;

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int r = utf8_check((const unsigned char *)s + i, n - i);
        if (r <= 0)
            return false;
        i += (size_t)r;
    }
    return true;
}

/* The token for one raw byte (its GPT-2 character). */
static int32_t byte_token(unsigned b)
{
    unsigned cp = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))) {
        unsigned k = 0;
        for (unsigned c = 0; c < b; c++)
            k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE));
        cp = 256 + k;
    }
    char u[4] = {0};
    utf8_encode(cp, u);
    return tok_find(tok, u);
}

/* Feeds ids; every chunk must be valid UTF-8; returns the whole text. */
static size_t feed_all(const int32_t *ids, size_t n, char *all, size_t cap)
{
    tok_stream s;
    tok_stream_init(&s, tok);
    char chunk[TOK_STREAM_CAP(64)];
    size_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t k = i < n ? tok_stream_feed(&s, ids[i], chunk, sizeof chunk)
                         : tok_stream_flush(&s, chunk, sizeof chunk);
        CHECK(valid_utf8(chunk, k), "chunk %zu is not complete UTF-8", i);
        CHECK(chunk[k] == 0, "chunk not NUL-terminated");
        if (at + k < cap) {
            memcpy(all + at, chunk, k);
            at += k;
        }
    }
    all[at] = 0;
    return at;
}

static void test_split_characters_held_back(void)
{
    /* "é世😀" as single-byte tokens: nothing comes out mid-character */
    const unsigned char text[] = "\xc3\xa9\xe4\xb8\x96\xf0\x9f\x98\x80";
    tok_stream s;
    tok_stream_init(&s, tok);
    char out[64];
    size_t lens[9];
    for (int i = 0; i < 9; i++)
        lens[i] = tok_stream_feed(&s, byte_token(text[i]), out, sizeof out);
    const size_t want[9] = {0, 2, 0, 0, 3, 0, 0, 0, 4};
    CHECK(memcmp(lens, want, sizeof want) == 0, "emitted at the wrong bytes");
    CHECK(tok_stream_flush(&s, out, sizeof out) == 0, "nothing should be pending");
}

static void test_real_encodings_round_trip(void)
{
    const char *texts[] = {
        "Hello, 世界! 😀 👨\u200d👩\u200d👧 family",
        "한국어 텍스트 and ภาษาไทย, नमस्ते",
        "emoji flags 🇺🇸🇯🇵 and 𝐀𝐁 math",
    };
    for (size_t k = 0; k < 3; k++) {
        int32_t ids[256];
        err_t err;
        int64_t n = tok_encode(tok, texts[k], strlen(texts[k]), false, ids, 256, &err);
        CHECK(n > 0 && n < 256, "encode");
        char all[1024];
        size_t len = feed_all(ids, (size_t)n, all, sizeof all);
        CHECK(len == strlen(texts[k]) && memcmp(all, texts[k], len) == 0, "stream text %zu differs", k);
    }
}

static void test_invalid_bytes_become_replacement(void)
{
    struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {"\xff" "a", 2, "\xef\xbf\xbd" "a"},                       /* never valid */
        {"\xe4" "a", 2, "\xef\xbf\xbd" "a"},                       /* lead without its tail */
        {"\xc0\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd"},               /* overlong */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"\xe4\xb8", 2, "\xef\xbf\xbd"},                           /* cut off: one U+FFFD at flush */
        {"\x80\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd"},               /* stray continuations */
        {"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t ids[8];
        for (size_t k = 0; k < cases[i].n; k++)
            ids[k] = byte_token((unsigned char)cases[i].in[k]);
        char all[64];
        size_t len = feed_all(ids, cases[i].n, all, sizeof all);
        CHECK(len == strlen(cases[i].out) && memcmp(all, cases[i].out, len) == 0, "case %zu: got %zu bytes", i, len);
    }
}

static void test_special_and_bad_ids(void)
{
    tok_stream s;
    tok_stream_init(&s, tok);
    char out[64];
    size_t n = tok_stream_feed(&s, tok_find(tok, "<|im_end|>"), out, sizeof out);
    CHECK(n == 10 && strcmp(out, "<|im_end|>") == 0, "special tokens stream their text");
    CHECK(tok_stream_feed(&s, -5, out, sizeof out) == 0 && tok_stream_feed(&s, 1 << 30, out, sizeof out) == 0,
          "ids outside the vocabulary give nothing");
    /* too small a buffer drops whole characters, never splits one */
    tok_stream_init(&s, tok);
    char tiny[3];
    n = tok_stream_feed(&s, byte_token(0xe4), tiny, sizeof tiny);
    n += tok_stream_feed(&s, byte_token(0xb8), tiny, sizeof tiny);
    n += tok_stream_feed(&s, byte_token(0x96), tiny, sizeof tiny);
    CHECK(n == 0, "a 3-byte character does not fit in 2 bytes of room");
}

int main(void)
{
    err_t err;
    gguf_ctx *ctx = gguf_open("tests/data/tokenizer/qwen3.vocab.gguf", &err);
    tok = ctx ? tok_load(ctx, &err) : NULL;
    gguf_close(ctx);
    if (!tok) {
        printf("FAIL - load qwen3 vocabulary: %s\n", err.msg);
        return 1;
    }
    RUN(test_split_characters_held_back);
    RUN(test_real_encodings_round_trip);
    RUN(test_invalid_bytes_become_replacement);
    RUN(test_special_and_bad_ids);
    tok_free(tok);
    TESTS_DONE();
}
