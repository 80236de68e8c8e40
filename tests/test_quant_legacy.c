/* test_quant_legacy.c: the legacy formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 * (core/format/quant.c), and agreement with llama-quantize's fixture files.
 *
 * What is checked, and against what:
 *  - known-value blocks: bytes assembled bit by bit from the layout in
 *    ggml-common.h (tests/quant_layout.h, independently of core/'s
 *    decoders), decoded and compared with values computed from the levels;
 *    then random bytes in every field;
 *  - round trips on random data of several sizes and distributions: every
 *    element within the bound its format guarantees (quant_layout.h);
 *  - the quantizers' bytes against ggml's on the reference inputs
 *    (quant_testlib.h);
 *  - agreement with llama-quantize on the fixture models: requantizing each
 *    tensor of the .f32.gguf reproduces the stored bytes of the
 *    .q8_0/.q4_0/.q4_k_m.gguf files exactly (legacy and K-quant tensors
 *    alike), and the stored values are within the type's error bound of the
 *    F32 values (files read with core/format/gguf.h).
 */
#include "format/gguf.h"
#include "quant_layout.h"

static const uint32_t legacy_types[] = {QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q8_0};
#define N_LEGACY (sizeof legacy_types / sizeof legacy_types[0])

/* ======================================================================
 * Known-value and random blocks
 * ====================================================================== */

static void test_known_q4_0(void)
{
    uint8_t b[18] = {0};
    set_half(b, 0x3800); /* 0.5 */
    for (int e = 0; e < 32; e++)
        put_level(QT_Q4_0, b, e, e < 16 ? e : 31 - e);
    /* literal bytes: qs[j] = j | (15-j) << 4 */
    CHECK(b[2] == 0xf0 && b[3] == 0xe1 && b[17] == 0x0f, "layout bytes %02x %02x %02x", b[2], b[3], b[17]);
    float y[32];
    quant_dequant_row(QT_Q4_0, b, y, 32);
    CHECK(y[0] == -4.0f && y[8] == 0.0f && y[15] == 3.5f, "first half %g %g %g", y[0], y[8], y[15]);
    CHECK(y[16] == 3.5f && y[31] == -4.0f, "second half %g %g", y[16], y[31]);
    check_block_decodes(QT_Q4_0, b, "ramp");
}

static void test_known_q4_1(void)
{
    uint8_t b[20] = {0};
    set_half(b, 0x3c00);     /* d = 1 */
    set_half(b + 2, 0xc400); /* m = -4 */
    for (int e = 0; e < 32; e++)
        put_level(QT_Q4_1, b, e, (e * 5) % 16);
    float y[32];
    quant_dequant_row(QT_Q4_1, b, y, 32);
    CHECK(y[0] == -4.0f && y[1] == 1.0f && y[3] == 11.0f && y[16] == -4.0f, "%g %g %g %g", y[0],
          y[1], y[3], y[16]);
    check_block_decodes(QT_Q4_1, b, "pattern");
}

static void test_known_q5(void)
{
    uint8_t b[22] = {0};
    set_half(b, 0x4000); /* d = 2 */
    for (int e = 0; e < 32; e++)
        put_level(QT_Q5_0, b, e, (e * 7 + 3) % 32);
    /* element 0: level 3 -> (3-16)*2; element 31: level (217+3)%32 = 28 */
    float y[32];
    quant_dequant_row(QT_Q5_0, b, y, 32);
    CHECK(y[0] == -26.0f && y[31] == 24.0f, "Q5_0 %g %g", y[0], y[31]);
    check_block_decodes(QT_Q5_0, b, "pattern");

    /* only the fifth bit of element 31 set: qh's bit 31 */
    uint8_t c[24] = {0};
    set_half(c, 0x3c00);
    set_half(c + 2, 0x3800); /* m = 0.5 */
    put_level(QT_Q5_1, c, 31, 16);
    CHECK(c[Q5_1_QH + 3] == 0x80, "qh byte 3 = %02x", c[Q5_1_QH + 3]);
    quant_dequant_row(QT_Q5_1, c, y, 32);
    CHECK(y[31] == 16.5f && y[30] == 0.5f && y[15] == 0.5f, "Q5_1 %g %g %g", y[31], y[30], y[15]);
    for (int e = 0; e < 32; e++)
        put_level(QT_Q5_1, c, e, (e * 11) % 32);
    check_block_decodes(QT_Q5_1, c, "pattern");
}

static void test_known_q8_0(void)
{
    uint8_t b[34] = {0};
    set_half(b, 0x2e66); /* 0.0999755859375 */
    for (int e = 0; e < 32; e++)
        put_level(QT_Q8_0, b, e, (uint8_t)(e * 8 - 128));
    float y[32];
    quant_dequant_row(QT_Q8_0, b, y, 32);
    CHECK(y[0] == -128 * 0.0999755859375f && y[16] == 0.0f && y[31] == 120 * 0.0999755859375f,
          "%g %g %g", y[0], y[16], y[31]);
    check_block_decodes(QT_Q8_0, b, "ramp");
}

static void test_random_blocks_decode(void)
{
    rng_seed(5);
    for (size_t t = 0; t < N_LEGACY; t++) {
        for (int rep = 0; rep < 200; rep++) {
            uint8_t b[256];
            random_block(legacy_types[t], b);
            check_block_decodes(legacy_types[t], b, "random bytes");
        }
    }
}

/* ======================================================================
 * Quantizers
 * ====================================================================== */

/* Relative RMS error ceilings on N(0,1) data: about 1.25-2x what these
 * formats reach on Gaussian data (a guard against a quantizer that is
 * silently worse, e.g. a broken scale search, which the per-element bounds
 * alone would not notice).  Measured values are printed. */
static double rms_ceiling(uint32_t type)
{
    switch (type) {
    case QT_Q8_0: return 0.008;
    case QT_Q5_0: case QT_Q5_1: return 0.05;
    default: return 0.11; /* 4-bit */
    }
}

static void test_roundtrip_bounds(void)
{
    rng_seed(21);
    for (size_t ti = 0; ti < N_LEGACY; ti++) {
        uint32_t type = legacy_types[ti];
        bound_stats s = {0};
        double gauss_rms = roundtrip_sweep(type, check_block_bounds, &s);
        CHECK(s.violations == 0, "%s: %" PRIu64 " elements beyond their bound (worst x%.3f)",
              quant_type_name(type), s.violations, s.worst);
        CHECK(gauss_rms <= rms_ceiling(type), "%s: rel. RMS %.5f > %.5f", quant_type_name(type),
              gauss_rms, rms_ceiling(type));
    }
}

/* Special inputs: all zeros, constants, a lone spike, non-finite values. */
static void test_quantize_special_inputs(void)
{
    float x[256];
    uint8_t q[1024];
    float y[256];
    for (size_t ti = 0; ti < N_LEGACY; ti++) {
        uint32_t type = legacy_types[ti];
        const char *nm = quant_type_name(type);
        check_special_inputs(type);
        for (int i = 0; i < 256; i++)
            x[i] = 0.75f;
        bound_stats s = {0};
        roundtrip(type, x, 256, check_block_bounds, &s);
        CHECK(s.violations == 0, "%s: constant block out of bounds", nm);

        memset(x, 0, sizeof x);
        x[77] = -3.0f;
        quant_quantize_row(type, x, q, 256);
        quant_dequant_row(type, q, y, 256);
        CHECK(fabsf(y[77] + 3.0f) <= 3.0f * 0x1p-7, "%s: spike -> %g", nm, y[77]);
    }
    /* ggml's literal bytes for a zero block: Q4_0's d is 0.0f / -8 = -0.0
     * (f16 0x8000) and every level is 8 (0x88 bytes); Q8_0's d is +0. */
    memset(x, 0, sizeof x);
    quant_quantize_row(QT_Q4_0, x, q, 32);
    CHECK(q[0] == 0x00 && q[1] == 0x80 && q[2] == 0x88 && q[17] == 0x88,
          "Q4_0 zero block bytes %02x %02x %02x", q[0], q[1], q[2]);
    quant_quantize_row(QT_Q8_0, x, q, 32);
    CHECK(q[0] == 0 && q[1] == 0 && q[2] == 0 && q[33] == 0, "Q8_0 zero block bytes");
}

/* The fixture files pin down Q8_0, Q4_0, Q5_0 and Q5_1; Q4_1 appears in
 * none of them.  Hashes: quant_testlib.h says where they come from. */
static void test_reference_vectors(void)
{
    static const reference_hashes want[] = {
        {"Q4_0",
         {0x9f67f274fb1fcac3ULL, 0x76a48537244e7825ULL, 0x31c91dbc41917de6ULL,
          0x2f76c34579b386a1ULL, 0xa662aea3b56195a1ULL, 0xdb7dbea70058fe20ULL}},
        {"Q4_1",
         {0x1ffd9f042b5e862cULL, 0x8c57aab8cfd95b1bULL, 0xc86d6ecb5e1740e1ULL,
          0xf5d5dc35ce30f74eULL, 0x11e70efd3625de14ULL, 0xe1e57cfd6cd857b5ULL}},
        {"Q5_0",
         {0xbcbc30b1789fb4d6ULL, 0x7a943f70cd6d84c2ULL, 0x7f8816871bbd3fafULL,
          0x5d3cb387c2e8be51ULL, 0x6db6b002cf8f141eULL, 0x3aff58f4dffa4ce5ULL}},
        {"Q5_1",
         {0xcd6c382133238b86ULL, 0x12689784277b252dULL, 0x4a25ad1e7f61cab8ULL,
          0x568a3e29ebe0a063ULL, 0xb21d3a46548d0a64ULL, 0x35ff13f613db558eULL}},
        {"Q8_0",
         {0x263d50b526773d1cULL, 0x6f9b484026627f4dULL, 0x9cc3e34cfcaa8866ULL,
          0x4fafcb5e80eb2a9cULL, 0x184c309b82d7b350ULL, 0xf4560e0294fe394bULL}},
    };
    check_reference_hashes(want, sizeof want / sizeof want[0]);
}

/* ======================================================================
 * Agreement with llama-quantize on the fixture models (read with
 * core/format/gguf.h; tensor data points into the mapping).
 * ====================================================================== */

typedef struct {
    uint64_t tensors, exact_tensors, blocks, diff_blocks;
    bound_stats bounds;
} type_tally;

static uint64_t n_elems(const gguf_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        n *= t->ne[d];
    return n;
}

/* One quantized file against its F32 original. */
static void check_fixture_file(const gguf_ctx *f32, const char *path, type_tally *tally)
{
    err_t err = {{0}};
    gguf_ctx *q = gguf_open(path, &err);
    CHECK(q != NULL, "%.400s", err.msg);
    if (!q)
        return;
    for (size_t i = 0; i < gguf_n_tensors(q); i++) {
        const gguf_tensor *tq = gguf_tensor_at(q, i);
        const gguf_tensor *tf = gguf_find_tensor(f32, tq->name);
        const uint64_t n = n_elems(tq);
        CHECK(tf && tf->type == QT_F32 && n_elems(tf) == n, "%s: %s has no F32 twin", path, tq->name);
        if (!tf || tf->type != QT_F32 || n_elems(tf) != n)
            continue;
        const quant_traits *t = quant_traits_of(tq->type);
        CHECK(t && t->can_quantize, "%s: %s has type %s", path, tq->name, quant_type_name(tq->type));
        if (!t || !t->can_quantize)
            continue;
        uint64_t bytes = 0;
        quant_row_bytes(tq->type, n, &bytes);
        CHECK(bytes == tq->size, "%s: %s: %" PRIu64 " bytes, expected %" PRIu64, path, tq->name,
              tq->size, bytes);
        /* the mapping is only 32-byte aligned per tensor: copy the floats */
        float *x = malloc(n * sizeof *x);
        memcpy(x, tf->data, n * sizeof *x);
        uint8_t *mine = malloc(bytes);
        quant_quantize_row(tq->type, x, mine, n);
        const uint8_t *theirs = tq->data;
        type_tally *tt = &tally[tq->type];
        uint64_t nb = n / t->block_elems, diff = 0;
        for (uint64_t b = 0; b < nb; b++) {
            const uint8_t *blk = theirs + b * t->block_bytes;
            if (memcmp(mine + b * t->block_bytes, blk, t->block_bytes) != 0)
                diff++;
            check_block_bounds(tq->type, blk, x + b * t->block_elems, &tt->bounds);
        }
        tt->tensors++;
        tt->exact_tensors += diff == 0;
        tt->blocks += nb;
        tt->diff_blocks += diff;
        if (diff)
            printf("# %s: %s (%s): %" PRIu64 " of %" PRIu64 " blocks differ\n", path, tq->name,
                   t->name, diff, nb);
        free(x);
        free(mine);
    }
    gguf_close(q);
}

static void test_llama_quantize_agreement(void)
{
    static const char *models[] = {"tiny-glm-a", "tiny-lite-a"};
    static const char *variants[] = {"q8_0", "q4_0", "q4_k_m"};
    type_tally tally[QT_COUNT];
    memset(tally, 0, sizeof tally);
    for (int m = 0; m < 2; m++) {
        char path[200];
        snprintf(path, sizeof path, "tests/data/models/%s/%s.f32.gguf", models[m], models[m]);
        err_t err = {{0}};
        gguf_ctx *f32 = gguf_open(path, &err);
        CHECK(f32 != NULL, "%.400s", err.msg);
        if (f32)
            for (int v = 0; v < 3; v++) {
                snprintf(path, sizeof path, "tests/data/models/%s/%s.%s.gguf", models[m],
                         models[m], variants[v]);
                check_fixture_file(f32, path, tally);
            }
        gguf_close(f32);
    }
    /* Every quantized type the fixtures hold must have been met. */
    const uint32_t expect[] = {QT_F32, QT_Q8_0, QT_Q4_0, QT_Q6_K, QT_Q4_K, QT_Q5_0, QT_Q5_1};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        CHECK(tally[expect[i]].tensors > 0, "no %s tensor met", quant_type_name(expect[i]));
    for (int ty = 0; ty < QT_COUNT; ty++) {
        type_tally *t = &tally[ty];
        if (!t->tensors)
            continue;
        printf("# %-5s %3" PRIu64 " tensors, %7" PRIu64 " blocks: %" PRIu64
               " byte-exact tensors, %" PRIu64 " differing blocks; worst err/bound %.3f\n",
               quant_type_name((uint32_t)ty), t->tensors, t->blocks, t->exact_tensors,
               t->diff_blocks, t->bounds.worst);
        CHECK(t->diff_blocks == 0, "%s: %" PRIu64 " of %" PRIu64 " blocks differ from llama-quantize",
              quant_type_name((uint32_t)ty), t->diff_blocks, t->blocks);
        CHECK(t->bounds.violations == 0, "%s: %" PRIu64 " stored elements beyond the bound",
              quant_type_name((uint32_t)ty), t->bounds.violations);
        CHECK(t->bounds.unbounded * 100 <= t->bounds.checked + 100,
              "%s: %" PRIu64 " elements in zero-scale sub-blocks", quant_type_name((uint32_t)ty),
              t->bounds.unbounded);
    }
}

int main(void)
{
    RUN(test_known_q4_0);
    RUN(test_known_q4_1);
    RUN(test_known_q5);
    RUN(test_known_q8_0);
    RUN(test_random_blocks_decode);
    RUN(test_roundtrip_bounds);
    RUN(test_quantize_special_inputs);
    RUN(test_reference_vectors);
    RUN(test_llama_quantize_agreement);
    TESTS_DONE();
}
