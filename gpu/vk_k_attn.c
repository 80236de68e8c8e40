/* vk_k_attn.c: the attention builders (vk_kernels.h): geometry and
 * chunking, the cache row, the chunk partials (attn, attn_fd), their
 * combine with v_b (decode) or alone (prefill). */
#include "vk_k_common.h"

/* attn_fd (decode on tensor cores): needs the f16 cache and cooperative
 * matrices, at most 32 heads, kv_lora and the row a multiple of 16 (the
 * fragments' width).  Its chunks
 * are cut by length (>= fd_min positions) up to a cap of chunks; a chunk of
 * several 32-position tiles takes them in one pass (online softmax). */
static void attn_fd_init(const vk_kb *k, vk_attn_geom *g)
{
    const vk_ctx *c = k->c;
    uint32_t mt = (g->n_head + 15) / 16, hg = 1;
    /* One head tile per workgroup, the head tiles side by side in the grid
     * (each reads the chunk's rows, from L2 the second time): half the
     * tensor-core and softmax work per tile on the chain (both tiles in one
     * workgroup measured slower, gpu/PERF.md run 17) */
    if (mt == 2)
        mt = 1, hg = 2;
    uint32_t ks = mt ? 8 / (2 * mt) : 0;
    if (!c->coopmat || !g->kv_f16 || mt < 1 || mt > 2 || g->kv_lora % 16 || g->RS % 16 || !k->tune->attn_fd)
        return;
    uint64_t rows = 16 * mt > 32 ? 16 * mt : 32; /* queries, then a tile's cache rows */
    uint64_t shared = 16ull * rows * (g->RS / 8 + 1) + 4ull * ks * 16 * mt * 32 + 16ull * 16 * mt * 5 + 4ull * 16 * mt;
    if (shared > c->shared_bytes)
        return;
    g->fd = true;
    g->fd_mt = mt;
    g->fd_hg = hg;
    g->dec_groups_y = hg;
    g->min_chunk = k->tune->fd_minchunk / 16 * 16;
    g->max_chunks = k->tune->fd_chunks;
}

int vk_attn_geom_init(const vk_kb *k, vk_attn_geom *g, uint32_t n_head, uint32_t kv_lora, uint32_t rope,
                      uint32_t nope, uint32_t v_head, bool kv_f16, uint32_t n_ctx, err_t *err)
{
    const vk_ctx *c = k->c;
    memset(g, 0, sizeof *g);
    if (kv_lora % 4 || kv_lora > 1024 || rope % 2 || kv_lora == 0 || n_head == 0)
        return err_set(err, "attention: kv_lora_rank %u / rope %u not supported by the Vulkan kernels "
                            "(need kv_lora a multiple of 4 up to 1024, rope even)", kv_lora, rope);
    g->n_head = n_head;
    g->kv_lora = kv_lora;
    g->rope = rope;
    g->nope = nope;
    g->v_head = v_head;
    g->kv_f16 = kv_f16;
    g->RS = (kv_lora + rope + 7) / 8 * 8;
    g->cmax = 256;
    g->wgs = kv_lora > 4 * VKK_WGS ? 256 : VKK_WGS;
    /* Heads per workgroup: few (4; 1, 2, 8 slower, gpu/PERF.md runs 2, 11),
     * so short contexts still spread over many workgroups; every head group
     * re-reads the chunk's rows, from L2.  Bounded by shared memory (queries
     * + scores + reductions). */
    uint32_t per_head = g->RS * 4 + g->cmax * 4 + 64 * 4;
    uint32_t hmax = (c->shared_bytes - 1024) / per_head;
    if (hmax < 1)
        return err_set(err, "attention: a %u-wide cache row does not fit in %u bytes of shared memory", g->RS,
                       c->shared_bytes);
    if (hmax > 4)
        hmax = 4;
    uint32_t groups = ceil_div(n_head, hmax);
    g->hg = ceil_div(n_head, groups);
    g->n_hgroups = ceil_div(n_head, g->hg);
    /* Enough chunks to give every compute unit two workgroups at long
     * contexts (more were slower: gpu/PERF.md runs 8, 11), and chunks no
     * longer than cmax. */
    uint32_t target = 2 * c->n_sm_hint / g->n_hgroups;
    if (target < 1)
        target = 1;
    uint32_t need = ceil_div(n_ctx, g->cmax);
    /* Short contexts: many short chunks keep more compute units busy
     * (H200, tg64 at depth 0: 190.6 tokens/s with chunks of >= 32
     * positions, 200.7 with >= 16, 206.7 with >= 8; gpu/PERF.md run 11). */
    g->min_chunk = k->tune->attn_minchunk;
    g->max_chunks = target > need ? target : need;
    g->dec_groups_y = g->n_hgroups;
    attn_fd_init(k, g);
    return 0;
}

void vk_attn_chunks(const vk_attn_geom *g, uint32_t n_kv, uint32_t *n_chunks, uint32_t *chunk_len)
{
    if (g->fd) {
        /* lengths in multiples of 16 (half tiles), at most max_chunks */
        uint32_t n = ceil_div(n_kv, g->min_chunk);
        if (n > g->max_chunks)
            n = g->max_chunks;
        if (n < 1)
            n = 1;
        *chunk_len = ceil_div(ceil_div(n_kv, n), 16) * 16;
        *n_chunks = ceil_div(n_kv, *chunk_len);
        return;
    }
    /* At least min_chunk positions per chunk (fewer would spend more on
     * partials than on scores), at most cmax. */
    uint32_t n = ceil_div(n_kv, g->min_chunk ? g->min_chunk : 32);
    uint32_t lim = ceil_div(n_kv, g->cmax);
    if (n > g->max_chunks)
        n = g->max_chunks;
    if (n < lim)
        n = lim;
    if (n < 1)
        n = 1;
    *chunk_len = ceil_div(n_kv, n);
    *n_chunks = ceil_div(n_kv, *chunk_len);
}

void vk_attn_chunks_prefill(uint32_t n_kv, uint32_t cap, uint32_t *n_chunks, uint32_t *chunk_len)
{
    /* Chunks of at least 64 positions; each is walked in pieces, so its
     * length is free. */
    uint32_t n = ceil_div(n_kv, 64);
    if (n > cap)
        n = cap;
    if (n < 1)
        n = 1;
    *chunk_len = ceil_div(n_kv, n);
    *n_chunks = ceil_div(n_kv, *chunk_len);
}

int vk_k_kv_store(const vk_kb *k, const vk_kv_store_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    uint32_t spec[14] = {VKK_WGS, g->kv_f16 ? 1 : 0, k->c->subgroup};
    memset(out, 0, sizeof *out);
    out->name = "kv_store";
    out->b[6] = a->params;
    if (vkk_dep_bind(k, "kv_store", &a->dep, spec, 14, 7, out))
        return -1;
    out->pipe = pipe(k, SPV_KV_STORE, spec, 14);
    if (!out->pipe)
        return -1;
    out->b[0] = a->kv.b;
    out->b[1] = a->norm.b;
    out->b[2] = a->cache.b;
    out->b[3] = a->rope_cs;
    out->b[4] = a->q.b;
    out->b[5] = a->qa.b;
    out->b[6] = a->params;
    uint32_t *p = out->push;
    p[0] = g->kv_lora;
    p[1] = g->rope;
    p[2] = g->nope;
    p[3] = g->n_head;
    p[4] = g->RS;
    p[5] = a->kv.off;
    p[6] = a->kv_z;
    p[7] = a->norm.off;
    p[8] = f2u(a->eps);
    p[9] = a->cache.off;
    p[10] = a->q.off;
    p[11] = a->q_z;
    p[12] = a->qa.off;
    p[13] = a->qa_z;
    out->npush = 17;
    out->groups[0] = 1 + g->n_head;
    out->groups[1] = a->nz ? a->nz : 1;
    out->groups[2] = 1;
    out->bytes = (uint64_t)out->groups[1] * (8ull * (g->kv_lora + g->rope) + g->RS * (g->kv_f16 ? 2 : 4) +
                                             8ull * g->n_head * g->rope);
    return 0;
}

uint32_t vk_attn_part_heads(const vk_attn_geom *g)
{
    return g->fd ? 16 * g->fd_mt * g->fd_hg : g->n_head;
}

/* The operands both attention kernels share: bindings, push words, the
 * grid's chunk and token dimensions (the caller sets the head groups). */
static void attn_bind(const vk_attn_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    out->b[0] = a->qa.b;
    out->b[1] = a->cache.b;
    out->b[2] = a->part.b;
    out->b[3] = a->params;
    uint32_t *p = out->push;
    p[0] = g->n_head;
    p[1] = g->kv_lora;
    p[2] = f2u(a->kq_scale);
    p[3] = a->cache.off;
    p[4] = a->qa.off;
    p[5] = a->qa_z;
    p[6] = a->part.off;
    p[7] = a->chunk_cap;
    p[8] = a->prefill ? VKP_CHUNK_PF : VKP_CHUNK;
    out->npush = 9;
    out->indirect = a->indirect;
    out->groups[0] = a->n_chunks;
    out->groups[2] = a->nz ? a->nz : 1;
    out->bytes = 0; /* depends on the context length; the profiler adds it */
}

/* Decode attention on tensor cores: same operands and partials as attn,
 * all heads in one workgroup. */
static int attn_fd(const vk_kb *k, const vk_attn_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    uint32_t spec[14] = {256, g->fd_mt, g->RS, g->kv_lora, g->fd_hg};
    memset(out, 0, sizeof *out);
    out->name = "attn";
    attn_bind(a, out);
    if (vkk_dep_bind(k, "attn", &a->dep, spec, 9, 4, out))
        return -1;
    out->npush = 12;
    out->pipe = pipe(k, SPV_ATTN_FD, spec, 14);
    if (!out->pipe)
        return -1;
    out->groups[1] = g->fd_hg;
    return 0;
}

bool vk_attn_deps(const vk_kb *k, const vk_attn_args *a)
{
    return a->g->fd && !a->prefill;
}

int vk_k_attn(const vk_kb *k, const vk_attn_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    if (g->fd && !a->prefill)
        return attn_fd(k, a, out);
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "attn: this kernel cannot signal or wait (vk_attn_deps)");
    /* scores of chunks up to sgmax positions by subgroups: lanes split a
     * row into 8-element groups (kq per lane), pu positions' loads in flight
     * per subgroup; longer chunks a thread per position (H200: decode
     * attention at depth 0 17.6 us per layer against 25.8 by threads, at
     * depth 4096 -- 79-position chunks -- 45.6 against 33.4) */
    uint32_t kq = ceil_div(g->RS / 8, k->c->subgroup), pu = k->tune->attn_pu;
    uint32_t sgmax = k->tune->attn_sg;
    uint32_t spec[] = {g->wgs, g->hg, g->kv_f16 ? 1 : 0, g->RS, g->cmax, k->c->subgroup, kq, pu, sgmax};
    memset(out, 0, sizeof *out);
    out->name = "attn";
    out->pipe = pipe(k, SPV_ATTN, spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    attn_bind(a, out);
    out->groups[1] = g->n_hgroups;
    return 0;
}

/* The operands both attn_vb kernels share: weights, bindings, push words
 * 0..10, the grid's head and token dimensions, and the bytes they read. */
static void attn_vb_bind(const vk_attn_vb_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    const vk_tensor *w = a->v_b;
    out->w[0] = w->buf;
    out->b[0] = a->part.b;
    out->b[1] = a->o.b;
    out->b[3] = a->params;
    uint32_t *p = out->push;
    p[0] = w->K;
    p[1] = w->Kp;
    p[2] = w->N;
    p[3] = (uint32_t)w->head_off;
    p[4] = w->bpr * w->N;
    p[5] = a->part.off;
    p[6] = vk_attn_part_heads(g); /* head rows of the partials */
    p[7] = a->chunk_cap;
    p[8] = a->o.off;
    p[9] = a->o_z;
    p[10] = VKP_NCHUNK;
    out->groups[1] = g->n_head;
    out->groups[2] = a->nz ? a->nz : 1;
    out->bytes = w->src_bytes * out->groups[2];
}

/* attn_vb x-stationary: the combine is the staging step. */
static int attn_vb_x(const vk_kb *k, const vk_attn_vb_args *a, const vkk_xs_cfg *x, vk_call *out)
{
    const vk_tensor *w = a->v_b;
    uint32_t spec[14] = {0};
    vkk_xs_spec(k, x, w->type, spec);
    spec[7] = a->chunk_cap;
    attn_vb_bind(a, out);
    if (vkk_dep_bind(k, "attn_vb", &a->dep, spec, 12, 4, out))
        return -1;
    out->pipe = pipe(k, SPV_ATTNX_VB, spec, 14);
    if (!out->pipe)
        return -1;
    out->push[11] = x->passes;
    out->npush = 15;
    out->groups[0] = x->groups;
    return 0;
}

static bool attn_vb_x_config(const vk_kb *k, const vk_attn_vb_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *w = a->v_b;
    return vkk_xs_config(k, w->type, w->Kp, w->N, a->g->n_head * (a->nz ? a->nz : 1), 1, 256, x) &&
           4ull * (x->ksh + a->chunk_cap) + 512 <= k->c->shared_bytes;
}

bool vk_attn_vb_deps(const vk_kb *k, const vk_attn_vb_args *a)
{
    vkk_xs_cfg x;
    return attn_vb_x_config(k, a, &x);
}

int vk_k_attn_vb(const vk_kb *k, const vk_attn_vb_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    const vk_tensor *w = a->v_b;
    memset(out, 0, sizeof *out);
    out->name = "attn_vb";
    vkk_xs_cfg x;
    if (attn_vb_x_config(k, a, &x)) {
        /* Every row group of a head combines all of the head's chunk
         * partials first, so long contexts (64 chunks) pay for each group:
         * at most 8 groups per head, more rows per pass (gpu/PERF.md runs
         * 14, 17). */
        uint32_t gmax = 8, nt = x.wgs / x.team;
        while (x.groups > gmax && x.r < 8) {
            x.r *= 2;
            x.groups = ceil_div(w->N, nt * x.r * x.passes);
        }
        return attn_vb_x(k, a, &x, out);
    }
    if (a->dep.signal || a->dep.wait)
        return err_set(k->err, "attn_vb: this kernel cannot signal or wait (vk_attn_vb_deps)");
    vkk_mv_cfg m = vkk_mv_config(k->c, w, g->n_head);
    /* few workgroups per head: each one combines the head's partials first */
    m.nr = 4;
    m.wgs = 128;
    uint32_t ksh = (w->Kp + 255) / 256 * 256;
    if (4ull * (ksh + a->chunk_cap) + 512 > k->c->shared_bytes)
        return err_set(k->err, "attn_vb: %u chunks of a %u-wide latent do not fit in shared memory", a->chunk_cap,
                       w->Kp);
    uint32_t spec[] = {m.wgs, w->type, m.team, m.nr, k->c->subgroup, ksh, m.upt, a->chunk_cap};
    out->pipe = pipe(k, SPV_ATTN_VB, spec, sizeof spec / sizeof spec[0]);
    if (!out->pipe)
        return -1;
    attn_vb_bind(a, out);
    out->npush = 11;
    out->groups[0] = ceil_div(w->N, rows_per_wg(&m));
    return 0;
}

int vk_k_attn_combine(const vk_kb *k, const vk_attn_combine_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    memset(out, 0, sizeof *out);
    out->name = "attn_combine";
    if (a->chunk_cap < 1 || a->chunk_cap > 64)
        return err_set(k->err, "attn_combine: %u chunks per head (1 to 64)", a->chunk_cap);
    uint32_t spec[] = {VKK_WGS, a->chunk_cap};
    out->pipe = pipe(k, SPV_ATTN_COMBINE, spec, 2);
    if (!out->pipe)
        return -1;
    out->b[0] = a->part.b;
    out->b[1] = a->o.b;
    out->b[3] = a->params;
    uint32_t *p = out->push;
    p[0] = g->kv_lora;
    p[1] = a->part.off;
    p[2] = g->n_head;
    p[3] = a->o.off;
    p[4] = a->o_z;
    p[5] = a->o_h;
    p[6] = VKP_NCHUNK_PF;
    out->npush = 7;
    out->groups[0] = g->n_head;
    out->groups[1] = 1;
    out->groups[2] = a->nz ? a->nz : 1;
    /* the batch's partials read at most once, the latents written */
    out->bytes = 4ull * out->groups[2] * g->n_head * (a->chunk_cap * (g->kv_lora + (uint64_t)VK_PART_HDR) + g->kv_lora);
    return 0;
}
