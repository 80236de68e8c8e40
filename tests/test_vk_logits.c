/* test_vk_logits.c: the Vulkan engine's logits in host memory -- n_batch
 * rows of them only for an engine opened with engine_params.all_logits.
 *
 *  - The plan (vk_plan_placement, nothing uploaded) on a synthetic model
 *    with GLM-4.7-Flash's vocabulary (154,880): an engine opened as the
 *    chat opens it reserves (n_batch - 1) x n_vocab x 4 bytes less pinned
 *    memory than one opened for every position's logits (0.63 GB at a
 *    batch of 1024), and what it reserves is a few MiB.
 *  - On the tiny fixture (lavapipe in CI): an engine opened without the
 *    flag refuses every position's logits of a prompt batch with one line
 *    that names it, keeps working after it, still gives every position's
 *    logits token by token (a decode copies one row), and gives a prompt's
 *    last position's logits (the plain prompt graph's head, one row
 *    copied) that agree with row n-1 of an all_logits engine's (its
 *    mat-mat head: within rounding, not bit for bit) and with the
 *    prompt's top-K. */
#include <math.h>
#include <unistd.h>

#include "engine/engine.h"
#include "model/model.h"
#include "model/synth.h"
#include "vk.h"
#include "testlib.h"

#define FIXTURE "tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf"
#define GLM47_VOCAB 154880u

static char tmpdir[256];

/* ---- the plan ---------------------------------------------------------------------- */

/* One small block with a vocabulary as large as GLM-4.7-Flash's (no
 * tokenizer: the plan reads no text). */
static int big_vocab_model(model *m)
{
    synth_config c;
    err_t err;
    if (synth_preset("tiny-glm", &c, &err) < 0) {
        CHECK(0, "%.300s", err.msg);
        return -1;
    }
    c.hidden = 64, c.layers = 1, c.dense_layers = 0, c.heads = 2, c.q_lora = 32, c.kv_lora = 32;
    c.qk_nope = 32, c.qk_rope = 8, c.v_head = 32, c.moe_ff = 32, c.experts = 4, c.experts_used = 2;
    c.vocab = GLM47_VOCAB, c.no_tokenizer = true;
    c.ftype = SYNTH_FT_Q4_0;
    c.seed = 5;
    char path[512];
    snprintf(path, sizeof path, "%s/big-vocab.gguf", tmpdir);
    synth_options opt = {.n_threads = 1};
    synth_stats st;
    int rc = synth_write(&c, path, &opt, &st, &err) < 0 || model_load(m, path, &err) < 0 ? -1 : 0;
    unlink(path);
    CHECK(rc == 0, "%.300s", err.msg);
    return rc;
}

static const char *const BATCH_MAX[] = {"batch_max=2048"};

static int plan(const model *m, uint32_t n_batch, bool all_logits, vk_placement *pl, err_t *err)
{
    engine_params p;
    engine_params_default(&p);
    p.n_ctx = 4096;
    p.n_batch = n_batch;
    p.n_cpu_moe = 0;
    p.kv = KV_F16;
    p.tune = BATCH_MAX;
    p.n_tune = 1;
    p.all_logits = all_logits;
    return vk_plan_placement(m, &p, pl, err);
}

static void test_plan_keeps_one_logits_row_unless_asked(void)
{
    model m;
    if (big_vocab_model(&m) < 0)
        return;
    const uint32_t batches[] = {1024, 2048};
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        uint32_t B = batches[i];
        vk_placement chat, all;
        err_t err = {{0}};
        if (plan(&m, B, false, &chat, &err) || plan(&m, B, true, &all, &err)) {
            CHECK(0, "batch %u: %.300s", B, err.msg);
            continue;
        }
        CHECK(chat.n_batch == B && all.n_batch == B, "batches %u, %u (asked %u)", chat.n_batch, all.n_batch, B);
        /* the rows beside the one kept; each buffer is aligned to at most
         * 256 bytes (Vulkan's largest minStorageBufferOffsetAlignment) */
        double want = (double)(B - 1) * GLM47_VOCAB * 4, got = (double)all.host_visible - (double)chat.host_visible;
        CHECK(fabs(got - want) <= 256, "batch %u: all_logits reserves %.0f more host-visible bytes, expected %.0f", B,
              got, want);
        CHECK(chat.host_visible < (16u << 20), "batch %u: the chat's engine reserves %.1f MiB host-visible", B,
              chat.host_visible / 1048576.0);
        /* the device's figures are the same either way */
        CHECK(chat.weights == all.weights && chat.kv == all.kv && chat.act == all.act,
              "batch %u: device bytes differ (act %llu vs %llu)", B, (unsigned long long)chat.act,
              (unsigned long long)all.act);
    }
    model_free(&m);
}

/* ---- the engine -------------------------------------------------------------------- */

static model fx;

static int open_engine(engine *e, bool all_logits)
{
    engine_params p;
    engine_params_default(&p);
    p.n_ctx = 64;
    p.n_batch = 16;
    p.n_cpu_moe = 0;
    p.all_logits = all_logits;
    err_t err;
    if (engine_open(e, &vk_engine_backend, &fx, &p, &err) != 0) {
        CHECK(0, "engine_open: %.300s", err.msg);
        return -1;
    }
    return 0;
}

static const int32_t PROMPT[] = {17, 200, 3, 88, 301, 42, 9, 150, 260, 77, 5};
#define N_PROMPT (sizeof PROMPT / sizeof PROMPT[0])

static void test_every_position_needs_the_flag(void)
{
    engine e;
    if (open_engine(&e, false) < 0)
        return;
    uint32_t V = fx.cfg.n_vocab;
    float *all = malloc((size_t)N_PROMPT * V * sizeof *all);
    engine_output o = {.logits = all, .all_positions = true};
    err_t err = {{0}};
    int rc = engine_eval(&e, PROMPT, N_PROMPT, &o, &err);
    CHECK(rc < 0 && strstr(err.msg, "all_logits") && !strchr(err.msg, '\n'),
          "every position's logits of a prompt batch: rc %d, '%.300s'", rc, err.msg);
    /* the engine still answers: the prompt again, the last position's top token */
    engine_rewind(&e, 0);
    int32_t id = -1;
    engine_output top = {.top_k = 1, .top_ids = &id};
    CHECK(engine_eval(&e, PROMPT, N_PROMPT, &top, &err) == 0 && id >= 0 && (uint32_t)id < V,
          "after the refusal: rc, id %d (%.300s)", id, err.msg);
    /* one token at a time every position's logits still come (a decode
     * copies its one row), finite and not all equal */
    engine_rewind(&e, 0);
    rc = 0;
    for (uint32_t i = 0; i < 3 && !rc; i++) {
        engine_output one = {.logits = all + (size_t)i * V, .all_positions = true};
        rc = engine_eval(&e, &PROMPT[i], 1, &one, &err);
    }
    CHECK(rc == 0, "token by token: %.300s", err.msg);
    bool finite = true, varied = false;
    for (size_t i = 0; i < (size_t)3 * V; i++) {
        finite = finite && isfinite(all[i]);
        varied = varied || all[i] != all[0];
    }
    CHECK(finite && varied, "token by token: logits finite %d, varied %d", finite, varied);
    free(all);
    engine_close(&e);
}

/* Row n-1 of an all_logits engine's prompt logits, and the last position's
 * of an engine opened as the chat opens it: both the model's logits of the
 * same position, the first from the prompt graph's mat-mat head, the second
 * from its mat-vec head (the one the GPU sampler reads).  Tolerance: on
 * lavapipe the two heads sum the same F32 products in other orders (rel-L2
 * ~3e-7 over the fixture's 324 logits); where the mat-mat runs on tensor
 * cores (mm_coop) its operands are rounded to fp16 (2^-11 each), ~1e-3;
 * 5e-3 holds both while another position's row is ~1.3 away. */
static void test_last_row_matches_every_row_engine(void)
{
    uint32_t V = fx.cfg.n_vocab;
    float *all = malloc((size_t)N_PROMPT * V * sizeof *all), *last = malloc(V * sizeof *last);
    float top_v[4];
    int32_t top_i[4];
    float log_z = 0;
    engine e;
    err_t err = {{0}};
    if (open_engine(&e, true) == 0) {
        engine_output o = {.logits = all, .all_positions = true};
        CHECK(engine_eval(&e, PROMPT, N_PROMPT, &o, &err) == 0, "all_logits engine: %.300s", err.msg);
        engine_close(&e);
    }
    if (open_engine(&e, false) == 0) {
        engine_output o = {.logits = last, .top_k = 4, .top_ids = top_i, .top_logits = top_v, .log_z = &log_z};
        CHECK(engine_eval(&e, PROMPT, N_PROMPT, &o, &err) == 0, "the chat's engine: %.300s", err.msg);
        engine_close(&e);
    }
    const float *ref = all + (size_t)(N_PROMPT - 1) * V;
    double d2 = 0, r2 = 0, mx = -INFINITY, s = 0;
    for (uint32_t i = 0; i < V; i++) {
        d2 += ((double)last[i] - ref[i]) * ((double)last[i] - ref[i]);
        r2 += (double)ref[i] * ref[i];
        mx = last[i] > mx ? last[i] : mx;
    }
    for (uint32_t i = 0; i < V; i++)
        s += exp(last[i] - mx);
    double rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
    CHECK(r2 > 0 && rel < 5e-3, "last row: rel-L2 %.3g against the all_logits engine's row %u", rel,
          (unsigned)N_PROMPT - 1);
    /* the top-K of the same eval is the best of the logits returned */
    for (int j = 0; j < 4; j++) {
        bool in = top_i[j] >= 0 && (uint32_t)top_i[j] < V;
        CHECK(in && last[top_i[j]] == top_v[j], "top %d: id %d value %g", j, top_i[j], (double)top_v[j]);
        if (j == 0 && in)
            CHECK(top_v[0] == (float)mx, "top 1 %g, the logits' max %g", (double)top_v[0], mx);
    }
    CHECK(fabs(log_z - (mx + log(s))) < 1e-3, "log_z %g, from the logits %g", (double)log_z, mx + log(s));
    free(all);
    free(last);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-vk-logits-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    if (!vk_available()) {
        fprintf(stderr, "no usable Vulkan device\n");
        rmdir(tmpdir);
        return 1;
    }
    err_t err;
    if (model_load(&fx, FIXTURE, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        rmdir(tmpdir);
        return 1;
    }
    RUN(test_plan_keeps_one_logits_row_unless_asked);
    RUN(test_every_position_needs_the_flag);
    RUN(test_last_row_matches_every_row_engine);
    model_free(&fx);
    rmdir(tmpdir);
    TESTS_DONE();
}
