/* test_quant_dot.c: the dot products and matrix-vector products over every
 * type with codecs (core/format/quant.c's oracle dot, core/format/quant_fast.c's kernel
 * sets), against a float64 dot of the exactly dequantized weights, within a
 * stated f32 bound; rows longer than the kernels' column chunk; a row's
 * result independent of how rows are split between calls.
 */
#include "format/quant_fast.h"
#include "quant_testlib.h"

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

static void test_dot_products(void)
{
    static const uint64_t sizes[] = {256, 512, 2048, 2304};
    rng_seed(33);
    uint32_t types[QT_COUNT];
    int n_types = codec_types(types);
    for (int ti = 0; ti < n_types; ti++) {
        uint32_t type = types[ti];
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
        printf("# %-7s dot: worst |err|/tol %.4f\n", t->name, worst);
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
    uint32_t types[QT_COUNT];
    int n_types = codec_types(types);
    for (int ti = 0; ti < n_types; ti++) {
        uint32_t type = types[ti];
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
    const uint32_t types[] = {QT_Q4_0, QT_Q4_K, QT_Q6_K, QT_Q8_0, QT_F16, QT_F32, QT_Q2_K, QT_IQ4_NL, QT_MXFP4, QT_IQ2_XXS};
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

int main(void)
{
    RUN(test_dot_products);
    RUN(test_dot_odd_lengths);
    RUN(test_matvec);
    RUN(test_matvec_split_is_bitwise_stable);
    TESTS_DONE();
}
