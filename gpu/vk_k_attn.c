/* vk_k_attn.c: the attention builders (vk_kernels.h): geometry and
 * chunking, the cache row, the chunk partials (attn, attn_fd), their
 * combine with v_b (decode) or alone (prefill).  Their interfaces:
 * shaders/pc_attn.h. */
#include "pc_attn.h"
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
    /* A prompt batch: the rows are (token, head) pairs, 32 a workgroup
     * (two 16-row tiles; every row of a tile used, each cache row read
     * once for 32 query rows): attention -40 % against one token's head
     * tiles, and faster than 16 rows a workgroup (gpu/PERF.md run 24). */
    uint32_t pm = 2, pks = 8 / (2 * pm);
    uint64_t pshared = 16ull * 32 * (g->RS / 8 + 1) + 4ull * pks * 16 * pm * 32 + 16ull * 16 * pm * 5 + 4ull * 16 * pm;
    if (pshared <= c->shared_bytes)
        g->fd_pf_mt = pm;
}

void vk_attn_prefill_grid(const vk_attn_geom *g, uint32_t n_tok, uint32_t *y, uint32_t *z)
{
    if (g->fd && g->fd_pf_mt) {
        *y = ceil_div(n_tok * g->n_head, 16 * g->fd_pf_mt);
        *z = 1;
        return;
    }
    *y = g->dec_groups_y;
    *z = n_tok;
}

bool vk_attn_writes_latents(const vk_attn_geom *g, uint32_t chunk_cap)
{
    /* One chunk a token (the engine's, gpu/PERF.md run 24): the combine
     * would only divide by l, so attn_fd does (gpu/PERF.md run 29). */
    return g->fd && g->fd_pf_mt && chunk_cap == 1;
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
     * (gpu/PERF.md run 11: tune.attn_minchunk). */
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
    uint32_t spec[VKC_MAX_SPEC] = {0};
    vkk_dep_words dw;
    spec[PC_S_WGS] = VKK_WGS;
    spec[KVS_S_KVF16] = g->kv_f16 ? 1 : 0;
    spec[KVS_S_SG] = k->c->subgroup;
    memset(out, 0, sizeof *out);
    out->name = "kv_store";
    if (a->dep.ll_out || (a->dep.ll_in != 0) != (a->ll_q != 0))
        return err_set(k->err, "kv_store: tagged words for kv and q both, and no tagged output");
    if (vkk_dep_bind(k, "kv_store", &a->dep, true, spec, KVS_B_PARAMS, out, &dw) ||
        !(out->pipe = pipe(k, VKK_SPV(SPV_KV_STORE, &a->dep), spec, KVS_S_COUNT)))
        return -1;
    out->b[KVS_B_KV] = a->kv.b;
    out->b[KVS_B_NORM] = a->norm.b;
    out->b[KVS_B_CACHE] = a->cache.b;
    out->b[KVS_B_ROPE] = a->rope_cs;
    out->b[KVS_B_Q] = a->q.b;
    out->b[KVS_B_Q_ABS] = a->q_abs.b;
    out->b[KVS_B_PARAMS] = a->params;
    pc_kv_store pc = {.kv_lora = g->kv_lora, .rope = g->rope, .nope = g->nope, .n_head = g->n_head, .RS = g->RS,
                      .kv_off = a->kv.off, .kv_z = a->kv_z, .nw_off = a->norm.off, .eps = a->eps,
                      .cache_off = a->cache.off, .q_off = a->q.off, .q_z = a->q_z, .q_abs_off = a->q_abs.off,
                      .q_abs_z = a->q_abs_z, .ll_q = a->ll_q};
    VKK_DEP_PUSH(pc, dw);
    pc.ll_in = dw.ll_in;
    VK_PUSH(out, pc);
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

bool vk_attn_deps(const vk_attn_args *a)
{
    return a->g->fd && !a->prefill;
}

/* The chunk partials: on tensor cores (attn_fd: all of a head tile's heads
 * in one workgroup for decode; a prompt batch's (token, head) pairs as rows,
 * 32 a workgroup, since gpu/PERF.md run 24) or by attn.comp (devices or
 * caches attn_fd does not take).  Either way the same partials per (token,
 * chunk) -- attn_fd's with vk_attn_part_heads rows -- and the grid (chunks,
 * dec_groups_y, tokens), or vk_attn_prefill_grid's for a prompt batch. */
int vk_k_attn(const vk_kb *k, const vk_attn_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    uint32_t spec[VKC_MAX_SPEC] = {0};
    vkk_dep_words dw = {0};
    memset(out, 0, sizeof *out);
    out->name = "attn";
    if (g->fd) {
        spec[PC_S_WGS] = 256;
        spec[FD_S_MT] = g->fd_mt;
        spec[FD_S_RS] = g->RS;
        spec[FD_S_DLAT] = g->kv_lora;
        spec[FD_S_HG] = g->fd_hg;
        bool flat = a->prefill && g->fd_pf_mt;
        if (flat) {
            spec[FD_S_MT] = g->fd_pf_mt;
            spec[FD_S_HG] = 1;
            spec[FD_S_FLAT] = 1;
            spec[FD_S_PROWS] = vk_attn_part_heads(g);
        }
        if (flat && vk_attn_writes_latents(g, a->chunk_cap)) {
            if (!a->o.b.buf || a->o.off % 4 || a->o_z % 4 || a->o_h % 4 || a->o_h < g->kv_lora)
                return err_set(k->err, "attn: the latent outputs (offset %u, strides %u, %u) must be set, "
                                       "in multiples of 4, rows of at least kv_lora %u",
                               a->o.off, a->o_z, a->o_h, g->kv_lora);
            spec[FD_S_DIRECT] = 1;
            out->name = "attn_lat";
            out->b[ATTN_B_O] = a->o.b;
        }
        if (vkk_dep_bind(k, "attn", &a->dep, false, spec, ATTN_B_PARAMS, out, &dw) ||
            !(out->pipe = pipe(k, SPV_ATTN_FD, spec, FD_S_COUNT)))
            return -1;
        out->groups[1] = g->fd_hg;
    } else {
        if (a->dep.signal || a->dep.wait)
            return err_set(k->err, "attn: this kernel cannot signal or wait (vk_attn_deps)");
        /* scores of chunks up to attn_sg positions by subgroups: lanes
         * split a row into 8-element groups (kq per lane), attn_pu
         * positions' loads in flight per subgroup; longer chunks a thread
         * per position (faster there, gpu/PERF.md run 7) */
        spec[PC_S_WGS] = g->wgs;
        spec[ATTN_S_HG] = g->hg;
        spec[ATTN_S_KVF16] = g->kv_f16 ? 1 : 0;
        spec[ATTN_S_RS] = g->RS;
        spec[ATTN_S_CMAX] = g->cmax;
        spec[ATTN_S_SG] = k->c->subgroup;
        spec[ATTN_S_KQ] = ceil_div(g->RS / 8, k->c->subgroup);
        spec[ATTN_S_PU] = k->tune->attn_pu;
        spec[ATTN_S_SGMAX] = k->tune->attn_sg;
        if (!(out->pipe = pipe(k, SPV_ATTN, spec, ATTN_S_COUNT)))
            return -1;
        out->groups[1] = g->n_hgroups;
    }
    out->b[ATTN_B_Q_ABS] = a->q_abs.b;
    out->b[ATTN_B_CACHE] = a->cache.b;
    out->b[ATTN_B_PART] = a->part.b;
    out->b[ATTN_B_PARAMS] = a->params;
    pc_attn pc = {.n_head = g->n_head, .dlat = g->kv_lora, .kq_scale = a->kq_scale, .cache_off = a->cache.off,
                  .q_abs_off = a->q_abs.off, .q_abs_z = a->q_abs_z, .part_off = a->part.off, .cmax_chunks = a->chunk_cap,
                  .chunk_word = a->prefill ? VKP_CHUNK_PF : VKP_CHUNK, .o_off = a->o.off, .o_z = a->o_z,
                  .o_h = a->o_h, .early_lag = a->early_lag};
    VKK_DEP_PUSH(pc, dw);
    VK_PUSH(out, pc);
    out->indirect = a->indirect;
    out->groups[0] = a->n_chunks;
    out->groups[2] = a->nz ? a->nz : 1;
    if (g->fd && a->prefill)
        vk_attn_prefill_grid(g, out->groups[2], &out->groups[1], &out->groups[2]);
    out->bytes = 0; /* depends on the context length; the profiler adds it */
    return 0;
}

static bool attn_vb_x_config(const vk_kb *k, const vk_attn_vb_args *a, vkk_xs_cfg *x)
{
    const vk_tensor *w = a->v_b;
    if (!vkk_xs_config(k, w->type, w->Kp, w->N, a->g->n_head * (a->nz ? a->nz : 1), 1, VKK_XS_WGS, x))
        return false;
    /* beside the staged input: the chunks' weights (chunk_combine.glsl) and
     * with integer dot products the quantized input (as vkk_xs_config) */
    uint64_t idot_bytes = vk_k_idot_shared(k, w->type, x->ksh);
    return 4ull * (x->ksh + a->chunk_cap + PC_IQ_TABLE_WORDS(w->type)) + 512 + idot_bytes <= k->c->shared_bytes;
}

bool vk_attn_vb_deps(const vk_kb *k, const vk_attn_vb_args *a)
{
    vkk_xs_cfg x;
    return attn_vb_x_config(k, a, &x);
}

/* Decode: a head's chunk partials combined, then v_b of that head -- on
 * the x-stationary kernel (attn_vb_xs: the combine is its staging step) or
 * the mv one. */
int vk_k_attn_vb(const vk_kb *k, const vk_attn_vb_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    const vk_tensor *w = a->v_b;
    uint32_t spec[VKC_MAX_SPEC] = {0}, passes = 0;
    vkk_dep_words dw = {0};
    vkk_xs_cfg x;
    memset(out, 0, sizeof *out);
    out->name = "attn_vb";
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
        vkk_xs_spec(k, &x, w->type, spec);
        spec[AVB_S_CCAP] = a->chunk_cap;
        if (vkk_dep_bind(k, "attn_vb", &a->dep, false, spec, AVB_B_PARAMS, out, &dw) ||
            !(out->pipe = pipe(k, vk_k_idot(k, w->type) ? SPV_ATTN_VB_XS_ID : SPV_ATTN_VB_XS, spec, XS_S_COUNT)))
            return -1;
        out->groups[0] = x.groups;
        passes = x.passes;
    } else {
        if (a->dep.signal || a->dep.wait || a->dep.ll_in || a->dep.ll_out)
            return err_set(k->err, "attn_vb: this kernel cannot signal or wait (vk_attn_vb_deps)");
        vkk_mv_cfg m = vkk_mv_config(k->c, w, g->n_head);
        /* few workgroups per head: each one combines the head's partials first */
        m.nr = 4;
        m.wgs = 128;
        uint32_t ksh = (w->Kp + 255) / 256 * 256;
        if (4ull * (ksh + a->chunk_cap + PC_IQ_TABLE_WORDS(w->type)) + 512 > k->c->shared_bytes)
            return err_set(k->err, "attn_vb: %u chunks of a %u-wide latent do not fit in shared memory",
                           a->chunk_cap, w->Kp);
        vkk_mv_spec(k, &m, w->type, spec);
        spec[AVB_S_KSH] = ksh;
        spec[AVB_S_UPT] = m.upt;
        spec[AVB_S_CCAP] = a->chunk_cap;
        if (!(out->pipe = pipe(k, SPV_ATTN_VB, spec, AVB_S_COUNT)))
            return -1;
        out->groups[0] = ceil_div(w->N, rows_per_wg(&m));
    }
    out->w[0] = w->buf;
    out->b[MATVEC_B_X] = a->part.b;
    out->b[AVB_B_O] = a->o.b;
    out->b[AVB_B_PARAMS] = a->params;
    pc_attn_vb pc = {.K = w->K, .Kp = w->Kp, .N = w->N, .hbase = (uint32_t)w->head_off, .mat_blocks = w->bpr * w->N,
                     .part_off = a->part.off, .part_heads = vk_attn_part_heads(g), .cmax_chunks = a->chunk_cap,
                     .o_off = a->o.off, .o_z = a->o_z, .passes = passes};
    VKK_DEP_PUSH(pc, dw);
    VK_PUSH(out, pc);
    out->groups[1] = g->n_head;
    out->groups[2] = a->nz ? a->nz : 1;
    out->bytes = w->src_bytes * out->groups[2];
    return 0;
}

int vk_k_attn_combine(const vk_kb *k, const vk_attn_combine_args *a, vk_call *out)
{
    const vk_attn_geom *g = a->g;
    memset(out, 0, sizeof *out);
    out->name = "attn_combine";
    if (a->chunk_cap < 1 || a->chunk_cap > 64)
        return err_set(k->err, "attn_combine: %u chunks per head (1 to 64)", a->chunk_cap);
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = VKK_WGS;
    spec[COMBINE_S_CCAP] = a->chunk_cap;
    if (!(out->pipe = pipe(k, SPV_ATTN_COMBINE, spec, COMBINE_S_COUNT)))
        return -1;
    out->b[COMBINE_B_PART] = a->part.b;
    out->b[COMBINE_B_O] = a->o.b;
    out->b[COMBINE_B_PARAMS] = a->params;
    pc_attn_combine pc = {.K = g->kv_lora, .part_off = a->part.off, .part_heads = vk_attn_part_heads(g),
                          .o_off = a->o.off, .o_z = a->o_z, .o_h = a->o_h};
    VK_PUSH(out, pc);
    out->groups[0] = g->n_head;
    out->groups[1] = 1;
    out->groups[2] = a->nz ? a->nz : 1;
    /* the batch's partials read at most once, the latents written */
    out->bytes = 4ull * out->groups[2] * g->n_head * (a->chunk_cap * (g->kv_lora + (uint64_t)VK_PART_HDR) + g->kv_lora);
    return 0;
}
