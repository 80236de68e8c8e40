/* vk_k_matvec.c: the decode matrix-vector builders (vk_kernels.h): mv,
 * gate/up + SiLU, the MoE down, the router -- each on the x-stationary
 * kernel where its geometry applies (vk_k_common.h), else on the mv one. */
#include "vk_k_common.h"

static void mv_push(const vk_mv_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    uint32_t *p = out->push;
    p[0] = w->K;
    p[1] = w->Kp;
    p[2] = w->N;
    p[3] = (uint32_t)w->head_off;
    p[4] = w->bpr * w->N;
    p[5] = a->x.off;
    p[6] = a->x_z;
    p[7] = a->y.off;
    p[8] = a->y_z;
    p[9] = a->norm ? a->norm->off : 0;
    p[10] = f2u(a->eps);
    p[11] = a->ids ? a->ids->off : 0;
    p[12] = a->last_row;
    out->npush = 13;
}

static int mv_bind(const vk_kb *k, const vk_mv_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    out->w[0] = w->buf;
    out->b[0] = a->x.b;
    out->b[1] = a->y.b;
    if (a->norm)
        out->b[2] = a->norm->b;
    if (a->ids)
        out->b[3] = a->ids->b;
    out->b[4] = a->params;
    if (a->last_row && !a->params.buf)
        return err_set(k->err, "%s: batch-dependent matvec without the params buffer", a->name);
    mv_push(a, out);
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    uint64_t per_mat = w->src_bytes / (w->n_mat ? w->n_mat : 1);
    out->bytes = (per_mat + 4ull * (w->K + w->N)) * out->groups[1];
    return 0;
}

/* The x-stationary geometry of a matvec over nz matrices (false: mv):
 * 512 threads for a single small matrix (<= 8192 rows in all), 256 beyond
 * (gpu/PERF.md runs 6-7, re-swept in run 18). */
static bool mv_x_config(const vk_kb *k, const vk_tensor *w, uint32_t nz, vkk_xs_cfg *x)
{
    uint32_t wgs = (uint64_t)w->N * nz <= 8192 ? 512 : 256;
    return vkk_xs_config(k, w->type, w->Kp, w->N, nz, 1, wgs, x);
}

bool vk_mv_deps(const vk_kb *k, const vk_mv_args *a)
{
    vkk_xs_cfg x;
    return mv_x_config(k, a->w, a->nz ? a->nz : 1, &x);
}

int vk_k_mv(const vk_kb *k, const vk_mv_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    vkk_xs_cfg x;
    memset(out, 0, sizeof *out);
    out->name = a->name;
    uint32_t nz = a->nz ? a->nz : 1;
    if (mv_x_config(k, w, nz, &x)) {
        uint32_t spec[14] = {0};
        vkk_xs_spec(k, &x, w->type, spec);
        spec[6] = a->norm ? 1 : 0;
        spec[7] = a->accumulate ? 1 : 0;
        spec[9] = a->ids ? 1 : 0;
        if (mv_bind(k, a, out) || vkk_dep_bind(k, a->name, &a->dep, spec, 14, 5, out))
            return -1;
        out->pipe = pipe(k, SPV_MVX, spec, 14);
        if (!out->pipe)
            return -1;
        out->push[13] = x.passes;
        out->npush = 17;
        out->groups[0] = x.groups;
        return 0;
    }
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "%s: this kernel cannot signal or wait (vk_mv_deps)", a->name);
    vkk_mv_cfg m = vkk_mv_config(k->c, w, a->nz);
    uint32_t spec[] = {m.wgs, w->type, m.team, m.nr, k->c->subgroup, a->norm ? 1 : 0, a->accumulate ? 1 : 0, 4,
                       a->ids ? 1 : 0, m.upt};
    out->pipe = pipe(k, SPV_MV, spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe || mv_bind(k, a, out))
        return -1;
    out->groups[0] = ceil_div(w->N, rows_per_wg(&m));
    return 0;
}

/* The x-stationary gate/up geometry: gate and up of one type and width, so
 * they share one staged input. */
static bool glu_x_config(const vk_kb *k, const vk_glu_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *g = a->gate, *u = a->up;
    if (u->type != g->type)
        return false;
    uint32_t rows = g->N;
    if (!vkk_xs_config(k, g->type, g->Kp, rows, a->nz ? a->nz : 1, 2, 256, x))
        return false;
    /* Passes per workgroup of the gate/up alone: the routed experts' at
     * least two -- fewer, longer workgroups (three or four were slower); the
     * shared expert's (one matrix) the generic rule (gpu/PERF.md run 17) */
    uint32_t p = x->passes < 2 && a->nz > 1 ? 2 : 0;
    if (p && (x->wgs / x->team) * x->r * p <= rows) {
        x->passes = p;
        x->groups = ceil_div(rows, (x->wgs / x->team) * x->r * p);
    }
    return true;
}

bool vk_glu_deps(const vk_kb *k, const vk_glu_args *a)
{
    vkk_xs_cfg x;
    return a->gate->K == a->up->K && a->gate->N == a->up->N && glu_x_config(k, a, &x);
}

static int glu_x(const vk_kb *k, const vk_glu_args *a, const vkk_xs_cfg *x, vk_call *out)
{
    const vk_tensor *g = a->gate, *u = a->up;
    uint32_t spec[14] = {0};
    vkk_xs_spec(k, x, g->type, spec);
    spec[6] = a->norm ? 1 : 0;
    spec[9] = a->ids ? 1 : 0;
    if (vkk_dep_bind(k, a->name, &a->dep, spec, 15, 7, out))
        return -1;
    out->pipe = pipe(k, SPV_MVX_GLU, spec, 14);
    if (!out->pipe)
        return -1;
    out->w[0] = g->buf;
    out->w[1] = u->buf;
    out->b[0] = a->x.b;
    out->b[1] = a->h.b;
    if (a->norm)
        out->b[2] = a->norm->b;
    if (a->ids)
        out->b[3] = a->ids->b;
    uint32_t nz = a->nz ? a->nz : 1, *p = out->push;
    p[0] = g->K;
    p[1] = g->Kp;
    p[2] = g->N;
    p[3] = (uint32_t)g->head_off;
    p[4] = (uint32_t)u->head_off;
    p[5] = g->bpr * g->N;
    p[6] = u->bpr * u->N;
    p[7] = a->x.off;
    p[8] = a->h.off;
    p[9] = a->h_z;
    p[10] = a->norm ? a->norm->off : 0;
    p[11] = f2u(a->eps);
    p[12] = a->ids ? a->ids->off : 0;
    p[13] = nz;
    p[14] = x->passes;
    out->npush = 18;
    out->groups[0] = x->groups;
    out->groups[1] = nz;
    out->groups[2] = 1;
    out->bytes = (g->src_bytes / g->n_mat + u->src_bytes / u->n_mat) * nz;
    return 0;
}

int vk_k_glu(const vk_kb *k, const vk_glu_args *a, vk_call *out)
{
    const vk_tensor *g = a->gate, *u = a->up;
    if (g->K != u->K || g->N != u->N || g->Kp != u->Kp)
        return err_set(k->err, "%s: gate and up shapes differ", a->name);
    memset(out, 0, sizeof *out);
    out->name = a->name;
    vkk_xs_cfg x;
    if (glu_x_config(k, a, &x))
        return glu_x(k, a, &x, out);
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "%s: this kernel cannot signal or wait (vk_glu_deps)", a->name);
    vkk_mv_cfg m = vkk_mv_config(k->c, g, a->nz);
    uint32_t spec[] = {m.wgs, g->type, m.team, m.nr, k->c->subgroup, a->norm ? 1 : 0, u->type, 4, a->ids ? 1 : 0,
                       m.upt};
    out->pipe = pipe(k, SPV_MV_GLU, spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    out->w[0] = g->buf;
    out->w[1] = u->buf;
    out->b[0] = a->x.b;
    out->b[1] = a->h.b;
    if (a->norm)
        out->b[2] = a->norm->b;
    if (a->ids)
        out->b[3] = a->ids->b;
    uint32_t *p = out->push;
    p[0] = g->K;
    p[1] = g->Kp;
    p[2] = g->N;
    p[3] = (uint32_t)g->head_off;
    p[4] = (uint32_t)u->head_off;
    p[5] = g->bpr * g->N;
    p[6] = u->bpr * u->N;
    p[7] = a->x.off;
    p[8] = 0; /* every z reads the same input */
    p[9] = a->h.off;
    p[10] = a->h_z;
    p[11] = a->norm ? a->norm->off : 0;
    p[12] = f2u(a->eps);
    p[13] = a->ids ? a->ids->off : 0;
    out->npush = 14;
    out->groups[0] = ceil_div(g->N, rows_per_wg(&m));
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    out->bytes = (g->src_bytes / g->n_mat + u->src_bytes / u->n_mat) * out->groups[1];
    return 0;
}

/* The operands both MoE-down kernels share: weights, bindings, push words
 * 0..13, and the bytes they read. */
static void moe_down_bind(const vk_moe_down_args *a, vk_call *out)
{
    const vk_tensor *d = a->down, *s = a->shared;
    out->w[0] = d->buf;
    if (s)
        out->w[1] = s->buf;
    out->b[0] = a->h.b;
    out->b[1] = a->y.b;
    out->b[3] = a->ids.b;
    out->b[4] = a->wts.b;
    uint32_t *p = out->push;
    p[0] = d->K;
    p[1] = d->Kp;
    p[2] = d->N;
    p[3] = (uint32_t)d->head_off;
    p[4] = d->bpr * d->N;
    p[5] = s ? s->K : 0;
    p[6] = s ? s->Kp : 0;
    p[7] = s ? (uint32_t)s->head_off : 0;
    p[8] = a->h.off;
    p[9] = a->h_z;
    p[10] = a->nz;
    p[11] = a->ids.off;
    p[12] = a->wts.off;
    p[13] = a->y.off;
    out->bytes = d->src_bytes / d->n_mat * a->nz + (s ? s->src_bytes : 0);
}

/* The x-stationary down: one staged input [wt*h[0] | ... | h_s]. */
static int moe_down_x(const vk_kb *k, const vk_moe_down_args *a, const vkk_xs_cfg *x, vk_call *out)
{
    const vk_tensor *d = a->down, *s = a->shared;
    uint32_t spec[14] = {0};
    vkk_xs_spec(k, x, d->type, spec);
    spec[6] = s ? 1 : 0;
    moe_down_bind(a, out);
    if (vkk_dep_bind(k, a->name, &a->dep, spec, 15, 7, out))
        return -1;
    out->pipe = pipe(k, SPV_MVX_DOWN, spec, 14);
    if (!out->pipe)
        return -1;
    out->push[14] = x->passes;
    if (a->ids_wait && (!a->dep.wait || a->ids_wait->b.buf != a->dep.wait->b.buf || !a->ids_wait_n))
        return err_set(k->err, "%s: the ids' wait needs the main wait on the same counters", a->name);
    out->push[18] = a->ids_wait ? a->ids_wait->off : 0;
    out->push[19] = a->ids_wait ? a->ids_wait_n : 0;
    out->npush = 20;
    out->groups[0] = x->groups;
    out->groups[1] = out->groups[2] = 1;
    return 0;
}

/* 512-thread workgroups (gpu/PERF.md run 8; 256 and 1024 slower, run 17) */
static bool moe_down_x_config(const vk_kb *k, const vk_moe_down_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *d = a->down, *s = a->shared;
    return (!s || s->type == d->type) && vkk_xs_config(k, d->type, a->nz * d->Kp + (s ? s->Kp : 0), d->N, 1, 1, 512, x);
}

bool vk_moe_down_deps(const vk_kb *k, const vk_moe_down_args *a)
{
    vkk_xs_cfg x;
    return (!a->shared || a->shared->N == a->down->N) && a->nz > 0 && moe_down_x_config(k, a, &x);
}

int vk_k_moe_down(const vk_kb *k, const vk_moe_down_args *a, vk_call *out)
{
    const vk_tensor *d = a->down, *s = a->shared;
    if (s && s->N != d->N)
        return err_set(k->err, "%s: shared and routed down projections differ in rows", a->name);
    if (a->nz == 0)
        return err_set(k->err, "%s: no experts", a->name);
    memset(out, 0, sizeof *out);
    out->name = a->name;
    vkk_xs_cfg x;
    if (moe_down_x_config(k, a, &x))
        return moe_down_x(k, a, &x, out);
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "%s: this kernel cannot signal or wait (vk_moe_down_deps)", a->name);
    vkk_mv_cfg m = vkk_mv_config(k->c, d, a->nz + 1);
    uint32_t nslot = a->nz + (s ? 1 : 0);
    /* a team per (row group, slot): the workgroup is a whole number of
     * subgroups holding at least one row group of nslot teams */
    uint32_t need = m.team * nslot;
    m.wgs = ceil_div(need, k->c->subgroup) * k->c->subgroup;
    if (m.wgs > 1024)
        return err_set(k->err, "%s: %u experts per token do not fit one workgroup", a->name, nslot);
    uint32_t rg = m.wgs / m.team / nslot;
    uint32_t spec[] = {m.wgs, d->type, m.team, m.nr, k->c->subgroup, s ? 1 : 0, s ? s->type : d->type, 4, m.upt,
                       nslot};
    out->pipe = pipe(k, SPV_MV_MOE_DOWN, spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    moe_down_bind(a, out);
    out->npush = 14;
    out->groups[0] = ceil_div(d->N, rg * m.nr);
    out->groups[1] = out->groups[2] = 1;
    return 0;
}


/* ---- router -------------------------------------------------------------------------- */


/* Decode: 256 threads, half the workgroups of 128 (8 for GLM's 64
 * experts), each staging its input in half the rounds.  H200 with the
 * counter graph, tg128 alternated eight times over two calls: 254.3 tokens/s
 * (depth 4096: 217.0) with 128 against 257.4 (220.2) with 256; 512 gave
 * 251.2-258.2.  A prompt batch keeps 128 (its router took 2.2 ms of a 512-token
 * batch with 128, 3.3 with 256; gpu/PERF.md run 18).  GLMCHAT_ROUTER_WGS
 * overrides both. */
static bool router_x_config(const vk_kb *k, const vk_router_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *w = a->w;
    uint32_t nz = a->nz ? a->nz : 1;
    return vkk_xs_config(k, w->type, w->Kp, w->N, nz, 1, nz == 1 ? 256 : 128, x);
}

bool vk_router_deps(const vk_kb *k, const vk_router_args *a)
{
    vkk_xs_cfg x;
    return a->w->N <= 512 && a->n_used <= 32 && router_x_config(k, a, &x);
}

int vk_k_router(const vk_kb *k, const vk_router_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    if (w->N > 512 || a->n_used > 32 || a->n_used > w->N)
        return err_set(k->err, "router: %u experts, %u used: the router kernel handles up to 512 and 32", w->N,
                       a->n_used);
    memset(out, 0, sizeof *out);
    out->name = "router";
    uint32_t epl = ceil_div(w->N, k->c->subgroup);
    vkk_xs_cfg x;
    vkk_mv_cfg m = vkk_mv_config(k->c, w, 1);
    bool xs = router_x_config(k, a, &x);
    if (xs) {
        uint32_t spec[14] = {0};
        vkk_xs_spec(k, &x, w->type, spec);
        spec[7] = epl;
        if (vkk_dep_bind(k, "router", &a->dep, spec, 18, 8, out))
            return -1;
        out->pipe = pipe(k, SPV_ROUTERX, spec, 14);
    } else if (a->dep.signal || a->dep.wait) {
        return err_set(k->err, "router: this kernel cannot signal or wait (vk_router_deps)");
    } else {
        uint32_t spec[] = {m.wgs, w->type, m.team, m.nr, k->c->subgroup, 4, m.upt, epl};
        out->pipe = pipe(k, SPV_ROUTER, spec, sizeof spec / sizeof spec[0]);
    }
    if (!out->pipe)
        return -1;
    out->w[0] = w->buf;
    out->b[0] = a->x.b;
    out->b[1] = a->logits.b;
    out->b[2] = a->norm.b;
    out->b[3] = a->ids.b;
    out->b[4] = a->wts.b;
    if (a->bias)
        out->b[5] = a->bias->b;
    out->b[6] = a->counter.b;
    if (a->params.buf)
        out->b[7] = a->params;
    uint32_t *p = out->push;
    p[0] = w->K;
    p[1] = w->Kp;
    p[2] = w->N;
    p[3] = (uint32_t)w->head_off;
    p[4] = a->x.off;
    p[5] = a->x_z;
    p[6] = a->norm.off;
    p[7] = f2u(a->eps);
    p[8] = a->n_used;
    p[9] = a->gating;
    p[10] = a->bias ? 1 : 0;
    p[11] = a->norm_w ? 1 : 0;
    p[12] = f2u(a->scale);
    p[13] = a->ids.off;
    p[14] = a->logits.off;
    p[15] = a->bias ? a->bias->off : 0;
    p[16] = a->params.buf ? 1 : 0;
    p[17] = xs ? x.passes : 0;
    out->npush = xs ? 21 : 17;
    if (a->ids.off != a->wts.off)
        return err_set(k->err, "router: ids and weights must share their offset");
    if (a->counter.off != 0)
        return err_set(k->err, "router: the counter must start its buffer");
    out->groups[0] = xs ? x.groups : ceil_div(w->N, rows_per_wg(&m));
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    out->bytes = w->src_bytes * out->groups[1];
    return 0;
}
