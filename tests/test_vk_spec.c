/* test_vk_spec.c: the Vulkan backend's drafting parts (gpu/vk_spec.c): the
 * NextN block on the device against the CPU reference's (ref_forward.h,
 * itself checked against a float64 oracle in test_spec_nextn.c), and the
 * verify's decisions and cache after a rejection against single-token
 * decodes.
 *
 * The NextN block (tolerances): its rows made from the hidden states the
 * prompt graph kept and from those the decode graph kept (a prompt fed one
 * token a call), then three chained rows from a given h (the reference's
 * previous output on both sides), logits and the last row's output:
 * rel-L2 <= 2e-5 and every argmax, on every weight type: both sides
 * multiply f32 activations by the exactly dequantized weights, only in
 * other orders (0.3-1.7e-6 measured on lavapipe at subgroup 8).
 *
 * The verify (exact): after `depth` context tokens, a step with k = 1..3
 * forced drafts that are the greedy continuation keeps all of them and
 * gives the greedy token after them; a step whose draft m is wrong keeps
 * m drafts and gives the greedy token in its place; the step after that
 * rejection continues the greedy output -- every token compared with
 * single-token decodes (the GPU's own sampler), so any difference in a
 * verified position's logits or in the cache left behind shows.  On the
 * fixtures with a NextN block added (F32 / Q8_0 / Q4_0 / Q4_K_M), the KV
 * cache types in turn (each type on one of the two fixture models: every
 * file opens an engine, seconds on lavapipe; test_cpu_spec.c runs every
 * file), and past one decode attention chunk (depth 300 and 520).
 * t_vk_spec_sg16.sh runs a block case and a deep case again at subgroup
 * size 16.  The sanitizer run (TEST_QUICK) runs each case on one model (below). */
#include <math.h>
#include <unistd.h>

#include "engine/engine.h"
#include "fixtures.h"
#include "model/model.h"
#include "model/synth.h"
#include "model_variants.h"
#include "ref/ref_forward.h"
#include "sample/sampler.h"
#include "spec_testlib.h"
#include "testlib.h"
#include "vk.h"
#include "vk_engine.h"

/* The Vulkan backend itself (not through engine.c), drafting on; `tune`:
 * one --tune setting, or NULL. */
/* tune: a knob ("name=value") or NULL; tune2 a second one or NULL */
static vk_engine *open_vk_tuned2(const model *m, uint32_t n_ctx, uint32_t n_batch, const char *tune,
                                 const char *tune2)
{
    engine_params p;
    engine_params_default(&p);
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.draft = 2;
    const char *tunes[2] = {tune, tune2};
    p.tune = tune ? tunes : NULL;
    p.n_tune = tune ? (tune2 ? 2 : 1) : 0;
    void *impl = NULL;
    err_t err;
    if (vk_engine_backend.create(&impl, m, &p, &err) < 0) {
        CHECK(0, "the Vulkan backend: %s", M(err));
        return NULL;
    }
    return impl;
}

static vk_engine *open_vk_tuned(const model *m, uint32_t n_ctx, uint32_t n_batch, const char *tune)
{
    return open_vk_tuned2(m, n_ctx, n_batch, tune, NULL);
}

static vk_engine *open_vk(const model *m, uint32_t n_ctx, uint32_t n_batch)
{
    return open_vk_tuned(m, n_ctx, n_batch, NULL);
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
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static uint32_t argmax_row(const float *v, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* The Vulkan rows of a prompt of n tokens (kept by the prompt graph with
 * n_batch 64, by the decode graph with n_batch 1), then `chain` rows from
 * the given hs ([chain][n_embd]); logits into b, the last row's output
 * into out.  one_call: the prompt's rows in one call, as a draft after a
 * prompt makes them (the rows before its last only as cache rows, with
 * n_batch 64 a batch at a time: *batched of them), so only the last of
 * them gets logits. */
static void vk_rows(const model *m, uint32_t n_batch, const int32_t *tok, uint32_t n, uint32_t chain, const float *hs,
                    float *b, float *out, bool *coop, bool one_call, uint64_t *batched)
{
    const uint32_t V = m->cfg.n_vocab, H = m->cfg.n_embd;
    /* the float decode path: with integer dot products (idot, on by default
     * where they are fast) each decoded row carries its input's 8-bit
     * rounding (~1e-2 of the logits on these files, as llama.cpp's own
     * q8 activations), which test_vk_matvec bounds kernel by kernel and the
     * fixtures end to end; here the NextN graph itself is held to the
     * float bounds below */
    vk_engine *e = open_vk_tuned(m, n + chain + 1, n_batch, "idot=0");
    if (!e)
        return;
    *coop = e->c.coopmat;
    err_t err;
    CHECK(vk_engine_backend.eval(e, tok, n, 0, NULL, &err) == 0, "%s", M(err));
    if (one_call)
        CHECK(vk_nextn_rows(e, tok, n, 0, NULL, b + (size_t)(n - 1) * V, &err) == 0, "%s", M(err));
    for (uint32_t p = 0; p < n && !one_call; p++)
        CHECK(vk_nextn_rows(e, &tok[p], 1, p, NULL, b + (size_t)p * V, &err) == 0, "%s", M(err));
    for (uint32_t i = 0; i < chain; i++)
        CHECK(vk_nextn_rows(e, &tok[n + i], 1, n + i, hs + (size_t)i * H, b + (size_t)(n + i) * V, &err) == 0,
              "%s", M(err));
    memcpy(out, vk_spec_nextn_out(e), H * sizeof *out);
    *batched = e->prof.nx_batched;
    vk_engine_backend.destroy(e);
}

/* fp32 everywhere: the reference's float64 sums against the device's f32
 * ones over a few layers (lavapipe, and every decode graph) */
#define NEXTN_TOL 2e-5
/* the prompt graph on a device with cooperative matrices multiplies fp16
 * operands (2^-11 relative rounding each): the fixtures' bound for that
 * graph (tests/oracle_lib.sh); the H200 showed 6e-7 (F32 files, no
 * tensor cores) to 1e-3 (run 38) */
#define NEXTN_TOL_FP16 1e-2

static void nextn_vs_reference(const char *what, const model *m, uint32_t n)
{
    const uint32_t V = m->cfg.n_vocab, H = m->cfg.n_embd, chain = 3, rows = n + chain;
    int32_t *tok = malloc(rows * sizeof *tok);
    random_tokens(tok, rows, V, n * 13 + 5);
    rf_params rp = {.n_ctx = rows + 1, .n_batch = 64, .n_threads = 2, .nextn = true};
    err_t err;
    rf_state *r = rf_new(m, &rp, &err);
    CHECK(r != NULL, "rf_new: %s", M(err));
    size_t bytes = (size_t)rows * V * sizeof(float);
    float *a = malloc(bytes), *b = calloc(1, bytes), *hs = malloc((size_t)chain * H * sizeof(float));
    float *ref_out = malloc(H * sizeof(float)), *out = calloc(H, sizeof(float));
    if (r) {
        CHECK(rf_eval(r, tok, n, 0, NULL, false, &err) == 0, "%s", M(err));
        CHECK(rf_nextn_eval(r, tok, n, 0, NULL, a, true, &err) == 0, "%s", M(err));
        for (uint32_t i = 0; i < chain; i++) {
            memcpy(hs + (size_t)i * H, rf_nextn_out(r), H * sizeof(float));
            CHECK(rf_nextn_eval(r, tok + n + i, 1, n + i, hs + (size_t)i * H, a + (size_t)(n + i) * V, true, &err) == 0,
                  "%s", M(err));
        }
        memcpy(ref_out, rf_nextn_out(r), H * sizeof(float));
        /* h kept by the prompt graph, by the decode graph; and the
         * prompt's rows in one call (the cache rows before its last a
         * batch at a time on the prompt graph's kernels, where they fit) */
        static const uint32_t batches[] = {64, 1, 64};
        for (int bi = 0; bi < 3; bi++) {
            memset(b, 0, bytes);
            bool coop = false, one = bi == 2;
            uint64_t batched = 0;
            vk_rows(m, batches[bi], tok, n, chain, hs, b, out, &coop, one, &batched);
            const double tol = coop && batches[bi] > 1 ? NEXTN_TOL_FP16 : NEXTN_TOL;
            uint32_t first = one ? n - 1 : 0; /* one call: logits of its last row only */
            double d = rel_l2(b + (size_t)first * V, a + (size_t)first * V, (uint64_t)(rows - first) * V),
                   dout = rel_l2(out, ref_out, H);
            uint32_t agree = 0;
            for (uint32_t p = first; p < rows; p++)
                agree += argmax_row(a + (size_t)p * V, V) == argmax_row(b + (size_t)p * V, V);
            const char *kept = one ? "prompt graph, the rows in one call" : batches[bi] > 1 ? "prompt graph"
                                                                                             : "decode graph";
            printf("# %s, h kept by the %s: NextN logits vs the reference rel-L2 %.2e, output %.2e, argmax %u/%u "
                   "rows (%u chained; %llu cache rows batched)\n",
                   what, kept, d, dout, agree, rows - first, chain, (unsigned long long)batched);
            CHECK(d <= tol && dout <= tol, "%s (%s): NextN logits rel-L2 %.3g, output %.3g to the reference (bound %g)",
                  what, kept, d, dout, tol);
            CHECK(agree == rows - first, "%s (%s): argmax agrees on %u of %u rows", what, kept, agree, rows - first);
            bool want_batched = one && n - 1 >= 8 && m->cfg.n_expert_used >= 2;
            CHECK(batched == (want_batched ? n - 1 : 0), "%s (%s): %llu cache rows batched, expected %u", what, kept,
                  (unsigned long long)batched, want_batched ? n - 1 : 0);
        }
    }
    rf_free(r);
    free(tok);
    free(a);
    free(b);
    free(hs);
    free(ref_out);
    free(out);
}

/* The sanitizer run (TEST_QUICK, tests/run.sh) looks for memory and
 * undefined-behaviour errors in our host code, which one model of each
 * case reaches: there each case runs its first model only, and the
 * block's fixture case not at all (the reference's pass over a quantised
 * file takes minutes under ASan; the host code is the synthetic case's).
 * TEST_VK_SPEC_ONE=1 runs each case on one model too (t_vk_spec_sg16.sh). */
static bool env_is_1(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

static bool quick(void)
{
    return env_is_1("TEST_QUICK");
}

static bool one_model(void)
{
    return quick() || env_is_1("TEST_VK_SPEC_ONE");
}

/* The fixture files the verify case covers: every weight type once over
 * the two fixture models (fixture i takes the variants v with (v + i)
 * even: F32 and Q4_0 of the first, Q8_0 and Q4_K_M of the second) -- each
 * file opens an engine, seconds on lavapipe, and the verify does not
 * depend on which architecture carries which type (test_cpu_spec.c runs
 * every file on the CPU). */
static bool fixture_file_wanted(int i, int v)
{
    return (v + i) % 2 == 0;
}

/* The block on synthetic models of several weight types and shapes, and
 * on the demo model (a trained head); the sanitizer run: tiny-glm F32. */
static void test_nextn_block_matches_reference(void)
{
    model m;
    if (make_synth("tiny-glm", SYNTH_FT_F32, 11, &m) == 0) {
        nextn_vs_reference("tiny-glm F32", &m, 9);
        model_free(&m);
    }
    if (quick())
        return;
    if (model_load(&m, "app/demo/glm-demo.gguf", &(err_t){0}) == 0) {
        nextn_vs_reference("demo model (F16, trained NextN head)", &m, 20);
        model_free(&m);
    } else {
        CHECK(0, "the demo model app/demo/glm-demo.gguf does not load");
    }
    if (make_synth("tiny-glm", SYNTH_FT_Q4_K_M, 12, &m) == 0) {
        nextn_vs_reference("tiny-glm Q4_K_M", &m, 10);
        model_free(&m);
    }
    if (make_synth("tiny-dsv2lite", SYNTH_FT_Q8_0, 13, &m) == 0) {
        nextn_vs_reference("tiny-dsv2lite Q8_0 (no q-lora, softmax gating)", &m, 6);
        model_free(&m);
    }
}

/* The block on the fixtures' shapes: a quantised file of each, the last of
 * the first fixture (Q4_K_M) and the one before of the second (Q4_0, a
 * type the synthetic models above leave out). */
static void test_nextn_block_matches_reference_fixtures(void)
{
    CHECK(n_fx > 0, "no fixture models under %s", FIXTURE_ROOT);
    for (int i = 0; i < n_fx; i++)
        for (int v = 0; v < fx[i].n_variants; v++) {
            model m;
            if (v != fx[i].n_variants - 1 - i % 2 || load_fixture_nextn(&fx[i], fx[i].variants[v], &m) < 0)
                continue;
            char what[128];
            snprintf(what, sizeof what, "%s %s", fx[i].name, fx[i].variants[v]);
            nextn_vs_reference(what, &m, 8);
            model_free(&m);
            if (one_model())
                return;
        }
}

/* ---- the verify: its decisions and the cache after a rejection ----------------------------- */

#define N_GREEDY 8 /* the most a case needs: 1 + 3 + 3 + 1 */

/* engine e after `depth` tokens of ctx: g[0..N_GREEDY) the greedy tokens
 * after it by single-token decodes (g[0] from the prompt's eval). */
static int greedy_singles(engine *e, sampler *smp, const int32_t *ctx, uint32_t depth, int32_t *g)
{
    err_t err;
    sampler_request rq;
    engine_rewind(e, 0);
    sampler_reset(smp);
    for (uint32_t i = 0; i < depth; i++)
        sampler_accept(smp, ctx[i]);
    sampler_prepare(smp, &rq);
    int32_t t = -1;
    engine_output o = {.sample = &rq, .token = &t};
    for (uint32_t p = 0; p < depth; p += 64) {
        uint32_t n = depth - p < 64 ? depth - p : 64;
        if (engine_eval(e, ctx + p, n, p + n == depth ? &o : NULL, &err) != 0) {
            CHECK(0, "%s", M(err));
            return -1;
        }
    }
    for (uint32_t i = 0; i < N_GREEDY; i++) {
        g[i] = t;
        sampler_accept(smp, t);
        sampler_prepare(smp, &rq);
        if (i + 1 < N_GREEDY && engine_eval(e, &g[i], 1, &o, &err) != 0) {
            CHECK(0, "%s", M(err));
            return -1;
        }
    }
    return 0;
}

/* Back to `depth` with g[0] the token for position depth (the sampler's
 * window as it was there). */
static void back_to(engine *e, sampler *smp, const int32_t *ctx, uint32_t depth, int32_t g0)
{
    engine_rewind(e, depth);
    sampler_reset(smp);
    for (uint32_t i = 0; i < depth; i++)
        sampler_accept(smp, ctx[i]);
    sampler_accept(smp, g0);
}

/* One step of k forced drafts from `last` (the token for position n_past):
 * the tokens it gives must be want[0..n_want) and n_past move by n_want. */
static int step_gives(const char *what, engine *e, sampler *smp, int32_t last, uint32_t k, const int32_t *forced,
                      const int32_t *want, uint32_t n_want)
{
    int32_t out[ENGINE_MAX_DRAFT + 1];
    uint32_t ng = 0, before = e->n_past;
    err_t err;
    if (engine_spec_step(e, smp, last, k, forced, out, &ng, &err) != 0) {
        CHECK(0, "%s: %s", what, M(err));
        return 1;
    }
    for (uint32_t i = 0; i < ng; i++)
        sampler_accept(smp, out[i]);
    bool same = ng == n_want && memcmp(out, want, n_want * sizeof *out) == 0 && e->n_past == before + n_want;
    CHECK(same, "%s: %u tokens (want %u), first %d (want %d), n_past %u (want %u)", what, ng, n_want, out[0],
          want[0], e->n_past, before + n_want);
    return same ? 0 : 1;
}

/* After `depth` tokens: for k = 1..3, forced drafts all kept; each draft
 * m wrong in turn: m kept, then the next step from the cache the
 * rejection left continues the greedy output.  Returns the failures. */
static int verify_vs_singles(const char *what, const model *m, bool kv_f16, uint32_t depth)
{
    engine e;
    engine_params p;
    engine_params_default(&p);
    p.n_ctx = depth + N_GREEDY + 4;
    p.n_batch = 64;
    p.kv = kv_f16 ? KV_F16 : KV_F32;
    p.draft = 3;
    err_t err;
    if (engine_open(&e, &vk_engine_backend, m, &p, &err) < 0) {
        CHECK(0, "engine_open: %s", M(err));
        return 1;
    }
    CHECK(engine_can_draft(&e), "%s: the Vulkan backend does not draft", what);
    sampler_params sp;
    sampler_params_default(&sp);
    sp.temp = 0;
    sampler *smp = sampler_new(&sp, m->cfg.n_vocab);
    int32_t *ctx = malloc(depth * sizeof *ctx), g[N_GREEDY];
    random_tokens(ctx, depth, m->cfg.n_vocab, depth * 7 + 1);
    int bad = greedy_singles(&e, smp, ctx, depth, g) ? 1 : 0;
    char name[200];
    for (uint32_t k = 1; k <= 3 && !bad; k++) {
        snprintf(name, sizeof name, "%s, depth %u, KV %s, k=%u all kept", what, depth, kv_f16 ? "f16" : "f32", k);
        back_to(&e, smp, ctx, depth, g[0]);
        bad += step_gives(name, &e, smp, g[0], k, &g[1], &g[1], k + 1);
        for (uint32_t wrong = 0; wrong < k; wrong++) {
            int32_t forced[3];
            memcpy(forced, &g[1], k * sizeof *forced);
            forced[wrong] = (g[1 + wrong] + 1) % (int32_t)m->cfg.n_vocab;
            snprintf(name, sizeof name, "%s, depth %u, KV %s, k=%u draft %u wrong", what, depth,
                     kv_f16 ? "f16" : "f32", k, wrong + 1);
            back_to(&e, smp, ctx, depth, g[0]);
            bad += step_gives(name, &e, smp, g[0], k, forced, &g[1], wrong + 1);
            /* from the cache the rejection left: the greedy continuation */
            uint32_t have = wrong + 2; /* g[0..have) given; k more drafts and the token after them */
            snprintf(name, sizeof name, "%s, depth %u, KV %s, k=%u after draft %u was rejected", what, depth,
                     kv_f16 ? "f16" : "f32", k, wrong + 1);
            bad += step_gives(name, &e, smp, g[have - 1], k, &g[have], &g[have], k + 1);
        }
    }
    free(ctx);
    sampler_free(smp);
    engine_close(&e);
    return bad;
}

static void test_verify_equals_single_decodes_fixtures(void)
{
    CHECK(n_fx > 0, "no fixture models under %s", FIXTURE_ROOT);
    int runs = 0;
    for (int i = 0; i < n_fx && !(one_model() && runs); i++)
        for (int v = 0; v < fx[i].n_variants && !(one_model() && runs); v++) {
            model m;
            if (!fixture_file_wanted(i, v) || load_fixture_nextn(&fx[i], fx[i].variants[v], &m) < 0)
                continue;
            char what[128];
            snprintf(what, sizeof what, "%s %s", fx[i].name, fx[i].variants[v]);
            verify_vs_singles(what, &m, runs % 2 == 1, 9); /* the KV types in turn */
            runs++;
            model_free(&m);
        }
    printf("# %d (fixture, type) cases, k = 1..3, KV f32 and f16 in turn\n", runs);
}

/* Past one decode attention chunk: its partials over several chunks (the
 * last file of each fixture; the sanitizer run: the first fixture's, one
 * depth). */
static void test_verify_equals_single_decodes_past_one_chunk(void)
{
    for (int i = 0; i < n_fx && !(one_model() && i > 0); i++) {
        model m;
        const char *var = fx[i].variants[fx[i].n_variants - 1];
        if (load_fixture_nextn(&fx[i], var, &m) < 0)
            continue;
        char what[128];
        snprintf(what, sizeof what, "%s %s", fx[i].name, var);
        if (!one_model())
            verify_vs_singles(what, &m, false, 300);
        verify_vs_singles(what, &m, true, 520);
        model_free(&m);
    }
}

/* ---- the verify program's columns -----------------------------------------------------------
 * The verify program (vk_forward.c's VK_PROGRAM_VERIFY: n tokens through
 * the decode graph at once, each on its own slots and params words) against
 * the decode graph once per token, on the same engine and the same cache
 * rows: every logit bit for bit (memcmp; exact by construction -- each
 * column runs the decode's own calls -- so any slot, offset or position a
 * column takes from another shows), for n = 2..VK_VCOLS, random tokens, at
 * `span` consecutive positions from `depth` on (chunk and tile boundaries
 * of the decode attention fall between columns: attn_fd's early loads once
 * read a row a column before had not yet written, run 53), the program's
 * submits counted so that a fall-back to single decodes fails.  Its steps
 * are joined as the decode's are: by counters on lavapipe and NVIDIA
 * (checked: some), in words of its own.  `stall` 1: every wait gives up
 * (tune dep_stall), and the verify falls back to barriers -- checked, with
 * the same bits; 2: the first give-up only, and a submit later the
 * counters are tried again (sync_retry 1) and hold -- checked: one give-up,
 * the counters back, the same bits before, between and after. */
static int columns_vs_singles(const char *what, const model *m, uint32_t depth, uint32_t span, int stall,
                              const char *knob)
{
    const uint32_t V = m->cfg.n_vocab;
    const char *tune = getenv("TEST_VK_SPEC_TUNE"); /* (with TEST_VK_SPEC_FILE: a knob to compare) */
    if (stall)
        knob = stall == 1 ? "dep_stall=1" : "dep_stall=2";
    else if (tune && *tune)
        knob = tune;
    vk_engine *e = open_vk_tuned2(m, depth + span + VK_VCOLS + 1, 64, knob, stall == 2 ? "sync_retry=1" : NULL);
    if (!e)
        return 1;
    uint32_t links = e->rec.verify[2].prog.n_link;
    CHECK(links > 0 || !e->rec.sync.device_known, "%s: the verify's steps are all barriers on a device whose "
                                                  "decode takes counters", what);
    int32_t *ctx = malloc(depth * sizeof *ctx), tok[VK_VCOLS];
    float *a = malloc((size_t)VK_VCOLS * V * sizeof *a), *b = malloc((size_t)VK_VCOLS * V * sizeof *b);
    random_tokens(ctx, depth, V, depth * 3 + 2);
    err_t err;
    int bad = 0;
    if (vk_engine_backend.eval(e, ctx, depth, 0, NULL, &err) != 0) {
        CHECK(0, "%s: the prompt: %s", what, M(err));
        bad = 1;
    }
    /* at each position: both ways, the single decodes last (their rows
     * stay), then the next position after the first column's token */
    for (uint32_t pos = depth; pos < depth + span && !bad; pos++)
        for (uint32_t n = 2; n <= VK_VCOLS && !bad; n++) {
            random_tokens(tok, n, V, n * 31 + pos);
            uint64_t before = e->prof.verified;
            bool ok = vk_eval_positions(e, tok, n, pos, a, true, &err) == 0 &&
                      vk_eval_positions(e, tok, n, pos, b, false, &err) == 0;
            CHECK(ok, "%s: %s", what, M(err));
            bool used = e->prof.verified == before + 1;
            uint32_t differ = 0, first = 0;
            for (uint64_t i = (uint64_t)n * V; ok && i-- > 0;)
                if (memcmp(&a[i], &b[i], sizeof *a) != 0) {
                    differ++;
                    first = (uint32_t)(i / V);
                }
            CHECK(ok && used && differ == 0,
                  "%s, position %u, %u columns: %u logits differ from single decodes (first in column %u)%s", what,
                  pos, n, differ, first, used ? "" : "; the verify program did not run");
            bad += !(ok && used && differ == 0);
            if (n == VK_VCOLS) /* the next position follows tok[0] */
                CHECK(vk_eval_positions(e, tok, 1, pos, b, false, &err) == 0, "%s: %s", what, M(err));
        }
    if (stall == 1) {
        CHECK(e->rec.sync.gave_up && e->rec.verify[2].prog.n_link == 0,
              "%s: every wait gave up, yet the verify kept its counters", what);
    } else if (stall == 2 && e->rec.sync.device_known) {
        CHECK(!e->rec.sync.gave_up && e->prof.give_ups == 1 && e->rec.verify[2].prog.n_link == links,
              "%s: after one give-up and a retry: %s, %u give-ups, %u of %u links", what,
              e->rec.sync.gave_up ? "on barriers" : "on counters", e->prof.give_ups, e->rec.verify[2].prog.n_link,
              links);
    }
    if (!bad)
        printf("# %s, positions %u..%u%s: the verify's 2..%u columns (%u steps joined by counters) bit for bit the "
               "single decodes (%s)\n",
               what, depth, depth + span - 1,
               stall == 1 ? ", every wait giving up" : stall == 2 ? ", a give-up and the counters again" : "", VK_VCOLS,
               links,
               e->c.idot ? "the device has integer dot products" : "no integer dot products on this device");
    free(ctx);
    free(a);
    free(b);
    vk_engine_backend.destroy(e);
    return bad;
}

/* Synthetic models of several types and layouts (tiny-dsv2lite: no q
 * compression, softmax gating, a dense first layer), and a fixture file
 * past one decode attention chunk (its partials over several chunks, each
 * column its own count). */
static void test_verify_columns_equal_single_decodes(void)
{
    model m;
    /* a file of one's own (a full-size one on a GPU): TEST_VK_SPEC_FILE,
     * 40 positions from TEST_VK_SPEC_DEPTH (default 1) on */
    const char *own = getenv("TEST_VK_SPEC_FILE");
    if (own && *own) {
        err_t err;
        const char *d = getenv("TEST_VK_SPEC_DEPTH");
        if (model_load(&m, own, &err) == 0) {
            columns_vs_singles(own, &m, d ? (uint32_t)atoi(d) : 1, 40, 0, NULL);
            model_free(&m);
        } else {
            CHECK(0, "%s: %s", own, M(err));
        }
        return;
    }
    if (make_synth("tiny-glm", SYNTH_FT_F32, 21, &m) == 0) {
        columns_vs_singles("tiny-glm F32", &m, 1, 40, 0, NULL);
        columns_vs_singles("tiny-glm F32", &m, 5, 1, 1, NULL);
        columns_vs_singles("tiny-glm F32", &m, 5, 2, 2, NULL);
        model_free(&m);
    }
    if (quick())
        return;
    if (make_synth("tiny-glm", SYNTH_FT_Q4_K_M, 22, &m) == 0) {
        /* both decode matvec paths: the decode's tagged q_a + kv_a, q_b and
         * k_b (mv_xs_ll) and a column's untagged ones (mv_xs) read their
         * input as floats or as 8-bit integers; the tagged ones once kept
         * the floats with integer dot products on (run 58) */
        columns_vs_singles("tiny-glm Q4_K_M, float matvecs", &m, 17, 4, 0, "idot=0");
        columns_vs_singles("tiny-glm Q4_K_M, integer dot products where the device has them", &m, 17, 20, 0,
                           "idot=2");
        model_free(&m);
    }
    if (make_synth("tiny-dsv2lite", SYNTH_FT_Q8_0, 23, &m) == 0) {
        columns_vs_singles("tiny-dsv2lite Q8_0", &m, 9, 4, 0, NULL);
        model_free(&m);
    }
    for (int i = 0; i < n_fx && !(one_model() && i > 0); i++) {
        const char *var = fx[i].variants[fx[i].n_variants - 1];
        if (load_fixture_nextn(&fx[i], var, &m) < 0)
            continue;
        char what[128];
        snprintf(what, sizeof what, "%s %s", fx[i].name, var);
        columns_vs_singles(what, &m, 300, 4, 0, NULL);
        model_free(&m);
    }
}

/* A draft call's rows before its last (the tokens the verify kept) run the
 * NextN block up to its cache row alone (VK_PROGRAM_NEXTN_KV): what the
 * rows after them read must be the bits the whole rows leave.  The same
 * prompt's rows made in one call (n rows: n - 1 cache rows alone, then a
 * whole one) and one row a call (every row whole), then three chained
 * rows from the same given hs: the last catch-up row's logits, the chained
 * rows' logits (each attends the cache rows before it) and the last
 * output, memcmp. */
static void catch_up_vs_single_rows(const char *what, const model *m, uint32_t n)
{
    const uint32_t V = m->cfg.n_vocab, H = m->cfg.n_embd, chain = 3, rows = 1 + chain;
    int32_t *tok = malloc((n + chain) * sizeof *tok);
    random_tokens(tok, n + chain, V, n * 7 + 3);
    float *hs = malloc((size_t)chain * H * sizeof *hs);
    uint64_t x = 99;
    for (uint32_t i = 0; i < chain * H; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        hs[i] = (float)((double)(x >> 40) / (double)(1u << 24) - 0.5) * 4.0f;
    }
    float *got[2] = {malloc((size_t)rows * V * sizeof(float)), malloc((size_t)rows * V * sizeof(float))};
    float *out[2] = {malloc(H * sizeof(float)), malloc(H * sizeof(float))};
    err_t err;
    for (int one = 0; one < 2; one++) {
        memset(got[one], 0, (size_t)rows * V * sizeof(float));
        vk_engine *e = open_vk(m, n + chain + 1, 1);
        if (!e)
            break;
        CHECK(vk_engine_backend.eval(e, tok, n, 0, NULL, &err) == 0, "%s", M(err));
        if (one)
            for (uint32_t p = 0; p < n; p++)
                CHECK(vk_nextn_rows(e, &tok[p], 1, p, NULL, got[one], &err) == 0, "%s", M(err));
        else
            CHECK(vk_nextn_rows(e, tok, n, 0, NULL, got[one], &err) == 0, "%s", M(err));
        for (uint32_t i = 0; i < chain; i++)
            CHECK(vk_nextn_rows(e, &tok[n + i], 1, n + i, hs + (size_t)i * H, got[one] + (size_t)(1 + i) * V,
                                &err) == 0,
                  "%s", M(err));
        memcpy(out[one], vk_spec_nextn_out(e), H * sizeof(float));
        vk_engine_backend.destroy(e);
    }
    size_t differ = 0;
    for (size_t i = 0; i < (size_t)rows * V; i++)
        differ += memcmp(&got[0][i], &got[1][i], sizeof(float)) != 0;
    for (size_t i = 0; i < H; i++)
        differ += memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0;
    printf("# %s: %u rows in one call against one a call, then %u chained: %zu values differ\n", what, n, chain,
           differ);
    CHECK(differ == 0, "%s: %zu of %zu logits and outputs differ (the cache rows alone against whole rows)", what,
          differ, (size_t)rows * V + H);
    free(tok);
    free(hs);
    for (int i = 0; i < 2; i++) {
        free(got[i]);
        free(out[i]);
    }
}

static void test_nextn_catch_up_rows_equal_whole_rows(void)
{
    model m;
    if (make_synth("tiny-glm", SYNTH_FT_Q4_K_M, 12, &m) == 0) {
        catch_up_vs_single_rows("tiny-glm Q4_K_M", &m, 5);
        model_free(&m);
    }
    if (quick())
        return;
    if (make_synth("tiny-dsv2lite", SYNTH_FT_Q8_0, 13, &m) == 0) {
        catch_up_vs_single_rows("tiny-dsv2lite Q8_0 (no q-lora)", &m, 4);
        model_free(&m);
    }
}

/* No NextN state without drafting, nor with auto where it does not pay. */
static void test_nextn_absent_costs_nothing(void)
{
    model with;
    if (make_synth("tiny-glm", SYNTH_FT_Q8_0, 15, &with) != 0)
        return;
    engine e;
    engine_params p;
    engine_params_default(&p);
    p.n_ctx = 32;
    p.draft = ENGINE_DRAFT_OFF;
    err_t err;
    if (engine_open(&e, &vk_engine_backend, &with, &p, &err) == 0) {
        vk_engine *v = e.impl;
        CHECK(!engine_can_draft(&e) && !v->spec && !v->b.hid.size && !v->w.has_nextn,
              "drafting off still keeps NextN state");
        int32_t t = 1;
        CHECK(vk_engine_backend.draft(e.impl, &t, 1, 0, &(engine_draft_req){0}, &err) < 0 && strstr(err.msg, "NextN"),
              "a draft without the state: %s", M(err));
        engine_close(&e);
    } else {
        CHECK(0, "%s", M(err));
    }
    /* auto, as `info`'s placement passes it: no state while auto does not
     * draft here (draft_pays) */
    p.draft = ENGINE_DRAFT_AUTO;
    void *impl = NULL;
    if (vk_engine_backend.create(&impl, &with, &p, &err) == 0) {
        vk_engine *v = impl;
        CHECK(v->nextn == vk_engine_backend.draft_pays, "auto: NextN state %d, draft_pays %d", v->nextn,
              vk_engine_backend.draft_pays);
        vk_engine_backend.destroy(impl);
    } else {
        CHECK(0, "%s", M(err));
    }
    model_free(&with);
}

int main(void)
{
    n_fx = fixtures_list(fx, FIXTURE_MAX);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-vk-spec-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    vk_engine *probe = NULL;
    {
        model m;
        if (make_synth("tiny-glm", SYNTH_FT_F32, 1, &m) == 0) {
            probe = open_vk(&m, 16, 8);
            if (probe) {
                printf("# device: %s\n", vk_engine_backend.describe(probe));
                vk_engine_backend.destroy(probe);
            }
            model_free(&m);
        }
    }
    RUN(test_nextn_block_matches_reference);
    if (!quick())
        RUN(test_nextn_block_matches_reference_fixtures);
    RUN(test_verify_columns_equal_single_decodes);
    RUN(test_verify_equals_single_decodes_fixtures);
    RUN(test_verify_equals_single_decodes_past_one_chunk);
    RUN(test_nextn_catch_up_rows_equal_whole_rows);
    RUN(test_nextn_absent_costs_nothing);
    rmdir(tmpdir);
    fixtures_free(fx, n_fx);
    TESTS_DONE();
}
