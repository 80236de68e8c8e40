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
     * these kernels (gpu/PERF.md runs 4-5).  Small matrices keep one row
     * for enough workgroups; types without the loads-first path keep one. */
    uint64_t rows = (uint64_t)w->N * (nz ? nz : 1);
    bool fast = w->type == QT_Q4_0 || w->type == QT_F32;
    uint32_t nr_def = !fast ? 1 : rows >= 4096 ? 4 : rows >= 1024 ? 2 : 1;
    m.nr = nr_def;
    m.wgs = 64;
    m.wgs = (m.wgs + c->subgroup - 1) / c->subgroup * c->subgroup;
    return m;
}

void vkk_mv_spec(const vk_kb *k, const vkk_mv_cfg *m, uint32_t type, uint32_t *spec)
{
    spec[PC_S_WGS] = m->wgs;
    spec[MVF_S_TYPE] = type;
    spec[MVF_S_TEAM] = m->team;
    spec[MVF_S_NR] = m->nr;
    spec[MVF_S_SG] = k->c->subgroup;
}

/* Elements per unit of the x-stationary kernels (mv_xs_common.glsl's UNIT);
 * 0: a type they do not read. */
static uint32_t xs_unit(uint32_t t)
{
    switch (t) {
    case QT_F32: case QT_F16: case QT_BF16: return 8;
    case QT_Q4_0: case QT_Q4_1: case QT_Q5_0: case QT_Q5_1: case QT_Q8_0: return 32;
    case QT_Q4_K: case QT_Q5_K: case QT_Q6_K: return 64;
    /* the low-bit types (shaders/xs_low.glsl) */
    case QT_IQ4_NL: case QT_MXFP4: return 32;
    case QT_Q2_K: case QT_Q3_K: case QT_IQ4_XS: case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S:
    case QT_IQ3_XXS: case QT_IQ3_S: case QT_IQ1_S: case QT_IQ1_M: return 64;
    default: return 0;
    }
}

/* What one unit of a row costs in loads, in quarters of a 16-byte load:
 * the body's 16-byte loads, an 8-byte load as half (Q5_0/Q5_1's head,
 * Q5_K's fifth bits), a K-quant block's 16-byte head as a quarter (the four
 * lanes of a block's units load the same 16 bytes); scale words of 2-4
 * bytes (Q4_0, Q4_1, Q8_0, Q6_K) as nothing.  The rows per pass keep a
 * lane's loads within 16 (gpu/PERF.md run 6, for Q4_0 / Q8_0 / Q6_K;
 * the K-quants' counting, run 20; the low-bit types counted the same way,
 * not measured). */
static uint32_t xs_cost4(uint32_t t)
{
    switch (t) {
    case QT_Q4_0: case QT_Q4_1: case QT_F16: case QT_BF16: return 4;
    case QT_Q5_0: case QT_Q5_1: return 6;
    case QT_Q4_K: return 9;
    case QT_Q5_K: return 11;
    case QT_Q6_K: return 12;
    case QT_IQ4_NL: case QT_MXFP4: case QT_Q2_K: case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: return 4;
    case QT_Q3_K: case QT_IQ3_XXS: case QT_IQ3_S: return 6;
    case QT_IQ1_S: return 2;
    case QT_IQ1_M: return 3;
    case QT_IQ4_XS: return 9;
    default: return 8; /* Q8_0, F32 */
    }
}

/* The weight types whose units have integer dot products
 * (mv_xs_common.glsl IDOT_ON): codes of at most 8 bits in bytes, or 16
 * levels that are signed bytes (IQ4_NL, IQ4_XS, MXFP4), in blocks of 32 or
 * sub-blocks of 16 and 32 with their own scales.  The -DIDOT builds
 * quantize the input in clusters of 8 lanes (x_stage): subgroups of 8 or
 * more. */
bool vk_idot_type(uint32_t type)
{
    return type == QT_Q4_0 || type == QT_Q4_1 || type == QT_Q5_0 || type == QT_Q5_1 || type == QT_Q8_0 ||
           type == QT_Q4_K || type == QT_Q5_K || type == QT_Q6_K || type == QT_IQ4_NL || type == QT_IQ4_XS ||
           type == QT_MXFP4;
}

/* The shared memory the -DIDOT builds add for an input staged in ksh
 * elements: a byte an element (xq_sh), a max, a scale and a sum a 32 (amax_sh,
 * xd_sh, xqs_sh); the 16-level types' pair table and its copy a byte up
 * (lev2_sh, 512 words). */
uint64_t vk_k_idot_shared(const vk_kb *k, uint32_t type, uint32_t ksh)
{
    if (!vk_k_idot(k, type))
        return 0;
    bool lev16 = type == QT_IQ4_NL || type == QT_IQ4_XS || type == QT_MXFP4;
    return ksh + 3ull * ksh / 8 + (lev16 ? 2048 : 0);
}

bool vk_k_idot(const vk_kb *k, uint32_t type)
{
    const vk_ctx *c = k->c;
    return vk_idot_type(type) && c->idot && c->subgroup >= 8 &&
           (k->tune->idot == 2 || (k->tune->idot == 1 && c->idot_fast));
}

bool vkk_xs_config(const vk_kb *k, uint32_t type, uint32_t kp, uint32_t rows, uint32_t nz, uint32_t sets,
                   uint32_t wgs, vkk_xs_cfg *m)
{
    const vk_ctx *c = k->c;
    const vk_tuning *t = k->tune;
    uint32_t unit = xs_unit(type);
    if (!unit || !t->xs || kp == 0 || kp % unit || rows == 0)
        return false;
    uint32_t units = kp / unit;
    uint32_t jmax = t->xs_j, best = 0;
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
    /* xs_pad: the largest team whose padding stays within xs_pad % of its
     * slots (more threads per row: a matrix of few rows gets more of the
     * GPU).  Only for the 64-element units of the K-quants: a 32-element
     * unit's row is already cut fine enough, and the wider team measured
     * slower there (Q4_0's q_b: 8 lanes x 3 units -> 32 x 1; gpu/PERF.md
     * run 22). */
    bool pad = t->xs_pad && unit == 64;
    for (uint32_t team = c->subgroup; pad && best && team > m->team; team /= 2) {
        uint32_t j = ceil_div(units, team);
        if (j <= jmax && (uint64_t)(team * j - units) * 100 <= (uint64_t)t->xs_pad * team * j) {
            best = team * j;
            m->team = team;
            m->j = j;
            break;
        }
    }
    if (!best)
        return false;
    m->ksh = best * unit;
    /* the staged input, its sub-block sums (mv_xs_common.glsl xsub), red[],
     * the type's table (quant_iq.glsl) */
    /* ... and with integer dot products the quantized input */
    uint64_t idot_bytes = vk_k_idot_shared(k, type, m->ksh);
    if (4ull * m->ksh + m->ksh / 8 + 4 + 512 + 4ull * PC_IQ_TABLE_WORDS(type) + idot_bytes > c->shared_bytes)
        return false;
    m->xreg = m->j * unit <= t->xs_xreg;
    m->xrn = m->xreg ? m->j * unit / 4 : 1;

    uint32_t sg = c->subgroup;
    wgs = t->xs_wgs ? t->xs_wgs : wgs;
    wgs = ceil_div(wgs, sg) * sg;
    if (wgs / sg > 64)
        wgs = 64 * sg;
    /* within the device's workgroup: the kernels ask for up to VKK_XS_WGS
     * threads, and a device may offer as few as 256 (vk_device.c's least) */
    uint32_t wmax = c->props.limits.maxComputeWorkGroupInvocations;
    if (c->props.limits.maxComputeWorkGroupSize[0] < wmax)
        wmax = c->props.limits.maxComputeWorkGroupSize[0];
    if (wgs > wmax && wmax >= sg)
        wgs = wmax / sg * sg;
    uint32_t nt = wgs / m->team;
    bool fixed_r = t->xs_r != 0;
    uint32_t r = fixed_r ? t->xs_r : type == QT_Q6_K ? 2 : 4;
    const uint32_t loads = 16, waves = 2, pwant = 8;
    while (!fixed_r && r > 1 && r * m->j * xs_cost4(type) * sets > 4 * loads)
        r /= 2;
    uint32_t want = waves * c->n_sm_hint;
    while (!fixed_r && r > 1 && ceil_div(rows, nt * r) * nz < want)
        r /= 2;
    uint32_t pmax = t->xs_p ? t->xs_p : 16;
    uint32_t passes = 1;
    if (t->xs_p)
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

/* A dependency's two ends (vk_dep): the spec constants PC_S_SIGNAL and
 * PC_S_WAIT, the counters at binding PC_B_DEP, the params (for the epoch)
 * at the kernel's binding params_binding, and the push words; LL: the spec
 * constants PC_S_LL_IN / PC_S_LL_OUT and the sites. */
int vkk_dep_bind(const vk_kb *k, const char *name, const vk_dep *d, bool ll_ok, uint32_t *spec,
                 uint32_t params_binding, vk_call *out, vkk_dep_words *words)
{
    *words = (vkk_dep_words){0};
    bool ll = d->ll_in || d->ll_out;
    if (!d->signal && !d->wait && !ll)
        return 0;
    if (ll && !ll_ok)
        return err_set(k->err, "%s: this kernel cannot read or write tagged words (LL)", name);
    if (d->signal && d->wait && d->signal->b.buf != d->wait->b.buf)
        return err_set(k->err, "%s: signal and wait counters must share a buffer", name);
    if ((d->wait || ll) && !d->params.buf)
        return err_set(k->err, "%s: a wait or tagged words need the params buffer", name);
    if (ll && !d->signal && !d->wait && !d->ll_fails.buf)
        return err_set(k->err, "%s: tagged words need the counters' buffer (word 0: give-ups)", name);
    spec[PC_S_SIGNAL] = d->signal ? 1 : 0;
    spec[PC_S_WAIT] = d->wait ? 1 : 0;
    spec[PC_S_LL_IN] = d->ll_in ? 1 : 0;
    spec[PC_S_LL_OUT] = d->ll_out ? 1 : 0;
    *words = (vkk_dep_words){d->signal ? d->signal->off : 0, d->wait ? d->wait->off : 0, d->wait_n,
                             d->ll_in, d->ll_out};
    out->b[PC_B_DEP] = d->signal ? d->signal->b : d->wait ? d->wait->b : d->ll_fails;
    if (d->wait || ll)
        out->b[params_binding] = d->params;
    return 0;
}

void vkk_xs_spec(const vk_kb *k, const vkk_xs_cfg *m, uint32_t type, uint32_t *spec)
{
    spec[PC_S_WGS] = m->wgs;
    spec[XS_S_TYPE] = type;
    spec[XS_S_TEAM] = m->team;
    spec[XS_S_J] = m->j;
    spec[XS_S_R] = m->r;
    spec[XS_S_SG] = k->c->subgroup;
    spec[XS_S_KSH] = m->ksh;
    spec[XS_S_XREG] = m->xreg;
    spec[XS_S_XRN] = m->xrn;
}
