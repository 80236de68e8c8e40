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
 * ~1 ms of CPU experts. */
#include <stdlib.h>
#include <string.h>

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

int vk_hostmoe_start(vk_engine *e, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    if (!hx->n_layers)
        return 0;
    const model_config *c = &e->m->cfg;
    cpu_moe_host_params cp = {.n_embd = c->n_embd, .n_ff = c->n_ff_exp, .n_expert = c->n_expert,
                              .n_used = c->n_expert_used, .n_batch = e->b.n_batch, .n_threads = e->p.n_threads};
    if (!(hx->cpu = cpu_moe_host_new(&cp, err)))
        return err_prefix(err, "the CPU's experts");
    float *one = (float *)hx->one.map;
    for (uint32_t t = 0; t < e->b.n_batch; t++)
        one[t] = 1.0f;
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
        if (vk_family_build(e, &hx->parts[p], VK_PROGRAM_DECODE_PART, p, VK_FAMILY_PLAIN, err))
            return err_prefix(err, "recording part %u of the decode graph", p);
    hx->sides = calloc(hx->n_layers, sizeof *hx->sides);
    if (!hx->sides)
        return err_set(err, "out of host memory");
    for (uint32_t i = 0; i < hx->n_layers; i++)
        if (e->m->layers[hx->layer[i]].gate_shexp.data &&
            vk_family_build(e, &hx->sides[i], VK_PROGRAM_DECODE_SIDE, i, VK_FAMILY_PLAIN, err))
            return err_prefix(err, "recording host layer %u's shared expert", hx->layer[i]);
    if (e->b.n_batch <= 1)
        return 0;
    hx->pf_parts = calloc(hx->n_parts, sizeof *hx->pf_parts);
    if (!hx->pf_parts)
        return err_set(err, "out of host memory");
    for (uint32_t p = 0; p < hx->n_parts; p++)
        if (vk_family_build(e, &hx->pf_parts[p], VK_PROGRAM_PREFILL_PART, p, VK_FAMILY_PLAIN, err))
            return err_prefix(err, "recording part %u of the prompt graph", p);
    if (vk_family_build(e, &hx->pf_last_logits, VK_PROGRAM_PREFILL_LOGITS_PART, hx->n_layers, VK_FAMILY_PLAIN, err))
        return err_prefix(err, "recording the prompt graph's last part");
    return 0;
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
 * the CPU's turns. */
static int run_parts(vk_engine *e, const vk_family *parts, const vk_family *last, const vk_family *sides, uint32_t n,
                     err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    for (uint32_t p = 0; p < hx->n_parts; p++) {
        if (vk_submit_wait(&e->c, (p == hx->n_layers ? last : &parts[p])->plain.cb, err))
            return -1;
        if (p == hx->n_layers)
            break;
        if (sides && sides[p].plain.cb && vk_submit(&e->c, sides[p].plain.cb, err))
            return -1;
        uint32_t il = hx->layer[p];
        if (cpu_moe_host_eval(hx->cpu, &e->m->layers[il], (const float *)hx->xn.map, (const int32_t *)hx->ids.map,
                              (const float *)hx->wts.map, n, (float *)hx->y.map, err))
            return err_prefix(err, "layer %u's routed experts on the CPU", il);
    }
    return 0;
}

int vk_hostmoe_decode(vk_engine *e, err_t *err)
{
    return run_parts(e, e->hx.parts, &e->hx.parts[e->hx.n_layers], e->hx.sides, 1, err);
}

int vk_hostmoe_prefill(vk_engine *e, uint32_t n, bool logits, err_t *err)
{
    const vk_hostmoe *hx = &e->hx;
    return run_parts(e, hx->pf_parts, logits ? &hx->pf_last_logits : &hx->pf_parts[hx->n_layers], NULL, n, err);
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
    cpu_moe_host_free(hx->cpu);
    free(hx->host);
    free(hx->layer);
    memset(hx, 0, sizeof *hx);
}
