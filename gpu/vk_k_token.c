/* vk_k_token.c: the token in and out (vk_kernels.h): the embedding rows
 * and the top-K + logsumexp of the logits.  Their interfaces:
 * shaders/pc_token.h. */
#include "pc_token.h"
#include "vk_k_common.h"

int vk_k_embed(const vk_kb *k, const vk_embed_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = VKK_WGS;
    spec[EMBED_S_TYPE] = w->type;
    memset(out, 0, sizeof *out);
    out->name = "embed";
    if (!(out->pipe = pipe(k, SPV_EMBED, spec, EMBED_S_COUNT)))
        return -1;
    out->w[0] = w->buf;
    out->b[EMBED_B_TOKENS] = a->tokens.b;
    out->b[EMBED_B_X] = a->x.b;
    pc_embed pc = {.K = w->K, .Kp = w->Kp, .hbase = (uint32_t)w->head_off, .tok_off = a->tokens.off,
                   .x_off = a->x.off, .x_z = a->x_z, .n_vocab = w->N, .check_batch = a->check_batch ? 1 : 0};
    VK_PUSH(out, pc);
    out->groups[0] = ceil_div(ceil_div(w->K, 4), VKK_WGS);
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
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = 256;
    spec[TOPK_S_SG] = k->c->subgroup;
    memset(out, 0, sizeof *out);
    out->name = "topk";
    if (!(out->pipe = pipe(k, SPV_TOPK, spec, TOPK_S_COUNT)))
        return -1;
    out->b[TOPK_B_LOGITS] = a->logits.b;
    out->b[TOPK_B_CAND_V] = a->cand_v;
    out->b[TOPK_B_CAND_I] = a->cand_i;
    out->b[TOPK_B_MS] = a->ms;
    out->b[TOPK_B_COUNT] = a->counter;
    out->b[TOPK_B_OUT_IDS] = a->out_ids;
    out->b[TOPK_B_OUT_VALS] = a->out_vals;
    out->b[TOPK_B_PARAMS] = a->params;
    pc_topk pc = {.N = a->n, .Kc = a->params.buf ? 0 : a->k, .slice = a->geom.slice, .l_off = a->logits.off,
                  .k_in_params = a->params.buf ? 1 : 0};
    VK_PUSH(out, pc);
    out->groups[0] = a->geom.n_slices;
    out->groups[1] = out->groups[2] = 1;
    out->bytes = 4ull * a->n;
    return 0;
}
