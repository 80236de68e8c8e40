/* vk_k_sample.c: sampling on the GPU (vk_sample.h): the geometry, the
 * three kernels' builders and the sampling words the host writes per
 * token.  Interfaces: shaders/pc_sample.h. */
#include <string.h>

#include "vk_k_common.h"
#include "vk_sample.h"

#define SMP_WGS 256u /* sample_select: one thread per bin of a key byte */

int vk_sample_geom_init(const vk_ctx *c, uint32_t n_vocab, vk_sample_geom *g, err_t *err)
{
    /* the workgroup reductions keep one word per subgroup in 64 (256
     * threads); sample_cand's subgroups take turns through the merges'
     * 32 lists where there are more than 32 of them (subgroups of 4) */
    if (c->subgroup < SMP_WGS / 64)
        return err_set(err, "the sampling kernels need subgroups of at least %u lanes (the device has %u)",
                       SMP_WGS / 64, c->subgroup);
    if (n_vocab == 0)
        return err_set(err, "sampling: empty vocabulary");
    g->n = n_vocab;
    g->per = ceil_div(n_vocab, (uint64_t)SMP_MAX_SLICES * SMP_WGS);
    g->slice = SMP_WGS * g->per;
    g->n_slices = ceil_div(n_vocab, g->slice);
    g->block = ceil_div(n_vocab, SMP_TIE_BINS);
    return 0;
}

uint64_t vk_sample_bytes(int which)
{
    switch (which) {
    case VK_SMP_WORDS: return (SMP_PEN + 2ull * SMP_PEN_MAX) * 4;
    case VK_SMP_CAND: return (SMP_MAX_SLICES + 1ull) * SMP_KMAX * 4;
    case VK_SMP_MS: return SMP_MAX_SLICES * 8ull;
    case VK_SMP_PART: return 3ull * SMP_MAX_SLICES * 8;
    case VK_SMP_COUNT: return 16;
    case VK_SMP_RESULT: return SMPR_WORDS * 4ull;
    case VK_SMP_STATE: return SST_WORDS * 4ull;
    case VK_SMP_HIST: return (SMP_HIST_WORDS + 3ull * SMP_TIE_BINS) * 4;
    default: return 0;
    }
}

int vk_k_sample_cand(const vk_kb *k, const vk_sample_bufs *b, vk_call *out)
{
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = SMP_WGS;
    spec[SCAND_S_PER] = b->g->per;
    memset(out, 0, sizeof *out);
    out->name = "sample_cand";
    if (!(out->pipe = pipe(k, SPV_SAMPLE_CAND, spec, SCAND_S_COUNT)))
        return -1;
    out->b[SCAND_B_LOGITS] = b->logits.b;
    out->b[SCAND_B_CAND_V] = b->cand_v;
    out->b[SCAND_B_CAND_I] = b->cand_i;
    out->b[SCAND_B_MS] = b->ms;
    out->b[SCAND_B_COUNT] = b->counter;
    out->b[SCAND_B_OUT_IDS] = b->out_ids;
    out->b[SCAND_B_OUT_VALS] = b->out_vals;
    out->b[SCAND_B_SMP] = b->smp;
    out->b[SCAND_B_STATE] = b->state;
    pc_sample_cand pc = {.n = b->g->n, .slice = b->g->slice, .l_off = b->logits.off};
    VK_PUSH(out, pc);
    out->groups[0] = b->g->n_slices;
    out->groups[1] = out->groups[2] = 1;
    out->bytes = 4ull * b->g->n;
    return 0;
}

int vk_k_sample_pick(const vk_kb *k, const vk_sample_bufs *b, bool tail, vk_call *out)
{
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = SMP_WGS;
    memset(out, 0, sizeof *out);
    out->name = "sample_pick";
    if (!(out->pipe = pipe(k, SPV_SAMPLE_PICK, spec, SPICK_S_COUNT)))
        return -1;
    out->b[SPICK_B_LOGITS] = b->logits.b;
    out->b[SPICK_B_CAND_V] = b->cand_v;
    out->b[SPICK_B_CAND_I] = b->cand_i;
    out->b[SPICK_B_PART] = b->part;
    out->b[SPICK_B_COUNT] = b->counter;
    out->b[SPICK_B_RESULT] = b->result;
    out->b[SPICK_B_SMP] = b->smp;
    out->b[SPICK_B_STATE] = b->state;
    pc_sample_pick pc = {.n = b->g->n, .slice = b->g->slice, .l_off = b->logits.off, .tail = tail ? 1u : 0u};
    VK_PUSH(out, pc);
    out->indirect = &b->pick_ind;
    out->groups[0] = b->g->n_slices; /* at most; the host writes the grid per token */
    out->groups[1] = out->groups[2] = 1;
    out->bytes = 4ull * b->g->n;
    return 0;
}

int vk_k_sample_select(const vk_kb *k, const vk_sample_bufs *b, uint32_t sel, uint32_t pass, bool tail,
                       vk_call *out)
{
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = SMP_WGS;
    memset(out, 0, sizeof *out);
    out->name = "sample_select";
    if (!(out->pipe = pipe(k, SPV_SAMPLE_SELECT, spec, SSEL_S_COUNT)))
        return -1;
    out->b[SSEL_B_LOGITS] = b->logits.b;
    out->b[SSEL_B_HIST] = b->hist;
    out->b[SSEL_B_STATE] = b->state;
    out->b[SSEL_B_RESULT] = b->result;
    out->b[SSEL_B_SMP] = b->smp;
    pc_sample_select pc = {.n = b->g->n, .slice = b->g->slice, .l_off = b->logits.off, .sel = sel, .pass = pass,
                           .block = b->g->block};
    VK_PUSH(out, pc);
    if (tail && (sel == 0 || sel > 2))
        return err_set(k->err, "internal: sample_select %u on sample_pick's grid", sel);
    if (sel > 2 || pass >= vk_sample_passes(sel))
        return err_set(k->err, "internal: sample_select %u has no pass %u", sel, pass);
    if (tail)
        out->indirect = &b->sel_ind[sel - 1];
    out->groups[0] = b->g->n_slices; /* at most, on sample_pick's grid */
    out->groups[1] = out->groups[2] = 1;
    out->bytes = 4ull * b->g->n;
    return 0;
}

uint32_t vk_sample_passes(uint32_t sel)
{
    return sel == 2 ? 1u : 5u;
}

uint32_t vk_sample_selections(const vk_sample_geom *g, const sampler_request *rq)
{
    uint32_t k = g->n < SMP_KMAX ? g->n : SMP_KMAX;
    return (rq->top_k > k && rq->top_k < g->n ? VK_SEL_TOPK : 0) | (rq->top_p_on ? VK_SEL_TOPP : 0);
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

void vk_sample_write(const vk_sample_geom *g, uint32_t *w, const sampler_request *rq, uint32_t host_k)
{
    uint32_t flags = host_k ? SMP_F_HOST_TOPK : 0, K = host_k ? host_k : 1, groups = 0;
    if (rq) {
        flags |= SMP_F_PICK;
        groups = 1;
        if (!sampler_request_draws(rq)) { /* greedy, or an inverse temperature the draw cannot use */
            flags |= SMP_F_GREEDY;
        } else {
            /* with top-k <= SMP_KMAX the candidates are C itself */
            uint32_t want = rq->top_k > 0 && rq->top_k < SMP_KMAX ? rq->top_k : SMP_KMAX;
            K = want > K ? want : K;
            flags |= (rq->top_p_on ? SMP_F_TOPP : 0) | (rq->min_p_on ? SMP_F_MINP : 0);
            if (rq->top_p_on && rq->top_k == 0 && g->n > (K < g->n ? K : g->n)) {
                flags |= SMP_F_MASS; /* Z over the whole vocabulary: every slice adds its part */
                groups = g->n_slices;
            }
        }
        if (rq->penalties_on && rq->n_pen)
            flags |= SMP_F_PEN;
        uint32_t np = rq->n_pen < SMP_PEN_MAX ? rq->n_pen : SMP_PEN_MAX;
        w[SMP_TOPK] = rq->top_k;
        w[SMP_TOPP] = rq->top_p_q32;
        w[SMP_LOG_MINP] = fbits(rq->log_min_p);
        w[SMP_INV_T] = fbits(rq->inv_temp);
        w[SMP_RP] = fbits(rq->rp);
        w[SMP_INV_RP] = fbits(rq->inv_rp);
        w[SMP_FREQ] = fbits(rq->freq);
        w[SMP_PRES] = fbits(rq->pres);
        w[SMP_UNIFORM] = rq->uniform;
        w[SMP_NPEN] = (flags & SMP_F_PEN) ? np : 0;
        for (uint32_t i = 0; (flags & SMP_F_PEN) && i < np; i++) {
            w[SMP_PEN + 2 * i] = (uint32_t)rq->pen_ids[i];
            w[SMP_PEN + 2 * i + 1] = rq->pen_counts[i];
        }
    }
    K = K < g->n ? K : g->n;
    w[SMP_FLAGS] = flags;
    w[SMP_K] = K < SMP_KMAX ? K : SMP_KMAX;
    w[SMP_PICK_IND] = groups;
    w[SMP_PICK_IND + 1] = 1;
    w[SMP_PICK_IND + 2] = 1;
}
