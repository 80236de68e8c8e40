/* vk_k_matvec.c: the decode matrix-vector builders (vk_kernels.h): mv,
 * gate/up + SiLU, the MoE down, the router -- each on the x-stationary
 * kernel where its geometry applies (vk_k_common.h), else on the mv one.
 * Their interfaces: shaders/pc_matvec.h. */
#include "vk_k_common.h"

/* A kernel that cannot signal or wait was asked to. */
static int no_deps(const vk_kb *k, const char *name, const vk_dep *d, const char *which)
{
    if (d->signal || d->wait || d->ll_in || d->ll_out)
        return err_set(k->err, "%s: this kernel cannot signal, wait or take tagged words (%s)", name, which);
    return 0;
}

/* ---- y[z] (=|+=) W[m(z)] . x[z] -------------------------------------------------------- */

/* The operands mv and mv_xs share: weights, bindings, push constants, the
 * grid's z and the bytes they read. */
static int mv_bind(const vk_kb *k, const vk_mv_args *a, uint32_t passes, const vkk_dep_words *dw, vk_call *out)
{
    const vk_tensor *w = a->w;
    if (a->last_row && !a->params.buf)
        return err_set(k->err, "%s: batch-dependent matvec without the params buffer", a->name);
    out->w[0] = w->buf;
    out->b[MATVEC_B_X] = a->x.b;
    out->b[MV_B_Y] = a->y.b;
    if (a->norm)
        out->b[MATVEC_B_NORM] = a->norm->b;
    if (a->ids)
        out->b[MV_B_IDS] = a->ids->b;
    if (a->params.buf) /* else a wait's (vkk_dep_bind) or none */
        out->b[MV_B_PARAMS] = a->params;
    pc_mv pc = {.K = w->K, .Kp = w->Kp, .N = w->N, .hbase = (uint32_t)w->head_off, .mat_blocks = w->bpr * w->N,
                .x_off = a->x.off, .x_z = a->x_z, .y_off = a->y.off, .y_z = a->y_z,
                .nw_off = a->norm ? a->norm->off : 0, .eps = a->eps, .ids_off = a->ids ? a->ids->off : 0,
                .last_row = a->last_row, .passes = passes};
    VKK_DEP_PUSH(pc, *dw);
    VKK_LL_PUSH(pc, *dw);
    VK_PUSH(out, pc);
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    uint64_t per_mat = w->src_bytes / (w->n_mat ? w->n_mat : 1);
    out->bytes = (per_mat + 4ull * (w->K + w->N)) * out->groups[1];
    return 0;
}

/* The x-stationary geometry of a matvec over nz matrices (false: mv). */
static bool mv_x_config(const vk_kb *k, const vk_tensor *w, uint32_t nz, vkk_xs_cfg *x)
{
    return vkk_xs_config(k, w->type, w->Kp, w->N, nz, 1, VKK_XS_WGS, x);
}

bool vk_mv_deps(const vk_kb *k, const vk_mv_args *a)
{
    vkk_xs_cfg x;
    return mv_x_config(k, a->w, a->nz ? a->nz : 1, &x);
}


/* mv_xs's build: tagged words (LL) and integer dot products each its own
 * -D, so that a tagged call and the same call untagged (a verify column's)
 * do the same arithmetic, bit for bit. */
static enum spv_id mv_xs_module(bool tagged, bool idot)
{
    return tagged ? (idot ? SPV_MV_XS_LL_ID : SPV_MV_XS_LL) : idot ? SPV_MV_XS_ID : SPV_MV_XS;
}

int vk_k_mv(const vk_kb *k, const vk_mv_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    uint32_t spec[VKC_MAX_SPEC] = {0}, nz = a->nz ? a->nz : 1;
    vkk_dep_words dw = {0};
    vkk_xs_cfg x;
    memset(out, 0, sizeof *out);
    out->name = a->name;
    if (mv_x_config(k, w, nz, &x)) {
        vkk_xs_spec(k, &x, w->type, spec);
        spec[MV_XS_S_NORM] = a->norm ? 1 : 0;
        spec[MV_XS_S_OMODE] = a->accumulate ? 1 : 0;
        spec[MV_XS_S_IDMODE] = a->ids ? 1 : 0;
        if (a->dep.ll_out && a->accumulate)
            return err_set(k->err, "%s: an accumulated output cannot be tagged words", a->name);
        if (vkk_dep_bind(k, a->name, &a->dep, true, spec, MV_B_PARAMS, out, &dw) || mv_bind(k, a, x.passes, &dw, out) ||
            !(out->pipe = pipe(k, mv_xs_module(a->dep.ll_in || a->dep.ll_out, vk_k_idot(k, w->type)), spec,
                               XS_S_COUNT)))
            return -1;
        out->groups[0] = x.groups;
        return 0;
    }
    if (no_deps(k, a->name, &a->dep, "vk_mv_deps"))
        return -1;
    vkk_mv_cfg m = vkk_mv_config(k->c, w, a->nz);
    vkk_mv_spec(k, &m, w->type, spec);
    spec[MV_S_NORM] = a->norm ? 1 : 0;
    spec[MV_S_OMODE] = a->accumulate ? 1 : 0;
    spec[MV_S_KSH] = 4;
    spec[MV_S_IDMODE] = a->ids ? 1 : 0;
    spec[MV_S_UPT] = m.upt;
    if (!(out->pipe = pipe(k, SPV_MV, spec, MV_S_COUNT)) || mv_bind(k, a, 0, &dw, out))
        return -1;
    out->groups[0] = ceil_div(w->N, rows_per_wg(&m));
    return 0;
}

/* ---- h[z] = silu(G[m(z)] . n) * (U[m(z)] . n) ------------------------------------------ */

/* The x-stationary gate/up geometry: gate and up of one type and width, so
 * they share one staged input. */
static bool glu_x_config(const vk_kb *k, const vk_glu_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *g = a->gate, *u = a->up;
    if (u->type != g->type)
        return false;
    uint32_t rows = g->N;
    if (!vkk_xs_config(k, g->type, g->Kp, rows, a->nz ? a->nz : 1, 2, VKK_XS_WGS, x))
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

int vk_k_glu(const vk_kb *k, const vk_glu_args *a, vk_call *out)
{
    const vk_tensor *g = a->gate, *u = a->up;
    if (g->K != u->K || g->N != u->N || g->Kp != u->Kp)
        return err_set(k->err, "%s: gate and up shapes differ", a->name);
    uint32_t spec[VKC_MAX_SPEC] = {0}, nz = a->nz ? a->nz : 1, groups;
    vkk_dep_words dw = {0};
    vkk_xs_cfg x;
    memset(out, 0, sizeof *out);
    out->name = a->name;
    bool xs = glu_x_config(k, a, &x);
    if (xs) {
        vkk_xs_spec(k, &x, g->type, spec);
        spec[GLU_XS_S_NORM] = a->norm ? 1 : 0;
        spec[GLU_XS_S_IDMODE] = a->ids ? 1 : 0;
        if (vkk_dep_bind(k, a->name, &a->dep, false, spec, GLU_B_PARAMS, out, &dw) ||
            !(out->pipe = pipe(k, vk_k_idot(k, g->type) ? SPV_MV_GLU_XS_ID : SPV_MV_GLU_XS, spec, XS_S_COUNT)))
            return -1;
        groups = x.groups;
    } else {
        if (no_deps(k, a->name, &a->dep, "vk_glu_deps"))
            return -1;
        vkk_mv_cfg m = vkk_mv_config(k->c, g, a->nz);
        vkk_mv_spec(k, &m, g->type, spec);
        spec[GLU_S_NORM] = a->norm ? 1 : 0;
        spec[GLU_S_TYPE2] = u->type;
        spec[GLU_S_KSH] = 4;
        spec[GLU_S_IDMODE] = a->ids ? 1 : 0;
        spec[GLU_S_UPT] = m.upt;
        if (!(out->pipe = pipe(k, SPV_MV_GLU, spec, GLU_S_COUNT)))
            return -1;
        groups = ceil_div(g->N, rows_per_wg(&m));
    }
    out->w[0] = g->buf;
    out->w[1] = u->buf;
    out->b[MATVEC_B_X] = a->x.b;
    out->b[GLU_B_H] = a->h.b;
    if (a->norm)
        out->b[MATVEC_B_NORM] = a->norm->b;
    if (a->ids)
        out->b[GLU_B_IDS] = a->ids->b;
    pc_glu pc = {.K = g->K, .Kp = g->Kp, .N = g->N, .hbase_g = (uint32_t)g->head_off,
                 .hbase_u = (uint32_t)u->head_off, .mblk_g = g->bpr * g->N, .mblk_u = u->bpr * u->N,
                 .x_off = a->x.off, .h_off = a->h.off, .h_z = a->h_z, .nw_off = a->norm ? a->norm->off : 0,
                 .eps = a->eps, .ids_off = a->ids ? a->ids->off : 0, .nz = nz, .passes = xs ? x.passes : 0};
    VKK_DEP_PUSH(pc, dw);
    VK_PUSH(out, pc);
    out->groups[0] = groups;
    out->groups[1] = nz;
    out->groups[2] = 1;
    out->bytes = (g->src_bytes / g->n_mat + u->src_bytes / u->n_mat) * nz;
    return 0;
}

/* ---- y += sum_z wt[z] * (D[ids[z]] . h[z]) + (S . h_s) ---------------------------------- */

/* The x-stationary down stages one input [wt*h[0] | ... | h_s]: VKK_XS_WGS
 * threads, 512 since gpu/PERF.md run 8 (256 and 1024 slower, run 17). */
static bool moe_down_x_config(const vk_kb *k, const vk_moe_down_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *d = a->down, *s = a->shared;
    return (!s || s->type == d->type) &&
           vkk_xs_config(k, d->type, a->nz * d->Kp + (s ? s->Kp : 0), d->N, 1, 1, VKK_XS_WGS, x);
}

bool vk_moe_down_deps(const vk_kb *k, const vk_moe_down_args *a)
{
    vkk_xs_cfg x;
    return (!a->shared || a->shared->N == a->down->N) && !(a->shared && a->shared_out) && a->nz > 0 &&
           moe_down_x_config(k, a, &x);
}

int vk_k_moe_down(const vk_kb *k, const vk_moe_down_args *a, vk_call *out)
{
    const vk_tensor *d = a->down, *s = a->shared;
    if (s && s->N != d->N)
        return err_set(k->err, "%s: shared and routed down projections differ in rows", a->name);
    if (a->nz == 0)
        return err_set(k->err, "%s: no experts", a->name);
    if (s && a->shared_out)
        return err_set(k->err, "%s: the shared expert twice (its matrix and its product)", a->name);
    uint32_t spec[VKC_MAX_SPEC] = {0};
    vkk_dep_words dw = {0};
    vkk_xs_cfg x;
    memset(out, 0, sizeof *out);
    out->name = a->name;
    bool xs = moe_down_x_config(k, a, &x);
    if (xs) {
        vkk_xs_spec(k, &x, d->type, spec);
        spec[DOWN_XS_S_HAS_SHARED] = s ? 1 : a->shared_out ? 2 : 0;
        if (a->shared_out)
            out->b[DOWN_B_YSH] = a->shared_out->b;
        if (a->ids_wait && (!a->dep.wait || a->ids_wait->b.buf != a->dep.wait->b.buf || !a->ids_wait_n))
            return err_set(k->err, "%s: the ids' wait needs the main wait on the same counters", a->name);
        if (vkk_dep_bind(k, a->name, &a->dep, false, spec, DOWN_B_PARAMS, out, &dw) ||
            !(out->pipe = pipe(k, vk_k_idot(k, d->type) ? SPV_MV_MOE_DOWN_XS_ID : SPV_MV_MOE_DOWN_XS, spec,
                               XS_S_COUNT)))
            return -1;
        out->groups[0] = x.groups;
    } else {
        if (no_deps(k, a->name, &a->dep, "vk_moe_down_deps"))
            return -1;
        if (a->shared_out)
            return err_set(k->err, "%s: a precomputed shared product needs the x-stationary kernel (vk_moe_down_deps)",
                           a->name);
        vkk_mv_cfg m = vkk_mv_config(k->c, d, a->nz + 1);
        uint32_t nslot = a->nz + (s ? 1 : 0);
        /* a team per (row group, slot): the workgroup is a whole number of
         * subgroups holding at least one row group of nslot teams */
        m.wgs = ceil_div(m.team * nslot, k->c->subgroup) * k->c->subgroup;
        if (m.wgs > 1024)
            return err_set(k->err, "%s: %u experts per token do not fit one workgroup", a->name, nslot);
        vkk_mv_spec(k, &m, d->type, spec);
        spec[DOWN_S_HAS_SHARED] = s ? 1 : 0;
        spec[DOWN_S_TYPE2] = s ? s->type : d->type;
        spec[DOWN_S_KSH] = 4;
        spec[DOWN_S_UPT] = m.upt;
        spec[DOWN_S_NSLOT] = nslot;
        if (!(out->pipe = pipe(k, SPV_MV_MOE_DOWN, spec, DOWN_S_COUNT)))
            return -1;
        out->groups[0] = ceil_div(d->N, m.wgs / m.team / nslot * m.nr);
    }
    out->w[0] = d->buf;
    if (s)
        out->w[1] = s->buf;
    out->b[MATVEC_B_X] = a->h.b;
    out->b[DOWN_B_Y] = a->y.b;
    out->b[DOWN_B_IDS] = a->ids.b;
    out->b[DOWN_B_WTS] = a->wts.b;
    pc_moe_down pc = {.K = d->K, .Kp = d->Kp, .N = d->N, .hbase = (uint32_t)d->head_off, .mblk = d->bpr * d->N,
                      .K2 = s ? s->K : 0, .Kp2 = s ? s->Kp : 0, .hbase2 = s ? (uint32_t)s->head_off : 0,
                      .h_off = a->h.off, .h_z = a->h_z, .nz = a->nz, .ids_off = a->ids.off, .wts_off = a->wts.off,
                      .y_off = a->y.off, .passes = xs ? x.passes : 0,
                      .ids_wait = a->ids_wait ? a->ids_wait->off : 0, .ids_n = a->ids_wait ? a->ids_wait_n : 0,
                      .ysh_off = a->shared_out ? a->shared_out->off : 0};
    VKK_DEP_PUSH(pc, dw);
    VK_PUSH(out, pc);
    out->groups[1] = out->groups[2] = 1;
    out->bytes = d->src_bytes / d->n_mat * a->nz + (s ? s->src_bytes : 0) + (a->shared_out ? 4ull * d->N : 0);
    return 0;
}

/* ---- router ------------------------------------------------------------------------------ */

/* Decode: 256 threads, half the workgroups of 128 (8 for GLM's 64
 * experts), each staging its input in half the rounds; a prompt batch
 * keeps 128, its router faster so (gpu/PERF.md run 18). */
static bool router_x_config(const vk_kb *k, const vk_router_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *w = a->w;
    uint32_t nz = a->nz ? a->nz : 1;
    /* a prompt batch's tokens: 128 threads each */
    return vkk_xs_config(k, w->type, w->Kp, w->N, nz, 1, nz == 1 ? VKK_XS_WGS : 128, x);
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
    if (a->ids.off != a->wts.off)
        return err_set(k->err, "router: ids and weights must share their offset");
    if (a->counter.off != 0)
        return err_set(k->err, "router: the counter must start its buffer");
    uint32_t spec[VKC_MAX_SPEC] = {0}, epl = ceil_div(w->N, k->c->subgroup);
    vkk_dep_words dw = {0};
    vkk_xs_cfg x;
    memset(out, 0, sizeof *out);
    out->name = "router";
    bool xs = router_x_config(k, a, &x);
    if (xs) {
        vkk_xs_spec(k, &x, w->type, spec);
        spec[ROUTER_S_EPL] = epl;
        if (vkk_dep_bind(k, "router", &a->dep, false, spec, ROUTER_B_PARAMS, out, &dw) ||
            !(out->pipe = pipe(k, SPV_ROUTER_XS, spec, XS_S_COUNT)))
            return -1;
        out->groups[0] = x.groups;
    } else {
        if (no_deps(k, "router", &a->dep, "vk_router_deps"))
            return -1;
        vkk_mv_cfg m = vkk_mv_config(k->c, w, 1);
        vkk_mv_spec(k, &m, w->type, spec);
        spec[ROUTER_S_KSH] = 4;
        spec[ROUTER_S_UPT] = m.upt;
        spec[ROUTER_S_EPL] = epl;
        if (!(out->pipe = pipe(k, SPV_ROUTER, spec, ROUTER_S_COUNT)))
            return -1;
        out->groups[0] = ceil_div(w->N, rows_per_wg(&m));
    }
    out->w[0] = w->buf;
    out->b[MATVEC_B_X] = a->x.b;
    out->b[ROUTER_B_LOGITS] = a->logits.b;
    out->b[MATVEC_B_NORM] = a->norm.b;
    out->b[ROUTER_B_IDS] = a->ids.b;
    out->b[ROUTER_B_WTS] = a->wts.b;
    if (a->bias)
        out->b[ROUTER_B_BIAS] = a->bias->b;
    out->b[ROUTER_B_COUNT] = a->counter.b;
    if (a->params.buf)
        out->b[ROUTER_B_PARAMS] = a->params;
    pc_router pc = {.K = w->K, .Kp = w->Kp, .N = w->N, .hbase = (uint32_t)w->head_off, .x_off = a->x.off,
                    .x_z = a->x_z, .nw_off = a->norm.off, .eps = a->eps, .n_used = a->n_used, .gating = a->gating,
                    .has_bias = a->bias ? 1 : 0, .norm_w = a->norm_w ? 1 : 0, .scale = a->scale,
                    .out_off = a->ids.off, .l_off = a->logits.off, .bias_off = a->bias ? a->bias->off : 0,
                    .check_batch = a->params.buf ? 1 : 0, .passes = xs ? x.passes : 0};
    VKK_DEP_PUSH(pc, dw);
    VK_PUSH(out, pc);
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    out->bytes = w->src_bytes * out->groups[1];
    return 0;
}
