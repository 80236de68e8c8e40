/* vk_hostmoe.c: routed experts in host memory -- the GPU runs the model
 * but the routed experts of some MoE layers, which stay in the mapped file
 * and which the CPU computes (core/cpu/cpu_moe_host.h), as llama.cpp's
 * --n-cpu-moe N does for the experts of blocks 0..N-1.
 *
 * Decode is the usual graph cut into parts (vk_forward.c ffn_moe_host): a
 * part runs up to a host layer's router + top-k, writing the expert ids and
 * weights and the ffn-normed x into host-visible memory; the host waits for
 * it, submits the layer's side part (the shared expert, x += its down) and
 * does not wait for that: the GPU runs it while the CPU computes the routed
 * experts' weighted sum into a host-written buffer; the next part begins
 * (behind a barrier, after the side part) by adding that sum into x.
 * Each part is recorded once (its steps planned as the whole graph's are:
 * counters or barriers within a part; a part starts after a fence, which
 * orders it after everything before) and replayed for every token; nothing
 * is allocated per token.  The prompt graph (vk_prefill.c) is cut the same
 * way, the CPU taking the batch's tokens at once.
 *
 * Why these layers: the first blocks, as llama.cpp's flag takes them, so a
 * run of ours and `llama-bench -ncmoe N` split the model the same way.
 * Why a fence per part and not an event the host sets inside one command
 * buffer: a GPU waiting on the host inside a submit is allowed to time out
 * (and on some drivers does), and a fence costs ~10-20 us of a layer's
 * ~1 ms of CPU experts.
 *
 * The hand-over (--tune hx): with 1, a host layer's side part is submitted
 * right behind its part, before the host waits (the fence signals when the
 * part's own batch is done, not the side part's: the submit costs the host
 * nothing on the path from the router to the CPU, and the GPU begins the
 * shared expert without waiting for the host), and the host polls the fence
 * instead of sleeping on it (a sleeping wait returns only when the driver
 * wakes the thread).  With 0, the side part is submitted after a blocking
 * wait, as before.  With 2, where the device has timeline semaphores (else
 * as 1), every part of a token is submitted at once and the two sides
 * hand over through two timeline semaphores, no submit or fence between
 * them (vk_hostmoe_linked.c).  Either way the host reads the part's results once it
 * has seen the fence signalled (vkGetFenceStatus returning VK_SUCCESS is
 * the same observation as vkWaitForFences returning): the spec's fence
 * chapter says a fence's own memory dependency covers device access only,
 * so each part ends with a barrier to the host stage (HOST_READ) that makes
 * its writes visible to the host (vk_hostmoe_cut.c).  With 0 and 1 the
 * host's sum is written before the next part's vkQueueSubmit, which makes
 * host writes made before it visible to the device (the spec's "host write
 * ordering guarantee"); vk_hostmoe_linked.c says how it gets there with 2.
 *
 * The kernel table: each part and side part is also recorded with every
 * dispatch timed, replayed on one in PARTS_TIMED_EVERY of the tokens the
 * sampled profiler times (every token with bench --profile), the parts'
 * tables summed (vk_hostmoe_kernel_stats).
 *
 * The breakdown (engine_split_stat; bench, the side pane, /stats): each
 * decode part and side part carries begin and end timestamps (the part's
 * begin and end already wait for the queue, so they cost next to nothing)
 * and the host reads its clock around the submits, the waits and the
 * CPU's experts; on a profiled token (every prof_every'th with the sampled
 * profiler, every one with bench --profile) the marks are read back, with
 * no wait, after the token's last fence. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_pack.h"
#include "vk_engine.h"

int vk_hostmoe_select(vk_engine *e, uint32_t n_blocks, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    const uint32_t n_layer = e->m->cfg.n_layer;
    if (!hx->host) {
        hx->host = calloc(n_layer ? n_layer : 1, sizeof *hx->host);
        hx->layer = calloc(n_layer ? n_layer : 1, sizeof *hx->layer);
        if (!hx->host || !hx->layer)
            return err_set(err, "out of host memory");
    }
    hx->n_blocks = n_blocks;
    hx->n_layers = 0;
    for (uint32_t il = 0; il < n_layer; il++) {
        hx->host[il] = il < n_blocks && e->m->layers[il].is_moe;
        if (hx->host[il])
            hx->layer[hx->n_layers++] = il;
    }
    return 0;
}

/* Whether the CPU's experts may keep packed copies (cpu_pack.h: Q4_0, ~15 %
 * less of a decoded token's CPU time on the H200's host, run 44).  Where
 * prompts stream the experts, their batches read the file's pages too, so
 * the copies are made only where host memory holds both (cpu_pack_fits:
 * within 3/4 of what is available): on a machine without that room the
 * copies would push the file's pages out, and every streamed batch would
 * read them from disk again. */
static bool may_pack(const vk_engine *e)
{
    const vk_hostmoe *hx = &e->hx;
    if (!hx->slot_bytes)
        return true;
    err_t ignored;
    const cpu_kernels *k = cpu_kernels_best(&ignored);
    uint64_t both = 0;
    for (uint32_t i = 0; k && i < hx->n_layers; i++) {
        const model_layer *L = &e->m->layers[hx->layer[i]];
        const mtensor *x[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
        for (int j = 0; j < 3; j++)
            both += cpu_pack_wanted(k, x[j]) ? cpu_pack_bytes(x[j]) + x[j]->nbytes : 0;
    }
    return both == 0 || cpu_pack_fits(both);
}

int vk_hostmoe_start(vk_engine *e, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    if (!hx->n_layers)
        return 0;
    const model_config *c = &e->m->cfg;
    cpu_moe_host_params cp = {.n_embd = c->n_embd, .n_ff = c->n_ff_exp, .n_expert = c->n_expert,
                              .n_used = c->n_expert_used, .n_batch = e->b.n_batch, .n_threads = e->p.n_threads,
                              .gate_rows = e->tune.hx_rows, .no_pack = !may_pack(e)};
    if (!(hx->cpu = cpu_moe_host_new(&cp, err)))
        return err_prefix(err, "the CPU's experts");
    float *one = (float *)hx->one.map;
    for (uint32_t t = 0; t < e->b.n_batch; t++)
        one[t] = 1.0f;
    uint32_t nq = 2 * (2 * hx->n_layers + 1);
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = nq};
    VkResult r = vkCreateQueryPool(e->c.dev, &qi, NULL, &hx->qpool);
    if (r != VK_SUCCESS)
        return vk_fail(&e->c, err, r, "vkCreateQueryPool");
    if (!(hx->ts = calloc(nq, sizeof *hx->ts)) || !(hx->prof = calloc(2 * hx->n_layers + 1, sizeof *hx->prof)))
        return err_set(err, "out of host memory");
    if (e->tune.hx == 2 && e->c.timeline) { /* else hx=1's hand-over */
        VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
        VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
        if ((r = vkCreateSemaphore(e->c.dev, &si, NULL, &hx->sem_gpu)) != VK_SUCCESS ||
            (r = vkCreateSemaphore(e->c.dev, &si, NULL, &hx->sem_host)) != VK_SUCCESS)
            return vk_fail(&e->c, err, r, "vkCreateSemaphore");
    }
    return vk_hostmoe_record(e, err);
}

int vk_hostmoe_record(vk_engine *e, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    hx->n_parts = hx->n_layers + 1;
    hx->parts = calloc(hx->n_parts, sizeof *hx->parts);
    if (!hx->parts)
        return err_set(err, "out of host memory");
    for (uint32_t p = 0; p < hx->n_parts; p++)
        if (vk_family_build(e, &hx->parts[p], VK_PROGRAM_DECODE_PART, p, VK_FAMILY_FULL, err))
            return err_prefix(err, "recording part %u of the decode graph", p);
    hx->sides = calloc(hx->n_layers, sizeof *hx->sides);
    if (!hx->sides)
        return err_set(err, "out of host memory");
    for (uint32_t i = 0; i < hx->n_layers; i++)
        if (e->m->layers[hx->layer[i]].gate_shexp.data &&
            vk_family_build(e, &hx->sides[i], VK_PROGRAM_DECODE_SIDE, i, VK_FAMILY_FULL, err))
            return err_prefix(err, "recording host layer %u's shared expert", hx->layer[i]);
    if (e->b.n_batch <= 1)
        return 0;
    hx->pf_parts = calloc(hx->n_parts, sizeof *hx->pf_parts);
    if (!hx->pf_parts)
        return err_set(err, "out of host memory");
    for (uint32_t p = 0; p < hx->n_parts; p++)
        if (vk_family_build(e, &hx->pf_parts[p], VK_PROGRAM_PREFILL_PART, p, VK_FAMILY_PLAIN, err))
            return err_prefix(err, "recording part %u of the prompt graph", p);
    /* every position's logits only where the engine keeps their rows (engine_params.all_logits) */
    if (e->p.all_logits &&
        vk_family_build(e, &hx->pf_last_logits, VK_PROGRAM_PREFILL_LOGITS_PART, hx->n_layers, VK_FAMILY_PLAIN, err))
        return err_prefix(err, "recording the prompt graph's last part");
    return vk_hostmoe_stream_record(e, err);
}

void vk_hostmoe_unrecord(vk_engine *e)
{
    vk_hostmoe *hx = &e->hx;
    for (uint32_t p = 0; p < hx->n_parts; p++) {
        if (hx->parts)
            vk_family_free(e, &hx->parts[p]);
        if (hx->pf_parts)
            vk_family_free(e, &hx->pf_parts[p]);
        if (hx->sides && p < hx->n_layers && hx->sides[p].plain.cb)
            vk_family_free(e, &hx->sides[p]);
    }
    vk_hostmoe_stream_unrecord(e);
    free(hx->sides);
    hx->sides = NULL;
    if (hx->pf_last_logits.plain.cb)
        vk_family_free(e, &hx->pf_last_logits);
    free(hx->parts);
    free(hx->pf_parts);
    hx->parts = hx->pf_parts = NULL;
    hx->n_parts = 0;
}

/* The parts of a graph (the last one `last`) for n tokens, the CPU's
 * experts between them, the side parts (`sides`, where recorded) during
 * the CPU's turns; the host's marks into hm.  With `cancel`, 1 where the
 * flag was seen set after a host layer's turn, before the next part is
 * submitted: nothing is in flight then (every part was waited for; no side
 * parts run with it); and the longest stretch between two looks at it
 * into *stretch_us (the run's start and end count as looks). */
static int run_parts(vk_engine *e, const vk_family *parts, const vk_family *last, const vk_family *sides, uint32_t n,
                     bool timed, vk_host_marks *hm, const atomic_bool *cancel, double *stretch_us, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    bool side_early = e->tune.hx >= 1; /* hx=2 without timeline semaphores: hx=1 */
    uint64_t spin = vk_hostmoe_poll_ns(e);
    memset(hm, 0, sizeof *hm);
    double looked = vk_hostmoe_now_us();
    for (uint32_t p = 0; p < hx->n_parts; p++) {
        if (cancel && p > 0) {
            double now = vk_hostmoe_now_us();
            if (stretch_us && now - looked > *stretch_us)
                *stretch_us = now - looked;
            looked = now;
            if (atomic_load(cancel))
                return 1;
        }
        double t0 = vk_hostmoe_now_us();
        const vk_family *f = p == hx->n_layers ? last : &parts[p];
        if (vk_submit_fenced(&e->c, (timed ? &f->full : &f->plain)->cb, err))
            return -1;
        const vk_family *side = p < hx->n_layers && sides && sides[p].plain.cb ? &sides[p] : NULL;
        VkCommandBuffer side_cb = side ? (timed ? &side->full : &side->plain)->cb : VK_NULL_HANDLE;
        if (side && side_early && vk_submit(&e->c, side_cb, err))
            return -1;
        if (vk_fence_wait(&e->c, spin, err))
            return -1;
        double t1 = vk_hostmoe_now_us();
        hm->wait += t1 - t0;
        if (p == 0)
            hm->first = t0;
        else
            hm->turn += t0 - hm->seen;
        hm->seen = t1;
        if (p == hx->n_layers)
            break;
        if (side && !side_early && vk_submit(&e->c, side_cb, err))
            return -1;
        uint32_t il = hx->layer[p];
        double c0 = vk_hostmoe_now_us();
        if (cpu_moe_host_eval(hx->cpu, &e->m->layers[il], (const float *)hx->xn.map, (const int32_t *)hx->ids.map,
                              (const float *)hx->wts.map, n, (float *)hx->y.map, err))
            return err_prefix(err, "layer %u's routed experts on the CPU", il);
        hm->cpu += vk_hostmoe_now_us() - c0;
    }
    double end = vk_hostmoe_now_us();
    if (stretch_us && end - looked > *stretch_us)
        *stretch_us = end - looked;
    return 0;
}

/* Marks [q, q + n) into hx->ts (0), or -1 where one is not there yet. */
static int read_marks(vk_engine *e, uint32_t q, uint32_t n)
{
    vk_hostmoe *hx = &e->hx;
    return vkGetQueryPoolResults(e->c.dev, hx->qpool, q, n, n * sizeof *hx->ts, &hx->ts[q], sizeof *hx->ts,
                                 VK_QUERY_RESULT_64_BIT) == VK_SUCCESS
               ? 0
               : -1;
}

/* The token's GPU marks with its host marks into hx->sum; a token whose
 * marks are not all there yet (a side part's end may trail the fence) or
 * out of order is left out. */
static void add_token(vk_engine *e, const vk_host_marks *hm)
{
    vk_hostmoe *hx = &e->hx;
    uint32_t np = hx->n_parts, n_sides = 0;
    for (uint32_t i = 0; i < hx->n_layers; i++)
        n_sides += hx->sides[i].plain.cb != VK_NULL_HANDLE;
    /* the parts' marks, then the side parts' (one call where every host
     * layer has one; a layer without one never wrote its pair) */
    uint64_t *ts = hx->ts;
    if (read_marks(e, 0, 2 * np))
        return;
    for (uint32_t i = 0; i < hx->n_layers && n_sides; i++)
        if (n_sides == hx->n_layers ? i == 0 && read_marks(e, 2 * np, 2 * n_sides)
                                    : hx->sides[i].plain.cb && read_marks(e, 2 * (np + i), 2))
            return;
    double per_us = e->c.ts_period_ns / 1000.0, gpu = 0, idle = 0, side = 0;
    for (uint32_t p = 0; p < np; p++) {
        if (ts[2 * p + 1] < ts[2 * p] || (p > 0 && ts[2 * p] < ts[2 * p - 1]))
            return;
        gpu += (double)(ts[2 * p + 1] - ts[2 * p]) * per_us;
        if (p > 0)
            idle += (double)(ts[2 * p] - ts[2 * p - 1]) * per_us;
    }
    for (uint32_t i = 0; i < hx->n_layers; i++) {
        const uint64_t *s = &ts[2 * (np + i)];
        if (!hx->sides[i].plain.cb)
            continue;
        if (s[1] < s[0])
            return;
        side += (double)(s[1] - s[0]) * per_us;
    }
    engine_split_stat *sum = &hx->sum;
    sum->tokens++;
    sum->token_us += hm->seen - hm->first;
    sum->gpu_us += gpu;
    sum->idle_us += idle;
    sum->wait_us += hm->wait;
    sum->cpu_us += hm->cpu;
    sum->turn_us += hm->turn;
    sum->side_us += side;
}

/* Of the tokens the sampled profiler times, one in this many has every
 * dispatch of its parts timed (the kernel table) instead of its breakdown
 * measured: a timestamp serializes the GPU (~4 us a dispatch on the H200,
 * ~6 ms over a GLM-4.7-Flash token), so with prof_every 4 this costs about
 * 1 % of decode. */
#define PARTS_TIMED_EVERY 8

int vk_hostmoe_decode(vk_engine *e, bool measure, err_t *err)
{
    vk_host_marks hm;
    vk_hostmoe *hx = &e->hx;
    bool full = e->p.profile == PROFILE_FULL ||
                (measure && (hx->measured++ % PARTS_TIMED_EVERY) == 0);
    const vk_family *last = &hx->parts[hx->n_layers];
    if (hx->sem_gpu ? vk_hostmoe_run_linked(e, hx->parts, last, hx->sides, 1, full, &hm, err)
                    : run_parts(e, hx->parts, last, hx->sides, 1, full, &hm, NULL, NULL, err))
        return -1;
    if (measure && !full) /* a fully timed token runs slower: not the breakdown's */
        add_token(e, &hm);
    for (uint32_t p = 0; full && p < hx->n_parts; p++) {
        vk_profile_collect(e, &hx->parts[p], &hx->parts[p].full, &hx->prof[p]);
        if (p < hx->n_layers && hx->sides[p].plain.cb)
            vk_profile_collect(e, &hx->sides[p], &hx->sides[p].full, &hx->prof[hx->n_parts + p]);
    }
    return 0;
}

void vk_hostmoe_kernel_stats(const vk_engine *e, engine_stats *st)
{
    const vk_hostmoe *hx = &e->hx;
    st->n_kernels = 0;
    st->dispatches_per_token = 0;
    st->us_per_token_measured = 0;
    for (uint32_t i = 0; i < hx->n_parts + hx->n_layers; i++) {
        const vk_family *f = i < hx->n_parts ? &hx->parts[i] : &hx->sides[i - hx->n_parts];
        if (!f->plain.cb)
            continue;
        vk_profile_add(f, &hx->prof[i], 1.0, st);
        st->dispatches_per_token += f->prog.n_dep + 1;
        st->us_per_token_measured += hx->prof[i].token_us;
    }
}

void vk_hostmoe_split_stat(const vk_engine *e, engine_split_stat *st)
{
    const engine_split_stat *s = &e->hx.sum;
    memset(st, 0, sizeof *st);
    st->layers = e->hx.n_layers;
    st->streamed = e->hx.ps_batches;
    st->stream_s = e->hx.ps_s;
    st->layout_s = e->hx.ps_layout_s;
    st->stall_s = e->hx.ps_stall_s;
    st->packed_bytes = e->hx.cpu ? cpu_moe_host_packed_bytes(e->hx.cpu) : 0;
    st->tokens = s->tokens;
    if (!s->tokens)
        return;
    double k = 1.0 / (double)s->tokens;
    st->token_us = s->token_us * k;
    st->gpu_us = s->gpu_us * k;
    st->idle_us = s->idle_us * k;
    st->wait_us = s->wait_us * k;
    st->cpu_us = s->cpu_us * k;
    st->turn_us = s->turn_us * k;
    st->side_us = s->side_us * k;
}

/* A part at a time, whatever the hand-over (--tune hx): a prompt chunk
 * stops between host layers when Esc sets the engine's cancel flag, so the
 * chat cuts its chunks for throughput (engine.h's
 * ENGINE_CHUNK_S_CANCELLABLE) -- the linked hand-over submits every part
 * at once, which would leave the rest of the batch's layers to run after
 * a cancel.  What the part-by-part hand-over costs, ~10 us a host layer
 * against hx=2's (run 40), is nothing beside a chunk's CPU experts
 * (~0.4 s a chunk at N = 47 on the H200's host, ~36 ms a layer). */
bool vk_hostmoe_stream_pick(uint32_t n, uint32_t threshold, uint64_t streamed, double streamed_s,
                            uint64_t cpu_tokens, double cpu_s)
{
    if (streamed && cpu_tokens)
        return streamed_s / (double)streamed < cpu_s / (double)cpu_tokens * n;
    return threshold && n >= threshold;
}

int vk_hostmoe_prefill(vk_engine *e, uint32_t n, bool logits, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    if (hx->ps_parts &&
        vk_hostmoe_stream_pick(n, e->tune.hx_stream, hx->ps_batches, hx->ps_s, hx->pf_cpu_tokens, hx->pf_cpu_s))
        return vk_hostmoe_stream_prefill(e, n, logits, err);
    vk_host_marks hm;
    double stretch_us = 0, t0 = vk_hostmoe_now_us();
    int rc = run_parts(e, hx->pf_parts, logits ? &hx->pf_last_logits : &hx->pf_parts[hx->n_layers], NULL, n, false,
                       &hm, e->cancel, &stretch_us, err);
    hx->pf_stretch_s = e->cancel ? stretch_us * 1e-6 : 0;
    if (rc == 0) {
        hx->pf_cpu_s += (vk_hostmoe_now_us() - t0) * 1e-6;
        hx->pf_cpu_tokens += n;
    }
    return rc;
}

uint32_t vk_hostmoe_links(const vk_engine *e)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < e->hx.n_parts && e->hx.parts; p++)
        n += e->hx.parts[p].prog.n_link;
    return n;
}

void vk_hostmoe_free(vk_engine *e)
{
    vk_hostmoe *hx = &e->hx;
    vk_hostmoe_unrecord(e);
    vk_hostmoe_stream_free(e);
    if (hx->qpool)
        vkDestroyQueryPool(e->c.dev, hx->qpool, NULL);
    if (hx->sem_gpu)
        vkDestroySemaphore(e->c.dev, hx->sem_gpu, NULL);
    if (hx->sem_host)
        vkDestroySemaphore(e->c.dev, hx->sem_host, NULL);
    free(hx->ts);
    for (uint32_t i = 0; hx->prof && i < 2 * hx->n_layers + 1; i++)
        vk_profile_free(&hx->prof[i]);
    free(hx->prof);
    cpu_moe_host_free(hx->cpu);
    free(hx->host);
    free(hx->layer);
    memset(hx, 0, sizeof *hx);
}
