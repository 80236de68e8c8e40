/* test_vk_prefill.c: the prompt graph's kernels against a float64
 * reference on random data: the tiled mat-mat (fp32, or mm_coop on tensor
 * cores) in every weight type and mode, batched heads (k_b, v_b) with split
 * activations, activations beyond fp16's range, the K steps' agreement,
 * rmsnorm of a batch, and the expert pipeline (group, gate/up, down,
 * combine) over a work list. */
#include "vk_testutil.h"

typedef struct {
    uint32_t type, K, N, T;
    int mode; /* 0 store, 1 accumulate, 2 glu */
    const char *what;
    uint32_t up_type; /* glu: the up matrix's type when it differs from the gate's (0: the same) */
} mm_case;
static mm_case MMC;

static void test_mm(void)
{
    const mm_case *c = &MMC;
    err_t err = {{0}};
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
    (void)err;
    double *r1 = malloc(c->N * sizeof *r1), *m1 = malloc(c->N * sizeof *m1), *r2 = malloc(c->N * sizeof *r2),
           *m2 = malloc(c->N * sizeof *m2);
    uint32_t bad = 0;
    double worst = 0, cb = mm_bound(c->type, c->K), cbu = mm_bound(ut, c->K);
    const float *gy = (const float *)by.map;
    for (uint32_t tk = 0; tk < B; tk++) {
        if (tk >= c->T) {
            /* past the batch: untouched */
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

static void test_mm_range(void);

/* mm_coop steps through K by 64 for a small grid and by 32 for an expert
 * work list's (gpu/PERF.md run 23): a move of its barriers, not of its
 * arithmetic -- either way the MMAs run over K in the same 16-element
 * chunks, in the same order, into the same accumulators, from operands
 * converted the same way, and a tile's other tokens do not enter a token's
 * outputs.  So the product of a batch (these grids are small), run again
 * through a work list of its tokens in order (tiles of 32 pairs, pair =
 * token), must give the same outputs bit for bit (which also carries the
 * fixture results of one step over to the other).  Devices with
 * cooperative matrices only. */
typedef struct {
    uint32_t type, K, N, T;
    int mode;   /* 0 store, 1 accumulate, 2 glu */
    bool split; /* activations as hi + lo fp16 pairs */
    const char *what;
} steps_case;
static steps_case STC;

static void test_mm_list_steps_agree(void)
{
    const steps_case *c = &STC;
    vk_tensor t, tu;
    uint8_t *w = rand_tensor(c->type, c->K, c->N, 1, &t), *wu = NULL;
    if (c->mode == 2)
        wu = rand_tensor(c->type, c->K, c->N, 1, &tu);
    uint32_t tl = 32, B = 64 * ((c->T + 63) / 64), nt = B / tl;
    uint64_t nx = (uint64_t)c->K * B, ny = (uint64_t)c->N * B;
    float *x = random_vec(nx, 1.0f), *y0 = random_vec(ny, 1.0f);
    uint32_t params[64] = {0}, *pairs = malloc(B * 4), *tiles = calloc(4 * nt, 4);
    params[VKP_NTOK] = c->T;
    for (uint32_t i = 0; i < B; i++)
        pairs[i] = i;
    for (uint32_t i = 0; i < nt; i++) /* (matrix, first pair, pairs) */
        tiles[4 * i + 1] = tl * i, tiles[4 * i + 2] = c->T > tl * i ? (c->T - tl * i < tl ? c->T - tl * i : tl) : 0;
    vk_buf bx = host_copy(x, nx), bp = host_copy(params, 64), bl = host_copy(pairs, B),
           btl = host_copy(tiles, 4 * nt), by[2];
    for (int i = 0; i < 2; i++) {
        by[i] = host_copy(y0, ny);
        vk_mm_args a = {.name = i ? "mm list" : "mm", .w = &t, .up = c->mode == 2 ? &tu : NULL, .x = {bx, 0},
                        .x_stride = c->K, .x_div = 1, .y = {by[i], 0}, .y_stride = c->N, .nz = 1, .max_tokens = B,
                        .accumulate = c->mode == 1, .x_split = c->split, .params = bp};
        if (i)
            a.list = &bl, a.tiles = &btl, a.tile = tl;
        vk_call call;
        CHECK(vk_k_mm(&KB, &a, &call) == 0, "build %s: %.200s", a.name, KERR.msg);
        CHECK(tu_run(&call, 1, NULL) == 0, "run %s", a.name);
    }
    const float *gb = (const float *)by[0].map, *gl = (const float *)by[1].map;
    uint64_t differ = 0;
    double worst = 0;
    for (uint64_t i = 0; i < ny; i++)
        if (memcmp(&gb[i], &gl[i], 4) != 0) {
            differ++;
            double d = fabs((double)gl[i] - gb[i]) / (fabs((double)gb[i]) + 1e-30);
            worst = d > worst || isnan(d) ? d : worst;
        }
    CHECK(differ == 0, "%llu of %llu outputs differ (largest relative difference %.3g)", (unsigned long long)differ,
          (unsigned long long)ny, worst);
    free(w), free(wu), free(x), free(y0), free(pairs), free(tiles);
    tu_reset_buffers();
}

static void mm_steps_cases(void)
{
    static const steps_case cases[] = {
        {QT_Q4_K, 2048, 200, 70, 2, false, "gate/up of 64-token tiles"},
        {QT_Q4_0, 2080, 130, 33, 1, false, "+ residual, K 2080: a half step at the end"},
        {QT_Q6_K, 1536, 129, 64, 0, false, "K 1536"},
        {QT_Q5_1, 160, 70, 9, 2, false, "gate/up, K 160"},
        {QT_F16, 200, 96, 65, 0, true, "split activations, K 200"},
        {QT_Q8_0, 1568, 70, 20, 1, true, "split activations + residual, K 1568"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        STC = cases[i];
        char name[200];
        snprintf(name, sizeof name,
                 "mm_coop through a work list (K step 32) = as a batch (K step 64), bit for bit: %s K=%u N=%u T=%u "
                 "%s (%s)",
                 tu_type_name(STC.type), STC.K, STC.N, STC.T,
                 STC.mode == 0 ? "store" : STC.mode == 1 ? "accumulate" : "glu", STC.what);
        RUN_NAMED(test_mm_list_steps_agree, name);
    }
}

/* Batched heads (z = head): Y[t][h][:N] = W[h] . X[t][h][:K] with a token
 * stride over all heads and a head stride inside it -- the prefill's k_b
 * (q_nope of rows of nope + rope -> latent rows of RS) and v_b (latents of
 * rows of RS -> rows of v_head).  Output elements between a head's N and
 * the next head must stay untouched. */
typedef struct {
    uint32_t type, K, N, heads, T, x_h, y_h;
    const char *what;
    bool split; /* activations as hi + lo fp16 pairs (x_split) */
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
                    .y_stride = ys, .y_z = c->y_h, .nz = c->heads, .max_tokens = B, .x_split = c->split,
                    .params = bp};
    vk_call call;
    CHECK(vk_k_mm(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    double *r = malloc(c->N * sizeof *r), *m = malloc(c->N * sizeof *m), worst = 0;
    double cb = c->split ? mm_bound_split(c->type, c->K) : mm_bound(c->type, c->K);
    const float *gy = (const float *)by.map;
    uint32_t bad = 0;
    for (uint32_t tk = 0; tk < B; tk++)
        for (uint32_t h = 0; h < c->heads; h++) {
            const float *g = gy + (uint64_t)tk * ys + (uint64_t)h * c->y_h, *g0 = y0 + (uint64_t)tk * ys + h * c->y_h;
            if (tk < c->T)
                ref_dot_rows(c->type, mat_of(c->type, w, c->K, c->N, h), c->K, c->N,
                             x + (uint64_t)tk * xs + (uint64_t)h * c->x_h, r, m);
            for (uint32_t n = 0; n < c->y_h; n++) {
                bool mine = tk < c->T && n < c->N;
                double want = mine ? r[n] : g0[n], tol = mine ? cb * m[n] + 1e-30 : 0;
                double e = tol > 0 ? fabs(g[n] - want) / tol : (g[n] == want ? 0 : INFINITY);
                if (!(e <= 1) && bad++ < 3)
                    printf("#   token %u head %u row %u: gpu %.9g want %.9g tol %.3g\n", tk, h, n, g[n], want, tol);
                if (e > worst || isnan(e))
                    worst = e;
            }
        }
    CHECK(bad == 0, "%u outputs wrong (worst %.3g x tol)", bad, worst);
    free(w), free(x), free(y0), free(r), free(m);
    tu_reset_buffers();
}

static void mm_heads_cases(void)
{
    static const mmh_case cases[] = {
        {QT_Q8_0, 192, 512, 4, 70, 256, 576, "k_b: 4 of GLM-4.7-Flash's heads, 70 tokens", false},
        {QT_Q4_0, 192, 512, 3, 33, 256, 576, "k_b, Q4_0", false},
        {QT_F16, 192, 512, 2, 65, 256, 576, "k_b, F16", false},
        {QT_Q8_0, 512, 256, 4, 70, 576, 256, "v_b: 4 heads, 70 tokens", false},
        {QT_Q6_K, 512, 256, 2, 20, 576, 260, "v_b, Q6_K, gaps between heads", false},
        {QT_BF16, 512, 256, 3, 64, 576, 256, "v_b, BF16, a full tile", false},
        {QT_F32, 64, 32, 4, 25, 48, 40, "tiny k_b, F32", false},
        {QT_Q5_0, 96, 40, 3, 9, 100, 44, "odd: 3 blocks, 40 rows, 9 tokens", false},
        /* split activations (the prefill's k_b / v_b), every weight type;
         * F16 is the case that tells hi + lo from a single fp16 */
        {QT_F16, 192, 512, 3, 70, 256, 576, "k_b: 3 heads, 70 tokens", true},
        {QT_F16, 512, 256, 2, 65, 576, 260, "v_b, gaps between heads", true},
        {QT_F16, 200, 96, 2, 33, 200, 100, "K 200: a partial last step", true},
        {QT_Q8_0, 192, 512, 5, 512, 256, 576, "k_b: 5 heads, 512 tokens, a grid of 160 workgroups", true},
        {QT_Q8_0, 192, 512, 2, 33, 256, 576, "k_b", true},
        {QT_Q4_0, 512, 256, 2, 20, 576, 256, "v_b", true},
        {QT_Q4_1, 192, 96, 2, 9, 200, 100, "gaps", true},
        {QT_Q5_0, 96, 40, 3, 9, 100, 44, "odd: 3 blocks, 40 rows, 9 tokens", true},
        {QT_Q5_1, 160, 130, 2, 17, 160, 130, "2 row tiles", true},
        {QT_Q4_K, 512, 256, 2, 20, 576, 256, "v_b", true},
        {QT_Q5_K, 256, 96, 2, 40, 260, 100, "one block", true},
        {QT_Q6_K, 512, 256, 2, 20, 576, 260, "v_b, gaps between heads", true},
        {QT_BF16, 192, 512, 2, 64, 256, 576, "k_b, a full tile", true},
        {QT_F32, 64, 32, 4, 25, 48, 40, "tiny k_b, F32", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        MMH = cases[i];
        char name[220];
        vk_tensor w = {.type = MMH.type};
        snprintf(name, sizeof name, "mat-mat batched heads %s K=%u N=%u heads=%u T=%u (%s)%s [%s]",
                 tu_type_name(MMH.type), MMH.K, MMH.N, MMH.heads, MMH.T, MMH.what,
                 MMH.split ? ", activations split hi + lo" : "", mm_path(&w, NULL));
        RUN_NAMED(test_mm_heads, name);
    }
}

static void mm_cases(void)
{
    /* rows not a multiple of 128 (or 64), tokens not a multiple of 64 (or 32),
     * K of the model (2048, 1536, 5120) and odd multiples of the block (K not
     * a multiple of mm_coop's step of 64: its last step is half empty), every
     * weight type in each mode */
    static const mm_case cases[] = {
        {QT_F32, 96, 70, 25, 0, "tiny F32 prompt", 0},
        {QT_F32, 200, 130, 65, 2, "F32 gate/up, 65 tokens", 0},
        {QT_Q4_0, 2048, 576, 70, 0, "attn_kv_a_mqa, 70 tokens", 0},
        {QT_Q4_0, 5120, 130, 33, 1, "attn_output rows + residual", 0},
        {QT_Q4_0, 1536, 200, 129, 2, "q_b-sized K, 129 tokens, glu", 0},
        {QT_Q4_0, 2048, 128, 64, 2, "whole tiles", 0},
        {QT_Q4_0, 96, 257, 65, 0, "3 blocks, 2 tiles + 1 row", 0},
        {QT_Q4_1, 160, 130, 33, 1, "Q4_1, 5 blocks", 0},
        {QT_Q5_0, 224, 100, 40, 2, "Q5_0 gate/up, 7 blocks", 0},
        {QT_Q5_1, 96, 33, 9, 2, "Q5_1 gate/up", 0},
        {QT_Q8_0, 160, 40, 5, 1, "Q8_0, 5 tokens", 0},
        {QT_Q8_0, 1536, 140, 70, 0, "Q8_0, K 1536", 0},
        {QT_Q4_K, 512, 96, 17, 2, "gate/up + SiLU, Q4_K", 0},
        {QT_Q4_K, 768, 129, 66, 1, "Q4_K, 3 blocks", 0},
        {QT_Q5_K, 1280, 70, 31, 0, "Q5_K, 5 blocks", 0},
        {QT_Q6_K, 256, 129, 64, 0, "Q6_K, a full tile of tokens", 0},
        {QT_Q6_K, 1536, 130, 20, 2, "Q6_K gate/up, K 1536", 0},
        {QT_F16, 72, 20, 3, 0, "F16", 0},
        {QT_F16, 200, 131, 65, 1, "F16, K not a multiple of 32", 0},
        {QT_BF16, 136, 129, 70, 2, "BF16 gate/up", 0},
        /* the K-quant files' prefill shapes */
        {QT_Q4_K, 2048, 200, 70, 2, "Q4_K experts' gate/up rows, 70 tokens", 0},
        {QT_Q5_K, 2048, 130, 65, 2, "Q5_K gate/up, 65 tokens", 0},
        {QT_Q6_K, 1536, 130, 33, 1, "Q6_K down rows + residual", 0},
        {QT_Q5_K, 5120, 70, 20, 1, "Q5_K attn_output rows + residual", 0},
        {QT_Q5_0, 2048, 130, 64, 0, "Q5_0, a full tile", 0},
        {QT_Q5_1, 1536, 129, 17, 2, "Q5_1 gate/up, K 1536", 0},
        {QT_Q4_1, 2048, 96, 40, 0, "Q4_1, K 2048", 0},
        /* the rest of every type x mode, and K = 32 (mod 64) in the tightest
         * tiles (gate/up of 64 tokens: two weight tiles in shared memory) */
        {QT_Q4_0, 2080, 130, 70, 2, "glu, K 2080 (65 blocks), 70 tokens", 0},
        {QT_Q4_1, 288, 130, 40, 2, "Q4_1 gate/up, 9 blocks", 0},
        {QT_Q5_0, 1056, 70, 33, 1, "Q5_0 + residual, 33 blocks", 0},
        {QT_Q5_1, 2080, 129, 70, 1, "Q5_1 + residual, 65 blocks", 0},
        {QT_Q5_1, 160, 40, 9, 0, "Q5_1, 5 blocks", 0},
        {QT_Q8_0, 1568, 200, 65, 2, "Q8_0 gate/up, 49 blocks", 0},
        {QT_Q4_K, 1536, 130, 64, 0, "Q4_K, K 1536", 0},
        {QT_F16, 264, 70, 33, 2, "F16 gate/up, K 264", 0},
        {QT_BF16, 1544, 129, 65, 1, "BF16 + residual, K 1544", 0},
        {QT_BF16, 72, 40, 9, 0, "BF16, K 72", 0},
        /* a grid of 144 workgroups: more than an H100's or H200's SMs, so
         * mm_coop steps by 32 there (by 64 in the smaller grids above) */
        {QT_Q4_0, 64, 1100, 1000, 2, "gate/up, a grid of 144 workgroups", 0},
        /* gate and up of different types (mixed files: each matrix's own
         * decoding and scale words in the same thread) */
        {QT_Q4_K, 2048, 200, 70, 2, "gate Q4_K, up Q5_K", QT_Q5_K},
        {QT_Q8_0, 1536, 130, 33, 2, "gate Q8_0, up Q6_K", QT_Q6_K},
        {QT_Q5_K, 2048, 129, 65, 2, "gate Q5_K, up Q4_0, K 2048", QT_Q4_0},
        {QT_Q4_0, 2080, 70, 20, 2, "gate Q4_0, up Q8_0, K 2080", QT_Q8_0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        MMC = cases[i];
        char name[160];
        vk_tensor w = {.type = MMC.type};
        snprintf(name, sizeof name, "mat-mat %s K=%u N=%u T=%u %s (%s) [%s]", tu_type_name(MMC.type), MMC.K, MMC.N,
                 MMC.T, MMC.mode == 0 ? "store" : MMC.mode == 1 ? "accumulate" : "glu", MMC.what,
                 mm_path(&w, MMC.mode == 2 ? &w : NULL));
        RUN_NAMED(test_mm, name);
    }
    vk_tensor q = {.type = QT_Q4_0};
    char name[160];
    snprintf(name, sizeof name, "mat-mat Q4_0 activations beyond fp16's range stay finite [%s]", mm_path(&q, NULL));
    RUN_NAMED(test_mm_range, name);
    mm_heads_cases();
}

/* Activations far beyond fp16's range (1e6 in a few places of some tokens):
 * the tensor-core path rounds activations to fp16, so it cannot be exact
 * there, but every output must stay finite (an inf would become NaN in the
 * next layers) and tokens without such values must still match the
 * reference; the fp32 path must match everywhere. */
static void test_mm_range(void)
{
    uint32_t K = 256, N = 70, T = 20, B = 64;
    vk_tensor t;
    uint8_t *w = rand_tensor(QT_Q4_0, K, N, 1, &t);
    float *x = random_vec((uint64_t)K * B, 1.0f);
    bool hot[64] = {false};
    for (uint32_t tk = 0; tk < T; tk += 3) {
        hot[tk] = true;
        x[(uint64_t)tk * K + (tk * 37) % K] = 1e6f;
        x[(uint64_t)tk * K + (tk * 91 + 5) % K] = -3e6f;
    }
    uint32_t params[64] = {0};
    params[VKP_NTOK] = T;
    vk_buf bx = host_copy(x, (uint64_t)K * B), by = tu_host((uint64_t)N * B), bp = host_copy(params, 64);
    vk_mm_args a = {.name = "mm", .w = &t, .x = {bx, 0}, .x_stride = K, .y = {by, 0}, .y_stride = N, .nz = 1,
                    .max_tokens = B, .params = bp};
    vk_call call;
    CHECK(vk_k_mm(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    bool exact = strcmp(vk_mm_kernel(&KB, &t, NULL), "mm") == 0;
    double *r = malloc(N * sizeof *r), *m = malloc(N * sizeof *m), cb = mm_bound(QT_Q4_0, K);
    const float *gy = (const float *)by.map;
    uint32_t bad = 0;
    for (uint32_t tk = 0; tk < T; tk++) {
        ref_dot_rows(QT_Q4_0, w, K, N, x + (uint64_t)tk * K, r, m);
        for (uint32_t n = 0; n < N; n++) {
            float got = gy[(uint64_t)tk * N + n];
            bool ok = isfinite(got) && (hot[tk] && !exact ? true : fabs(got - r[n]) <= cb * m[n] + 1e-30);
            if (!ok && bad++ < 3)
                printf("#   token %u row %u: gpu %.9g ref %.9g\n", tk, n, got, r[n]);
        }
    }
    CHECK(bad == 0, "%u outputs wrong or not finite", bad);
    free(w), free(x), free(r), free(m);
    tu_reset_buffers();
}

static void test_rmsnorm(void)
{
    uint32_t n = 2048, T = 7, B = 9;
    float *x = random_vec((uint64_t)n * B, 3.0f), *w = norm_weights(n);
    uint32_t params[64] = {0};
    params[VKP_NTOK] = T;
    vk_buf bx = host_copy(x, (uint64_t)n * B), by = tu_host((uint64_t)n * B), bw = host_copy(w, n),
           bp = host_copy(params, 64);
    vk_rmsnorm_args a = {.x = {bx, 0}, .y = {by, 0}, .w = {bw, 0}, .n = n, .x_z = n, .y_z = n, .nz = B, .eps = 1e-5f,
                         .params = bp};
    vk_call call;
    CHECK(vk_k_rmsnorm(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    float *ref = malloc(n * sizeof *ref);
    uint32_t bad = 0;
    for (uint32_t t = 0; t < B; t++) {
        const float *g = (const float *)by.map + (uint64_t)t * n;
        if (t >= T) {
            CHECK(isnan(g[0]), "token %u past the batch was written", t);
            continue;
        }
        rmsnorm_ref(x + (uint64_t)t * n, w, n, 1e-5f, ref);
        /* the sum of squares over n terms (n/256 + 64 ulps), 1/sqrt, two products */
        for (uint32_t i = 0; i < n; i++)
            if (!(fabsf(g[i] - ref[i]) <= ((n / 256.0f + 64) * (float)U24 + 4e-7f) * fabsf(ref[i]) + 1e-30f) &&
                bad++ < 3)
                printf("#   token %u elem %u: gpu %.9g ref %.9g\n", t, i, g[i], ref[i]);
    }
    CHECK(bad == 0, "%u elements wrong", bad);
    free(x), free(w), free(ref);
    tu_reset_buffers();
}

/* fp16 activations (vk_rmsnorm_args.y16 -> vk_mm_args.x16): rmsnorm's
 * twin holds, half for half, what mm_coop's x_pack makes of the fp32 row
 * (clamped to +-65504, rounded to nearest: the host's conversion, exactly);
 * and a mat-mat reading the twin gives bit for bit the outputs of the same
 * mat-mat reading the fp32 rows -- on tensor cores, where the twin is read
 * (store, accumulate, gate/up; whole rows and a row of 2056, whose last step
 * takes the halves one by one); elsewhere the fp32 kernel reads x either
 * way.  Some inputs are scaled past fp16's range, where both clamp.  On
 * tensor cores, a store or gate/up's own twin of y (vk_mm_args.y16, the
 * epilogue's pairs) equals the host's rounding of its y, and a second
 * mat-mat gives from it what it gives from y, bit for bit. */
typedef struct {
    uint32_t type, up_type, K, N, T;
    int mode;
} act16_case;
static act16_case A16;

static void test_act16(void)
{
    const act16_case *c = &A16;
    uint32_t n = c->K, B = 64 * ((c->T + 63) / 64);
    float *x = random_vec((uint64_t)n * B, 3.0f), *nw = norm_weights(n);
    for (uint32_t i = 0; i < n; i += 97)
        nw[i] *= 1e5f; /* some outputs beyond 65504 */
    uint32_t params[64] = {0};
    params[VKP_NTOK] = c->T;
    vk_buf bx = host_copy(x, (uint64_t)n * B), by = tu_host((uint64_t)n * B), bh = tu_host((uint64_t)n * B / 2),
           bw = host_copy(nw, n), bp = host_copy(params, 64);
    vk_rmsnorm_args na = {.x = {bx, 0}, .y = {by, 0}, .w = {bw, 0}, .n = n, .x_z = n, .y_z = n, .nz = B, .eps = 1e-5f,
                          .params = bp, .y16 = &bh};
    vk_call nc;
    CHECK(vk_k_rmsnorm(&KB, &na, &nc) == 0, "build rmsnorm: %.200s", KERR.msg);
    CHECK(tu_run(&nc, 1, NULL) == 0, "run rmsnorm");
    const float *y = (const float *)by.map;
    const uint16_t *h = (const uint16_t *)bh.map;
    uint32_t bad = 0;
    for (uint64_t i = 0; i < (uint64_t)n * c->T; i++) {
        float v = y[i] > 65504.0f ? 65504.0f : y[i] < -65504.0f ? -65504.0f : y[i];
        if (h[i] != quant_f32_to_f16(v) && bad++ < 3)
            printf("#   element %llu: fp32 %.9g, twin 0x%04x, want 0x%04x\n", (unsigned long long)i, y[i], h[i],
                   quant_f32_to_f16(v));
    }
    CHECK(bad == 0, "%u fp16 twin elements differ from the fp32 row's rounding", bad);

    vk_tensor t, tu;
    uint8_t *w = rand_tensor(c->type, c->K, c->N, 1, &t), *wu = NULL;
    if (c->mode == 2)
        wu = rand_tensor(c->up_type, c->K, c->N, 1, &tu);
    uint32_t ys = c->N + 8; /* a stride a twin can have */
    float *y0 = random_vec((uint64_t)ys * B, 1.0f);
    vk_buf out[2];
    for (int k = 0; k < 2; k++) {
        out[k] = host_copy(y0, (uint64_t)ys * B);
        vk_mm_args a = {.name = "mm", .w = &t, .up = c->mode == 2 ? &tu : NULL, .x = {by, 0}, .x_stride = n,
                        .y = {out[k], 0}, .y_stride = ys, .nz = 1, .max_tokens = B, .accumulate = c->mode == 1,
                        .params = bp, .x16 = k ? &bh : NULL};
        vk_call call;
        CHECK(vk_k_mm(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
        CHECK(tu_run(&call, 1, NULL) == 0, "run");
    }
    CHECK(memcmp(out[0].map, out[1].map, (uint64_t)ys * B * 4) == 0, "outputs from the fp16 twin differ from those from x");

    bool coop = strcmp(vk_mm_kernel(&KB, &t, NULL), "mm_coop") == 0;
    if (!coop || c->mode == 1) {
        /* a twin of y is refused where it would not be written: the fp32
         * kernel (no cooperative matrices, F32 weights), an accumulation */
        vk_buf t16 = tu_host((uint64_t)ys * B / 2 + 8);
        vk_mm_args a = {.name = "mm", .w = &t, .up = c->mode == 2 ? &tu : NULL, .x = {by, 0}, .x_stride = n,
                        .y = {out[0], 0}, .y_stride = ys, .nz = 1, .max_tokens = B, .accumulate = c->mode == 1,
                        .params = bp, .y16 = &t16};
        vk_call call;
        CHECK(vk_k_mm(&KB, &a, &call) != 0 && strstr(KERR.msg, "fp16 twin of y"),
              "a twin of y was accepted where it would not be written");
    } else {
        vk_buf y32 = host_copy(y0, (uint64_t)ys * B), y16 = tu_host((uint64_t)ys * B / 2 + 8);
        vk_mm_args a = {.name = "mm", .w = &t, .up = c->mode == 2 ? &tu : NULL, .x = {by, 0}, .x_stride = n,
                        .y = {y32, 0}, .y_stride = ys, .nz = 1, .max_tokens = B, .params = bp, .x16 = &bh,
                        .y16 = &y16};
        vk_call call;
        CHECK(vk_k_mm(&KB, &a, &call) == 0, "build with y16: %.200s", KERR.msg);
        CHECK(tu_run(&call, 1, NULL) == 0, "run with y16");
        const float *yv = (const float *)y32.map;
        const uint16_t *yh = (const uint16_t *)y16.map;
        bad = 0;
        for (uint32_t tk = 0; tk < c->T; tk++)
            for (uint32_t r = 0; r < c->N; r++) {
                uint64_t i = (uint64_t)tk * ys + r;
                float v = yv[i] > 65504.0f ? 65504.0f : yv[i] < -65504.0f ? -65504.0f : yv[i];
                if (yh[i] != quant_f32_to_f16(v) && bad++ < 3)
                    printf("#   token %u row %u: y %.9g, twin 0x%04x, want 0x%04x\n", tk, r, yv[i], yh[i],
                           quant_f32_to_f16(v));
            }
        CHECK(bad == 0, "%u elements of y's fp16 twin differ from y's rounding", bad);
        /* the next mat-mat (F16 weights, K = this N) from y and from its twin */
        vk_tensor t2;
        uint8_t *w2 = rand_tensor(QT_F16, c->N, 72, 1, &t2);
        float *z0 = random_vec(80ull * B, 1.0f);
        vk_buf z[2];
        for (int k = 0; k < 2; k++) {
            z[k] = host_copy(z0, 80ull * B);
            vk_mm_args a2 = {.name = "mm", .w = &t2, .x = {y32, 0}, .x_stride = ys, .y = {z[k], 0}, .y_stride = 80,
                             .nz = 1, .max_tokens = B, .params = bp, .x16 = k ? &y16 : NULL};
            vk_call c2;
            CHECK(vk_k_mm(&KB, &a2, &c2) == 0, "build the next: %.200s", KERR.msg);
            CHECK(tu_run(&c2, 1, NULL) == 0, "run the next");
        }
        CHECK(memcmp(z[0].map, z[1].map, 80ull * B * 4) == 0, "the next mat-mat's outputs from y's twin differ");
        free(w2), free(z0);
    }
    free(x), free(nw), free(w), free(wu), free(y0);
    tu_reset_buffers();
}

/* An fp16 twin rmsnorm could not write whole (16-byte rows: offset, row
 * stride and length in multiples of 8) is refused with a message, not
 * written in part. */
static void test_rmsnorm_twin_refused(void)
{
    static const uint32_t shape[][3] = {{2044, 2044, 0}, {2048, 2052, 0}, {2048, 2048, 4}}; /* n, stride, offset */
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        uint32_t n = shape[i][0], z = shape[i][1], off = shape[i][2];
        vk_buf bx = tu_host((uint64_t)z * 2 + off), by = tu_host((uint64_t)z * 2 + off), bh = tu_host(z + off),
               bw = tu_host(n), bp = tu_host(64);
        vk_rmsnorm_args a = {.x = {bx, 0}, .y = {by, off}, .w = {bw, 0}, .n = n, .x_z = z, .y_z = z, .nz = 2,
                             .eps = 1e-5f, .params = bp, .y16 = &bh};
        vk_call call;
        CHECK(vk_k_rmsnorm(&KB, &a, &call) != 0 && strstr(KERR.msg, "fp16 twin needs offsets, row stride and length"),
              "n %u, stride %u, offset %u: not refused (%.200s)", n, z, off, KERR.msg);
    }
    tu_reset_buffers();
}

static void act16_cases(void)
{
    RUN_NAMED(test_rmsnorm_twin_refused, "rmsnorm refuses an fp16 twin whose rows are not whole 16-byte words");
    static const act16_case cases[] = {
        {QT_Q4_0, 0, 2048, 200, 70, 0},
        {QT_Q4_K, QT_Q5_K, 2048, 136, 65, 2},
        {QT_Q6_K, 0, 1536, 129, 33, 1},
        {QT_F16, 0, 2056, 72, 20, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        A16 = cases[i];
        vk_tensor w = {.type = A16.type};
        char name[200];
        bool coop = strcmp(vk_mm_kernel(&KB, &w, NULL), "mm_coop") == 0;
        snprintf(name, sizeof name, "rmsnorm's fp16 twin into a mat-mat (%s) %s K=%u N=%u T=%u: bit for bit [%s]",
                 A16.mode == 0 ? "store" : A16.mode == 1 ? "accumulate" : "glu", tu_type_name(A16.type), A16.K, A16.N,
                 A16.T, !coop ? "the fp32 kernel reads x, refuses a twin of y"
                        : A16.mode == 1 ? "mm_coop reads the twin, refuses a twin of what it adds into"
                                        : "mm_coop reads the twin, writes y's for the next");
        RUN_NAMED(test_act16, name);
    }
}

/* Routing ids -> moe_group -> expert gate/up and down over the tiles -> combine. */
static uint32_t EP_TYPE;

static void test_expert_prefill(void)
{
    uint32_t H = 256, E = 16, K = 4, T = 77, B = 80;
    bool kq = EP_TYPE == QT_Q4_K || EP_TYPE == QT_Q5_K || EP_TYPE == QT_Q6_K;
    uint32_t F = kq ? 256 : 96; /* K-quant rows are whole 256-blocks */
    vk_tensor tg, tu, td;
    uint8_t *wg = rand_tensor(EP_TYPE, H, F, E, &tg), *wu = rand_tensor(EP_TYPE, H, F, E, &tu);
    uint8_t *wd = rand_tensor(EP_TYPE, F, H, E, &td);
    float *x = random_vec((uint64_t)H * B, 1.0f), *x0 = malloc((uint64_t)H * B * sizeof *x0);
    /* Unit activations through Q6_K's random weights (random int8 sub-scales:
     * |w| up to ~40) make gate * up ~1e5, past the fp16 range (65504) the
     * tensor-core path rounds activations into (the first H200 run: NaN);
     * Q5_K's (6-bit scales, 5-bit codes: |w| up to ~20) too (run 20: the
     * clamped values 10 % off); 0.05 keeps the down pass's input near 1e2,
     * as a model's are. */
    float *xn = random_vec((uint64_t)H * B, EP_TYPE == QT_Q6_K || EP_TYPE == QT_Q5_K ? 0.05f : 1.0f);
    memcpy(x0, x, (uint64_t)H * B * 4);
    int32_t *ids = malloc((uint64_t)B * K * 4);
    float *wts = malloc((uint64_t)B * K * 4);
    for (uint32_t t = 0; t < B; t++)
        for (uint32_t k = 0; k < K; k++) {
            /* distinct experts per token, skewed: expert 0 gets ~74 pairs
             * (more than a tile of 64: 2 tiles of 64 or 3 of 32), experts
             * 1-3 ~30 each, the others a few */
            ids[t * K + k] = (int32_t)(t % 3 == 0                 ? k
                                       : k == 0 && t % 8 != 7 ? 0
                                                              : 1 + (t * 7 + k * 4) % (E - 1));
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
    /* the indirect grids come from the group kernel */
    vk_prog prog = {0};
    vk_rec r;
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    err_t err;
    vkBeginCommandBuffer(G.cb, &cbi);
    vk_rec_begin(&r, &G.c, &prog, G.cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
    vk_rec_call(&r, &calls[0]);
    vk_rec_barrier_indirect(&r);
    vk_rec_call(&r, &calls[1]);
    vk_rec_barrier(&r);
    vk_rec_call(&r, &calls[2]);
    vk_rec_barrier(&r);
    vk_rec_call(&r, &calls[3]);
    int rc = vk_rec_end(&r);
    vkEndCommandBuffer(G.cb);
    CHECK(rc == 0 && vk_submit_wait(&G.c, G.cb, &err) == 0, "run: %.200s", err.msg);
    vk_prog_free(&G.c, &prog);

    /* reference: h per pair from the reference gate/up; y per pair from the GPU's h */
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

static void expert_cases(void)
{
    static const uint32_t types[] = {QT_Q4_0, QT_F32, QT_Q4_K, QT_Q8_0, QT_Q6_K, QT_Q5_K,
                                     QT_Q5_0, QT_Q4_1, QT_Q5_1, QT_F16, QT_BF16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        EP_TYPE = types[i];
        char name[192];
        vk_tensor w = {.type = EP_TYPE};
        snprintf(name, sizeof name, "experts of a prompt batch: group, gate/up, down, combine (%s) [%s, tiles of %u]",
                 tu_type_name(EP_TYPE), mm_path(&w, NULL), vk_mm_expert_bm(&KB, &w));
        RUN_NAMED(test_expert_prefill, name);
    }
}

static void prefill_cases(void)
{
    /* on mm_coop: grids of at most one workgroup per SM step through K by
     * 64, larger ones and the expert work lists by 32 */
    mm_cases();
    expert_cases();
    if (G.c.coopmat)
        mm_steps_cases();
    else
        printf("# no cooperative matrices: mm_coop's two K steps are not compared here\n");

    RUN_NAMED(test_rmsnorm, "rmsnorm of a prompt batch (7 of 9 tokens)");
    act16_cases();
}

int main(void)
{
    if (tu_kernels_open())
        return 1;
    prefill_cases();
    tu_gpu_close();
    TESTS_DONE();
}
