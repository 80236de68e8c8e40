/* test_vk_deps.c: what joins the decode graph's steps without a barrier
 * (shaders/dep_flag.glsl), and the planner that chooses it (gpu/vk_sync.h):
 * a layer's MoE chain joined by counters, the attention's inputs as tagged
 * words, then tables of real kernels planned every way the planner can --
 * counters, tagged words, barriers, the fall-back after a wait gives up,
 * fault injection -- each against the all-barriers plan, bit for bit. */
#include "vk_testutil.h"

/* ---- a decode layer's MoE chain joined by counters --------------------------------------
 * mv (norm) -> mv -> router || (the shared gate/up) -> routed gate/up -> down,
 * each dispatch signalling a counter the next one waits on, with no pipeline
 * barrier anywhere (shaders/dep_flag.glsl, as dep_flags = 31 records
 * the decode graph): every output must equal, bit for bit, the same chain
 * with barriers (whose kernels the cases above check against the CPU). */
typedef struct {
    uint32_t type, H, F, nexp, nused;
    const char *what;
} chain_case;
static chain_case CC;

static void test_dep_chain(void)
{
    const chain_case *m = &CC;
    vk_tensor wa, wb, rt, tg, tu, td, sg, su, sd;
    uint8_t *p[9];
    p[0] = rand_tensor(m->type, m->H, m->H, 1, &wa);
    p[1] = rand_tensor(m->type, m->H, m->H, 1, &wb);
    p[2] = rand_tensor(QT_F32, m->H, m->nexp, 1, &rt);
    p[3] = rand_tensor(m->type, m->H, m->F, m->nexp, &tg);
    p[4] = rand_tensor(m->type, m->H, m->F, m->nexp, &tu);
    p[5] = rand_tensor(m->type, m->F, m->H, m->nexp, &td);
    p[6] = rand_tensor(m->type, m->H, m->F, 1, &sg);
    p[7] = rand_tensor(m->type, m->H, m->F, 1, &su);
    p[8] = rand_tensor(m->type, m->F, m->H, 1, &sd);
    float *x = random_vec(m->H, 1.0f), *nw = norm_weights(m->H), *y0 = random_vec(m->H, 1.0f);
    /* run 0 with barriers, then the counter chain several times (a race
     * shows up as a difference in some run) */
    enum { RUNS = 9 };
    uint32_t words[RUNS][6] = {{0}};
    uint32_t *out[RUNS][6];
    for (int run = 0; run < RUNS; run++) {
        bool dep = run >= 1;
        vk_buf bx = host_copy(x, m->H), bn = host_copy(nw, m->H), y1 = tu_host(m->H), y2 = host_copy(y0, m->H);
        vk_buf lg = tu_host(m->nexp), ids = tu_host(m->nused), wts = tu_host(m->nused), cnt = tu_host(4);
        vk_buf h = tu_host((uint64_t)m->F * (m->nused + 1)), cw = tu_host(16), prm = tu_host(32);
        memset(cnt.map, 0, 16);
        memset(cw.map, 0, 64);
        ((uint32_t *)prm.map)[VKP_EPOCH] = 1;
        vk_vec norm = {bn, 0}, idv = {ids, 0}, c[5];
        for (int i = 0; i < 5; i++)
            c[i] = (vk_vec){cw, 1 + (uint32_t)i};
        vk_mv_args a = {.name = "a", .w = &wa, .x = {bx, 0}, .y = {y1, 0}, .nz = 1, .norm = &norm, .eps = 1e-5f};
        vk_mv_args b = {.name = "b", .w = &wb, .x = {y1, 0}, .y = {y2, 0}, .nz = 1, .accumulate = true};
        vk_router_args ra = {.w = &rt, .x = {y2, 0}, .norm = norm, .eps = 1e-5f, .logits = {lg, 0}, .ids = {ids, 0},
                             .wts = {wts, 0}, .counter = {cnt, 0}, .n_used = m->nused, .gating = 2, .nz = 1,
                             .norm_w = true};
        vk_glu_args gs = {.name = "gs", .gate = &sg, .up = &su, .x = {y2, 0}, .norm = &norm, .eps = 1e-5f,
                          .h = {h, m->nused * m->F}, .h_z = m->F, .nz = 1};
        vk_glu_args gu = {.name = "gu", .gate = &tg, .up = &tu, .x = {y2, 0}, .norm = &norm, .eps = 1e-5f,
                          .h = {h, 0}, .h_z = m->F, .nz = m->nused, .ids = &idv};
        vk_moe_down_args da = {.name = "down", .down = &td, .shared = &sd, .h = {h, 0}, .h_z = m->F, .nz = m->nused,
                               .ids = {ids, 0}, .wts = {wts, 0}, .y = {y2, 0}};
        if (dep && !(vk_mv_deps(&KB, &a) && vk_mv_deps(&KB, &b) && vk_router_deps(&KB, &ra) && vk_glu_deps(&KB, &gs) &&
                     vk_glu_deps(&KB, &gu) && vk_moe_down_deps(&KB, &da))) {
            printf("# this device runs kernels without counters for these shapes: nothing to compare\n");
            break;
        }
        vk_call k[6];
        bool bar[6] = {true, true, false, true, true, true};
        CHECK(vk_k_mv(&KB, &a, &k[0]) == 0, "build a: %.200s", KERR.msg);
        if (dep) {
            a.dep.signal = &c[0];
            CHECK(vk_k_mv(&KB, &a, &k[0]) == 0, "build a: %.200s", KERR.msg);
            b.dep = (vk_dep){.signal = &c[1], .wait = &c[0], .wait_n = k[0].groups[0] * k[0].groups[1], .params = prm};
        }
        CHECK(vk_k_mv(&KB, &b, &k[1]) == 0, "build b: %.200s", KERR.msg);
        if (dep) {
            vk_dep w = {.signal = &c[2], .wait = &c[1], .wait_n = k[1].groups[0] * k[1].groups[1], .params = prm};
            ra.dep = gs.dep = w;
        }
        CHECK(vk_k_router(&KB, &ra, &k[2]) == 0, "build router: %.200s", KERR.msg);
        CHECK(vk_k_glu(&KB, &gs, &k[3]) == 0, "build shared gate/up: %.200s", KERR.msg);
        if (dep)
            gu.dep = (vk_dep){.signal = &c[3], .wait = &c[2],
                              .wait_n = k[2].groups[0] * k[2].groups[1] + k[3].groups[0] * k[3].groups[1],
                              .params = prm};
        CHECK(vk_k_glu(&KB, &gu, &k[4]) == 0, "build gate/up: %.200s", KERR.msg);
        if (dep) {
            /* the ids come from the router, with no barrier since: awaited first */
            da.dep = (vk_dep){.wait = &c[3], .wait_n = k[4].groups[0] * k[4].groups[1], .params = prm};
            da.ids_wait = &c[2];
            da.ids_wait_n = k[2].groups[0] * k[2].groups[1] + k[3].groups[0] * k[3].groups[1];
        }
        CHECK(vk_k_moe_down(&KB, &da, &k[5]) == 0, "build down: %.200s", KERR.msg);
        if (dep)
            memset(bar, 0, sizeof bar);
        CHECK(tu_run(k, 6, bar) == 0, "run");
        if (dep)
            CHECK(((uint32_t *)cw.map)[0] == 0, "%u waits gave up", ((uint32_t *)cw.map)[0]);
        vk_buf o[6] = {y1, y2, ids, wts, h, lg};
        uint32_t n[6] = {m->H, m->H, m->nused, m->nused, m->F * (m->nused + 1), m->nexp};
        for (int i = 0; i < 6; i++) {
            words[run][i] = n[i];
            out[run][i] = malloc(n[i] * 4);
            memcpy(out[run][i], o[i].map, n[i] * 4);
        }
        if (run >= 1) {
            static const char *const nm[6] = {"a", "b + down (y)", "expert ids", "expert weights", "h", "router logits"};
            for (int i = 0; i < 6; i++)
                CHECK(memcmp(out[0][i], out[run][i], words[0][i] * 4) == 0,
                      "%s differs from the chain with barriers (run %d)", nm[i], run);
        }
    }
    for (int run = 0; run < RUNS; run++)
        for (int i = 0; i < 6; i++)
            if (words[run][i])
                free(out[run][i]);
    for (int i = 0; i < 9; i++)
        free(p[i]);
    free(x), free(nw), free(y0);
    tu_reset_buffers();
}

static void dep_chain_cases(void)
{
    static const chain_case cases[] = {
        {QT_Q4_0, 2048, 1536, 64, 4, "GLM-4.7-Flash shapes, Q4_0"},
        {QT_Q8_0, 256, 96, 16, 3, "Q8_0, small"},
        {QT_Q4_K, 2048, 1536, 64, 4, "GLM-4.7-Flash shapes, Q4_K"},
        {QT_Q5_K, 512, 256, 16, 3, "Q5_K, small"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CC = cases[i];
        char name[160];
        snprintf(name, sizeof name, "MoE chain joined by counters = with barriers, %s", CC.what);
        RUN_NAMED(test_dep_chain, name);
    }
}

/* ---- the attention's inputs as tagged words (LL) -------------------------------------------
 * As the decode graph records them with LL (shaders/dep_flag.glsl,
 * gpu/vk_forward.c): qkv ([q_a | kv] of the merged matvec) as tagged words
 * (value bits, tag = epoch * VK_LL_SITES + site) of site 3: q_b polls its
 * q_a part and writes q as tagged words of site 4; k_b (per head) and
 * kv_store (the kv part, the rotated q) poll those, with no barrier and no
 * counter anywhere.  q, the absorbed queries and the cache row must equal,
 * bit for bit, the plain chain with barriers; every word of q must carry
 * q_b's tag.  The epoch is one at which the tags wrap past 2^32.  Then the
 * fault: one word of qkv with a stale tag must make q_b's poll (in its q_a
 * part) or kv_store's (in its kv part) give up and count that in word 0 of
 * the counters, not hang. */
enum { LL_EPOCH = 0x00100003u }; /* * VK_LL_SITES wraps: tags 3 * 4096 + site */

static vk_buf ll_words(const float *x, uint32_t n, uint32_t tag)
{
    vk_buf b = tu_host(2ull * n);
    for (uint32_t i = 0; i < n; i++) {
        memcpy(&((uint32_t *)b.map)[2 * i], &x[i], 4);
        ((uint32_t *)b.map)[2 * i + 1] = tag;
    }
    return b;
}

typedef struct {
    uint32_t type, n_head, q_lora, kv_lora, rope, nope;
    const char *what;
    uint32_t idot; /* the idot knob: 2, integer dot products where the device has them */
} qkv_case;
static qkv_case QC;

static void test_ll_qkv(void)
{
    const qkv_case *m = &QC;
    uint32_t idot_was = TUNE.idot;
    TUNE.idot = m->idot;
    err_t err;
    vk_attn_geom g;
    CHECK(vk_attn_geom_init(&KB, &g, m->n_head, m->kv_lora, m->rope, m->nope, m->nope, true, 16, &err) == 0,
          "geom: %.200s", err.msg);
    uint32_t QW = m->nope + m->rope, D = m->kv_lora + m->rope, NQ = m->n_head * QW, RS = g.RS;
    vk_tensor wqb, wkb;
    uint8_t *p0 = rand_tensor(m->type, m->q_lora, NQ, 1, &wqb), *p1 = rand_tensor(QT_Q8_0, m->nope, m->kv_lora,
                                                                                    m->n_head, &wkb);
    float *qkv = random_vec(m->q_lora + D, 1.0f), *qn = norm_weights(m->q_lora), *kn = norm_weights(m->kv_lora);
    float *cs = malloc(m->rope * sizeof *cs);
    for (uint32_t i = 0; i < m->rope / 2; i++)
        cs[2 * i] = cosf(0.3f * i), cs[2 * i + 1] = sinf(0.3f * i);
    const uint32_t tag0 = (uint32_t)LL_EPOCH * (uint32_t)VK_LL_SITES;
    enum { RUNS = 5, NOUT = 3 };
    uint32_t *out[RUNS][NOUT] = {{0}}, n[NOUT] = {NQ, m->n_head * RS, RS / 2};
    for (int run = 0; run < RUNS; run++) {
        bool ll = run >= 1;
        TUNE.ll = run % 2 ? 1 : 2;
        vk_buf bqkv = ll ? ll_words(qkv, m->q_lora + D, tag0 + 3) : host_copy(qkv, m->q_lora + D);
        vk_buf bq = tu_host(ll ? 2ull * NQ : NQ), bqa = tu_host((uint64_t)m->n_head * RS), bqn = host_copy(qn, m->q_lora);
        vk_buf bkn = host_copy(kn, m->kv_lora), bcs = host_copy(cs, m->rope), cw = tu_host(16), prm = tu_host(64);
        vk_buf bc = tu_host((uint64_t)(1 + VK_CACHE_PAD_ROWS) * RS);
        memset(cw.map, 0, 64);
        memset(prm.map, 0, 256);
        ((uint32_t *)prm.map)[VKP_EPOCH] = LL_EPOCH;
        ((uint32_t *)prm.map)[VKP_NTOK] = 1;
        vk_vec nq = {bqn, 0};
        vk_dep base = {.params = prm, .ll_fails = cw};
        vk_mv_args qb = {.name = "q_b", .w = &wqb, .x = {bqkv, 0}, .y = {bq, 0}, .nz = 1, .norm = &nq, .eps = 1e-6f};
        vk_mv_args kb = {.name = "k_b", .w = &wkb, .x = {bq, 0}, .x_z = QW, .y = {bqa, 0}, .y_z = RS, .nz = m->n_head};
        vk_kv_store_args ks = {.g = &g, .kv = {bqkv, m->q_lora}, .kv_z = D, .norm = {bkn, 0}, .eps = 1e-6f,
                               .cache = {bc, 0}, .rope_cs = bcs, .q = {bq, 0}, .q_z = NQ, .q_abs = {bqa, 0},
                               .q_abs_z = m->n_head * RS, .params = prm, .nz = 1};
        if (ll && !(vk_mv_deps(&KB, &qb) && vk_mv_deps(&KB, &kb))) {
            printf("# this device runs q_b / k_b without LL for these shapes: nothing to compare\n");
            break;
        }
        if (ll) {
            qb.dep = base, qb.dep.ll_in = 3, qb.dep.ll_out = 4;
            kb.dep = base, kb.dep.ll_in = 4;
            ks.dep = base, ks.dep.ll_in = 3, ks.ll_q = 4;
        }
        vk_call k[3];
        CHECK(vk_k_mv(&KB, &qb, &k[0]) == 0, "build q_b: %.200s", KERR.msg);
        CHECK(vk_k_mv(&KB, &kb, &k[1]) == 0, "build k_b: %.200s", KERR.msg);
        CHECK(vk_k_kv_store(&KB, &ks, &k[2]) == 0, "build kv_store: %.200s", KERR.msg);
        bool bar[3] = {true, true, true}, none[3] = {false, false, false};
        CHECK(tu_run(k, 3, ll ? none : bar) == 0, "run");
        if (ll)
            CHECK(((uint32_t *)cw.map)[0] == 0, "%u polls gave up", ((uint32_t *)cw.map)[0]);
        const uint32_t *src[NOUT] = {(const uint32_t *)bq.map, (const uint32_t *)bqa.map, (const uint32_t *)bc.map};
        for (int i = 0; i < NOUT; i++) {
            out[run][i] = malloc(n[i] * 4);
            for (uint32_t j = 0; j < n[i]; j++)
                out[run][i][j] = i == 0 && ll ? src[0][2 * j] : src[i][j];
        }
        if (ll) {
            uint32_t stale = 0;
            for (uint32_t j = 0; j < NQ; j++)
                stale += ((const uint32_t *)bq.map)[2 * j + 1] != tag0 + 4;
            CHECK(stale == 0, "%u words of q lack q_b's tag", stale);
            static const char *const nm[NOUT] = {"q", "absorbed queries", "cache row"};
            for (int i = 0; i < NOUT; i++)
                CHECK(memcmp(out[0][i], out[run][i], n[i] * 4) == 0, "%s differs from the plain chain (run %d)", nm[i],
                      run);
        }
    }
    TUNE.ll = VK_TUNE_AUTO;
    TUNE.idot = idot_was;
    for (int run = 0; run < RUNS; run++)
        for (int i = 0; i < NOUT; i++)
            if (out[run][i])
                free(out[run][i]);

    /* a stale word (the previous token's tag) in q_a's part: q_b's poll
     * gives up and says so; in kv's part: kv_store's likewise */
    float *qz = calloc(NQ, sizeof *qz); /* q's values: any, with q_b's tag */
    for (int which = 0; which < 2; which++) {
        vk_buf bqkv = ll_words(qkv, m->q_lora + D, tag0 + 3), bq = ll_words(qz, NQ, tag0 + 4);
        vk_buf bqa = tu_host((uint64_t)m->n_head * RS), bqn = host_copy(qn, m->q_lora), bkn = host_copy(kn, m->kv_lora);
        vk_buf bcs = host_copy(cs, m->rope), cw = tu_host(16), prm = tu_host(64);
        vk_buf bc = tu_host((uint64_t)(1 + VK_CACHE_PAD_ROWS) * RS), by = tu_host(2ull * NQ);
        memset(cw.map, 0, 64);
        memset(prm.map, 0, 256);
        ((uint32_t *)prm.map)[VKP_EPOCH] = LL_EPOCH;
        ((uint32_t *)prm.map)[VKP_NTOK] = 1;
        uint32_t stale_at = which == 0 ? m->q_lora / 2 : m->q_lora + m->kv_lora / 2;
        ((uint32_t *)bqkv.map)[2 * stale_at + 1] = tag0 - VK_LL_SITES + 3;
        vk_vec nq = {bqn, 0};
        vk_dep base = {.params = prm, .ll_fails = cw};
        vk_mv_args qb = {.name = "q_b", .w = &wqb, .x = {bqkv, 0}, .y = {by, 0}, .nz = 1, .norm = &nq, .eps = 1e-6f,
                         .dep = base};
        qb.dep.ll_in = 3, qb.dep.ll_out = 4;
        vk_kv_store_args ks = {.g = &g, .kv = {bqkv, m->q_lora}, .kv_z = D, .norm = {bkn, 0}, .eps = 1e-6f,
                               .cache = {bc, 0}, .rope_cs = bcs, .q = {bq, 0}, .q_z = NQ, .q_abs = {bqa, 0},
                               .q_abs_z = m->n_head * RS, .params = prm, .nz = 1, .dep = base, .ll_q = 4};
        ks.dep.ll_in = 3;
        if (!vk_mv_deps(&KB, &qb))
            break;
        vk_call k;
        CHECK((which == 0 ? vk_k_mv(&KB, &qb, &k) : vk_k_kv_store(&KB, &ks, &k)) == 0, "build: %.200s", KERR.msg);
        CHECK(tu_run(&k, 1, NULL) == 0, "run");
        CHECK(((uint32_t *)cw.map)[0] != 0, "%s: a stale tag was not reported", which == 0 ? "q_b" : "kv_store");
    }
    /* an accumulated output is never tagged words (its old words would
     * need polling): the builder refuses it */
    {
        vk_buf bx = tu_host(m->q_lora), by = tu_host(2ull * NQ), cw = tu_host(16), prm = tu_host(64);
        vk_mv_args acc = {.name = "acc", .w = &wqb, .x = {bx, 0}, .y = {by, 0}, .nz = 1, .accumulate = true,
                          .dep = {.params = prm, .ll_fails = cw, .ll_out = 4}};
        vk_call k;
        if (vk_mv_deps(&KB, &acc))
            CHECK(vk_k_mv(&KB, &acc, &k) != 0, "an accumulated output as tagged words was built");
    }
    free(p0), free(p1), free(qkv), free(qn), free(kn), free(cs), free(qz);
    tu_reset_buffers();
}

static void ll_qkv_cases(void)
{
    static const qkv_case cases[] = {
        {QT_Q4_0, 20, 768, 512, 64, 192 - 64, "GLM-4.7-Flash shapes, Q4_0", 0},
        {QT_Q4_K, 20, 768, 512, 64, 128, "GLM-4.7-Flash shapes, Q4_K", 0},
        {QT_Q8_0, 3, 96, 64, 16, 32, "Q8_0, 3 heads", 0},
        /* the integer path: the tagged matvecs (mv_xs_ll_id) must do the
         * plain ones' arithmetic (mv_xs_id), or a verify column's tokens
         * would differ from a single decode's (run 58) */
        {QT_Q4_K, 20, 768, 512, 64, 128, "GLM-4.7-Flash shapes, Q4_K, integer dot products", 2},
        {QT_Q8_0, 3, 96, 64, 16, 32, "Q8_0, 3 heads, integer dot products", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        QC = cases[i];
        char name[160];
        snprintf(name, sizeof name,
                 "q_b -> k_b || kv_store with qkv and q as tagged words (LL) = with barriers, stale tags reported, %s",
                 QC.what);
        RUN_NAMED(test_ll_qkv, name);
    }
}

int main(void)
{
    if (tu_kernels_open())
        return 1;
    dep_chain_cases();
    ll_qkv_cases();
    tu_gpu_close();
    TESTS_DONE();
}
