/* test_vk_sync.c: the synchronisation planner (gpu/vk_sync.h) on tables of
 * real kernels.
 *
 * A decode layer in miniature -- q_a|kv as one matrix, q_b, k_b ||
 * kv_store, a step reading the absorbed queries into x, router || shared
 * gate/up, the routed gate/up, the MoE down (which reads the expert ids
 * before its wait), the next layer's q_a|kv, and a head that starts after
 * a barrier -- is planned every way the planner can: all barriers (the
 * reference), every dep_flags bit alone, the router and gate/up bits
 * together (the down's early wait), all bits, tagged words alone and with
 * the counters, the fall-back after a counter wait or a poll gives up
 * (fault injection: tune.dep_stall), and kernels that can do neither
 * (tune.xs = 0: the table's tagged words refused, barriers everywhere).
 * Every plan's outputs -- x, the absorbed queries, the cache row, the
 * routing, the experts' hidden states, the logits, q and q_a|kv -- must
 * equal the all-barriers plan's bit for bit, over several runs (a race
 * shows as a difference in some run); the plan itself is read from the
 * recording's listing (links, tagged words, barriers, the early wait).
 * Then a prompt batch's expert passes, whose grids a kernel of the step
 * before writes: one barrier with indirect access, the same outputs as
 * the barriers recorded by hand.  tests/t_vk_sync_sg16.sh runs this at
 * lavapipe's subgroup size 16 as well. */
#include <stdio.h>

#include "vk_graph.h"
#include "vk_sync.h"
#include "vk_testutil.h"

/* ---- the miniature layer --------------------------------------------------------------------- */

enum {
    H = 256, QL = 96, NH = 3, NOPE = 32, ROPE = 16, QW = NOPE + ROPE, NQ = NH * QW, KVL = 64, D = KVL + ROPE,
    NQKV = QL + D, E = 16, KU = 3, F = 96, RUNS = 3,
};

/* its buffers (bits) and the boundaries it names (dep_flags bits) */
enum {
    R_X = 1u << 0, R_QC = 1u << 1, R_KV = 1u << 2, R_QN = 1u << 3, R_QR = 1u << 4, R_QA = 1u << 5,
    R_QAR = 1u << 6, R_CACHE = 1u << 7, R_ROUTE = 1u << 8, R_H = 1u << 9, R_HSH = 1u << 10,
};
enum { B_QA = 1u << 0, B_OUT = 1u << 1, B_ROUTE = 1u << 2, B_GU = 1u << 3, B_DOWN = 1u << 4, B_QB = 1u << 7,
       B_KB = 1u << 8 };
static const uint32_t BITS[] = {B_QA, B_OUT, B_ROUTE, B_GU, B_DOWN, B_QB, B_KB};
enum { N_BITS = sizeof BITS / sizeof BITS[0], ALL_BITS = 0x1ff };

typedef struct {
    vk_attn_geom g;
    vk_tensor wqkv, wqb, wkb, wo, wr, wg, wu, wd, wsg, wsu, wsd, whead;
    uint8_t *host[12];
    float *x, *nx, *nq, *nkv, *cs;
} mini;

typedef struct {
    vk_buf x, qkv, q, q_abs, cache, rlogits, ids, wts, rcount, h, dep, params, nx, nq, nkv, cs;
    vk_vec vnx, vnq, vids;
} mini_bufs;

/* What a plan computed (q and q_a|kv as values, whatever their layout). */
enum { O_X, O_QABS, O_CACHE, O_IDS, O_WTS, O_H, O_Q, O_QKV, N_OUT };
static const char *const OUT_NAMES[N_OUT] = {"x (the head's)", "absorbed queries", "cache row", "expert ids",
                                             "expert weights", "hidden states", "q", "the next q_a|kv"};
typedef struct {
    uint32_t *w[N_OUT];
    uint32_t n[N_OUT];
} outputs;

/* What the listing shows of a plan. */
typedef struct {
    int links, barriers, grid_barriers, polls, early, tagged_retries, gave_up;
    int shared_words; /* counter words two steps signal */
} plan_seen;

/* The table with the router twice, the second given the first's bit: two
 * boundaries of a layer on one counter bit (the planner must not let them
 * share its word). */
static bool ROUTER_TWICE;

static void mini_init(mini *m)
{
    err_t err;
    CHECK(vk_attn_geom_init(&KB, &m->g, NH, KVL, ROPE, NOPE, NOPE, true, 16, &err) == 0, "geom: %.200s", err.msg);
    m->host[0] = rand_tensor(QT_Q8_0, H, NQKV, 1, &m->wqkv);
    m->host[1] = rand_tensor(QT_Q8_0, QL, NQ, 1, &m->wqb);
    m->host[2] = rand_tensor(QT_Q8_0, NOPE, KVL, NH, &m->wkb);
    m->host[3] = rand_tensor(QT_F32, m->g.RS, H, 1, &m->wo);
    W_SCALE = 1.0f / 16; /* router logits of a few units (no saturated sigmoid ties) */
    m->host[4] = rand_tensor(QT_F32, H, E, 1, &m->wr);
    W_SCALE = 1.0f;
    m->host[5] = rand_tensor(QT_Q8_0, H, F, E, &m->wg);
    m->host[6] = rand_tensor(QT_Q8_0, H, F, E, &m->wu);
    m->host[7] = rand_tensor(QT_Q8_0, F, H, E, &m->wd);
    m->host[8] = rand_tensor(QT_Q8_0, H, F, 1, &m->wsg);
    m->host[9] = rand_tensor(QT_Q8_0, H, F, 1, &m->wsu);
    m->host[10] = rand_tensor(QT_Q8_0, F, H, 1, &m->wsd);
    m->host[11] = rand_tensor(QT_Q8_0, F, H, 1, &m->whead);
    m->x = random_vec(H, 1.0f), m->nx = norm_weights(H), m->nq = norm_weights(QL), m->nkv = norm_weights(KVL);
    m->cs = malloc(ROPE * sizeof *m->cs);
    for (uint32_t i = 0; i < ROPE / 2; i++)
        m->cs[2 * i] = cosf(0.3f * i), m->cs[2 * i + 1] = sinf(0.3f * i);
}

static void mini_free(mini *m)
{
    for (int i = 0; i < 12; i++)
        free(m->host[i]);
    free(m->x), free(m->nx), free(m->nq), free(m->nkv), free(m->cs);
}

/* Fresh buffers: the inputs, everything else NaN (q_a|kv and q as tagged
 * words: twice the words, tags 0), counters 0, epoch 1, one token at 0. */
static void mini_buffers(const mini *m, mini_bufs *b, bool tagged)
{
    uint32_t RS = m->g.RS;
    b->x = host_copy(m->x, H);
    b->qkv = tu_host(tagged ? 2ull * NQKV : NQKV);
    b->q = tu_host(tagged ? 2ull * NQ : NQ);
    if (tagged) {
        memset(b->qkv.map, 0, 8ull * NQKV);
        memset(b->q.map, 0, 8ull * NQ);
    }
    b->q_abs = tu_host((uint64_t)NH * RS), b->cache = tu_host((uint64_t)(1 + VK_CACHE_PAD_ROWS) * RS);
    b->rlogits = tu_host(E), b->ids = tu_host(KU), b->wts = tu_host(KU), b->rcount = tu_host(4);
    b->h = tu_host((uint64_t)(KU + 1) * F), b->dep = tu_host(64), b->params = tu_host(64);
    memset(b->rcount.map, 0, 16);
    memset(b->dep.map, 0, 256);
    memset(b->params.map, 0, 256);
    ((uint32_t *)b->params.map)[VKP_EPOCH] = 1;
    ((uint32_t *)b->params.map)[VKP_NTOK] = 1;
    b->nx = host_copy(m->nx, H), b->nq = host_copy(m->nq, QL), b->nkv = host_copy(m->nkv, KVL);
    b->cs = host_copy(m->cs, ROPE);
    b->vnx = (vk_vec){b->nx, 0}, b->vnq = (vk_vec){b->nq, 0}, b->vids = (vk_vec){b->ids, 0};
}

/* The table: one line a call, with what it reads and writes, where it may
 * wait on a counter, and (tagged) which operands are tagged words. */
static void mini_table(vk_graph *g, const mini *m, const mini_bufs *b, bool tagged)
{
    const vk_attn_geom *ag = &m->g;
    vk_vec x = {b->x, 0}, qkv = {b->qkv, 0}, q = {b->q, 0};
    vk_res tag_qkv = tagged ? R_QC | R_KV : 0, tag_q = tagged ? R_QN | R_QR : 0;
    vk_mv_args a_qkv = {.name = "q_a+kv", .w = &m->wqkv, .x = x, .y = qkv, .nz = 1, .norm = &b->vnx, .eps = 1e-5f};
    vk_mv_args a_qb = {.name = "q_b", .w = &m->wqb, .x = qkv, .y = q, .nz = 1, .norm = &b->vnq, .eps = 1e-5f};
    vk_mv_args a_kb = {.name = "k_b", .w = &m->wkb, .x = q, .x_z = QW, .y = {b->q_abs, 0}, .y_z = ag->RS, .nz = NH};
    vk_kv_store_args a_ks = {.g = ag, .kv = {b->qkv, QL}, .kv_z = D, .norm = {b->nkv, 0}, .eps = 1e-5f,
                             .cache = {b->cache, 0}, .rope_cs = b->cs, .q = q, .q_z = NQ, .q_abs = {b->q_abs, 0},
                             .q_abs_z = NH * ag->RS, .params = b->params, .nz = 1};
    vk_mv_args a_out = {.name = "out", .w = &m->wo, .x = {b->q_abs, 0}, .y = x, .nz = 1, .accumulate = true};
    vk_router_args a_r = {.w = &m->wr, .x = x, .norm = b->vnx, .eps = 1e-5f, .logits = {b->rlogits, 0},
                          .ids = {b->ids, 0}, .wts = {b->wts, 0}, .counter = {b->rcount, 0}, .n_used = KU,
                          .gating = 2, .nz = 1, .norm_w = true};
    vk_glu_args a_sg = {.name = "shexp gate/up", .gate = &m->wsg, .up = &m->wsu, .x = x, .norm = &b->vnx,
                        .eps = 1e-5f, .h = {b->h, KU * F}, .h_z = F, .nz = 1};
    vk_glu_args a_gu = {.name = "gate/up", .gate = &m->wg, .up = &m->wu, .x = x, .norm = &b->vnx, .eps = 1e-5f,
                        .h = {b->h, 0}, .h_z = F, .nz = KU, .ids = &b->vids};
    vk_moe_down_args a_dn = {.name = "down", .down = &m->wd, .shared = &m->wsd, .h = {b->h, 0}, .h_z = F, .nz = KU,
                             .ids = {b->ids, 0}, .wts = {b->wts, 0}, .y = x};
    vk_mv_args a_head = {.name = "head", .w = &m->whead, .x = {b->h, KU * F}, .y = x, .nz = 1};

    g->segment = 1;
    NODE(g, MV(a_qkv), .reads = R_X, .writes = R_QC | R_KV, .tagged_out = tag_qkv, .dep_bit = B_DOWN);
    NODE(g, MV(a_qb), .reads = R_QC, .writes = R_QN | R_QR, .tagged_in = {tag_qkv & R_QC}, .tagged_out = tag_q,
         .dep_bit = B_QA);
    NODE(g, MV(a_kb), .reads = R_QN, .writes = R_QA, .tagged_in = {tag_q & R_QN}, .dep_bit = B_QB);
    NODE(g, KV_STORE(a_ks), .reads = R_KV | R_QR, .writes = R_CACHE | R_QAR, .tagged_in = {tag_qkv & R_KV, tag_q & R_QR},
         .dep_bit = B_QB);
    NODE(g, MV(a_out), .reads = R_QA | R_QAR | R_X, .writes = R_X, .dep_bit = B_KB);
    NODE(g, ROUTER(a_r), .reads = R_X, .writes = R_ROUTE, .dep_bit = B_OUT);
    if (ROUTER_TWICE)
        NODE(g, ROUTER(a_r), .reads = R_X | R_ROUTE, .writes = R_ROUTE, .dep_bit = B_OUT);
    NODE(g, GLU(a_sg), .reads = R_X, .writes = R_HSH, .dep_bit = B_OUT);
    NODE(g, GLU(a_gu), .reads = R_X | R_ROUTE, .writes = R_H, .dep_bit = B_ROUTE);
    NODE(g, MOE_DOWN(a_dn), .reads = R_H | R_HSH | R_ROUTE | R_X, .writes = R_X, .reads_early = R_ROUTE,
         .dep_bit = B_GU);
    g->segment = 2;
    NODE(g, MV(a_qkv), .reads = R_X, .writes = R_QC | R_KV, .tagged_out = tag_qkv, .dep_bit = B_DOWN);
    g->segment = 3;
    NODE(g, MV(a_head), .reads = R_HSH, .writes = R_X);
}

/* Counts a listing's links, barriers, polls, early waits and counter
 * words signalled by more than one step. */
static void read_listing(const char *text, plan_seen *ps)
{
    enum { MAX_WORDS = 64 };
    int signaller[MAX_WORDS], step = 0;
    for (int i = 0; i < MAX_WORDS; i++)
        signaller[i] = -1;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        bool link = strncmp(l, "  ~ link", 8) == 0, barrier = strncmp(l, "  | barrier", 11) == 0;
        ps->links += link;
        ps->barriers += barrier;
        ps->grid_barriers += strncmp(l, "  | barrier (and indirect", 25) == 0;
        step += link || barrier;
        if (strncmp(l, "    #", 5) == 0) {
            const char *end = strchr(l, '\n'), *p = strstr(l, "polls tagged words");
            ps->polls += p && (!end || p < end);
            p = strstr(l, "before its early reads");
            ps->early += p && (!end || p < end);
            unsigned word;
            p = strstr(l, "signals word ");
            if (p && (!end || p < end) && sscanf(p, "signals word %u", &word) == 1 && word < MAX_WORDS) {
                ps->shared_words += signaller[word] >= 0 && signaller[word] != step;
                signaller[word] = step;
            }
        }
    }
}

/* Records g (built by `table`) under planner sy into G.cb with the listing
 * on; rc of vk_sync_record, the listing's counts into ps. */
static int record_table(const vk_sync *sy, vk_prog *prog, void (*table)(vk_graph *, const void *), const void *arg,
                        plan_seen *ps)
{
    err_t err = {{0}};
    vk_graph g;
    CHECK(vk_graph_init(&g, 16, &err) == 0, "table: %.200s", err.msg);
    table(&g, arg);
    char *text = NULL;
    size_t len = 0;
    FILE *lf = open_memstream(&text, &len);
    vk_listing list = {.f = lf, .pipes = &G.pipes};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vk_rec r;
    memset(prog, 0, sizeof *prog);
    vkBeginCommandBuffer(G.cb, &bi);
    vk_rec_begin(&r, &G.c, prog, G.cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
    r.list = lf ? &list : NULL;
    int rc = vk_sync_record(sy, &g, &r);
    int end = vk_rec_end(&r);
    vkEndCommandBuffer(G.cb);
    vk_graph_free(&g);
    if (lf)
        fclose(lf);
    memset(ps, 0, sizeof *ps);
    read_listing(text, ps);
    free(text);
    CHECK(rc == VK_SYNC_UNTAGGED || (rc == 0 && end == 0), "record: %.200s", err.msg);
    return rc;
}

typedef struct {
    const mini *m;
    const mini_bufs *b;
    bool tagged;
} mini_arg;

static void mini_table_of(vk_graph *g, const void *arg)
{
    const mini_arg *a = arg;
    mini_table(g, a->m, a->b, a->tagged);
}

/* Records the miniature layer under the planner and runs it; where a wait
 * or a poll gave up, gives up on them as the engine does (vk_sync_give_up)
 * and runs it again with what the planner plans then; where the table's
 * tagged words are refused, builds it again without.  The outputs into out
 * (allocated), what the last plan's listing showed into ps. */
static void mini_run(const mini *m, outputs *out, plan_seen *ps)
{
    vk_sync sy;
    mini_bufs b;
    vk_prog prog;
    int gave_up = 0, retries = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        /* the planner's settings decide the buffers' layout, as in vk_forward.c */
        vk_sync_init(&sy, &KB, (vk_buf){0}, (vk_buf){0});
        if (gave_up)
            vk_sync_give_up(&sy);
        mini_arg arg = {m, &b, vk_sync_tagged(&sy)};
        for (;;) {
            mini_buffers(m, &b, arg.tagged);
            vk_sync_init(&sy, &KB, b.dep, b.params);
            if (gave_up)
                vk_sync_give_up(&sy);
            if (record_table(&sy, &prog, mini_table_of, &arg, ps) != VK_SYNC_UNTAGGED)
                break;
            /* a kernel cannot take the tagged words: nothing was recorded */
            CHECK(prog.n_disp == 0, "%u dispatches recorded before the refusal", prog.n_disp);
            vk_prog_free(&G.c, &prog);
            vk_arena_release(&G.c, &G.host); /* the weights stay */
            retries++;
            arg.tagged = false;
        }
        err_t err = {{0}};
        CHECK(vk_submit_wait(&G.c, G.cb, &err) == 0, "run: %.200s", err.msg);
        uint32_t fails = ((const uint32_t *)b.dep.map)[0];
        bool linked = prog.n_link > 0;
        vk_prog_free(&G.c, &prog);
        if (fails && linked && !gave_up) {
            gave_up = (int)fails;
            vk_arena_release(&G.c, &G.host); /* the weights stay */
            continue;
        }
        CHECK(fails == 0, "%u waits or polls gave up (%s)", fails, gave_up ? "after the fall-back" : "no fault injected");
        break;
    }
    ps->gave_up = gave_up;
    ps->tagged_retries = retries;
    const vk_buf src[N_OUT] = {b.x, b.q_abs, b.cache, b.ids, b.wts, b.h, b.q, b.qkv};
    const uint32_t n[N_OUT] = {H, NH * m->g.RS, m->g.RS / 2, KU, KU, (KU + 1) * F, NQ, NQKV};
    bool words = b.q.size >= 8ull * NQ; /* q and q_a|kv as tagged words: the values are every other word */
    for (int i = 0; i < N_OUT; i++) {
        out->n[i] = n[i];
        out->w[i] = malloc(n[i] * 4);
        const uint32_t *s = (const uint32_t *)src[i].map;
        for (uint32_t j = 0; j < n[i]; j++)
            out->w[i][j] = words && i >= O_Q ? s[2 * j] : s[j];
    }
    vk_arena_release(&G.c, &G.host); /* the weights stay */
}

static void outputs_free(outputs *o)
{
    for (int i = 0; i < N_OUT; i++)
        free(o->w[i]);
}

/* Bit for bit against the reference; "" or what differs. */
static void compare(const outputs *ref, const outputs *got, const char *what)
{
    for (int i = 0; i < N_OUT; i++) {
        uint32_t bad = 0;
        for (uint32_t j = 0; j < ref->n[i]; j++)
            bad += ref->w[i][j] != got->w[i][j];
        CHECK(bad == 0, "%s: %u of %u words of the %s differ from the all-barriers plan", what, bad, ref->n[i],
              OUT_NAMES[i]);
    }
}

/* Whether every kernel of the table can count and take its tagged words
 * (else the plans below have fewer links than the cases expect). */
static bool mini_capable(const mini *m)
{
    mini_bufs b;
    mini_buffers(m, &b, true);
    vk_graph g;
    err_t err;
    bool ok = vk_graph_init(&g, 16, &err) == 0;
    if (ok)
        mini_table(&g, m, &b, true);
    for (uint32_t i = 0; ok && i + 1 < g.n; i++) {
        const vk_node *n = &g.nodes[i];
        ok = vk_node_counts(&KB, n) && (!n->tagged_in[0] || vk_node_tags(&KB, n, 0)) &&
             (!n->tagged_in[1] || vk_node_tags(&KB, n, 1)) && (!n->tagged_out || vk_node_tags(&KB, n, -1));
    }
    vk_graph_free(&g);
    vk_arena_release(&G.c, &G.host);
    return ok;
}

/* ---- the cases -------------------------------------------------------------------------------- */

typedef struct {
    const char *what;
    uint32_t mask, ll, stall, xs;
    /* what the listing must show where every kernel can (-1: not checked) */
    int links, tagged, polls, early, gave_up;
} plan_case;
static plan_case PC;

static mini M;
static outputs REF, REF_MV; /* all barriers: with the x-stationary kernels, with the mv family */

static void set_tuning(uint32_t mask, uint32_t ll, uint32_t stall, uint32_t xs)
{
    vk_tuning_default(&TUNE);
    TUNE.dep_flags = mask, TUNE.ll = ll, TUNE.dep_stall = stall, TUNE.xs = xs;
}

static void test_plan(void)
{
    const plan_case *c = &PC;
    bool capable = mini_capable(&M);
    if (!capable)
        printf("# this device runs some of the layer's kernels without counters or tagged words: the plans are "
               "compared, their links not counted\n");
    for (int run = 0; run < RUNS; run++) {
        set_tuning(c->mask, c->ll, c->stall, c->xs);
        outputs got;
        plan_seen ps;
        mini_run(&M, &got, &ps);
        vk_tuning_default(&TUNE);
        compare(c->xs ? &REF : &REF_MV, &got, c->what);
        outputs_free(&got);
        if (!capable)
            continue;
        /* links: steps joined by counters or tagged words; of 9 steps, 8 boundaries */
        CHECK(c->links < 0 || (ps.links == c->links && ps.barriers == 8 - c->links), "%d links, %d barriers: want %d, %d",
              ps.links, ps.barriers, c->links, 8 - c->links);
        CHECK(c->polls < 0 || ps.polls == c->polls, "%d calls poll tagged words, want %d", ps.polls, c->polls);
        CHECK(c->early < 0 || ps.early == c->early, "%d early waits, want %d", ps.early, c->early);
        CHECK(ps.grid_barriers == 0, "a barrier for indirect grids where no grid is written");
        CHECK(ps.shared_words == 0, "%d counter words signalled by two steps", ps.shared_words);
        CHECK((ps.gave_up > 0) == (c->gave_up > 0), "%d waits or polls gave up (want %s)", ps.gave_up,
              c->gave_up ? "some, then barriers" : "none");
        CHECK((ps.tagged_retries > 0) == (c->tagged < 0), "tagged words %s", ps.tagged_retries ? "refused" : "taken");
    }
}

/* Two boundaries of a layer on one bit (the router twice, the second given
 * the first's bit): the second is a barrier, not a counter on the word the
 * first took -- whose count the two producers' signals would mix, so that
 * the wait after the second router could end before it has run.  Every
 * other boundary as with every bit set; the outputs bit for bit. */
static void test_bit_twice(void)
{
    ROUTER_TWICE = true;
    set_tuning(ALL_BITS, 0, 0, 1);
    outputs got;
    plan_seen ps;
    mini_run(&M, &got, &ps);
    vk_tuning_default(&TUNE);
    ROUTER_TWICE = false;
    compare(&REF, &got, "the router twice");
    outputs_free(&got);
    CHECK(ps.shared_words == 0, "%d counter words signalled by two steps", ps.shared_words);
    if (mini_capable(&M))
        CHECK(ps.links == 7 && ps.barriers == 2, "%d links, %d barriers: want 7, 2 (a barrier before the second router)",
              ps.links, ps.barriers);
}

static void plan_cases(void)
{
    mini_init(&M);
    set_tuning(0, 0, 0, 1);
    plan_seen ps;
    mini_run(&M, &REF, &ps);
    set_tuning(0, 0, 0, 0);
    mini_run(&M, &REF_MV, &ps);
    vk_tuning_default(&TUNE);
    static plan_case cases[] = {
        {"all barriers (dep_flags 0, no tagged words)", 0, 0, 0, 1, 0, 0, 0, 0, 0},
        {"every boundary by a counter (dep_flags 511)", ALL_BITS, 0, 0, 1, 7, 0, 0, 1, 0},
        {"tagged words alone (q_a|kv -> q_b -> k_b || kv_store)", 0, 2, 0, 1, 2, 2, 3, 0, 0},
        {"tagged words, every lane polling (ll 1)", 0, 1, 0, 1, 2, 2, 3, 0, 0},
        {"tagged words and counters", ALL_BITS, 2, 0, 1, 7, 2, 3, 1, 0},
        {"router and gate/up by counters: the down waits for the router before its early reads", B_ROUTE | B_GU, 0,
         0, 1, 2, 0, 0, 1, 0},
        {"counters, every wait giving up (dep_stall): the fall-back to barriers", ALL_BITS, 0, 1, 1, 0, 0, 0, 0, 1},
        {"tagged words, every poll giving up (dep_stall): the fall-back to barriers", 0, 2, 1, 1, 0, 0, 0, 0, 1},
        {"tagged words and counters giving up (dep_stall): the fall-back", ALL_BITS, 2, 1, 1, 0, 0, 0, 0, 1},
        {"the mv kernels (xs 0): tagged words refused, no counter", ALL_BITS, 2, 0, 0, 0, -1, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        PC = cases[i];
        char name[200];
        snprintf(name, sizeof name, "planner: %s = all barriers, bit for bit", PC.what);
        RUN_NAMED(test_plan, name);
    }
    /* each boundary alone (the down's early wait needs the router's counter too) */
    static const char *const bit_names[N_BITS] = {"q_a|kv -> q_b", "the absorbed queries' reader -> router", "router -> gate/up",
                                                  "gate/up -> down", "down -> the next q_a|kv", "q_b -> k_b || kv_store",
                                                  "k_b || kv_store -> their reader"};
    for (int i = 0; i < N_BITS; i++) {
        PC = (plan_case){bit_names[i], BITS[i], 0, 0, 1, 1, 0, 0, 0, 0};
        char name[200];
        snprintf(name, sizeof name, "planner: one counter (%s) = all barriers, bit for bit", bit_names[i]);
        RUN_NAMED(test_plan, name);
    }
    RUN_NAMED(test_bit_twice, "planner: two boundaries of a layer on one counter bit: a barrier, not a shared word");
    outputs_free(&REF);
    outputs_free(&REF_MV);
    mini_free(&M);
    tu_reset_buffers();
}

/* ---- grids written by the step before: a prompt batch's expert passes -------------------------
 * moe_group writes the work list and the indirect grids of the expert
 * gate/up and down, which take their grids from it: between the group and
 * the gate/up a barrier with indirect access (a counter cannot order a
 * grid), plain barriers after.  The outputs must equal, bit for bit, the
 * same calls with those barriers recorded by hand. */
enum { XH = 256, XE = 16, XK = 4, XT = 77, XB = 80, XF = 96 };
enum { X_IDS = 1u << 0, X_LIST = 1u << 1, X_GRID = 1u << 2, X_H = 1u << 3, X_Y = 1u << 4, X_X = 1u << 5 };

typedef struct {
    vk_moe_group_args ga;
    vk_mm_args gu, dn;
    vk_moe_combine_args cb;
} expert_calls;

static void expert_table(vk_graph *g, const void *arg)
{
    const expert_calls *c = arg;
    NODE(g, MOE_GROUP(c->ga), .reads = X_IDS, .writes = X_LIST | X_GRID);
    NODE(g, MM(c->gu), .reads = X_LIST | X_GRID, .writes = X_H, .grid = X_GRID);
    NODE(g, MM(c->dn), .reads = X_LIST | X_GRID | X_H, .writes = X_Y, .grid = X_GRID);
    NODE(g, MOE_COMBINE(c->cb), .reads = X_Y | X_X, .writes = X_X);
}

static void test_expert_grids(void)
{
    vk_tensor tg, tu, td;
    uint8_t *w[3] = {rand_tensor(QT_Q8_0, XH, XF, XE, &tg), rand_tensor(QT_Q8_0, XH, XF, XE, &tu),
                     rand_tensor(QT_Q8_0, XF, XH, XE, &td)};
    float *x = random_vec((uint64_t)XH * XB, 1.0f), *xn = random_vec((uint64_t)XH * XB, 1.0f);
    int32_t ids[XB * XK];
    float wts[XB * XK];
    for (uint32_t t = 0; t < XB; t++)
        for (uint32_t k = 0; k < XK; k++) {
            ids[t * XK + k] = (int32_t)((t * 5 + k * 3 + (t % 3 == 0 ? k : 0)) % XE);
            if (k && ids[t * XK + k] == ids[t * XK + k - 1])
                ids[t * XK + k] = (ids[t * XK + k] + 1) % XE;
            wts[t * XK + k] = 0.1f + 0.2f * k;
        }
    uint32_t params[64] = {0}, tile = vk_mm_expert_bm(&KB, &tg);
    params[VKP_NTOK] = XT;
    uint32_t *out[2];
    for (int way = 0; way < 2; way++) {
        vk_buf bx = host_copy(x, (uint64_t)XH * XB), bxn = host_copy(xn, (uint64_t)XH * XB), bi = host_copy(ids, XB * XK),
               bw = host_copy(wts, XB * XK), bp = host_copy(params, 64), bh = tu_host((uint64_t)XB * XK * XF),
               by = tu_host((uint64_t)XB * XK * XH), bl = tu_host(XB * XK), btl = tu_host(4 * (XB * XK / 32 + XE + 1)),
               bind = tu_host(16);
        vk_buf igu = bind, idn = bind;
        igu.size = idn.size = 12;
        idn.off += 12;
        expert_calls c = {
            .ga = {.ids = {bi, 0}, .K = XK, .n_expert = XE, .list = bl, .tiles = btl, .indirect = bind, .params = bp,
                   .x_gu = (XF + vk_mm_bn(&KB, &tg, &tu) - 1) / vk_mm_bn(&KB, &tg, &tu),
                   .x_dn = (XH + vk_mm_bn(&KB, &td, NULL) - 1) / vk_mm_bn(&KB, &td, NULL), .tile = tile},
            .gu = {.name = "moe_gate_up", .w = &tg, .up = &tu, .x = {bxn, 0}, .x_stride = XH, .x_div = XK,
                   .y = {bh, 0}, .y_stride = XF, .nz = 1, .max_tokens = XB * XK, .params = bp, .list = &bl,
                   .tiles = &btl, .indirect = &igu, .tile = tile},
            .dn = {.name = "moe_down", .w = &td, .x = {bh, 0}, .x_stride = XF, .x_div = 1, .y = {by, 0},
                   .y_stride = XH, .nz = 1, .max_tokens = XB * XK, .params = bp, .list = &bl, .tiles = &btl,
                   .indirect = &idn, .tile = tile},
            .cb = {.y = {by, 0}, .x = {bx, 0}, .wts = {bw, 0}, .H = XH, .K = XK, .max_tokens = XB, .params = bp}};
        err_t err = {{0}};
        vk_prog prog;
        if (way == 0) {
            /* by hand, as the prompt graph was recorded before the planner */
            vk_call k[4];
            CHECK(vk_k_moe_group(&KB, &c.ga, &k[0]) == 0 && vk_k_mm(&KB, &c.gu, &k[1]) == 0 &&
                      vk_k_mm(&KB, &c.dn, &k[2]) == 0 && vk_k_moe_combine(&KB, &c.cb, &k[3]) == 0,
                  "build: %.200s", KERR.msg);
            VkCommandBufferBeginInfo bi2 = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                            .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
            vk_rec r;
            memset(&prog, 0, sizeof prog);
            vkBeginCommandBuffer(G.cb, &bi2);
            vk_rec_begin(&r, &G.c, &prog, G.cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
            vk_rec_call(&r, &k[0]);
            vk_rec_barrier_indirect(&r);
            vk_rec_call(&r, &k[1]);
            vk_rec_barrier(&r);
            vk_rec_call(&r, &k[2]);
            vk_rec_barrier(&r);
            vk_rec_call(&r, &k[3]);
            CHECK(vk_rec_end(&r) == 0, "record: %.200s", err.msg);
            vkEndCommandBuffer(G.cb);
        } else {
            vk_sync sy;
            plan_seen ps;
            vk_sync_init(&sy, &KB, bind, bp);
            record_table(&sy, &prog, expert_table, &c, &ps);
            CHECK(ps.grid_barriers == 1 && ps.barriers == 3 && ps.links == 0,
                  "%d barriers (%d for grids), %d links: want 3 (1), 0", ps.barriers, ps.grid_barriers, ps.links);
        }
        CHECK(vk_submit_wait(&G.c, G.cb, &err) == 0, "run: %.200s", err.msg);
        vk_prog_free(&G.c, &prog);
        out[way] = malloc((uint64_t)XH * XB * 4);
        memcpy(out[way], bx.map, (uint64_t)XH * XB * 4);
        vk_arena_release(&G.c, &G.host); /* the weights stay */
    }
    CHECK(memcmp(out[0], out[1], (uint64_t)XH * XB * 4) == 0, "x differs from the barriers recorded by hand");
    free(out[0]), free(out[1]), free(x), free(xn), free(w[0]), free(w[1]), free(w[2]);
    tu_reset_buffers();
}

int main(void)
{
    if (tu_kernels_open())
        return 1;
    plan_cases();
    RUN_NAMED(test_expert_grids, "planner: a prompt batch's expert passes take their grids after a barrier with "
                                 "indirect access = barriers by hand, bit for bit");
    tu_gpu_close();
    TESTS_DONE();
}
