/* vk_hostmoe_stream.c: a prompt batch with routed experts in host memory,
 * the experts brought to the GPU instead of computed by the CPU.
 *
 * Why: the CPU computes a host layer's experts for a batch at ~4-6 ms a
 * token on a 16-core host (gpu/PERF.md runs 42-43: pp512 0.46-0.80x
 * llama.cpp's `-ncmoe 47`, which copies the experts to the GPU for a big
 * batch), while bringing one layer's experts over (~280-350 MB of a Q3_K /
 * Q4_0 file) costs a fixed ~10-15 ms whatever the batch.  So batches of at
 * least tune.hx_stream tokens stream; smaller ones (a chat's short turns)
 * keep the CPU's path (vk_hostmoe.c).
 *
 * How: the prompt graph is cut before each host layer's MoE (part i + 1
 * begins with host layer i's MoE).  The host's threads lay host layer i's
 * experts out in the GPU's layout (vk_layout.c, as the upload does) into
 * staging buffer i % 2 (host-visible); part i + 1 begins by copying it
 * into the device slot, then runs the prompt graph's own MoE kernels
 * (vk_prefill.c ffn_moe) on the slot: the same kernels on the same bytes
 * as with every expert on the device, so the logits are those of the
 * unsplit prompt graph, bit for bit.
 *
 * The overlap: part i + 1 is submitted as soon as layer i is laid out; the
 * host then lays out layer i + 1 into the other staging buffer while the GPU
 * copies and runs -- it only waits for the part that last copied from that
 * buffer (part i), so the host's layout and the GPU's copy + compute of the
 * layer before run side by side.  One slot is enough: the queue runs the
 * copies and the kernels in order anyway, and a part's first barrier orders
 * its copy after the previous layer's MoE has read the slot.
 *
 * Cancel (Esc): looked at between layers, as the CPU's path does; the
 * parts in flight are waited for before returning 1 (nothing in flight). */
#include <stdlib.h>
#include <string.h>

#include "vk_engine.h"

#define N_FENCES 3 /* parts i - 1 (being waited for), i and i + 1 */

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* Host layer i's three expert tensors in the slot from offset 0 (their
 * bufs' offsets relative to the slot); returns the bytes they take. */
static uint64_t layer_tensors(const vk_engine *e, uint32_t i, vk_tensor *t)
{
    const model_layer *L = &e->m->layers[e->hx.layer[i]];
    const mtensor *src[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
    uint64_t off = 0;
    for (int k = 0; k < 3; k++) {
        memset(&t[k], 0, sizeof t[k]);
        vk_tensor_shape(src[k], NULL, e->c.align, &t[k]);
        off = align_up(off, e->c.align);
        t[k].buf.off = off;
        t[k].buf.size = t[k].bytes;
        off += t[k].bytes;
    }
    return off;
}

uint64_t vk_hostmoe_stream_bytes(const vk_engine *e)
{
    if (!e->hx.n_layers || e->b.n_batch <= 1 || !e->tune.hx_stream)
        return 0;
    uint64_t most = 0;
    vk_tensor t[3];
    for (uint32_t i = 0; i < e->hx.n_layers; i++) {
        uint64_t b = layer_tensors(e, i, t);
        most = b > most ? b : most;
    }
    return most;
}

int vk_hostmoe_stream_record(vk_engine *e, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    if (!hx->slot_bytes)
        return 0;
    if (!hx->st && !(hx->st = calloc(3ull * hx->n_layers, sizeof *hx->st)))
        return err_set(err, "out of host memory");
    for (uint32_t i = 0; i < hx->n_layers; i++) {
        vk_tensor *t = &hx->st[3 * i];
        if (layer_tensors(e, i, t) > hx->slot.size)
            return err_set(err, "internal: host layer %u's experts do not fit the slot", hx->layer[i]);
        for (int k = 0; k < 3; k++) {
            uint64_t off = t[k].buf.off;
            t[k].buf = hx->slot;
            t[k].buf.off += off;
            t[k].buf.size = t[k].bytes;
        }
    }
    VkResult r;
    for (int f = 0; f < N_FENCES; f++) {
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        if (!hx->ps_fence[f] && (r = vkCreateFence(e->c.dev, &fi, NULL, &hx->ps_fence[f])) != VK_SUCCESS)
            return vk_fail(&e->c, err, r, "vkCreateFence");
    }
    if (!hx->ps_pool && !(hx->ps_pool = threadpool_new(e->p.n_threads, err)))
        return err_prefix(err, "the experts' layout threads");
    if (!(hx->ps_parts = calloc(hx->n_parts, sizeof *hx->ps_parts)))
        return err_set(err, "out of host memory");
    for (uint32_t p = 0; p < hx->n_parts; p++)
        if (vk_family_build(e, &hx->ps_parts[p], VK_PROGRAM_PREFILL_STREAM_PART, p, VK_FAMILY_PLAIN, err))
            return err_prefix(err, "recording part %u of the streamed prompt graph", p);
    if (e->p.all_logits && vk_family_build(e, &hx->ps_last_logits, VK_PROGRAM_PREFILL_LOGITS_STREAM_PART,
                                           hx->n_layers, VK_FAMILY_PLAIN, err))
        return err_prefix(err, "recording the streamed prompt graph's last part");
    return 0;
}

void vk_hostmoe_stream_unrecord(vk_engine *e)
{
    vk_hostmoe *hx = &e->hx;
    for (uint32_t p = 0; hx->ps_parts && p < hx->n_parts; p++)
        vk_family_free(e, &hx->ps_parts[p]);
    free(hx->ps_parts);
    hx->ps_parts = NULL;
    if (hx->ps_last_logits.plain.cb)
        vk_family_free(e, &hx->ps_last_logits);
    memset(&hx->ps_last_logits, 0, sizeof hx->ps_last_logits);
}

/* ---- the layout: host layer i's experts into a staging buffer --------------------- */

typedef struct {
    const mtensor *src;
    const vk_tensor *t; /* its shape and layout (t->buf.off relative to the staging buffer) */
    uint8_t *dst;       /* the staging buffer's mapping */
} layout_job;

/* Rows [b, e) of all the tensor's matrices, counted through. */
static void layout_rows(void *ctx, uint64_t b, uint64_t e, int tid)
{
    const layout_job *j = ctx;
    (void)tid;
    vk_qlayout q;
    vk_qlayout_of(j->t->type, &q);
    uint64_t row_body = (uint64_t)j->t->bpr * q.body, row_head = (uint64_t)j->t->bpr * q.head, N = j->t->N;
    uint8_t *body = j->dst + j->t->buf.off, *head = body + j->t->head_off;
    while (b < e) {
        /* one matrix at a time: rows of different matrices are nb2 apart */
        uint64_t m = b / N, r = b % N, n = N - r < e - b ? N - r : e - b;
        const uint8_t *s = (const uint8_t *)j->src->data + m * j->src->nb2 + r * j->src->nb1;
        vk_repack_rows(j->t->type, j->t->K, s, j->src->nb1, n, body + b * row_body, q.head ? head + b * row_head : NULL);
        b += n;
    }
}

static void lay_out(vk_engine *e, uint32_t i, uint8_t *dst)
{
    const model_layer *L = &e->m->layers[e->hx.layer[i]];
    const mtensor *src[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
    vk_tensor t[3];
    layer_tensors(e, i, t); /* offsets from 0: the staging buffer's own */
    for (int k = 0; k < 3; k++) {
        layout_job j = {.src = src[k], .t = &t[k], .dst = dst};
        /* ~64 rows an item: a few hundred KB, so 16 threads share a layer evenly */
        threadpool_for(e->hx.ps_pool, (uint64_t)t[k].N * t[k].n_mat, 64, layout_rows, &j);
    }
}

/* ---- a prompt batch ----------------------------------------------------------------- */

/* Waits for the parts in flight: fences [lo, hi) by part number. */
static int wait_parts(vk_engine *e, uint32_t lo, uint32_t hi, err_t *err)
{
    for (uint32_t p = lo; p < hi; p++)
        if (vk_wait_on(&e->c, e->hx.ps_fence[p % N_FENCES], 0, err))
            return -1;
    return 0;
}

int vk_hostmoe_stream_prefill(vk_engine *e, uint32_t n, bool logits, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    const uint32_t L = hx->n_layers;
    const vk_family *last = logits ? &hx->ps_last_logits : &hx->ps_parts[L];
    (void)n; /* the params the parts read were written by the caller */
    double looked = vk_hostmoe_now_us(), stretch = 0, t0 = looked, layout = 0, stall = 0;
    uint32_t waited = 0; /* parts [0, waited) are known done */
    if (vk_submit_on(&e->c, hx->ps_parts[0].plain.cb, hx->ps_fence[0], err))
        return -1;
    for (uint32_t i = 0; i < L; i++) {
        if (e->cancel && i > 0) {
            double now = vk_hostmoe_now_us();
            stretch = now - looked > stretch ? now - looked : stretch;
            looked = now;
            if (atomic_load(e->cancel)) {
                if (wait_parts(e, waited, i + 1, err))
                    return -1;
                hx->pf_stretch_s = stretch * 1e-6;
                return 1;
            }
        }
        /* staging buffer i % 2 was last copied by part i - 1 (layer i - 2) */
        double w0 = vk_hostmoe_now_us();
        if (i >= 2) {
            if (wait_parts(e, waited, i, err))
                return -1;
            waited = i;
        }
        double l0 = vk_hostmoe_now_us();
        lay_out(e, i, hx->stage[i % 2].map);
        stall += l0 - w0;
        layout += vk_hostmoe_now_us() - l0;
        const vk_family *f = i + 1 == L ? last : &hx->ps_parts[i + 1];
        if (vk_submit_on(&e->c, f->plain.cb, hx->ps_fence[(i + 1) % N_FENCES], err)) {
            (void)wait_parts(e, waited, i + 1, err);
            return -1;
        }
    }
    if (wait_parts(e, waited, L + 1, err))
        return -1;
    double now = vk_hostmoe_now_us();
    stretch = now - looked > stretch ? now - looked : stretch;
    hx->pf_stretch_s = e->cancel ? stretch * 1e-6 : 0;
    hx->ps_batches++;
    hx->ps_s += (now - t0) * 1e-6;
    hx->ps_layout_s += layout * 1e-6;
    hx->ps_stall_s += stall * 1e-6;
    return 0;
}

void vk_hostmoe_stream_free(vk_engine *e)
{
    vk_hostmoe *hx = &e->hx;
    vk_hostmoe_stream_unrecord(e);
    for (int f = 0; f < N_FENCES; f++)
        if (hx->ps_fence[f])
            vkDestroyFence(e->c.dev, hx->ps_fence[f], NULL);
    threadpool_free(hx->ps_pool);
    free(hx->st);
    hx->st = NULL;
    hx->ps_pool = NULL;
    memset(hx->ps_fence, 0, sizeof hx->ps_fence);
}
