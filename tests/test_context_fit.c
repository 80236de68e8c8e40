/* test_context_fit.c: a message far too long for the context is judged
 * from its length, not tokenized (issue 28.6c: a 100 MB message was
 * tokenized whole before the context check, 44 s).  A token stands for at
 * most tok_max_piece() bytes, so B bytes are at least B / max_piece tokens:
 * when that bound is over twice the room, chat_prompt_fit decides from it
 * and says the count is a lower bound ("at least"); near the edge the
 * count stays exact.  Under trim, an old huge exchange is left out without
 * being tokenized, and the prompt is the one an exact fit gives. */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "gguf.h"
#include "testlib.h"
#include "tokenizer.h"

#define MODEL "tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf"
#define HUGE_BYTES (24u << 20)

static tokenizer *tok;

/* "word word word ..." of n bytes */
static char *words(size_t n)
{
    char *s = malloc(n + 1);
    for (size_t i = 0; s && i < n; i++)
        s[i] = "word "[i % 5];
    if (s)
        s[n] = 0;
    return s;
}

static void session(chat_session *s)
{
    chat_init(s, tok, tmpl_find("chatml"), false);
    conv_add(&s->conv, "system", "Be brief.", NULL);
}

static void test_huge_last_message_not_tokenized(void)
{
    chat_session s;
    session(&s);
    char *big = words(HUGE_BYTES);
    conv_add(&s.conv, "user", big, NULL);
    free(big);
    for (int policy = 0; policy < 2; policy++) {
        chat_fit fit;
        err_t err = {{0}};
        CHECK(chat_prompt_fit(&s, s.conv.n, 4096, 1024, policy ? CHAT_CTX_STOP : CHAT_CTX_TRIM, &fit, &err) == 0,
              "fit: %.300s", err.msg);
        uint32_t said = policy ? fit.n_full : fit.n_least;
        CHECK(!fit.fits && fit.bounded && said >= HUGE_BYTES / tok_max_piece(tok), "policy %d: fits %d, bounded %d, %u",
              policy, fit.fits, fit.bounded, said);
        sbuf why = {0};
        chat_fit_describe(&fit, &why);
        CHECK(strstr(sbuf_str(&why), "at least "), "policy %d: '%.300s'", policy, sbuf_str(&why));
        sbuf_free(&why);
        chat_fit_free(&fit);
    }
    chat_free(&s);
}

/* An old huge exchange under trim: left out, and the prompt is exactly the
 * system prompt and the last exchange, as a conversation without it gives. */
static void test_huge_old_message_left_out(void)
{
    chat_session s, small;
    session(&s);
    session(&small);
    char *big = words(HUGE_BYTES);
    conv_add(&s.conv, "user", big, NULL);
    free(big);
    conv_add(&s.conv, "assistant", "That is long.", NULL);
    conv_add(&s.conv, "user", "A short question?", NULL);
    conv_add(&small.conv, "user", "A short question?", NULL);
    chat_fit fit, want;
    err_t err = {{0}};
    CHECK(chat_prompt_fit(&s, s.conv.n, 4096, 1024, CHAT_CTX_TRIM, &fit, &err) == 0, "fit: %.300s", err.msg);
    CHECK(chat_prompt_fit(&small, small.conv.n, 4096, 1024, CHAT_CTX_TRIM, &want, &err) == 0, "fit: %.300s", err.msg);
    CHECK(fit.fits && fit.n_dropped_exchanges == 1 && fit.n_dropped == 2 && fit.first_kept == 3, "fits %d, dropped %zu",
          fit.fits, fit.n_dropped_exchanges);
    CHECK(fit.fits && want.fits && fit.n_ids == want.n_ids && !memcmp(fit.ids, want.ids, fit.n_ids * sizeof *fit.ids),
          "the prompt differs from the one without the huge exchange");
    chat_fit_free(&fit);
    chat_fit_free(&want);
    /* stop: refused by length */
    CHECK(chat_prompt_fit(&s, s.conv.n, 4096, 1024, CHAT_CTX_STOP, &fit, &err) == 0 && !fit.fits && fit.bounded,
          "stop: fits %d, bounded %d", fit.fits, fit.bounded);
    chat_fit_free(&fit);
    chat_free(&s);
    chat_free(&small);
}

/* Near the edge the count is exact: what chat_prompt gives. */
static void test_near_the_edge_is_exact(void)
{
    chat_session s;
    session(&s);
    char *text = words(1200);
    conv_add(&s.conv, "user", text, NULL);
    free(text);
    int32_t *ids = NULL;
    uint32_t n = 0;
    bool opens;
    err_t err = {{0}};
    CHECK(chat_prompt(&s, s.conv.n, &ids, &n, &opens, &err) == 0, "prompt: %.300s", err.msg);
    free(ids);
    /* a room a little below the prompt: does not fit, counted exactly */
    uint32_t reserve = 16, n_ctx = n + reserve - 5;
    chat_fit fit;
    CHECK(chat_prompt_fit(&s, s.conv.n, n_ctx, reserve, CHAT_CTX_STOP, &fit, &err) == 0, "fit: %.300s", err.msg);
    CHECK(!fit.fits && !fit.bounded && fit.n_full == n, "n_full %u (bounded %d), the prompt is %u", fit.n_full,
          fit.bounded, n);
    chat_fit_free(&fit);
    CHECK(chat_prompt_fit(&s, s.conv.n, n + reserve, reserve, CHAT_CTX_STOP, &fit, &err) == 0 && fit.fits &&
              fit.n_ids == n,
          "the exact fit");
    chat_fit_free(&fit);
    chat_free(&s);
}

int main(void)
{
    err_t err;
    gguf_ctx *g = gguf_open(MODEL, &err);
    tok = g ? tok_load(g, &err) : NULL;
    gguf_close(g);
    if (!tok) {
        printf("FAIL - setup: %s\n", err.msg);
        return 1;
    }
    RUN(test_huge_last_message_not_tokenized);
    RUN(test_huge_old_message_left_out);
    RUN(test_near_the_edge_is_exact);
    tok_free(tok);
    TESTS_DONE();
}
