/* vk_k_token.c: the token in and out (vk_kernels.h): the embedding rows
 * and the top-K + logsumexp of the logits. */
#include "vk_k_common.h"

int vk_k_embed(const vk_kb *k, const vk_embed_args *a, vk_call *out)
{
    const vk_tensor *w = a->w;
    uint32_t spec[] = {VKK_WGS, w->type};
    memset(out, 0, sizeof *out);
    out->name = "embed";
    out->pipe = pipe(k, SPV_EMBED, spec, 2);
    if (!out->pipe)
        return -1;
    out->w[0] = w->buf;
    out->b[0] = a->tokens.b;
    out->b[1] = a->x.b;
    uint32_t *p = out->push;
    p[0] = w->K;
    p[1] = w->Kp;
    p[2] = (uint32_t)w->head_off;
    p[3] = a->tokens.off;
    p[4] = a->x.off;
    p[5] = a->x_z;
    p[6] = w->N;
    p[7] = a->check_batch ? 1 : 0;
    out->npush = 8;
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
    uint32_t spec[] = {256, k->c->subgroup};
    memset(out, 0, sizeof *out);
    out->name = "topk";
    out->pipe = pipe(k, SPV_TOPK, spec, 2);
    if (!out->pipe)
        return -1;
    out->b[0] = a->logits.b;
    out->b[1] = a->cand_v;
    out->b[2] = a->cand_i;
    out->b[3] = a->ms;
    out->b[4] = a->counter;
    out->b[5] = a->out_ids;
    out->b[6] = a->out_vals;
    out->b[7] = a->params;
    uint32_t *p = out->push;
    p[0] = a->n;
    p[1] = a->params.buf ? 0 : a->k;
    p[2] = a->geom.slice;
    p[3] = a->logits.off;
    p[4] = a->params.buf ? 1 : 0;
    out->npush = 5;
    out->groups[0] = a->geom.n_slices;
    out->groups[1] = out->groups[2] = 1;
    out->bytes = 4ull * a->n;
    return 0;
}
