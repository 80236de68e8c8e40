/* vk_graph.c: a graph's table (vk_graph.h) and what each node's kernel can
 * do, asked of its builder (vk_kernels.h, vk_sample.h). */
#include <stdlib.h>
#include <string.h>

#include "vk_graph.h"

int vk_graph_init(vk_graph *g, uint32_t cap, err_t *err)
{
    memset(g, 0, sizeof *g);
    g->err = err;
    g->cap = cap;
    g->cap_small = 2 * cap;
    g->nodes = calloc(cap ? cap : 1, sizeof *g->nodes);
    g->vecs = calloc(g->cap_small ? g->cap_small : 1, sizeof *g->vecs);
    g->bufs = calloc(g->cap_small ? g->cap_small : 1, sizeof *g->bufs);
    if (!g->nodes || !g->vecs || !g->bufs) {
        vk_graph_free(g);
        return err_set(err, "out of host memory");
    }
    return 0;
}

void vk_graph_free(vk_graph *g)
{
    free(g->nodes);
    free(g->vecs);
    free(g->bufs);
    g->nodes = NULL;
    g->vecs = NULL;
    g->bufs = NULL;
    g->n = g->cap = g->n_vecs = g->n_bufs = g->cap_small = 0;
}

static void full(vk_graph *g, const char *what)
{
    if (!g->status)
        g->status = err_set(g->err, "internal: a graph of more %s than its table holds (%u)", what, g->cap);
}

void vk_graph_add(vk_graph *g, const vk_node *n)
{
    if (g->n == g->cap)
        full(g, "nodes");
    else
        g->nodes[g->n++] = *n;
}

const vk_vec *vk_graph_vec(vk_graph *g, vk_vec v)
{
    if (g->n_vecs == g->cap_small) {
        full(g, "operands");
        return &g->vecs[0];
    }
    g->vecs[g->n_vecs] = v;
    return &g->vecs[g->n_vecs++];
}

const vk_buf *vk_graph_buf(vk_graph *g, vk_buf b)
{
    if (g->n_bufs == g->cap_small) {
        full(g, "operands");
        return &g->bufs[0];
    }
    g->bufs[g->n_bufs] = b;
    return &g->bufs[g->n_bufs++];
}

/* ---- what a node's kernel can do --------------------------------------------------------- */

bool vk_node_counts(const vk_kb *kb, const vk_node *n)
{
    switch (n->k.op) {
    case VK_OP_MV: return vk_mv_deps(kb, &n->k.a.mv);
    case VK_OP_GLU: return vk_glu_deps(kb, &n->k.a.glu);
    case VK_OP_MOE_DOWN: return vk_moe_down_deps(kb, &n->k.a.moe_down);
    case VK_OP_ROUTER: return vk_router_deps(kb, &n->k.a.router);
    case VK_OP_KV_STORE: return true;
    case VK_OP_ATTN: return vk_attn_deps(&n->k.a.attn);
    case VK_OP_ATTN_VB: return vk_attn_vb_deps(kb, &n->k.a.attn_vb);
    default: return false;
    }
}

/* The x-stationary matvec polls its input and writes its (not accumulated)
 * output as tagged words; kv_store polls kv and q. */
bool vk_node_tags(const vk_kb *kb, const vk_node *n, int i)
{
    switch (n->k.op) {
    case VK_OP_MV: return (i == 0 || (i < 0 && !n->k.a.mv.accumulate)) && vk_mv_deps(kb, &n->k.a.mv);
    case VK_OP_KV_STORE: return i >= 0;
    default: return false;
    }
}

vk_dep *vk_node_dep(vk_node *n)
{
    switch (n->k.op) {
    case VK_OP_MV: return &n->k.a.mv.dep;
    case VK_OP_GLU: return &n->k.a.glu.dep;
    case VK_OP_MOE_DOWN: return &n->k.a.moe_down.dep;
    case VK_OP_ROUTER: return &n->k.a.router.dep;
    case VK_OP_KV_STORE: return &n->k.a.kv_store.dep;
    case VK_OP_ATTN: return &n->k.a.attn.dep;
    case VK_OP_ATTN_VB: return &n->k.a.attn_vb.dep;
    default: return NULL;
    }
}

void vk_node_sites(vk_node *n, const uint32_t in[2], uint32_t out)
{
    vk_dep *d = vk_node_dep(n);
    if (!d)
        return;
    d->ll_in = in[0];
    d->ll_out = out;
    if (n->k.op == VK_OP_KV_STORE)
        n->k.a.kv_store.ll_q = in[1];
}

bool vk_node_waits_early(const vk_node *n)
{
    return n->k.op == VK_OP_MOE_DOWN;
}

bool vk_node_wait_early(vk_node *n, const vk_vec *word, uint32_t groups)
{
    if (!vk_node_waits_early(n))
        return false;
    n->k.a.moe_down.ids_wait = word;
    n->k.a.moe_down.ids_wait_n = groups;
    return true;
}

int vk_node_build(const vk_kb *kb, const vk_node *n, vk_call *out)
{
    const vk_kcall *c = &n->k;
    switch (c->op) {
    case VK_OP_EMBED: return vk_k_embed(kb, &c->a.embed, out);
    case VK_OP_MV: return vk_k_mv(kb, &c->a.mv, out);
    case VK_OP_GLU: return vk_k_glu(kb, &c->a.glu, out);
    case VK_OP_MOE_DOWN: return vk_k_moe_down(kb, &c->a.moe_down, out);
    case VK_OP_ROUTER: return vk_k_router(kb, &c->a.router, out);
    case VK_OP_KV_STORE: return vk_k_kv_store(kb, &c->a.kv_store, out);
    case VK_OP_ATTN: return vk_k_attn(kb, &c->a.attn, out);
    case VK_OP_ATTN_VB: return vk_k_attn_vb(kb, &c->a.attn_vb, out);
    case VK_OP_ATTN_COMBINE: return vk_k_attn_combine(kb, &c->a.attn_combine, out);
    case VK_OP_RMSNORM: return vk_k_rmsnorm(kb, &c->a.rmsnorm, out);
    case VK_OP_MM: return vk_k_mm(kb, &c->a.mm, out);
    case VK_OP_MOE_GROUP: return vk_k_moe_group(kb, &c->a.moe_group, out);
    case VK_OP_MOE_COMBINE: return vk_k_moe_combine(kb, &c->a.moe_combine, out);
    case VK_OP_TOPK: return vk_k_topk(kb, &c->a.topk, out);
    case VK_OP_SAMPLE_CAND: return vk_k_sample_cand(kb, &c->a.sample.b, out);
    case VK_OP_SAMPLE_PICK: return vk_k_sample_pick(kb, &c->a.sample.b, c->a.sample.tail, out);
    case VK_OP_SAMPLE_SELECT:
        return vk_k_sample_select(kb, &c->a.sample.b, c->a.sample.sel, c->a.sample.pass, c->a.sample.tail, out);
    }
    return err_set(kb->err, "internal: a node of unknown kind %d", (int)c->op);
}
