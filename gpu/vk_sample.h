/* vk_sample.h: sampling on the GPU (core/sample/sampler.h's definition): the
 * builders of sample_cand, sample_pick and sample_select
 * (gpu/vk_k_sample.c, shaders/sample_*.comp, interfaces in
 * shaders/pc_sample.h) and the host's half -- the sampling words written
 * per token.  Internal to gpu/.
 *
 * Per token the decode graph ends with sample_cand (penalties, the K best
 * tokens), sample_pick (the token, or "select"; with min-p binding first it
 * draws over the whole vocabulary itself) and the passes of sample_select's
 * top-p cut and draw over the whole vocabulary, on grids that sample_pick
 * sets to nothing unless the candidates cannot hold the kept tokens (a flat
 * distribution).  Only where a top-k beyond the
 * candidates has to be found too does the engine submit a second, recorded
 * program of all three selections.  The host reads back a few words
 * (shaders/pc_sample.h's result). */
#ifndef GLM_VK_SAMPLE_H
#define GLM_VK_SAMPLE_H

#include "sample/sampler.h"
#include "pc_sample.h"
#include "vk_kernels.h"

/* How the vocabulary is cut: n_slices workgroups of `slice` = 256 * per
 * tokens (at most SMP_MAX_SLICES), tie bins of `block` ids. */
typedef struct {
    uint32_t n, n_slices, slice, per, block;
} vk_sample_geom;
int vk_sample_geom_init(const vk_ctx *c, uint32_t n_vocab, vk_sample_geom *g, err_t *err);

/* Bytes of each buffer the kernels use (vk_sample_bufs). */
uint64_t vk_sample_bytes(int which);
enum {
    VK_SMP_WORDS,   /* the sampling words (host-written, device-read) */
    VK_SMP_CAND,    /* [SMP_MAX_SLICES + 1][SMP_KMAX] values; the same again for ids */
    VK_SMP_MS,      /* [SMP_MAX_SLICES] (max, sum) */
    VK_SMP_PART,    /* [2][SMP_MAX_SLICES] uvec2 */
    VK_SMP_COUNT,   /* the two kernels' finished-workgroup counters (zero between uses) */
    VK_SMP_RESULT,  /* host-visible */
    VK_SMP_STATE,
    VK_SMP_HIST,    /* zero between uses */
};

typedef struct {
    const vk_sample_geom *g;
    vk_vec logits;             /* penalised in place */
    vk_buf smp, cand_v, cand_i, ms, part, counter, result, state, hist;
    vk_buf pick_ind;           /* smp at SMP_PICK_IND: sample_pick's grid */
    vk_buf sel_ind[2];         /* state at SST_IND: selections 1 and 2's grids after sample_pick */
    vk_buf out_ids, out_vals;  /* host: the K best and the logsumexp, when asked (SMP_F_HOST_TOPK) */
} vk_sample_bufs;

int vk_k_sample_cand(const vk_kb *k, const vk_sample_bufs *b, vk_call *out);
/* Grid from the sampling words (SMP_PICK_IND); `tail`: the program goes on
 * with selections 1 and 2 on the grids sample_pick sets (sel_ind). */
int vk_k_sample_pick(const vk_kb *k, const vk_sample_bufs *b, bool tail, vk_call *out);
/* Pass `pass` (below vk_sample_passes(sel)) of selection sel
 * (shaders/sample_select.comp); `tail`: on sample_pick's grid for it (sel 1
 * or 2), else on the whole vocabulary. */
int vk_k_sample_select(const vk_kb *k, const vk_sample_bufs *b, uint32_t sel, uint32_t pass, bool tail,
                       vk_call *out);

/* The passes of selection sel: 5 for the top-k bound (0) and the top-p cut
 * (1), a radix select on the order's key; 1 for the draw (2), which walks
 * the ids. */
uint32_t vk_sample_passes(uint32_t sel);

/* Which selections besides the draw can run for rq (when sample_pick asks
 * for the whole vocabulary): the engine records one program per set. */
enum { VK_SEL_TOPK = 1, VK_SEL_TOPP = 2, VK_SEL_SETS = 4 };
uint32_t vk_sample_selections(const vk_sample_geom *g, const sampler_request *rq);

/* Writes one token's sampling words: the request rq (NULL: no token, only
 * candidates) and how many candidates the host wants back with the
 * logsumexp (host_k, 0: none). */
void vk_sample_write(const vk_sample_geom *g, uint32_t *words, const sampler_request *rq, uint32_t host_k);

#endif
