/* test_quant_float.c: the type table and the float formats (core/format/quant.h).
 *
 * What is checked, and against what:
 *  - type table: block geometry of every ggml type id, names, families,
 *    codecs, row sizes;
 *  - f16/bf16: all 65536 half patterns, every rounding midpoint between
 *    neighbouring halves (ties to even), overflow and underflow thresholds,
 *    subnormals, inf, NaN; random f32 patterns against the CPU's own F16C
 *    conversion where the CPU has it (an oracle independent of our code);
 *  - F32/F16/BF16 rows: round trips within half an ulp.
 * The other families: test_quant_legacy.c, test_quant_kquant.c,
 * test_quant_iq.c; dot products and matvec: test_quant_dot.c.
 */
#include "quant_layout.h"
#include "format/quant_fast.h"

/* ======================================================================
 * Type table
 * ====================================================================== */

static void test_traits(void)
{
    static const struct {
        uint32_t type;
        const char *name;
        uint32_t elems, bytes;
        bool codecs;
        quant_family family;
    } want[] = {
        {QT_F32, "F32", 1, 4, true, QF_FLOAT},          {QT_F16, "F16", 1, 2, true, QF_FLOAT},
        {QT_Q4_0, "Q4_0", 32, 18, true, QF_LEGACY},     {QT_Q4_1, "Q4_1", 32, 20, true, QF_LEGACY},
        {QT_Q5_0, "Q5_0", 32, 22, true, QF_LEGACY},     {QT_Q5_1, "Q5_1", 32, 24, true, QF_LEGACY},
        {QT_Q8_0, "Q8_0", 32, 34, true, QF_LEGACY},     {QT_Q8_1, "Q8_1", 32, 36, false, QF_OTHER},
        {QT_Q2_K, "Q2_K", 256, 84, true, QF_KQUANT},    {QT_Q3_K, "Q3_K", 256, 110, true, QF_KQUANT},
        {QT_Q4_K, "Q4_K", 256, 144, true, QF_KQUANT},   {QT_Q5_K, "Q5_K", 256, 176, true, QF_KQUANT},
        {QT_Q6_K, "Q6_K", 256, 210, true, QF_KQUANT},   {QT_Q8_K, "Q8_K", 256, 292, false, QF_OTHER},
        {QT_IQ2_XXS, "IQ2_XXS", 256, 66, true, QF_GRID}, {QT_IQ2_XS, "IQ2_XS", 256, 74, true, QF_GRID},
        {QT_IQ3_XXS, "IQ3_XXS", 256, 98, true, QF_GRID}, {QT_IQ1_S, "IQ1_S", 256, 50, true, QF_GRID},
        {QT_IQ4_NL, "IQ4_NL", 32, 18, true, QF_IQ4},    {QT_IQ3_S, "IQ3_S", 256, 110, true, QF_GRID},
        {QT_IQ2_S, "IQ2_S", 256, 82, true, QF_GRID},    {QT_IQ4_XS, "IQ4_XS", 256, 136, true, QF_IQ4},
        {QT_IQ1_M, "IQ1_M", 256, 56, true, QF_GRID},    {QT_BF16, "BF16", 1, 2, true, QF_FLOAT},
        {QT_TQ2_0, "TQ2_0", 256, 66, false, QF_OTHER},  {QT_MXFP4, "MXFP4", 32, 17, true, QF_IQ4},
        {QT_NVFP4, "NVFP4", 64, 36, false, QF_OTHER},   {QT_Q1_0, "Q1_0", 128, 18, false, QF_OTHER},
        {QT_Q2_0, "Q2_0", 64, 18, false, QF_OTHER},     {QT_F64, "F64", 1, 8, false, QF_OTHER},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const quant_traits *t = quant_traits_of(want[i].type);
        CHECK(t != NULL, "type %u unknown", want[i].type);
        if (!t)
            continue;
        CHECK(strcmp(t->name, want[i].name) == 0, "type %u named %s", want[i].type, t->name);
        CHECK(t->block_elems == want[i].elems && t->block_bytes == want[i].bytes,
              "%s: %u elems / %u bytes", t->name, t->block_elems, t->block_bytes);
        CHECK(t->can_dequant == want[i].codecs && (t->decode_block != NULL) == want[i].codecs,
              "%s can_dequant", t->name);
        CHECK(t->can_quantize == want[i].codecs && (t->quantize_block != NULL) == want[i].codecs,
              "%s can_quantize", t->name);
        CHECK(t->family == want[i].family, "%s family %d", t->name, (int)t->family);
        CHECK(quant_type_from_name(want[i].name) == (int)want[i].type, "from_name %s", want[i].name);
    }
    /* Removed ids (4, 5, 31-33, 36-38) and out-of-range ids are unknown. */
    const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK(quant_traits_of(unknown[i]) == NULL, "id %u should be unknown", unknown[i]);
        CHECK(strcmp(quant_type_name(unknown[i]), "?") == 0, "name of %u", unknown[i]);
    }
    CHECK(quant_type_from_name("q4_k") == QT_Q4_K && quant_type_from_name("iq2_xxs") == QT_IQ2_XXS,
          "case-insensitive name");
    CHECK(quant_type_from_name("Q4_K_M") == -1, "file type is not a tensor type");
    CHECK(quant_type_from_name("") == -1 && quant_type_from_name(NULL) == -1, "empty name");

    uint64_t b = 0;
    CHECK(quant_row_bytes(QT_Q4_0, 2048, &b) && b == 64 * 18, "Q4_0 row of 2048: %" PRIu64, b);
    CHECK(quant_row_bytes(QT_Q6_K, 2048, &b) && b == 8 * 210, "Q6_K row of 2048: %" PRIu64, b);
    CHECK(quant_row_bytes(QT_MXFP4, 2048, &b) && b == 64 * 17, "MXFP4 row of 2048: %" PRIu64, b);
    CHECK(quant_row_bytes(QT_IQ2_XXS, 2048, &b) && b == 8 * 66, "IQ2_XXS row of 2048: %" PRIu64, b);
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

    /* a type without codecs decodes to NaN and refuses to quantize: a
     * caller that skipped the check sees it at once */
    uint8_t junk[66] = {0};
    float z[256], x[256] = {0};
    quant_dequant_row(QT_TQ2_0, junk, z, 256);
    CHECK(isnan(z[0]) && isnan(z[255]), "TQ2_0 dequant should be NaN");
    CHECK(isnan(quant_dot_row(QT_TQ2_0, junk, z, 256)), "TQ2_0 dot should be NaN");
    CHECK(quant_quantize_row(QT_TQ2_0, x, junk, 256) == 0, "no TQ2_0 quantizer");
    CHECK(quant_quantize_row(999, x, junk, 256) == 0, "unknown type");
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
 * Float rows
 * ====================================================================== */

static void test_float_rows(void)
{
    rng_seed(21);
    const uint32_t types[] = {QT_F32, QT_F16, QT_BF16};
    const double ceiling[] = {0, 3e-4, 3e-3}; /* rel. RMS on N(0,1): half an ulp */
    for (int ti = 0; ti < 3; ti++) {
        bound_stats s = {0};
        double rms = roundtrip_sweep(types[ti], check_block_bounds, &s);
        CHECK(s.violations == 0, "%s: %" PRIu64 " elements beyond their bound (worst x%.3f)",
              quant_type_name(types[ti]), s.violations, s.worst);
        CHECK(rms <= ceiling[ti], "%s: rel. RMS %.5f", quant_type_name(types[ti]), rms);
        check_special_inputs(types[ti]);
    }
    /* F16/BF16/F32 rows decode element by element */
    uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};
    float y[4];
    quant_dequant_row(QT_F16, h, y, 4);
    CHECK(y[0] == 1 && y[1] == -2 && y[2] == 0x1p-24f && y[3] == 65504, "F16 row");
    uint16_t bf[2] = {0x3f80, 0xc2f7};
    quant_dequant_row(QT_BF16, bf, y, 2);
    CHECK(y[0] == 1 && y[1] == -123.5f, "BF16 row");
}

int main(void)
{
    RUN(test_traits);
    RUN(test_f16_decode_all);
    RUN(test_f16_rounding_midpoints);
    RUN(test_f16_edges);
    RUN(test_f16_vs_hardware);
    RUN(test_bf16);
    RUN(test_float_rows);
    TESTS_DONE();
}
