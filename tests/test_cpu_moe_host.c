/* test_cpu_moe_host.c: one MoE layer's routed experts on the CPU
 * (core/cpu/cpu_moe_host.h) against a float64 reference, and its promises.
 *
 * The reference is the definition the reference backend (core/ref) computes,
 * in float64: every weight row dequantized by core/format's decoders (what
 * core/ref reads), y[t] = sum_k w[t][k] down_e(silu(gate_e x) * up_e x).
 * Weights are synthetic blocks of each type (core/model/synth_blocks.c:
 * random codes and scales, rms 1/sqrt(cols)), activations random normal,
 * routing random distinct experts with random weights.
 *
 * Tolerances (rel-L2 of all of y to the reference):
 *  - F32 / F16 / BF16 weights and the types without an integer kernel read
 *    f32 activations: 1e-5 (f32 sums of a few thousand terms reach ~1e-6);
 *  - block-quantized weights read x and the hidden state quantized to 8 bits
 *    per block (llama.cpp's precision): rounding to amax/127 adds 0.5-0.7 %
 *    noise on Gaussian x (blocks of 32 or 256), more on the hidden state (a
 *    product of two near-Gaussians: its amax reaches ~8x its rms in a block
 *    of 256), so y lands 1-2.3 % from the reference (Q4_K's Q8_K blocks
 *    the farthest); the bound is 4e-2.  A wrong expert, a missing slot or a
 *    wrong weight moves y by tens of percent.
 * Batch independence and thread counts are checked bit for bit. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_moe_host.h"
#include "cpu/cpu_pack.h"
#include "format/quant.h"
#include "model/synth.h"
#include "testlib.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint64_t next_u64(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

static double uniform(void)
{
    return (double)(next_u64() >> 11) * 0x1p-53;
}

static float gauss(void)
{
    double u = uniform(), v = uniform();
    return (float)(sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v));
}

typedef struct {
    uint32_t n_embd, n_ff, n_expert, n_used, n_tok;
} shape;

/* The layer's three expert tensors of `type` (each n_expert matrices). */
typedef struct {
    model_layer L;
    uint8_t *data[3];
} layer_data;

static int make_tensor(mtensor *t, uint8_t **data, uint32_t type, uint64_t cols, uint64_t rows, uint64_t mats,
                       uint32_t index)
{
    uint64_t rb;
    const quant_traits *q = quant_traits_of(type);
    if (!quant_row_bytes(type, cols, &rb))
        return -1;
    *data = malloc(rb * rows * mats);
    if (!*data)
        return -1;
    synth_tensor st = {.type = type, .n_dims = 3, .ne = {cols, rows, mats, 1}, .kind = SYNTH_WEIGHT,
                       .rms = 1.0f / sqrtf((float)cols)};
    synth_fill_blocks(&st, next_u64(), index, 0, cols * rows * mats / q->block_elems, *data);
    *t = (mtensor){.name = "exps", .type = type, .n_dims = 3, .ne = {cols, rows, mats, 1}, .nb1 = rb,
                   .nb2 = rb * rows, .data = *data, .nbytes = rb * rows * mats, .file_offset = UINT64_MAX};
    return 0;
}

static int make_layer(layer_data *d, const shape *s, uint32_t type)
{
    memset(d, 0, sizeof *d);
    d->L.is_moe = true;
    if (make_tensor(&d->L.gate_exps, &d->data[0], type, s->n_embd, s->n_ff, s->n_expert, 1) ||
        make_tensor(&d->L.up_exps, &d->data[1], type, s->n_embd, s->n_ff, s->n_expert, 2) ||
        make_tensor(&d->L.down_exps, &d->data[2], type, s->n_ff, s->n_embd, s->n_expert, 3))
        return -1;
    return 0;
}

static void free_layer(layer_data *d)
{
    for (int i = 0; i < 3; i++)
        free(d->data[i]);
}

/* Random inputs: x, distinct ids per token, positive weights. */
static void make_inputs(const shape *s, float *x, int32_t *ids, float *w)
{
    for (uint64_t i = 0; i < (uint64_t)s->n_tok * s->n_embd; i++)
        x[i] = gauss();
    for (uint32_t t = 0; t < s->n_tok; t++)
        for (uint32_t k = 0; k < s->n_used; k++) {
            int32_t e;
            bool taken;
            do {
                e = (int32_t)(next_u64() % s->n_expert);
                taken = false;
                for (uint32_t j = 0; j < k; j++)
                    taken |= ids[t * s->n_used + j] == e;
            } while (taken);
            ids[t * s->n_used + k] = e;
            w[t * s->n_used + k] = (float)(0.1 + 0.9 * uniform());
        }
}

static double dot_row(const mtensor *t, uint32_t e, uint64_t r, const double *v, float *row)
{
    quant_dequant_row(t->type, (const uint8_t *)mtensor_matrix(t, e) + r * t->nb1, row, t->ne[0]);
    double acc = 0;
    for (uint64_t i = 0; i < t->ne[0]; i++)
        acc += (double)row[i] * v[i];
    return acc;
}

/* The float64 reference of y. */
static void reference(const layer_data *d, const shape *s, const float *x, const int32_t *ids, const float *w,
                      double *y)
{
    const uint64_t H = s->n_embd, F = s->n_ff;
    double *xd = malloc(H * sizeof *xd), *hd = malloc(F * sizeof *hd);
    float *row = malloc((H > F ? H : F) * sizeof *row);
    if (!xd || !hd || !row) {
        CHECK(0, "out of memory");
        goto out;
    }
    memset(y, 0, (uint64_t)s->n_tok * H * sizeof *y);
    for (uint32_t t = 0; t < s->n_tok; t++) {
        for (uint64_t i = 0; i < H; i++)
            xd[i] = x[t * H + i];
        for (uint32_t k = 0; k < s->n_used; k++) {
            uint32_t e = (uint32_t)ids[t * s->n_used + k];
            for (uint64_t r = 0; r < F; r++) {
                double g = dot_row(&d->L.gate_exps, e, r, xd, row), u = dot_row(&d->L.up_exps, e, r, xd, row);
                hd[r] = g / (1.0 + exp(-g)) * u;
            }
            for (uint64_t r = 0; r < H; r++)
                y[t * H + r] += (double)w[t * s->n_used + k] * dot_row(&d->L.down_exps, e, r, hd, row);
        }
    }
out:
    free(xd);
    free(hd);
    free(row);
}

static double rel_l2(const float *got, const double *ref, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = (double)got[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Whether set k computes weights of `type` with f32 activations. */
static bool f32_path(const cpu_kernels *k, uint32_t type)
{
    return cpu_kernels_act(k, type) == CPU_ACT_F32;
}

/* One (kernel set, type, shape) case against the reference; returns the
 * rel-L2 seen, or -1 when it could not run. */
static double check_case(const cpu_kernels *k, uint32_t type, const shape *s)
{
    layer_data d;
    const uint64_t H = s->n_embd, NK = (uint64_t)s->n_tok * s->n_used;
    float *x = malloc((uint64_t)s->n_tok * H * sizeof *x), *w = malloc(NK * sizeof *w);
    float *y = malloc((uint64_t)s->n_tok * H * sizeof *y);
    int32_t *ids = malloc(NK * sizeof *ids);
    double *ref = malloc((uint64_t)s->n_tok * H * sizeof *ref), got = -1;
    err_t err = {0};
    cpu_moe_host *h = NULL;
    if (!x || !w || !y || !ids || !ref || make_layer(&d, s, type)) {
        CHECK(0, "%s: out of memory", quant_type_name(type));
        goto out;
    }
    make_inputs(s, x, ids, w);
    cpu_moe_host_params p = {.n_embd = s->n_embd, .n_ff = s->n_ff, .n_expert = s->n_expert, .n_used = s->n_used,
                             .n_batch = s->n_tok, .n_threads = 3, .kernels = k};
    h = cpu_moe_host_new(&p, &err);
    CHECK(h, "new: %.300s", err.msg);
    if (!h)
        goto out;
    CHECK(cpu_moe_host_eval(h, &d.L, x, ids, w, s->n_tok, y, &err) == 0, "eval: %.300s", err.msg);
    reference(&d, s, x, ids, w, ref);
    got = rel_l2(y, ref, (uint64_t)s->n_tok * H);
    double tol = f32_path(k, type) ? 1e-5 : 4e-2;
    CHECK(got <= tol, "%s %s %ux%u, %u of %u experts, %u tokens: rel-L2 %.3g (tol %.3g)", k->name,
          quant_type_name(type), s->n_embd, s->n_ff, s->n_used, s->n_expert, s->n_tok, got, tol);
out:
    cpu_moe_host_free(h);
    free_layer(&d);
    free(x);
    free(w);
    free(y);
    free(ids);
    free(ref);
    return got;
}

/* The sanitizer run (TEST_QUICK, tests/run.sh), which looks for memory
 * errors in the host code: each type on one of the shapes below, in turn,
 * so that every type and every shape still runs (a third of the time). */
static bool quick_run(void)
{
    const char *q = getenv("TEST_QUICK");
    return q && strcmp(q, "1") == 0;
}

/* Every type the CPU computes, on small shapes: one token (decode), a few,
 * more than a tile (CPU_TILE_TOK) with experts shared by many tokens. */
static void every_type_on(const cpu_kernels *k)
{
    static const shape shapes[] = {
        {256, 256, 4, 2, 1},
        {512, 768, 8, 4, 5},
        {768, 512, 6, 3, 19},
    };
    const size_t n_shapes = sizeof shapes / sizeof *shapes;
    const bool quick = quick_run();
    int n_types = 0;
    for (uint32_t type = 0; type < QT_COUNT; type++) {
        const quant_traits *q = quant_traits_of(type);
        if (!q || !q->can_dequant)
            continue;
        n_types++;
        for (size_t i = 0; i < n_shapes; i++)
            if (!quick || i == (size_t)n_types % n_shapes)
                check_case(k, type, &shapes[i]);
    }
    CHECK(n_types >= 23, "only %d types the CPU computes", n_types);
}

static void test_every_type_best_set(void)
{
    err_t err = {0};
    const cpu_kernels *k = cpu_kernels_best(&err);
    CHECK(k, "%.300s", err.msg);
    if (k)
        every_type_on(k);
}

static void test_every_type_portable_set(void)
{
    every_type_on(cpu_kernels_get(CPU_ISA_PORTABLE));
}

/* GLM-4.7-Flash's widths (hidden 2048, expert 1536), a few types of the
 * published files. */
static void test_glm_shape(void)
{
    static const uint32_t types[] = {QT_Q4_K, QT_Q4_0, QT_Q6_K, QT_Q8_0, QT_IQ4_XS, QT_Q3_K, QT_Q2_K, QT_MXFP4, QT_IQ2_XXS, QT_IQ3_XXS, QT_IQ2_XS,
                                     QT_IQ3_S, QT_IQ2_S, QT_IQ1_S, QT_IQ1_M};
    const shape s = {2048, 1536, 6, 4, 3};
    err_t err = {0};
    const cpu_kernels *k = cpu_kernels_best(&err);
    CHECK(k, "%.300s", err.msg);
    for (size_t i = 0; k && i < sizeof types / sizeof *types; i++)
        check_case(k, types[i], &s);
}

/* A token's y is the same bits alone, in a batch, and with any thread count. */
static void test_batch_and_threads_change_no_bit(void)
{
    const shape s = {512, 512, 8, 4, 13};
    layer_data d;
    const uint64_t H = s.n_embd, NK = (uint64_t)s.n_tok * s.n_used;
    float *x = malloc(s.n_tok * H * sizeof *x), *w = malloc(NK * sizeof *w);
    float *y = malloc(s.n_tok * H * sizeof *y), *y1 = malloc(s.n_tok * H * sizeof *y1);
    int32_t *ids = malloc(NK * sizeof *ids);
    err_t err = {0};
    cpu_moe_host *a = NULL, *b = NULL;
    if (!x || !w || !y || !y1 || !ids || make_layer(&d, &s, QT_Q4_K)) {
        CHECK(0, "out of memory");
        goto out;
    }
    make_inputs(&s, x, ids, w);
    cpu_moe_host_params p = {.n_embd = s.n_embd, .n_ff = s.n_ff, .n_expert = s.n_expert, .n_used = s.n_used,
                             .n_batch = s.n_tok, .n_threads = 4};
    a = cpu_moe_host_new(&p, &err);
    p.n_threads = 1;
    b = cpu_moe_host_new(&p, &err);
    CHECK(a && b, "new: %.300s", err.msg);
    if (!a || !b)
        goto out;
    CHECK(cpu_moe_host_kernels(a) == cpu_moe_host_kernels(b), "two kernel sets");
    CHECK(cpu_moe_host_eval(a, &d.L, x, ids, w, s.n_tok, y, &err) == 0, "%.300s", err.msg);
    for (uint32_t t = 0; t < s.n_tok; t++)
        CHECK(cpu_moe_host_eval(b, &d.L, x + t * H, ids + t * s.n_used, w + t * s.n_used, 1, y1 + t * H, &err) == 0,
              "%.300s", err.msg);
    CHECK(memcmp(y, y1, s.n_tok * H * sizeof *y) == 0, "batched (4 threads) and one by one (1 thread) differ");
out:
    cpu_moe_host_free(a);
    cpu_moe_host_free(b);
    free_layer(&d);
    free(x);
    free(w);
    free(y);
    free(y1);
    free(ids);
}

/* Q4_0, IQ4_NL, Q5_0 and Q8_0 experts are packed (cpu_pack.h) at a layer's first eval on
 * a set with a packed kernel for the type, and give the portable set's
 * bits: the packed kernels form each sum in its order.  The copy's bytes
 * are reported. */
static void packed_is_portable_bits(uint32_t type)
{
    const shape s = {512, 768, 8, 4, 11};
    const uint64_t H = s.n_embd, NK = (uint64_t)s.n_tok * s.n_used;
    layer_data d;
    memset(&d, 0, sizeof d);
    float *x = malloc(s.n_tok * H * sizeof *x), *w = malloc(NK * sizeof *w);
    float *y = malloc(s.n_tok * H * sizeof *y), *yp = malloc(s.n_tok * H * sizeof *yp);
    int32_t *ids = malloc(NK * sizeof *ids);
    err_t err = {0};
    cpu_moe_host *best = NULL, *portable = NULL, *plain = NULL;
    if (!x || !w || !y || !yp || !ids || make_layer(&d, &s, type)) {
        CHECK(0, "out of memory");
        goto out;
    }
    make_inputs(&s, x, ids, w);
    cpu_moe_host_params p = {.n_embd = s.n_embd, .n_ff = s.n_ff, .n_expert = s.n_expert, .n_used = s.n_used,
                             .n_batch = s.n_tok, .n_threads = 3};
    best = cpu_moe_host_new(&p, &err);
    p.kernels = cpu_kernels_get(CPU_ISA_PORTABLE);
    portable = cpu_moe_host_new(&p, &err);
    CHECK(best && portable, "new: %.300s", err.msg);
    if (!best || !portable)
        goto out;
    const bool packs = cpu_moe_host_kernels(best)->type[type].packed != NULL;
    if (!packs)
        printf("# %s has no packed %s kernel: the bits are still the portable ones\n",
               cpu_moe_host_kernels(best)->name, quant_traits_of(type)->name);
    CHECK(cpu_moe_host_packed_bytes(best) == 0, "packed before the first eval");
    CHECK(cpu_moe_host_eval(best, &d.L, x, ids, w, s.n_tok, y, &err) == 0, "%.300s", err.msg);
    CHECK(cpu_moe_host_eval(portable, &d.L, x, ids, w, s.n_tok, yp, &err) == 0, "%.300s", err.msg);
    if (packs) /* 3 tensors of 8 matrices: 768 rows of 16 blocks, 512 rows of 24 */
        CHECK(cpu_moe_host_packed_bytes(best) == 8ull * (2 * 48 * 16 + 32 * 24) * cpu_pack_block_bytes(type),
              "%llu packed bytes",
              (unsigned long long)cpu_moe_host_packed_bytes(best));
    CHECK(cpu_moe_host_packed_bytes(portable) == 0, "the portable set packed");
    CHECK(memcmp(y, yp, s.n_tok * H * sizeof *y) == 0, "%s and portable differ", cpu_moe_host_kernels(best)->name);
    /* a second eval of the layer packs nothing more and gives the same bits */
    uint64_t before = cpu_moe_host_packed_bytes(best);
    CHECK(cpu_moe_host_eval(best, &d.L, x, ids, w, 1, y, &err) == 0, "%.300s", err.msg);
    CHECK(cpu_moe_host_packed_bytes(best) == before, "packed again");
    CHECK(memcmp(y, yp, H * sizeof *y) == 0, "the first token alone differs");
    /* no_pack (the Vulkan core's streamed prompts read the file's pages):
     * no copy, the plain rows */
    p.kernels = NULL;
    p.no_pack = true;
    plain = cpu_moe_host_new(&p, &err);
    CHECK(plain && cpu_moe_host_eval(plain, &d.L, x, ids, w, s.n_tok, y, &err) == 0, "no_pack: %.300s", err.msg);
    CHECK(plain && cpu_moe_host_packed_bytes(plain) == 0, "no_pack: a copy was made");
out:
    cpu_moe_host_free(best);
    cpu_moe_host_free(portable);
    cpu_moe_host_free(plain);
    free_layer(&d);
    free(x);
    free(w);
    free(y);
    free(yp);
    free(ids);
}
static void test_packed_q4_0_is_portable_bits(void) { packed_is_portable_bits(QT_Q4_0); }
static void test_packed_q8_0_is_portable_bits(void) { packed_is_portable_bits(QT_Q8_0); }
static void test_packed_iq4_nl_is_portable_bits(void) { packed_is_portable_bits(QT_IQ4_NL); }
static void test_packed_q5_0_is_portable_bits(void) { packed_is_portable_bits(QT_Q5_0); }

/* The rows of gate and up per work item (any multiple of 32, or the even
 * split) change no bit either: each row is its own dot product, and the
 * hidden rows are prepared for down by whole blocks in a step of its own. */
static void test_gate_rows_change_no_bit(void)
{
    static const uint32_t types[] = {QT_Q4_K, QT_Q8_0, QT_Q4_0};
    static const uint32_t rows[] = {0, 32, 64, 96, 128, 256, 512};
    const shape s = {512, 768, 8, 4, 5};
    const uint64_t H = s.n_embd, NK = (uint64_t)s.n_tok * s.n_used;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        layer_data d;
        memset(&d, 0, sizeof d);
        float *x = malloc(s.n_tok * H * sizeof *x), *w = malloc(NK * sizeof *w);
        float *y0 = malloc(s.n_tok * H * sizeof *y0), *y = malloc(s.n_tok * H * sizeof *y);
        int32_t *ids = malloc(NK * sizeof *ids);
        err_t err = {0};
        if (!x || !w || !y0 || !y || !ids || make_layer(&d, &s, types[ti])) {
            CHECK(0, "out of memory");
        } else {
            make_inputs(&s, x, ids, w);
            for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
                for (uint32_t tok = 1; tok <= s.n_tok; tok += s.n_tok - 1) { /* one token, the batch */
                    cpu_moe_host_params p = {.n_embd = s.n_embd, .n_ff = s.n_ff, .n_expert = s.n_expert,
                                             .n_used = s.n_used, .n_batch = s.n_tok, .n_threads = 3,
                                             .gate_rows = rows[ri]};
                    cpu_moe_host *h = cpu_moe_host_new(&p, &err);
                    CHECK(h, "new: %.300s", err.msg);
                    if (!h)
                        continue;
                    float *out = ri == 0 ? y0 : y;
                    CHECK(cpu_moe_host_eval(h, &d.L, x, ids, w, tok, out, &err) == 0, "%.300s", err.msg);
                    CHECK(ri == 0 || memcmp(y0, y, tok * H * sizeof *y) == 0,
                          "type %u, %u tokens: %u rows per item differ from the even split", types[ti], tok, rows[ri]);
                    cpu_moe_host_free(h);
                }
            }
        }
        free_layer(&d);
        free(x);
        free(w);
        free(y0);
        free(y);
        free(ids);
    }
}

/* Bad input is a one-line error and leaves y alone. */
static void test_bad_input_is_an_error(void)
{
    const shape s = {256, 256, 4, 2, 2};
    layer_data d;
    float x[2 * 256], w[4], y[2 * 256];
    int32_t ids[4];
    err_t err = {0};
    if (make_layer(&d, &s, QT_Q8_0)) {
        CHECK(0, "out of memory");
        free_layer(&d);
        return;
    }
    make_inputs(&s, x, ids, w);
    cpu_moe_host_params p = {.n_embd = 256, .n_ff = 256, .n_expert = 4, .n_used = 2, .n_batch = 2, .n_threads = 2};
    cpu_moe_host *h = cpu_moe_host_new(&p, &err);
    CHECK(h, "new: %.300s", err.msg);
    if (h) {
        for (size_t i = 0; i < 2 * 256; i++)
            y[i] = 7.0f;
        ids[3] = 4;
        CHECK(cpu_moe_host_eval(h, &d.L, x, ids, w, 2, y, &err) != 0 && strstr(err.msg, "expert 4 of 4"),
              "id out of range: '%.300s'", err.msg);
        ids[3] = -1;
        CHECK(cpu_moe_host_eval(h, &d.L, x, ids, w, 2, y, &err) != 0, "negative id accepted");
        ids[3] = 0;
        CHECK(cpu_moe_host_eval(h, &d.L, x, ids, w, 3, y, &err) != 0 && strstr(err.msg, "batch"),
              "3 tokens in a batch of 2: '%.300s'", err.msg);
        model_layer wrong = d.L;
        wrong.down_exps.ne[1] = 128;
        CHECK(cpu_moe_host_eval(h, &wrong, x, ids, w, 2, y, &err) != 0, "a wrong shape accepted");
        CHECK(y[0] == 7.0f && y[511] == 7.0f, "y written on an error");
        CHECK(!strchr(err.msg, '\n'), "error of more than one line");
    }
    cpu_moe_host_free(h);
    p.gate_rows = 48;
    CHECK(!cpu_moe_host_new(&p, &err) && strstr(err.msg, "multiple of 32"), "48 rows per item accepted: '%.300s'",
          err.msg);
    p.gate_rows = 0;
    p.n_used = 5;
    CHECK(!cpu_moe_host_new(&p, &err), "5 of 4 experts accepted");
    free_layer(&d);
}

int main(void)
{
    RUN(test_every_type_best_set);
    RUN(test_every_type_portable_set);
    RUN(test_glm_shape);
    RUN(test_batch_and_threads_change_no_bit);
    RUN(test_gate_rows_change_no_bit);
    RUN(test_packed_q4_0_is_portable_bits);
    RUN(test_packed_q8_0_is_portable_bits);
    RUN(test_packed_iq4_nl_is_portable_bits);
    RUN(test_packed_q5_0_is_portable_bits);
    RUN(test_bad_input_is_an_error);
    TESTS_DONE();
}
