/* vk_kernels.c: the kernel builders (see vk_kernels.h). */
#include <string.h>

#include "vk_kernels.h"

#define WGS 128u

static uint32_t pow2_floor(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}

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

/* Threads per row: enough units per thread for a few loads in flight, never
 * more than a subgroup (teams reduce with shuffles). */
static uint32_t team_for(const vk_ctx *c, const vk_tensor *w)
{
    vk_qlayout l;
    vk_qlayout_of(w->type, &l);
    uint32_t units = w->Kp / l.unit;
    uint32_t t = pow2_floor(units / 2 ? units / 2 : 1);
    return t < c->subgroup ? t : c->subgroup;
}

/* Shared floats for an input of kp elements, rounded so few variants exist;
 * 0 when it does not fit (the kernel then reads the input from memory). */
static uint32_t shared_floats(const vk_ctx *c, uint32_t kp)
{
    uint32_t ksh = (kp + 1023) / 1024 * 1024;
    if ((uint64_t)ksh * 4 + 512 > c->shared_bytes)
        ksh = (kp + 255) / 256 * 256;
    if ((uint64_t)ksh * 4 + 512 > c->shared_bytes)
        return 0;
    return ksh;
}

static VkPipeline pipe(const vk_kb *k, const char *shader, const uint32_t *spec, uint32_t n)
{
    return vk_pipe_get(k->c, k->pipes, shader, spec, n, k->err);
}

int vk_k_mv(const vk_kb *k, const vk_mv_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    uint32_t team = team_for(k->c, w), nr = 2;
    uint32_t ksh = shared_floats(k->c, w->Kp);
    uint32_t xmode = a->norm ? 1 : 0;
    if (!ksh) {
        if (a->norm)
            return err_set(k->err, "%s: a %u-wide RMSNorm does not fit in %u bytes of shared memory", a->name,
                           w->K, k->c->shared_bytes);
        xmode = 2;
        ksh = 4;
    }
    uint32_t spec[] = {WGS, w->type, team, nr, k->c->subgroup, xmode, a->accumulate ? 1 : 0, ksh, a->ids ? 1 : 0};
    memset(out, 0, sizeof *out);
    out->name = a->name;
    out->pipe = pipe(k, "mv", spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    out->w[0] = w->buf;
    out->b[0] = a->x.b;
    out->b[1] = a->y.b;
    if (a->norm)
        out->b[2] = a->norm->b;
    if (a->ids)
        out->b[3] = a->ids->b;
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
    out->npush = 12;
    uint32_t rows_per_wg = WGS / team * nr;
    out->groups[0] = ceil_div(w->N, rows_per_wg);
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    uint64_t per_mat = w->bytes / (w->n_mat ? w->n_mat : 1);
    out->bytes = per_mat * out->groups[1] + 4ull * (w->K + w->N) * out->groups[1];
    return 0;
}
