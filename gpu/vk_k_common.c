/* vk_k_common.c: the geometry the decode matrix-vector builders share and
 * a dependency's two ends (vk_k_common.h). */
#include "vk_k_common.h"

vkk_mv_cfg vkk_mv_config(const vk_ctx *c, const vk_tensor *w, uint32_t nz)
{
    vk_qlayout l;
    vk_qlayout_of(w->type, &l);
    uint32_t units = w->Kp / l.unit;
    uint32_t upt_target = 2;
    vkk_mv_cfg m;
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

static uint32_t mvx_unit(uint32_t t)
{
    return t == QT_F32 || t == QT_F16 ? 8 : t == QT_Q6_K ? 64 : t == QT_Q4_0 || t == QT_Q8_0 ? 32 : 0;
}

/* uvec4 registers one unit of a row takes */
static uint32_t mvx_qw(uint32_t t)
{
    return t == QT_Q4_0 || t == QT_F16 ? 1 : t == QT_Q6_K ? 3 : 2;
}

bool vkk_xs_config(const vk_kb *k, uint32_t type, uint32_t kp, uint32_t rows, uint32_t nz, uint32_t sets,
                   uint32_t wgs, vkk_xs_cfg *m)
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

void vkk_xs_spec(const vk_kb *k, const vkk_xs_cfg *m, uint32_t type, uint32_t *spec)
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
int vkk_dep_bind(const vk_kb *k, const char *name, const vk_dep *d, uint32_t *spec, uint32_t at, uint32_t pb,
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
