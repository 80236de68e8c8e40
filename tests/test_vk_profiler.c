/* test_vk_profiler.c: the Vulkan engine's sampled profiler (gpu/vk_profiler.c)
 * as the side pane reads it (engine_get_stats) while tokens are decoded one
 * at a time: with the tuning knob prof_every = N, the first decoded token
 * is timed and fills the kernel table; none is with prof_every = 0; and the
 * timed tokens are every N'th (a token's timings change only on those). */
#include <stdbool.h>
#include <string.h>

#include "engine/engine.h"
#include "model/model.h"
#include "testlib.h"
#include "vk.h"

static const char *MODEL = "tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf";

/* The sum of the kernel table's µs per token (0 when it is empty). */
static double table_us(engine *e, uint32_t *n_kernels)
{
    engine_stats st;
    engine_get_stats(e, &st);
    double us = 0;
    for (uint32_t i = 0; i < st.n_kernels; i++)
        us += st.kernels[i].us_per_token;
    *n_kernels = st.n_kernels;
    return us;
}

/* Decodes `n` tokens one at a time from position 0 with --tune
 * prof_every=every; changed[i]: whether token i changed the table. */
static int decode_tokens(const char *every, int n, uint32_t *first_kernels, bool *changed, err_t *err)
{
    model m;
    if (model_load(&m, MODEL, err) != 0)
        return -1;
    engine_params ep;
    engine_params_default(&ep);
    ep.n_ctx = 64;
    const char *tune[] = {every};
    ep.tune = tune;
    ep.n_tune = 1;
    engine e;
    if (engine_open(&e, &vk_engine_backend, &m, &ep, err) != 0) {
        model_free(&m);
        return -1;
    }
    int rc = 0;
    double before = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int32_t tok = (int32_t)(i * 7 + 3);
        int32_t next = -1;
        engine_output out = {.token = &next};
        rc = engine_eval(&e, &tok, 1, &out, err);
        uint32_t nk;
        double us = table_us(&e, &nk);
        if (i == 0)
            *first_kernels = nk;
        changed[i] = us != before;
        before = us;
    }
    engine_close(&e);
    model_free(&m);
    return rc;
}

static void test_every_fourth_token(void)
{
    bool changed[9];
    uint32_t nk = 0;
    err_t err;
    if (decode_tokens("prof_every=4", 9, &nk, changed, &err) != 0) {
        CHECK(0, "%.300s", err.msg);
        return;
    }
    CHECK(nk >= 5, "after the first token: %u kernel rows", nk);
    for (int i = 0; i < 9; i++)
        CHECK(changed[i] == (i % 4 == 0), "token %d %s the table", i, changed[i] ? "changed" : "left");
}

static void test_every_token(void)
{
    bool changed[4];
    uint32_t nk = 0;
    err_t err;
    if (decode_tokens("prof_every=1", 4, &nk, changed, &err) != 0) {
        CHECK(0, "%.300s", err.msg);
        return;
    }
    CHECK(nk >= 5 && changed[0], "after the first token: %u kernel rows", nk);
}

static void test_none(void)
{
    bool changed[5];
    uint32_t nk = 99;
    err_t err;
    if (decode_tokens("prof_every=0", 5, &nk, changed, &err) != 0) {
        CHECK(0, "%.300s", err.msg);
        return;
    }
    bool any = false;
    for (int i = 0; i < 5; i++)
        any = any || changed[i];
    CHECK(nk == 0 && !any, "prof_every=0: %u kernel rows after a token", nk);
}

int main(void)
{
    RUN(test_every_fourth_token);
    RUN(test_every_token);
    RUN(test_none);
    TESTS_DONE();
}
