/* cpu_moe_host.c: one MoE layer's routed experts on the CPU for n tokens
 * (cpu_moe_host.h).
 *
 * One pool run, four steps split by barriers:
 *  - prepare: every token's x in the activation forms gate and up read;
 *  - gate/up: items are (chosen expert, a few dozen to 256 rows of its
 *    hidden width): those rows of gate and up for every token that chose
 *    the expert, SwiGLU;
 *  - the hidden rows prepared for down, by whole blocks of down's form
 *    (a step of its own so that gate/up's items need not be whole blocks:
 *    one token's 4 experts x 1536 rows in 256-row items are 24 items, which
 *    16 threads take in two rounds, half of them idle in the second; in
 *    64-row items every thread takes 6);
 *  - down: items are 64 output rows: those rows of every chosen expert's
 *    down for its tokens, then each token's weighted sum over its slots.
 * The (token, slot) pairs are grouped by expert on the caller's thread
 * before the run (a few hundred integer operations).
 *
 * Why not cpu_ffn.c's functions: they work on the CPU forward pass's whole
 * run state (cf_state: the routing it computed, the shared expert as one
 * more unit, the residual it adds into); here the routing comes from the
 * GPU and the result goes back to it.  The kernels, the row tiling and the
 * pool are the same objects. */
#include "cpu_moe_host.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "cpu_matmul.h"
#include "cpu_pack.h"
#include "cpu_pool.h"

/* Output rows per down item (cpu_ffn.c's). */
enum { DOWN_ROWS = 64 };

/* One chosen expert and the pairs that chose it (consecutive from first). */
typedef struct {
    uint32_t e;
    uint32_t first, n_tok;
} host_unit;

struct cpu_moe_host {
    cpu_moe_host_params p;
    const cpu_kernels *k;
    cpu_pool *pool;
    cpu_packs *packs;             /* the Q4_0 / Q5_0 / Q8_0 / IQ4_NL / MXFP4 experts packed (cpu_pack.h), layer by layer at first use */
    bool no_pack;                 /* cpu_moe_host_params.no_pack */
    int n_threads;

    uint8_t *x_q[CPU_ACT_KINDS];  /* (B) prepared x rows per quantized form */
    uint64_t x_qs[CPU_ACT_KINDS]; /* their stride in bytes */
    float *hg, *hu;               /* (B * K, n_ff) gate then SwiGLU, up; grouped by expert */
    uint8_t *h_q[CPU_ACT_KINDS];  /* (B * K) the hidden rows prepared for down */
    uint64_t h_qs[CPU_ACT_KINDS];
    float *out;                   /* (B * K, n_embd) each pair's expert output */
    uint32_t *pair_tok;           /* (B * K) token of each pair, grouped by expert */
    uint32_t *pair_at;            /* (B * K) where pair (t, slot) landed */
    uint32_t *exp_start;          /* (n_expert + 1) */
    host_unit *units;             /* (n_expert) the chosen experts */
    uint32_t n_units;

    /* the current eval */
    const model_layer *L;
    const float *x;
    const float *w;
    float *y;
    uint32_t n;
    unsigned x_kinds;             /* forms of x gate/up read (bit per cpu_act_kind) */
    cpu_act_kind h_kind;          /* the form down reads */
    uint32_t item_rows;           /* gate/up rows per item */
    uint32_t prep_rows;           /* rows per item of the hidden rows' preparation (whole blocks) */
};

static void *alloc_bytes(uint64_t bytes, bool *ok)
{
    void *p = aligned_alloc(64, (bytes ? bytes + 63 : 64) / 64 * 64);
    if (!p)
        *ok = false;
    return p;
}

cpu_moe_host *cpu_moe_host_new(const cpu_moe_host_params *p, err_t *err)
{
    if (!p->n_embd || !p->n_ff || !p->n_expert || !p->n_used || p->n_used > p->n_expert || !p->n_batch) {
        err_set(err, "cpu_moe_host: bad shape (n_embd %u, n_ff %u, %u of %u experts, batch %u)", p->n_embd, p->n_ff,
                p->n_used, p->n_expert, p->n_batch);
        return NULL;
    }
    if (p->gate_rows % 32 || p->gate_rows > 4096) {
        err_set(err, "cpu_moe_host: %u rows per gate/up item: not a multiple of 32 up to 4096", p->gate_rows);
        return NULL;
    }
    cpu_moe_host *h = calloc(1, sizeof *h);
    if (!h) {
        err_set(err, "cpu_moe_host: out of memory");
        return NULL;
    }
    h->p = *p;
    h->k = p->kernels ? p->kernels : cpu_kernels_best(err);
    if (!h->k) {
        free(h);
        return NULL;
    }
    const uint64_t B = p->n_batch, K = p->n_used, H = p->n_embd, F = p->n_ff;
    bool ok = true;
    for (int kind = CPU_ACT_Q8_32; kind < CPU_ACT_KINDS; kind++) {
        h->x_qs[kind] = cpu_act_row_bytes((cpu_act_kind)kind, H);
        h->x_q[kind] = alloc_bytes(B * h->x_qs[kind], &ok);
        h->h_qs[kind] = cpu_act_row_bytes((cpu_act_kind)kind, F);
        h->h_q[kind] = alloc_bytes(B * K * h->h_qs[kind], &ok);
    }
    h->hg = alloc_bytes(B * K * F * sizeof(float), &ok);
    h->hu = alloc_bytes(B * K * F * sizeof(float), &ok);
    h->out = alloc_bytes(B * K * H * sizeof(float), &ok);
    h->pair_tok = alloc_bytes(B * K * sizeof(uint32_t), &ok);
    h->pair_at = alloc_bytes(B * K * sizeof(uint32_t), &ok);
    h->exp_start = alloc_bytes(((uint64_t)p->n_expert + 1) * sizeof(uint32_t), &ok);
    h->units = alloc_bytes((uint64_t)p->n_expert * sizeof(host_unit), &ok);
    if (!ok) {
        cpu_moe_host_free(h);
        err_set(err, "cpu_moe_host: out of memory for a batch of %u tokens", p->n_batch);
        return NULL;
    }
    h->no_pack = p->no_pack;
    h->pool = cpu_pool_new(p->n_threads, err);
    h->packs = h->pool ? cpu_packs_new(err) : NULL;
    if (!h->packs) {
        cpu_moe_host_free(h);
        return NULL;
    }
    h->n_threads = cpu_pool_size(h->pool);
    return h;
}

void cpu_moe_host_free(cpu_moe_host *h)
{
    if (!h)
        return;
    cpu_pool_free(h->pool);
    cpu_packs_free(h->packs);
    for (int kind = 0; kind < CPU_ACT_KINDS; kind++) {
        free(h->x_q[kind]);
        free(h->h_q[kind]);
    }
    free(h->hg);
    free(h->hu);
    free(h->out);
    free(h->pair_tok);
    free(h->pair_at);
    free(h->exp_start);
    free(h->units);
    free(h);
}

int cpu_moe_host_threads(const cpu_moe_host *h)
{
    return h->n_threads;
}

const cpu_kernels *cpu_moe_host_kernels(const cpu_moe_host *h)
{
    return h->k;
}

uint64_t cpu_moe_host_packed_bytes(const cpu_moe_host *h)
{
    return cpu_packs_bytes(h->packs);
}

/* ======================================================================
 * The steps (every thread)
 * ====================================================================== */

static float silu(float v)
{
    return v / (1.0f + expf(-v));
}

/* The job fields x, xs for weights w reading activation rows prepared in
 * q (quantized forms) or the floats f (f_stride floats apart). */
static void job_input(const cpu_moe_host *h, cpu_mm *job, const mtensor *w, uint8_t *const *q, const uint64_t *qs,
                      const float *f, uint64_t f_stride)
{
    cpu_act_kind kind = cpu_kernels_act(h->k, w->type);
    if (kind == CPU_ACT_F32) {
        job->x = (const uint8_t *)f;
        job->xs = f_stride * sizeof(float);
    } else {
        job->x = q[kind];
        job->xs = qs[kind];
    }
    job->packed = cpu_packs_find(h->packs, w);
}

static void prepare_x(cpu_moe_host *h, int tid, int nth)
{
    const uint64_t H = h->p.n_embd;
    for (uint32_t t = (uint32_t)tid; t < h->n; t += (uint32_t)nth)
        for (int kind = CPU_ACT_Q8_32; kind < CPU_ACT_KINDS; kind++)
            if (h->x_kinds & (1u << kind))
                h->k->prepare[kind](h->x + t * H, H, 0, H, h->x_q[kind] + t * h->x_qs[kind]);
}

static void gate_up(cpu_moe_host *h)
{
    const model_layer *L = h->L;
    const uint64_t F = h->p.n_ff, per = (F + h->item_rows - 1) / h->item_rows;
    const uint64_t total = per * h->n_units;
    for (uint64_t it = cpu_pool_take(h->pool, 1); it < total; it = cpu_pool_take(h->pool, 1)) {
        const host_unit *u = &h->units[it / per];
        const uint64_t r0 = it % per * h->item_rows, r1 = r0 + h->item_rows < F ? r0 + h->item_rows : F;
        float *g = h->hg + (uint64_t)u->first * F, *up = h->hu + (uint64_t)u->first * F;
        cpu_mm jg = {.w = &L->gate_exps, .e = u->e, .n_tok = u->n_tok, .xrow = h->pair_tok + u->first, .y = g, .ys = F};
        cpu_mm ju = {.w = &L->up_exps, .e = u->e, .n_tok = u->n_tok, .xrow = h->pair_tok + u->first, .y = up, .ys = F};
        job_input(h, &jg, &L->gate_exps, h->x_q, h->x_qs, h->x, h->p.n_embd);
        job_input(h, &ju, &L->up_exps, h->x_q, h->x_qs, h->x, h->p.n_embd);
        cpu_mm_rows(h->k, &jg, r0, r1);
        cpu_mm_rows(h->k, &ju, r0, r1);
        for (uint32_t t = 0; t < u->n_tok; t++) {
            float *gt = g + t * F;
            const float *ut = up + t * F;
            for (uint64_t r = r0; r < r1; r++)
                gt[r] = silu(gt[r]) * ut[r];
        }
    }
}

/* Items: (pair, prep_rows rows); pairs are grouped by expert as hg is. */
static void prepare_h(cpu_moe_host *h)
{
    const uint64_t F = h->p.n_ff, per = (F + h->prep_rows - 1) / h->prep_rows;
    const uint64_t total = per * h->n * h->p.n_used;
    for (uint64_t it = cpu_pool_take(h->pool, 1); it < total; it = cpu_pool_take(h->pool, 1)) {
        const uint64_t i = it / per, r0 = it % per * h->prep_rows;
        const uint64_t r1 = r0 + h->prep_rows < F ? r0 + h->prep_rows : F;
        h->k->prepare[h->h_kind](h->hg + i * F, F, r0, r1, h->h_q[h->h_kind] + i * h->h_qs[h->h_kind]);
    }
}

static void down(cpu_moe_host *h)
{
    const model_layer *L = h->L;
    const uint64_t H = h->p.n_embd, K = h->p.n_used, F = h->p.n_ff;
    for (uint64_t r0 = cpu_pool_take(h->pool, DOWN_ROWS); r0 < H; r0 = cpu_pool_take(h->pool, DOWN_ROWS)) {
        const uint64_t r1 = r0 + DOWN_ROWS < H ? r0 + DOWN_ROWS : H;
        for (uint32_t i = 0; i < h->n_units; i++) {
            const host_unit *u = &h->units[i];
            cpu_mm j = {.w = &L->down_exps, .e = u->e, .n_tok = u->n_tok, .y = h->out + (uint64_t)u->first * H,
                        .ys = H};
            job_input(h, &j, &L->down_exps, h->h_q, h->h_qs, h->hg, F);
            j.x += (uint64_t)u->first * j.xs;
            cpu_mm_rows(h->k, &j, r0, r1);
        }
        for (uint32_t t = 0; t < h->n; t++) {
            float *yt = h->y + t * H;
            for (uint64_t r = r0; r < r1; r++) {
                float acc = 0;
                for (uint64_t k = 0; k < K; k++) {
                    uint64_t i = t * K + k;
                    float term = h->w[i] * h->out[(uint64_t)h->pair_at[i] * H + r];
                    acc = k == 0 ? term : acc + term;
                }
                yt[r] = acc;
            }
        }
    }
}

static void run(void *ctx, int tid, int nth)
{
    cpu_moe_host *h = ctx;
    prepare_x(h, tid, nth);
    cpu_pool_barrier(h->pool);
    gate_up(h);
    cpu_pool_barrier(h->pool);
    if (h->h_kind != CPU_ACT_F32) {
        prepare_h(h);
        cpu_pool_barrier(h->pool);
    }
    down(h);
}

/* ======================================================================
 * The eval
 * ====================================================================== */

/* Rows per gate/up item for n_units experts of F rows over nth threads:
 * of 256, 128, 64 and 32, the one whose busiest thread has the fewest rows
 * (the largest of those tied: fewer items, fewer calls). */
static uint32_t gate_rows(uint64_t F, uint32_t n_units, uint32_t nth)
{
    uint32_t best = 256;
    uint64_t best_rows = UINT64_MAX;
    for (uint32_t rows = 256; rows >= 32; rows /= 2) {
        uint64_t items = (F + rows - 1) / rows * n_units, busiest = (items + nth - 1) / nth * rows;
        if (busiest < best_rows) {
            best_rows = busiest;
            best = rows;
        }
    }
    return best;
}

static bool shape_is(const mtensor *t, uint64_t cols, uint64_t rows, uint64_t mats)
{
    return t->data && t->ne[0] == cols && t->ne[1] == rows && (t->n_dims < 3 ? 1 : t->ne[2]) >= mats;
}

/* Groups the (token, slot) pairs by expert; false on an id out of range. */
static bool group_pairs(cpu_moe_host *h, const int32_t *ids, uint32_t *bad)
{
    const uint32_t E = h->p.n_expert, K = h->p.n_used;
    const uint64_t pairs = (uint64_t)h->n * K;
    memset(h->exp_start, 0, (E + 1) * sizeof *h->exp_start);
    for (uint64_t i = 0; i < pairs; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= E) {
            *bad = (uint32_t)i;
            return false;
        }
        h->exp_start[ids[i] + 1]++;
    }
    h->n_units = 0;
    for (uint32_t e = 0; e < E; e++) {
        uint32_t m = h->exp_start[e + 1];
        h->exp_start[e + 1] += h->exp_start[e];
        if (m)
            h->units[h->n_units++] = (host_unit){.e = e, .first = h->exp_start[e], .n_tok = m};
    }
    /* exp_start[e] becomes each expert's cursor (its end once filled) */
    for (uint32_t t = 0; t < h->n; t++)
        for (uint32_t k = 0; k < K; k++) {
            uint32_t at = h->exp_start[ids[(uint64_t)t * K + k]]++;
            h->pair_tok[at] = t;
            h->pair_at[(uint64_t)t * K + k] = at;
        }
    return true;
}

int cpu_moe_host_eval(cpu_moe_host *h, const model_layer *L, const float *x, const int32_t *ids, const float *w,
                      uint32_t n, float *y, err_t *err)
{
    const cpu_moe_host_params *p = &h->p;
    if (n > p->n_batch)
        return err_set(err, "cpu_moe_host: %u tokens, more than the batch of %u", n, p->n_batch);
    if (!shape_is(&L->gate_exps, p->n_embd, p->n_ff, p->n_expert) ||
        !shape_is(&L->up_exps, p->n_embd, p->n_ff, p->n_expert) ||
        !shape_is(&L->down_exps, p->n_ff, p->n_embd, p->n_expert))
        return err_set(err, "cpu_moe_host: the layer's experts are not %u x (%u -> %u -> %u)", p->n_expert, p->n_embd,
                       p->n_ff, p->n_embd);
    if (n == 0)
        return 0;
    h->n = n;
    uint32_t bad = 0;
    if (!group_pairs(h, ids, &bad))
        return err_set(err, "cpu_moe_host: token %u slot %u names expert %d of %u", bad / p->n_used, bad % p->n_used,
                       ids[bad], p->n_expert);
    /* the layer's Q4_0 / Q5_0 / Q8_0 / IQ4_NL / MXFP4 experts packed at their first use: the first
     * prompt, which reads them from the file anyway, copies them once
     * (tens of ms a layer on 16 threads); a tensor whose copy would not
     * fit in memory, or whose allocation fails, keeps the plain rows (a
     * chat in progress goes on, a little slower) */
    const mtensor *exps[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
    for (int i = 0; i < 3; i++)
        if (!h->no_pack && cpu_pack_wanted(h->k, exps[i]) && !cpu_packs_find(h->packs, exps[i]) &&
            cpu_pack_fits(cpu_pack_bytes(exps[i]))) {
            err_t ignored;
            (void)cpu_packs_add(h->packs, h->pool, h->k, exps[i], &ignored);
        }
    h->L = L;
    h->x = x;
    h->w = w;
    h->y = y;
    h->x_kinds = 1u << cpu_kernels_act(h->k, L->gate_exps.type) | 1u << cpu_kernels_act(h->k, L->up_exps.type);
    h->h_kind = cpu_kernels_act(h->k, L->down_exps.type);
    h->prep_rows = cpu_act_block(h->h_kind) > 128 ? 256 : 128;
    h->item_rows = p->gate_rows ? p->gate_rows : gate_rows(p->n_ff, h->n_units, (uint32_t)h->n_threads);
    cpu_pool_run(h->pool, run, h);
    return 0;
}
