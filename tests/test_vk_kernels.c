/* test_vk_kernels.c: every Vulkan kernel against a CPU reference, on random
 * non-zero data, over several shapes each (odd sizes and GLM-4.7-Flash's
 * real sizes), in the spirit of llama.cpp's test-backend-ops.
 *
 * The reference dequantizes the stored blocks exactly and accumulates in
 * float64.  Tolerances follow from float32 summation: a GPU thread adds
 * 4-element dot products into its accumulator (at most K/4 additions when
 * one thread does a whole row), then a team tree adds log2(TEAM) more, and
 * recursive summation's error is bounded by n * 2^-24 * sum|w_k x_k|
 * (Higham, "Accuracy and Stability of Numerical Algorithms", 4.2).  We allow
 * 2 * (K/4 + unit + 16) * 2^-24 * sum|w_k x_k|: about 7e-5 of sum|w x| at
 * K = 2048, while one wrong 32-element block moves an output by ~1e-2 of it
 * and a single wrong element by ~5e-4.  */
#include "testlib.h"
#include "vk_kernels.h"
#include "vk_testutil.h"

static const double U24 = 5.9604644775390625e-08; /* 2^-24 */

static vk_kb KB;
static err_t KERR;

/* ---- matrix-vector --------------------------------------------------------------- */

typedef struct {
    uint32_t type, K, N, nz;
    bool norm, acc, ids;
    const char *what;
} mv_case;

static mv_case MV;

static float *random_vec(uint64_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    for (uint64_t i = 0; i < n; i++)
        v[i] = tu_gauss() * scale;
    return v;
}

/* Reference y = W[m] . x (double), plus the bound sum|w x|. */
static void ref_dot_rows(uint32_t type, const uint8_t *w, uint32_t K, uint32_t rows, const float *x, double *y,
                         double *mag)
{
    float *row = malloc(K * sizeof *row);
    uint64_t rb = tu_row_bytes(type, K);
    for (uint32_t r = 0; r < rows; r++) {
        tu_dequant(type, w + r * rb, row, K);
        double s = 0, m = 0;
        for (uint32_t k = 0; k < K; k++) {
            s += (double)row[k] * x[k];
            m += fabs((double)row[k] * x[k]);
        }
        y[r] = s;
        mag[r] = m;
    }
    free(row);
}

static double chain_bound(uint32_t type, uint32_t K)
{
    vk_qlayout l;
    vk_qlayout_of(type, &l);
    return 2.0 * (K / 4.0 + l.unit + 16) * U24;
}

static void test_mv(void)
{
    const mv_case *tc = &MV;
    uint32_t nmat = tc->ids ? tc->nz + 3 : tc->nz;
    uint64_t rb = tu_row_bytes(tc->type, tc->K);
    uint64_t wbytes = rb * tc->N * nmat;
    uint8_t *w = malloc(wbytes);
    tu_fill_random(tc->type, w, (uint64_t)tc->K * tc->N * nmat);
    vk_tensor t;
    CHECK(tu_tensor(tc->type, tc->K, tc->N, nmat, w, &t) == 0, "upload");

    uint32_t x_z = tc->K + 5, y_z = tc->N + 3; /* odd strides */
    float *x = random_vec((uint64_t)x_z * tc->nz, 1.0f);
    float *nw = random_vec(tc->K, 0.1f);
    for (uint32_t i = 0; i < tc->K; i++)
        nw[i] += 1.0f;
    int32_t ids[16];
    for (uint32_t z = 0; z < tc->nz; z++)
        ids[z] = (int32_t)((z * 7 + 2) % nmat);
    vk_buf bx = tu_host((uint64_t)x_z * tc->nz + 8), by = tu_host((uint64_t)y_z * tc->nz + 8);
    vk_buf bn = tu_host(tc->K), bi = tu_host(16);
    memcpy(bx.map + 8 * 4, x, (uint64_t)x_z * tc->nz * 4);
    memcpy(bn.map, nw, tc->K * 4);
    memcpy(bi.map, ids, sizeof ids);
    float *y0 = random_vec((uint64_t)y_z * tc->nz, 1.0f);
    if (tc->acc)
        memcpy(by.map, y0, (uint64_t)y_z * tc->nz * 4);

    vk_vec norm = {bn, 0}, idv = {bi, 0};
    vk_mv_args a = {.name = "mv",
                    .w = &t,
                    .x = {bx, 8},
                    .x_z = x_z,
                    .y = {by, 0},
                    .y_z = y_z,
                    .nz = tc->nz,
                    .norm = tc->norm ? &norm : NULL,
                    .eps = 1e-5f,
                    .accumulate = tc->acc,
                    .ids = tc->ids ? &idv : NULL};
    vk_call call;
    CHECK(vk_k_mv(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");

    const float *gy = (const float *)by.map;
    double *ry = malloc(tc->N * sizeof *ry), *mag = malloc(tc->N * sizeof *mag);
    float *xin = malloc(tc->K * sizeof *xin);
    double worst = 0;
    uint32_t bad = 0;
    for (uint32_t z = 0; z < tc->nz; z++) {
        const float *xz = x + (uint64_t)z * x_z;
        memcpy(xin, xz, tc->K * 4);
        if (tc->norm) {
            double ss = 0;
            for (uint32_t i = 0; i < tc->K; i++)
                ss += (double)xz[i] * xz[i];
            double sc = 1.0 / sqrt(ss / tc->K + 1e-5);
            for (uint32_t i = 0; i < tc->K; i++)
                xin[i] = (float)(xz[i] * sc * nw[i]);
        }
        uint32_t m = tc->ids ? (uint32_t)ids[z] : z;
        ref_dot_rows(tc->type, w + (uint64_t)m * rb * tc->N, tc->K, tc->N, xin, ry, mag);
        for (uint32_t r = 0; r < tc->N; r++) {
            double want = ry[r] + (tc->acc ? y0[(uint64_t)z * y_z + r] : 0);
            double got = gy[(uint64_t)z * y_z + r];
            /* the normalized input itself carries ~K ulps of the norm's sum */
            double tol = chain_bound(tc->type, tc->K) * (mag[r] + (tc->acc ? fabs(want) : 0)) * (tc->norm ? 2 : 1) +
                         1e-30;
            double e = fabs(got - want) / tol;
            if (!(e <= 1.0)) {
                if (bad < 3)
                    printf("#   z %u row %u: gpu %.9g ref %.9g (tol %.3g)\n", z, r, got, want, tol);
                bad++;
            }
            if (e > worst || isnan(e))
                worst = e;
        }
    }
    CHECK(bad == 0, "%u of %u outputs outside tolerance (worst %.3g x tol)", bad, tc->N * tc->nz, worst);
    /* rows past N and z past nz untouched: the poison around them stays */
    if (tc->nz && !tc->acc)
        CHECK(isnan(gy[tc->N]) || y_z == tc->N, "row N was written");
    free(w), free(x), free(nw), free(y0), free(ry), free(mag), free(xin);
    tu_reset_buffers();
}

static void run_mv(uint32_t type, uint32_t K, uint32_t N, uint32_t nz, bool norm, bool acc, bool ids, const char *what)
{
    MV = (mv_case){type, K, N, nz, norm, acc, ids, what};
    char name[160];
    snprintf(name, sizeof name, "mv %s K=%u N=%u z=%u%s%s%s (%s)", tu_type_name(type), K, N, nz,
             norm ? " norm" : "", acc ? " acc" : "", ids ? " ids" : "", what);
    RUN_NAMED(test_mv, name);
}

static void mv_cases(void)
{
    static const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0,
                                     QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        uint32_t t = types[i];
        bool k = t == QT_Q4_K || t == QT_Q5_K || t == QT_Q6_K;
        bool f = t == QT_F32 || t == QT_F16 || t == QT_BF16;
        run_mv(t, k ? 256 : 32, 1, 1, false, false, false, "one block");
        run_mv(t, k ? 768 : 96, 37, 1, false, false, false, "odd rows");
        run_mv(t, 2048, 77, 2, true, false, false, "norm fused, 2 z");
        run_mv(t, k ? 512 : 160, 29, 3, false, true, true, "expert ids, accumulate");
        if (f)
            run_mv(t, 13, 5, 2, false, false, false, "row length not a multiple of 8");
    }
    /* GLM-4.7-Flash shapes (Q4_0 file: Q4_0 matrices, F32 router, Q6_K head slice) */
    run_mv(QT_Q4_0, 2048, 768, 1, true, false, false, "attn_q_a");
    run_mv(QT_Q4_0, 2048, 576, 1, true, false, false, "attn_kv_a_mqa");
    run_mv(QT_Q4_0, 768, 5120, 1, true, false, false, "attn_q_b");
    run_mv(QT_Q4_0, 192, 512, 20, false, false, false, "attn_k_b per head");
    run_mv(QT_Q4_0, 5120, 2048, 1, false, true, false, "attn_output + residual");
    run_mv(QT_F32, 2048, 64, 1, true, false, false, "ffn_gate_inp");
    run_mv(QT_Q4_0, 10240, 2048, 1, false, true, false, "dense ffn_down (input from memory)");
    run_mv(QT_Q6_K, 2048, 4099, 1, true, false, false, "output head slice");
}

int main(void)
{
    if (tu_gpu_open()) {
        /* CI installs lavapipe: no device is a failure, not a skip. */
        printf("FAIL - vulkan device: none usable\n");
        return 1;
    }
    KB = (vk_kb){&G.c, &G.pipes, &KERR};
    mv_cases();
    tu_gpu_close();
    TESTS_DONE();
}
