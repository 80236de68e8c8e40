/* test_vk_sampler.c: sampling on the GPU (shaders/sample_*.comp) against
 * the CPU reference (core/sample/sampler.c): the same request and logits must
 * give the same token, every time -- on random logits with ties, masks,
 * NaN, flat and peaked distributions, every setting, vocabularies from 1
 * token to the real 154880, and uniforms placed at the draw's boundaries
 * (where a weight one unit off would change the token).  Both of the GPU's
 * ways are covered: the candidates (sample_pick) and the whole vocabulary
 * (sample_select); each case counts them.  Then the Vulkan engine itself:
 * the token it samples on the GPU against the CPU's pick from the same
 * position's logits.  And the prompt graph's top-K + logsumexp (topk.comp)
 * against the CPU. */
#include <float.h>
#include <math.h>
#include <stdbool.h>

#include "engine/engine.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "sample/sampler_kernels.h"
#include "logit_rng.h"
#include "testlib.h"
#include "vk.h"
#include "vk_sample.h"
#include "vk_testutil.h"

/* ---- the kernels, recorded once per vocabulary size ------------------------------- */

typedef struct {
    vk_sample_geom g;
    vk_sample_bufs b;
    vk_buf logits;
    VkCommandBuffer main_cb, select_cb;
    vk_prog main_prog, select_prog;
    uint32_t n;
} gpu_sampler;

static int record(gpu_sampler *s, VkCommandBuffer *cb, vk_prog *prog, bool select)
{
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = G.c.cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    if (vkAllocateCommandBuffers(G.c.dev, &ai, cb) != VK_SUCCESS)
        return -1;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (vkBeginCommandBuffer(*cb, &bi) != VK_SUCCESS)
        return -1;
    err_t err;
    vk_rec r;
    vk_call k;
    vk_rec_begin(&r, &G.c, prog, *cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
    int rc = 0;
    if (!select) { /* the decode graph's way: the top-p cut and the draw on sample_pick's grids */
        rc = vk_k_sample_cand(&KB, &s->b, &k);
        if (!rc) {
            vk_rec_call(&r, &k);
            vk_rec_barrier(&r);
            rc = vk_k_sample_pick(&KB, &s->b, true, &k);
        }
        if (!rc) {
            vk_rec_call(&r, &k);
            vk_rec_barrier_indirect(&r);
        }
        for (uint32_t sel = 1; sel < 3 && !rc; sel++)
            for (uint32_t pass = 0; pass < vk_sample_passes(sel) && !rc; pass++) {
                rc = vk_k_sample_select(&KB, &s->b, sel, pass, true, &k);
                if (!rc) {
                    vk_rec_call(&r, &k);
                    vk_rec_barrier(&r);
                }
            }
    } else { /* the engine's second program, where a top-k bound is to be found too */
        for (uint32_t sel = 0; sel < 3 && !rc; sel++)
            for (uint32_t pass = 0; pass < vk_sample_passes(sel) && !rc; pass++) {
                rc = vk_k_sample_select(&KB, &s->b, sel, pass, false, &k);
                if (!rc) {
                    vk_rec_call(&r, &k);
                    vk_rec_barrier(&r);
                }
            }
    }
    if (rc)
        printf("# %s\n", KERR.msg);
    rc = vk_rec_end(&r) || rc;
    return vkEndCommandBuffer(*cb) != VK_SUCCESS || rc ? -1 : 0;
}

static vk_buf zeroed(uint64_t bytes)
{
    vk_buf b = tu_host((bytes + 3) / 4);
    if (b.map)
        memset(b.map, 0, bytes);
    return b;
}

static int gpu_open(gpu_sampler *s, uint32_t n)
{
    memset(s, 0, sizeof *s);
    err_t err;
    if (vk_sample_geom_init(&G.c, n, &s->g, &err)) {
        printf("# %s\n", err.msg);
        return -1;
    }
    s->n = n;
    s->logits = tu_host(n);
    vk_buf words = zeroed(vk_sample_bytes(VK_SMP_WORDS)), ind = words;
    ind.off += SMP_PICK_IND * 4;
    ind.size = 12;
    vk_buf state = zeroed(vk_sample_bytes(VK_SMP_STATE)), sel_ind[2] = {state, state};
    for (int i = 0; i < 2; i++) {
        sel_ind[i].off += (SST_IND + 3u * i) * 4u;
        sel_ind[i].size = 12;
    }
    s->b = (vk_sample_bufs){.g = &s->g, .logits = {s->logits, 0}, .smp = words,
                            .cand_v = zeroed(vk_sample_bytes(VK_SMP_CAND)), .cand_i = zeroed(vk_sample_bytes(VK_SMP_CAND)),
                            .ms = zeroed(vk_sample_bytes(VK_SMP_MS)), .part = zeroed(vk_sample_bytes(VK_SMP_PART)),
                            .counter = zeroed(vk_sample_bytes(VK_SMP_COUNT)),
                            .result = zeroed(vk_sample_bytes(VK_SMP_RESULT)),
                            .state = state, .hist = zeroed(vk_sample_bytes(VK_SMP_HIST)), .pick_ind = ind,
                            .sel_ind = {sel_ind[0], sel_ind[1]}, .out_ids = zeroed(SMP_KMAX * 4), .out_vals = zeroed(SMP_KMAX * 4 + 4)};
    if (!s->logits.map || !s->b.hist.map || !s->b.out_vals.map)
        return -1;
    return record(s, &s->main_cb, &s->main_prog, false) || record(s, &s->select_cb, &s->select_prog, true) ? -1 : 0;
}

static void gpu_close(gpu_sampler *s)
{
    vkFreeCommandBuffers(G.c.dev, G.c.cmd_pool, 1, &s->main_cb);
    vkFreeCommandBuffers(G.c.dev, G.c.cmd_pool, 1, &s->select_cb);
    vk_prog_free(&G.c, &s->main_prog);
    vk_prog_free(&G.c, &s->select_prog);
    tu_reset_buffers();
}

/* How a token was found: from the candidates, by sample_pick's own draw
 * over the whole vocabulary (min-p first), by the selections that follow
 * sample_pick in its program, or by the second program (a top-k bound
 * beyond the candidates). */
enum { WAY_CAND, WAY_WHOLE, WAY_TAIL, WAY_PROGRAM };

/* The GPU's token for these logits (left penalised in the buffer); *way:
 * WAY_*.  -1 on a device error. */
static int32_t gpu_pick(gpu_sampler *s, const sampler_request *rq, const float *logits, uint32_t host_k, int *way)
{
    err_t err;
    memcpy(s->logits.map, logits, s->n * sizeof *logits);
    vk_sample_write(&s->g, (uint32_t *)s->b.smp.map, rq, host_k);
    const volatile uint32_t *res = (const volatile uint32_t *)s->b.result.map;
    ((uint32_t *)s->b.result.map)[SMPR_STATUS] = 0xdead;
    ((uint32_t *)s->b.result.map)[SMPR_WAY] = 0xdead;
    if (vk_submit_wait(&G.c, s->main_cb, &err))
        return -1;
    *way = res[SMPR_WAY] == SMP_WAY_TAIL ? WAY_TAIL : res[SMPR_WAY] == SMP_WAY_WHOLE ? WAY_WHOLE : WAY_CAND;
    if (res[SMPR_STATUS] == SMP_STATUS_SELECT) {
        *way = WAY_PROGRAM;
        if (vk_submit_wait(&G.c, s->select_cb, &err))
            return -1;
    }
    return res[SMPR_STATUS] == SMP_STATUS_DONE ? (int32_t)res[SMPR_TOKEN] : -2;
}

/* ---- logits ------------------------------------------------------------------------- */

enum { D_LM, D_FLAT, D_PEAKED, D_TIES, D_MASKED, D_NAN, D_CONST, D_SUBNORMAL, D_HUGE, D_COUNT };
static const char *const dist_names[D_COUNT] = {"lm", "flat", "peaked", "ties", "masked", "nan", "const", "subnormal",
                                                "huge"};

static void make_logits(float *l, uint32_t n, int dist, uint64_t *x)
{
    for (uint32_t i = 0; i < n; i++) {
        float g = rs_gauss(x), v = 3 * g;
        double u = rs_unit(x);
        switch (dist) {
        case D_FLAT: v = 4 * logf((float)u) * 0.1f; break;
        case D_PEAKED: v = i % 997 == 17 ? 12.0f + (float)u : (float)(u * 4 - 2); break;
        case D_TIES: v = roundf(3 * g * 4) / 4; break;
        case D_MASKED: v = u < 0.4 ? -INFINITY : v; break;
        case D_NAN: v = u < 0.01 || (i == 0 && (rs_next(x) & 3) == 0) ? NAN : v; break;
        case D_CONST: v = 1.5f; break;
        case D_SUBNORMAL: v = u < 0.3 ? 1e-40f : u < 0.6 ? -0.0f : u < 0.7 ? 1.5e-38f : v * 1e-3f; break;
        case D_HUGE: v = u < 0.01 ? 3e38f : u < 0.02 ? -3e38f : v; break;
        default: break;
        }
        l[i] = v;
    }
}

typedef struct {
    float temp, top_p, min_p;
    int top_k;
    bool penalties;
} combo;

static const combo combos[] = {
    {1.0f, 0.95f, 0.01f, 0, false},  /* GLM defaults */
    {0.0f, 1.0f, 0.0f, 0, false},    /* greedy */
    {0.0f, 0.9f, 0.05f, 0, true},    /* greedy with penalties */
    {0.3f, 0.95f, 0.0f, 0, false},   /* deepseek2 preset */
    {0.7f, 0.8f, 0.0f, 20, false},   /* chatml preset */
    {0.6f, 0.9f, 0.0f, 0, true},     /* llama3 preset, penalties */
    {1.0f, 1.0f, 0.0f, 0, false},    /* temperature only */
    {1.3f, 1.0f, 0.05f, 0, false},   /* min-p only */
    {1.0f, 0.95f, 0.01f, 100, true}, /* top-k above the candidates, everything on */
    {0.8f, 1.0f, 0.0f, 1, false},    /* top-k 1 */
    {2.0f, 0.9999f, 0.0f, 1000, false},
    {0.5f, 0.0f, 0.0f, 0, false},    /* top-p 0: the best token */
    {1.0f, 0.5f, 0.2f, 64, true},
};
#define N_COMBOS (sizeof combos / sizeof combos[0])

static sampler_params params_of(const combo *c, uint64_t seed)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temp = c->temp;
    p.top_p = c->top_p;
    p.min_p = c->min_p;
    p.top_k = c->top_k;
    p.seed = seed;
    p.penalty_window = 32;
    if (c->penalties) {
        p.repeat_penalty = 1.3f;
        p.presence_penalty = 0.4f;
        p.frequency_penalty = 0.2f;
    }
    return p;
}

typedef struct {
    int runs, bad, by_cand, by_whole, by_tail, by_program;
    int topp_cut; /* selections after sample_pick with top-p on that found the cut */
    char why[240];
} tally;

/* `steps` draws on one logits set with the window filling up: the GPU's
 * token and penalised logits against the CPU's. */
static void compare(gpu_sampler *g, const combo *c, int dist, uint64_t seed, int steps, tally *t)
{
    uint32_t n = g->n;
    sampler_params p = params_of(c, seed);
    sampler *s = sampler_new(&p, n);
    float *base = malloc(n * sizeof *base), *cpu = malloc(n * sizeof *cpu);
    uint64_t x = seed * 7919 + (uint64_t)dist;
    make_logits(base, n, dist, &x);
    for (int i = 0; i < 8; i++) /* a window of earlier tokens, some repeated */
        sampler_accept(s, (int32_t)(rs_next(&x) % (i < 4 ? n : (n + 3) / 4)));
    for (int step = 0; step < steps; step++) {
        sampler_request rq;
        sampler_prepare(s, &rq);
        memcpy(cpu, base, n * sizeof *cpu);
        int32_t want = sampler_pick(s, &rq, cpu, NULL);
        int way = WAY_CAND;
        int32_t got = gpu_pick(g, &rq, base, 0, &way);
        bool same_logits = true;
        for (uint32_t i = 0; i < rq.n_pen; i++) {
            int32_t id = rq.pen_ids[i];
            float a = sk_canon(cpu[id]), b = sk_canon(((const float *)g->logits.map)[id]);
            same_logits = same_logits && memcmp(&a, &b, sizeof a) == 0;
        }
        t->runs++;
        t->by_cand += way == WAY_CAND;
        t->by_whole += way == WAY_WHOLE;
        t->by_tail += way == WAY_TAIL;
        t->by_program += way == WAY_PROGRAM;
        /* sample_pick leaves the top-p selection out where min-p keeps less
         * than its target, and draws itself (shaders/sample_pick.comp) */
        if (way == WAY_TAIL && (((const uint32_t *)g->b.smp.map)[SMP_FLAGS] & SMP_F_TOPP))
            t->topp_cut += ((const uint32_t *)g->b.state.map)[SST_SEL + SST_SEL_WORDS + SSS_ACTIVE] != 0;
        if (got != want || !same_logits) {
            if (!t->bad++)
                snprintf(t->why, sizeof t->why,
                         "%s n=%u T=%g top-k %d top-p %g min-p %g pen %d seed %llu step %d: GPU %d (%s) CPU %d%s",
                         dist_names[dist], n, (double)c->temp, c->top_k, (double)c->top_p, (double)c->min_p,
                         c->penalties, (unsigned long long)seed, step, got,
                         way == WAY_CAND    ? "candidates"
                         : way == WAY_WHOLE ? "sample_pick's whole-vocabulary draw"
                         : way == WAY_TAIL  ? "selection after sample_pick"
                                            : "second program",
                         want,
                         same_logits ? "" : ", penalised logits differ");
        }
        sampler_accept(s, want);
    }
    sampler_free(s);
    free(base);
    free(cpu);
}

/* The sanitizer run (TEST_QUICK, tests/run.sh), which looks for memory
 * errors in the host code: one draw for each setting and distribution
 * instead of two or three (every setting, distribution and size still
 * runs; the normal run keeps them all). */
static bool quick_run(void)
{
    const char *q = getenv("TEST_QUICK");
    return q && strcmp(q, "1") == 0;
}

static void check_sizes(const uint32_t *sizes, int n_sizes, int steps, int dists_mask, uint64_t seed0, bool need_both)
{
    tally t = {0};
    if (quick_run())
        steps = 1;
    for (int si = 0; si < n_sizes; si++) {
        gpu_sampler g;
        if (gpu_open(&g, sizes[si])) {
            CHECK(0, "could not set up the sampling kernels for %u tokens", sizes[si]);
            return;
        }
        for (size_t c = 0; c < N_COMBOS; c++)
            for (int d = 0; d < D_COUNT; d++)
                if (dists_mask >> d & 1)
                    compare(&g, &combos[c], d, seed0 + c * 131 + (uint64_t)d, steps, &t);
        gpu_close(&g);
    }
    printf("# %d draws: %d from the candidates, %d by sample_pick over the whole vocabulary (min-p first), %d by the "
           "whole-vocabulary selection (%d in sample_pick's program, %d of them after a top-p cut; %d by the second "
           "one)\n",
           t.runs, t.by_cand, t.by_whole, t.by_tail + t.by_program, t.by_tail, t.topp_cut, t.by_program);
    CHECK(t.bad == 0, "%d of %d draws differ from the CPU; first: %s", t.bad, t.runs, t.why);
    CHECK(!need_both || (t.by_cand > 0 && t.by_whole > 0 && t.by_tail > 0 && t.topp_cut > 0 && t.by_program > 0),
          "not every way was exercised (%d candidates, %d sample_pick's whole-vocabulary draw, %d selection after "
          "sample_pick, %d of them after a top-p cut, %d second program)",
          t.by_cand, t.by_whole, t.by_tail, t.topp_cut, t.by_program);
}

static void test_small_vocabularies(void)
{
    static const uint32_t sizes[] = {1, 2, 7, 63, 64, 65, 300, 324, 2049};
    check_sizes(sizes, (int)(sizeof sizes / sizeof sizes[0]), 3, (1 << D_COUNT) - 1, 100, true);
}

/* Several slices and several elements per thread, the tie blocks. */
static void test_mid_vocabulary(void)
{
    static const uint32_t sizes[] = {20000};
    check_sizes(sizes, 1, 2, (1 << D_COUNT) - 1, 200, true);
}

static void test_full_vocabulary(void)
{
    static const uint32_t sizes[] = {154880};
    check_sizes(sizes, 1, 1, 1 << D_LM | 1 << D_FLAT | 1 << D_PEAKED | 1 << D_TIES | 1 << D_NAN, 300, true);
}

/* Uniforms just below and just above boundaries of the draw's running sum
 * (over the kept tokens in id order, found from the CPU's weights): a GPU
 * weight off by a unit moves a boundary and changes one of the two tokens.
 * Small vocabularies keep the spacing of reachable targets (S / 2^32) below
 * a few units.  Every way of the GPU's draw: the candidates (n <= 64), the
 * selection after sample_pick (temperature only) and sample_pick's own
 * draw over the whole vocabulary (min-p binding before top-p, on a flat
 * distribution), with boundaries at the first tokens, spread over the kept
 * ones and at the last kept token of each slice (the slices' sums, then the
 * threads' runs, then a run's tokens). */
static void test_draw_boundaries(void)
{
    static const uint32_t sizes[] = {5, 40, 64, 90, 300, 20000};
    static const struct {
        float temp, top_p, min_p;
        int dist, way; /* the way expected beyond the candidates */
    } vars[] = {
        {1.0f, 1.0f, 0.0f, D_LM, WAY_TAIL},      {0.37f, 1.0f, 0.0f, D_LM, WAY_TAIL},
        {2.5f, 1.0f, 0.0f, D_LM, WAY_TAIL},      {1.0f, 0.999f, 0.3f, D_FLAT, WAY_WHOLE},
        {0.6f, 0.999f, 0.3f, D_FLAT, WAY_WHOLE},
    };
    int bad = 0, runs = 0, wrong_way = 0;
    char why[200] = "";
    uint64_t x = 4242;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint32_t n = sizes[si];
        gpu_sampler g;
        if (gpu_open(&g, n)) {
            CHECK(0, "setup");
            return;
        }
        float *l = malloc(n * sizeof *l), *cpu = malloc(n * sizeof *cpu);
        uint32_t *kid = malloc(n * sizeof *kid);
        uint64_t *cum = malloc(n * sizeof *cum);
        for (size_t vi = 0; vi < sizeof vars / sizeof vars[0]; vi++) {
            make_logits(l, n, vars[vi].dist, &x);
            sampler_params p = params_of(&(combo){vars[vi].temp, vars[vi].top_p, vars[vi].min_p, 0, false}, 1);
            sampler *s = sampler_new(&p, n);
            sampler_request rq;
            sampler_prepare(s, &rq);
            /* the kept tokens: min-p's (top-p's target lies beyond them:
             * checked below), else all */
            float mx = -INFINITY;
            for (uint32_t i = 0; i < n; i++)
                mx = fmaxf(mx, sk_canon(l[i]));
            float floor_l = rq.min_p_on ? sk_canon(mx + rq.log_min_p) : -INFINITY;
            uint64_t z = 0, f = 0, total = 0;
            uint32_t m = 0;
            for (uint32_t i = 0; i < n; i++) {
                float li = sk_canon(l[i]);
                uint32_t wm = sk_weight(li, mx, 1.0f);
                z += wm;
                if (li >= floor_l) {
                    f += wm;
                    total += sk_weight(li, mx, rq.inv_temp);
                    kid[m] = i;
                    cum[m++] = total;
                }
            }
            uint64_t t = rq.top_p_on ? sk_mulhi(z, rq.top_p_q32) : UINT64_MAX;
            CHECK(f < (t ? t : 1), "n=%u: min-p does not bind before top-p (%llu >= %llu): the case is not tested", n,
                  (unsigned long long)f, (unsigned long long)t);
            uint32_t ks[24], nk = 0;
            for (uint32_t k = 0; k < 4; k++)
                ks[nk++] = k;
            for (uint32_t j = 1; j < 8; j++)
                ks[nk++] = (uint32_t)((uint64_t)m * j / 8);
            for (uint32_t k = 0; k + 1 < m && nk < 22; k++) /* the last kept token of a slice */
                if (kid[k] / g.g.slice != kid[k + 1] / g.g.slice)
                    ks[nk++] = k;
            ks[nk++] = m >= 2 ? m - 2 : 0;
            for (uint32_t ki = 0; ki < nk; ki++) {
                uint32_t k = ks[ki];
                if (k + 1 >= m)
                    continue;
                /* the largest u whose target stays within the first k+1 kept tokens */
                uint64_t lo = 0, hi = 0xFFFFFFFFull;
                while (lo < hi) {
                    uint64_t mid = (lo + hi + 1) / 2;
                    if (sk_mulhi(total, (uint32_t)mid) + 1 <= cum[k])
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                for (uint64_t u = lo; u <= lo + 1 && u <= 0xFFFFFFFFull; u++) {
                    rq.uniform = (uint32_t)u;
                    memcpy(cpu, l, n * sizeof *cpu);
                    int32_t want = sampler_pick(s, &rq, cpu, NULL);
                    int way;
                    int32_t got = gpu_pick(&g, &rq, l, 0, &way);
                    runs++;
                    wrong_way += way != (n <= SMP_KMAX ? WAY_CAND : vars[vi].way);
                    if (got != want && !bad++)
                        snprintf(why, sizeof why, "n=%u T=%g min-p %g kept %u boundary %u u=%llu: GPU %d CPU %d", n,
                                 (double)vars[vi].temp, (double)vars[vi].min_p, m, k, (unsigned long long)u, got,
                                 want);
                    /* the definition itself: the first kept token by id
                     * whose running weight reaches the target */
                    uint64_t tgt = sk_mulhi(total, (uint32_t)u) + 1;
                    uint32_t j = 0;
                    while (j + 1 < m && cum[j] < tgt)
                        j++;
                    if (want != (int32_t)kid[j] && !bad++)
                        snprintf(why, sizeof why, "n=%u boundary %u u=%llu: the CPU drew %d, not the kept token %u",
                                 n, k, (unsigned long long)u, want, kid[j]);
                }
            }
            sampler_free(s);
        }
        free(l);
        free(cpu);
        free(kid);
        free(cum);
        gpu_close(&g);
    }
    CHECK(bad == 0, "%d of %d boundary draws differ: %s", bad, runs, why);
    CHECK(wrong_way == 0, "%d of %d boundary draws took another way than the one meant", wrong_way, runs);
}

/* Greedy: the lowest id among tied best logits; NaN never wins. */
static void test_greedy_ties(void)
{
    gpu_sampler g;
    if (gpu_open(&g, 5000)) {
        CHECK(0, "setup");
        return;
    }
    float *l = malloc(5000 * sizeof *l);
    for (int i = 0; i < 5000; i++)
        l[i] = i % 3 ? -1.0f : NAN;
    l[4000] = l[1234] = l[2999] = 7.5f;
    sampler_params p = params_of(&combos[1], 1);
    sampler *s = sampler_new(&p, 5000);
    sampler_request rq;
    sampler_prepare(s, &rq);
    int sel;
    CHECK(gpu_pick(&g, &rq, l, 0, &sel) == 1234, "greedy picked %d", gpu_pick(&g, &rq, l, 0, &sel));
    for (int i = 0; i < 5000; i++)
        l[i] = NAN;
    CHECK(gpu_pick(&g, &rq, l, 0, &sel) == 0, "all-NaN greedy picked %d", gpu_pick(&g, &rq, l, 0, &sel));
    sampler_free(s);
    free(l);
    gpu_close(&g);
}

/* Issue 28.2: a temperature whose inverse overflows (below ~3e-39) made
 * the GPU sampler fail ("internal: returned token 15").  Such a
 * temperature, and any request whose inverse temperature is not a finite
 * number >= 0, is greedy on the GPU as on the CPU. */
static void test_absurd_temperature_is_greedy(void)
{
    enum { N = 5000 };
    gpu_sampler g;
    if (gpu_open(&g, N)) {
        CHECK(0, "setup");
        return;
    }
    float *l = malloc(N * sizeof *l);
    uint64_t x = 3;
    make_logits(l, N, D_LM, &x);
    l[4321] = 60.0f;
    static const float temps[] = {1e-39f, 1e-45f, NAN};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
        combo cb = combos[0];
        cb.temp = temps[t];
        sampler_params p = params_of(&cb, 5);
        sampler *s = sampler_new(&p, N);
        sampler_request rq;
        sampler_prepare(s, &rq);
        int sel;
        int32_t got = gpu_pick(&g, &rq, l, 0, &sel);
        CHECK(got == 4321, "temp %g: the GPU picked %d, expected the greedy 4321", (double)temps[t], got);
        sampler_free(s);
    }
    /* Hand-made requests: no filter that would leave the best token alone
     * (top-k 50 keeps the draw among the candidates; top-k 0 sends it over
     * the whole vocabulary). */
    static const float inv_ts[] = {INFINITY, NAN, -1.0f, -INFINITY};
    for (size_t i = 0; i < sizeof inv_ts / sizeof inv_ts[0]; i++)
        for (uint32_t k = 0; k <= 50; k += 50) {
            sampler_request rq = {.inv_temp = inv_ts[i], .top_k = k, .rp = 1, .inv_rp = 1, .uniform = 0x12345678u};
            int sel;
            int32_t got = gpu_pick(&g, &rq, l, 0, &sel);
            CHECK(got == 4321, "inv_t %g, top-k %u: the GPU picked %d, expected the greedy 4321", (double)inv_ts[i], k,
                  got);
        }
    free(l);
    gpu_close(&g);
}

/* The host's top-K (ids, values, descending, lowest id on ties) and the
 * logsumexp (the GPU's exp: within 1e-5 relative). */
static void test_host_topk(void)
{
    enum { N = 30000, K = 40 };
    gpu_sampler g;
    if (gpu_open(&g, N)) {
        CHECK(0, "setup");
        return;
    }
    float *l = malloc(N * sizeof *l);
    uint64_t x = 9;
    make_logits(l, N, D_TIES, &x);
    /* first a flat draw that the selections after sample_pick take: a
     * program whose sample_pick does not run (no token asked for) must not
     * run them again on the grids that draw left (sample_cand clears them) */
    float *flat = malloc(N * sizeof *flat);
    for (int i = 0; i < N; i++)
        flat[i] = (float)(i % 7) * 1e-3f;
    sampler_params p;
    sampler_params_default(&p);
    p.temp = 1.0f;
    p.top_p = 0.95f;
    sampler *smp = sampler_new(&p, N);
    sampler_request rq;
    sampler_prepare(smp, &rq);
    int sel;
    int32_t flat_tok = gpu_pick(&g, &rq, flat, 0, &sel);
    CHECK(flat_tok >= 0 && sel == WAY_TAIL, "the flat draw: token %d, way %d", flat_tok, sel);
    sampler_free(smp);
    free(flat);
    volatile uint32_t *res = (volatile uint32_t *)g.b.result.map;
    res[SMPR_TOKEN] = 0xdead;
    gpu_pick(&g, NULL, l, K, &sel);
    CHECK(res[SMPR_TOKEN] == 0xdead, "a program without a token ran the last draw's selections (token %u)",
          res[SMPR_TOKEN]);
    const int32_t *ids = (const int32_t *)g.b.out_ids.map;
    const float *vals = (const float *)g.b.out_vals.map;
    int bad = 0;
    uint64_t prev = 0;
    for (int k = 0; k < K; k++) {
        uint64_t key = (uint64_t)sk_key(l[ids[k]]) << 32 | (uint32_t)ids[k];
        bad += vals[k] != l[ids[k]] || (k && key <= prev);
        prev = key;
        uint32_t better = 0; /* tokens before it in the order: exactly k */
        for (uint32_t i = 0; i < N; i++)
            better += ((uint64_t)sk_key(l[i]) << 32 | i) < key;
        bad += better != (uint32_t)k;
    }
    double mx = vals[0], z = 0;
    for (int i = 0; i < N; i++)
        z += exp(l[i] - mx);
    double lz = mx + log(z);
    CHECK(bad == 0, "%d top-K entries wrong", bad);
    CHECK(fabs(vals[K] - lz) <= 1e-5 * fabs(lz) + 1e-5, "logsumexp %g, expected %g", (double)vals[K], lz);
    free(l);
    gpu_close(&g);
}

/* ---- the engine ------------------------------------------------------------------------- */

/* The Vulkan engine on the tiny fixture: for each step, the position's
 * logits (then rewound) and the GPU-sampled token from the same position;
 * the CPU's pick from those logits with the same request must be the GPU's
 * token (a prompt's token, then decoded ones). */
static void test_engine_samples_like_cpu(void)
{
    model m;
    err_t err;
    if (model_load(&m, "tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf", &err) != 0) {
        CHECK(0, "%.400s", err.msg);
        return;
    }
    engine_params ep;
    engine_params_default(&ep);
    ep.n_ctx = 256;
    ep.n_batch = 16;
    engine e;
    if (engine_open(&e, &vk_engine_backend, &m, &ep, &err) != 0) {
        CHECK(0, "%.400s", err.msg);
        model_free(&m);
        return;
    }
    uint32_t V = m.cfg.n_vocab;
    int bad = 0, steps = 0;
    char why[200] = "";
    for (size_t c = 0; c < N_COMBOS && !bad; c++) {
        sampler_params p = params_of(&combos[c], 77 + c);
        sampler *s = sampler_new(&p, V);
        float *logits = malloc(V * sizeof *logits);
        int32_t prompt[20];
        for (int i = 0; i < 20; i++)
            prompt[i] = (int32_t)((i * 37 + c * 11) % V);
        engine_rewind(&e, 0);
        for (int i = 0; i < 20; i++)
            sampler_accept(s, prompt[i]);
        int32_t tok = -1;
        for (int step = 0; step < 12 && !bad; step++) {
            const int32_t *in = step == 0 ? prompt : &tok;
            uint32_t n_in = step == 0 ? 20 : 1, at = e.n_past;
            engine_output lo = {.logits = logits};
            int rc = engine_eval(&e, in, n_in, &lo, &err);
            engine_rewind(&e, at);
            sampler_request rq;
            sampler_prepare(s, &rq);
            int32_t got = -1;
            engine_output so = {.sample = &rq, .token = &got};
            rc = rc || engine_eval(&e, in, n_in, &so, &err);
            if (rc) {
                snprintf(why, sizeof why, "%.190s", err.msg);
                bad++;
                break;
            }
            int32_t want = sampler_pick(s, &rq, logits, NULL);
            steps++;
            if (got != want && !bad++)
                snprintf(why, sizeof why, "combo %zu step %d: GPU %d CPU %d", c, step, got, want);
            tok = want;
            sampler_accept(s, tok);
        }
        free(logits);
        sampler_free(s);
    }
    CHECK(bad == 0 && steps > 0, "%s (%d steps)", why, steps);
    engine_close(&e);
    model_free(&m);
}

/* ---- top-K + logsumexp ----------------------------------------------------------------- */

static uint32_t TK_N, TK_K;

static void test_topk(void)
{
    err_t err;
    uint32_t N = TK_N, K = TK_K;
    float *l = random_vec(N, 2.0f);
    /* ties: the lower id must come first */
    l[N / 2] = l[N / 3] = l[N - 1] = 9.5f;
    l[5 % N] = 9.25f;
    vk_topk_geom g;
    CHECK(vk_topk_geom_init(N, K, &g, &err) == 0, "%.200s", err.msg);
    vk_buf bl = host_copy(l, N), cv = tu_host(g.n_slices * K), ci = tu_host(g.n_slices * K),
           ms = tu_host(2 * g.n_slices), cnt = tu_host(4), oi = tu_host(K), ov = tu_host(K + 1);
    memset(cnt.map, 0, 16);
    vk_topk_args a = {.logits = {bl, 0}, .n = N, .k = K, .geom = g, .cand_v = cv, .cand_i = ci, .ms = ms,
                      .counter = cnt, .out_ids = oi, .out_vals = ov};
    vk_call call;
    CHECK(vk_k_topk(&KB, &a, &call) == 0, "build: %.200s", KERR.msg);
    CHECK(tu_run(&call, 1, NULL) == 0, "run");
    CHECK(tu_run(&call, 1, NULL) == 0, "run 2 (counter reset)");
    double mx = -INFINITY, s = 0;
    for (uint32_t i = 0; i < N; i++)
        mx = fmax(mx, l[i]);
    for (uint32_t i = 0; i < N; i++)
        s += exp(l[i] - mx);
    double lz = mx + log(s);
    const int32_t *gi = (const int32_t *)oi.map;
    const float *gv = (const float *)ov.map;
    uint32_t prev = UINT32_MAX;
    for (uint32_t k = 0; k < K; k++) {
        /* expected: the best element after prev in (value desc, id asc) */
        uint32_t b = UINT32_MAX;
        for (uint32_t i = 0; i < N; i++) {
            bool after = prev == UINT32_MAX || l[i] < l[prev] || (l[i] == l[prev] && i > prev);
            if (after && (b == UINT32_MAX || l[i] > l[b] || (l[i] == l[b] && i < b)))
                b = i;
        }
        CHECK(gi[k] == (int32_t)b && gv[k] == l[b], "rank %u: id %d (%g), want %u (%g)", k, gi[k], gv[k], b, l[b]);
        prev = b;
    }
    /* logsumexp: float exp and a sum over N terms: ~(N/256 + 64) ulps of the sum */
    CHECK(fabs(gv[K] - lz) <= 1e-5 * fabs(lz) + (N / 256.0 + 64) * U24, "logsumexp %.9g, want %.9g", gv[K], lz);
    free(l);
    tu_reset_buffers();
}

static void topk_cases(void)
{
    static const uint32_t cases[][2] = {{154880, 1}, {154880, 40}, {324, 64}, {5000, 7}, {2049, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TK_N = cases[i][0];
        TK_K = cases[i][1];
        char name[96];
        snprintf(name, sizeof name, "top-%u + logsumexp over %u logits", TK_K, TK_N);
        RUN_NAMED(test_topk, name);
    }
}

int main(void)
{
    if (tu_kernels_open())
        return 1;
    RUN(test_greedy_ties);
    RUN(test_absurd_temperature_is_greedy);
    RUN(test_host_topk);
    RUN(test_draw_boundaries);
    RUN(test_small_vocabularies);
    RUN(test_mid_vocabulary);
    RUN(test_full_vocabulary);
    topk_cases();
    tu_gpu_close();
    RUN(test_engine_samples_like_cpu);
    TESTS_DONE();
}
