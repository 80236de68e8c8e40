/* vk_profiler.c: recorded variants of a graph and where a token's GPU time
 * goes.
 *
 * A timestamp serializes the GPU (gpu/PERF.md runs 1, 5), so timing every
 * dispatch of every token would slow decoding down by much.  Instead the
 * graph is recorded once per layer with timestamps around that layer's
 * dispatches (plus the embedding and the head, which are cheap to time):
 * every prof_every'th token (vk_tuning.h; 4) replays the next layer's
 * variant, the others the plain graph, and each dispatch keeps its latest
 * measurement.  The first timed token already names every kind of kernel
 * (the layers share them); the table covers the whole token after
 * prof_every x n_layer tokens (~0.9 s of GLM-4.7-Flash on an H200).  One
 * layer timed on every token cost decode 2-3 % (gpu/PERF.md run 23a).  PROFILE_FULL replays a variant with every
 * dispatch timed (bench --profile); PROFILE_OFF one with none.  Results are
 * read after the token's fence, so reading them never stalls the GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_engine.h"

static int variant_init(vk_engine *e, vk_variant *v, bool timed, uint32_t qcap, err_t *err)
{
    memset(v, 0, sizeof *v);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = e->c.cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult r = vkAllocateCommandBuffers(e->c.dev, &ai, &v->cb);
    if (r != VK_SUCCESS)
        return vk_fail(&e->c, err, r, "vkAllocateCommandBuffers");
    if (!timed)
        return 0;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = qcap};
    r = vkCreateQueryPool(e->c.dev, &qi, NULL, &v->qpool);
    if (r != VK_SUCCESS)
        return vk_fail(&e->c, err, r, "vkCreateQueryPool");
    v->qcap = qcap;
    v->q_disp = calloc(qcap, sizeof *v->q_disp);
    if (!v->q_disp)
        return err_set(err, "out of host memory");
    return 0;
}

static void variant_free(vk_engine *e, vk_variant *v)
{
    if (v->qpool)
        vkDestroyQueryPool(e->c.dev, v->qpool, NULL);
    if (v->cb)
        vkFreeCommandBuffers(e->c.dev, e->c.cmd_pool, 1, &v->cb);
    free(v->q_disp);
    memset(v, 0, sizeof *v);
}

/* Records program `what` into v (listing it to `list` when given). */
static int record(vk_engine *e, vk_family *f, vk_variant *v, int mode, int seg, vk_program what, uint32_t set,
                  vk_listing *list, err_t *err)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VkResult res = vkBeginCommandBuffer(v->cb, &bi);
    if (res != VK_SUCCESS)
        return vk_fail(&e->c, err, res, "vkBeginCommandBuffer");
    vk_rec r;
    vk_rec_begin(&r, &e->c, &f->prog, v->cb, mode, seg, v->qpool, v->qcap, v->q_disp, err);
    r.list = list;
    /* the embedding (segment 0) and the head (last segment) in every sample */
    r.always_a = 0;
    r.always_b = (int)e->m->cfg.n_layer + 1;
    int rc = vk_fwd_record(e, &r, what, set);
    if (vk_rec_end(&r) && !rc)
        rc = -1;
    v->nq = r.nq;
    res = vkEndCommandBuffer(v->cb);
    if (res != VK_SUCCESS && !rc)
        rc = vk_fail(&e->c, err, res, "vkEndCommandBuffer");
    return rc;
}

int vk_family_build(vk_engine *e, vk_family *f, vk_program what, uint32_t set, int variants, err_t *err)
{
    memset(f, 0, sizeof *f);
    if (variant_init(e, &f->plain, false, 0, err) || record(e, f, &f->plain, VK_PROF_OFF, 0, what, set, NULL, err))
        return -1;
    if (variants == VK_FAMILY_PLAIN)
        return 0;
    /* every dispatch, a start mark per segment, begin and end */
    uint32_t qcap = f->prog.n_disp + e->m->cfg.n_layer + 8;
    if (variant_init(e, &f->full, true, qcap, err) || record(e, f, &f->full, VK_PROF_ALL, 0, what, set, NULL, err))
        return -1;
    if (variants == VK_FAMILY_FULL)
        return 0;
    f->n_sampled = e->m->cfg.n_layer;
    f->sampled = calloc(f->n_sampled, sizeof *f->sampled);
    if (!f->sampled)
        return err_set(err, "out of host memory");
    for (uint32_t i = 0; i < f->n_sampled; i++)
        if (variant_init(e, &f->sampled[i], true, qcap, err) ||
            record(e, f, &f->sampled[i], VK_PROF_SEGMENT, (int)i + 1, what, set, NULL, err))
            return -1;
    return 0;
}

void vk_family_free(vk_engine *e, vk_family *f)
{
    variant_free(e, &f->plain);
    variant_free(e, &f->full);
    for (uint32_t i = 0; i < f->n_sampled; i++)
        variant_free(e, &f->sampled[i]);
    free(f->sampled);
    vk_prog_free(&e->c, &f->prog);
    memset(f, 0, sizeof *f);
}

int vk_program_list(vk_engine *e, vk_program what, uint32_t set, FILE *f, err_t *err)
{
    vk_family fam;
    memset(&fam, 0, sizeof fam);
    vk_listing *list = calloc(1, sizeof *list);
    if (!list)
        return err_set(err, "out of host memory");
    list->f = f;
    list->pipes = &e->pipes;
    int rc = variant_init(e, &fam.plain, false, 0, err);
    if (!rc)
        rc = record(e, &fam, &fam.plain, VK_PROF_OFF, 0, what, set, list, err);
    vk_family_free(e, &fam);
    free(list);
    return rc;
}

vk_variant *vk_family_pick(vk_family *f, profile_mode mode)
{
    if (mode == PROFILE_FULL && f->full.cb)
        return &f->full;
    if (mode == PROFILE_SAMPLED && f->n_sampled) {
        vk_variant *v = &f->sampled[f->next_sample];
        f->next_sample = (f->next_sample + 1) % f->n_sampled;
        return v;
    }
    return &f->plain;
}

void vk_profile_collect(vk_engine *e, vk_family *f, vk_variant *v, vk_profile *pr)
{
    if (!v->qpool || v->nq < 2)
        return;
    if (pr->n_disp != f->prog.n_disp) {
        free(pr->last_us);
        free(pr->seen);
        pr->n_disp = f->prog.n_disp;
        pr->last_us = calloc(pr->n_disp ? pr->n_disp : 1, sizeof *pr->last_us);
        pr->seen = calloc(pr->n_disp ? pr->n_disp : 1, sizeof *pr->seen);
        if (!pr->last_us || !pr->seen) {
            pr->n_disp = 0;
            return;
        }
    }
    uint64_t ts[4096];
    uint32_t n = v->nq < 4096 ? v->nq : 4096;
    /* The token's fence has signalled: the results are there, no stall. */
    if (vkGetQueryPoolResults(e->c.dev, v->qpool, 0, n, sizeof ts, ts, sizeof ts[0], VK_QUERY_RESULT_64_BIT) !=
        VK_SUCCESS)
        return;
    double per_us = e->c.ts_period_ns / 1000.0;
    for (uint32_t q = 1; q < n; q++) {
        int32_t d = v->q_disp[q];
        if (d >= 0 && (uint32_t)d < pr->n_disp && ts[q] >= ts[q - 1]) {
            pr->last_us[d] = (double)(ts[q] - ts[q - 1]) * per_us;
            pr->seen[d]++;
        }
    }
    if (v->q_disp[0] == -2 && v->q_disp[n - 1] == -3 && ts[n - 1] >= ts[0]) {
        pr->token_us = (double)(ts[n - 1] - ts[0]) * per_us;
        pr->tokens_timed++;
    }
}

/* Per kernel name: calls, time and bytes per token.  Dispatches not yet
 * measured count at the mean of their kernel's measured ones. */
void vk_profile_report(const vk_family *f, const vk_profile *pr, engine_stats *st)
{
    const vk_prog *p = &f->prog;
    st->dispatches_per_token = p->n_dep + 1;
    st->us_per_token_measured = pr->token_us;
    st->n_kernels = 0;
    if (!pr->n_disp)
        return;
    for (uint32_t d = 0; d < p->n_disp; d++) {
        uint32_t k = 0;
        while (k < st->n_kernels && strcmp(st->kernels[k].name, p->names[d]) != 0)
            k++;
        if (k == st->n_kernels) {
            if (k == ENGINE_MAX_KERNEL_STATS)
                continue;
            memset(&st->kernels[k], 0, sizeof st->kernels[k]);
            snprintf(st->kernels[k].name, sizeof st->kernels[k].name, "%s", p->names[d]);
            st->n_kernels++;
        }
        engine_kernel_stat *ks = &st->kernels[k];
        ks->calls_per_token += 1;
        ks->bytes_per_token += (double)p->bytes[d];
        if (pr->seen[d])
            ks->us_per_token += pr->last_us[d];
        /* gbps temporarily holds the count of measured dispatches */
        ks->gbps += pr->seen[d] ? 1 : 0;
    }
    for (uint32_t k = 0; k < st->n_kernels; k++) {
        engine_kernel_stat *ks = &st->kernels[k];
        if (ks->gbps > 0 && ks->gbps < ks->calls_per_token)
            ks->us_per_token *= ks->calls_per_token / ks->gbps;
        ks->gbps = ks->us_per_token > 0 ? ks->bytes_per_token / (ks->us_per_token * 1e3) : 0;
    }
}

void vk_profile_free(vk_profile *pr)
{
    free(pr->last_us);
    free(pr->seen);
    memset(pr, 0, sizeof *pr);
}

void vk_profile_add(const vk_family *f, const vk_profile *pr, double weight, engine_stats *st)
{
    const vk_prog *p = &f->prog;
    for (uint32_t d = 0; d < p->n_disp && d < pr->n_disp; d++) {
        uint32_t k = 0;
        while (k < st->n_kernels && strcmp(st->kernels[k].name, p->names[d]) != 0)
            k++;
        if (k == st->n_kernels) {
            if (k == ENGINE_MAX_KERNEL_STATS)
                continue;
            memset(&st->kernels[k], 0, sizeof st->kernels[k]);
            snprintf(st->kernels[k].name, sizeof st->kernels[k].name, "%s", p->names[d]);
            st->n_kernels++;
        }
        engine_kernel_stat *ks = &st->kernels[k];
        ks->calls_per_token += weight;
        ks->bytes_per_token += weight * (double)p->bytes[d];
        ks->us_per_token += pr->seen[d] ? weight * pr->last_us[d] : 0;
        ks->gbps = ks->us_per_token > 0 ? ks->bytes_per_token / (ks->us_per_token * 1e3) : 0;
    }
}
