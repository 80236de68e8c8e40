/* test_quant_kquant.c: the K-quant formats Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * (core/format/quant_kquant.c).
 *
 * What is checked, and against what:
 *  - known-value blocks: bytes assembled bit by bit from the layout in
 *    ggml-common.h (tests/quant_layout.h, independently of core/'s
 *    decoders), decoded and compared with values computed from the levels;
 *    then random bytes in every field;
 *  - Q2_K and Q3_K blocks decoded bit for bit as llama.cpp's gguf-py
 *    decodes them (tests/data/quant);
 *  - round trips on random data of several sizes and distributions: every
 *    element on the nearest level of its stored sub-block grid
 *    (quant_layout.h), the RMS error on N(0,1) data under a ceiling;
 *  - the quantizers' bytes against ggml's on the reference inputs
 *    (quant_testlib.h): byte-identical with what llama-quantize writes
 *    without an importance matrix.
 * The fixture files' Q4_K/Q6_K tensors: test_quant_legacy.c.
 */
#include "quant_layout.h"

static const uint32_t k_types[] = {QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K};
#define N_K (sizeof k_types / sizeof k_types[0])

/* ======================================================================
 * Known-value and random blocks
 * ====================================================================== */

static void test_known_q2_K(void)
{
    uint8_t b[84] = {0};
    set_half(b + Q2K_D, 0x3800);    /* d = 0.5 */
    set_half(b + Q2K_DMIN, 0x3400); /* dmin = 0.25 */
    for (int j = 0; j < 16; j++)
        b[Q2K_SC + j] = (uint8_t)(((j + 1) & 15) | ((15 - j) << 4));
    for (int e = 0; e < 256; e++)
        put_level(QT_Q2_K, b, e, (e * 3 + e / 16) % 4);
    /* element 201: half 1, row 2 (bits 4-5), byte 9 of the half's 32 */
    CHECK(((b[Q2K_QS + 32 + 9] >> 4) & 3) == (201 * 3 + 12) % 4, "element 201 placement");
    float y[256];
    quant_dequant_row(QT_Q2_K, b, y, 256);
    /* element 0: sub-block 0 (scale 1, min 15), level 0 */
    CHECK(y[0] == -3.75f, "y[0] = %g", y[0]);
    /* element 201: sub-block 12 (scale 13, min 3), level 615 % 4 = 3 */
    CHECK(y[201] == 0.5f * 13 * 3 - 0.75f, "y[201] = %g", y[201]);
    check_block_decodes(QT_Q2_K, b, "pattern");
}

static void test_known_q3_K(void)
{
    uint8_t b[110] = {0};
    set_half(b + Q3K_D, 0x3400); /* d = 0.25 */
    for (int j = 0; j < 16; j++)
        put_q3_scale(b + Q3K_SC, j, (j * 5) % 64 - 32);
    for (int e = 0; e < 256; e++)
        put_level(QT_Q3_K, b, e, (e * 7 + 1) % 8);
    /* scale 13 (65 % 64 - 32 = -31, stored 1): low nibble in the high
     * nibble of byte 5, high bits (0) in byte 9 at bits 6-7 */
    CHECK((b[Q3K_SC + 5] >> 4) == 1 && ((b[Q3K_SC + 9] >> 6) & 3) == 0, "scale 13 placement");
    /* element 100: level 701 % 8 = 5, third bit in bit 3 of hmask[4] */
    CHECK(b[Q3K_HM + 4] & 0x08, "element 100 high bit");
    float y[256];
    quant_dequant_row(QT_Q3_K, b, y, 256);
    /* element 0: scale -32, level 1 -> 0.25 * -32 * (1 - 4) */
    CHECK(y[0] == 24.0f, "y[0] = %g", y[0]);
    /* element 255: scale 75 % 64 - 32 = -21, level 1786 % 8 = 2 */
    CHECK(y[255] == 0.25f * -21 * -2, "y[255] = %g", y[255]);
    check_block_decodes(QT_Q3_K, b, "pattern");
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

static void test_random_blocks_decode(void)
{
    rng_seed(5);
    for (size_t t = 0; t < N_K; t++) {
        for (int rep = 0; rep < 200; rep++) {
            uint8_t b[256];
            random_block(k_types[t], b);
            check_block_decodes(k_types[t], b, "random bytes");
        }
    }
}

static void test_gguf_py_vectors(void)
{
    check_gguf_py_vectors(QT_Q2_K);
    check_gguf_py_vectors(QT_Q3_K);
}

/* ======================================================================
 * Quantizers
 * ====================================================================== */

/* Relative RMS error ceilings on N(0,1) data, a guard against a quantizer
 * that is silently worse (the per-element bounds alone would not notice a
 * broken scale search).  Q2_K and Q3_K: ggml's reference quantizers reach
 * 0.296 and 0.151 on N(0,1) rows of 4096 (their bytes are ours, see
 * test_reference_vectors); the ceilings allow for other data.  The others:
 * about 1.25-2x what they reach.  Measured values are printed. */
static double rms_ceiling(uint32_t type)
{
    switch (type) {
    case QT_Q2_K: return 0.31;
    case QT_Q3_K: return 0.16;
    case QT_Q4_K: return 0.11;
    case QT_Q5_K: return 0.05;
    default: return 0.02; /* Q6_K */
    }
}

static void test_roundtrip_bounds(void)
{
    rng_seed(21);
    for (size_t ti = 0; ti < N_K; ti++) {
        uint32_t type = k_types[ti];
        bound_stats s = {0};
        double gauss_rms = roundtrip_sweep(type, check_block_bounds, &s);
        CHECK(s.violations == 0, "%s: %" PRIu64 " elements beyond their bound (worst x%.3f)",
              quant_type_name(type), s.violations, s.worst);
        /* Q2_K's 4-bit sub-block scales store 0 for any sub-block whose
         * scale is below 1/30 of the block's largest: the outlier input
         * (2% of the elements x40) does that to about 1 in 9 of its
         * sub-blocks, about 6% of the sweep; the others: rare */
        const uint64_t pct = type == QT_Q2_K ? 8 : 1;
        CHECK(s.unbounded * 100 <= pct * (s.checked + s.unbounded), "%s: %" PRIu64 " elements in zero-scale sub-blocks",
              quant_type_name(type), s.unbounded);
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
    for (size_t ti = 0; ti < N_K; ti++) {
        uint32_t type = k_types[ti];
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
}

/* Hashes: quant_testlib.h says where they come from (Q2_K, Q3_K:
 * quantize_row_q2_K_ref / quantize_row_q3_K_ref, which llama-quantize runs
 * when it has no importance matrix). */
static void test_reference_vectors(void)
{
    static const reference_hashes want[] = {
        {"Q2_K",
         {0x748cf6d67014a430ULL, 0x8e45443f1db1a500ULL, 0x3891d79da10864c0ULL,
          0xdf56abf8ffd8d30dULL, 0x5aec6685f105795cULL, 0x3874fa1348e3d337ULL}},
        {"Q3_K",
         {0x570db20fd5334c85ULL, 0x02057b7733c42a2dULL, 0x05c73451c908e65eULL,
          0xf7802c01013645dfULL, 0x146352fc72ce3713ULL, 0xb1061de7586aa081ULL}},
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
    check_reference_hashes(want, sizeof want / sizeof want[0]);
}

int main(void)
{
    RUN(test_known_q2_K);
    RUN(test_known_q3_K);
    RUN(test_known_q4_K);
    RUN(test_known_q5_K);
    RUN(test_known_q6_K);
    RUN(test_random_blocks_decode);
    RUN(test_gguf_py_vectors);
    RUN(test_roundtrip_bounds);
    RUN(test_quantize_special_inputs);
    RUN(test_reference_vectors);
    TESTS_DONE();
}
