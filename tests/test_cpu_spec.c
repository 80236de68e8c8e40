/* test_cpu_spec.c: the fast CPU backend's drafting parts (cpu_forward.h):
 * the verify of k drafts in one batched eval against k + 1 single-token
 * evals, the NextN block against the CPU reference's (ref_forward.h, itself
 * checked against a float64 oracle in test_spec_nextn.c), and the block's
 * own promises (rows independent of the batch, no state without the flag).
 *
 * Exactness (what keeps greedy output unchanged by drafting): the verify's
 * k + 1 logits rows and kept hidden states must be bit for bit those of
 * k + 1 single-token evals -- on every kernel set this CPU runs, every
 * weight type a kernel set has an integer kernel for (the fixtures'
 * F32 / Q8_0 / Q4_0 / Q4_K_M with a NextN block added as real files carry
 * it, and synthetic files of the other types), both KV cache types, and
 * past one attention chunk (256 positions, where a single token's chunks
 * run on different threads and merge in a step of their own).
 *
 * Against the reference backend (tolerances):
 *  - F32 / F16 weights multiply f32 activations on both, in a different
 *    order: rel-L2 <= 1e-5 over all NextN rows and every argmax (the bound
 *    test_cpu_forward.c uses for the main model; ~3e-7 is typical).
 *  - Quantized weights: the fast backend quantizes activations to 8 bits
 *    per block as llama.cpp does, which on random weights moves logits by
 *    1.5-5 % (llama.cpp's own distance to the float64 reference on the
 *    fixtures): rel-L2 <= 0.06, the bound test_cpu_forward.c uses on
 *    GLM-4.7-Flash's shapes. */
#include <unistd.h>

#include "cpu/cpu_forward.h"
#include "engine/engine.h"
#include "fixtures.h"
#include "model/model.h"
#include "model_variants.h"
#include "ref/ref_forward.h"
#include "model/synth.h"
#include "spec_testlib.h"
#include "testlib.h"

static cf_state *open_cf(const model *m, uint32_t n_ctx, uint32_t n_batch, bool kv_f16, int threads,
                         const cpu_kernels *k, bool nextn)
{
    cf_params p = {.n_ctx = n_ctx, .n_batch = n_batch, .kv_f16 = kv_f16, .n_threads = threads, .kernels = k,
                   .nextn = nextn};
    err_t err;
    cf_state *s = cf_new(m, &p, &err);
    CHECK(s != NULL, "cf_new: %s", M(err));
    return s;
}

/* ---- the verify: one batched eval = single-token evals ------------------------------------ */

/* After `depth` context tokens: for k = 1..3, the verify of [t_0..t_k] at
 * depth against k + 1 single evals of the same tokens there -- logits and
 * kept hidden states, bit for bit.  Returns the comparisons that differ. */
static int verify_vs_singles(const char *what, const model *m, const cpu_kernels *k, bool kv_f16, uint32_t depth)
{
    const uint32_t V = m->cfg.n_vocab, H = m->cfg.n_embd;
    cf_state *s = open_cf(m, depth + 8, 64, kv_f16, 2, k, true);
    if (!s)
        return 1;
    CHECK(cf_has_nextn(s), "%s: no NextN state", what);
    int32_t *ctx = malloc(depth * sizeof *ctx), t[4];
    float *batch = malloc(4 * (size_t)V * sizeof(float)), *single = malloc(4 * (size_t)V * sizeof(float));
    float *hb = malloc(4 * (size_t)H * sizeof(float)), *hs = malloc(4 * (size_t)H * sizeof(float));
    random_tokens(ctx, depth, V, depth * 7 + 1);
    err_t err;
    int bad = 0;
    for (uint32_t p = 0; p < depth; p += 64)
        CHECK(cf_eval(s, ctx + p, depth - p < 64 ? depth - p : 64, p, NULL, false, &err) == 0, "%s", M(err));
    for (uint32_t kd = 1; kd <= 3; kd++) {
        random_tokens(t, kd + 1, V, 100 + kd + depth);
        CHECK(cf_eval_verify(s, t, kd + 1, depth, batch, &err) == 0, "%s: %s", what, M(err));
        for (uint32_t i = 0; i <= kd; i++)
            cf_hidden(s, depth + i, hb + (size_t)i * H, &err);
        for (uint32_t i = 0; i <= kd; i++) {
            CHECK(cf_eval(s, &t[i], 1, depth + i, single + (size_t)i * V, false, &err) == 0, "%s", M(err));
            cf_hidden(s, depth + i, hs + (size_t)i * H, &err);
        }
        if (memcmp(batch, single, (kd + 1) * (size_t)V * sizeof(float)) != 0 ||
            memcmp(hb, hs, (kd + 1) * (size_t)H * sizeof(float)) != 0) {
            CHECK(0, "%s: k=%u at depth %u: the verify's logits or hidden states differ from single evals", what, kd,
                  depth);
            bad++;
        }
    }
    cf_free(s);
    void *bufs[] = {ctx, batch, single, hb, hs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    return bad;
}

static void test_verify_equals_single_steps_fixtures(void)
{
    CHECK(n_fx > 0, "no fixture models under %s", FIXTURE_ROOT);
    int runs = 0;
    for (int i = 0; i < n_fx; i++)
        for (int v = 0; v < fx[i].n_variants; v++) {
            model m;
            if (load_fixture_nextn(&fx[i], fx[i].variants[v], &m) < 0)
                continue;
            for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
                const cpu_kernels *k = cpu_kernels_get((cpu_isa)isa);
                if (!k)
                    continue;
                char what[128];
                snprintf(what, sizeof what, "%s %s, %s kernels", fx[i].name, fx[i].variants[v], k->name);
                verify_vs_singles(what, &m, k, false, 9);
                verify_vs_singles(what, &m, k, true, 9);
                runs++;
            }
            model_free(&m);
        }
    printf("# %d (fixture, type, kernel set) cases, k = 1..3, KV f32 and f16\n", runs);
}

/* The other weight types, on synthetic files (the fixtures hold four). */
static void test_verify_equals_single_steps_types(void)
{
    static const uint32_t types[] = {SYNTH_FT_F16,    SYNTH_FT_BF16,   SYNTH_FT_Q4_1,   SYNTH_FT_Q5_0,
                                     SYNTH_FT_Q5_1,   SYNTH_FT_Q2_K,   SYNTH_FT_Q3_K_M, SYNTH_FT_Q5_K_M,
                                     SYNTH_FT_Q6_K,   SYNTH_FT_IQ4_NL, SYNTH_FT_IQ4_XS, SYNTH_FT_IQ2_XXS};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        model m;
        if (make_synth("tiny-glm", types[t], 40 + t, &m) < 0)
            continue;
        for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
            const cpu_kernels *k = cpu_kernels_get((cpu_isa)isa);
            if (!k)
                continue;
            char what[128];
            snprintf(what, sizeof what, "tiny-glm file type %u, %s kernels", types[t], k->name);
            verify_vs_singles(what, &m, k, false, 6);
        }
        model_free(&m);
    }
}

/* Past one attention chunk: single tokens' chunks merge in a step of their
 * own, the verify's tokens run theirs in one go.  The F32 file (f32
 * activations carry every bit of the attention's output, where 8-bit ones
 * would hide a last-bit difference most of the time) and a quantized one. */
static void test_verify_equals_single_steps_past_one_chunk(void)
{
    for (int i = 0; i < n_fx; i++)
        for (int v = 0; v < fx[i].n_variants; v += fx[i].n_variants - 1) {
            model m;
            const char *var = fx[i].variants[v];
            if (load_fixture_nextn(&fx[i], var, &m) < 0)
                continue;
            char what[128];
            snprintf(what, sizeof what, "%s %s, best kernels", fx[i].name, var);
            verify_vs_singles(what, &m, NULL, false, 300);
            verify_vs_singles(what, &m, NULL, true, 520);
            model_free(&m);
            if (fx[i].n_variants == 1)
                break;
        }
}

/* ---- the NextN block against the reference's ----------------------------------------------- */

static double rel_l2(const float *got, const float *ref, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = (double)got[i] - ref[i];
        num += e * e;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

static uint32_t argmax_row(const float *v, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* A prompt of n tokens through both backends' main models, their NextN
 * rows 0..n-1 from the kept states, then three chained rows each made from
 * the reference's previous output (the same input on both sides). */
static void nextn_vs_reference(const char *what, const model *m, uint32_t n, double tol, bool all_argmax)
{
    const uint32_t V = m->cfg.n_vocab, H = m->cfg.n_embd, chain = 3, rows = n + chain;
    int32_t *tok = malloc(rows * sizeof *tok);
    random_tokens(tok, rows, V, n * 13 + 5);
    rf_params rp = {.n_ctx = rows + 1, .n_batch = 64, .n_threads = 2, .nextn = true};
    err_t err;
    rf_state *r = rf_new(m, &rp, &err);
    CHECK(r != NULL, "rf_new: %s", M(err));
    cf_state *c = open_cf(m, rows + 1, 64, false, 2, NULL, true);
    float *a = malloc((size_t)rows * V * sizeof(float)), *b = malloc((size_t)rows * V * sizeof(float));
    float *h = malloc(H * sizeof *h);
    if (r && c) {
        CHECK(rf_eval(r, tok, n, 0, NULL, false, &err) == 0 && cf_eval(c, tok, n, 0, NULL, false, &err) == 0, "%s",
              M(err));
        CHECK(rf_nextn_eval(r, tok, n, 0, NULL, a, true, &err) == 0, "%s", M(err));
        CHECK(cf_nextn_eval(c, tok, n, 0, NULL, b, true, &err) == 0, "%s", M(err));
        for (uint32_t i = 0; i < chain; i++) {
            memcpy(h, rf_nextn_out(r), H * sizeof *h);
            size_t at = (size_t)(n + i) * V;
            CHECK(rf_nextn_eval(r, tok + n + i, 1, n + i, h, a + at, true, &err) == 0, "%s", M(err));
            CHECK(cf_nextn_eval(c, tok + n + i, 1, n + i, h, b + at, true, &err) == 0, "%s", M(err));
        }
        double d = rel_l2(b, a, (uint64_t)rows * V);
        uint32_t agree = 0;
        for (uint32_t p = 0; p < rows; p++)
            agree += argmax_row(a + (size_t)p * V, V) == argmax_row(b + (size_t)p * V, V);
        printf("# %s: NextN logits vs the reference backend rel-L2 %.2e, argmax %u/%u rows (%u chained)\n", what, d,
               agree, rows, chain);
        CHECK(d <= tol, "%s: NextN logits rel-L2 %.3g to the reference backend (bound %g)", what, d, tol);
        CHECK(!all_argmax || agree == rows, "%s: argmax agrees on %u of %u rows", what, agree, rows);
    }
    rf_free(r);
    cf_free(c);
    free(tok);
    free(a);
    free(b);
    free(h);
}

static void test_nextn_block_matches_reference(void)
{
    model m;
    if (make_synth("tiny-glm", SYNTH_FT_F32, 11, &m) == 0) {
        nextn_vs_reference("tiny-glm F32", &m, 9, 1e-5, true);
        model_free(&m);
    }
    if (model_load(&m, "app/demo/glm-demo.gguf", &(err_t){0}) == 0) {
        nextn_vs_reference("demo model (F16, trained NextN head)", &m, 20, 1e-5, true);
        model_free(&m);
    } else {
        CHECK(0, "the demo model app/demo/glm-demo.gguf does not load");
    }
    if (make_synth("tiny-glm", SYNTH_FT_Q4_K_M, 12, &m) == 0) {
        nextn_vs_reference("tiny-glm Q4_K_M", &m, 7, 0.06, false);
        model_free(&m);
    }
    if (make_synth("tiny-dsv2lite", SYNTH_FT_Q8_0, 13, &m) == 0) {
        nextn_vs_reference("tiny-dsv2lite Q8_0 (no q-lora, softmax gating)", &m, 6, 0.06, false);
        model_free(&m);
    }
}

/* Rows in one call, one by one, and after the main cache was rewound and
 * refilled with other tokens then the first ones again: the same bits. */
static void test_nextn_rows_batch_independent(void)
{
    model m;
    if (make_synth("tiny-glm", SYNTH_FT_Q4_K_M, 14, &m) != 0)
        return;
    const uint32_t V = m.cfg.n_vocab, n = 12;
    int32_t tok[12], other[12];
    random_tokens(tok, n, V, 21);
    random_tokens(other, n, V, 22);
    err_t err;
    size_t bytes = (size_t)n * V * sizeof(float);
    float *one = malloc(bytes), *split = malloc(bytes), *again = malloc(bytes);
    cf_state *a = open_cf(&m, n, 64, false, 3, NULL, true), *b = open_cf(&m, n, 3, false, 1, NULL, true);
    if (a && b) {
        CHECK(cf_eval(a, tok, n, 0, NULL, false, &err) == 0, "%s", M(err));
        CHECK(cf_nextn_eval(a, tok, n, 0, NULL, one, true, &err) == 0, "%s", M(err));
        for (uint32_t p = 0; p < n; p += 3)
            CHECK(cf_eval(b, tok + p, n - p < 3 ? n - p : 3, p, NULL, false, &err) == 0, "%s", M(err));
        for (uint32_t p = 0; p < n; p++)
            CHECK(cf_nextn_eval(b, tok + p, 1, p, NULL, split + (size_t)p * V, true, &err) == 0, "%s", M(err));
        CHECK(memcmp(one, split, bytes) == 0, "NextN rows differ between batchings and thread counts");
        CHECK(cf_eval(a, other + 5, n - 5, 5, NULL, false, &err) == 0, "%s", M(err));
        CHECK(cf_nextn_eval(a, other + 5, n - 5, 5, NULL, NULL, false, &err) == 0, "%s", M(err));
        CHECK(cf_eval(a, tok + 5, n - 5, 5, NULL, false, &err) == 0, "%s", M(err));
        CHECK(cf_nextn_eval(a, tok + 5, n - 5, 5, NULL, again + 5 * (size_t)V, true, &err) == 0, "%s", M(err));
        CHECK(memcmp(one + 5 * (size_t)V, again + 5 * (size_t)V, (size_t)(n - 5) * V * sizeof(float)) == 0,
              "NextN rows after a rewind differ from the first computation");
        CHECK(cf_nextn_eval(a, tok, 4, n - 2, NULL, NULL, false, &err) < 0 && strstr(err.msg, "context full"),
              "rows past the context: %s", M(err));
        CHECK(cf_nextn_eval(b, tok, 4, 0, NULL, NULL, false, &err) < 0 && strstr(err.msg, "n_batch"),
              "rows past n_batch: %s", M(err));
    }
    cf_free(a);
    cf_free(b);
    free(one);
    free(split);
    free(again);
    model_free(&m);
}

/* No NextN state without the flag or the block; the engine drafts only
 * where both are there. */
static void test_nextn_absent_costs_nothing(void)
{
    model with, without;
    if (make_synth("tiny-glm", SYNTH_FT_F32, 15, &with) != 0)
        return;
    synth_config c;
    err_t err;
    synth_preset("tiny-glm", &c, &err);
    c.seed = 16;
    char path[512];
    snprintf(path, sizeof path, "%s/plain.gguf", tmpdir);
    synth_options opt = {.n_threads = 1};
    synth_stats st;
    if (synth_write(&c, path, &opt, &st, &err) < 0 || model_load(&without, path, &err) < 0) {
        CHECK(0, "%s", M(err));
        model_free(&with);
        return;
    }
    unlink(path);
    cf_state *s = open_cf(&with, 16, 8, false, 1, NULL, false);
    int32_t t = 1;
    float h[4096];
    if (s) {
        CHECK(!cf_has_nextn(s), "NextN state without the flag");
        CHECK(cf_nextn_eval(s, &t, 1, 0, NULL, NULL, false, &err) < 0 && strstr(err.msg, "NextN"), "%s", M(err));
        CHECK(cf_hidden(s, 0, h, &err) < 0, "hidden states without the flag");
        cf_free(s);
    }
    s = open_cf(&without, 16, 8, false, 1, NULL, true);
    if (s) {
        CHECK(!cf_has_nextn(s), "NextN state on a model without the block");
        cf_free(s);
    }
    engine e;
    engine_params p;
    engine_params_default(&p);
    p.n_ctx = 16;
    p.n_threads = 1;
    p.draft = 2;
    if (engine_open(&e, &cpu_engine_backend, &with, &p, &err) == 0) {
        CHECK(engine_can_draft(&e), "the cpu backend does not draft with a NextN block and --draft 2");
        engine_close(&e);
    }
    p.draft = ENGINE_DRAFT_OFF;
    if (engine_open(&e, &cpu_engine_backend, &with, &p, &err) == 0) {
        CHECK(!engine_can_draft(&e) && !e.tokens, "drafting off still drafts");
        engine_close(&e);
    }
    model_free(&with);
    model_free(&without);
}

int main(void)
{
    n_fx = fixtures_list(fx, FIXTURE_MAX);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-cpu-spec-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("GLMCHAT_CPU_KERNELS");
    RUN(test_verify_equals_single_steps_fixtures);
    RUN(test_verify_equals_single_steps_types);
    RUN(test_verify_equals_single_steps_past_one_chunk);
    RUN(test_nextn_block_matches_reference);
    RUN(test_nextn_rows_batch_independent);
    RUN(test_nextn_absent_costs_nothing);
    rmdir(tmpdir);
    fixtures_free(fx, n_fx);
    TESTS_DONE();
}
