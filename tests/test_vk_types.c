/* test_vk_types.c: the low-bit weight types -- Q2_K, Q3_K, IQ4_NL, IQ4_XS,
 * MXFP4, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M -- in every
 * Vulkan kernel that reads weights, against the CPU reference on random
 * blocks, over odd and GLM-4.7-Flash shapes: the decode mat-vecs (the
 * x-stationary family and the mv family, each geometry variant), the
 * experts' gate/up + down with ids read from a GPU buffer, v_b after the
 * attention's combine, the embedding rows, and the prefill mat-mats (fp32
 * tiles, or tensor cores where the device has them), batched heads and the
 * experts' work lists.
 *
 * The reference: the core's decoders (core/format/quant_iq.c, quant_iq4.c,
 * quant_kquant.c; bit-exact with gguf-py, tests/test_quant_*.c), products
 * summed in float64.  Blocks: every byte random (every code, grid index,
 * sign and sub-scale pattern), then the block scales set to random finite
 * values of either sign (an f16 d in [1e-3, 1e-2); MXFP4's E8M0 byte in
 * 118..125), so every output is non-zero and of unit size.
 *
 * Tolerances, as test_vk_matvec.c's (Higham's bound for recursive f32
 * summation): a matvec within 2 (K/4 + unit + 16) 2^-24 sum|terms x| -- the
 * terms being |w| except where a kernel sums two parts apart (Q2_K: d sc q
 * and dmin m; IQ1: dl g and dl delta, at most 9/7 |w| for the -1/+1
 * points) -- doubled for a fused RMSNorm's own rounding; the tensor-core
 * mat-mats add 2^-10 + 2^-22 of sum|w x| for the fp16 operands; an
 * embedding row within 4 ulps of its largest value (the decoders compute
 * ggml's products in ggml's order: in practice equal). */
#include "testlib.h"
#include "vk_kernels.h"
#include "vk_testutil.h"

static const uint32_t TYPES[] = {QT_Q2_K, QT_Q3_K, QT_IQ4_NL, QT_IQ4_XS, QT_MXFP4, QT_IQ2_XXS,
                                 QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S, QT_IQ1_S, QT_IQ1_M};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

/* Elements per block (32 for IQ4_NL and MXFP4, else 256). */
static uint32_t blk_of(uint32_t t)
{
    return quant_traits_of(t)->block_elems;
}

/* Variant sets (vk_testutil.h's VARIANTS): the defaults; the x-stationary
 * ones a GPU takes and the mv family. */
enum { V_DEF = 0x01, V_GPU_MV = 0x13 };

/* On a CPU device (lavapipe in CI) llvmpipe compiles every specialization on
 * its first dispatch -- nearly all of this program's time on a clean machine
 * (146 s cold, 30 s with Mesa's shader cache warm) -- so there, as in
 * test_vk_matvec.c's lvp_vars, the variants that compile nothing of their own
 * are left out, and a real GPU keeps every one:
 *  - the long-rows variant (xs_j=32): at lavapipe's subgroup of 8 or 16 these
 *    rows need at most 8 units a lane, xs_j's default, so it specializes
 *    exactly as the default does (measured: not one pipeline of its own) and
 *    would run the default's kernel again on other random data;
 *  - the 8-rows variant (rows, passes, workgroup, padding: the same loops
 *    around every type's unit) on one type of each block size, Q2_K (256)
 *    and IQ4_NL (32), not on the other ten (~0.4 s of compiling each). */
enum { V_LONG_ROWS = 0x02, V_ROWS8 = 0x04 };
static int lvp_vars(uint32_t type, int vars)
{
    if (!tu_cpu_device())
        return vars;
    vars &= ~V_LONG_ROWS;
    if (type != QT_Q2_K && type != QT_IQ4_NL)
        vars &= ~V_ROWS8;
    return vars;
}

/* ---- matrix-vector ------------------------------------------------------------------ */

typedef struct {
    uint32_t type, K, N, nz;
    bool norm, acc, ids;
    const char *what;
} mv_case;
static mv_case MV;

static void test_mv(void)
{
    const mv_case *tc = &MV;
    uint32_t nmat = tc->ids ? tc->nz + 3 : tc->nz;
    uint64_t rb = tu_row_bytes(tc->type, tc->K);
    vk_tensor t;
    uint8_t *w = rand_tensor(tc->type, tc->K, tc->N, nmat, &t);
    CHECK(t.n_mat == nmat, "upload");

    uint32_t x_z = tc->K + 5, y_z = tc->N + 3; /* odd strides */
    float *x = random_vec((uint64_t)x_z * tc->nz, 1.0f), *nw = norm_weights(tc->K);
    int32_t ids[64];
    for (uint32_t z = 0; z < tc->nz; z++)
        ids[z] = (int32_t)((z * 7 + 2) % nmat);
    vk_buf bx = tu_host((uint64_t)x_z * tc->nz + 8), by = tu_host((uint64_t)y_z * tc->nz + 8);
    vk_buf bn = host_copy(nw, tc->K), bi = host_copy(ids, 64);
    memcpy(bx.map + 8 * 4, x, (uint64_t)x_z * tc->nz * 4);
    float *y0 = random_vec((uint64_t)y_z * tc->nz, 1.0f);
    if (tc->acc)
        memcpy(by.map, y0, (uint64_t)y_z * tc->nz * 4);
    vk_vec norm = {bn, 0}, idv = {bi, 0};
    vk_mv_args a = {.name = "mv", .w = &t, .x = {bx, 8}, .x_z = x_z, .y = {by, 0}, .y_z = y_z, .nz = tc->nz,
                    .norm = tc->norm ? &norm : NULL, .eps = 1e-5f, .accumulate = tc->acc,
                    .ids = tc->ids ? &idv : NULL};
    vk_call call;
    CHECK(vk_k_mv(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");

    const float *gy = (const float *)by.map;
    double *ry = malloc(tc->N * sizeof *ry), *mag = malloc(tc->N * sizeof *mag), worst = 0;
    float *xin = malloc(tc->K * sizeof *xin);
    uint32_t bad = 0;
    for (uint32_t z = 0; z < tc->nz; z++) {
        const float *xz = x + (uint64_t)z * x_z;
        if (tc->norm)
            rmsnorm_ref(xz, nw, tc->K, 1e-5f, xin);
        else
            memcpy(xin, xz, tc->K * 4);
        uint32_t m = tc->ids ? (uint32_t)ids[z] : z;
        ref_dot_rows(tc->type, w + (uint64_t)m * rb * tc->N, tc->K, tc->N, xin, ry, mag);
        for (uint32_t r = 0; r < tc->N; r++) {
            double want = ry[r] + (tc->acc ? y0[(uint64_t)z * y_z + r] : 0);
            double got = gy[(uint64_t)z * y_z + r];
            double tol = chain_bound(tc->type, tc->K) * (mag[r] + (tc->acc ? fabs(want) : 0)) * (tc->norm ? 2 : 1) +
                         1e-30;
            double e = fabs(got - want) / tol;
            if (!(e <= 1.0) && bad++ < 3)
                printf("#   z %u row %u: gpu %.9g ref %.9g (tol %.3g)\n", z, r, got, want, tol);
            if (e > worst || isnan(e))
                worst = e;
        }
    }
    CHECK(bad == 0, "%u of %u outputs outside tolerance (worst %.3g x tol)", bad, tc->N * tc->nz, worst);
    if (!tc->acc)
        CHECK(isnan(gy[tc->N]) || y_z == tc->N, "row N was written");
    free(w), free(x), free(nw), free(y0), free(ry), free(mag), free(xin);
    tu_reset_buffers();
}

static void run_mv(uint32_t type, uint32_t K, uint32_t N, uint32_t nz, bool norm, bool acc, bool ids, const char *what,
                   int vars)
{
    MV = (mv_case){type, K, N, nz, norm, acc, ids, what};
    char name[200];
    snprintf(name, sizeof name, "mv %s K=%u N=%u z=%u%s%s%s (%s)", tu_type_name(type), K, N, nz, norm ? " norm" : "",
             acc ? " acc" : "", ids ? " ids" : "", what);
    run_variants(test_mv, name, lvp_vars(type, vars));
}

static void mv_cases(void)
{
    for (int i = 0; i < N_TYPES; i++) {
        uint32_t t = TYPES[i], b = blk_of(t);
        run_mv(t, b, 1, 1, false, false, false, "one block", V_DEF);
        run_mv(t, 3 * b, 37, 1, false, false, false, "odd rows", V_DEF);
        run_mv(t, 2048, 77, 2, true, false, false, "norm fused, 2 z", V_GPU_MV);
        run_mv(t, b == 32 ? 160 : 512, 29, 3, false, true, true, "expert ids, accumulate", V_ALL);
    }
    /* GLM-4.7-Flash's rows for the roles these files give the types:
     * attention (q_a + kv_a_mqa as one matrix, q_b, attn_output + residual),
     * the shared expert's down apart, the head (a slice), k_b (192: only
     * the 32-element blocks; llama-quantize falls back to IQ4_NL) */
    static const uint32_t attn_types[] = {QT_Q2_K, QT_Q3_K, QT_IQ4_NL, QT_IQ4_XS, QT_IQ2_XXS, QT_IQ2_S, QT_IQ3_S};
    for (size_t i = 0; i < sizeof attn_types / sizeof attn_types[0]; i++) {
        uint32_t t = attn_types[i];
        run_mv(t, 2048, 1344, 1, true, false, false, "attn_q_a + attn_kv_a_mqa", V_DEF);
        run_mv(t, 768, 5120, 1, true, false, false, "attn_q_b", V_DEF);
        run_mv(t, 5120, 2048, 1, false, true, false, "attn_output + residual", V_DEF);
    }
    run_mv(QT_IQ4_NL, 192, 512, 20, false, false, false, "attn_k_b per head", V_GPU_MV);
    run_mv(QT_Q3_K, 1536, 2048, 1, false, true, false, "shared expert's down apart + residual", V_DEF);
    run_mv(QT_IQ3_XXS, 1536, 2048, 1, false, false, false, "shared expert's down apart", V_DEF);
    run_mv(QT_IQ2_XS, 2048, 4099, 1, true, false, false, "output head slice", V_GPU_MV);
    run_mv(QT_IQ1_S, 2048, 768, 1, true, false, false, "attn_q_a", V_GPU_MV);
    run_mv(QT_MXFP4, 2048, 1536, 4, true, false, true, "expert rows by id", V_GPU_MV);
    run_mv(QT_IQ2_XXS, 10240, 2048, 1, false, true, false, "dense ffn_down (input from memory on small GPUs)", V_DEF);
    /* the whole head of a plain IQ2_S file where the device binds its 101 MB */
    if (tu_row_bytes(QT_IQ2_S, 2048) * 154880 <= G.c.max_range)
        run_mv(QT_IQ2_S, 2048, 154880, 1, true, false, false, "GLM-4.7-Flash output head, plain IQ2_S file", V_DEF);
    else
        printf("# the full-size IQ2_S head (101 MB) exceeds this device's buffer range: not run here\n");
}

/* ---- experts: gate/up + SiLU, down + weighted sum + shared expert ------------------ */

typedef struct {
    uint32_t tg, td, ts, H, F, FS, nexp, nused;
    const char *what;
} moe_case;
static moe_case MC;

static void test_moe(void)
{
    const moe_case *m = &MC;
    vk_tensor tg, tu, td, tsg, tsu, tsd;
    uint8_t *wg = rand_tensor(m->tg, m->H, m->F, m->nexp, &tg), *wu = rand_tensor(m->tg, m->H, m->F, m->nexp, &tu);
    uint8_t *wd = rand_tensor(m->td, m->F, m->H, m->nexp, &td);
    uint8_t *wsg = rand_tensor(m->tg, m->H, m->FS, 1, &tsg), *wsu = rand_tensor(m->tg, m->H, m->FS, 1, &tsu);
    uint8_t *wsd = rand_tensor(m->ts, m->FS, m->H, 1, &tsd);
    bool uploaded = tg.n_mat && tu.n_mat && td.n_mat && tsg.n_mat && tsu.n_mat && tsd.n_mat;
    CHECK(uploaded, "upload");
    if (!uploaded) {
        free(wg), free(wu), free(wd), free(wsg), free(wsu), free(wsd);
        tu_reset_buffers();
        return;
    }
    float *x = random_vec(m->H, 1.0f), *nw = norm_weights(m->H), *y0 = random_vec(m->H, 1.0f);
    int32_t ids[8];
    float wts[8];
    for (uint32_t z = 0; z < m->nused; z++) {
        ids[z] = (int32_t)((z * 17 + 3) % m->nexp);
        wts[z] = 0.2f + 0.6f * (tu_unif() * 0.5f + 0.5f);
    }
    uint32_t hz = m->F > m->FS ? m->F : m->FS;
    vk_buf bx = host_copy(x, m->H), bn = host_copy(nw, m->H), by = host_copy(y0, m->H);
    vk_buf bi = host_copy(ids, 8), bw = host_copy(wts, 8), bh = tu_host((uint64_t)hz * (m->nused + 1));
    vk_vec norm = {bn, 0}, idv = {bi, 0};
    vk_glu_args ga = {.name = "glu", .gate = &tg, .up = &tu, .x = {bx, 0}, .norm = &norm, .eps = 1e-6f,
                      .h = {bh, 0}, .h_z = hz, .nz = m->nused, .ids = &idv};
    vk_glu_args gs = {.name = "glu_shared", .gate = &tsg, .up = &tsu, .x = {bx, 0}, .norm = &norm, .eps = 1e-6f,
                      .h = {bh, m->nused * hz}, .h_z = hz, .nz = 1};
    vk_moe_down_args da = {.name = "down", .down = &td, .shared = &tsd, .h = {bh, 0}, .h_z = hz, .nz = m->nused,
                           .ids = {bi, 0}, .wts = {bw, 0}, .y = {by, 0}};
    /* a shared down of another type: a matvec of its own first, as the
     * decode graph does (vk_moe_down_args.shared_out) */
    vk_buf bys = tu_host(m->H);
    vk_vec ysh = {bys, 0};
    vk_moe_down_args ds = da;
    ds.shared = NULL;
    ds.shared_out = &ysh;
    vk_mv_args sda = {.name = "shared down", .w = &tsd, .x = {bh, m->nused * hz}, .y = ysh, .nz = 1};
    bool split = m->td != m->ts && vk_mv_deps(&KB, &sda) && vk_moe_down_deps(&KB, &ds);
    if (split)
        da = ds;
    vk_call calls[4];
    uint32_t nc = 0;
    CHECK(vk_k_glu(&KB, &ga, &calls[nc++]) == 0, "build glu: %.200s", KERR.msg);
    CHECK(vk_k_glu(&KB, &gs, &calls[nc++]) == 0, "build glu shared: %.200s", KERR.msg);
    if (split)
        CHECK(vk_k_mv(&KB, &sda, &calls[nc++]) == 0, "build shared down: %.200s", KERR.msg);
    CHECK(vk_k_moe_down(&KB, &da, &calls[nc++]) == 0, "build down: %.200s", KERR.msg);
    bool bar[4] = {false, true, true, true};
    CHECK(tu_run(calls, (int)nc, bar) == 0, "run");

    /* h against the reference gate/up; y from the GPU's h (each kernel judged on its own) */
    float *n = malloc(m->H * sizeof *n);
    rmsnorm_ref(x, nw, m->H, 1e-6f, n);
    uint32_t bad = 0;
    double worst = 0;
    const float *gh = (const float *)bh.map;
    double *rg = malloc(hz * sizeof *rg), *ru = malloc(hz * sizeof *ru), *mg = malloc(hz * sizeof *mg),
           *mu = malloc(hz * sizeof *mu);
    for (uint32_t z = 0; z <= m->nused; z++) {
        bool sh = z == m->nused;
        uint32_t F = sh ? m->FS : m->F;
        ref_dot_rows(m->tg, sh ? wsg : mat_of(m->tg, wg, m->H, m->F, ids[z]), m->H, F, n, rg, mg);
        ref_dot_rows(m->tg, sh ? wsu : mat_of(m->tg, wu, m->H, m->F, ids[z]), m->H, F, n, ru, mu);
        double cb = 2 * chain_bound(m->tg, m->H); /* x2: the normalized input's own rounding */
        for (uint32_t r = 0; r < F; r++) {
            double want = silu_d(rg[r]) * ru[r];
            double tol = 1.1 * cb * mg[r] * fabs(ru[r]) + fabs(silu_d(rg[r])) * cb * mu[r] + 1e-30;
            double e = fabs(gh[z * hz + r] - want) / tol;
            if (!(e <= 1) && bad++ < 3)
                printf("#   h[%u][%u]: gpu %.9g ref %.9g\n", z, r, gh[z * hz + r], want);
            if (e > worst || isnan(e))
                worst = e;
        }
    }
    CHECK(bad == 0, "gate/up: %u outputs outside tolerance (worst %.3g x tol)", bad, worst);
    free(rg), free(ru), free(mg), free(mu);

    double *acc = calloc(m->H, sizeof *acc), *mag = calloc(m->H, sizeof *mag);
    double *t1 = malloc(m->H * sizeof *t1), *t2 = malloc(m->H * sizeof *t2);
    for (uint32_t z = 0; z <= m->nused; z++) {
        bool sh = z == m->nused;
        ref_dot_rows(sh ? m->ts : m->td, sh ? wsd : mat_of(m->td, wd, m->F, m->H, ids[z]), sh ? m->FS : m->F, m->H,
                     gh + z * hz, t1, t2);
        double wz = sh ? 1.0 : wts[z];
        for (uint32_t r = 0; r < m->H; r++) {
            acc[r] += wz * t1[r];
            mag[r] += fabs(wz) * t2[r];
        }
    }
    bad = 0;
    worst = 0;
    const float *gy = (const float *)by.map;
    for (uint32_t r = 0; r < m->H; r++) {
        double want = y0[r] + acc[r];
        double tol = chain_bound(m->td, m->F * (m->nused + 1)) * (mag[r] + fabs(y0[r])) + 1e-30;
        double e = fabs(gy[r] - want) / tol;
        if (!(e <= 1) && bad++ < 3)
            printf("#   y[%u]: gpu %.9g ref %.9g\n", r, gy[r], want);
        if (e > worst || isnan(e))
            worst = e;
    }
    CHECK(bad == 0, "down: %u outputs outside tolerance (worst %.3g x tol)", bad, worst);
    free(acc), free(mag), free(t1), free(t2), free(n);
    free(wg), free(wu), free(wd), free(wsg), free(wsu), free(wsd), free(x), free(nw), free(y0);
    tu_reset_buffers();
}

static void moe_cases(void)
{
    /* GLM-4.7-Flash's experts (H 2048, F 1536; 4 of 16 here, not 64: the
     * count only moves a matrix's offset -- test_vk_matvec.c's cases hold 64
     * -- and 64 random matrices of each kind cost seconds each to fill and
     * upload on lavapipe) in the files of
     * the table: Q3_K_M (Q3_K gate/up, Q4_K down), IQ4_XS, MXFP4_MOE
     * (Q8_0 shared expert), Q2_K (Q3_K down), IQ2_XXS (Q2_K shared down in
     * the first layers), the Q2_K_XL mix (Q2_K / Q3_K, Q5_K shared) */
    static const moe_case glm[] = {
        {QT_Q3_K, QT_Q4_K, QT_Q4_K, 2048, 1536, 1536, 16, 4, "Q3_K_M"},
        {QT_IQ4_XS, QT_IQ4_XS, QT_IQ4_XS, 2048, 1536, 1536, 16, 4, "IQ4_XS"},
        {QT_MXFP4, QT_MXFP4, QT_Q8_0, 2048, 1536, 1536, 16, 4, "MXFP4_MOE"},
        {QT_Q2_K, QT_Q3_K, QT_Q3_K, 2048, 1536, 1536, 16, 4, "Q2_K"},
        {QT_IQ2_XXS, QT_IQ2_XXS, QT_Q2_K, 2048, 1536, 1536, 16, 4, "IQ2_XXS, a Q2_K shared down"},
        {QT_Q2_K, QT_Q3_K, QT_Q5_K, 2048, 1536, 1536, 16, 4, "Q2_K_XL"},
    };
    for (size_t i = 0; i < sizeof glm / sizeof glm[0]; i++) {
        MC = glm[i];
        /* On a CPU device (as lvp_vars) three of them are left out: their
         * gate/up at 2048 compile the small cases' mv_glu_xs of the same
         * type with 4-8 units a lane instead of 1-2 (5, 10 and 11 s there,
         * a fifth of this program's time from an empty cache), and their
         * host paths are the others' -- Q2_K and IQ4_XS a shared down of
         * the down's type as Q3_K_M's, MXFP4_MOE a shared down of another
         * type (its mat-vec apart) as IQ2_XXS's and Q2_K_XL's. */
        if (tu_cpu_device() && (!strcmp(MC.what, "Q2_K") || !strcmp(MC.what, "IQ4_XS") || !strcmp(MC.what, "MXFP4_MOE"))) {
            printf("# experts GLM-4.7-Flash %s: not on a CPU device (the small cases' kernels, longer rows)\n",
                   MC.what);
            continue;
        }
        char name[200];
        snprintf(name, sizeof name, "experts gate/up/down GLM-4.7-Flash %s (gate/up %s, down %s, shared down %s)",
                 MC.what, tu_type_name(MC.tg), tu_type_name(MC.td), tu_type_name(MC.ts));
        run_variants(test_moe, name, V_DEF);
    }
    /* every type in every role, smaller: each with the mv family too; a
     * shared down of a second grid type (two tables in one mv_moe_down) */
    for (int i = 0; i < N_TYPES; i++) {
        uint32_t t = TYPES[i], k = blk_of(t) == 32 ? 160 : 512;
        MC = (moe_case){t, t, i % 3 == 0 ? QT_IQ2_S : t, k, k == 160 ? 96 : 256, k == 160 ? 64 : 256, 16, 4, "small"};
        char name[200];
        snprintf(name, sizeof name, "experts gate/up/down %s (H=%u F=%u, 4 of 16, shared down %s)", tu_type_name(t),
                 MC.H, MC.F, tu_type_name(MC.ts));
        run_variants(test_moe, name, lvp_vars(t, V_GPU_MV));
    }
}

/* ---- v_b after the attention's chunk combine (attn_vb, attn_vb_xs) ------------------ */

static uint32_t AV_TYPE, AV_NZ;

/* Partials of nz tokens x 5 chunks x 20 heads (m, l and the latent sums of
 * each), combined and multiplied by v_b of each head: out[z][h][r] =
 * v_b[h][r] . (sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c). */
static void test_attn_vb(void)
{
    const uint32_t H = 20, KV = 512, VH = 256, NC = 5, CAP = 8, nz = AV_NZ;
    err_t err;
    vk_attn_geom g;
    CHECK(vk_attn_geom_init(&KB, &g, H, KV, 64, 192, VH, true, 4096, &err) == 0, "geom: %.200s", err.msg);
    uint32_t ph = vk_attn_part_heads(&g), ps = KV + VK_PART_HDR;
    uint64_t np = (uint64_t)nz * CAP * ph * ps;
    float *part = random_vec(np, 1.0f);
    for (uint32_t z = 0; z < nz; z++)
        for (uint32_t c = 0; c < NC; c++)
            for (uint32_t h = 0; h < ph; h++) {
                float *p = part + (((uint64_t)z * CAP + c) * ph + h) * ps;
                p[0] = 2.0f * tu_unif();           /* m */
                p[1] = 1.0f + 3.0f * fabsf(tu_unif()); /* l */
            }
    vk_tensor vb;
    uint8_t *w = rand_tensor(AV_TYPE, KV, VH, H, &vb);
    uint32_t params[64] = {0};
    params[VKP_NTOK] = nz;
    params[VKP_NCHUNK] = NC;
    vk_buf bpart = host_copy(part, np), bp = host_copy(params, 64), bo = tu_host((uint64_t)nz * H * VH);
    vk_attn_vb_args va = {.g = &g, .v_b = &vb, .part = {bpart, 0}, .chunk_cap = CAP, .params = bp, .o = {bo, 0},
                          .o_z = H * VH, .nz = nz};
    vk_call call;
    CHECK(vk_k_attn_vb(&KB, &va, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    float *o = malloc(KV * sizeof *o), *oabs = malloc(KV * sizeof *oabs), *row = malloc(KV * sizeof *row);
    double *ry = malloc(VH * sizeof *ry), *mag = malloc(VH * sizeof *mag), *mag2 = malloc(VH * sizeof *mag2), worst = 0;
    uint32_t bad = 0;
    for (uint32_t z = 0; z < nz; z++)
        for (uint32_t h = 0; h < H; h++) {
            double M = -INFINITY, L = 0, wc[8];
            const float *pc[8];
            for (uint32_t c = 0; c < NC; c++) {
                pc[c] = part + (((uint64_t)z * CAP + c) * ph + h) * ps;
                M = fmax(M, pc[c][0]);
            }
            for (uint32_t c = 0; c < NC; c++) {
                wc[c] = exp(pc[c][0] - M);
                L += wc[c] * pc[c][1];
            }
            for (uint32_t k = 0; k < KV; k++) {
                double s = 0, sa = 0;
                for (uint32_t c = 0; c < NC; c++) {
                    s += wc[c] * pc[c][VK_PART_HDR + k];
                    sa += wc[c] * fabs(pc[c][VK_PART_HDR + k]);
                }
                o[k] = (float)(s / L);
                oabs[k] = (float)(sa / L);
            }
            const uint8_t *wh = mat_of(AV_TYPE, w, KV, VH, h);
            ref_dot_rows(AV_TYPE, wh, KV, VH, o, ry, mag);
            for (uint32_t r = 0; r < VH; r++) {
                tu_dequant(AV_TYPE, wh + r * tu_row_bytes(AV_TYPE, KV), row, KV);
                mag2[r] = 0;
                for (uint32_t k = 0; k < KV; k++)
                    mag2[r] += fabs((double)row[k]) * oabs[k];
                /* o itself carries the combine's f32 sums and the device's exp
                 * (GLSL: 3 + 2|x| ulps) */
                double tol = chain_bound(AV_TYPE, KV) * mag[r] + 16.0 * (NC + 4) * U24 * mag2[r] + 1e-30;
                double got = ((const float *)bo.map)[(uint64_t)z * H * VH + h * VH + r];
                double e = fabs(got - ry[r]) / tol;
                if (!(e <= 1) && bad++ < 3)
                    printf("#   token %u head %u row %u: gpu %.9g ref %.9g tol %.3g\n", z, h, r, got, ry[r], tol);
                if (e > worst || isnan(e))
                    worst = e;
            }
        }
    CHECK(bad == 0, "%u outputs wrong (worst %.3g x tol)", bad, worst);
    free(part), free(w), free(o), free(oabs), free(row), free(ry), free(mag), free(mag2);
    tu_reset_buffers();
}

static void attn_vb_cases(void)
{
    static const uint32_t types[] = {QT_Q2_K, QT_Q3_K, QT_IQ4_XS, QT_IQ2_XXS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ1_M};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        AV_TYPE = types[i];
        AV_NZ = i % 2 ? 3 : 1;
        char name[200];
        snprintf(name, sizeof name, "attention combine + v_b %s (20 heads, latent 512 -> 256, 5 chunks, %u token%s)",
                 tu_type_name(AV_TYPE), AV_NZ, AV_NZ > 1 ? "s" : "");
        run_variants(test_attn_vb, name, lvp_vars(AV_TYPE, V_GPU_MV));
    }
}

/* ---- embedding rows ------------------------------------------------------------------- */

static uint32_t EMB_TYPE, EMB_K;

static void test_embed(void)
{
    vk_tensor t;
    uint32_t V = 37, nz = 5;
    uint8_t *w = rand_tensor(EMB_TYPE, EMB_K, V, 1, &t);
    int32_t tok[5] = {0, 36, 7, 7, 20};
    uint32_t xz = EMB_K + 3;
    vk_buf bt = host_copy(tok, 5), bx = tu_host((uint64_t)xz * nz);
    vk_embed_args a = {.w = &t, .tokens = {bt, 0}, .x = {bx, 0}, .x_z = xz, .nz = nz};
    vk_call call;
    CHECK(vk_k_embed(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    float *row = malloc(EMB_K * sizeof *row);
    uint32_t bad = 0;
    for (uint32_t z = 0; z < nz; z++) {
        tu_dequant(EMB_TYPE, w + tu_row_bytes(EMB_TYPE, EMB_K) * tok[z], row, EMB_K);
        float mx = 0;
        for (uint32_t i = 0; i < EMB_K; i++)
            mx = fmaxf(mx, fabsf(row[i]));
        for (uint32_t i = 0; i < EMB_K; i++) {
            float got = ((const float *)bx.map)[z * xz + i];
            if (!(fabsf(got - row[i]) <= 4 * U24 * mx) && bad++ < 3)
                printf("#   token %u elem %u: gpu %.9g ref %.9g\n", z, i, got, row[i]);
        }
        CHECK(isnan(((const float *)bx.map)[z * xz + EMB_K]), "wrote past the row");
    }
    CHECK(bad == 0, "%u elements differ", bad);
    free(row), free(w);
    tu_reset_buffers();
}

static void embed_cases(void)
{
    for (int i = 0; i < N_TYPES; i++) {
        EMB_TYPE = TYPES[i];
        EMB_K = blk_of(EMB_TYPE) == 32 ? 96 : 512;
        char name[96];
        snprintf(name, sizeof name, "embedding %s (row %u, 5 tokens)", tu_type_name(EMB_TYPE), EMB_K);
        RUN_NAMED(test_embed, name);
    }
}

/* ---- prefill: the mat-mats ------------------------------------------------------------- */

typedef struct {
    uint32_t type, K, N, T;
    int mode; /* 0 store, 1 accumulate, 2 glu */
    const char *what;
    uint32_t up_type; /* glu: the up matrix's type where it differs (0: the same) */
} mm_case;
static mm_case MMC;

static void test_mm(void)
{
    const mm_case *c = &MMC;
    vk_tensor t, tu;
    uint32_t ut = c->up_type ? c->up_type : c->type;
    uint8_t *w = rand_tensor(c->type, c->K, c->N, 1, &t), *wu = NULL;
    if (c->mode == 2)
        wu = rand_tensor(ut, c->K, c->N, 1, &tu);
    uint32_t xs = c->K + 3, ys = c->N + 1, B = 64 * ((c->T + 63) / 64);
    float *x = random_vec((uint64_t)xs * B, 1.0f), *y0 = random_vec((uint64_t)ys * B, 1.0f);
    uint32_t params[64] = {0};
    params[VKP_NTOK] = c->T;
    vk_buf bx = host_copy(x, (uint64_t)xs * B), by = host_copy(y0, (uint64_t)ys * B), bp = host_copy(params, 64);
    vk_mm_args a = {.name = "mm", .w = &t, .up = c->mode == 2 ? &tu : NULL, .x = {bx, 0}, .x_stride = xs,
                    .y = {by, 0}, .y_stride = ys, .nz = 1, .max_tokens = B, .accumulate = c->mode == 1,
                    .params = bp};
    vk_call call;
    CHECK(vk_k_mm(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    double *r1 = malloc(c->N * sizeof *r1), *m1 = malloc(c->N * sizeof *m1), *r2 = malloc(c->N * sizeof *r2),
           *m2 = malloc(c->N * sizeof *m2);
    uint32_t bad = 0;
    double worst = 0, cb = mm_bound(c->type, c->K), cbu = mm_bound(ut, c->K);
    const float *gy = (const float *)by.map;
    for (uint32_t tk = 0; tk < B; tk++) {
        if (tk >= c->T) {
            if (gy[(uint64_t)tk * ys] != y0[(uint64_t)tk * ys] && bad++ < 3)
                printf("#   token %u past the batch was written\n", tk);
            continue;
        }
        ref_dot_rows(c->type, w, c->K, c->N, x + (uint64_t)tk * xs, r1, m1);
        if (c->mode == 2)
            ref_dot_rows(ut, wu, c->K, c->N, x + (uint64_t)tk * xs, r2, m2);
        for (uint32_t n = 0; n < c->N; n++) {
            double want, tol;
            if (c->mode == 2) {
                want = silu_d(r1[n]) * r2[n];
                tol = 1.1 * cb * m1[n] * fabs(r2[n]) + fabs(silu_d(r1[n])) * cbu * m2[n];
            } else {
                want = r1[n] + (c->mode == 1 ? y0[(uint64_t)tk * ys + n] : 0);
                tol = cb * (m1[n] + (c->mode == 1 ? fabs(want) : 0));
            }
            double got = gy[(uint64_t)tk * ys + n], e = fabs(got - want) / (tol + 1e-30);
            if (!(e <= 1) && bad++ < 3)
                printf("#   token %u row %u: gpu %.9g ref %.9g tol %.3g\n", tk, n, got, want, tol);
            if (e > worst || isnan(e))
                worst = e;
        }
    }
    CHECK(bad == 0, "%u outputs wrong (worst %.3g x tol)", bad, worst);
    free(w), free(wu), free(x), free(y0), free(r1), free(m1), free(r2), free(m2);
    tu_reset_buffers();
}

static void run_mm(uint32_t type, uint32_t K, uint32_t N, uint32_t T, int mode, const char *what, uint32_t up)
{
    MMC = (mm_case){type, K, N, T, mode, what, up};
    char name[200];
    vk_tensor w = {.type = type}, u = {.type = up ? up : type};
    snprintf(name, sizeof name, "mat-mat %s K=%u N=%u T=%u %s (%s) [%s]", tu_type_name(type), K, N, T,
             mode == 0 ? "store" : mode == 1 ? "accumulate" : "glu", what, mm_path(&w, mode == 2 ? &u : NULL));
    RUN_NAMED(test_mm, name);
}

/* Batched heads (z = head): the prefill's v_b (latents of 576 -> rows of
 * 256 a head) and k_b (rows of 256 -> latents of 576; K 192, so the 32-element
 * types only); the outputs between heads stay untouched. */
typedef struct {
    uint32_t type, K, N, heads, T, x_h, y_h;
    const char *what;
} mmh_case;
static mmh_case MMH;

static void test_mm_heads(void)
{
    const mmh_case *c = &MMH;
    vk_tensor t;
    uint8_t *w = rand_tensor(c->type, c->K, c->N, c->heads, &t);
    uint32_t xs = c->heads * c->x_h, ys = c->heads * c->y_h, B = 64 * ((c->T + 63) / 64);
    float *x = random_vec((uint64_t)xs * B, 1.0f), *y0 = random_vec((uint64_t)ys * B, 1.0f);
    uint32_t params[64] = {0};
    params[VKP_NTOK] = c->T;
    vk_buf bx = host_copy(x, (uint64_t)xs * B), by = host_copy(y0, (uint64_t)ys * B), bp = host_copy(params, 64);
    vk_mm_args a = {.name = "mm heads", .w = &t, .x = {bx, 0}, .x_stride = xs, .x_z = c->x_h, .y = {by, 0},
                    .y_stride = ys, .y_z = c->y_h, .nz = c->heads, .max_tokens = B, .params = bp};
    vk_call call;
    CHECK(vk_k_mm(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    double *r = malloc(c->N * sizeof *r), *m = malloc(c->N * sizeof *m), worst = 0, cb = mm_bound(c->type, c->K);
    const float *gy = (const float *)by.map;
    uint32_t bad = 0;
    for (uint32_t tk = 0; tk < B; tk++)
        for (uint32_t h = 0; h < c->heads; h++) {
            const float *gr = gy + (uint64_t)tk * ys + (uint64_t)h * c->y_h, *g0 = y0 + (uint64_t)tk * ys + h * c->y_h;
            if (tk < c->T)
                ref_dot_rows(c->type, mat_of(c->type, w, c->K, c->N, h), c->K, c->N,
                             x + (uint64_t)tk * xs + (uint64_t)h * c->x_h, r, m);
            for (uint32_t n = 0; n < c->y_h; n++) {
                bool mine = tk < c->T && n < c->N;
                double want = mine ? r[n] : g0[n], tol = mine ? cb * m[n] + 1e-30 : 0;
                double e = tol > 0 ? fabs(gr[n] - want) / tol : (gr[n] == want ? 0 : INFINITY);
                if (!(e <= 1) && bad++ < 3)
                    printf("#   token %u head %u row %u: gpu %.9g want %.9g tol %.3g\n", tk, h, n, gr[n], want, tol);
                if (e > worst || isnan(e))
                    worst = e;
            }
        }
    CHECK(bad == 0, "%u outputs wrong (worst %.3g x tol)", bad, worst);
    free(w), free(x), free(y0), free(r), free(m);
    tu_reset_buffers();
}

/* The experts of a prompt batch: routing ids -> moe_group -> gate/up and
 * down over the work list's tiles -> combine with the residual. */
static uint32_t EP_TYPE;

static void test_expert_prefill(void)
{
    uint32_t H = 256, E = 16, K = 4, T = 77, B = 80, F = 256;
    vk_tensor tg, tu, td;
    uint8_t *wg = rand_tensor(EP_TYPE, H, F, E, &tg), *wu = rand_tensor(EP_TYPE, H, F, E, &tu);
    uint8_t *wd = rand_tensor(EP_TYPE, F, H, E, &td);
    float *x = random_vec((uint64_t)H * B, 1.0f), *x0 = malloc((uint64_t)H * B * sizeof *x0);
    /* activations of a normalized size: gate * up stays well inside fp16 */
    float *xn = random_vec((uint64_t)H * B, 0.5f);
    memcpy(x0, x, (uint64_t)H * B * 4);
    int32_t *ids = malloc((uint64_t)B * K * 4);
    float *wts = malloc((uint64_t)B * K * 4);
    for (uint32_t t = 0; t < B; t++)
        for (uint32_t k = 0; k < K; k++) {
            /* distinct experts per token, skewed: expert 0 gets more than a tile */
            ids[t * K + k] = (int32_t)(t % 3 == 0 ? k : k == 0 && t % 8 != 7 ? 0 : 1 + (t * 7 + k * 4) % (E - 1));
            wts[t * K + k] = 0.1f + 0.2f * k;
        }
    uint32_t params[64] = {0};
    params[VKP_NTOK] = T;
    uint32_t tile = vk_mm_expert_bm(&KB, &tg);
    vk_buf bx = host_copy(x, (uint64_t)H * B), bxn = host_copy(xn, (uint64_t)H * B), bi = host_copy(ids, B * K),
           bw = host_copy(wts, B * K), bp = host_copy(params, 64), bh = tu_host((uint64_t)B * K * F),
           by = tu_host((uint64_t)B * K * H), bl = tu_host(B * K), btl = tu_host(4 * (B * K / 32 + E + 1)),
           bind = tu_host(16);
    vk_moe_group_args ga = {.ids = {bi, 0}, .K = K, .n_expert = E, .list = bl, .tiles = btl, .indirect = bind,
                            .params = bp, .x_gu = (F + vk_mm_bn(&KB, &tg, &tu) - 1) / vk_mm_bn(&KB, &tg, &tu),
                            .x_dn = (H + vk_mm_bn(&KB, &td, NULL) - 1) / vk_mm_bn(&KB, &td, NULL), .tile = tile};
    vk_buf igu = bind, idn = bind;
    igu.size = 12;
    idn.off += 12;
    idn.size = 12;
    vk_mm_args gu = {.name = "moe_gate_up", .w = &tg, .up = &tu, .x = {bxn, 0}, .x_stride = H, .x_div = K,
                     .y = {bh, 0}, .y_stride = F, .nz = 1, .max_tokens = B * K, .params = bp, .list = &bl,
                     .tiles = &btl, .indirect = &igu, .tile = tile};
    vk_mm_args dn = {.name = "moe_down", .w = &td, .x = {bh, 0}, .x_stride = F, .x_div = 1, .y = {by, 0},
                     .y_stride = H, .nz = 1, .max_tokens = B * K, .params = bp, .list = &bl, .tiles = &btl,
                     .indirect = &idn, .tile = tile};
    vk_moe_combine_args cb = {.y = {by, 0}, .x = {bx, 0}, .wts = {bw, 0}, .H = H, .K = K, .max_tokens = B,
                              .params = bp};
    vk_call calls[4];
    CHECK(vk_k_moe_group(&KB, &ga, &calls[0]) == 0, "build group: %.200s", KERR.msg);
    CHECK(vk_k_mm(&KB, &gu, &calls[1]) == 0, "build gate/up: %.200s", KERR.msg);
    CHECK(vk_k_mm(&KB, &dn, &calls[2]) == 0, "build down: %.200s", KERR.msg);
    CHECK(vk_k_moe_combine(&KB, &cb, &calls[3]) == 0, "build combine: %.200s", KERR.msg);
    vk_prog prog = {0};
    vk_rec r;
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    err_t err;
    CHECK(vkBeginCommandBuffer(G.cb, &cbi) == VK_SUCCESS, "begin");
    vk_rec_begin(&r, &G.c, &prog, G.cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
    vk_rec_call(&r, &calls[0]);
    vk_rec_barrier_indirect(&r); /* the grids come from the group kernel */
    vk_rec_call(&r, &calls[1]);
    vk_rec_barrier(&r);
    vk_rec_call(&r, &calls[2]);
    vk_rec_barrier(&r);
    vk_rec_call(&r, &calls[3]);
    int rc = vk_rec_end(&r);
    CHECK(vkEndCommandBuffer(G.cb) == VK_SUCCESS, "end");
    CHECK(rc == 0 && vk_submit_wait(&G.c, G.cb, &err) == 0, "run: %.200s", err.msg);
    vk_prog_free(&G.c, &prog);

    /* h per pair from the reference gate/up; y per pair from the GPU's h */
    const float *gh = (const float *)bh.map, *gx = (const float *)bx.map;
    double *a1 = malloc(F * sizeof *a1), *m1 = malloc(F * sizeof *m1), *a2 = malloc(F * sizeof *a2),
           *m2 = malloc(F * sizeof *m2), *yd = malloc(H * sizeof *yd), *ym = malloc(H * sizeof *ym);
    double *acc = malloc(H * sizeof *acc), *mag = malloc(H * sizeof *mag);
    uint32_t bad = 0;
    double cbg = mm_bound(EP_TYPE, H), cbd = mm_bound(EP_TYPE, F);
    for (uint32_t t = 0; t < T; t++) {
        for (uint32_t i = 0; i < H; i++)
            acc[i] = mag[i] = 0;
        for (uint32_t k = 0; k < K; k++) {
            uint32_t p = t * K + k, e = (uint32_t)ids[p];
            ref_dot_rows(EP_TYPE, mat_of(EP_TYPE, wg, H, F, e), H, F, xn + (uint64_t)t * H, a1, m1);
            ref_dot_rows(EP_TYPE, mat_of(EP_TYPE, wu, H, F, e), H, F, xn + (uint64_t)t * H, a2, m2);
            for (uint32_t f = 0; f < F; f++) {
                double want = silu_d(a1[f]) * a2[f];
                double tol = 1.1 * cbg * m1[f] * fabs(a2[f]) + fabs(silu_d(a1[f])) * cbg * m2[f] + 1e-30;
                if (!(fabs(gh[(uint64_t)p * F + f] - want) <= tol) && bad++ < 3)
                    printf("#   pair %u h[%u]: gpu %.9g ref %.9g\n", p, f, gh[(uint64_t)p * F + f], want);
            }
            ref_dot_rows(EP_TYPE, mat_of(EP_TYPE, wd, F, H, e), F, H, gh + (uint64_t)p * F, yd, ym);
            for (uint32_t i = 0; i < H; i++) {
                acc[i] += wts[p] * yd[i];
                mag[i] += fabs(wts[p]) * ym[i];
            }
        }
        for (uint32_t i = 0; i < H; i++) {
            double want = x0[(uint64_t)t * H + i] + acc[i];
            double tol = cbd * mag[i] + 8 * U24 * fabs(want) + 1e-30;
            if (!(fabs(gx[(uint64_t)t * H + i] - want) <= tol) && bad++ < 3)
                printf("#   token %u x[%u]: gpu %.9g ref %.9g\n", t, i, gx[(uint64_t)t * H + i], want);
        }
    }
    for (uint32_t t = T; t < B; t++)
        CHECK(gx[(uint64_t)t * H] == x0[(uint64_t)t * H], "token %u past the batch changed", t);
    CHECK(bad == 0, "%u values wrong", bad);
    free(wg), free(wu), free(wd), free(x), free(x0), free(xn), free(ids), free(wts), free(a1), free(m1), free(a2);
    free(m2), free(yd), free(ym), free(acc), free(mag);
    tu_reset_buffers();
}

/* mm_coop through an expert work list (K step 32) = as a batch (K step 64),
 * bit for bit (test_vk_prefill.c test_mm_list_steps_agree): devices with
 * cooperative matrices only. */
static uint32_t ST_TYPE;

static void test_mm_list_steps_agree(void)
{
    uint32_t K = 2048, N = 200, T = 70, mode = 2;
    vk_tensor t, tu;
    uint8_t *w = rand_tensor(ST_TYPE, K, N, 1, &t), *wu = rand_tensor(ST_TYPE, K, N, 1, &tu);
    uint32_t tl = 32, B = 64 * ((T + 63) / 64), nt = B / tl;
    uint64_t nx = (uint64_t)K * B, ny = (uint64_t)N * B;
    float *x = random_vec(nx, 0.5f), *y0 = random_vec(ny, 1.0f);
    uint32_t params[64] = {0}, *pairs = malloc(B * 4), *tiles = calloc(4 * nt, 4);
    params[VKP_NTOK] = T;
    for (uint32_t i = 0; i < B; i++)
        pairs[i] = i;
    for (uint32_t i = 0; i < nt; i++)
        tiles[4 * i + 1] = tl * i, tiles[4 * i + 2] = T > tl * i ? (T - tl * i < tl ? T - tl * i : tl) : 0;
    vk_buf bx = host_copy(x, nx), bp = host_copy(params, 64), bl = host_copy(pairs, B),
           btl = host_copy(tiles, 4 * nt), by[2];
    for (int i = 0; i < 2; i++) {
        by[i] = host_copy(y0, ny);
        vk_mm_args a = {.name = i ? "mm list" : "mm", .w = &t, .up = mode == 2 ? &tu : NULL, .x = {bx, 0},
                        .x_stride = K, .x_div = 1, .y = {by[i], 0}, .y_stride = N, .nz = 1, .max_tokens = B,
                        .params = bp};
        if (i)
            a.list = &bl, a.tiles = &btl, a.tile = tl;
        vk_call call;
        CHECK(vk_k_mm(&KB, &a, &call) == 0, "build %s: %.200s", a.name, KERR.msg);
        CHECK(tu_run(&call, 1, NULL) == 0, "run %s", a.name);
    }
    uint64_t differ = 0;
    for (uint64_t i = 0; i < ny; i++)
        differ += memcmp((const float *)by[0].map + i, (const float *)by[1].map + i, 4) != 0;
    CHECK(differ == 0, "%llu of %llu outputs differ", (unsigned long long)differ, (unsigned long long)ny);
    free(w), free(wu), free(x), free(y0), free(pairs), free(tiles);
    tu_reset_buffers();
}

static void prefill_cases(void)
{
    for (int i = 0; i < N_TYPES; i++) {
        uint32_t t = TYPES[i];
        bool small = blk_of(t) == 32;
        /* the experts' gate/up rows (K 2048), a down with the residual (K
         * 1536), a few blocks stored (K 512, odd rows and tokens) */
        run_mm(t, 2048, 200, 70, 2, "gate/up rows, 70 tokens", 0);
        run_mm(t, 1536, 130, 33, 1, "down rows + residual", 0);
        run_mm(t, small ? 160 : 512, 129, 65, 0, "odd rows, 65 tokens", 0);
    }
    /* gate and up of two grid types (two tables in one kernel), a grid with a
     * K-quant, the largest grid with gate/up tiles (mm_coop: steps of 32) */
    run_mm(QT_IQ2_XS, 2048, 130, 33, 2, "gate IQ2_XS, up IQ2_S", QT_IQ2_S);
    run_mm(QT_IQ3_S, 1536, 70, 20, 2, "gate IQ3_S, up Q4_K", QT_Q4_K);
    run_mm(QT_IQ2_S, 768, 129, 64, 2, "IQ2_S gate/up of a full tile of tokens", 0);
    run_mm(QT_Q3_K, 5120, 70, 20, 1, "attn_output rows + residual", 0);

    static const mmh_case heads[] = {
        {QT_Q3_K, 512, 256, 4, 70, 576, 256, "v_b: 4 heads, 70 tokens"},
        {QT_IQ2_XXS, 512, 256, 3, 33, 576, 260, "v_b, gaps between heads"},
        {QT_IQ3_S, 512, 256, 2, 20, 576, 256, "v_b"},
        {QT_IQ4_NL, 192, 512, 4, 70, 256, 576, "k_b: 4 heads, 70 tokens"},
        {QT_MXFP4, 192, 512, 2, 9, 256, 576, "k_b"},
    };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        MMH = heads[i];
        char name[200];
        vk_tensor w = {.type = MMH.type};
        snprintf(name, sizeof name, "mat-mat heads %s K=%u N=%u heads=%u T=%u (%s) [%s]", tu_type_name(MMH.type), MMH.K,
                 MMH.N, MMH.heads, MMH.T, MMH.what, mm_path(&w, NULL));
        RUN_NAMED(test_mm_heads, name);
    }
    for (int i = 0; i < N_TYPES; i++) {
        EP_TYPE = TYPES[i];
        char name[200];
        vk_tensor w = {.type = EP_TYPE};
        snprintf(name, sizeof name, "experts of a prompt batch: group, gate/up, down, combine (%s) [%s, tiles of %u]",
                 tu_type_name(EP_TYPE), mm_path(&w, NULL), vk_mm_expert_bm(&KB, &w));
        RUN_NAMED(test_expert_prefill, name);
    }
    if (!G.c.coopmat) {
        printf("# no cooperative matrices: mm_coop's cases ran on mm here; the K-step agreement cases are skipped "
               "(run this program on a GPU with them)\n");
        return;
    }
    for (int i = 0; i < N_TYPES; i++) {
        ST_TYPE = TYPES[i];
        char name[200];
        snprintf(name, sizeof name,
                 "mm_coop through a work list (K step 32) = as a batch (K step 64), bit for bit: %s gate/up K=2048 "
                 "N=200 T=70",
                 tu_type_name(ST_TYPE));
        RUN_NAMED(test_mm_list_steps_agree, name);
    }
}

int main(void)
{
    /* the float units of every type here, on every device: the references
     * take the input in float (IQ4_NL's, IQ4_XS's and MXFP4's integer
     * units, which a GPU with fast 8-bit dot products takes by default, are
     * test_vk_matvec's cases) */
    TU_FLOAT_UNITS = true;
    if (tu_kernels_open())
        return 1;
    mv_cases();
    moe_cases();
    attn_vb_cases();
    embed_cases();
    prefill_cases();
    tu_gpu_close();
    TESTS_DONE();
}
