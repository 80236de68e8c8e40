/* fuzz_tokenizer.c: random bytes through encode (plain and special),
 * decode and the streaming decoder, on the Qwen3 vocabulary loaded once.
 * Checks: no crash or sanitizer report, the count/cap contract, and that
 * the stream only ever emits complete, valid UTF-8. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/tokenizer.h"
#include "base/utf8.h"

static tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    err_t err;
    gguf_ctx *ctx = gguf_open("tests/data/tokenizer/qwen3.vocab.gguf", &err);
    tok = ctx ? tok_load(ctx, &err) : NULL;
    gguf_close(ctx);
    if (!tok) {
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root)\n", err.msg);
        abort();
    }
    return 0;
}

static void check_stream(const int32_t *ids, size_t n)
{
    tok_stream s;
    tok_stream_init(&s, tok);
    size_t cap = TOK_STREAM_CAP(tok_max_piece(tok));
    char *out = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        size_t k = i < n ? tok_stream_feed(&s, ids[i], out, cap) : tok_stream_flush(&s, out, cap);
        for (size_t at = 0; at < k;) {
            int r = utf8_check((const unsigned char *)out + at, k - at);
            if (r <= 0)
                abort(); /* the stream let out an incomplete or invalid sequence */
            at += (size_t)r;
        }
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    err_t err;
    for (int special = 0; special < 2; special++) {
        int64_t n = tok_encode(tok, (const char *)data, size, special, NULL, 0, &err);
        if (n < 0)
            abort();
        int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
        if (tok_encode(tok, (const char *)data, size, special, ids, (size_t)n, &err) != n)
            abort(); /* the count must not depend on the room given */
        size_t len;
        char *text = tok_decode(tok, ids, (size_t)n, &len, &err);
        if (!text)
            abort();
        free(text);
        check_stream(ids, (size_t)n);
        free(ids);
    }
    /* raw ids, in and out of range, straight into the stream */
    if (size >= 4) {
        size_t n = size / 4;
        int32_t *ids = malloc(n * sizeof *ids);
        memcpy(ids, data, n * sizeof *ids);
        for (size_t i = 0; i < n; i++)
            ids[i] = (int32_t)((uint32_t)ids[i] % (tok_n_vocab(tok) + 16)) - 8;
        check_stream(ids, n);
        free(ids);
    }
    return 0;
}
