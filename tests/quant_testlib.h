/* quant_testlib.h: helpers shared by the quant tests (test_quant_*.c):
 * random numbers and inputs, f16 fields, error-bound bookkeeping, the
 * exact-float input generator behind the reference hashes, random blocks
 * with sane scales, round trips, the gguf-py vector files
 * (tests/data/quant) and a float64 dot product.  Header-only (static
 * functions) so it needs no build rule of its own. */
#ifndef GLM_QUANT_TESTLIB_H
#define GLM_QUANT_TESTLIB_H

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "testlib.h"

/* A header of helpers: not every program uses all of them. */
#pragma GCC diagnostic ignored "-Wunused-function"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* the reference inputs must be the same floats everywhere */
#endif

/* ======================================================================
 * Random numbers, bit casts, inputs
 * ====================================================================== */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ULL + 1;
}

static uint64_t rng_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static double rng_uniform(void) /* [0, 1) */
{
    return (double)(rng_u64() >> 11) * 0x1p-53;
}

static double rng_gauss(void)
{
    double u = rng_uniform(), v = rng_uniform();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Fills x with one of several distributions (all non-zero on average). */
static void fill_random(float *x, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        double v;
        switch (kind) {
        case 0: v = rng_gauss(); break;                       /* N(0,1) */
        case 1: v = 0.02 * rng_gauss(); break;                /* weight-sized */
        case 2: v = 3.0 * rng_uniform() - 1.0; break;         /* skewed uniform */
        case 3: v = rng_gauss() * (rng_uniform() < 0.02 ? 40 : 1); break; /* outliers */
        default: v = 1.0 + 0.1 * rng_gauss(); break;          /* all positive */
        }
        x[i] = (float)v;
    }
}

static void set_half(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

static uint16_t get_half(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static float half_at(const uint8_t *p)
{
    return quant_f16_to_f32(get_half(p));
}

static void set_bit(uint8_t *p, int bit, int v)
{
    if (v)
        p[bit / 8] |= (uint8_t)(1u << (bit % 8));
}

/* ======================================================================
 * Error bounds
 *
 * delta(v) = |v|*2^-10 + 2^-24 bounds |v - f16(v)| for any v that rounds to
 * the f16 value, so it covers a quantizer having used the unrounded scale.
 * ====================================================================== */

static double delta(double v)
{
    return fabs(v) * 0x1p-10 + 0x1p-24;
}

typedef struct {
    uint64_t checked, violations, unbounded;
    double worst; /* largest err/bound seen */
} bound_stats;

static void note(bound_stats *s, double err, double bound)
{
    s->checked++;
    double r = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
    if (r > s->worst)
        s->worst = r;
    if (err > bound)
        s->violations++;
}

/* Checks the nearest-level property of t against level lv in [lo, hi]. */
static void note_level(bound_stats *s, double t, int lv, int lo, int hi)
{
    const double slack = 1e-4;
    double err = fabs(t - lv);
    if (lv == lo && t < lv)
        err = 0; /* clamped at the bottom */
    if (lv == hi && t > lv)
        err = 0; /* clamped at the top */
    note(s, err, 0.5 + slack);
}

/* Checks one quantized block against its input (per family). */
typedef void (*block_checker)(uint32_t type, const uint8_t *b, const float *x, bound_stats *s);

/* Quantizes x (n elements) to type, checks every block with `check` (may
 * be NULL); returns the relative RMS error of the round trip. */
static double roundtrip(uint32_t type, const float *x, uint64_t n, block_checker check, bound_stats *s)
{
    uint64_t bytes = 0;
    CHECK(quant_row_bytes(type, n, &bytes), "row bytes");
    uint8_t *q = malloc(bytes);
    float *y = malloc(n * sizeof *y);
    CHECK(quant_quantize_row(type, x, q, n) == bytes, "%s: quantize size", quant_type_name(type));
    quant_dequant_row(type, q, y, n);
    const quant_traits *t = quant_traits_of(type);
    for (uint64_t b = 0; check && b < n / t->block_elems; b++)
        check(type, q + b * t->block_bytes, x + b * t->block_elems, s);
    double se = 0, sx = 0;
    for (uint64_t i = 0; i < n; i++) {
        se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        sx += (double)x[i] * x[i];
    }
    free(q);
    free(y);
    return sx > 0 ? sqrt(se / sx) : sqrt(se);
}

/* Round trips of one type over three sizes and the five input kinds;
 * prints and returns the relative RMS error on 4096 N(0,1) values. */
static double roundtrip_sweep(uint32_t type, block_checker check, bound_stats *s)
{
    static const uint64_t sizes[] = {256, 768, 4096};
    double gauss_rms = 0;
    for (size_t si = 0; si < 3; si++) {
        for (int kind = 0; kind < 5; kind++) {
            float *x = malloc(sizes[si] * sizeof *x);
            fill_random(x, sizes[si], kind);
            double r = roundtrip(type, x, sizes[si], check, s);
            if (kind == 0 && sizes[si] == 4096)
                gauss_rms = r;
            free(x);
        }
    }
    printf("# %-7s rel. RMS error on N(0,1): %.5f; worst err/bound %.3f over %" PRIu64 " elements, %" PRIu64
           " in zero-scale sub-blocks\n",
           quant_type_name(type), gauss_rms, s->worst, s->checked, s->unbounded);
    return gauss_rms;
}

/* ======================================================================
 * Reference vectors for the quantizers
 *
 * The hashes (FNV-1a 64 of the quantized bytes) the test files list were
 * produced by ggml's own quantizers (quantize_row_*_ref, or, for IQ4_NL and
 * IQ4_XS, ggml_quantize_chunk without an importance matrix, which is what
 * llama-quantize calls), compiled as a stand-alone program outside this
 * repository, on inputs from the generator below.  The generator uses only
 * integer arithmetic and exact float operations, so it yields the same
 * floats on any IEEE machine.  The inputs cover: bell-shaped data,
 * weight-sized data, all-positive (min clamped at 0), outliers, sub-blocks
 * of very different scales including all-zero, tiny (1e-9) and constant
 * ones, and all-negative data.
 * ====================================================================== */

static uint64_t vec_state;

static void vec_seed(uint64_t s)
{
    vec_state = s * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
}

static uint32_t vec_u32(void)
{
    vec_state ^= vec_state >> 12;
    vec_state ^= vec_state << 25;
    vec_state ^= vec_state >> 27;
    return (uint32_t)((vec_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static float vec_uniform(void) /* [-1, 1), exact */
{
    return (float)((int32_t)(vec_u32() >> 8) - (1 << 23)) * 0x1p-23f;
}

static float vec_bell(void)
{
    return (vec_uniform() + vec_uniform()) + (vec_uniform() + vec_uniform());
}

static void vec_fill(float *x, int n, int kind)
{
    static const float sub_scale[8] = {1.0f, 0.01f, 100.0f, 0.0f, 1e-3f, 5.0f, 1e-9f, 0.3f};
    for (int i = 0; i < n; i++) {
        float v = vec_bell();
        switch (kind) {
        case 0: break;
        case 1: v *= 0.02f; break;
        case 2: v = vec_uniform() + 1.5f; break;
        case 3:
            if (vec_u32() % 64 == 0)
                v *= 20.0f;
            break;
        case 4:
            v *= sub_scale[(i / 32) % 8];
            if ((i / 32) % 8 == 7)
                v = 0.3f;
            break;
        default: v = -fabsf(v) - 0.25f; break;
        }
        x[i] = v;
    }
}

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

typedef struct {
    const char *type;
    uint64_t hash[6]; /* one per input kind, 4096 elements each */
} reference_hashes;

static void check_reference_hashes(const reference_hashes *want, size_t n_types)
{
    static float x[4096];
    static uint8_t q[4096 * 2];
    for (size_t t = 0; t < n_types; t++) {
        uint32_t type = (uint32_t)quant_type_from_name(want[t].type);
        for (int kind = 0; kind < 6; kind++) {
            vec_seed(1000 + (uint64_t)kind);
            vec_fill(x, 4096, kind);
            size_t bytes = quant_quantize_row(type, x, q, 4096);
            uint64_t h = fnv1a64(q, bytes);
            CHECK(h == want[t].hash[kind], "%s input kind %d: hash %016" PRIx64 ", ggml's %016" PRIx64,
                  want[t].type, kind, h, want[t].hash[kind]);
        }
    }
}

/* ======================================================================
 * Random blocks: random bytes in every field (all bit patterns of levels,
 * indices, signs and sub-scales), sane scales: f16 ones N(0, 0.05^2),
 * MXFP4's E8M0 one 2^-16 .. 2^-8 (weight-sized values).
 * ====================================================================== */

static void random_block(uint32_t type, uint8_t *b)
{
    const quant_traits *t = quant_traits_of(type);
    for (uint32_t i = 0; i < t->block_bytes; i++)
        b[i] = (uint8_t)rng_u64();
    uint16_t d = quant_f32_to_f16((float)(0.05 * rng_gauss()));
    uint16_t m = quant_f32_to_f16((float)(0.05 * rng_gauss()));
    switch (type) {
    case QT_F32: {
        float f = (float)rng_gauss();
        memcpy(b, &f, 4);
        break;
    }
    case QT_F16: set_half(b, quant_f32_to_f16((float)rng_gauss())); break;
    case QT_BF16: set_half(b, quant_f32_to_bf16((float)rng_gauss())); break;
    case QT_Q4_1:
    case QT_Q5_1:
    case QT_Q4_K:
    case QT_Q5_K:
        set_half(b, d);
        set_half(b + 2, m);
        break;
    case QT_Q6_K: set_half(b + 208, d); break;
    case QT_Q2_K:
        set_half(b + 80, d);
        set_half(b + 82, m);
        break;
    case QT_Q3_K: set_half(b + 108, d); break;
    case QT_MXFP4: b[0] = (uint8_t)(112 + rng_u64() % 9); break;
    case QT_IQ1_M:
        for (int i = 0; i < 4; i++) /* the f16 scale in the top nibbles of the scale words */
            b[48 + 2 * i + 1] = (uint8_t)((b[48 + 2 * i + 1] & 0x0f) | (((d >> (4 * i)) & 0xf) << 4));
        break;
    default: set_half(b, d); break;
    }
}

static uint8_t *random_row(uint32_t type, uint64_t n)
{
    const quant_traits *t = quant_traits_of(type);
    uint64_t bytes = 0;
    quant_row_bytes(type, n, &bytes);
    uint8_t *row = malloc(bytes + 1);
    for (uint64_t b = 0; b < n / t->block_elems; b++)
        random_block(type, row + b * t->block_bytes);
    return row;
}

/* ======================================================================
 * The gguf-py vectors (tests/data/quant/<TYPE>.bin, gen_vectors.py there):
 * "GQV1", type id, n_blocks, block_bytes, the blocks, their float values as
 * llama.cpp's Python package decodes them.  Decoded here bit for bit.
 * ====================================================================== */

static void check_gguf_py_vectors(uint32_t type)
{
    const quant_traits *t = quant_traits_of(type);
    char path[128];
    snprintf(path, sizeof path, "tests/data/quant/%s.bin", t->name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "%s: cannot open", path);
    if (!f)
        return;
    char magic[4];
    uint32_t h[3] = {0};
    bool head_ok = fread(magic, 1, 4, f) == 4 && fread(h, 4, 3, f) == 3 && memcmp(magic, "GQV1", 4) == 0;
    CHECK(head_ok && h[0] == type && h[2] == t->block_bytes && h[1] >= 100,
          "%s: header (type %u, %u blocks of %u bytes)", path, h[0], h[1], h[2]);
    if (!(head_ok && h[0] == type && h[2] == t->block_bytes && h[1] >= 100)) {
        fclose(f);
        return;
    }
    const uint64_t n = (uint64_t)h[1] * t->block_elems;
    uint8_t *blocks = malloc((size_t)h[1] * h[2]);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    bool body_ok = fread(blocks, h[2], h[1], f) == h[1] && fread(want, 4, n, f) == n && fgetc(f) == EOF;
    CHECK(body_ok, "%s: truncated or trailing bytes", path);
    if (body_ok) {
        quant_dequant_row(type, blocks, got, n);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (bits_of(got[i]) != bits_of(want[i]) && bad++ < 3)
                CHECK(0, "%s block %" PRIu64 " element %" PRIu64 ": %.9g (0x%08x), gguf-py %.9g (0x%08x)", t->name,
                      i / t->block_elems, i % t->block_elems, (double)got[i], bits_of(got[i]), (double)want[i],
                      bits_of(want[i]));
        }
        CHECK(bad == 0, "%s: %" PRIu64 " of %" PRIu64 " values differ from gguf-py", t->name, bad, n);
        /* the table's block decoder gives the same bits as the row decoder */
        float one[QK_K];
        t->decode_block(blocks + (size_t)(h[1] - 1) * h[2], one);
        CHECK(memcmp(one, got + n - t->block_elems, t->block_elems * sizeof(float)) == 0, "%s decode_block",
              t->name);
    }
    free(blocks);
    free(want);
    free(got);
    fclose(f);
}

/* ======================================================================
 * Special inputs every quantizer must take: zeros decode to zeros;
 * non-finite values neither crash nor trip the sanitizers (their bytes are
 * unspecified); the output is deterministic.
 * ====================================================================== */

static void check_special_inputs(uint32_t type)
{
    float x[256], y[256];
    uint8_t q[1024], q2[1024];
    const char *nm = quant_type_name(type);
    memset(x, 0, sizeof x);
    quant_quantize_row(type, x, q, 256);
    quant_dequant_row(type, q, y, 256);
    int nz = 0;
    for (int i = 0; i < 256; i++)
        nz += y[i] != 0;
    CHECK(nz == 0, "%s: zeros decode to %d non-zeros", nm, nz);

    fill_random(x, 256, 0);
    uint64_t bytes = 0;
    quant_row_bytes(type, 256, &bytes);
    quant_quantize_row(type, x, q, 256);
    quant_quantize_row(type, x, q2, 256);
    CHECK(memcmp(q, q2, (size_t)bytes) == 0, "%s: two runs differ", nm);
    x[3] = NAN;
    x[100] = INFINITY;
    x[200] = -INFINITY;
    quant_quantize_row(type, x, q, 256); /* must simply not crash */
    for (int i = 0; i < 256; i++)
        x[i] = i % 7 == 0 ? NAN : i % 5 == 0 ? -INFINITY : 1e30f;
    quant_quantize_row(type, x, q, 256);
}

/* ======================================================================
 * Dot products: the exact (float64) sum over the exactly decoded weights,
 * and S, the sum of |w_i x_i| plus |z_i x_i| with z_i the value the
 * element's block gives level 0 (bounds the factored forms' terms).
 * ====================================================================== */

/* Bytes of each block that hold scales / mins (kept when levels are
 * zeroed), or -1 where zeroing levels is not meaningful (z = 0 then). */
static void header_bytes(uint32_t type, int *from, int *to)
{
    *from = 0;
    *to = -1;
    switch (type) {
    case QT_Q4_0: case QT_Q5_0: case QT_Q8_0: *to = 2; break;
    case QT_Q4_1: case QT_Q5_1: *to = 4; break;
    case QT_Q4_K: case QT_Q5_K: *to = 16; break;
    case QT_Q6_K: *from = 192; *to = 210; break;
    case QT_Q2_K: *from = 0; *to = 16; break;   /* scales; d, dmin at 80 kept below */
    default: break;
    }
}

static double dot_exact(uint32_t type, const uint8_t *row, const float *x, uint64_t n, double *S)
{
    const quant_traits *t = quant_traits_of(type);
    float *w = malloc(n * sizeof *w), *z = calloc(n, sizeof *z);
    quant_dequant_row(type, row, w, n);
    int from, to;
    header_bytes(type, &from, &to);
    if (t->block_elems > 1 && to > 0) {
        uint64_t bytes = 0;
        quant_row_bytes(type, n, &bytes);
        uint8_t *zr = malloc(bytes);
        memcpy(zr, row, bytes);
        for (uint64_t b = 0; b < n / t->block_elems; b++) {
            uint8_t *blk = zr + b * t->block_bytes;
            for (uint32_t i = 0; i < t->block_bytes; i++)
                if ((int)i < from || (int)i >= to)
                    blk[i] = 0;
            if (type == QT_Q2_K) /* keep d and dmin */
                memcpy(blk + 80, row + b * t->block_bytes + 80, 4);
        }
        quant_dequant_row(type, zr, z, n);
        free(zr);
    }
    double sum = 0;
    *S = 0;
    for (uint64_t i = 0; i < n; i++) {
        sum += (double)w[i] * x[i];
        *S += (fabs(w[i]) + fabs(z[i])) * fabs(x[i]);
    }
    free(w);
    free(z);
    return sum;
}

/* Every type with codecs, in id order. */
static int codec_types(uint32_t *out)
{
    int n = 0;
    for (uint32_t ty = 0; ty < QT_COUNT; ty++) {
        const quant_traits *t = quant_traits_of(ty);
        if (t && t->can_dequant)
            out[n++] = ty;
    }
    return n;
}

#endif
