/* test_quant.c: the quant formats (core/quant.h).
 *
 * What is checked, and against what:
 *  - type table: block geometry of every ggml type id, names, row sizes;
 *  - f16/bf16: all 65536 half patterns, every rounding midpoint between
 *    neighbouring halves (ties to even), overflow and underflow thresholds,
 *    subnormals, inf, NaN; random f32 patterns against the CPU's own F16C
 *    conversion where the CPU has it (an oracle independent of our code);
 *  - known-value blocks: bytes assembled bit by bit from the layout in
 *    ggml-common.h (in this file, independently of core/quant.c's decoders),
 *    decoded and compared with values computed from the levels;
 *  - round trips on random data of several sizes and distributions: every
 *    element within the bound its format guarantees (stated per type below);
 *  - dot products: the oracle dot and both kernel sets (portable, avx2) vs a
 *    float64 dot of the dequantized weights, within a stated f32 bound;
 *  - agreement with llama-quantize on the fixture models: requantizing each
 *    tensor of the .f32.gguf reproduces the stored bytes of the
 *    .q8_0/.q4_0/.q4_k_m.gguf files exactly, and the stored values are within
 *    the type's error bound of the F32 values (files read with core/gguf.h).
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "quant_fast.h"
#include "testlib.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* the reference inputs must be the same floats everywhere */
#endif

/* ======================================================================
 * Helpers: random numbers, bit casts
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

static const uint32_t dequant_types[] = {QT_F32, QT_F16, QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0,
                                         QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
#define N_DEQUANT_TYPES (sizeof dequant_types / sizeof dequant_types[0])

/* ======================================================================
 * Type table
 * ====================================================================== */

static void test_traits(void)
{
    static const struct {
        uint32_t type;
        const char *name;
        uint32_t elems, bytes;
        bool dequant;
    } want[] = {
        {QT_F32, "F32", 1, 4, true},       {QT_F16, "F16", 1, 2, true},
        {QT_Q4_0, "Q4_0", 32, 18, true},   {QT_Q4_1, "Q4_1", 32, 20, true},
        {QT_Q5_0, "Q5_0", 32, 22, true},   {QT_Q5_1, "Q5_1", 32, 24, true},
        {QT_Q8_0, "Q8_0", 32, 34, true},   {QT_Q8_1, "Q8_1", 32, 36, false},
        {QT_Q2_K, "Q2_K", 256, 84, false}, {QT_Q3_K, "Q3_K", 256, 110, false},
        {QT_Q4_K, "Q4_K", 256, 144, true}, {QT_Q5_K, "Q5_K", 256, 176, true},
        {QT_Q6_K, "Q6_K", 256, 210, true}, {QT_Q8_K, "Q8_K", 256, 292, false},
        {QT_IQ2_XXS, "IQ2_XXS", 256, 66, false}, {QT_IQ4_NL, "IQ4_NL", 32, 18, false},
        {QT_IQ4_XS, "IQ4_XS", 256, 136, false},  {QT_IQ1_M, "IQ1_M", 256, 56, false},
        {QT_BF16, "BF16", 1, 2, true},     {QT_TQ2_0, "TQ2_0", 256, 66, false},
        {QT_MXFP4, "MXFP4", 32, 17, false}, {QT_F64, "F64", 1, 8, false},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const quant_traits *t = quant_traits_of(want[i].type);
        CHECK(t != NULL, "type %u unknown", want[i].type);
        if (!t)
            continue;
        CHECK(strcmp(t->name, want[i].name) == 0, "type %u named %s", want[i].type, t->name);
        CHECK(t->block_elems == want[i].elems && t->block_bytes == want[i].bytes,
              "%s: %u elems / %u bytes", t->name, t->block_elems, t->block_bytes);
        CHECK(t->can_dequant == want[i].dequant, "%s can_dequant", t->name);
        CHECK(quant_type_from_name(want[i].name) == (int)want[i].type, "from_name %s", want[i].name);
    }
    /* Removed ids (4, 5, 31-33, 36-38) and out-of-range ids are unknown. */
    const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK(quant_traits_of(unknown[i]) == NULL, "id %u should be unknown", unknown[i]);
        CHECK(strcmp(quant_type_name(unknown[i]), "?") == 0, "name of %u", unknown[i]);
    }
    CHECK(quant_type_from_name("q4_k") == QT_Q4_K, "case-insensitive name");
    CHECK(quant_type_from_name("Q4_K_M") == -1, "file type is not a tensor type");
    CHECK(quant_type_from_name("") == -1 && quant_type_from_name(NULL) == -1, "empty name");

    uint64_t b = 0;
    CHECK(quant_row_bytes(QT_Q4_0, 2048, &b) && b == 64 * 18, "Q4_0 row of 2048: %" PRIu64, b);
    CHECK(quant_row_bytes(QT_Q6_K, 2048, &b) && b == 8 * 210, "Q6_K row of 2048: %" PRIu64, b);
    CHECK(quant_row_bytes(QT_F32, 7, &b) && b == 28, "F32 row of 7");
    CHECK(!quant_row_bytes(QT_Q4_K, 2048 + 32, &b), "non-multiple of 256 must fail");
    CHECK(!quant_row_bytes(99, 256, &b), "unknown type must fail");
    CHECK(!quant_row_bytes(QT_F32, UINT64_MAX / 2, &b), "overflow must fail");
    /* Q4_0 (18 bytes per 32) cannot overflow; Q8_K (292 per 256) can */
    CHECK(quant_row_bytes(QT_Q4_0, UINT64_MAX / 32 * 32, &b) && b == UINT64_MAX / 32 * 18,
          "largest Q4_0 row");
    CHECK(!quant_row_bytes(QT_Q8_K, UINT64_MAX / 256 * 256, &b), "Q8_K overflow must fail");
    CHECK(strcmp(quant_cpu_kernels(), "avx2") == 0 || strcmp(quant_cpu_kernels(), "portable") == 0,
          "kernels: %s", quant_cpu_kernels());
}

/* ======================================================================
 * Half and bfloat
 * ====================================================================== */

/* The value of a half computed from its fields with ldexp (independent of
 * quant.c's bit manipulation). */
static double half_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v = exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
    return sign ? -v : v;
}

static void test_f16_decode_all(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = quant_f16_to_f32((uint16_t)h);
        int exp = (h >> 10) & 31;
        if (exp == 31) {
            if (h & 1023)
                CHECK(isnan(f), "0x%04x should be NaN", h);
            else
                CHECK(isinf(f) && (f < 0) == (h >> 15), "0x%04x should be inf", h);
            continue;
        }
        CHECK((double)f == half_value((uint16_t)h), "0x%04x -> %.9g", h, (double)f);
        CHECK((signbit(f) != 0) == (h >> 15 != 0), "sign of 0x%04x", h);
        /* encode(decode(h)) == h for every non-NaN half, -0 included */
        CHECK(quant_f32_to_f16(f) == h, "round trip 0x%04x -> 0x%04x", h, quant_f32_to_f16(f));
    }
}

/* Every midpoint between neighbouring finite halves rounds to the one with
 * an even mantissa; the floats just beside it round to the nearer one. */
static void test_f16_rounding_midpoints(void)
{
    for (uint32_t h = 0; h < 0x7bff; h++) {
        for (int s = 0; s < 2; s++) {
            uint16_t a = (uint16_t)(h | (s << 15)), b = (uint16_t)((h + 1) | (s << 15));
            double mid = (half_value(a) + half_value(b)) / 2; /* exact in float */
            float m = (float)mid;
            CHECK((double)m == mid, "midpoint not exact");
            uint16_t even = (a & 1) ? b : a;
            CHECK(quant_f32_to_f16(m) == even, "tie 0x%04x/0x%04x -> 0x%04x", a, b,
                  quant_f32_to_f16(m));
            float below = nextafterf(m, 0.0f), above = nextafterf(m, s ? -INFINITY : INFINITY);
            CHECK(quant_f32_to_f16(below) == a, "just below midpoint of 0x%04x", a);
            CHECK(quant_f32_to_f16(above) == b, "just above midpoint of 0x%04x", a);
        }
    }
}

static void test_f16_edges(void)
{
    /* overflow: 65504 is the largest half; 65520 is the tie to 65536 = inf */
    CHECK(quant_f32_to_f16(65504.0f) == 0x7bff, "65504");
    CHECK(quant_f32_to_f16(nextafterf(65520.0f, 0)) == 0x7bff, "just below 65520");
    CHECK(quant_f32_to_f16(65520.0f) == 0x7c00, "65520 ties to inf");
    CHECK(quant_f32_to_f16(-1e10f) == 0xfc00, "-1e10 -> -inf");
    CHECK(quant_f32_to_f16(INFINITY) == 0x7c00 && quant_f32_to_f16(-INFINITY) == 0xfc00, "inf");
    CHECK(quant_f32_to_f16(FLT_MAX) == 0x7c00, "FLT_MAX -> inf");
    /* underflow: 2^-24 is the smallest subnormal; 2^-25 ties to zero */
    CHECK(quant_f32_to_f16(0x1p-24f) == 0x0001, "2^-24");
    CHECK(quant_f32_to_f16(0x1p-25f) == 0x0000, "2^-25 ties to 0");
    CHECK(quant_f32_to_f16(nextafterf(0x1p-25f, 1)) == 0x0001, "just above 2^-25");
    CHECK(quant_f32_to_f16(0x1.8p-24f) == 0x0002, "1.5 * 2^-24 ties to 2 (even)");
    CHECK(quant_f32_to_f16(-0x1p-30f) == 0x8000, "tiny negative -> -0");
    CHECK(quant_f32_to_f16(FLT_MIN / 4) == 0x0000, "f32 subnormal -> 0");
    CHECK(quant_f32_to_f16(nextafterf(0x1p-14f, 0)) == 0x0400, "rounds up into the normals");
    CHECK(quant_f32_to_f16(-0.0f) == 0x8000 && quant_f32_to_f16(0.0f) == 0, "signed zero");
    /* NaN stays NaN (quiet), sign kept; inf is not NaN */
    uint16_t n1 = quant_f32_to_f16(NAN), n2 = quant_f32_to_f16(float_of(0xff800001u));
    CHECK((n1 & 0x7c00) == 0x7c00 && (n1 & 0x3ff), "NaN -> 0x%04x", n1);
    CHECK((n2 & 0x7c00) == 0x7c00 && (n2 & 0x3ff) && (n2 & 0x8000), "signalling -NaN -> 0x%04x", n2);
    CHECK(isnan(quant_f16_to_f32(0x7e00)) && isnan(quant_f16_to_f32(0xfc01)), "NaN decode");
    /* a few literal values */
    CHECK(quant_f16_to_f32(0x3c00) == 1.0f && quant_f16_to_f32(0xc000) == -2.0f, "1, -2");
    CHECK(quant_f16_to_f32(0x3555) == 0.333251953125f, "0x3555");
    CHECK(quant_f32_to_f16(0.1f) == 0x2e66 && quant_f32_to_f16(1.0f / 3) == 0x3555, "0.1, 1/3");
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float f)
{
    return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0);
}
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

/* Random float bit patterns, converted by the CPU's F16C instruction (round
 * to nearest even, the IEEE conversion) and by us. */
static void test_f16_vs_hardware(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (!cpu_has_f16c()) {
        printf("# no F16C on this CPU: hardware comparison skipped\n");
        return;
    }
    rng_seed(11);
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_u64();
        if (i & 1) /* half the samples in the interesting exponent range */
            u = (u & 0x807fffffu) | ((uint32_t)(100 + rng_u64() % 50) << 23);
        float f = float_of(u);
        if (isnan(f))
            continue;
        if (quant_f32_to_f16(f) != hw_f32_to_f16(f) && bad++ < 3)
            CHECK(0, "0x%08x: ours 0x%04x, F16C 0x%04x", u, quant_f32_to_f16(f), hw_f32_to_f16(f));
    }
    CHECK(bad == 0, "%d mismatches with F16C", bad);
#else
    printf("# not x86-64: hardware comparison skipped\n");
#endif
}

static void test_bf16(void)
{
    /* every bfloat pattern decodes to its bits << 16 and encodes back */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = quant_bf16_to_f32((uint16_t)h);
        CHECK(bits_of(f) == h << 16, "decode 0x%04x", h);
        if (!isnan(f))
            CHECK(quant_f32_to_bf16(f) == h, "round trip 0x%04x", h);
    }
    /* ties to even, and just past the tie */
    CHECK(quant_f32_to_bf16(float_of(0x3f808000u)) == 0x3f80, "tie down to even");
    CHECK(quant_f32_to_bf16(float_of(0x3f818000u)) == 0x3f82, "tie up to even");
    CHECK(quant_f32_to_bf16(float_of(0x3f808001u)) == 0x3f81, "above tie");
    CHECK(quant_f32_to_bf16(float_of(0x3f807fffu)) == 0x3f80, "below tie");
    CHECK(quant_f32_to_bf16(float_of(0xbf818000u)) == 0xbf82, "negative tie");
    /* subnormals are rounded, not flushed */
    CHECK(quant_f32_to_bf16(float_of(0x00010000u)) == 0x0001, "smallest subnormal");
    CHECK(quant_f32_to_bf16(float_of(0x00018000u)) == 0x0002, "subnormal tie to even");
    CHECK(quant_f32_to_bf16(float_of(0x00007fffu)) == 0x0000, "tiny -> 0");
    CHECK(quant_f32_to_bf16(float_of(0x007fffffu)) == 0x0080, "rounds up into the normals");
    /* overflow, inf, NaN (a NaN must never become inf, even with a payload
     * only in the low 16 bits) */
    CHECK(quant_f32_to_bf16(FLT_MAX) == 0x7f80, "FLT_MAX rounds to inf");
    CHECK(quant_f32_to_bf16(float_of(0x7f7f7fffu)) == 0x7f7f, "largest finite stays");
    CHECK(quant_f32_to_bf16(INFINITY) == 0x7f80 && quant_f32_to_bf16(-INFINITY) == 0xff80, "inf");
    uint16_t n1 = quant_f32_to_bf16(float_of(0x7f800001u)), n2 = quant_f32_to_bf16(float_of(0xffc00000u));
    CHECK(isnan(quant_bf16_to_f32(n1)), "sNaN with low payload -> 0x%04x", n1);
    CHECK(isnan(quant_bf16_to_f32(n2)) && (n2 & 0x8000), "-NaN -> 0x%04x", n2);
    CHECK(quant_f32_to_bf16(-123.5f) == 0xc2f7 && quant_bf16_to_f32(0xc2f7) == -123.5f, "-123.5");
}

/* ======================================================================
 * Block layouts, written from ggml-common.h's description: "levels" are
 * the unsigned stored integers; these helpers put them where the layout says
 * and read them back.
 * ====================================================================== */

static void set_half(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

static uint16_t get_half(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* Byte offsets inside each block. */
enum {
    Q4_0_QS = 2, Q4_1_QS = 4, Q5_0_QH = 2, Q5_0_QS = 6, Q5_1_QH = 4, Q5_1_QS = 8, Q8_0_QS = 2,
    QK_SC = 4, Q4K_QS = 16, Q5K_QH = 16, Q5K_QS = 48, Q6K_QL = 0, Q6K_QH = 128, Q6K_SC = 192,
    Q6K_D = 208
};

static void set_bit(uint8_t *p, int bit, int v)
{
    if (v)
        p[bit / 8] |= (uint8_t)(1u << (bit % 8));
}

/* Level of element e of a block (for Q8_0: the raw byte). */
static int level_of(uint32_t type, const uint8_t *b, int e)
{
    switch (type) {
    case QT_Q4_0: return e < 16 ? b[Q4_0_QS + e] & 15 : b[Q4_0_QS + e - 16] >> 4;
    case QT_Q4_1: return e < 16 ? b[Q4_1_QS + e] & 15 : b[Q4_1_QS + e - 16] >> 4;
    case QT_Q5_0:
        return (e < 16 ? b[Q5_0_QS + e] & 15 : b[Q5_0_QS + e - 16] >> 4) |
               (((b[Q5_0_QH + e / 8] >> (e % 8)) & 1) << 4);
    case QT_Q5_1:
        return (e < 16 ? b[Q5_1_QS + e] & 15 : b[Q5_1_QS + e - 16] >> 4) |
               (((b[Q5_1_QH + e / 8] >> (e % 8)) & 1) << 4);
    case QT_Q8_0: return b[Q8_0_QS + e];
    case QT_Q4_K: {
        int c = e / 64, l = e % 64, byte = b[Q4K_QS + 32 * c + l % 32];
        return l < 32 ? byte & 15 : byte >> 4;
    }
    case QT_Q5_K: {
        int c = e / 64, l = e % 64, byte = b[Q5K_QS + 32 * c + l % 32];
        int hbit = (b[Q5K_QH + l % 32] >> (2 * c + (l >= 32))) & 1;
        return (l < 32 ? byte & 15 : byte >> 4) | (hbit << 4);
    }
    case QT_Q6_K: {
        int h = e / 128, r = (e % 128) / 32, l = e % 32;
        int byte = b[Q6K_QL + 64 * h + 32 * (r & 1) + l];
        int nib = r < 2 ? byte & 15 : byte >> 4;
        return nib | (((b[Q6K_QH + 32 * h + l] >> (2 * r)) & 3) << 4);
    }
    default: return 0;
    }
}

/* Writes level lv of element e (the block's level bytes start zeroed). */
static void put_level(uint32_t type, uint8_t *b, int e, int lv)
{
    switch (type) {
    case QT_Q4_0:
    case QT_Q4_1: {
        int qs = type == QT_Q4_0 ? Q4_0_QS : Q4_1_QS;
        b[qs + e % 16] |= (uint8_t)(e < 16 ? lv : lv << 4);
        break;
    }
    case QT_Q5_0:
    case QT_Q5_1: {
        int qs = type == QT_Q5_0 ? Q5_0_QS : Q5_1_QS, qh = type == QT_Q5_0 ? Q5_0_QH : Q5_1_QH;
        b[qs + e % 16] |= (uint8_t)(e < 16 ? (lv & 15) : (lv & 15) << 4);
        set_bit(b + qh, e, lv >> 4);
        break;
    }
    case QT_Q8_0: b[Q8_0_QS + e] = (uint8_t)lv; break;
    case QT_Q4_K: {
        int c = e / 64, l = e % 64;
        b[Q4K_QS + 32 * c + l % 32] |= (uint8_t)(l < 32 ? lv : lv << 4);
        break;
    }
    case QT_Q5_K: {
        int c = e / 64, l = e % 64;
        b[Q5K_QS + 32 * c + l % 32] |= (uint8_t)(l < 32 ? (lv & 15) : (lv & 15) << 4);
        set_bit(b + Q5K_QH + l % 32, 2 * c + (l >= 32), lv >> 4);
        break;
    }
    case QT_Q6_K: {
        int h = e / 128, r = (e % 128) / 32, l = e % 32;
        b[Q6K_QL + 64 * h + 32 * (r & 1) + l] |= (uint8_t)(r < 2 ? (lv & 15) : (lv & 15) << 4);
        b[Q6K_QH + 32 * h + l] |= (uint8_t)((lv >> 4) << (2 * r));
        break;
    }
    }
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j: scales 0-3 and mins
 * 0-3 in the low 6 bits of bytes 0-3 / 4-7; scales and mins 4-7 split into
 * a low nibble (bytes 8-11, scale low, min high) and two high bits (the top
 * bits of bytes 0-3 for scales, 4-7 for mins). */
static void put_scale_min(uint8_t *s, int j, int sc, int mn)
{
    if (j < 4) {
        s[j] |= (uint8_t)sc;
        s[j + 4] |= (uint8_t)mn;
    } else {
        s[j + 4] |= (uint8_t)((sc & 15) | ((mn & 15) << 4));
        s[j - 4] |= (uint8_t)((sc >> 4) << 6);
        s[j] |= (uint8_t)((mn >> 4) << 6);
    }
}

static void get_scale_min(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* The value ggml's layout defines for element e, from the fields, in
 * float64 (the decoders' float results must equal it: every product there
 * is exact in f32 except Q6_K's (d*sc)*q and the final add of a min, which
 * the checks below allow for by comparing in f32 the same way). */
static float expected_value(uint32_t type, const uint8_t *b, int e)
{
    int lv = level_of(type, b, e);
    switch (type) {
    case QT_Q4_0: return (float)(lv - 8) * quant_f16_to_f32(get_half(b));
    case QT_Q5_0: return (float)(lv - 16) * quant_f16_to_f32(get_half(b));
    case QT_Q8_0: return (float)(int8_t)lv * quant_f16_to_f32(get_half(b));
    case QT_Q4_1:
    case QT_Q5_1:
        return (float)lv * quant_f16_to_f32(get_half(b)) + quant_f16_to_f32(get_half(b + 2));
    case QT_Q4_K:
    case QT_Q5_K: {
        int sc, mn;
        get_scale_min(b + QK_SC, e / 32, &sc, &mn);
        float d = quant_f16_to_f32(get_half(b)) * (float)sc;
        float m = quant_f16_to_f32(get_half(b + 2)) * (float)mn;
        return d * (float)lv - m;
    }
    case QT_Q6_K: {
        float d = quant_f16_to_f32(get_half(b + Q6K_D)) * (float)(int8_t)b[Q6K_SC + e / 16];
        return d * (float)(lv - 32);
    }
    }
    return NAN;
}

static void check_block_decodes(uint32_t type, const uint8_t *b, const char *what)
{
    const quant_traits *t = quant_traits_of(type);
    float y[256];
    quant_dequant_row(type, b, y, t->block_elems);
    int bad = 0;
    for (uint32_t e = 0; e < t->block_elems; e++) {
        float want = expected_value(type, b, (int)e);
        if (bits_of(y[e]) != bits_of(want) && bad++ < 3)
            CHECK(0, "%s %s element %u: %.9g, expected %.9g", t->name, what, e, (double)y[e],
                  (double)want);
    }
}

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

static void test_known_q4_K(void)
{
    uint8_t b[144] = {0};
    set_half(b, 0x3c00);     /* d = 1 */
    set_half(b + 2, 0x3800); /* dmin = 0.5 */
    for (int j = 0; j < 8; j++)
        put_scale_min(b + QK_SC, j, j < 4 ? j + 1 : 40 + j, j < 4 ? 2 * j : 50 + j);
    for (int e = 0; e < 256; e++)
        put_level(QT_Q4_K, b, e, (e % 32 * 7 + e / 32) % 16);
    /* scales 44..47 have high bits 2 (0b10xxxx), mins 54..57 have 3 */
    CHECK(b[QK_SC + 0] == (1 | 0x80) && b[QK_SC + 4] == (0 | 0xc0), "scale bytes %02x %02x",
          b[QK_SC], b[QK_SC + 4]);
    CHECK(b[QK_SC + 8] == ((44 & 15) | ((54 & 15) << 4)), "byte 8 = %02x", b[QK_SC + 8]);
    float y[256];
    quant_dequant_row(QT_Q4_K, b, y, 256);
    /* element 200: sub-block 6 (scale 46, min 56), level (8*7+6)%16 = 14 */
    CHECK(y[200] == 46.0f * 14 - 28.0f, "y[200] = %g", y[200]);
    /* element 255: sub-block 7 (scale 47, min 57), level (31*7+7)%16 = 0 */
    CHECK(y[255] == -28.5f, "y[255] = %g", y[255]);
    /* element 33: sub-block 1 (scale 2, min 2), level (7+1)%16 = 8 */
    CHECK(y[33] == 2.0f * 8 - 1.0f, "y[33] = %g", y[33]);
    check_block_decodes(QT_Q4_K, b, "pattern");
}

static void test_known_q5_K(void)
{
    uint8_t b[176] = {0};
    set_half(b, 0x3400);     /* d = 0.25 */
    set_half(b + 2, 0x3c00); /* dmin = 1 */
    for (int j = 0; j < 8; j++)
        put_scale_min(b + QK_SC, j, 63 - 5 * j, 3 * j + 17);
    for (int e = 0; e < 256; e++)
        put_level(QT_Q5_K, b, e, (e * 13 + e / 32) % 32);
    float y[256];
    quant_dequant_row(QT_Q5_K, b, y, 256);
    /* element 100: sub-block 3 (scale 48, min 26), level (1300+3)%32 = 23 */
    CHECK(y[100] == 0.25f * 48 * 23 - 26.0f, "y[100] = %g", y[100]);
    /* element 97 (second sub-block of pair 1, fifth bit in bit 3 of qh[1]):
     * level (1261+3)%32 = 16 */
    CHECK(level_of(QT_Q5_K, b, 97) == 16 && (b[Q5K_QH + 1] & 0x08), "element 97 high bit");
    check_block_decodes(QT_Q5_K, b, "pattern");
}

static void test_known_q6_K(void)
{
    uint8_t b[210] = {0};
    set_half(b + Q6K_D, 0x3400); /* d = 0.25 */
    for (int k = 0; k < 16; k++)
        b[Q6K_SC + k] = (uint8_t)(int8_t)((k * 17) % 50 - 25);
    for (int e = 0; e < 256; e++)
        put_level(QT_Q6_K, b, e, (e * 5 + 3) % 64);
    float y[256];
    quant_dequant_row(QT_Q6_K, b, y, 256);
    /* element 0: scale -25, level 3 -> 0.25*-25*(3-32) */
    CHECK(y[0] == 0.25f * -25 * -29, "y[0] = %g", y[0]);
    /* element 200: half 1, row 2 (high nibbles), scale index 12: (204%50)-25 = -21;
     * level (1003)%64 = 43 */
    CHECK(y[200] == 0.25f * -21 * 11, "y[200] = %g", y[200]);
    /* element 70: half 0, row 2 -> high nibble of ql[6], qh[6] bits 4-5 */
    int lv70 = (70 * 5 + 3) % 64;
    CHECK((b[Q6K_QL + 6] >> 4) == (lv70 & 15) && ((b[Q6K_QH + 6] >> 4) & 3) == (lv70 >> 4),
          "element 70 placement");
    check_block_decodes(QT_Q6_K, b, "pattern");
}

/* Random bytes in every level field (all bit patterns), sane scales. */
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
    case QT_Q6_K: set_half(b + Q6K_D, d); break;
    default: set_half(b, d); break;
    }
}

static void test_random_blocks_decode(void)
{
    rng_seed(5);
    const uint32_t types[] = {QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (int rep = 0; rep < 200; rep++) {
            uint8_t b[256];
            random_block(types[t], b);
            check_block_decodes(types[t], b, "random bytes");
        }
    }
    /* F16/BF16/F32 rows decode element by element */
    uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};
    float y[4];
    quant_dequant_row(QT_F16, h, y, 4);
    CHECK(y[0] == 1 && y[1] == -2 && y[2] == 0x1p-24f && y[3] == 65504, "F16 row");
    uint16_t bf[2] = {0x3f80, 0xc2f7};
    quant_dequant_row(QT_BF16, bf, y, 2);
    CHECK(y[0] == 1 && y[1] == -123.5f, "BF16 row");
    /* an unsupported type yields NaN, not plausible numbers */
    uint8_t junk[84] = {0};
    float z[256];
    quant_dequant_row(QT_Q2_K, junk, z, 256);
    CHECK(isnan(z[0]) && isnan(z[255]), "Q2_K dequant should be NaN");
    CHECK(isnan(quant_dot_row(QT_Q2_K, junk, z, 256)), "Q2_K dot should be NaN");
}

/* ======================================================================
 * Error bounds
 *
 * What each format guarantees for an element x stored as y (d, m: the
 * stored f16 scale and min; delta(v) = |v|*2^-10 + 2^-24 bounds |v - f16(v)|
 * for any v that rounds to the f16 value, so it covers the quantizer having
 * used the unrounded scale):
 *  - Q8_0: |x-y| <= d/2 + 128*delta(d)            (round to nearest of 255 levels)
 *  - Q4_0/Q5_0: |x-y| <= d/2 + L*delta(d), L = 8/16, except at the top level
 *    (15/31), where the far end of the range is clamped: |x-y| <= d + L*delta(d);
 *  - Q4_1/Q5_1: |x-y| <= d/2 + L*delta(d) + delta(m), L = 15/31;
 *  - Q4_K/Q5_K/Q6_K: the element sits on the nearest level of its sub-block's
 *    stored grid (the quantizer requantizes against the stored, rounded
 *    scales): t = (x + m_j)/d_j (Q6_K: x/d_j) is within 1/2 of the level, or
 *    beyond the end level it was clamped to.  Sub-blocks whose 6-bit scale
 *    rounded to 0 store only the min and carry no per-element bound; they
 *    are counted and must be rare;
 *  - F16/BF16: half an ulp (2^-11 / 2^-8 relative, 2^-25 absolute for f16).
 * Every bound gets 8 f32 ulps of the magnitudes involved for the float
 * arithmetic of decode and quantize.
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

static void check_block_bounds(uint32_t type, const uint8_t *b, const float *x, bound_stats *s)
{
    const quant_traits *t = quant_traits_of(type);
    float y[256];
    quant_dequant_row(type, b, y, t->block_elems);
    const double ulp8 = 8 * 0x1p-24;
    if (type == QT_Q4_K || type == QT_Q5_K || type == QT_Q6_K) {
        for (int e = 0; e < 256; e++) {
            int lv = level_of(type, b, e);
            double dj, mj = 0;
            if (type == QT_Q6_K) {
                dj = quant_f16_to_f32(get_half(b + Q6K_D)) * (int8_t)b[Q6K_SC + e / 16];
            } else {
                int sc, mn;
                get_scale_min(b + QK_SC, e / 32, &sc, &mn);
                dj = (double)quant_f16_to_f32(get_half(b)) * sc;
                mj = (double)quant_f16_to_f32(get_half(b + 2)) * mn;
            }
            if (dj == 0) {
                s->unbounded++;
                continue;
            }
            if (type == QT_Q6_K) {
                double tv = x[e] / dj;
                note_level(s, dj > 0 ? tv : -tv, dj > 0 ? lv - 32 : 32 - lv,
                           dj > 0 ? -32 : -31, dj > 0 ? 31 : 32);
            } else {
                note_level(s, (x[e] + mj) / dj, lv, 0, type == QT_Q4_K ? 15 : 31);
            }
        }
        return;
    }
    for (uint32_t e = 0; e < t->block_elems; e++) {
        double err = fabs((double)x[e] - y[e]);
        double mag = fabs(x[e]) + fabs(y[e]);
        double d = fabs((double)quant_f16_to_f32(get_half(b)));
        double bound;
        switch (type) {
        case QT_F32: bound = 0; break;
        case QT_F16: bound = fabs(x[e]) * 0x1p-11 + 0x1p-25; break;
        case QT_BF16: bound = fabs(x[e]) * 0x1p-8 + 0x1p-134; break;
        case QT_Q8_0: bound = d / 2 + 128 * delta(d); break;
        case QT_Q4_0: bound = (level_of(type, b, (int)e) == 15 ? d : d / 2) + 8 * delta(d); break;
        case QT_Q5_0: bound = (level_of(type, b, (int)e) == 31 ? d : d / 2) + 16 * delta(d); break;
        case QT_Q4_1:
        case QT_Q5_1: {
            double m = quant_f16_to_f32(get_half(b + 2));
            bound = d / 2 + (type == QT_Q4_1 ? 15 : 31) * delta(d) + delta(m);
            mag += fabs(m);
            break;
        }
        default: bound = 0;
        }
        note(s, err, bound + ulp8 * mag);
    }
}

/* Quantizes x (n elements) to type, checks every block's bound; returns
 * the relative RMS error of the round trip. */
static double roundtrip(uint32_t type, const float *x, uint64_t n, bound_stats *s)
{
    uint64_t bytes = 0;
    CHECK(quant_row_bytes(type, n, &bytes), "row bytes");
    uint8_t *q = malloc(bytes);
    float *y = malloc(n * sizeof *y);
    CHECK(quant_quantize_row(type, x, q, n) == bytes, "%s: quantize size", quant_type_name(type));
    quant_dequant_row(type, q, y, n);
    const quant_traits *t = quant_traits_of(type);
    for (uint64_t b = 0; b < n / t->block_elems; b++)
        check_block_bounds(type, q + b * t->block_bytes, x + b * t->block_elems, s);
    double se = 0, sx = 0;
    for (uint64_t i = 0; i < n; i++) {
        se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        sx += (double)x[i] * x[i];
    }
    free(q);
    free(y);
    return sqrt(se / sx);
}

/* Relative RMS error ceilings on N(0,1) data: about 1.25-2x what these
 * formats reach on Gaussian data (a guard against a quantizer that is
 * silently worse, e.g. a broken scale search, which the per-element bounds
 * alone would not notice).  Measured values are printed. */
static double rms_ceiling(uint32_t type)
{
    switch (type) {
    case QT_F32: return 0;
    case QT_F16: return 3e-4;
    case QT_BF16: return 3e-3;
    case QT_Q8_0: return 0.008;
    case QT_Q6_K: return 0.02;
    case QT_Q5_0: case QT_Q5_1: case QT_Q5_K: return 0.05;
    default: return 0.11; /* 4-bit */
    }
}

static void test_roundtrip_bounds(void)
{
    static const uint64_t sizes[] = {256, 768, 4096};
    rng_seed(21);
    for (size_t ti = 0; ti < N_DEQUANT_TYPES; ti++) {
        uint32_t type = dequant_types[ti];
        bound_stats s = {0};
        double gauss_rms = 0;
        for (size_t si = 0; si < 3; si++) {
            for (int kind = 0; kind < 5; kind++) {
                float *x = malloc(sizes[si] * sizeof *x);
                fill_random(x, sizes[si], kind);
                double r = roundtrip(type, x, sizes[si], &s);
                if (kind == 0 && sizes[si] == 4096)
                    gauss_rms = r;
                free(x);
            }
        }
        printf("# %-5s rel. RMS error on N(0,1): %.5f; worst err/bound %.3f over %" PRIu64
               " elements, %" PRIu64 " in zero-scale sub-blocks\n",
               quant_type_name(type), gauss_rms, s.worst, s.checked, s.unbounded);
        CHECK(s.violations == 0, "%s: %" PRIu64 " elements beyond their bound (worst x%.3f)",
              quant_type_name(type), s.violations, s.worst);
        CHECK(s.unbounded * 100 <= s.checked, "%s: %" PRIu64 " elements in zero-scale sub-blocks",
              quant_type_name(type), s.unbounded);
        CHECK(gauss_rms <= rms_ceiling(type), "%s: rel. RMS %.5f > %.5f", quant_type_name(type),
              gauss_rms, rms_ceiling(type));
    }
}

/* Special inputs: all zeros, constants, a lone spike, and non-finite values
 * (which must not crash or trip the sanitizers; their bytes are unspecified). */
static void test_quantize_special_inputs(void)
{
    float x[256];
    uint8_t q[1024];
    float y[256];
    for (size_t ti = 0; ti < N_DEQUANT_TYPES; ti++) {
        uint32_t type = dequant_types[ti];
        const char *nm = quant_type_name(type);
        memset(x, 0, sizeof x);
        quant_quantize_row(type, x, q, 256);
        quant_dequant_row(type, q, y, 256);
        int nz = 0;
        for (int i = 0; i < 256; i++)
            nz += y[i] != 0;
        CHECK(nz == 0, "%s: zeros decode to %d non-zeros", nm, nz);

        for (int i = 0; i < 256; i++)
            x[i] = 0.75f;
        bound_stats s = {0};
        roundtrip(type, x, 256, &s);
        CHECK(s.violations == 0, "%s: constant block out of bounds", nm);

        memset(x, 0, sizeof x);
        x[77] = -3.0f;
        quant_quantize_row(type, x, q, 256);
        quant_dequant_row(type, q, y, 256);
        CHECK(fabsf(y[77] + 3.0f) <= 3.0f * 0x1p-7, "%s: spike -> %g", nm, y[77]);

        fill_random(x, 256, 0);
        x[3] = NAN;
        x[100] = INFINITY;
        x[200] = -INFINITY;
        quant_quantize_row(type, x, q, 256); /* must simply not crash */
    }
    CHECK(quant_quantize_row(QT_Q2_K, x, q, 256) == 0, "no Q2_K quantizer");
    CHECK(quant_quantize_row(999, x, q, 256) == 0, "unknown type");
    /* ggml's literal bytes for a zero block: Q4_0's d is 0.0f / -8 = -0.0
     * (f16 0x8000) and every level is 8 (0x88 bytes); Q8_0's d is +0. */
    memset(x, 0, sizeof x);
    quant_quantize_row(QT_Q4_0, x, q, 32);
    CHECK(q[0] == 0x00 && q[1] == 0x80 && q[2] == 0x88 && q[17] == 0x88,
          "Q4_0 zero block bytes %02x %02x %02x", q[0], q[1], q[2]);
    quant_quantize_row(QT_Q8_0, x, q, 32);
    CHECK(q[0] == 0 && q[1] == 0 && q[2] == 0 && q[33] == 0, "Q8_0 zero block bytes");
}

/* ======================================================================
 * Reference vectors for every quantizer
 *
 * The fixture files pin down Q8_0, Q4_0, Q5_0, Q5_1, Q4_K and Q6_K; Q4_1 and
 * Q5_K appear in none of them.  These hashes (FNV-1a 64 of the quantized
 * bytes) were produced by ggml's quantize_row_*_ref functions, compiled as a
 * stand-alone program outside this repository, on inputs from the
 * generator below.  The generator uses only integer arithmetic and exact
 * float operations, so it yields the same floats on any IEEE machine.  The
 * inputs cover: bell-shaped data, weight-sized data, all-positive (min
 * clamped at 0), outliers, sub-blocks of very different scales including
 * all-zero, tiny (1e-9) and constant ones, and all-negative data.
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

static void test_reference_vectors(void)
{
    static const struct {
        const char *type;
        uint64_t hash[6]; /* one per input kind, 4096 elements each */
    } want[] = {
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
        {"Q4_K",
         {0xc6b31f6639fb64b4ULL, 0x2d5d83b5bc473122ULL, 0x3ba5290990cf1924ULL,
          0x4af6aca367b68fcbULL, 0xcdd7becf93dfe101ULL, 0xd9143c8c4c69c017ULL}},
        {"Q5_K",
         {0x30a3311b6c9c9497ULL, 0x7fa232d96b7262c5ULL, 0x599a5117592fbff5ULL,
          0xc8fc033e28652620ULL, 0x779c08070760fac6ULL, 0xf71a6647f4e8ff08ULL}},
        {"Q6_K",
         {0x13fa44ee67334cceULL, 0x4d7f9dee6a0c295bULL, 0x58e7bbbfc7fc4953ULL,
          0xbf68c5723ad64d63ULL, 0xf42080c470ccd3b2ULL, 0xbb1435bb4f7ac50fULL}},
    };
    static float x[4096];
    static uint8_t q[4096 * 2];
    for (size_t t = 0; t < sizeof want / sizeof want[0]; t++) {
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
 * Dot products and matvec
 *
 * Bound: every implementation computes sum_i w_i*x_i in f32 where w_i is
 * the exactly decoded weight, in some order, possibly as d*sum(q*x) -
 * m*sum(x) per (sub-)block.  The error of any such summation of n terms is
 * at most about n*u*S, with u = 2^-24 and S the sum of the magnitudes of all
 * terms involved: |w_i*x_i| and, for the factored forms, |z_i*x_i| with z_i
 * the level-0 value (the block's offset, bounding |m| and |d*q - w|).  We
 * allow 2*(n_blocks + block_elems + 16)*u*S, far tighter than any indexing
 * or scale mistake (which is of order S).
 * ====================================================================== */

static double dot_exact(uint32_t type, const uint8_t *row, const float *x, uint64_t n, double *S)
{
    const quant_traits *t = quant_traits_of(type);
    float *w = malloc(n * sizeof *w), *z = malloc(n * sizeof *z);
    quant_dequant_row(type, row, w, n);
    /* z: the same row with all levels zeroed (scales kept) */
    uint64_t bytes = 0;
    quant_row_bytes(type, n, &bytes);
    uint8_t *zr = malloc(bytes);
    memcpy(zr, row, bytes);
    for (uint64_t b = 0; b < n / t->block_elems && t->block_elems > 1; b++) {
        uint8_t *blk = zr + b * t->block_bytes;
        uint8_t tmp[256];
        memcpy(tmp, blk, t->block_bytes);
        /* clear level fields: everything but the scale/min header bytes */
        switch (type) {
        case QT_Q4_0: case QT_Q5_0: case QT_Q8_0: memset(blk + 2, 0, t->block_bytes - 2); break;
        case QT_Q4_1: case QT_Q5_1: memset(blk + 4, 0, t->block_bytes - 4); break;
        case QT_Q4_K: case QT_Q5_K: memset(blk + 16, 0, t->block_bytes - 16); break;
        case QT_Q6_K: memset(blk, 0, Q6K_SC); break;
        }
    }
    if (t->block_elems > 1)
        quant_dequant_row(type, zr, z, n);
    else
        memset(z, 0, n * sizeof *z);
    double sum = 0;
    *S = 0;
    for (uint64_t i = 0; i < n; i++) {
        sum += (double)w[i] * x[i];
        *S += (fabs(w[i]) + fabs(z[i])) * fabs(x[i]);
    }
    free(w);
    free(z);
    free(zr);
    return sum;
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

static void test_dot_products(void)
{
    static const uint64_t sizes[] = {256, 512, 2048, 2304};
    rng_seed(33);
    for (size_t ti = 0; ti < N_DEQUANT_TYPES; ti++) {
        uint32_t type = dequant_types[ti];
        const quant_traits *t = quant_traits_of(type);
        double worst = 0;
        for (size_t si = 0; si < 4; si++) {
            uint64_t n = sizes[si];
            if (n % t->block_elems)
                continue;
            for (int rep = 0; rep < 6; rep++) {
                uint8_t *row = random_row(type, n);
                float *x = malloc(n * sizeof *x);
                fill_random(x, n, rep % 5);
                double S;
                double exact = dot_exact(type, row, x, n, &S);
                double tol = 2.0 * (double)(n / t->block_elems + t->block_elems + 16) * 0x1p-24 * S;
                const char *impl[] = {"oracle", "portable", "avx2"};
                for (int k = 0; k < 3; k++) {
                    if (k == 2 && !quant_kernels_available(QUANT_KERNELS_AVX2))
                        continue;
                    float got = k == 0 ? quant_dot_row(type, row, x, n)
                                       : quant_kernels_dot_row(k == 1 ? QUANT_KERNELS_PORTABLE
                                                                      : QUANT_KERNELS_AVX2,
                                                               type, row, x, n);
                    double err = fabs(got - exact);
                    if (err / tol > worst)
                        worst = err / tol;
                    CHECK(err <= tol, "%s n=%" PRIu64 " %s: %.9g vs exact %.9g (tol %.3g)", t->name,
                          n, impl[k], (double)got, exact, tol);
                }
                free(row);
                free(x);
            }
        }
        printf("# %-5s dot: worst |err|/tol %.4f\n", t->name, worst);
    }
}

/* The AVX2 tail paths for F32/F16/BF16 rows whose length is not a multiple
 * of 16, and short rows. */
static void test_dot_odd_lengths(void)
{
    rng_seed(34);
    const uint32_t types[] = {QT_F32, QT_F16, QT_BF16};
    for (int ti = 0; ti < 3; ti++) {
        for (uint64_t n = 1; n <= 40; n += 3) {
            uint8_t *row = random_row(types[ti], n);
            float x[40];
            fill_random(x, n, 0);
            double S, exact = dot_exact(types[ti], row, x, n, &S);
            double tol = 2.0 * (double)(n + 17) * 0x1p-24 * S;
            for (int k = 0; k < 2; k++) {
                if (k == 1 && !quant_kernels_available(QUANT_KERNELS_AVX2))
                    continue;
                float got = quant_kernels_dot_row(k ? QUANT_KERNELS_AVX2 : QUANT_KERNELS_PORTABLE,
                                                  types[ti], row, x, n);
                CHECK(fabs(got - exact) <= tol, "%s n=%" PRIu64 " kernels %d: %g vs %g",
                      quant_type_name(types[ti]), n, k, (double)got, exact);
            }
            free(row);
        }
    }
}

/* quant_matvec and both kernel sets over several shapes, including rows
 * longer than the kernels' column chunk (8192; the dense FFN's down
 * projection has 10240 columns), so the chunked accumulation is exercised;
 * rows are deliberately not packed (stride > row size). */
static void test_matvec(void)
{
    static const struct { uint64_t rows, n; } shapes[] = {
        {1, 256}, {7, 512}, {33, 2048}, {5, 2304}, {3, 10240}, {2, 16640}};
    const size_t n_shapes = sizeof shapes / sizeof shapes[0];
    rng_seed(44);
    for (size_t ti = 0; ti < N_DEQUANT_TYPES; ti++) {
        uint32_t type = dequant_types[ti];
        const quant_traits *t = quant_traits_of(type);
        for (size_t si = 0; si < n_shapes; si++) {
            uint64_t rows = shapes[si].rows, n = shapes[si].n;
            if (n % t->block_elems)
                continue;
            uint64_t rb = 0;
            quant_row_bytes(type, n, &rb);
            uint64_t stride = rb + 6;
            uint8_t *w = malloc(rows * stride);
            for (uint64_t r = 0; r < rows; r++) {
                uint8_t *row = random_row(type, n);
                memcpy(w + r * stride, row, rb);
                free(row);
            }
            float *x = malloc(n * sizeof *x), *y = malloc((rows + 1) * sizeof *y);
            fill_random(x, n, 1);
            for (int k = 0; k < 3; k++) {
                if (k == 2 && !quant_kernels_available(QUANT_KERNELS_AVX2))
                    continue;
                y[rows] = 12345.0f;
                if (k == 0)
                    quant_matvec(type, w, stride, rows, x, n, y);
                else
                    quant_kernels_matvec(k == 1 ? QUANT_KERNELS_PORTABLE : QUANT_KERNELS_AVX2, type,
                                         w, stride, rows, x, n, y);
                CHECK(y[rows] == 12345.0f, "%s: matvec wrote past y", t->name);
                for (uint64_t r = 0; r < rows; r++) {
                    double S, exact = dot_exact(type, w + r * stride, x, n, &S);
                    double tol =
                        2.0 * (double)(n / t->block_elems + t->block_elems + 16) * 0x1p-24 * S;
                    CHECK(fabs(y[r] - exact) <= tol,
                          "%s %" PRIu64 "x%" PRIu64 " kernels %d row %" PRIu64 ": %g vs %g", t->name,
                          rows, n, k, r, (double)y[r], exact);
                }
            }
            free(w);
            free(x);
            free(y);
        }
    }
    /* no rows, and rows of zero length */
    float x[32] = {1}, y[2] = {5, 5};
    uint8_t w[64] = {0};
    quant_matvec(QT_Q4_0, w, 18, 0, x, 32, y);
    CHECK(y[0] == 5, "zero rows must write nothing");
    quant_matvec(QT_Q4_0, w, 18, 2, x, 0, y);
    CHECK(y[0] == 0 && y[1] == 0, "zero-length rows give 0");
}

/* quant_matvec's promise to the threaded forward pass: a row's result is
 * the same bits however the rows are split between calls. */
static void test_matvec_split_is_bitwise_stable(void)
{
    rng_seed(45);
    const uint32_t types[] = {QT_Q4_0, QT_Q4_K, QT_Q6_K, QT_Q8_0, QT_F16, QT_F32};
    const uint64_t rows = 9, n = 10240;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint64_t rb = 0;
        quant_row_bytes(types[ti], n, &rb);
        uint8_t *w = malloc(rows * rb);
        for (uint64_t r = 0; r < rows; r++) {
            uint8_t *row = random_row(types[ti], n);
            memcpy(w + r * rb, row, rb);
            free(row);
        }
        float *x = malloc(n * sizeof *x), all[9], part[9];
        fill_random(x, n, 0);
        quant_matvec(types[ti], w, rb, rows, x, n, all);
        quant_matvec(types[ti], w, rb, 4, x, n, part);
        quant_matvec(types[ti], w + 4 * rb, rb, 1, x, n, part + 4);
        quant_matvec(types[ti], w + 5 * rb, rb, 4, x, n, part + 5);
        for (uint64_t r = 0; r < rows; r++)
            CHECK(bits_of(all[r]) == bits_of(part[r]), "%s row %" PRIu64 ": %.9g vs %.9g",
                  quant_type_name(types[ti]), r, (double)all[r], (double)part[r]);
        free(w);
        free(x);
    }
}

/* ======================================================================
 * Agreement with llama-quantize on the fixture models (read with
 * core/gguf.h; tensor data points into the mapping).
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
    RUN(test_traits);
    RUN(test_f16_decode_all);
    RUN(test_f16_rounding_midpoints);
    RUN(test_f16_edges);
    RUN(test_f16_vs_hardware);
    RUN(test_bf16);
    RUN(test_known_q4_0);
    RUN(test_known_q4_1);
    RUN(test_known_q5);
    RUN(test_known_q8_0);
    RUN(test_known_q4_K);
    RUN(test_known_q5_K);
    RUN(test_known_q6_K);
    RUN(test_random_blocks_decode);
    RUN(test_roundtrip_bounds);
    RUN(test_quantize_special_inputs);
    RUN(test_reference_vectors);
    RUN(test_dot_products);
    RUN(test_dot_odd_lengths);
    RUN(test_matvec);
    RUN(test_matvec_split_is_bitwise_stable);
    RUN(test_llama_quantize_agreement);
    TESTS_DONE();
}
