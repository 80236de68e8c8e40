/* test_vk_hostmoe_stream.c: which way a prompt batch with experts in host
 * memory goes (gpu/vk_hostmoe.c vk_hostmoe_stream_pick), and a prompt whose
 * batches go both ways.
 *  - Before both ways were timed, batches of at least the threshold
 *    (--tune hx_stream) stream and smaller ones go to the CPU; threshold 0
 *    never streams.  Once both were timed, the cheaper as timed wins
 *    whatever the threshold: a streamed batch's mean time against the CPU's
 *    time per token times the batch.
 *  - A prompt read in a batch that goes one way, then one that goes the
 *    other (threshold 6: batches of 3 and 8, and of 8 and 3) continues
 *    from the cache the other way wrote: every position's logits within
 *    the split's bound of an engine with every expert on the device (1e-2
 *    rel-L2, as t_vk_hostmoe.sh holds the CPU's path: its 8-bit
 *    activations), a streamed first batch's bit for bit; and the engine's
 *    stats count the one streamed batch. */
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "model/model.h"
#include "vk.h"
#include "vk_engine.h"
#include "testlib.h"

#define FIXTURE "tests/data/models/tiny-glm-a/tiny-glm-a.q8_0.gguf"

static void test_pick(void)
{
    /* nothing timed: the threshold */
    CHECK(vk_hostmoe_stream_pick(64, 64, 0, 0, 0, 0) && !vk_hostmoe_stream_pick(63, 64, 0, 0, 0, 0),
          "untimed: 64 tokens stream at threshold 64, 63 do not");
    CHECK(!vk_hostmoe_stream_pick(4096, 0, 0, 0, 0, 0), "threshold 0 never streams");
    /* one way timed only: still the threshold */
    CHECK(vk_hostmoe_stream_pick(100, 64, 3, 1.2, 0, 0) && !vk_hostmoe_stream_pick(10, 64, 0, 0, 500, 2.5),
          "one way timed: the threshold");
    /* both: a streamed batch 0.4 s, the CPU 5 ms a token: 64 tokens on the
     * CPU (0.32 s), 100 streamed (0.5 s), whatever the threshold */
    CHECK(!vk_hostmoe_stream_pick(64, 64, 2, 0.8, 200, 1.0), "timed: 64 tokens on the CPU (0.32 s < 0.4 s)");
    CHECK(vk_hostmoe_stream_pick(100, 512, 2, 0.8, 200, 1.0), "timed: 100 tokens streamed (0.5 s > 0.4 s)");
    CHECK(!vk_hostmoe_stream_pick(100, 1, 2, 0.8, 400, 1.0), "timed: a cheaper CPU (2.5 ms a token) keeps 100 tokens");
}

static model m;

static int open_vk(engine *e, int n_cpu_moe, const char *tune, err_t *err)
{
    engine_params p;
    engine_params_default(&p);
    const char *const t[] = {tune};
    p.tune = t;
    p.n_tune = 1;
    p.n_ctx = 64;
    p.n_batch = 8;
    p.n_cpu_moe = n_cpu_moe;
    p.kv = KV_F32;
    p.all_logits = true;
    return engine_open(e, &vk_engine_backend, &m, &p, err);
}

/* Logits of the prompt read in batches of sizes[0], sizes[1], ... */
static int run(int n_cpu_moe, const char *tune, const int32_t *tok, const uint32_t *sizes, uint32_t n_sizes,
               float *logits, uint64_t *streamed, err_t *err)
{
    engine e;
    if (open_vk(&e, n_cpu_moe, tune, err))
        return -1;
    uint32_t at = 0, V = m.cfg.n_vocab;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < n_sizes; i++) {
        engine_output o = {.logits = logits + (uint64_t)at * V, .all_positions = true};
        rc = e.be->eval(e.impl, tok + at, sizes[i], at, &o, err);
        at += sizes[i];
    }
    engine_stats st;
    engine_get_stats(&e, &st);
    *streamed = st.split.streamed;
    engine_close(&e);
    return rc;
}

static double rel_l2(const float *a, const float *b, uint64_t n)
{
    double d = 0, s = 0;
    for (uint64_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0 ? s : 1));
}

/* The prompt in batches of sizes[0..1] with threshold 6, split and not:
 * which way each went is decided by the threshold alone (one way has not
 * been timed yet when the other runs), so the test does not hang on the
 * machine's speed. */
static void both_ways(const uint32_t sizes[2], const char *what)
{
    const uint32_t n = sizes[0] + sizes[1], V = m.cfg.n_vocab;
    int32_t tok[16];
    for (uint32_t i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 7919u + 11u) % V);
    float *mixed = malloc((uint64_t)n * V * sizeof(float)), *whole = malloc((uint64_t)n * V * sizeof(float));
    uint64_t streamed = 0, none = 0;
    err_t err = {{0}};
    CHECK(run((int)m.cfg.n_layer, "hx_stream=6", tok, sizes, 2, mixed, &streamed, &err) == 0, "%s: %.200s", what,
          err.msg);
    CHECK(run(0, "hx_stream=6", tok, sizes, 2, whole, &none, &err) == 0, "%s, unsplit: %.200s", what, err.msg);
    CHECK(streamed == 1 && none == 0, "%s: one batch streamed (%llu), none without a split (%llu)", what,
          (unsigned long long)streamed, (unsigned long long)none);
    for (uint32_t a = 0, i = 0; i < 2; a += sizes[i], i++) {
        const float *x = mixed + (uint64_t)a * V, *y = whole + (uint64_t)a * V;
        uint64_t k = (uint64_t)sizes[i] * V;
        if (sizes[i] >= 6 && i == 0) {
            CHECK(memcmp(x, y, k * sizeof(float)) == 0, "%s: the streamed first batch has the unsplit engine's bits",
                  what);
            continue;
        }
        double r = rel_l2(x, y, k);
        CHECK(r < 1e-2, "%s: batch %u (%s%s): rel-L2 %.2e to the unsplit engine", what, i,
              sizes[i] >= 6 ? "streamed" : "the CPU's", i ? ", from the cache the other way wrote" : "", r);
    }
    free(mixed);
    free(whole);
}

static void test_both_ways_in_one_prompt(void)
{
    const uint32_t cpu_first[2] = {3, 8}, streamed_first[2] = {8, 3};
    both_ways(cpu_first, "3 tokens (the CPU's), then 8 (streamed)");
    both_ways(streamed_first, "8 tokens (streamed), then 3 (the CPU's)");
}

int main(void)
{
    err_t err;
    RUN(test_pick);
    if (!vk_available()) {
        printf("FAIL - vulkan device: none usable\n");
        return 1;
    }
    if (model_load(&m, FIXTURE, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    RUN(test_both_ways_in_one_prompt);
    model_free(&m);
    TESTS_DONE();
}
