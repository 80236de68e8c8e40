/* vk_kernels.c: the kernel builders (see vk_kernels.h). */
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "spv_table.h"
#include "vk_kernels.h"

#define WGS 128u


static uint32_t ceil_div(uint64_t a, uint64_t b)
{
    return (uint32_t)((a + b - 1) / b);
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Decode matvec geometry: threads per row (TEAM, a power of two no larger
 * than a subgroup, so teams reduce with shuffles), units each thread takes
 * per row (UPT, loads issued up front), rows per team (NR) and the
 * workgroup size.  A decode matvec is 0.5-15 MB: it needs many threads with
 * little state each (high occupancy keeps enough loads in flight) and many
 * small workgroups to spread over every compute unit: 2 units per thread,
 * 64-thread workgroups (gpu/PERF.md runs 2-5). */
typedef struct {
    uint32_t wgs, team, upt, nr;
} mv_cfg;

static uint32_t pow2_ceil(uint32_t v)
{
    uint32_t p = 1;
    while (p < v)
        p *= 2;
    return p;
}

static mv_cfg mv_config(const vk_ctx *c, const vk_tensor *w, uint32_t nz)
{
    vk_qlayout l;
    vk_qlayout_of(w->type, &l);
    uint32_t units = w->Kp / l.unit;
    uint32_t upt_target = 2;
    mv_cfg m;
    m.team = pow2_ceil(ceil_div(units, upt_target));
    if (m.team > c->subgroup)
        m.team = c->subgroup;
    m.upt = ceil_div(units, m.team);
    if (m.upt > 16)
        m.upt = 16; /* longer rows take several passes */
    /* Rows per team: each thread reuses its input values for NR rows; the
     * input work (loads, the norm's weights and squares) is what limits
     * these kernels (H200, vk_microbench: 14 MB Q4_0 gate/up 67 us with one
     * row per team, 24 us with four).  Small matrices keep one row for
     * enough workgroups; types without the loads-first path keep one. */
    uint64_t rows = (uint64_t)w->N * (nz ? nz : 1);
    bool fast = w->type == QT_Q4_0 || w->type == QT_F32;
    uint32_t nr_def = !fast ? 1 : rows >= 4096 ? 4 : rows >= 1024 ? 2 : 1;
    m.nr = nr_def;
    m.wgs = 64;
    m.wgs = (m.wgs + c->subgroup - 1) / c->subgroup * c->subgroup;
    return m;
}

static uint32_t rows_per_wg(const mv_cfg *m)
{
    return m->wgs / m->team * m->nr;
}


static VkPipeline pipe(const vk_kb *k, enum spv_id shader, const uint32_t *spec, uint32_t n)
{
    return vk_pipe_get(k->c, k->pipes, &spv_table[shader], spec, n, k->err);
}

/* ---- x-stationary decode matvecs (shaders/mvx_common.glsl) ----------------------------
 * The workgroup stages its input once in shared memory; each lane owns J
 * units (column runs) of every row and streams R rows of weights at a
 * time, `passes` times.  The geometry (H200 sweeps, gpu/PERF.md run 6):
 *   wgs   per kernel: 256 threads for gate/up and down, 512 for a single
 *         small matrix (<= 8192 rows in all: fewer workgroups, fewer
 *         stagings of the input -- attn_q_a 7.1 -> 4.9 us, attn_output
 *         10.4 -> 7.5 us), 256 for the router (router_x_config)
 *   team  threads per row: the power of two <= subgroup size that pads the
 *         row's units least (ties: the larger team)
 *   j     units per lane, at most tune->mvx_j (8)
 *   r     rows per pass, at most 4 (Q6_K: 2, its units are large): the
 *         loads of one pass (r * j * uvec4s per unit * matrices) stay within
 *         16 uvec4 registers; halved while the grid has fewer than 2
 *         workgroups per compute unit
 *   passes doubled (up to 16) while the grid keeps 8 workgroups per compute
 *         unit and a workgroup's rows stay within the matrix: fewer
 *         stagings of the input
 * (the register budget, waves and workgroups per compute unit re-swept with
 * no gain, gpu/PERF.md runs 6, 15, 17).  The input of all J*team units must
 * fit in the device's shared memory; wider inputs keep the mv kernels.
 * tune->mvx = 0 turns the path off; mvx_r, mvx_wgs, mvx_p and mvx_xreg
 * override the choices (the kernel tests use them to cover the geometries a
 * 32-wide GPU takes). */
typedef struct {
    uint32_t wgs, team, j, r, passes, xreg, xrn, ksh, groups;
} mvx_cfg;

static uint32_t mvx_unit(uint32_t t)
{
    return t == QT_F32 || t == QT_F16 ? 8 : t == QT_Q6_K ? 64 : t == QT_Q4_0 || t == QT_Q8_0 ? 32 : 0;
}

/* uvec4 registers one unit of a row takes */
static uint32_t mvx_qw(uint32_t t)
{
    return t == QT_Q4_0 || t == QT_F16 ? 1 : t == QT_Q6_K ? 3 : 2;
}

/* kp: elements of the (padded, concatenated) input; rows: per z; nz: z
 * count; sets: matrices per pass (gate + up: 2); wgs: the kernel's
 * workgroup size.  False: the kernel does not apply. */
static bool mvx_config(const vk_kb *k, uint32_t type, uint32_t kp, uint32_t rows, uint32_t nz, uint32_t sets,
                       uint32_t wgs, mvx_cfg *m)
{
    const vk_ctx *c = k->c;
    const vk_tuning *t = k->tune;
    uint32_t unit = mvx_unit(type);
    if (!unit || !t->mvx || kp == 0 || kp % unit || rows == 0)
        return false;
    uint32_t units = kp / unit;
    uint32_t jmax = t->mvx_j, best = 0;
    memset(m, 0, sizeof *m);
    uint32_t tmin = c->subgroup < 4 ? c->subgroup : 4;
    for (uint32_t team = c->subgroup; team >= tmin; team /= 2) {
        uint32_t j = ceil_div(units, team);
        if (j <= jmax && (!best || team * j < best)) {
            best = team * j;
            m->team = team;
            m->j = j;
        }
    }
    if (!best)
        return false;
    m->ksh = best * unit;
    if (4ull * m->ksh + 512 > c->shared_bytes)
        return false;
    m->xreg = m->j * unit <= t->mvx_xreg;
    m->xrn = m->xreg ? m->j * unit / 4 : 1;

    uint32_t sg = c->subgroup;
    wgs = t->mvx_wgs ? t->mvx_wgs : wgs;
    wgs = ceil_div(wgs, sg) * sg;
    if (wgs / sg > 64)
        wgs = 64 * sg;
    uint32_t nt = wgs / m->team;
    bool fixed_r = t->mvx_r != 0;
    uint32_t r = fixed_r ? t->mvx_r : type == QT_Q6_K ? 2 : 4;
    const uint32_t loads = 16, waves = 2, pwant = 8;
    while (!fixed_r && r > 1 && r * m->j * mvx_qw(type) * sets > loads)
        r /= 2;
    uint32_t want = waves * c->n_sm_hint;
    while (!fixed_r && r > 1 && ceil_div(rows, nt * r) * nz < want)
        r /= 2;
    uint32_t pmax = t->mvx_p ? t->mvx_p : 16;
    uint32_t passes = 1;
    if (t->mvx_p)
        passes = pmax;
    else
        while (passes * 2 <= pmax && nt * r * passes * 2 <= rows &&
               ceil_div(rows, nt * r * passes * 2) * nz >= pwant * c->n_sm_hint)
            passes *= 2;
    m->wgs = wgs;
    m->r = r;
    m->passes = passes;
    m->groups = ceil_div(rows, nt * r * passes);
    return true;
}

static void mvx_spec(const vk_kb *k, const mvx_cfg *m, uint32_t type, uint32_t *spec)
{
    spec[0] = m->wgs;
    spec[1] = type;
    spec[2] = m->team;
    spec[3] = m->j;
    spec[4] = m->r;
    spec[5] = k->c->subgroup;
    spec[8] = m->ksh;
    spec[10] = m->xreg;
    spec[11] = m->xrn;
}

/* A dependency's two ends (vk_dep): spec constants 12 (SIGNAL) and 13
 * (WAIT), three push words at `at` (signal word, wait word, producers'
 * workgroups), the counters at binding 9 and the params (for the epoch) at
 * the kernel's binding `pb`. */
static int dep_bind(const vk_kb *k, const char *name, const vk_dep *d, uint32_t *spec, uint32_t at, uint32_t pb,
                    vk_call *out)
{
    if (!d->signal && !d->wait)
        return 0;
    if (d->signal && d->wait && d->signal->b.buf != d->wait->b.buf)
        return err_set(k->err, "%s: signal and wait counters must share a buffer", name);
    if (d->wait && !d->params.buf)
        return err_set(k->err, "%s: a wait needs the params buffer", name);
    spec[12] = d->signal ? 1 : 0;
    spec[13] = d->wait ? 1 : 0;
    out->push[at] = d->signal ? d->signal->off : 0;
    out->push[at + 1] = d->wait ? d->wait->off : 0;
    out->push[at + 2] = d->wait_n;
    out->b[8] = d->signal ? d->signal->b : d->wait->b;
    if (d->wait)
        out->b[pb - 1] = d->params;
    return 0;
}

/* The push constants mv and mvx share (mvx adds the passes). */
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
static bool mv_x_config(const vk_kb *k, const vk_tensor *w, uint32_t nz, mvx_cfg *x)
{
    uint32_t wgs = (uint64_t)w->N * nz <= 8192 ? 512 : 256;
    return mvx_config(k, w->type, w->Kp, w->N, nz, 1, wgs, x);
}

bool vk_mv_deps(const vk_kb *k, const vk_mv_args *a)
{
    mvx_cfg x;
    return mv_x_config(k, a->w, a->nz ? a->nz : 1, &x);
}

int vk_k_mv(const vk_kb *k, const vk_mv_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    mvx_cfg x;
    memset(out, 0, sizeof *out);
    out->name = a->name;
    uint32_t nz = a->nz ? a->nz : 1;
    if (mv_x_config(k, w, nz, &x)) {
        uint32_t spec[14] = {0};
        mvx_spec(k, &x, w->type, spec);
        spec[6] = a->norm ? 1 : 0;
        spec[7] = a->accumulate ? 1 : 0;
        spec[9] = a->ids ? 1 : 0;
        if (mv_bind(k, a, out) || dep_bind(k, a->name, &a->dep, spec, 14, 5, out))
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
    mv_cfg m = mv_config(k->c, w, a->nz);
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
static bool glu_x_config(const vk_kb *k, const vk_glu_args *a, mvx_cfg *x)
{
    const vk_tensor *g = a->gate, *u = a->up;
    if (u->type != g->type)
        return false;
    uint32_t rows = g->N;
    if (!mvx_config(k, g->type, g->Kp, rows, a->nz ? a->nz : 1, 2, 256, x))
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
    mvx_cfg x;
    return a->gate->K == a->up->K && a->gate->N == a->up->N && glu_x_config(k, a, &x);
}

static int glu_x(const vk_kb *k, const vk_glu_args *a, const mvx_cfg *x, vk_call *out)
{
    const vk_tensor *g = a->gate, *u = a->up;
    uint32_t spec[14] = {0};
    mvx_spec(k, x, g->type, spec);
    spec[6] = a->norm ? 1 : 0;
    spec[9] = a->ids ? 1 : 0;
    if (dep_bind(k, a->name, &a->dep, spec, 15, 7, out))
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
    mvx_cfg x;
    if (glu_x_config(k, a, &x))
        return glu_x(k, a, &x, out);
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "%s: this kernel cannot signal or wait (vk_glu_deps)", a->name);
    mv_cfg m = mv_config(k->c, g, a->nz);
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
static int moe_down_x(const vk_kb *k, const vk_moe_down_args *a, const mvx_cfg *x, vk_call *out)
{
    const vk_tensor *d = a->down, *s = a->shared;
    uint32_t spec[14] = {0};
    mvx_spec(k, x, d->type, spec);
    spec[6] = s ? 1 : 0;
    moe_down_bind(a, out);
    if (dep_bind(k, a->name, &a->dep, spec, 15, 7, out))
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
static bool moe_down_x_config(const vk_kb *k, const vk_moe_down_args *a, mvx_cfg *x)
{
    const vk_tensor *d = a->down, *s = a->shared;
    return (!s || s->type == d->type) && mvx_config(k, d->type, a->nz * d->Kp + (s ? s->Kp : 0), d->N, 1, 1, 512, x);
}

bool vk_moe_down_deps(const vk_kb *k, const vk_moe_down_args *a)
{
    mvx_cfg x;
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
    mvx_cfg x;
    if (moe_down_x_config(k, a, &x))
        return moe_down_x(k, a, &x, out);
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "%s: this kernel cannot signal or wait (vk_moe_down_deps)", a->name);
    mv_cfg m = mv_config(k->c, d, a->nz + 1);
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

/* ---- attention ---------------------------------------------------------------------- */

/* attn_fd (decode on tensor cores): needs the f16 cache and cooperative
 * matrices, at most 32 heads, kv_lora and the row a multiple of 16 (the
 * fragments' width).  Its chunks
 * are cut by length (>= fd_min positions) up to a cap of chunks; a chunk of
 * several 32-position tiles takes them in one pass (online softmax). */
static void attn_fd_init(const vk_kb *k, vk_attn_geom *g)
{
    const vk_ctx *c = k->c;
    uint32_t mt = (g->n_head + 15) / 16, hg = 1;
    /* One head tile per workgroup, the head tiles side by side in the grid
     * (each reads the chunk's rows, from L2 the second time): half the
     * tensor-core and softmax work per tile on the chain (both tiles in one
     * workgroup measured slower, gpu/PERF.md run 17) */
    if (mt == 2)
        mt = 1, hg = 2;
    uint32_t ks = mt ? 8 / (2 * mt) : 0;
    if (!c->coopmat || !g->kv_f16 || mt < 1 || mt > 2 || g->kv_lora % 16 || g->RS % 16 || !k->tune->attn_fd)
        return;
    uint64_t rows = 16 * mt > 32 ? 16 * mt : 32; /* queries, then a tile's cache rows */
    uint64_t shared = 16ull * rows * (g->RS / 8 + 1) + 4ull * ks * 16 * mt * 32 + 16ull * 16 * mt * 5 + 4ull * 16 * mt;
    if (shared > c->shared_bytes)
        return;
    g->fd = true;
    g->fd_mt = mt;
    g->fd_hg = hg;
    g->dec_groups_y = hg;
    g->min_chunk = k->tune->fd_minchunk / 16 * 16;
    g->max_chunks = k->tune->fd_chunks;
}

int vk_attn_geom_init(const vk_kb *k, vk_attn_geom *g, uint32_t n_head, uint32_t kv_lora, uint32_t rope,
                      uint32_t nope, uint32_t v_head, bool kv_f16, uint32_t n_ctx, err_t *err)
{
    const vk_ctx *c = k->c;
    memset(g, 0, sizeof *g);
    if (kv_lora % 4 || kv_lora > 1024 || rope % 2 || kv_lora == 0 || n_head == 0)
        return err_set(err, "attention: kv_lora_rank %u / rope %u not supported by the Vulkan kernels "
                            "(need kv_lora a multiple of 4 up to 1024, rope even)", kv_lora, rope);
    g->n_head = n_head;
    g->kv_lora = kv_lora;
    g->rope = rope;
    g->nope = nope;
    g->v_head = v_head;
    g->kv_f16 = kv_f16;
    g->RS = (kv_lora + rope + 7) / 8 * 8;
    g->cmax = 256;
    g->wgs = kv_lora > 4 * WGS ? 256 : WGS;
    /* Heads per workgroup: few (4; 1, 2, 8 slower, gpu/PERF.md runs 2, 11),
     * so short contexts still spread over many workgroups; every head group
     * re-reads the chunk's rows, from L2.  Bounded by shared memory (queries
     * + scores + reductions). */
    uint32_t per_head = g->RS * 4 + g->cmax * 4 + 64 * 4;
    uint32_t hmax = (c->shared_bytes - 1024) / per_head;
    if (hmax < 1)
        return err_set(err, "attention: a %u-wide cache row does not fit in %u bytes of shared memory", g->RS,
                       c->shared_bytes);
    if (hmax > 4)
        hmax = 4;
    uint32_t groups = ceil_div(n_head, hmax);
    g->hg = ceil_div(n_head, groups);
    g->n_hgroups = ceil_div(n_head, g->hg);
    /* Enough chunks to give every compute unit two workgroups at long
     * contexts (more were slower: gpu/PERF.md runs 8, 11), and chunks no
     * longer than cmax. */
    uint32_t target = 2 * c->n_sm_hint / g->n_hgroups;
    if (target < 1)
        target = 1;
    uint32_t need = ceil_div(n_ctx, g->cmax);
    /* Short contexts: many short chunks keep more compute units busy
     * (H200, tg64 at depth 0: 190.6 tokens/s with chunks of >= 32
     * positions, 200.7 with >= 16, 206.7 with >= 8; gpu/PERF.md run 11). */
    g->min_chunk = k->tune->attn_minchunk;
    g->max_chunks = target > need ? target : need;
    g->dec_groups_y = g->n_hgroups;
    attn_fd_init(k, g);
    return 0;
}

void vk_attn_chunks(const vk_attn_geom *g, uint32_t n_kv, uint32_t *n_chunks, uint32_t *chunk_len)
{
    if (g->fd) {
        /* lengths in multiples of 16 (half tiles), at most max_chunks */
        uint32_t n = ceil_div(n_kv, g->min_chunk);
        if (n > g->max_chunks)
            n = g->max_chunks;
        if (n < 1)
            n = 1;
        *chunk_len = ceil_div(ceil_div(n_kv, n), 16) * 16;
        *n_chunks = ceil_div(n_kv, *chunk_len);
        return;
    }
    /* At least min_chunk positions per chunk (fewer would spend more on
     * partials than on scores), at most cmax. */
    uint32_t n = ceil_div(n_kv, g->min_chunk ? g->min_chunk : 32);
    uint32_t lim = ceil_div(n_kv, g->cmax);
    if (n > g->max_chunks)
        n = g->max_chunks;
    if (n < lim)
        n = lim;
    if (n < 1)
        n = 1;
    *chunk_len = ceil_div(n_kv, n);
    *n_chunks = ceil_div(n_kv, *chunk_len);
}

void vk_attn_chunks_prefill(uint32_t n_kv, uint32_t cap, uint32_t *n_chunks, uint32_t *chunk_len)
{
    /* Chunks of at least 64 positions; each is walked in pieces, so its
     * length is free. */
    uint32_t n = ceil_div(n_kv, 64);
    if (n > cap)
        n = cap;
    if (n < 1)
        n = 1;
    *chunk_len = ceil_div(n_kv, n);
    *n_chunks = ceil_div(n_kv, *chunk_len);
}

int vk_k_kv_store(const vk_kb *k, const vk_kv_store_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    uint32_t spec[14] = {WGS, g->kv_f16 ? 1 : 0, k->c->subgroup};
    memset(out, 0, sizeof *out);
    out->name = "kv_store";
    out->b[6] = a->params;
    if (dep_bind(k, "kv_store", &a->dep, spec, 14, 7, out))
        return -1;
    out->pipe = pipe(k, SPV_KV_STORE, spec, 14);
    if (!out->pipe)
        return -1;
    out->b[0] = a->kv.b;
    out->b[1] = a->norm.b;
    out->b[2] = a->cache.b;
    out->b[3] = a->rope_cs;
    out->b[4] = a->q.b;
    out->b[5] = a->qa.b;
    out->b[6] = a->params;
    uint32_t *p = out->push;
    p[0] = g->kv_lora;
    p[1] = g->rope;
    p[2] = g->nope;
    p[3] = g->n_head;
    p[4] = g->RS;
    p[5] = a->kv.off;
    p[6] = a->kv_z;
    p[7] = a->norm.off;
    p[8] = f2u(a->eps);
    p[9] = a->cache.off;
    p[10] = a->q.off;
    p[11] = a->q_z;
    p[12] = a->qa.off;
    p[13] = a->qa_z;
    out->npush = 17;
    out->groups[0] = 1 + g->n_head;
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    out->bytes = (uint64_t)out->groups[1] * (8ull * (g->kv_lora + g->rope) + g->RS * (g->kv_f16 ? 2 : 4) +
                                             8ull * g->n_head * g->rope);
    return 0;
}

uint32_t vk_attn_part_heads(const vk_attn_geom *g)
{
    return g->fd ? 16 * g->fd_mt * g->fd_hg : g->n_head;
}

/* The operands both attention kernels share: bindings, push words, the
 * grid's chunk and token dimensions (the caller sets the head groups). */
static void attn_bind(const vk_attn_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    out->b[0] = a->qa.b;
    out->b[1] = a->cache.b;
    out->b[2] = a->part.b;
    out->b[3] = a->params;
    uint32_t *p = out->push;
    p[0] = g->n_head;
    p[1] = g->kv_lora;
    p[2] = f2u(a->kq_scale);
    p[3] = a->cache.off;
    p[4] = a->qa.off;
    p[5] = a->qa_z;
    p[6] = a->part.off;
    p[7] = a->chunk_cap;
    p[8] = a->prefill ? VKP_CHUNK_PF : VKP_CHUNK;
    out->npush = 9;
    out->indirect = a->indirect;
    out->groups[0] = a->n_chunks;
    out->groups[2] = a->nz ? a->nz : 1;
    out->bytes = 0; /* depends on the context length; the profiler adds it */
}

/* Decode attention on tensor cores: same operands and partials as attn,
 * all heads in one workgroup. */
static int attn_fd(const vk_kb *k, const vk_attn_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    uint32_t spec[14] = {256, g->fd_mt, g->RS, g->kv_lora, g->fd_hg};
    memset(out, 0, sizeof *out);
    out->name = "attn";
    attn_bind(a, out);
    if (dep_bind(k, "attn", &a->dep, spec, 9, 4, out))
        return -1;
    out->npush = 12;
    out->pipe = pipe(k, SPV_ATTN_FD, spec, 14);
    if (!out->pipe)
        return -1;
    out->groups[1] = g->fd_hg;
    return 0;
}

bool vk_attn_deps(const vk_kb *k, const vk_attn_args *a)
{
    return a->g->fd && !a->prefill;
}

int vk_k_attn(const vk_kb *k, const vk_attn_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    if (g->fd && !a->prefill)
        return attn_fd(k, a, out);
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "attn: this kernel cannot signal or wait (vk_attn_deps)");
    /* scores of chunks up to sgmax positions by subgroups: lanes split a
     * row into 8-element groups (kq per lane), pu positions' loads in flight
     * per subgroup; longer chunks a thread per position (H200: decode
     * attention at depth 0 17.6 us per layer against 25.8 by threads, at
     * depth 4096 -- 79-position chunks -- 45.6 against 33.4) */
    uint32_t kq = ceil_div(g->RS / 8, k->c->subgroup), pu = k->tune->attn_pu;
    uint32_t sgmax = k->tune->attn_sg;
    uint32_t spec[] = {g->wgs, g->hg, g->kv_f16 ? 1 : 0, g->RS, g->cmax, k->c->subgroup, kq, pu, sgmax};
    memset(out, 0, sizeof *out);
    out->name = "attn";
    out->pipe = pipe(k, SPV_ATTN, spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    attn_bind(a, out);
    out->groups[1] = g->n_hgroups;
    return 0;
}

/* The operands both attn_vb kernels share: weights, bindings, push words
 * 0..10, the grid's head and token dimensions, and the bytes they read. */
static void attn_vb_bind(const vk_attn_vb_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    const vk_tensor *w = a->v_b;
    out->w[0] = w->buf;
    out->b[0] = a->part.b;
    out->b[1] = a->o.b;
    out->b[3] = a->params;
    uint32_t *p = out->push;
    p[0] = w->K;
    p[1] = w->Kp;
    p[2] = w->N;
    p[3] = (uint32_t)w->head_off;
    p[4] = w->bpr * w->N;
    p[5] = a->part.off;
    p[6] = vk_attn_part_heads(g); /* head rows of the partials */
    p[7] = a->chunk_cap;
    p[8] = a->o.off;
    p[9] = a->o_z;
    p[10] = VKP_NCHUNK;
    out->groups[1] = g->n_head;
    out->groups[2] = a->nz ? a->nz : 1;
    out->bytes = w->src_bytes * out->groups[2];
}

/* attn_vb x-stationary: the combine is the staging step. */
static int attn_vb_x(const vk_kb *k, const vk_attn_vb_args *a, const mvx_cfg *x, vk_call *out)
{
    const vk_tensor *w = a->v_b;
    uint32_t spec[14] = {0};
    mvx_spec(k, x, w->type, spec);
    spec[7] = a->chunk_cap;
    attn_vb_bind(a, out);
    if (dep_bind(k, "attn_vb", &a->dep, spec, 12, 4, out))
        return -1;
    out->pipe = pipe(k, SPV_ATTNX_VB, spec, 14);
    if (!out->pipe)
        return -1;
    out->push[11] = x->passes;
    out->npush = 15;
    out->groups[0] = x->groups;
    return 0;
}

static bool attn_vb_x_config(const vk_kb *k, const vk_attn_vb_args *a, mvx_cfg *x)
{
    const vk_tensor *w = a->v_b;
    return mvx_config(k, w->type, w->Kp, w->N, a->g->n_head * (a->nz ? a->nz : 1), 1, 256, x) &&
           4ull * (x->ksh + a->chunk_cap) + 512 <= k->c->shared_bytes;
}

bool vk_attn_vb_deps(const vk_kb *k, const vk_attn_vb_args *a)
{
    mvx_cfg x;
    return attn_vb_x_config(k, a, &x);
}

int vk_k_attn_vb(const vk_kb *k, const vk_attn_vb_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    const vk_tensor *w = a->v_b;
    memset(out, 0, sizeof *out);
    out->name = "attn_vb";
    mvx_cfg x;
    if (attn_vb_x_config(k, a, &x)) {
        /* Every row group of a head combines all of the head's chunk
         * partials first, so long contexts (64 chunks) pay for each group:
         * at most 8 groups per head, more rows per pass (gpu/PERF.md runs
         * 14, 17). */
        uint32_t gmax = 8, nt = x.wgs / x.team;
        while (x.groups > gmax && x.r < 8) {
            x.r *= 2;
            x.groups = ceil_div(w->N, nt * x.r * x.passes);
        }
        return attn_vb_x(k, a, &x, out);
    }
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "attn_vb: this kernel cannot signal or wait (vk_attn_vb_deps)");
    mv_cfg m = mv_config(k->c, w, g->n_head);
    /* few workgroups per head: each one combines the head's partials first */
    m.nr = 4;
    m.wgs = 128;
    uint32_t ksh = (w->Kp + 255) / 256 * 256;
    if (4ull * (ksh + a->chunk_cap) + 512 > k->c->shared_bytes)
        return err_set(k->err, "attn_vb: %u chunks of a %u-wide latent do not fit in shared memory", a->chunk_cap,
                       w->Kp);
    uint32_t spec[] = {m.wgs, w->type, m.team, m.nr, k->c->subgroup, ksh, m.upt, a->chunk_cap};
    out->pipe = pipe(k, SPV_ATTN_VB, spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    attn_vb_bind(a, out);
    out->npush = 11;
    out->groups[0] = ceil_div(w->N, rows_per_wg(&m));
    return 0;
}

int vk_k_attn_combine(const vk_kb *k, const vk_attn_combine_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    memset(out, 0, sizeof *out);
    out->name = "attn_combine";
    if (a->chunk_cap < 1 || a->chunk_cap > 64)
        return err_set(k->err, "attn_combine: %u chunks per head (1 to 64)", a->chunk_cap);
    uint32_t spec[] = {WGS, a->chunk_cap};
    out->pipe = pipe(k, SPV_ATTN_COMBINE, spec, 2);
    if (!out->pipe)
        return -1;
    out->b[0] = a->part.b;
    out->b[1] = a->o.b;
    out->b[3] = a->params;
    uint32_t *p = out->push;
    p[0] = g->kv_lora;
    p[1] = a->part.off;
    p[2] = g->n_head;
    p[3] = a->o.off;
    p[4] = a->o_z;
    p[5] = a->o_h;
    p[6] = VKP_NCHUNK_PF;
    out->npush = 7;
    out->groups[0] = g->n_head;
    out->groups[1] = 1;
    out->groups[2] = a->nz ? a->nz : 1;
    /* the batch's partials read at most once, the latents written */
    out->bytes = 4ull * out->groups[2] * g->n_head * (a->chunk_cap * (g->kv_lora + (uint64_t)VK_PART_HDR) + g->kv_lora);
    return 0;
}

/* ---- router, embedding, top-K --------------------------------------------------------- */

/* Decode: 256 threads, half the workgroups of 128 (8 for GLM's 64
 * experts), each staging its input in half the rounds.  H200 with the
 * counter graph, tg128 alternated eight times over two calls: 254.3 tokens/s
 * (depth 4096: 217.0) with 128 against 257.4 (220.2) with 256; 512 gave
 * 251.2-258.2.  A prompt batch keeps 128 (its router took 2.2 ms of a 512-token
 * batch with 128, 3.3 with 256; gpu/PERF.md run 18).  GLMCHAT_ROUTER_WGS
 * overrides both. */
static bool router_x_config(const vk_kb *k, const vk_router_args *a, mvx_cfg *x)
{
    const vk_tensor *w = a->w;
    uint32_t nz = a->nz ? a->nz : 1;
    return mvx_config(k, w->type, w->Kp, w->N, nz, 1, nz == 1 ? 256 : 128, x);
}

bool vk_router_deps(const vk_kb *k, const vk_router_args *a)
{
    mvx_cfg x;
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
    mvx_cfg x;
    mv_cfg m = mv_config(k->c, w, 1);
    bool xs = router_x_config(k, a, &x);
    if (xs) {
        uint32_t spec[14] = {0};
        mvx_spec(k, &x, w->type, spec);
        spec[7] = epl;
        if (dep_bind(k, "router", &a->dep, spec, 18, 8, out))
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

int vk_k_embed(const vk_kb *k, const vk_embed_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    uint32_t spec[] = {WGS, w->type};
    memset(out, 0, sizeof *out);
    out->name = "embed";
    out->pipe = pipe(k, SPV_EMBED, spec, 2);
    if (!out->pipe)
        return -1;
    out->w[0] = w->buf;
    out->b[0] = a->tokens.b;
    out->b[1] = a->x.b;
    uint32_t *p = out->push;
    p[0] = w->K;
    p[1] = w->Kp;
    p[2] = (uint32_t)w->head_off;
    p[3] = a->tokens.off;
    p[4] = a->x.off;
    p[5] = a->x_z;
    p[6] = w->N;
    p[7] = a->check_batch ? 1 : 0;
    out->npush = 8;
    out->groups[0] = ceil_div(ceil_div(w->K, 4), WGS);
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    out->bytes = (w->src_bytes / w->N + 4ull * w->K) * out->groups[1];
    return 0;
}

int vk_topk_geom_init(uint32_t n, uint32_t k, vk_topk_geom *g, err_t *err)
{
    if (k == 0 || k > 64 || k > n)
        return err_set(err, "top-K: K = %u must be 1..64 and at most the vocabulary (%u)", k, n);
    /* Slices of 2048 keep one pass per workgroup short; the merge then
     * looks at n_slices * K candidates. */
    g->slice = 2048;
    g->n_slices = ceil_div(n, g->slice);
    return 0;
}

int vk_k_topk(const vk_kb *k, const vk_topk_args *a, vk_call *out)
{
    uint32_t spec[] = {256, k->c->subgroup};
    memset(out, 0, sizeof *out);
    out->name = "topk";
    out->pipe = pipe(k, SPV_TOPK, spec, 2);
    if (!out->pipe)
        return -1;
    out->b[0] = a->logits.b;
    out->b[1] = a->cand_v;
    out->b[2] = a->cand_i;
    out->b[3] = a->ms;
    out->b[4] = a->counter;
    out->b[5] = a->out_ids;
    out->b[6] = a->out_vals;
    out->b[7] = a->params;
    uint32_t *p = out->push;
    p[0] = a->n;
    p[1] = a->params.buf ? 0 : a->k;
    p[2] = a->geom.slice;
    p[3] = a->logits.off;
    p[4] = a->params.buf ? 1 : 0;
    out->npush = 5;
    out->groups[0] = a->geom.n_slices;
    out->groups[1] = out->groups[2] = 1;
    out->bytes = 4ull * a->n;
    return 0;
}

/* ---- prefill ---------------------------------------------------------------------------- */

int vk_k_rmsnorm(const vk_kb *k, const vk_rmsnorm_args *a, vk_call *out)
{
    uint32_t spec[] = {256, k->c->subgroup};
    memset(out, 0, sizeof *out);
    out->name = "rmsnorm";
    out->pipe = pipe(k, SPV_RMSNORM, spec, 2);
    if (!out->pipe)
        return -1;
    out->b[0] = a->x.b;
    out->b[1] = a->y.b;
    out->b[2] = a->w.b;
    out->b[3] = a->params;
    uint32_t *p = out->push;
    p[0] = a->n;
    p[1] = a->x.off;
    p[2] = a->x_z;
    p[3] = a->y.off;
    p[4] = a->y_z;
    p[5] = a->w.off;
    p[6] = f2u(a->eps);
    out->npush = 7;
    out->groups[0] = a->nz;
    out->groups[1] = out->groups[2] = 1;
    out->bytes = 8ull * a->n * a->nz;
    return 0;
}

#define MM_BM 64u
#define MM_BM_EXPERT 32u
#define MM_BN 64u
#define MM_BN_COOP 128u

/* Tensor cores (NV cooperative matrices, fp16 in / fp32 accumulate) for
 * quantized weights where the device has them; F32 weights keep the fp32
 * kernel (their models' 1e-4 criterion).  mm_coop: 128 rows x 64 or 32
 * tokens, 8 subgroups, packed fp16 tiles, the next step's loads in flight
 * during the MMAs; tune->coopmat = 0 runs the fp32 kernel (mm) instead,
 * e.g. for activations beyond fp16's range. */
enum { MM_FP32, MM_COOP };

static uint32_t mm_kind(const vk_kb *k, const vk_tensor *w, const vk_tensor *u)
{
    if (!k->c->coopmat || !k->tune->coopmat || w->type == QT_F32 || (u && u->type == QT_F32))
        return MM_FP32;
    return MM_COOP;
}

static const enum spv_id MM_SHADER[] = {SPV_MM, SPV_MM_COOP};

const char *vk_mm_kernel(const vk_kb *k, const vk_tensor *w, const vk_tensor *up)
{
    return spv_table[MM_SHADER[mm_kind(k, w, up)]].name;
}

uint32_t vk_mm_expert_bm(const vk_kb *k, const vk_tensor *w)
{
    (void)k, (void)w;
    return MM_BM_EXPERT;
}

uint32_t vk_mm_bn(const vk_kb *k, const vk_tensor *w, const vk_tensor *up)
{
    return mm_kind(k, w, up) == MM_COOP ? MM_BN_COOP : MM_BN;
}

int vk_k_mm(const vk_kb *k, const vk_mm_args *a, vk_call *out)
{
    const vk_tensor *w = a->w, *u = a->up;
    bool list = a->tiles != NULL;
    if (u && (u->K != w->K || u->N != w->N || u->Kp != w->Kp))
        return err_set(k->err, "%s: gate and up shapes differ", a->name);
    if (u && a->x_split)
        return err_set(k->err, "%s: split activations with gate and up", a->name);
    uint32_t kind = mm_kind(k, w, u);
    if (list && a->tile != MM_BM_EXPERT && !(a->tile == 64 && kind != MM_FP32))
        return err_set(k->err, "%s: expert tiles of %u pairs do not match the kernel", a->name, a->tile);
    /* mm_coop takes the list's tile size (32 or 64); the fp32 kernel 32 */
    uint32_t bm = list ? (kind == MM_COOP ? a->tile : MM_BM_EXPERT) : MM_BM;
    uint32_t bn = kind == MM_COOP ? MM_BN_COOP : MM_BN;
    uint32_t mode = u ? 2 : a->accumulate ? 1 : 0;
    /* the split only where activations are rounded (one pipeline otherwise) */
    uint32_t split = kind == MM_COOP && a->x_split ? 1 : 0;
    uint32_t spec[] = {256, w->type, u ? u->type : w->type, bm, bn, mode, list ? 1 : 0, split};
    memset(out, 0, sizeof *out);
    out->name = a->name;
    out->pipe = pipe(k, MM_SHADER[kind], spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    out->w[0] = w->buf;
    if (u)
        out->w[1] = u->buf;
    out->b[0] = a->x.b;
    out->b[1] = a->y.b;
    if (list) {
        out->b[2] = *a->list;
        out->b[3] = *a->tiles;
    }
    out->b[4] = a->params;
    uint32_t *p = out->push;
    p[0] = w->K;
    p[1] = w->Kp;
    p[2] = w->N;
    p[3] = (uint32_t)w->head_off;
    p[4] = u ? (uint32_t)u->head_off : 0;
    p[5] = w->bpr * w->N;
    p[6] = u ? u->bpr * u->N : 0;
    p[7] = a->x.off;
    p[8] = a->x_stride;
    p[9] = a->x_z;
    p[10] = a->x_div ? a->x_div : 1;
    p[11] = a->y.off;
    p[12] = a->y_stride;
    p[13] = a->y_z;
    out->npush = 14;
    out->groups[0] = ceil_div(w->N, bn);
    out->groups[1] = ceil_div(a->max_tokens, bm);
    out->groups[2] = a->nz ? a->nz : 1;
    out->indirect = list ? a->indirect : NULL;
    uint64_t wb = w->src_bytes + (u ? u->src_bytes : 0);
    out->bytes = list ? wb : wb / (w->n_mat ? w->n_mat : 1) * out->groups[2];
    return 0;
}

int vk_k_moe_group(const vk_kb *k, const vk_moe_group_args *a, vk_call *out)
{
    if (a->n_expert > 512)
        return err_set(k->err, "moe_group: %u experts (at most 512)", a->n_expert);
    uint32_t spec[] = {256, a->tile};
    memset(out, 0, sizeof *out);
    out->name = "moe_group";
    out->pipe = pipe(k, SPV_MOE_GROUP, spec, 2);
    if (!out->pipe)
        return -1;
    out->b[0] = a->ids.b;
    out->b[1] = a->list;
    out->b[2] = a->tiles;
    out->b[3] = a->indirect;
    out->b[4] = a->params;
    uint32_t *p = out->push;
    p[0] = a->K;
    p[1] = a->n_expert;
    p[2] = a->ids.off;
    p[3] = a->x_gu;
    p[4] = a->x_dn;
    out->npush = 5;
    out->groups[0] = out->groups[1] = out->groups[2] = 1;
    return 0;
}

int vk_k_moe_combine(const vk_kb *k, const vk_moe_combine_args *a, vk_call *out)
{
    uint32_t spec[] = {256};
    memset(out, 0, sizeof *out);
    out->name = "moe_combine";
    out->pipe = pipe(k, SPV_MOE_COMBINE, spec, 1);
    if (!out->pipe)
        return -1;
    out->b[0] = a->y.b;
    out->b[1] = a->x.b;
    out->b[2] = a->wts.b;
    out->b[3] = a->params;
    if (a->y.off)
        return err_set(k->err, "moe_combine: expert outputs must start their buffer");
    uint32_t *p = out->push;
    p[0] = a->H;
    p[1] = a->K;
    p[2] = a->x.off;
    p[3] = a->wts.off;
    out->npush = 4;
    out->groups[0] = ceil_div(a->H, 256);
    out->groups[1] = a->max_tokens;
    out->groups[2] = 1;
    return 0;
}
