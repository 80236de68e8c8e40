/* test_vk_hostmoe_cancel.c: a prompt batch with experts in host memory
 * stops between host layers (vk_hostmoe_prefill, engine_backend.set_cancel):
 *  - the Vulkan backend says it stops inside an eval only with a split,
 *    and there only between host layers (engine.cancel_reach), so only
 *    then is a chunk's fixed part held to a quarter of it;
 *  - with the flag set, a multi-token eval returns 1 after the first host
 *    layer's turn, a single token is not stopped, and the same prompt
 *    evaluated afterwards gives the logits of an engine that was never
 *    stopped, bit for bit (the half-written cache rows are overwritten).
 * The flag is set before the eval, so the stop comes at the first host
 * layer -- the path of any other, without a timing race.  And the longest
 * stretch between two looks at the flag, which the chunks are cut to, is
 * reported: shorter than the eval with a split, unknown (0) without.
 * Each case runs twice: the batch's host experts computed by the CPU, and
 * streamed to the GPU (--tune hx_stream=1: vk_hostmoe_stream.c, whose stop
 * waits for the parts it has in flight). */
#include "engine/engine.h"
#include "model/model.h"
#include "vk.h"
#include "testlib.h"

#define FIXTURE "tests/data/models/tiny-glm-a/tiny-glm-a.q8_0.gguf"

static model m;
/* the prompt batches' path: the CPU's experts, or streamed to the GPU */
static const char *const cpu_path[] = {"hx_stream=0"}, *const stream_path[] = {"hx_stream=1"};
static const char *const *path = cpu_path;

static int open_vk(engine *e, int n_cpu_moe, err_t *err)
{
    engine_params p;
    engine_params_default(&p);
    p.tune = path;
    p.n_tune = 1;
    p.n_ctx = 256;
    p.n_batch = 64;
    p.n_cpu_moe = n_cpu_moe;
    p.kv = KV_F32;
    p.all_logits = true; /* every position's logits, to compare */
    return engine_open(e, &vk_engine_backend, &m, &p, err);
}

static void test_only_a_split_stops_inside_an_eval(void)
{
    engine e;
    err_t err = {{0}};
    CHECK(open_vk(&e, 0, &err) == 0, "%.200s", err.msg);
    CHECK(e.cancel_reach == ENGINE_CANCEL_BETWEEN_EVALS,
          "without experts in host memory the Vulkan backend stops between chunks only");
    engine_close(&e);
    CHECK(open_vk(&e, (int)m.cfg.n_layer, &err) == 0, "%.200s", err.msg);
    CHECK(e.cancel_reach == ENGINE_CANCEL_HOST_LAYERS, "with experts in host memory it stops between host layers");
    engine_close(&e);
}

static void test_cancel_between_host_layers(void)
{
    const uint32_t n = 40, V = m.cfg.n_vocab;
    int32_t tok[40];
    for (uint32_t i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 7919u + 13u) % V);
    float *want = malloc((uint64_t)n * V * sizeof(float)), *got = malloc((uint64_t)n * V * sizeof(float));
    engine e;
    err_t err = {{0}};
    engine_output o = {.logits = want, .all_positions = true};
    CHECK(open_vk(&e, (int)m.cfg.n_layer, &err) == 0 && engine_eval(&e, tok, n, &o, &err) == 0, "unstopped: %.200s",
          err.msg);
    engine_close(&e);
    CHECK(open_vk(&e, (int)m.cfg.n_layer, &err) == 0, "%.200s", err.msg);
    o.logits = got;
    atomic_store(&e.cancel, true); /* as engine_request_cancel, but past engine_eval's own check: */
    CHECK(e.be->eval(e.impl, tok, n, 0, &o, &err) == 1, "a multi-token eval with the flag set returns 1 (%.200s)", err.msg);
    err_t e2 = {{0}};
    CHECK(e.be->eval(e.impl, tok, 1, 0, &o, &e2) == 0, "a single token is not stopped (%.200s)", e2.msg);
    engine_clear_cancel(&e);
    CHECK(engine_eval(&e, tok, n, &o, &err) == 0 && e.n_past == n, "after the stop: %.200s", err.msg);
    CHECK(memcmp(want, got, (uint64_t)n * V * sizeof(float)) == 0,
          "the prompt's logits after a stopped batch equal an unstopped engine's, bit for bit");
    engine_close(&e);
    free(want);
    free(got);
}

/* The longest stretch without a look at the flag (engine_backend
 * .eval_stretch): with a split, positive and shorter than the eval (there
 * is a look after every host layer's turn); without one, 0 (unknown: the
 * whole eval counts). */
static void test_eval_stretch(void)
{
    const uint32_t n = 40;
    int32_t tok[40];
    for (uint32_t i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 104729u + 7u) % m.cfg.n_vocab);
    for (int split = 0; split <= 1; split++) {
        engine e;
        err_t err = {{0}};
        if (open_vk(&e, split ? (int)m.cfg.n_layer : 0, &err) != 0) {
            CHECK(0, "%.200s", err.msg);
            continue;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = e.be->eval(e.impl, tok, n, 0, NULL, &err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        double stretch = e.be->eval_stretch(e.impl);
        if (split)
            CHECK(rc == 0 && stretch > 0 && stretch < s, "split: the longest stretch %.4f s of a %.4f s eval (%.200s)",
                  stretch, s, err.msg);
        else
            CHECK(rc == 0 && stretch == 0, "no split: stretch %.4f s, expected 0 (unknown) (%.200s)", stretch, err.msg);
        engine_close(&e);
    }
}

int main(void)
{
    err_t err;
    if (!vk_available()) {
        printf("FAIL - vulkan device: none usable\n");
        return 1;
    }
    if (model_load(&m, FIXTURE, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    RUN(test_only_a_split_stops_inside_an_eval);
    for (int streamed = 0; streamed <= 1; streamed++) {
        path = streamed ? stream_path : cpu_path;
        RUN(test_cancel_between_host_layers);
        RUN(test_eval_stretch);
    }
    model_free(&m);
    TESTS_DONE();
}
