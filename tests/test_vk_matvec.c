/* test_vk_matvec.c: the decode matrix-vector kernels against a CPU
 * reference, on random non-zero data, over several shapes each (odd sizes
 * and GLM-4.7-Flash's real sizes), in the spirit of llama.cpp's
 * test-backend-ops: mv (every weight type, norm fused, expert ids,
 * accumulated), the experts' gate/up + SiLU and down, the router, the
 * embedding rows.
 *
 * The reference dequantizes the stored blocks exactly and accumulates in
 * float64.  Tolerances follow from float32 summation: a GPU thread adds
 * 4-element dot products into its accumulator (at most K/4 additions when
 * one thread does a whole row), then a team tree adds log2(TEAM) more, and
 * recursive summation's error is bounded by n * 2^-24 * sum|w_k x_k|
 * (Higham, "Accuracy and Stability of Numerical Algorithms", 4.2).  We allow
 * 2 * (K/4 + unit + 16) * 2^-24 * sum|w_k x_k| (chain_bound): about 7e-5 of
 * sum|w x| at K = 2048, while one wrong 32-element block moves an output by
 * ~1e-2 of it and a single wrong element by ~5e-4.  */
#include "vk_k_common.h"
#include "vk_testutil.h"

/* ---- matrix-vector --------------------------------------------------------------- */

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
    int32_t ids[64];
    for (uint32_t z = 0; z < tc->nz; z++)
        ids[z] = (int32_t)((z * 7 + 2) % nmat);
    vk_buf bx = tu_host((uint64_t)x_z * tc->nz + 8), by = tu_host((uint64_t)y_z * tc->nz + 8);
    vk_buf bn = tu_host(tc->K), bi = tu_host(64);
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
    /* integer dot products: the reference takes the input as they quantize it */
    bool idot = vk_mv_deps(&KB, &a) && vk_k_idot(&KB, tc->type);
    if (TUNE.idot)
        printf("# %s\n", idot ? "8-bit integer dot products" : "no integer dot products for this case");

    const float *gy = (const float *)by.map;
    double *ry = malloc(tc->N * sizeof *ry), *mag = malloc(tc->N * sizeof *mag), *tmag = malloc(tc->N * sizeof *tmag);
    float *xin = malloc(tc->K * sizeof *xin), *xq = malloc(tc->K * sizeof *xq), *tie = malloc(tc->K * sizeof *tie);
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
        const uint8_t *wm = w + (uint64_t)m * rb * tc->N;
        if (idot) {
            ref_q8_input(xin, tc->K, xq, tie);
            ref_dot_rows(tc->type, wm, tc->K, tc->N, tie, ry, tmag); /* ry: overwritten next */
            ref_dot_rows(tc->type, wm, tc->K, tc->N, xq, ry, mag);
        } else {
            ref_dot_rows(tc->type, wm, tc->K, tc->N, xin, ry, mag);
        }
        for (uint32_t r = 0; r < tc->N; r++) {
            double want = ry[r] + (tc->acc ? y0[(uint64_t)z * y_z + r] : 0);
            double got = gy[(uint64_t)z * y_z + r];
            /* the normalized input itself carries ~K ulps of the norm's sum */
            double tol = chain_bound(tc->type, tc->K) * (mag[r] + (tc->acc ? fabs(want) : 0)) * (tc->norm ? 2 : 1) +
                         (idot ? tmag[r] : 0) + 1e-30;
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
    free(w), free(x), free(nw), free(y0), free(ry), free(mag), free(tmag), free(xin), free(xq), free(tie);
    tu_reset_buffers();
}

static void run_mv_v(uint32_t type, uint32_t K, uint32_t N, uint32_t nz, bool norm, bool acc, bool ids, const char *what,
                     int nvar)
{
    MV = (mv_case){type, K, N, nz, norm, acc, ids, what};
    char name[160];
    snprintf(name, sizeof name, "mv %s K=%u N=%u z=%u%s%s%s (%s)", tu_type_name(type), K, N, nz,
             norm ? " norm" : "", acc ? " acc" : "", ids ? " ids" : "", what);
    run_variants(test_mv, name, nvar);
    if (vk_idot_type(type) && nvar != 1)
        run_tuned(test_mv, name, v_idot);
}

static void run_mv(uint32_t type, uint32_t K, uint32_t N, uint32_t nz, bool norm, bool acc, bool ids, const char *what)
{
    run_mv_v(type, K, N, nz, norm, acc, ids, what, 1);
}

/* Variant sets on a CPU device (lavapipe in CI).  There llvmpipe compiles
 * every specialization-constant set on its first dispatch, a few tenths of a
 * second for a short row and 5-15 s for a long fully unrolled one (j of 20-32
 * units a lane at subgroup 8, the mv family's 8-16 units a thread with
 * Q4_0's loads-first path), and that compiling is nearly all of this
 * program's time on a clean machine (250 s cold, 27 s with Mesa's shader
 * cache warm).  So there a few large shapes drop the variants whose
 * specialization another case compiles at a smaller size -- the same
 * kernel, type and code path with fewer units a lane -- and a real GPU,
 * whose driver compiles them in milliseconds, keeps every variant: `gpu`
 * on a GPU, `cpu` on a CPU device. */
enum { V_DEFAULT = 0x01, V_ROWS8 = 0x04, V_SHARED_IN = 0x08, V_MV = 0x10 }; /* VARIANTS' bits (vk_testutil.h) */
static int lvp_vars(int gpu, int cpu)
{
    return tu_cpu_device() ? cpu : gpu;
}

/* Every weight type has x-stationary units (mv_xs_common.glsl). */
static bool xs_type(uint32_t t)
{
    (void)t;
    return true;
}

static void mv_cases(void)
{
    /* (and the 16-level low-bit types, whose integer units are here: the
     * other low-bit types' cases are test_vk_types') */
    static const uint32_t types[] = {QT_F32,  QT_F16,  QT_BF16,   QT_Q4_0,   QT_Q4_1,   QT_Q5_0, QT_Q5_1,
                                     QT_Q8_0, QT_Q4_K, QT_Q5_K,   QT_Q6_K,   QT_IQ4_NL, QT_IQ4_XS, QT_MXFP4};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        uint32_t t = types[i];
        bool k = t == QT_Q4_K || t == QT_Q5_K || t == QT_Q6_K || t == QT_IQ4_XS;
        bool f = t == QT_F32 || t == QT_F16 || t == QT_BF16;
        run_mv(t, k ? 256 : 32, 1, 1, false, false, false, "one block");
        run_mv(t, k ? 768 : 96, 37, 1, false, false, false, "odd rows");
        bool x = xs_type(t);
        run_mv_v(t, 2048, 77, 2, true, false, false, "norm fused, 2 z", x ? V_GPU : 1);
        /* the 8-rows variant (rows, passes, workgroup, padding: the same
         * loops around every type's unit) on lavapipe for one type of each
         * unit -- F16 (8 elements), Q4_0 and Q8_0 (32), Q4_K (64, where the
         * padding applies) -- not for the other seven, 6 s there; every
         * type keeps the other variants */
        bool r8 = t == QT_F16 || t == QT_Q4_0 || t == QT_Q8_0 || t == QT_Q4_K;
        run_mv_v(t, k ? 512 : 160, 29, 3, false, true, true, "expert ids, accumulate",
                 x ? lvp_vars(V_ALL, r8 ? V_ALL : V_ALL & ~V_ROWS8) : 1);
        if (f)
            run_mv(t, 13, 5, 2, false, false, false, "row length not a multiple of 8");
    }
    /* GLM-4.7-Flash shapes (Q4_0 file: Q4_0 matrices, F32 router, Q6_K head
     * slice).  On lavapipe (lvp_vars): q_a and kv_a without the mv family
     * (Q4_0's mv at 8 units a thread, 11 s each to compile; the mv family's
     * Q4_0 loads-first path stays with the norm in q_b's [xs=0], and at 16
     * units a thread, 2 rows a team, in attn_output's default) or the
     * shared-input variant (2 rows a pass at 8 units a lane: q_a + kv_a's
     * default geometry);
     * attn_output and ffn_gate_inp without the shared-input variant (2 rows
     * a pass at 20 and 32 units a lane, 5 and 8 s; q_b, k_b and the
     * expert-id cases run it at short rows, ffn_gate_inp's [xs_j=32] the
     * 32-unit F32 row). */
    const int qa_vars = lvp_vars(V_LONG, V_GPU), long_vars = lvp_vars(V_LONG, V_LONG & ~V_SHARED_IN);
    run_mv_v(QT_Q4_0, 2048, 768, 1, true, false, false, "attn_q_a", qa_vars);
    run_mv_v(QT_Q4_0, 2048, 576, 1, true, false, false, "attn_kv_a_mqa", qa_vars);
    run_mv_v(QT_Q4_0, 2048, 1344, 1, true, false, false, "attn_q_a + attn_kv_a_mqa as one matrix", qa_vars);
    run_mv_v(QT_Q4_0, 768, 5120, 1, true, false, false, "attn_q_b", V_ALL);
    run_mv_v(QT_Q4_0, 192, 512, 20, false, false, false, "attn_k_b per head", V_ALL);
    run_mv_v(QT_Q4_0, 5120, 2048, 1, false, true, false, "attn_output + residual", long_vars);
    run_mv_v(QT_F32, 2048, 64, 1, true, false, false, "ffn_gate_inp", long_vars);
    run_mv(QT_Q4_0, 10240, 2048, 1, false, true, false, "dense ffn_down (input from memory)");
    run_mv_v(QT_Q6_K, 2048, 4099, 1, true, false, false, "output head slice", V_LONG);
    run_mv_v(QT_Q8_0, 1536, 333, 1, true, false, false, "Q8_0, odd rows", V_GPU);
    /* the K-quant files' matrices (Q4_K_M / Q5_K_M: Q4_K or Q5_K, k_b in
     * Q5_0 / Q5_1 (192 is no multiple of 256), some downs in Q6_K; the
     * dynamic mix: attention in Q8_0, experts in Q4_K/Q5_K/Q6_K) */
    run_mv_v(QT_Q4_K, 2048, 1344, 1, true, false, false, "Q4_K attn_q_a + attn_kv_a_mqa", V_LONG);
    run_mv_v(QT_Q5_K, 2048, 1344, 1, true, false, false, "Q5_K attn_q_a + attn_kv_a_mqa", V_LONG);
    run_mv_v(QT_Q4_K, 768, 5120, 1, true, false, false, "Q4_K attn_q_b", V_GPU);
    run_mv_v(QT_Q5_0, 192, 512, 20, false, false, false, "Q5_0 attn_k_b per head", V_LONG);
    run_mv_v(QT_Q5_1, 192, 512, 20, false, false, false, "Q5_1 attn_k_b per head", V_LONG);
    run_mv_v(QT_Q8_0, 192, 512, 20, false, false, false, "Q8_0 attn_k_b per head", V_GPU);
    run_mv_v(QT_Q5_K, 5120, 2048, 1, false, true, false, "Q5_K attn_output + residual", V_GPU);
    run_mv_v(QT_Q6_K, 1536, 2048, 1, false, false, false, "Q6_K shared expert's down, apart", V_GPU);
    run_mv_v(QT_Q4_1, 2048, 333, 1, true, false, false, "Q4_1, odd rows", V_GPU);
    run_mv_v(QT_BF16, 2048, 130, 1, true, false, false, "BF16, odd rows", V_GPU);
    /* the whole GLM-4.7-Flash head where the device can bind 261 MB (not lavapipe) */
    if (tu_row_bytes(QT_Q6_K, 2048) * 154880 <= G.c.max_range)
        run_mv(QT_Q6_K, 2048, 154880, 1, true, false, false, "GLM-4.7-Flash output head");
    else
        printf("# the full-size Q6_K head (261 MB) exceeds this device's buffer range: not run here\n");
}

/* ---- gate/up + SiLU, down + weighted sum -------------------------------------------- */

typedef struct {
    uint32_t tg, tu, td, ts, H, F, FS, nexp, nused;
    const char *what;
} moe_case;
static moe_case MC;
/* The down waits on the gate/up's counter with no barrier between the two
 * (shaders/dep_flag.glsl), as the decode graph does with dep_flags bit 3:
 * the epoch is one past a count that wraps the 32-bit counter. */
static bool MC_DEP;
/* Where the shared expert's down has another type than the routed ones', the
 * decode graph runs it as a matvec of its own and the down adds its product
 * (vk_moe_down_args.shared_out): the cases do what the graph does. */


static void test_moe(void)
{
    const moe_case *m = &MC;
    vk_tensor tg, tu, td, tsg, tsu, tsd;
    uint8_t *wg = rand_tensor(m->tg, m->H, m->F, m->nexp, &tg), *wu = rand_tensor(m->tu, m->H, m->F, m->nexp, &tu);
    uint8_t *wd = rand_tensor(m->td, m->F, m->H, m->nexp, &td);
    uint8_t *wsg = rand_tensor(m->tg, m->H, m->FS, 1, &tsg), *wsu = rand_tensor(m->tu, m->H, m->FS, 1, &tsu);
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
    vk_call calls[3];
    vk_glu_args ga = {.name = "glu", .gate = &tg, .up = &tu, .x = {bx, 0}, .norm = &norm, .eps = 1e-6f,
                      .h = {bh, 0}, .h_z = hz, .nz = m->nused, .ids = &idv};
    vk_glu_args gs = {.name = "glu_shared", .gate = &tsg, .up = &tsu, .x = {bx, 0}, .norm = &norm, .eps = 1e-6f,
                      .h = {bh, m->nused * hz}, .h_z = hz, .nz = 1};
    vk_moe_down_args da = {.name = "down", .down = &td, .shared = &tsd, .h = {bh, 0}, .h_z = hz, .nz = m->nused,
                           .ids = {bi, 0}, .wts = {bw, 0}, .y = {by, 0}};
    vk_buf bys = tu_host(m->H);
    vk_vec ysh = {bys, 0};
    vk_moe_down_args ds = da;
    ds.shared = NULL;
    ds.shared_out = &ysh;
    vk_mv_args sda = {.name = "shared down", .w = &tsd, .x = {bh, m->nused * hz}, .y = ysh, .nz = 1};
    bool split = !MC_DEP && m->td != m->ts && vk_mv_deps(&KB, &sda) && vk_moe_down_deps(&KB, &ds);
    if (split) {
        printf("# the shared expert's down apart (%s against the routed %s)\n", tu_type_name(m->ts),
               tu_type_name(m->td));
        da = ds;
    }
    /* the shared expert's gate/up is a call of its own (beside the router in
     * the decode graph) */
    uint32_t nc = 0;
    vk_call calls_split[4];
    vk_buf dep = tu_host(8), prm = tu_host(32);
    vk_vec dep_word = {dep, 3};
    bool dep_ok = MC_DEP && vk_glu_deps(&KB, &ga) && vk_glu_deps(&KB, &gs) && vk_moe_down_deps(&KB, &da);
    if (MC_DEP && !dep_ok) {
        printf("# this device runs other kernels for these shapes: no counter to wait on\n");
        MC_DEP = false;
    }
    if (MC_DEP)
        ga.dep.signal = gs.dep.signal = &dep_word;
    CHECK(vk_k_glu(&KB, &ga, &calls[nc++]) == 0, "build glu: %.200s", KERR.msg);
    CHECK(vk_k_glu(&KB, &gs, &calls[nc++]) == 0, "build glu shared: %.200s", KERR.msg);
    if (MC_DEP) {
        /* both gate/ups count into one counter, as a step of the graph does */
        uint32_t n = 0;
        for (int i = 0; i < 2; i++)
            n += calls[i].groups[0] * calls[i].groups[1] * calls[i].groups[2];
        uint32_t epoch = 0xFFFFFFFFu / n + 1;
        memset(dep.map, 0, 32);
        ((uint32_t *)dep.map)[3] = (epoch - 1) * n;
        ((uint32_t *)prm.map)[VKP_EPOCH] = epoch;
        da.dep = (vk_dep){.wait = &dep_word, .wait_n = n, .params = prm};
    }
    CHECK(vk_k_moe_down(&KB, &da, &calls[nc++]) == 0, "build down: %.200s", KERR.msg);
    /* gate/up || shared gate/up, then down (which reads all of h): a barrier
     * before the down, or its wait on the counter; split: the shared down
     * after the gate/ups, then the down */
    bool bar[3] = {false, !MC_DEP, true};
    if (split) {
        calls_split[0] = calls[0];
        calls_split[1] = calls[1];
        CHECK(vk_k_mv(&KB, &sda, &calls_split[2]) == 0, "build shared down: %.200s", KERR.msg);
        calls_split[3] = calls[2];
        bool bs[4] = {false, true, true, true};
        CHECK(tu_run(calls_split, 4, bs) == 0, "run");
    } else {
        CHECK(tu_run(calls, nc, bar) == 0, "run");
    }
    if (MC_DEP)
        CHECK(((uint32_t *)dep.map)[0] == 0, "%u waits gave up", ((uint32_t *)dep.map)[0]);

    /* Reference: h from the reference gate/up; then check h, then y using the
     * GPU's h as input (so each kernel is judged on its own). */
    float *n = malloc(m->H * sizeof *n);
    rmsnorm_ref(x, nw, m->H, 1e-6f, n);
    /* integer dot products: the references take the inputs as they quantize them */
    bool idot_gu = vk_glu_deps(&KB, &ga) && vk_k_idot(&KB, m->tg);
    bool idot_down = vk_moe_down_deps(&KB, &da) && vk_k_idot(&KB, m->td);
    /* the shared expert's down: the routed down's, or its own matvec's (split) */
    bool idot_shared = split ? vk_mv_deps(&KB, &sda) && vk_k_idot(&KB, m->ts) : idot_down;
    if (TUNE.idot)
        printf("# 8-bit integer dot products: gate/up %s, down %s, shared down %s\n", idot_gu ? "yes" : "no",
               idot_down ? "yes" : "no", idot_shared ? "yes" : "no");
    float *nq = malloc(m->H * sizeof *nq), *ntie = malloc(m->H * sizeof *ntie);
    if (idot_gu)
        ref_q8_input(n, m->H, nq, ntie);
    uint32_t bad = 0;
    double worst = 0;
    const float *gh = (const float *)bh.map;
    double *rg = malloc(hz * sizeof *rg), *ru = malloc(hz * sizeof *ru), *mg = malloc(hz * sizeof *mg),
           *mu = malloc(hz * sizeof *mu), *tg_ = calloc(hz, sizeof *tg_), *tu_ = calloc(hz, sizeof *tu_);
    for (uint32_t z = 0; z <= m->nused; z++) {
        bool sh = z == m->nused;
        uint32_t F = sh ? m->FS : m->F;
        const uint8_t *mgate = sh ? wsg : mat_of(m->tg, wg, m->H, m->F, ids[z]);
        const uint8_t *mup = sh ? wsu : mat_of(m->tu, wu, m->H, m->F, ids[z]);
        if (idot_gu) { /* the tie elements' share first (rg, ru overwritten next) */
            ref_dot_rows(m->tg, mgate, m->H, F, ntie, rg, tg_);
            ref_dot_rows(m->tu, mup, m->H, F, ntie, ru, tu_);
        }
        ref_dot_rows(m->tg, mgate, m->H, F, idot_gu ? nq : n, rg, mg);
        ref_dot_rows(m->tu, mup, m->H, F, idot_gu ? nq : n, ru, mu);
        double cb = 2 * chain_bound(m->tg, m->H); /* x2: the normalized input's own rounding */
        for (uint32_t r = 0; r < F; r++) {
            double want = silu_d(rg[r]) * ru[r];
            /* silu's slope is below 1.1 */
            double tol = 1.1 * (cb * mg[r] + tg_[r]) * fabs(ru[r]) + fabs(silu_d(rg[r])) * (cb * mu[r] + tu_[r]) + 1e-30;
            double e = fabs(gh[z * hz + r] - want) / tol;
            if (!(e <= 1)) {
                if (bad++ < 3)
                    printf("#   h[%u][%u]: gpu %.9g ref %.9g\n", z, r, gh[z * hz + r], want);
            }
            if (e > worst || isnan(e))
                worst = e;
        }
    }
    CHECK(bad == 0, "gate/up: %u outputs outside tolerance (worst %.3g x tol)", bad, worst);
    free(rg), free(ru), free(mg), free(mu), free(tg_), free(tu_), free(nq), free(ntie);

    double *acc = calloc(m->H, sizeof *acc), *mag = calloc(m->H, sizeof *mag), *tmag = calloc(m->H, sizeof *tmag);
    double *t1 = malloc(m->H * sizeof *t1), *t2 = malloc(m->H * sizeof *t2);
    float *hs = malloc(hz * sizeof *hs), *hq = malloc(hz * sizeof *hq), *htie = malloc(hz * sizeof *htie);
    for (uint32_t z = 0; z <= m->nused; z++) {
        bool sh = z == m->nused;
        uint32_t F = sh ? m->FS : m->F;
        const uint8_t *md = sh ? wsd : mat_of(m->td, wd, m->F, m->H, ids[z]);
        double wz = sh ? 1.0 : wts[z];
        if (sh ? idot_shared : idot_down) {
            /* the down stages wt[z] h[z] in float and quantizes that */
            for (uint32_t k = 0; k < F; k++)
                hs[k] = (float)wz * gh[z * hz + k];
            ref_q8_input(hs, F, hq, htie);
            ref_dot_rows(sh ? m->ts : m->td, md, F, m->H, htie, t1, t2);
            for (uint32_t r = 0; r < m->H; r++)
                tmag[r] += t2[r];
            ref_dot_rows(sh ? m->ts : m->td, md, F, m->H, hq, t1, t2);
            wz = 1.0;
        } else {
            ref_dot_rows(sh ? m->ts : m->td, md, F, m->H, gh + z * hz, t1, t2);
        }
        for (uint32_t r = 0; r < m->H; r++) {
            acc[r] += wz * t1[r];
            mag[r] += fabs(wz) * t2[r];
        }
    }
    free(hs), free(hq), free(htie);
    bad = 0;
    worst = 0;
    const float *gy = (const float *)by.map;
    for (uint32_t r = 0; r < m->H; r++) {
        double want = y0[r] + acc[r];
        double tol = chain_bound(m->td, m->F * (m->nused + 1)) * (mag[r] + fabs(y0[r])) + tmag[r] + 1e-30;
        double e = fabs(gy[r] - want) / tol;
        if (!(e <= 1) && bad++ < 3)
            printf("#   y[%u]: gpu %.9g ref %.9g\n", r, gy[r], want);
        if (e > worst || isnan(e))
            worst = e;
    }
    CHECK(bad == 0, "down: %u outputs outside tolerance (worst %.3g x tol)", bad, worst);
    free(acc), free(mag), free(tmag), free(t1), free(t2), free(n);
    free(wg), free(wu), free(wd), free(wsg), free(wsu), free(wsd), free(x), free(nw), free(y0);
    tu_reset_buffers();
}

static void moe_cases(void)
{
    static const moe_case cases[] = {
        {QT_Q4_0, QT_Q4_0, QT_Q4_0, QT_Q4_0, 2048, 1536, 1536, 64, 4, "GLM-4.7-Flash experts, Q4_0"},
        {QT_Q8_0, QT_Q8_0, QT_Q8_0, QT_Q8_0, 256, 96, 160, 8, 3, "Q8_0, a wider shared expert"},
        {QT_F16, QT_F16, QT_F16, QT_F16, 128, 40, 40, 8, 2, "F16"},
        {QT_Q4_K, QT_Q4_K, QT_Q5_0, QT_Q8_0, 256, 64, 128, 8, 2, "Q4_K_M mix, 2 shared experts"},
        {QT_F32, QT_F32, QT_F32, QT_F32, 64, 32, 32, 8, 4, "tiny F32"},
        {QT_Q8_0, QT_Q8_0, QT_Q6_K, QT_Q6_K, 512, 256, 256, 16, 6, "Q8_0 gate/up, Q6_K down"},
        {QT_Q4_K, QT_Q4_K, QT_Q4_K, QT_Q4_K, 2048, 1536, 1536, 64, 4, "GLM-4.7-Flash experts, Q4_K"},
        /* 48 of the 64 experts: lavapipe binds at most 128 MB, 64 Q5_K experts are 138 */
        {QT_Q5_K, QT_Q5_K, QT_Q6_K, QT_Q6_K, 2048, 1536, 1536, 48, 4, "GLM-4.7-Flash experts, Q5_K_M's Q6_K downs"},
        {QT_Q4_K, QT_Q4_K, QT_Q5_K, QT_Q6_K, 2048, 1536, 1536, 48, 4, "the dynamic mix: Q5_K down, Q6_K shared"},
        {QT_Q5_1, QT_Q5_1, QT_Q4_1, QT_Q4_1, 256, 96, 96, 8, 2, "Q5_1 gate/up, Q4_1 down"},
        {QT_BF16, QT_BF16, QT_BF16, QT_Q8_0, 128, 40, 64, 8, 2, "BF16, a Q8_0 shared down"},
        /* the x-stationary down of Q4_0 and of Q4_K at a short row: on
         * lavapipe the GLM-size ones take it only under [xs_j=32] */
        {QT_Q4_K, QT_Q4_K, QT_Q4_0, QT_Q4_0, 256, 96, 96, 8, 3, "Q4_K gate/up, Q4_0 down"},
        {QT_Q4_0, QT_Q4_0, QT_Q4_K, QT_Q4_K, 256, 256, 256, 8, 2, "Q4_0 gate/up, Q4_K down"},
        /* the 16-level types' integer units (MXFP4_MOE: MXFP4 experts beside
         * a Q8_0 shared expert; IQ4_XS files: IQ4_XS everywhere) */
        {QT_MXFP4, QT_MXFP4, QT_MXFP4, QT_Q8_0, 512, 160, 96, 16, 4, "MXFP4 experts, Q8_0 shared"},
        {QT_IQ4_XS, QT_IQ4_XS, QT_IQ4_XS, QT_IQ4_XS, 512, 256, 256, 16, 4, "IQ4_XS experts"},
    };
    /* The variants.  On a GPU the GLM-size experts run [xs_j=32] as well (the
     * x-stationary down over the 5 staged rows of h).  On lavapipe that is
     * 30 (Q4_0) or 15 (Q4_K, Q6_K) units a lane, 10-13 s each to compile:
     * there only the dynamic mix keeps it (a long x-stationary down, with
     * the shared expert's down apart, 12 units a lane, 6 s), and the Q4_0 and
     * Q4_K downs take the x-stationary kernel in the two short cases above
     * (Q6_K's in the Q8_0 / Q6_K one).  The 8-rows variant of the experts'
     * kernels on lavapipe in the F16 case only (the same loops as Q8_0's;
     * Q8_0's rows8 compile alone was 6 s). */
    const int glm_xs = lvp_vars(V_GPU, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        MC = cases[i];
        char name[160];
        snprintf(name, sizeof name, "experts gate/up/down %s (H=%u F=%u, %u of %u)", MC.what, MC.H, MC.F, MC.nused,
                 MC.nexp);
        int vars = 1;
        if (i == 0 || i == 6 || i == 7)
            vars = glm_xs;
        else if (i == 8)
            vars = V_GPU;
        else if (i == 1)
            vars = lvp_vars(V_ALL, V_ALL & ~V_ROWS8);
        else if (i == 2)
            vars = V_ALL;
        run_variants(test_moe, name, vars);
        if (i == 0 || i == 1 || i == 6 || i == 7 || i >= 13)
            run_tuned(test_moe, name, v_idot);
        if (i < 2) {
            MC_DEP = true;
            snprintf(name, sizeof name, "experts gate/up/down %s, the down waiting on a counter (no barrier)",
                     MC.what);
            RUN_NAMED(test_moe, name);
            MC_DEP = i == 0;
            if (MC_DEP)
                run_tuned(test_moe, name, v_idot);
            MC_DEP = false;
        }
    }
}

/* ---- router -------------------------------------------------------------------------- */

typedef struct {
    uint32_t type, H, E, k, gating, nz;
    bool bias, norm_w;
    float scale;
    const char *what;
    /* exact ties: a router of zeros (every logit 0) and the bias, if any,
     * in three levels, (e % 3) / 8: the chosen are the lowest ids of the
     * best level, several lanes holding it in every round */
    bool ties;
} router_case;
static router_case RC;

static void test_router(void)
{
    const router_case *c = &RC;
    vk_tensor t;
    /* the case's data from a seed of its own, the same in every variant: so
     * that TEST_SAMPLE's skipped variants cannot shift it (test_router
     * rejects data with a near tie, and these seeds have none) */
    tu_rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)c->E << 32 | c->H);
    /* router logits of a few units, as in trained models (no saturation ties) */
    W_SCALE = c->ties ? 0.0f : 1.0f / sqrtf((float)c->H);
    uint8_t *w = rand_tensor(c->type, c->H, c->E, 1, &t);
    W_SCALE = 1.0f;
    uint32_t xz = c->H + 4;
    float *x = random_vec((uint64_t)xz * c->nz, 1.0f), *nw = norm_weights(c->H), *bias = random_vec(c->E, 0.1f);
    for (uint32_t e = 0; c->ties && e < c->E; e++)
        bias[e] = (float)(e % 3) * 0.125f;
    vk_buf bx = host_copy(x, (uint64_t)xz * c->nz), bn = host_copy(nw, c->H), bb = host_copy(bias, c->E);
    vk_buf bl = tu_host((uint64_t)c->E * c->nz), bi = tu_host((uint64_t)c->k * c->nz),
           bw = tu_host((uint64_t)c->k * c->nz), bc = tu_host(c->nz);
    memset(bc.map, 0, 4ull * c->nz);
    vk_vec bv = {bb, 0};
    vk_router_args a = {.w = &t, .x = {bx, 0}, .x_z = xz, .norm = {bn, 0}, .eps = 1e-5f, .logits = {bl, 0},
                        .ids = {bi, 0}, .wts = {bw, 0}, .bias = c->bias ? &bv : NULL, .counter = {bc, 0},
                        .n_used = c->k, .gating = c->gating, .nz = c->nz, .norm_w = c->norm_w, .scale = c->scale};
    vk_call call;
    CHECK(vk_k_router(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    /* twice: the second run checks that the counter was reset */
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    memset(bi.map, 0xff, 4ull * c->k * c->nz);
    CHECK(tu_run(&call, 1, NULL) == 0, "run 2");
    float *n = malloc(c->H * sizeof *n);
    double *lg = malloc(c->E * sizeof *lg), *mg = malloc(c->E * sizeof *mg), *p = malloc(c->E * sizeof *p),
           *sc = malloc(c->E * sizeof *sc);
    for (uint32_t z = 0; z < c->nz; z++) {
        rmsnorm_ref(x + (uint64_t)z * xz, nw, c->H, 1e-5f, n);
        ref_dot_rows(c->type, w, c->H, c->E, n, lg, mg);
        double mx = -INFINITY, se = 0;
        for (uint32_t e = 0; e < c->E; e++)
            mx = fmax(mx, lg[e]);
        for (uint32_t e = 0; e < c->E; e++) {
            p[e] = c->gating == 2 ? 1 / (1 + exp(-lg[e])) : exp(lg[e] - mx);
            se += p[e];
        }
        for (uint32_t e = 0; e < c->E; e++) {
            if (c->gating != 2)
                p[e] /= se;
            sc[e] = p[e] + (c->bias ? bias[e] : 0);
        }
        int32_t want[32];
        double sum = 0, margin = INFINITY, last = 0;
        for (uint32_t k = 0; k <= c->k && k < c->E; k++) {
            uint32_t b = 0;
            for (uint32_t e = 1; e < c->E; e++)
                if (sc[e] > sc[b])
                    b = e;
            if (k > 0)
                margin = fmin(margin, last - sc[b]);
            if (k == c->k)
                break;
            last = sc[b];
            want[k] = (int32_t)b;
            sum += p[b];
            sc[b] = -INFINITY;
        }
        const int32_t *gi = (const int32_t *)bi.map + z * c->k;
        const float *gw = (const float *)bw.map + z * c->k;
        /* a selection closer than 1e-5 could flip legitimately; none here is (checked) */
        CHECK(c->ties || margin > 1e-5, "token %u: test data has a near tie (%g)", z, margin);
        for (uint32_t k = 0; k < c->k; k++) {
            CHECK(gi[k] == want[k], "token %u slot %u: expert %d, want %d", z, k, gi[k], want[k]);
            double wv = p[want[k]] / (c->norm_w ? fmax(sum, 6.103515625e-5) : 1.0) * (c->scale != 0 ? c->scale : 1);
            /* probabilities from float logits: a few ulps of exp and the sum */
            CHECK(fabs(gw[k] - wv) <= 1e-5 * fabs(wv) + 1e-7, "token %u slot %u: weight %.9g, want %.9g", z, k, gw[k],
                  wv);
        }
    }
    free(n), free(lg), free(mg), free(p), free(sc), free(w), free(x), free(nw), free(bias);
    tu_reset_buffers();
}

static void router_cases(void)
{
    static const router_case cases[] = {
        {QT_F32, 2048, 64, 4, 2, 1, true, true, 1.8f, "GLM-4.7-Flash: sigmoid + bias, normalized, x1.8", false},
        {QT_F32, 64, 8, 2, 1, 3, false, false, 1.0f, "DeepSeek-V2-Lite: softmax, 3 tokens", false},
        {QT_F32, 256, 8, 4, 2, 2, true, true, 1.8f, "tiny GLM", false},
        {QT_F16, 512, 160, 6, 1, 1, false, true, 16.0f, "160 experts, F16 router", false},
        {QT_F32, 256, 64, 4, 2, 1, true, true, 1.8f, "ties: zeros, the bias in three levels", true},
        {QT_F32, 64, 8, 2, 1, 1, false, false, 1.0f, "ties: zeros, softmax, every expert alike", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        RC = cases[i];
        char name[160];
        snprintf(name, sizeof name, "router %s (H=%u, top %u of %u)", RC.what, RC.H, RC.k, RC.E);
        /* on lavapipe: the GLM router without the shared-input variant (2
         * rows a pass at 32 units a lane, 10 s to compile; the short routers
         * run it), the 8-rows variant in DeepSeek-V2-Lite's only (the same
         * loops at any row; 6 s more for the other two) */
        /* the ties: the x-stationary router and the mv family's (the
         * tail is the same code at any row split) */
        run_variants(test_router, name,
                     RC.ties ? V_DEFAULT | V_MV
                     : i == 0 ? lvp_vars(V_LONG, V_LONG & ~V_SHARED_IN)
                     : i == 1 ? V_ALL
                              : lvp_vars(V_ALL, V_ALL & ~V_ROWS8));
    }
}

/* ---- embedding ----------------------------------------------------------------------- */

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
            /* a K-quant value is d*sc*q - dmin*m: two roundings of terms below the row max */
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
    static const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0,
                                     QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        EMB_TYPE = types[i];
        bool k = EMB_TYPE == QT_Q4_K || EMB_TYPE == QT_Q5_K || EMB_TYPE == QT_Q6_K;
        EMB_K = k ? 512 : EMB_TYPE == QT_F32 ? 70 : 96;
        char name[96];
        snprintf(name, sizeof name, "embedding %s (row %u, 5 tokens)", tu_type_name(EMB_TYPE), EMB_K);
        RUN_NAMED(test_embed, name);
    }
}

/* ---- geometry ------------------------------------------------------------------------------ */

/* The x-stationary kernels ask for 512-thread workgroups (gpu/PERF.md run
 * 63); on a device whose workgroups hold fewer (256 is the least glmchat
 * accepts) the geometry stays within them.  The device here is told so: its
 * properties copied with the limits lowered. */
static void test_workgroup_limit(void)
{
    vk_ctx low = G.c;
    low.props.limits.maxComputeWorkGroupInvocations = 256;
    low.props.limits.maxComputeWorkGroupSize[0] = 256;
    vk_kb kb = {&low, &G.pipes, &TUNE, &KERR}, real = {&G.c, &G.pipes, &TUNE, &KERR};
    vkk_xs_cfg x;
    /* the routed experts' gate/up of GLM-4.7-Flash: 1536 rows of 2048, 4 experts, gate and up */
    /* here: 512, or what this device's subgroups (at most 64 a workgroup) and limits allow */
    uint32_t sg = G.c.subgroup, lim = G.c.props.limits.maxComputeWorkGroupInvocations, want = VKK_XS_WGS;
    if (G.c.props.limits.maxComputeWorkGroupSize[0] < lim)
        lim = G.c.props.limits.maxComputeWorkGroupSize[0];
    want = want > 64 * sg ? 64 * sg : want;
    want = want > lim ? lim / sg * sg : want;
    CHECK(vkk_xs_config(&real, QT_Q4_K, 2048, 1536, 4, 2, VKK_XS_WGS, &x), "no geometry on this device");
    CHECK(x.wgs == want, "wgs %u here, want %u", x.wgs, want);
    CHECK(vkk_xs_config(&kb, QT_Q4_K, 2048, 1536, 4, 2, VKK_XS_WGS, &x), "no geometry at 256 invocations");
    CHECK(x.wgs <= 256 && x.wgs >= sg && x.wgs % sg == 0, "wgs %u for a 256-thread device", x.wgs);
    CHECK(x.groups > 0 && (uint64_t)x.groups * (x.wgs / x.team) * x.r * x.passes >= 1536,
          "%u groups do not cover the rows", x.groups);
}

int main(void)
{
    if (tu_kernels_open())
        return 1;
    RUN_NAMED(test_workgroup_limit, "x-stationary geometry within a 256-invocation device's workgroups");
    mv_cases();
    moe_cases();
    router_cases();
    embed_cases();
    tu_gpu_close();
    TESTS_DONE();
}
