/* test_synth.c: the synthetic-model generator (core/model/synth.c).
 *
 *  - The tiny presets rebuild the fixtures' files byte for byte up to the
 *    tensor data: same header (keys, values, order; tensor names, shapes,
 *    types, offsets) and same file size, for F32, Q8_0, Q4_0 and Q4_K_M.
 *  - The full-size table has the real Q4_0 file's figures.
 *  - Weights, decoded with quant.c (the oracle), are zero-mean with the
 *    target rms in every type; norms ~1, biases small.
 *  - Output does not depend on the thread count; seeds change the data only.
 *  - The router sends different tokens to many different experts.
 */
#include <stdint.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/quant.h"
#include "model/synth.h"
#include "testlib.h"

__attribute__((noinline)) static const char *msg_of(const err_t *e) { return e->msg; }
#define M(e) msg_of(&(e))

static char tmpdir[] = "/tmp/test_synth.XXXXXX";

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static int write_model(synth_config *c, const char *path, int threads, err_t *err)
{
    synth_options opt = {.n_threads = threads};
    synth_stats st;
    return synth_write(c, path, &opt, &st, err);
}

/* ======================================================================
 * Layout: the fixtures' files
 * ====================================================================== */

/* The fixtures' generator arguments (fixture.json -> generator). */
static void fixture_config(const char *which, synth_config *c, uint32_t ftype)
{
    err_t err;
    if (strcmp(which, "tiny-glm-a") == 0) {
        synth_preset("tiny-glm", c, &err);
    } else {
        synth_preset("tiny-dsv2lite", c, &err);
    }
    c->seed = 102;
    c->ftype = ftype;
}

static void check_same_header(const char *which, const char *variant, uint32_t ftype)
{
    char fixture[256];
    snprintf(fixture, sizeof fixture, "tests/data/models/%s/%s.%s.gguf", which, which, variant);
    synth_config c;
    fixture_config(which, &c, ftype);
    err_t err;
    const char *out = tmp_path("fixture-like.gguf");
    CHECK(write_model(&c, out, 2, &err) == 0, "%s", M(err));
    gguf_ctx *a = gguf_open(out, &err), *b = gguf_open(fixture, &err);
    CHECK(a && b, "%s", M(err));
    if (a && b) {
        CHECK(gguf_file_size(a) == gguf_file_size(b), "%s %s: size %llu vs %llu", which, variant,
              (unsigned long long)gguf_file_size(a), (unsigned long long)gguf_file_size(b));
        uint64_t ha = gguf_data_offset(a), hb = gguf_data_offset(b);
        CHECK(ha == hb && memcmp(gguf_file_data(a), gguf_file_data(b), (size_t)ha) == 0,
              "%s %s: headers differ (%llu vs %llu bytes)", which, variant, (unsigned long long)ha,
              (unsigned long long)hb);
        if (ha != hb || memcmp(gguf_file_data(a), gguf_file_data(b), (size_t)ha) != 0) {
            /* Name the first difference: a key, else a tensor. */
            char x[256], y[256];
            for (size_t i = 0; i < gguf_n_kv(a) && i < gguf_n_kv(b); i++) {
                gguf_kv_to_string(a, i, x, sizeof x);
                gguf_kv_to_string(b, i, y, sizeof y);
                if (strcmp(gguf_kv_key(a, i), gguf_kv_key(b, i)) || strcmp(x, y)) {
                    fprintf(stderr, "  first key difference #%zu: %s = %s vs %s = %s\n", i, gguf_kv_key(a, i), x,
                            gguf_kv_key(b, i), y);
                    break;
                }
            }
        }
    }
    gguf_close(a);
    gguf_close(b);
}

static void test_tiny_presets_rebuild_fixture_headers(void)
{
    static const struct {
        const char *variant;
        uint32_t ftype;
    } v[] = {{"f32", SYNTH_FT_F32}, {"q8_0", SYNTH_FT_Q8_0}, {"q4_0", SYNTH_FT_Q4_0}, {"q4_k_m", SYNTH_FT_Q4_K_M}};
    for (size_t i = 0; i < 4; i++) {
        check_same_header("tiny-glm-a", v[i].variant, v[i].ftype);
        check_same_header("tiny-lite-a", v[i].variant, v[i].ftype);
    }
}

/* ======================================================================
 * The full-size table
 * ====================================================================== */

static void census(const synth_table *t, uint64_t bytes[QT_COUNT], uint32_t count[QT_COUNT])
{
    memset(bytes, 0, QT_COUNT * sizeof *bytes);
    memset(count, 0, QT_COUNT * sizeof *count);
    for (size_t i = 0; i < t->n; i++) {
        bytes[t->t[i].type] += t->t[i].bytes;
        count[t->t[i].type]++;
    }
}

static void test_full_size_q4_0_figures(void)
{
    synth_config c;
    err_t err;
    synth_table t;
    CHECK(synth_preset("glm47-flash", &c, &err) == 0, "%s", M(err));
    c.ftype = SYNTH_FT_Q4_0;
    CHECK(synth_build_table(&c, &t, &err) == 0, "%s", M(err));
    uint64_t bytes[QT_COUNT];
    uint32_t count[QT_COUNT];
    census(&t, bytes, count);
    /* The real GLM-4.7-Flash Q4_0 (llama-quantize, no MTP block). */
    CHECK(t.n == 844, "%zu tensors", t.n);
    CHECK(count[QT_Q4_0] == 562 && bytes[QT_Q4_0] == 16661200896ull, "Q4_0: %u, %llu bytes", count[QT_Q4_0],
          (unsigned long long)bytes[QT_Q4_0]);
    CHECK(count[QT_Q6_K] == 1 && bytes[QT_Q6_K] == 260198400ull, "Q6_K: %u, %llu", count[QT_Q6_K],
          (unsigned long long)bytes[QT_Q6_K]);
    CHECK(count[QT_F32] == 281 && bytes[QT_F32] == 25147904ull, "F32: %u, %llu", count[QT_F32],
          (unsigned long long)bytes[QT_F32]);
    CHECK(strcmp(t.t[0].name, "output.weight") == 0 && t.t[0].type == QT_Q6_K, "first tensor %s", t.t[0].name);
    synth_table_free(&t);

    /* Q4_K_M: llama-quantize's mixture (64 experts: attn_output stays Q4_K;
     * attn_k_b rows of 192 fall back to Q5_0; ffn_down by layer). */
    c.ftype = SYNTH_FT_Q4_K_M;
    CHECK(synth_build_table(&c, &t, &err) == 0, "%s", M(err));
    census(&t, bytes, count);
    CHECK(count[QT_Q5_0] == 47, "Q5_0 (attn_k_b) %u", count[QT_Q5_0]);
    /* use_more_bits over 47 layers picks 23 (0-4, 41-46, 7-40 every third):
     * the dense block's ffn_down + 22 x (down_exps, down_shexp) + output. */
    CHECK(count[QT_Q6_K] == 1 + 1 + 22 * 2, "Q6_K %u", count[QT_Q6_K]);
    for (size_t i = 0; i < t.n; i++) {
        const synth_tensor *x = &t.t[i];
        if (strstr(x->name, "attn_output") || strstr(x->name, "ffn_gate_exps") || strstr(x->name, "token_embd"))
            CHECK(x->type == QT_Q4_K, "%s is %s", x->name, quant_type_name(x->type));
        if (strcmp(x->name, "blk.0.ffn_down.weight") == 0 || strcmp(x->name, "blk.46.ffn_down_exps.weight") == 0)
            CHECK(x->type == QT_Q6_K, "%s is %s", x->name, quant_type_name(x->type));
        if (strcmp(x->name, "blk.6.ffn_down_exps.weight") == 0)
            CHECK(x->type == QT_Q4_K, "%s is %s", x->name, quant_type_name(x->type));
    }
    synth_table_free(&t);

    /* Q5_K_M: the same rules over Q5_K (llama-quantize: attn_k_b's rows of
     * 192 fall back to Q5_1; ffn_down Q6_K by use_more_bits, routed and
     * shared alike; the head Q6_K; attn_output and the rest Q5_K). */
    c.ftype = SYNTH_FT_Q5_K_M;
    CHECK(synth_build_table(&c, &t, &err) == 0, "%s", M(err));
    census(&t, bytes, count);
    CHECK(count[QT_Q5_1] == 47, "Q5_1 (attn_k_b) %u", count[QT_Q5_1]);
    CHECK(count[QT_Q6_K] == 1 + 1 + 22 * 2, "Q6_K %u", count[QT_Q6_K]);
    CHECK(count[QT_Q5_K] == 562 - 47 - 1 - 22 * 2, "Q5_K %u", count[QT_Q5_K]);
    for (size_t i = 0; i < t.n; i++) {
        const synth_tensor *x = &t.t[i];
        if (strcmp(x->name, "blk.3.ffn_down_shexp.weight") == 0 || strcmp(x->name, "blk.43.ffn_down_exps.weight") == 0)
            CHECK(x->type == QT_Q6_K, "%s is %s", x->name, quant_type_name(x->type));
        if (strcmp(x->name, "blk.8.ffn_down_exps.weight") == 0 || strstr(x->name, "attn_v_b"))
            CHECK(x->type == QT_Q5_K, "%s is %s", x->name, quant_type_name(x->type));
    }
    synth_table_free(&t);

    /* The dynamic mix (Q4_K_XL): attention Q8_0, shared expert and dense FFN
     * Q6_K, routed gate/up Q4_K with Q5_K in the first and last eighth of
     * the 47 layers (below 47/8 = 5 and from 7*47/8 = 41 on: MoE layers 1-4
     * and 41-46, so 36 of the 46 in Q4_K), routed down Q5_K / Q6_K by
     * use_more_bits, head and embedding Q6_K. */
    c.ftype = SYNTH_FT_Q4_K_XL;
    CHECK(synth_build_table(&c, &t, &err) == 0, "%s", M(err));
    census(&t, bytes, count);
    CHECK(count[QT_Q8_0] == 47 * 6, "Q8_0 (attention) %u", count[QT_Q8_0]);
    CHECK(count[QT_Q4_K] == 2 * 36, "Q4_K %u", count[QT_Q4_K]);
    CHECK(count[QT_F32] == 281, "F32 %u", count[QT_F32]);
    for (size_t i = 0; i < t.n; i++) {
        const synth_tensor *x = &t.t[i];
        uint32_t want = QT_COUNT;
        if (strcmp(x->name, "blk.2.ffn_gate_exps.weight") == 0 || strcmp(x->name, "blk.45.ffn_up_exps.weight") == 0 ||
            strcmp(x->name, "blk.8.ffn_down_exps.weight") == 0)
            want = QT_Q5_K;
        if (strcmp(x->name, "blk.20.ffn_gate_exps.weight") == 0)
            want = QT_Q4_K;
        if (strcmp(x->name, "blk.7.ffn_down_exps.weight") == 0 || strstr(x->name, "_shexp.") ||
            strcmp(x->name, "blk.0.ffn_up.weight") == 0 || strcmp(x->name, "output.weight") == 0)
            want = QT_Q6_K;
        if (strstr(x->name, "attn_k_b") || strstr(x->name, "attn_output"))
            want = QT_Q8_0;
        if (want != QT_COUNT)
            CHECK(x->type == want, "%s is %s, want %s", x->name, quant_type_name(x->type), quant_type_name(want));
    }
    synth_table_free(&t);

    /* With the NextN block: one more MoE block (18 tensors) + 4 nextn ones. */
    c.ftype = SYNTH_FT_Q4_0;
    c.nextn = 1;
    CHECK(synth_build_table(&c, &t, &err) == 0, "%s", M(err));
    CHECK(t.n == 844 + 18 + 4, "%zu tensors with nextn", t.n);
    synth_table_free(&t);
}

/* ======================================================================
 * Weight statistics, through quant.c's decoders
 * ====================================================================== */

/* mean and rms of a decoded tensor */
static void stats(const synth_tensor *t, const void *data, double *mean, double *rms, double *n_out)
{
    uint64_t n = t->ne[0] * t->ne[1] * t->ne[2];
    float *f = malloc(n * sizeof *f);
    uint64_t rows = n / t->ne[0], row_bytes = t->bytes / rows;
    for (uint64_t r = 0; r < rows; r++)
        quant_dequant_row(t->type, (const uint8_t *)data + r * row_bytes, f + r * t->ne[0], t->ne[0]);
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < n; i++) {
        s += f[i];
        s2 += (double)f[i] * f[i];
    }
    *mean = s / (double)n;
    *rms = sqrt(s2 / (double)n);
    *n_out = (double)n;
    free(f);
}

/* Every tensor of a file of the given type.  Tolerances:
 *  - rms within 12% of the target: the scales are drawn from a table over
 *    [0.5, 1.5]x whose second moment is matched exactly, so the deviation is
 *    sampling noise of a few hundred blocks (<5% for our smallest tensors)
 *    plus f16 rounding of the scales and the K-quant mins' rounding (<3%).
 *  - |mean| below 6 standard errors, rms/sqrt(n): the codes are independent
 *    and uniform, and each block's scale sign is random, so a block's shared
 *    offset (e.g. Q4_0's -0.5 d) only adds ~1% to the variance.  A generator
 *    without the random signs is off by 0.7% (Q8_0) to 11% (Q4_0) of the
 *    rms, 6 to 100 standard errors for the demo's expert tensors. */
static void check_type_statistics(uint32_t ftype)
{
    synth_config c;
    err_t err;
    synth_preset("demo", &c, &err);
    c.ftype = ftype;
    c.seed = 7;
    const char *path = tmp_path("stats.gguf");
    CHECK(write_model(&c, path, 2, &err) == 0, "%s", M(err));
    synth_table tab;
    CHECK(synth_build_table(&c, &tab, &err) == 0, "%s", M(err));
    gguf_ctx *ctx = gguf_open(path, &err);
    CHECK(ctx != NULL, "%s", M(err));
    if (!ctx) {
        synth_table_free(&tab);
        return;
    }
    for (size_t i = 0; i < tab.n; i++) {
        const synth_tensor *t = &tab.t[i];
        const gguf_tensor *g = gguf_find_tensor(ctx, t->name);
        if (!g) {
            CHECK(0, "%s missing", t->name);
            continue;
        }
        double mean, rms, n;
        stats(t, g->data, &mean, &rms, &n);
        const quant_traits *qt = quant_traits_of(t->type);
        if (t->kind == SYNTH_WEIGHT) {
            CHECK(fabs(rms / t->rms - 1) < 0.12, "%s (%s): rms %g, target %g", t->name, qt->name, rms,
                  (double)t->rms);
            CHECK(fabs(mean) < 6 * t->rms / sqrt(n), "%s (%s): mean %g for rms %g over %g values", t->name,
                  qt->name, mean, (double)t->rms, n);
        } else {
            /* norms 1 + 0.1 N(0,1), biases SYNTH_BIAS_RMS N(0,1); sd within 25%
             * (the smallest have 16 values: the sd of a sample sd is ~18%) */
            double centre = t->kind == SYNTH_NORM ? 1.0 : 0.0, want = t->kind == SYNTH_NORM ? 0.1 : SYNTH_BIAS_RMS;
            double sd = sqrt(fmax(rms * rms - mean * mean, 0));
            CHECK(fabs(mean - centre) < 6 * want / sqrt(n), "%s: mean %g, expected %g", t->name, mean, centre);
            CHECK(fabs(sd / want - 1) < 0.45, "%s: sd %g, expected %g", t->name, sd, want);
        }
    }
    gguf_close(ctx);
    synth_table_free(&tab);
}

static void test_weights_zero_mean_right_rms(void)
{
    static const uint32_t ftypes[] = {
        SYNTH_FT_F32,    SYNTH_FT_F16,    SYNTH_FT_BF16,      SYNTH_FT_Q8_0,    SYNTH_FT_Q4_0,    SYNTH_FT_Q4_1,
        SYNTH_FT_Q5_0,   SYNTH_FT_Q5_1,   SYNTH_FT_Q4_K_M,    SYNTH_FT_Q5_K_M,  SYNTH_FT_Q6_K,    SYNTH_FT_Q4_K_XL,
        SYNTH_FT_Q2_K,   SYNTH_FT_Q3_K_M, SYNTH_FT_IQ4_XS,    SYNTH_FT_IQ4_NL,  SYNTH_FT_MXFP4_MOE, SYNTH_FT_IQ3_XXS,
        SYNTH_FT_IQ2_XXS, SYNTH_FT_IQ1_S, SYNTH_FT_IQ1_M,     SYNTH_FT_IQ3_S,   SYNTH_FT_IQ2_XS,  SYNTH_FT_IQ2_S,
        SYNTH_FT_Q2_K_XL, SYNTH_FT_Q3_K_XL};
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        check_type_statistics(ftypes[i]);
}

/* ======================================================================
 * Determinism
 * ====================================================================== */

static void test_thread_count_and_seed(void)
{
    synth_config c;
    err_t err;
    synth_preset("demo", &c, &err);
    c.ftype = SYNTH_FT_Q4_K_M;
    c.seed = 5;
    const char *p1 = tmp_path("t1.gguf"), *p3 = tmp_path("t3.gguf"), *ps = tmp_path("seed.gguf");
    CHECK(write_model(&c, p1, 1, &err) == 0, "%s", M(err));
    CHECK(write_model(&c, p3, 3, &err) == 0, "%s", M(err));
    c.seed = 6;
    CHECK(write_model(&c, ps, 2, &err) == 0, "%s", M(err));
    size_t n1, n3, ns;
    uint8_t *a = read_file(p1, &n1), *b = read_file(p3, &n3), *s = read_file(ps, &ns);
    CHECK(a && b && s && n1 == n3 && n1 == ns, "sizes %zu %zu %zu", n1, n3, ns);
    if (a && b && s && n1 == n3 && n1 == ns) {
        CHECK(memcmp(a, b, n1) == 0, "1 thread and 3 threads differ");
        gguf_ctx *ctx = gguf_open(p1, &err);
        size_t hdr = ctx ? (size_t)gguf_data_offset(ctx) : 0;
        CHECK(memcmp(a, s, hdr) == 0, "seed changed the header");
        size_t same = 0;
        for (size_t i = hdr; i < n1; i++)
            same += a[i] == s[i];
        /* Random bytes agree 1 time in 256; zero padding and sign bits add a little. */
        CHECK(same < (n1 - hdr) / 50, "seeds 5 and 6 share %zu of %zu data bytes", same, n1 - hdr);
        gguf_close(ctx);
    }
    free(a);
    free(b);
    free(s);
}

/* ======================================================================
 * Routing: different tokens reach many experts
 * ====================================================================== */

/* Router of MoE layer 1 of the full-size model on 64 token embeddings
 * (generated in memory, no file): sigmoid(W x) + exp_probs_b, top-4.  A
 * biased generator (all-positive weights, say) sends every token to the same
 * few experts; random zero-mean weights reach nearly all 64 (expected
 * 64 * (1 - (60/64)^64) = 63 distinct). */
static void test_router_spreads_tokens(void)
{
    synth_config c;
    err_t err;
    synth_preset("glm47-flash", &c, &err);
    c.ftype = SYNTH_FT_Q4_0;
    synth_table t;
    CHECK(synth_build_table(&c, &t, &err) == 0, "%s", M(err));
    int emb = -1, gate = -1, bias = -1;
    for (size_t i = 0; i < t.n; i++) {
        if (!strcmp(t.t[i].name, "token_embd.weight"))
            emb = (int)i;
        if (!strcmp(t.t[i].name, "blk.1.ffn_gate_inp.weight"))
            gate = (int)i;
        if (!strcmp(t.t[i].name, "blk.1.exp_probs_b.bias"))
            bias = (int)i;
    }
    CHECK(emb >= 0 && gate >= 0 && bias >= 0, "tensors missing");
    if (emb < 0 || gate < 0 || bias < 0) {
        synth_table_free(&t);
        return;
    }
    const uint32_t H = c.hidden, E = c.experts, K = c.experts_used;
    float *w = malloc((size_t)H * E * sizeof *w), *b = malloc(E * sizeof *b), *x = malloc(H * sizeof *x);
    uint8_t *row = malloc(t.t[emb].bytes / t.t[emb].ne[1]);
    synth_fill_blocks(&t.t[gate], c.seed, (uint32_t)gate, 0, (uint64_t)H * E, w);
    synth_fill_blocks(&t.t[bias], c.seed, (uint32_t)bias, 0, E, b);
    int hits[64] = {0};
    uint64_t blocks_per_row = H / QK4_0;
    for (uint32_t tok = 0; tok < 64; tok++) {
        uint64_t id = (uint64_t)tok * 2417 + 11; /* spread over the vocabulary */
        synth_fill_blocks(&t.t[emb], c.seed, (uint32_t)emb, id * blocks_per_row, blocks_per_row, row);
        quant_dequant_row(QT_Q4_0, row, x, H);
        double ss = 0;
        for (uint32_t i = 0; i < H; i++)
            ss += (double)x[i] * x[i];
        float inv = (float)(1.0 / sqrt(ss / H + 1e-5));
        float score[64];
        for (uint32_t e = 0; e < E; e++) {
            double z = 0;
            for (uint32_t i = 0; i < H; i++)
                z += (double)w[(size_t)e * H + i] * x[i] * inv;
            score[e] = (float)(1.0 / (1.0 + exp(-z))) + b[e];
        }
        for (uint32_t k = 0; k < K; k++) {
            uint32_t best = 0;
            for (uint32_t e = 1; e < E; e++)
                if (score[e] > score[best])
                    best = e;
            hits[best]++;
            score[best] = -1e30f;
        }
    }
    int distinct = 0, most = 0;
    for (uint32_t e = 0; e < E; e++) {
        distinct += hits[e] > 0;
        most = hits[e] > most ? hits[e] : most;
    }
    CHECK(distinct >= 56, "64 tokens reach only %d of 64 experts", distinct);
    CHECK(most <= 16, "one expert takes %d of 256 picks", most);
    free(w);
    free(b);
    free(x);
    free(row);
    synth_table_free(&t);
}

/* ======================================================================
 * Configuration errors
 * ====================================================================== */

static void test_config_errors(void)
{
    synth_config c;
    err_t err;
    CHECK(synth_preset("tiny-gpt", &c, &err) < 0 && strstr(err.msg, "unknown preset 'tiny-gpt'"), "%s", M(err));
    CHECK(synth_ftype_from_name("Q4_K") == SYNTH_FT_Q4_K_M && synth_ftype_from_name("q5_k") == SYNTH_FT_Q5_K_M,
          "aliases");
    CHECK(synth_ftype_from_name("Q3_K") == SYNTH_FT_Q3_K_M && synth_ftype_from_name("mxfp4") == SYNTH_FT_MXFP4_MOE &&
              synth_ftype_from_name("UD-Q2_K_XL") == SYNTH_FT_Q2_K_XL,
          "aliases of the low-bit types");
    CHECK(synth_ftype_from_name("Q7_K") < 0 && synth_ftype_from_name("IQ2_M") < 0, "unknown types accepted");
    synth_preset("tiny-glm", &c, &err);
    c.experts_used = 9;
    CHECK(synth_validate(&c, &err) < 0 && strstr(err.msg, "experts-used"), "%s", M(err));
    synth_preset("tiny-glm", &c, &err);
    c.qk_rope = 15;
    CHECK(synth_validate(&c, &err) < 0 && strstr(err.msg, "qk-rope"), "%s", M(err));
    synth_preset("tiny-glm", &c, &err);
    c.vocab = 100;
    CHECK(synth_validate(&c, &err) < 0 && strstr(err.msg, "vocab 100 too small"), "%s", M(err));
    /* A row that no type of the mixture can hold is refused, naming the tensor. */
    synth_preset("tiny-glm", &c, &err);
    c.hidden = 200;
    c.ftype = SYNTH_FT_Q4_0;
    synth_table t;
    CHECK(synth_build_table(&c, &t, &err) < 0 && strstr(err.msg, "row length 200 is not a multiple of the"), "%s",
          M(err));
    /* The output file is removed when writing fails. */
    synth_preset("tiny-glm", &c, &err);
    CHECK(write_model(&c, "/nonexistent/dir/m.gguf", 1, &err) < 0 && strstr(err.msg, "cannot create"), "%s", M(err));
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_tiny_presets_rebuild_fixture_headers);
    RUN(test_full_size_q4_0_figures);
    RUN(test_weights_zero_mean_right_rms);
    RUN(test_thread_count_and_seed);
    RUN(test_router_spreads_tokens);
    RUN(test_config_errors);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    TESTS_DONE();
}
