/* vk_engine.c: the Vulkan engine_backend.
 *
 * create: device, fit check, weight upload, activations and KV cache, the
 * RoPE table, then the graphs recorded once (decode: plain, one sampled
 * variant per layer, fully timed; sampling alone; the full-vocabulary
 * selection; prefill) and a copy of the logits to host memory.
 * eval: the host writes the params buffer (position, chunking, tokens) and
 * the sampling words (the request: core/sample/sampler.h), submits one command
 * buffer, waits on its fence and reads back the token (rarely after a
 * second program, the selection over the whole vocabulary), the top-K
 * candidates (+ logsumexp) or, when asked, the logits.  Every program is
 * timed by the sampled profiler (vk_profiler.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/spec_host.h"
#include "format/quant.h"
#include "model/rope.h"
#include "vk.h"
#include "vk_engine.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define TOPK_MAX 64
#define PREFILL_TIMED_EVERY 4 /* sampled profiling: one prompt chunk in this many is timed */
#define SHORT_TIMED_EVERY 8   /* ... one run of the sampling programs in this many */

/* ---- model checks ----------------------------------------------------------------- */

static int check_model(const vk_engine *e, err_t *err)
{
    const model_config *c = &e->m->cfg;
    if (c->n_expert_used > 32 || c->n_expert > 512)
        return err_set(err, "the Vulkan backend handles up to 512 experts with 32 active (model: %u, %u)",
                       c->n_expert, c->n_expert_used);
    if (c->qk_rope > 2 * 1024)
        return err_set(err, "rope dimension %u is too large for the Vulkan kernels", c->qk_rope);
    return 0;
}

/* ---- the RoPE table ------------------------------------------------------------------ */

/* (cos, sin) per position and pair: the reference's own rows (core/model/rope.h). */
static int upload_rope(vk_engine *e, err_t *err)
{
    const model_config *c = &e->m->cfg;
    uint32_t n = e->p.n_ctx;
    vk_uploader *u;
    if (vk_uploader_new(&e->c, 16ull << 20, &u, err))
        return -1;
    uint64_t row = (uint64_t)c->qk_rope * 4;
    uint64_t per = vk_uploader_slot_bytes(u) / (row ? row : 1);
    int rc = 0;
    for (uint32_t p0 = 0; !rc && p0 < n && row; p0 += (uint32_t)per) {
        uint32_t m = n - p0 < per ? n - p0 : (uint32_t)per;
        float *dst = vk_upload_map(u, &e->b.rope, p0 * row, m * row, err);
        if (!dst) {
            rc = -1;
            break;
        }
        for (uint32_t i = 0; i < m; i++)
            rope_cos_sin(c, (float)(p0 + i), dst + (uint64_t)i * c->qk_rope);
    }
    if (!rc)
        rc = vk_uploader_finish(u, err);
    vk_uploader_free(u);
    return rc;
}

/* ---- memory ---------------------------------------------------------------------------- */

typedef struct {
    vk_buf *dst;
    uint64_t bytes;
    const char *name;
    int where; /* 0 device, 1 host, 2 device-local host-visible when available */
} buf_req;

static uint32_t max_u32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

/* The activation buffers, sized for n_batch tokens. */
static uint32_t act_requests(vk_engine *e, buf_req *r)
{
    const model_config *c = &e->m->cfg;
    uint64_t B = e->b.n_batch, f = 4;
    uint32_t qw = c->qk_nope + c->qk_rope, K = c->n_expert_used;
    uint32_t fs = c->n_ff_exp * (c->n_expert_shared ? c->n_expert_shared : 1);
    e->b.h_z = max_u32(max_u32(c->n_ff_exp, fs), c->n_ff_dense);
    /* drafting: the verify's columns (vk_forward.c), each a token slot of
     * the batch-sized buffers; the decode-only ones get a slot each */
    uint64_t vc = e->nextn ? VK_VCOLS : 1;
    uint32_t n = 0;
    r[n++] = (buf_req){&e->b.x, B * c->n_embd * f, "x", 0};
    r[n++] = (buf_req){&e->b.qkv_ll, ((uint64_t)(c->q_lora_rank ? c->q_lora_rank : c->n_head * qw) + c->kv_lora_rank + c->qk_rope) * 8,
                       "q_a + kv (tagged words)", 0};
    r[n++] = (buf_req){&e->b.q_ll, (uint64_t)c->n_head * qw * 8, "q (tagged words)", 0};
    r[n++] = (buf_req){&e->b.q_comp, B * (c->q_lora_rank ? c->q_lora_rank : 1) * f, "compressed query (q_a output)", 0};
    r[n++] = (buf_req){&e->b.kv, B * (c->kv_lora_rank + c->qk_rope) * f, "kv", 0};
    r[n++] = (buf_req){&e->b.q, B * c->n_head * qw * f, "q", 0};
    r[n++] = (buf_req){&e->b.q_abs, B * c->n_head * e->b.ag.RS * f, "absorbed queries", 0};
    r[n++] = (buf_req){&e->b.part, vc * e->b.part_cap * vk_attn_part_heads(&e->b.ag) * (c->kv_lora_rank + VK_PART_HDR) * f, "attention partials", 0};
    r[n++] = (buf_req){&e->b.o, B * c->n_head * c->v_head * f, "o", 0};
    r[n++] = (buf_req){&e->b.h, B * (K + 1) * e->b.h_z * f, "h", 0};
    r[n++] = (buf_req){&e->b.rlogits, B * (c->n_expert ? c->n_expert : 1) * f, "router logits", 0};
    r[n++] = (buf_req){&e->b.qkv, vc * ((uint64_t)(c->q_lora_rank ? c->q_lora_rank : c->n_head * qw) + c->kv_lora_rank + c->qk_rope) * f,
                       "q_a + kv", 0};
    /* every layer keeps its choices (routing report, prefill grouping) */
    uint64_t n_blocks = c->n_layer + e->nextn; /* the NextN block's layer keeps its choices too */
    r[n++] = (buf_req){&e->b.ids, n_blocks * B * (K ? K : 1) * f, "expert ids", 0};
    r[n++] = (buf_req){&e->b.wts, n_blocks * B * (K ? K : 1) * f, "expert weights", 0};
    uint64_t hp = B * K * c->n_ff_exp + B * fs;
    if (hp < B * c->n_ff_dense)
        hp = B * c->n_ff_dense;
    r[n++] = (buf_req){&e->b.x_norm, B * c->n_embd * f, "normalized x", 0};
    r[n++] = (buf_req){&e->b.q_comp_norm, B * (c->q_lora_rank ? c->q_lora_rank : 1) * f, "normalized compressed query", 0};
    /* their fp16 twins where the prompt's mat-mats run on tensor cores
     * (rows of a multiple of 8 halves: 16-byte loads) */
    e->b.act16 = e->c.coopmat && e->tune.coopmat && c->n_embd % 8 == 0 && c->q_lora_rank % 8 == 0 &&
                  c->v_head % 8 == 0 && c->n_ff_exp % 8 == 0 && fs % 8 == 0 && c->n_ff_dense % 8 == 0;
    r[n++] = (buf_req){&e->b.x_norm16, e->b.act16 ? B * c->n_embd * 2 : 64, "normalized x (fp16)", 0};
    r[n++] = (buf_req){&e->b.q_comp_norm16, e->b.act16 && c->q_lora_rank ? B * c->q_lora_rank * 2 : 64,
                       "normalized compressed query (fp16)", 0};
    e->b.act16_out = e->b.act16 && e->tune.act16_out;
    r[n++] = (buf_req){&e->b.o16, e->b.act16_out ? B * c->n_head * c->v_head * 2 : 64, "o (fp16)", 0};
    r[n++] = (buf_req){&e->b.hp16, e->b.act16_out ? hp * 2 : 64, "expert hidden states (fp16)", 0};
    r[n++] = (buf_req){&e->b.hp, hp * f, "expert hidden states", 0};
    r[n++] = (buf_req){&e->b.yp, B * (K ? K : 1) * c->n_embd * f, "expert outputs", 0};
    /* where the prompt batch's attention writes its latents itself
     * (vk_attn_writes_latents) the partials are bound but never touched:
     * a token's worth keeps the binding valid (was ~36 MB at n_batch 512) */
    uint64_t pf_rows = vk_attn_writes_latents(&e->b.ag, e->b.part_cap_prefill) ? 1 : B;
    r[n++] = (buf_req){&e->b.part_pf, pf_rows * vk_attn_part_heads(&e->b.ag) * (uint64_t)e->b.part_cap_prefill * (c->kv_lora_rank + VK_PART_HDR) * f,
                       "prefill attention partials", 0};
    r[n++] = (buf_req){&e->b.moe_list, B * (K ? K : 1) * f, "expert work list", 0};
    r[n++] = (buf_req){&e->b.moe_tiles, (B * K / 32 + c->n_expert + 1) * 16, "expert tiles", 0};
    r[n++] = (buf_req){&e->b.moe_ind, 64, "expert dispatch sizes", 0};
    r[n++] = (buf_req){&e->b.counters, (B * f > vc * VK_VCOL_ALIGN ? B * f : vc * VK_VCOL_ALIGN) + 64, "counters", 0};
    r[n++] = (buf_req){&e->b.logits, (uint64_t)c->n_vocab * f, "logits", 0};
    r[n++] = (buf_req){&e->b.topk_v, (uint64_t)e->b.tg.n_slices * TOPK_MAX * f, "top-K candidates", 0};
    r[n++] = (buf_req){&e->b.topk_i, (uint64_t)e->b.tg.n_slices * TOPK_MAX * f, "top-K ids", 0};
    r[n++] = (buf_req){&e->b.topk_ms, (uint64_t)e->b.tg.n_slices * 8, "top-K sums", 0};
    r[n++] = (buf_req){&e->b.topk_cnt, 64, "top-K counter", 0};
    r[n++] = (buf_req){&e->b.smp_cand_v, vk_sample_bytes(VK_SMP_CAND), "sampling candidates", 0};
    r[n++] = (buf_req){&e->b.smp_cand_i, vk_sample_bytes(VK_SMP_CAND), "sampling candidate ids", 0};
    r[n++] = (buf_req){&e->b.smp_ms, vk_sample_bytes(VK_SMP_MS), "sampling maxima", 0};
    r[n++] = (buf_req){&e->b.smp_part, vk_sample_bytes(VK_SMP_PART), "sampling sums", 0};
    r[n++] = (buf_req){&e->b.smp_count, vk_sample_bytes(VK_SMP_COUNT), "sampling counters", 0};
    r[n++] = (buf_req){&e->b.smp_state, vk_sample_bytes(VK_SMP_STATE), "sampling state", 0};
    r[n++] = (buf_req){&e->b.smp_hist, vk_sample_bytes(VK_SMP_HIST), "sampling histograms", 0};
    r[n++] = (buf_req){&e->b.smp_words, vk_sample_bytes(VK_SMP_WORDS), "sampling words", 2};
    r[n++] = (buf_req){&e->b.smp_result, vk_sample_bytes(VK_SMP_RESULT), "sampled token", 1};
    r[n++] = (buf_req){&e->b.rope, (uint64_t)e->p.n_ctx * c->qk_rope * f + 16, "RoPE table", 0};
    r[n++] = (buf_req){&e->b.params, (VKP_TOKENS + B) * 4 + 64, "params", 2};
    r[n++] = (buf_req){&e->b.dep, (1ull + (uint64_t)c->n_layer * VK_DEP_PER_LAYER) * 4 + 64, "dependency counters", 2};
    r[n++] = (buf_req){&e->b.out_ids, TOPK_MAX * 4, "top-K ids (host)", 1};
    r[n++] = (buf_req){&e->b.out_vals, (TOPK_MAX + 1) * 4, "top-K values (host)", 1};
    /* every position's logits of a prompt batch only where they will be
     * asked for (engine_params.all_logits); otherwise the one row a decode
     * or a prompt's last position copies there */
    uint64_t logit_rows = e->p.all_logits ? B : 1;
    if (logit_rows < vc) /* the verify's rows */
        logit_rows = vc;
    r[n++] = (buf_req){&e->b.host_logits, logit_rows * c->n_vocab * f, "logits (host)", 1};
    if (e->hx.n_layers) { /* what the GPU and the CPU's experts hand each other (vk_hostmoe.c) */
        r[n++] = (buf_req){&e->hx.xn, B * c->n_embd * f, "ffn-normed x (host)", 1};
        r[n++] = (buf_req){&e->hx.ids, B * K * f, "expert ids (host)", 1};
        r[n++] = (buf_req){&e->hx.wts, B * K * f, "expert weights (host)", 1};
        r[n++] = (buf_req){&e->hx.y, B * c->n_embd * f, "routed experts' sum (host)", 2};
        r[n++] = (buf_req){&e->hx.one, B * f, "ones", 2};
        /* a prompt batch streams the host layers' experts (vk_hostmoe_stream.c) */
        if ((e->hx.slot_bytes = vk_hostmoe_stream_bytes(e))) {
            r[n++] = (buf_req){&e->hx.slot, e->hx.slot_bytes, "a host layer's experts (slot)", 0};
            r[n++] = (buf_req){&e->hx.stage[0], e->hx.slot_bytes, "a host layer's experts (staging)", 1};
            r[n++] = (buf_req){&e->hx.stage[1], e->hx.slot_bytes, "a host layer's experts (staging)", 1};
        }
    }
    if (e->nextn) {
        e->b.vparams_stride = (VKP_TOKENS + 1) * 4 + VK_VCOL_ALIGN - 1;
        e->b.vparams_stride -= e->b.vparams_stride % VK_VCOL_ALIGN;
        r[n++] = (buf_req){&e->b.vparams, vc * e->b.vparams_stride, "verify params", 2};
        e->b.vdep_stride = (1 + c->n_layer * VK_DEP_PER_LAYER) * 4 + 64 + VK_VCOL_ALIGN - 1;
        e->b.vdep_stride -= e->b.vdep_stride % VK_VCOL_ALIGN;
        r[n++] = (buf_req){&e->b.vdep, (vc - 1) * e->b.vdep_stride, "verify dependency counters", 2};
        r[n++] = (buf_req){&e->b.hid, (uint64_t)e->p.n_ctx * c->n_embd * f, "kept hidden states (NextN)", 0};
        r[n++] = (buf_req){&e->b.nx_e, (uint64_t)c->n_embd * f, "NextN embedding", 0};
        r[n++] = (buf_req){&e->b.nx_cat, 2ull * c->n_embd * f, "NextN input", 0};
        r[n++] = (buf_req){&e->b.nx_hin, (uint64_t)c->n_embd * f, "NextN given h", 2};
        r[n++] = (buf_req){&e->b.nx_out, (uint64_t)c->n_embd * f, "NextN output (host)", 1};
    }
    return n;
}

static uint64_t cache_bytes(const vk_engine *e)
{
    return ((uint64_t)e->p.n_ctx + VK_CACHE_PAD_ROWS) * e->b.ag.RS * (e->b.ag.kv_f16 ? 2 : 4);
}

/* The device-local sizes in allocation order (each layer's cache, then
 * the activations): what alloc_buffers takes from act_arena, so the arena
 * can be reserved and planned exactly.  sizes: n_layer + n entries. */
static uint32_t act_sizes(const vk_engine *e, const buf_req *r, uint32_t n, uint64_t *sizes)
{
    uint32_t k = 0;
    for (uint32_t il = 0; il < e->m->cfg.n_layer + e->nextn; il++)
        sizes[k++] = cache_bytes(e);
    for (uint32_t i = 0; i < n; i++)
        if (r[i].where == 0)
            sizes[k++] = r[i].bytes;
    return k;
}

/* The sizes of the host-visible requests of kind `where` (1 host, 2
 * host-written) in allocation order: n entries at most. */
static uint32_t host_sizes(const buf_req *r, uint32_t n, int where, uint64_t *sizes)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (r[i].where == where)
            sizes[k++] = r[i].bytes;
    return k;
}

/* The host-visible arenas' block sizes (vk_arena_init in setup) */
#define HOST_BLOCK (64ull << 20)
#define BAR_BLOCK (1ull << 20)

/* Host-visible bytes the buffers take, packed as alloc_buffers reserves
 * them (UINT64_MAX: out of host memory). */
static uint64_t host_visible_bytes(const vk_engine *e, const buf_req *r, uint32_t n)
{
    uint64_t *sizes = malloc((n ? n : 1) * sizeof *sizes);
    if (!sizes)
        return UINT64_MAX;
    uint64_t host = vk_arena_plan(&e->c, HOST_BLOCK, sizes, host_sizes(r, n, 1, sizes), NULL, NULL, 0);
    uint64_t bar = vk_arena_plan(&e->c, BAR_BLOCK, sizes, host_sizes(r, n, 2, sizes), NULL, NULL, 0);
    free(sizes);
    if (host == UINT64_MAX || bar == UINT64_MAX)
        return UINT64_MAX;
    return host + bar;
}

static int alloc_buffers(vk_engine *e, buf_req *r, uint32_t n, err_t *err)
{
    const model_config *c = &e->m->cfg;
    e->b.cache = calloc(c->n_layer + 1, sizeof *e->b.cache);
    uint64_t *sizes = malloc(((size_t)c->n_layer + 1 + n) * sizeof *sizes);
    if (!e->b.cache || !sizes) {
        free(sizes);
        return err_set(err, "out of host memory");
    }
    /* blocks exactly as large as what they hold: the fit check's figures
     * (and the placement's host-visible bytes: an arena's first block
     * would otherwise be at least its block size) */
    int rc = vk_arena_reserve(&e->c, &e->b.act_arena, sizes, act_sizes(e, r, n, sizes), err) ||
             vk_arena_reserve(&e->c, &e->b.host_arena, sizes, host_sizes(r, n, 1, sizes), err) ||
             vk_arena_reserve(&e->c, &e->b.bar_arena, sizes, host_sizes(r, n, 2, sizes), err);
    free(sizes);
    if (rc)
        return -1;
    for (uint32_t il = 0; il < c->n_layer + e->nextn; il++)
        if (vk_arena_alloc(&e->c, &e->b.act_arena, cache_bytes(e), "the KV cache", &e->b.cache[il], err))
            return -1;
    for (uint32_t i = 0; i < n; i++) {
        vk_arena *a = r[i].where == 0 ? &e->b.act_arena : r[i].where == 1 ? &e->b.host_arena : &e->b.bar_arena;
        if (vk_arena_alloc(&e->c, a, r[i].bytes, r[i].name, r[i].dst, err))
            return -1;
    }
    return 0;
}

/* What the model may take of the device: the memory budget (vk.h), or
 * --gpu-mem where that is less; *limit says which. */
static uint64_t available_bytes(const vk_engine *e, const char **limit)
{
    uint64_t have = e->c.info.budget_bytes;
    if (e->p.gpu_mem && e->p.gpu_mem < have) {
        *limit = "--gpu-mem";
        return e->p.gpu_mem;
    }
    *limit = e->c.info.budget_from_ext ? "the memory budget" : "the heap less a margin";
    return have;
}

static const char *mem_str(uint64_t b, char *buf, size_t len)
{
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.2f GiB", b / GiB);
    else
        snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024.0));
    return buf;
}

/* b bytes rounded up, as --gpu-mem takes it: "5M", "2.4G". */
static const char *size_arg(uint64_t b, char *buf, size_t len)
{
    uint64_t mib = (b + (1ull << 20) - 1) >> 20;
    if (mib >= 1024)
        snprintf(buf, len, "%.1fG", (double)((mib * 10 + 1023) / 1024) / 10.0);
    else
        snprintf(buf, len, "%lluM", (unsigned long long)mib);
    return buf;
}

/* "routed experts of layers a..b in host memory (X)" (len > 0). */
static void host_line(const vk_placement *pl, char *buf, size_t len)
{
    char hb[32];
    snprintf(buf, len, "routed experts of %s %u%s%.0u in host memory (%s)", pl->host_layers > 1 ? "layers" : "layer",
             pl->host_first, pl->host_layers > 1 ? ".." : "", pl->host_layers > 1 ? pl->host_last : 0,
             mem_str(pl->host_bytes, hb, sizeof hb));
}

/* vk_placement_line, with the host's clause or without */
static void placement_line(const vk_placement *pl, bool with_host, char *buf, size_t len)
{
    char w[32], k[32], a[32], t[32], av[32], host[128] = "";
    if (pl->host_layers && with_host) {
        strcpy(host, "; ");
        host_line(pl, host + 2, sizeof host - 2);
    }
    snprintf(buf, len, "weights %s, KV cache %s (%u tokens), activations %s (batches of %u tokens): %s of %s (%s)%s",
             mem_str(pl->weights, w, sizeof w), mem_str(pl->kv, k, sizeof k), pl->n_ctx,
             mem_str(pl->act, a, sizeof a), pl->n_batch, mem_str(pl->weights + pl->kv + pl->act, t, sizeof t),
             mem_str(pl->available, av, sizeof av), pl->limit, host);
}

void vk_placement_line(const vk_placement *pl, char *buf, size_t len)
{
    placement_line(pl, true, buf, len);
}

/* Everything the model needs on the device, against what it may take
 * (e->place gets the figures either way). */
static int check_fit(vk_engine *e, buf_req *r, uint32_t n, err_t *err)
{
    uint64_t wb;
    if (vk_weights_plan(&e->c, &e->tune, e->m, e->hx.host, e->nextn, &wb, err))
        return -1;
    uint64_t *sizes = malloc(((size_t)e->m->cfg.n_layer + 1 + n) * sizeof *sizes);
    if (!sizes)
        return err_set(err, "out of host memory");
    uint32_t ns = act_sizes(e, r, n, sizes);
    uint64_t all = vk_arena_plan(&e->c, 1ull << 30, sizes, ns, NULL, NULL, 0);
    free(sizes);
    if (all == UINT64_MAX)
        return err_set(err, "out of host memory");
    vk_placement *pl = &e->place;
    snprintf(pl->device, sizeof pl->device, "%s", e->c.info.name);
    pl->weights = wb;
    pl->kv = cache_bytes(e) * (e->m->cfg.n_layer + e->nextn);
    pl->act = all > pl->kv ? all - pl->kv : 0; /* the packing's alignment counted with the activations */
    pl->n_ctx = e->p.n_ctx;
    pl->n_batch = e->b.n_batch;
    pl->available = available_bytes(e, &pl->limit);
    if ((pl->host_visible = host_visible_bytes(e, r, n)) == UINT64_MAX)
        return err_set(err, "out of host memory");
    pl->host_layers = e->hx.n_layers;
    pl->stream_slot = e->hx.slot_bytes;
    pl->stream_min = e->hx.slot_bytes ? e->tune.hx_stream : 0;
    pl->host_first = pl->host_last = 0;
    pl->host_bytes = 0;
    for (uint32_t i = 0; i < e->hx.n_layers; i++) {
        const model_layer *L = &e->m->layers[e->hx.layer[i]];
        pl->host_bytes += L->gate_exps.nbytes + L->up_exps.nbytes + L->down_exps.nbytes;
        pl->host_first = i ? pl->host_first : e->hx.layer[i];
        pl->host_last = e->hx.layer[i];
    }
    e->fit_short = wb + all > pl->available;
    if (e->fit_short) {
        char need[32], w[32], k[32], a[32], av[32], host[160] = "";
        if (pl->host_layers) {
            strcpy(host, ", with the ");
            host_line(pl, host + 11, sizeof host - 11);
        }
        return err_set(err, "the model needs %s of device memory (weights %s, KV cache %s for %u tokens, "
                            "activations %s%s) but %s has %s (%s)",
                       mem_str(wb + all, need, sizeof need), mem_str(wb, w, sizeof w), mem_str(pl->kv, k, sizeof k),
                       e->p.n_ctx, mem_str(pl->act, a, sizeof a), host, e->c.info.name,
                       mem_str(pl->available, av, sizeof av), pl->limit);
    }
    return 0;
}

/* The geometry and buffers for a context of e->p.n_ctx tokens with the
 * routed experts of blocks 0..n_blocks-1 in host memory, and whether they
 * fit the device (err says by how much not). */
static int plan_with(vk_engine *e, buf_req *req, uint32_t *n, uint32_t n_blocks, err_t *err)
{
    const model_config *c = &e->m->cfg;
    e->fit_short = false;
    if (vk_hostmoe_select(e, n_blocks, err))
        return -1;
    if (e->p.n_batch > e->p.n_ctx)
        e->p.n_batch = e->p.n_ctx;
    e->b.n_batch = e->p.n_batch ? e->p.n_batch : 1;
    if (vk_attn_geom_init(&e->kb, &e->b.ag, c->n_head, c->kv_lora_rank, c->qk_rope, c->qk_nope, c->v_head,
                          e->p.kv == KV_F16, e->p.n_ctx, err) ||
        vk_topk_geom_init(c->n_vocab, c->n_vocab < TOPK_MAX ? c->n_vocab : TOPK_MAX, &e->b.tg, err) ||
        vk_sample_geom_init(&e->c, c->n_vocab, &e->b.sg, err))
        return -1;
    e->b.part_cap = e->b.ag.max_chunks;
    /* a prompt batch's attention: one chunk a token (its whole causal row
     * in one workgroup; 2 and 4 chunks were slower, gpu/PERF.md run 24) */
    e->b.part_cap_prefill = 1;
    *n = act_requests(e, req);
    return check_fit(e, req, *n, err);
}

/* plan_with the blocks --n-cpu-moe names; left to the engine (and not
 * held back, hx.no_auto), none when everything fits, else the fewest first
 * blocks whose experts in host memory make it fit (the error: with all of
 * them there). */
static int plan(vk_engine *e, buf_req *req, uint32_t *n, err_t *err)
{
    const uint32_t n_layer = e->m->cfg.n_layer;
    if (e->p.n_cpu_moe >= 0 || e->hx.no_auto)
        return plan_with(e, req, n, e->p.n_cpu_moe > 0 ? (uint32_t)e->p.n_cpu_moe : 0, err);
    int rc0 = plan_with(e, req, n, 0, err);
    if (rc0 == 0 || !e->fit_short)
        return rc0;
    err_t scratch;
    for (uint32_t nb = 1; nb < n_layer; nb++) {
        if (!e->m->layers[nb - 1].is_moe)
            continue;
        int rc = plan_with(e, req, n, nb, &scratch);
        if (rc == 0)
            return 0;
        if (!e->fit_short) {
            *err = scratch;
            return -1;
        }
    }
    return plan_with(e, req, n, n_layer, err);
}

/* Whether a context of n_ctx tokens (the batch as asked) fits. */
static bool ctx_fits(vk_engine *e, buf_req *req, uint32_t *n, uint32_t n_ctx, uint32_t batch)
{
    err_t scratch;
    e->p.n_ctx = n_ctx;
    e->p.n_batch = batch;
    return plan(e, req, n, &scratch) == 0;
}

/* The largest context in [lo, hi) that fits, in steps of `step` tokens
 * (lo and hi multiples of it), or 0 (e->p.n_ctx and n_batch are left
 * changed). */
static uint32_t largest_fit(vk_engine *e, buf_req *req, uint32_t *n, uint32_t lo, uint32_t hi, uint32_t step,
                            uint32_t batch)
{
    if (lo >= hi || !ctx_fits(e, req, n, lo, batch))
        return 0;
    uint32_t a = lo / step, b = hi / step; /* step * a fits, step * b does not */
    while (b - a > 1) {
        uint32_t mid = a + (b - a) / 2;
        if (ctx_fits(e, req, n, step * mid, batch))
            a = mid;
        else
            b = mid;
    }
    return step * a;
}

/* No context given and the model does not fit with the longest: the
 * shortest context kept before experts go to host memory. */
#define AUTO_SPLIT_CTX 4096u

/* No context given: the largest that fits, at most ENGINE_AUTO_CTX_CAP and
 * the model's trained context (in steps of 256 tokens). */
static int plan_auto_ctx(vk_engine *e, buf_req *req, uint32_t *n, err_t *err)
{
    uint32_t train = e->m->cfg.n_ctx_train, cap = train && train < ENGINE_AUTO_CTX_CAP ? train : ENGINE_AUTO_CTX_CAP;
    uint32_t batch = e->p.n_batch;
    /* first with every expert where --n-cpu-moe puts it (none unless given) */
    e->hx.no_auto = true;
    e->p.n_ctx = cap;
    int rc = plan(e, req, n, err);
    e->hx.no_auto = false;
    if (rc == 0)
        return 0;
    if (!e->fit_short)
        return -1;
    e->hx.no_auto = true;
    uint32_t lo = largest_fit(e, req, n, 256, cap / 256 * 256, 256, batch);
    e->hx.no_auto = false;
    /* a context shorter than AUTO_SPLIT_CTX: experts to the host instead
     * (where the engine may choose), as many as that context needs */
    uint32_t want = cap < AUTO_SPLIT_CTX ? cap : AUTO_SPLIT_CTX;
    if (lo < want && e->p.n_cpu_moe < 0) {
        err_t scratch;
        e->p.n_ctx = want;
        e->p.n_batch = batch;
        if (plan(e, req, n, &scratch) == 0)
            return 0;
        lo = largest_fit(e, req, n, 256, want / 256 * 256, 256, batch);
    }
    e->p.n_ctx = lo ? lo : (cap < 256 ? cap : 256);
    e->p.n_batch = batch;
    return plan(e, req, n, err); /* the error of the smallest context, when nothing fits */
}

/* The prompt batches a plan left to choose one tries, largest first.  A
 * larger batch reads the experts' weights once for more tokens (on an
 * H200, Q4_0: pp4096 5,149 tokens/s in batches of 512, 6,260 of 1024;
 * issue 25). */
static const uint32_t auto_batches[] = {2048, 1024, 512, ENGINE_DEFAULT_BATCH};
#define N_AUTO_BATCHES (sizeof auto_batches / sizeof auto_batches[0])
#define GPU_BATCH_CAP 1024u

/* The largest batch a plan left to choose may take: the batch_max knob,
 * by device where it is left to the engine.  On a GPU 1024: the chat cuts
 * chunks by time (DECODER_CHUNK_S), ~900 tokens on an H200, so a larger
 * batch would only cost -- grids sized for it, and where every position's
 * logits are asked for (engine_params.all_logits: `glmchat logits`) their
 * buffer in host memory (n_batch x n_vocab floats, pinned: 0.63 GB at
 * 1024 for GLM-4.7-Flash, 1.27 GB at 2048); a faster GPU may want 2048
 * (batch_max=2048 tries it).  A CPU device (lavapipe)
 * keeps ENGINE_DEFAULT_BATCH: a prompt graph's grid is sized for the
 * batch (tokens past a chunk exit at once, but on a CPU each empty
 * workgroup still costs a call), so there a larger batch made the chat's
 * time-cut chunks slower and longer -- tiny-glm-a Q4_0, pp1024 as
 * the chat reads it: batch 256, 97 tokens/s in chunks of ~0.38 s; batch
 * 1040, 74 tokens/s in chunks of ~2.0 s, past the 0.2 s Esc bound. */
static uint32_t batch_cap(const vk_engine *e)
{
    if (e->tune.batch_max != VK_TUNE_AUTO)
        return e->tune.batch_max;
    return e->c.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? ENGINE_DEFAULT_BATCH : GPU_BATCH_CAP;
}

/* The batch a plan left to choose starts from: the smallest it tries. */
static uint32_t least_batch(const vk_engine *e)
{
    uint32_t cap = batch_cap(e), least = auto_batches[N_AUTO_BATCHES - 1];
    return cap < least ? cap : least;
}

/* The batch left to the engine, after a plan with least_batch: the
 * largest of auto_batches (up to batch_cap) that fits beside the weights
 * and the cache of the context and the host split already chosen -- the
 * context and the experts on the device come first, the batch shrinks
 * before they do. */
static int grow_batch(vk_engine *e, buf_req *req, uint32_t *n, err_t *err)
{
    uint32_t least = e->p.n_batch, cap = batch_cap(e), n_blocks = e->hx.n_blocks;
    err_t scratch;
    for (size_t i = 0; i < N_AUTO_BATCHES; i++) {
        uint32_t batch = auto_batches[i] < cap ? auto_batches[i] : cap;
        if (batch <= least || (i > 0 && batch == (auto_batches[i - 1] < cap ? auto_batches[i - 1] : cap)))
            continue;
        if (least >= e->p.n_ctx)
            break; /* clamped to the context already */
        e->p.n_batch = batch;
        if (plan_with(e, req, n, n_blocks, &scratch) == 0)
            return 0;
        if (!e->fit_short) {
            *err = scratch;
            return -1;
        }
    }
    e->p.n_batch = least;
    return plan_with(e, req, n, n_blocks, err); /* it fitted before: the plan as it was */
}

/* A context that does not fit: err (check_fit's line) gets what would --
 * the largest context that fits, a larger --gpu-mem where that is what
 * stands in the way, the CPU backend. */
static void suggest_fit(vk_engine *e, buf_req *req, uint32_t *n, err_t *err)
{
    uint32_t asked = e->p.n_ctx, batch = e->p.n_batch;
    vk_placement short_by = e->place;
    const char *limit;
    bool capped = e->p.gpu_mem && e->p.gpu_mem < e->c.info.budget_bytes;
    (void)available_bytes(e, &limit);
    /* contexts of whole 256-token steps where one fits, else any from 16 */
    uint32_t fit = largest_fit(e, req, n, 256, asked / 256 * 256, 256, batch);
    if (!fit)
        fit = largest_fit(e, req, n, asked > 16 ? 16 : asked, asked, 1, batch);
    /* with none, e->place holds the figures of the smallest context tried */
    uint64_t least = e->place.weights + e->place.kv + e->place.act;
    uint32_t least_ctx = e->place.n_ctx;
    char more[32], arg[32], hint[200];
    if (fit)
        snprintf(hint, sizeof hint, "-c %u fits%s, or --backend cpu", fit,
                 capped ? ", or a larger --gpu-mem" : "");
    else if (capped && least <= e->c.info.budget_bytes)
        snprintf(hint, sizeof hint, "even -c %u needs %s: --gpu-mem %s or more, or --backend cpu", least_ctx,
                 mem_str(least, more, sizeof more), size_arg(least, arg, sizeof arg));
    else
        snprintf(hint, sizeof hint, "even -c %u needs %s, more than the device has: --backend cpu", least_ctx,
                 mem_str(least, more, sizeof more));
    e->p.n_ctx = asked;
    e->p.n_batch = batch;
    e->place = short_by;
    size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len, "; %s", hint);
}

static int build_decode(vk_engine *e, err_t *err)
{
    if (vk_family_build(e, &e->rec.decode, VK_PROGRAM_DECODE, 0, VK_FAMILY_SAMPLED, err)) {
        err_prefix(err, "recording the decode graph");
        return -1;
    }
    return 0;
}

/* Sampling after a prompt, the full-vocabulary selection (both short and
 * rare: timed in full whenever profiling is on) and the logits copy. */
static int build_sampling(vk_engine *e, err_t *err)
{
    int rc = vk_family_build(e, &e->rec.sample, VK_PROGRAM_SAMPLE, 0, VK_FAMILY_FULL, err);
    for (uint32_t set = 0; set < VK_SEL_SETS && !rc; set++)
        rc = vk_family_build(e, &e->rec.select[set], VK_PROGRAM_SELECT, set, VK_FAMILY_FULL, err);
    if (rc) {
        err_prefix(err, "recording the sampling programs");
        return -1;
    }
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = e->c.cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult res = vkAllocateCommandBuffers(e->c.dev, &ai, &e->rec.copy_logits);
    if (res != VK_SUCCESS)
        return vk_fail(&e->c, err, res, "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if ((res = vkBeginCommandBuffer(e->rec.copy_logits, &bi)) != VK_SUCCESS)
        return vk_fail(&e->c, err, res, "vkBeginCommandBuffer");
    VkBufferCopy region = {.srcOffset = e->b.logits.off, .dstOffset = e->b.host_logits.off,
                           .size = (uint64_t)e->m->cfg.n_vocab * 4};
    vkCmdCopyBuffer(e->rec.copy_logits, e->b.logits.buf, e->b.host_logits.buf, 1, &region);
    if ((res = vkEndCommandBuffer(e->rec.copy_logits)) != VK_SUCCESS)
        return vk_fail(&e->c, err, res, "vkEndCommandBuffer");
    return 0;
}

/* Counters of the router and top-K kernels start at zero (they reset
 * themselves after each use); so do the dependency counters, the tagged
 * words and their epochs, and (`caches`: at open, not when the counters
 * are tried again after a give-up) the KV caches. */
static int zero_counters(vk_engine *e, bool caches, err_t *err)
{
    memset(e->b.dep.map, 0, e->b.dep.size);
    e->b.epoch = 0;
    if (e->b.vdep.map)
        memset(e->b.vdep.map, 0, e->b.vdep.size);
    memset(e->b.vepoch, 0, sizeof e->b.vepoch);
    e->b.attn_total = 0;
    VkCommandBuffer cb;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = e->c.cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult res = vkAllocateCommandBuffers(e->c.dev, &ai, &cb);
    if (res != VK_SUCCESS)
        return vk_fail(&e->c, err, res, "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if ((res = vkBeginCommandBuffer(cb, &bi)) != VK_SUCCESS) {
        vkFreeCommandBuffers(e->c.dev, e->c.cmd_pool, 1, &cb);
        return vk_fail(&e->c, err, res, "vkBeginCommandBuffer");
    }
    vkCmdFillBuffer(cb, e->b.counters.buf, e->b.counters.off, (e->b.counters.size + 3) / 4 * 4, 0);
    vkCmdFillBuffer(cb, e->b.topk_cnt.buf, e->b.topk_cnt.off, (e->b.topk_cnt.size + 3) / 4 * 4, 0);
    /* tag 0 is no tag (dep_flag.glsl): nothing left in the buffer may match */
    vkCmdFillBuffer(cb, e->b.qkv_ll.buf, e->b.qkv_ll.off, (e->b.qkv_ll.size + 3) / 4 * 4, 0);
    vkCmdFillBuffer(cb, e->b.q_ll.buf, e->b.q_ll.off, (e->b.q_ll.size + 3) / 4 * 4, 0);
    vkCmdFillBuffer(cb, e->b.smp_count.buf, e->b.smp_count.off, (e->b.smp_count.size + 3) / 4 * 4, 0);
    vkCmdFillBuffer(cb, e->b.smp_hist.buf, e->b.smp_hist.off, (e->b.smp_hist.size + 3) / 4 * 4, 0);
    vkCmdFillBuffer(cb, e->b.smp_state.buf, e->b.smp_state.off, (e->b.smp_state.size + 3) / 4 * 4, 0);
    /* the caches: attn_fd reads whole tiles past the last position (masked,
     * but 0 * NaN would not be), so rows never written must be finite */
    for (uint32_t il = 0; caches && il < e->m->cfg.n_layer + e->nextn; il++)
        vkCmdFillBuffer(cb, e->b.cache[il].buf, e->b.cache[il].off, (e->b.cache[il].size + 3) / 4 * 4, 0);
    res = vkEndCommandBuffer(cb);
    int rc = res == VK_SUCCESS ? vk_submit_wait(&e->c, cb, err) : vk_fail(&e->c, err, res, "vkEndCommandBuffer");
    vkFreeCommandBuffers(e->c.dev, e->c.cmd_pool, 1, &cb);
    return rc;
}

/* ---- create / destroy ---------------------------------------------------------------------- */

static void vk_destroy(void *impl);

/* The device, and the plan for e->p on it (the context chosen when none
 * was given); a plan that does not fit says what would. */
static int open_and_plan(vk_engine *e, buf_req *req, uint32_t *n, err_t *err)
{
    if (vk_tuning_fill(&e->tune, e->p.tune, e->p.n_tune, err) || vk_ctx_create(&e->c, e->p.device_index, false, err) ||
        check_model(e, err))
        return -1;
    e->kb = (vk_kb){&e->c, &e->pipes, &e->tune, &e->kerr};
    if (e->p.n_cpu_moe > (int)e->m->cfg.n_layer)
        return err_set(err, "--n-cpu-moe %d: the model has %u layers", e->p.n_cpu_moe, e->m->cfg.n_layer);
    /* the NextN state only where drafting will run: a number of drafts, or
     * auto where it pays (engine_open turns auto off otherwise; `info`'s
     * placement gets the setting as it is) */
    bool drafts = e->p.draft > 0 || (e->p.draft == ENGINE_DRAFT_AUTO && vk_engine_backend.draft_pays);
    e->nextn = drafts && e->m->cfg.n_nextn > 0;
    bool auto_batch = e->p.n_batch == ENGINE_BATCH_AUTO;
    if (auto_batch)
        e->p.n_batch = least_batch(e);
    if ((e->p.n_ctx ? plan(e, req, n, err) : plan_auto_ctx(e, req, n, err)) != 0) {
        if (e->fit_short)
            suggest_fit(e, req, n, err);
        return -1;
    }
    return auto_batch ? grow_batch(e, req, n, err) : 0;
}

static int setup(vk_engine *e, err_t *err)
{
    buf_req req[80];
    uint32_t n;
    if (open_and_plan(e, req, &n, err))
        return -1;
    /* the plan's figures are a promise: no block past them (vk_memory.c) */
    if (e->p.gpu_mem)
        e->c.dev_cap = e->p.gpu_mem;
    vk_arena_init(&e->c, &e->b.act_arena, VK_MEM_DEVICE, 1ull << 30, "activations and KV cache");
    vk_arena_init(&e->c, &e->b.host_arena, VK_MEM_HOST, HOST_BLOCK, "host-visible buffers");
    vk_arena_init(&e->c, &e->b.bar_arena, VK_MEM_UPLOAD, BAR_BLOCK, "params");
    if (vk_weights_upload(&e->c, &e->tune, e->m, e->hx.host, e->nextn, &e->w, e->p.progress, e->p.progress_user,
                          err))
        return -1;
    if (alloc_buffers(e, req, n, err) || upload_rope(e, err) || zero_counters(e, true, err))
        return -1;
    vk_sync_init(&e->rec.sync, &e->kb, e->b.dep, e->b.params);
    if ((e->hx.n_layers ? vk_hostmoe_start(e, err) : build_decode(e, err)) || build_sampling(e, err))
        return -1;
    /* the prompt graph that writes every position's logits to host memory
     * only where its n_batch rows are there (engine_params.all_logits) */
    if (e->b.n_batch > 1 && !e->hx.n_layers && /* host layers: vk_hostmoe_start records parts */
        (vk_family_build(e, &e->rec.prefill, VK_PROGRAM_PREFILL, 0, VK_FAMILY_FULL, err) ||
         (e->p.all_logits &&
          vk_family_build(e, &e->rec.prefill_logits, VK_PROGRAM_PREFILL_LOGITS, 0, VK_FAMILY_FULL, err)))) {
        err_prefix(err, "recording the prefill graph");
        return -1;
    }
    if (e->nextn && vk_spec_build(e, err))
        return -1;
    char links[96] = "", tuned[192] = "", set[160];
    uint32_t n_dep = e->hx.n_parts ? 0 : e->rec.decode.prog.n_dep + 1, n_link = e->rec.decode.prog.n_link;
    for (uint32_t p = 0; p < e->hx.n_parts; p++) /* host layers: the parts between the CPU's turns */
        n_dep += e->hx.parts[p].prog.n_dep + 1;
    n_link += vk_hostmoe_links(e);
    if (n_link)
        snprintf(links, sizeof links, " (%u joined by counters%s, not barriers)", n_link,
                 e->rec.decode.prog.n_tagged ? " or tagged words: qkv q" : "");
    vk_tuning_describe(&e->tune, set, sizeof set);
    if (set[0])
        snprintf(tuned, sizeof tuned, "; tuning: %s", set);
    char placed[256], host[160] = "";
    placement_line(&e->place, false, placed, sizeof placed);
    if (e->place.host_layers) { /* first: the side pane shows the line's first three rows */
        host_line(&e->place, host, sizeof host - 2);
        strcat(host, "; ");
    }
    /* whether the decode's largest matvecs -- the last layer's routed
     * experts' (its output projection in a model without experts) -- run on
     * integer dot products (vk_k_idot) */
    const model_layer *last = &e->m->layers[e->m->cfg.n_layer - 1];
    vk_kb kb = {.c = &e->c, .tune = &e->tune};
    bool idot = vk_k_idot(&kb, last->gate_exps.name ? last->gate_exps.type : last->attn_out.type);
    snprintf(e->desc, sizeof e->desc, "Vulkan: %s%s (%s, %.1f GiB, subgroup %u%s%s); device memory: %s; %u dependent "
                                      "dispatches per token%s%s%s",
             host, e->c.info.name, e->c.info.kind, e->c.info.device_local_bytes / GiB, e->c.subgroup,
             e->c.coopmat ? ", cooperative matrices" : "", idot ? ", 8-bit integer dot products" : "", placed, n_dep,
             links, tuned, e->nextn ? "; NextN drafting" : "");
    return 0;
}

int vk_plan_placement(const model *m, const engine_params *p, vk_placement *out, err_t *err)
{
    vk_engine *e = calloc(1, sizeof *e);
    if (!e)
        return err_set(err, "out of host memory");
    e->m = m;
    e->p = *p;
    buf_req req[80];
    uint32_t n;
    int rc = open_and_plan(e, req, &n, err);
    if (rc == 0 || e->fit_short)
        *out = e->place;
    vk_destroy(e);
    return rc;
}

static int vk_create(void **impl, const model *m, engine_params *p, err_t *err)
{
    vk_engine *e = calloc(1, sizeof *e);
    if (!e)
        return err_set(err, "out of host memory");
    e->m = m;
    e->p = *p;
    if (setup(e, err)) {
        vk_destroy(e);
        return -1;
    }
    p->n_ctx = e->p.n_ctx; /* the context taken (chosen when none was given) */
    p->n_batch = e->p.n_batch;
    *impl = e;
    return 0;
}

static void vk_destroy(void *impl)
{
    vk_engine *e = impl;
    if (!e)
        return;
    if (e->c.dev) {
        vkDeviceWaitIdle(e->c.dev);
        vk_family_free(e, &e->rec.decode);
        vk_family_free(e, &e->rec.sample);
        for (uint32_t set = 0; set < VK_SEL_SETS; set++)
            vk_family_free(e, &e->rec.select[set]);
        if (e->rec.copy_logits)
            vkFreeCommandBuffers(e->c.dev, e->c.cmd_pool, 1, &e->rec.copy_logits);
        vk_family_free(e, &e->rec.prefill);
        vk_family_free(e, &e->rec.prefill_logits);
        vk_spec_free(e);
        vk_pipes_free(&e->c, &e->pipes);
        vk_arena_release(&e->c, &e->b.act_arena);
        vk_arena_release(&e->c, &e->b.host_arena);
        vk_arena_release(&e->c, &e->b.bar_arena);
    }
    vk_profile_free(&e->prof.decode);
    for (uint32_t set = 0; set < VK_SEL_SETS; set++)
        vk_profile_free(&e->prof.select[set]);
    vk_profile_free(&e->prof.sample);
    vk_profile_free(&e->prof.prefill);
    vk_hostmoe_free(e); /* the parts before the device goes */
    vk_weights_free(&e->c, &e->w);
    free(e->b.cache);
    vk_ctx_destroy(&e->c);
    free(e);
}

/* ---- eval ---------------------------------------------------------------------------------- */

/* The params words of n tokens at pos into p (the params buffer, or a
 * verify column's slice). */
static void write_params_to(vk_engine *e, uint32_t *p, const int32_t *tokens, uint32_t n, uint32_t pos, uint32_t k)
{
    uint32_t n_kv = pos + n, nc, cl;
    vk_attn_chunks(&e->b.ag, n_kv, &nc, &cl);
    p[VKP_POS0] = pos;
    p[VKP_NTOK] = n;
    p[VKP_NKV] = n_kv;
    p[VKP_NCHUNK] = nc;
    p[VKP_CHUNK] = cl;
    p[VKP_TOPK] = k;
    p[VKP_ATTN_IND] = nc;
    p[VKP_ATTN_IND + 1] = e->b.ag.dec_groups_y;
    p[VKP_ATTN_IND + 2] = n;
    vk_attn_chunks_prefill(n_kv, e->b.part_cap_prefill, &nc, &cl);
    p[VKP_NCHUNK_PF] = nc;
    p[VKP_CHUNK_PF] = cl;
    p[VKP_ATTN_IND_PF] = nc;
    /* attn_fd's head groups or flat row tiles, or attn.comp's head groups */
    vk_attn_prefill_grid(&e->b.ag, n, &p[VKP_ATTN_IND_PF + 1], &p[VKP_ATTN_IND_PF + 2]);
    memcpy(p + VKP_TOKENS, tokens, n * sizeof *tokens);
}

static void write_params(vk_engine *e, const int32_t *tokens, uint32_t n, uint32_t pos, uint32_t k)
{
    write_params_to(e, (uint32_t *)e->b.params.map, tokens, n, pos, k);
}

static void read_topk(vk_engine *e, const engine_output *out)
{
    uint32_t k = out->top_k;
    const int32_t *ids = (const int32_t *)e->b.out_ids.map;
    const float *v = (const float *)e->b.out_vals.map;
    uint32_t kk = k ? k : 1;
    for (uint32_t i = 0; i < k; i++) {
        if (out->top_ids)
            out->top_ids[i] = ids[i];
        if (out->top_logits)
            out->top_logits[i] = v[i];
    }
    if (out->log_z)
        *out->log_z = v[kk];
}

/* A short program (sampling alone, the selection): fully timed with
 * PROFILE_FULL; with PROFILE_SAMPLED on every SHORT_TIMED_EVERY'th run of
 * it (and its first), since a timestamp serializes the GPU (~2 us each). */
static vk_variant *short_variant(vk_engine *e, vk_family *f, uint64_t runs)
{
    bool timed = e->p.profile == PROFILE_FULL || (e->p.profile == PROFILE_SAMPLED && runs % SHORT_TIMED_EVERY == 0);
    return vk_family_pick(f, timed ? PROFILE_FULL : PROFILE_OFF);
}

/* After a program that ended with sample_pick: the token, once the
 * selection over the whole vocabulary has run when sample_pick asked for
 * it (shaders/sample_pick.comp). */
static int finish_sample(vk_engine *e, const engine_output *out, err_t *err)
{
    const volatile uint32_t *res = (const volatile uint32_t *)e->b.smp_result.map;
    if (res[SMPR_STATUS] == SMP_STATUS_SELECT) {
        uint32_t set = vk_sample_selections(&e->b.sg, out->sample);
        vk_variant *v = short_variant(e, &e->rec.select[set], e->prof.selects[set]);
        if (vk_submit_wait(&e->c, v->cb, err))
            return -1;
        vk_profile_collect(e, &e->rec.select[set], v, &e->prof.select[set]);
        e->prof.selects[set]++;
    }
    uint32_t tok = res[SMPR_TOKEN], prob = res[SMPR_PROB];
    if (res[SMPR_STATUS] != SMP_STATUS_DONE || tok >= e->m->cfg.n_vocab)
        return err_set(err, "internal: the GPU sampler returned token %u (status %u)", tok, res[SMPR_STATUS]);
    if (out->token)
        *out->token = (int32_t)tok;
    if (out->token_prob)
        memcpy(out->token_prob, &prob, sizeof prob);
    return 0;
}

/* The decode graph (or its parts, with experts in host memory) recorded
 * again, as the synchronisation planner now says. */
static int record_decode_again(vk_engine *e, err_t *err)
{
    vk_family_free(e, &e->rec.decode);
    if (!e->hx.n_parts)
        return build_decode(e, err);
    vk_hostmoe_unrecord(e);
    return vk_hostmoe_record(e, err);
}

/* A dependency wait or a tagged-word poll gave up (the device did not run
 * two dispatches together as assumed, or kept one waiting past the bound:
 * dep_flag.glsl): the programs are recorded again with barriers, slower,
 * until tune.sync_retry tokens later the counters are tried again (twice
 * as long after each give-up; barriers for good after VK_SYNC_RETRIES
 * retries or with sync_retry 0).  A GPU shared with other work -- a
 * desktop, a second program -- may keep a dispatch from running beside
 * its producer once without doing so for good.  The stats say when and
 * how often (engine_stats.sync_*: the side pane, `/stats`, `bench`). */
static void sync_gave_up(vk_engine *e)
{
    uint64_t now = e->prof.decoded + e->prof.verified;
    vk_sync_give_up(&e->rec.sync);
    e->prof.gave_up_at = 1 + now;
    e->prof.give_ups++;
    e->prof.retry_at = 0;
    if (e->tune.sync_retry && e->prof.give_ups <= VK_SYNC_RETRIES)
        e->prof.retry_at = now + ((uint64_t)e->tune.sync_retry << (e->prof.give_ups - 1));
}

/* Counters and tagged words again once the submits reach prof.retry_at
 * (sync_gave_up): every counter, tagged word and epoch back to zero
 * together -- the waits want cumulative counts (epoch x the producer's
 * workgroups) and the polls tags of the epoch, and the barrier-only
 * programs kept neither -- then the decode graph (or its parts) and the
 * verify programs recorded again with them.  The caches stay. */
static int sync_retry(vk_engine *e, err_t *err)
{
    uint64_t now = e->prof.decoded + e->prof.verified;
    if (!e->rec.sync.gave_up || !e->prof.retry_at || now < e->prof.retry_at)
        return 0;
    e->prof.retry_at = 0;
    e->prof.gave_up_at = 0;
    vk_sync_retry(&e->rec.sync);
    if (zero_counters(e, false, err) || record_decode_again(e, err))
        return -1;
    if (e->spec) {
        vk_spec_unrecord_verify(e);
        if (vk_spec_record_verify(e, err))
            return -1;
    }
    return 0;
}

/* One token through the decode graph. */
static int decode_one(vk_engine *e, int32_t token, uint32_t pos, const engine_output *out, float *logits_row,
                      err_t *err)
{
    uint32_t n_vocab = e->m->cfg.n_vocab;
    uint32_t k = out && out->top_k ? out->top_k : 0;
    const sampler_request *rq = out ? out->sample : NULL;
    if (k > TOPK_MAX || k > n_vocab)
        return err_set(err, "top-K of %u candidates: the Vulkan backend returns at most %u", k,
                       n_vocab < TOPK_MAX ? n_vocab : TOPK_MAX);
    if (rq && logits_row) /* the penalties would change the logits returned (engine.c samples those itself) */
        return err_set(err, "internal: logits and a GPU-sampled token from one decode");
    if (sync_retry(e, err))
        return -1;
    write_params(e, &token, 1, pos, k ? k : 1);
    vk_sample_write(&e->b.sg, (uint32_t *)e->b.smp_words.map, rq, k ? k : out && out->log_z ? 1 : 0);
    uint32_t *pw = (uint32_t *)e->b.params.map;
    pw[VKP_EPOCH] = ++e->b.epoch;
    e->b.attn_total += pw[VKP_ATTN_IND] * pw[VKP_ATTN_IND + 1] * pw[VKP_ATTN_IND + 2];
    pw[VKP_ATTN_TOTAL] = e->b.attn_total;
    /* The sampled profiler times one layer of every prof_every'th token (a
     * timestamp serializes the GPU around it). */
    profile_mode mode = e->p.profile;
    if (mode == PROFILE_SAMPLED && (e->tune.prof_every == 0 || e->prof.decoded % e->tune.prof_every != 0))
        mode = PROFILE_OFF;
    vk_variant *v = e->hx.n_parts ? NULL : vk_family_pick(&e->rec.decode, mode);
    if (v ? vk_submit_wait(&e->c, v->cb, err) : vk_hostmoe_decode(e, mode != PROFILE_OFF, err))
        return -1;
    if ((e->rec.decode.prog.n_link || vk_hostmoe_links(e)) && ((const uint32_t *)e->b.dep.map)[0] != 0) {
        /* a wait or a tagged-word poll gave up (the device did not launch
         * the dispatches in order): this token's results are not to be
         * trusted.  Record the graph with barriers only (no tagged words)
         * and decode the token again (the same position: its cache row is
         * rewritten). */
        sync_gave_up(e);
        if (record_decode_again(e, err))
            return -1;
        return decode_one(e, token, pos, out, logits_row, err);
    }
    if (v) /* (the parts time themselves: vk_hostmoe_decode) */
        vk_profile_collect(e, &e->rec.decode, v, &e->prof.decode);
    e->prof.decoded++;
    if (logits_row) {
        if (vk_submit_wait(&e->c, e->rec.copy_logits, err))
            return -1;
        memcpy(logits_row, e->b.host_logits.map, (uint64_t)n_vocab * 4);
    }
    if (out && (out->top_k || out->log_z))
        read_topk(e, out);
    return rq ? finish_sample(e, out, err) : 0;
}

/* The token after a prompt: the sampling program on the last position's
 * logits (which the prompt graph leaves in the logits buffer). */
static int sample_after_prompt(vk_engine *e, const engine_output *out, err_t *err)
{
    vk_sample_write(&e->b.sg, (uint32_t *)e->b.smp_words.map, out->sample, 0);
    vk_variant *v = short_variant(e, &e->rec.sample, e->prof.sampled_prompts++);
    if (vk_submit_wait(&e->c, v->cb, err))
        return -1;
    vk_profile_collect(e, &e->rec.sample, v, &e->prof.sample);
    return finish_sample(e, out, err);
}

/* A batch of tokens through the prefill graph. */
static int prefill(vk_engine *e, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_output *out,
                   err_t *err)
{
    uint32_t n_vocab = e->m->cfg.n_vocab;
    uint32_t k = out && out->top_k ? out->top_k : 1;
    if (k > TOPK_MAX || k > n_vocab)
        return err_set(err, "top-K of %u candidates: the Vulkan backend returns at most %u", k,
                       n_vocab < TOPK_MAX ? n_vocab : TOPK_MAX);
    /* every position's logits: the graph that writes them to host memory
     * (the engine opened for it); the last one's: the plain graph's head,
     * which leaves them in the logits buffer as a decode does */
    bool all_logits = out && out->logits && out->all_positions;
    bool last_logits = out && out->logits && !out->all_positions;
    if (out && out->logits && out->sample)
        return err_set(err, "internal: logits and a GPU-sampled token from one prompt");
    if (all_logits && !e->p.all_logits)
        return err_set(err, "internal: every position's logits of a prompt batch from a Vulkan engine opened "
                            "without engine_params.all_logits");
    write_params(e, tokens, n, pos, k);
    vk_family *f = all_logits ? &e->rec.prefill_logits : &e->rec.prefill;
    /* every dispatch timed with bench --profile; otherwise (sampled
     * profiling) every PREFILL_TIMED_EVERY'th chunk, so that a long prompt
     * fills the table at a small cost */
    bool timed = e->p.profile == PROFILE_FULL || (e->p.profile == PROFILE_SAMPLED && e->prof.prefills % PREFILL_TIMED_EVERY == 0);
    e->hx.pf_stretch_s = 0; /* the whole batch, unless the parts measure it */
    if (e->hx.pf_parts) { /* host layers: the parts, untimed */
        int rc = vk_hostmoe_prefill(e, n, all_logits, err);
        if (rc)
            return rc; /* -1, or 1: cancelled between host layers (nothing of the batch kept) */
    } else {
        vk_variant *v = vk_family_pick(f, timed ? PROFILE_FULL : PROFILE_OFF);
        if (vk_submit_wait(&e->c, v->cb, err))
            return -1;
        vk_profile_collect(e, f, v, &e->prof.prefill);
    }
    e->prof.prefills++;
    if (last_logits) {
        if (vk_submit_wait(&e->c, e->rec.copy_logits, err))
            return -1;
        memcpy(out->logits, e->b.host_logits.map, (uint64_t)n_vocab * 4);
    }
    if (all_logits) {
        const float *src = (const float *)e->b.host_logits.map;
        memcpy(out->logits, src, (uint64_t)n * n_vocab * 4);
        /* the logits graph has no top-K: derived on the host (rare path) */
        engine_last_row_outputs(src + (uint64_t)(n - 1) * n_vocab, n_vocab, out);
        return 0;
    }
    if (out && (out->top_k || out->log_z))
        read_topk(e, out);
    return out && out->sample ? sample_after_prompt(e, out, err) : 0;
}

static int vk_eval(void *impl, const int32_t *tokens, uint32_t n_tokens, uint32_t pos, const engine_output *out,
                   err_t *err)
{
    vk_engine *e = impl;
    uint32_t n_vocab = e->m->cfg.n_vocab;
    if (e->c.lost)
        return err_set(err, "the Vulkan device was lost earlier; restart glmchat or use --backend cpu");
    if ((uint64_t)pos + n_tokens > e->p.n_ctx)
        return err_set(err, "positions %u..%u are past the %u-token context", pos, pos + n_tokens - 1, e->p.n_ctx);
    if (n_tokens > 1 && n_tokens <= e->b.n_batch && (e->rec.prefill.plain.cb || e->hx.pf_parts))
        return prefill(e, tokens, n_tokens, pos, out, err);
    for (uint32_t i = 0; i < n_tokens; i++) {
        bool last = i + 1 == n_tokens;
        float *row = NULL;
        if (out && out->logits && out->all_positions)
            row = out->logits + (uint64_t)i * n_vocab;
        else if (out && out->logits && last)
            row = out->logits;
        if (decode_one(e, tokens[i], pos + i, last ? out : NULL, row, err))
            return -1;
    }
    return 0;
}

/* ---- drafting (engine.h's draft and verify; gpu/vk_spec.c) -------------------------------- */

/* A draft call's rows before its last from this many on: one batched
 * program (VK_PROGRAM_NEXTN_KV_BATCH) instead of a submit each */
#define NX_BATCH_MIN 8

int vk_nextn_rows(vk_engine *e, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *logits,
                  err_t *err)
{
    const uint32_t H = e->m->cfg.n_embd, V = e->m->cfg.n_vocab;
    if ((uint64_t)pos + n > e->p.n_ctx)
        return err_set(err, "NextN rows %u..%u are past the %u-token context", pos, pos + n - 1, e->p.n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if ((uint32_t)tokens[i] >= V)
            return err_set(err, "token id %d is outside the vocabulary (%u)", tokens[i], V);
    uint32_t i = 0, before = n ? n - 1 : 0;
    /* many rows before the last (a long prompt's, at the first draft after
     * it): their cache rows a batch at a time on the prompt graph's kernels
     * (other sums than a row's matvecs: the rows after them may differ in
     * the last bits; 4096 rows ~0.25 s one by one, gpu/PERF.md run 55) */
    while (!h && before - i >= NX_BATCH_MIN && e->rec.nextn_kv_batch.plain.cb && e->tune.nx_kv) {
        uint32_t m = before - i < e->b.n_batch ? before - i : e->b.n_batch;
        write_params(e, &tokens[i], m, pos + i, 1);
        if (vk_submit_wait(&e->c, e->rec.nextn_kv_batch.plain.cb, err))
            return -1;
        e->prof.nx_batched += m;
        i += m;
    }
    for (; i < n; i++) {
        write_params(e, &tokens[i], 1, pos + i, 1);
        /* rows before the last: their cache rows are all the later rows read */
        if (vk_spec_nextn_submit(e, h ? h + (size_t)i * H : NULL, i + 1 < n, err))
            return -1;
    }
    if (logits && n) /* (the NextN head writes them to host memory) */
        memcpy(logits, e->b.host_logits.map, (size_t)V * sizeof *logits);
    return 0;
}

/* (the NextN head writes its logits to host memory: spec_host reads them there) */
static int fwd_nextn_rows(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *buf,
                          float **at, err_t *err)
{
    vk_engine *e = fwd;
    *at = buf ? (float *)e->b.host_logits.map : NULL;
    return vk_nextn_rows(e, tokens, n, pos, h, NULL, err);
}

static const float *fwd_nextn_out(void *fwd)
{
    return vk_spec_nextn_out(fwd);
}

/* Whether n positions go through the verify program of n columns (else one
 * decode a position). */
static bool verify_columns(const vk_engine *e, uint32_t n)
{
    return n >= 2 && n <= VK_VCOLS && e->rec.verify[n].plain.cb;
}

int vk_eval_positions(vk_engine *e, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, bool columns,
                      err_t *err)
{
    const uint32_t V = e->m->cfg.n_vocab;
    if ((uint64_t)pos + n > e->p.n_ctx)
        return err_set(err, "positions %u..%u are past the %u-token context", pos, pos + n - 1, e->p.n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if ((uint32_t)tokens[i] >= V)
            return err_set(err, "token id %d is outside the vocabulary (%u)", tokens[i], V);
    if (columns && sync_retry(e, err))
        return -1;
    if (columns && verify_columns(e, n)) {
        /* the verify program: n columns at once (vk_forward.c), its counters
         * counting its own submits */
        e->b.vepoch[n]++;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t *p = (uint32_t *)vk_vcol_params(e, i).map;
            write_params_to(e, p, &tokens[i], 1, pos + i, 1);
            p[VKP_EPOCH] = e->b.vepoch[n];
        }
        if (vk_submit_wait(&e->c, e->rec.verify[n].plain.cb, err))
            return -1;
        if (e->rec.verify[n].prog.n_link && ((const uint32_t *)vk_vdep(e, n).map)[0] != 0) {
            /* a wait gave up (as decode_one's): the verify programs again
             * with barriers only, and this verify again (its cache rows
             * are rewritten) */
            sync_gave_up(e);
            vk_spec_unrecord_verify(e);
            if (vk_spec_record_verify(e, err))
                return -1;
            return vk_eval_positions(e, tokens, n, pos, logits, columns, err);
        }
        e->prof.verified++;
        if (logits)
            memcpy(logits, e->b.host_logits.map, (size_t)n * V * sizeof *logits);
        return 0;
    }
    /* the decode graph once per token, as eval runs it */
    for (uint32_t i = 0; i < n; i++)
        if (decode_one(e, tokens[i], pos + i, NULL, logits + (size_t)i * V, err))
            return -1;
    return 0;
}

/* Every position's logits -- bit for bit single-token decodes (gpu/vk_spec.c
 * says why). */
static int fwd_eval_all(void *fwd, const int32_t *tokens, uint32_t n, uint32_t pos, float *buf, float **at,
                        err_t *err)
{
    vk_engine *e = fwd;
    /* the verify program's rows stay where its heads wrote them; one
     * decode a position (experts in host memory) fills buf */
    bool in_place = verify_columns(e, n);
    *at = in_place ? (float *)e->b.host_logits.map : buf;
    return vk_eval_positions(e, tokens, n, pos, in_place ? NULL : buf, true, err);
}

static const spec_host_fwd vk_fwd = {fwd_nextn_rows, fwd_nextn_out, fwd_eval_all};

static int spec_usable(const vk_engine *e, err_t *err)
{
    if (e->c.lost)
        return err_set(err, "the Vulkan device was lost earlier; restart glmchat or use --backend cpu");
    if (!e->spec)
        return err_set(err, "this engine keeps no NextN state");
    return 0;
}

static int vk_draft(void *impl, const int32_t *tokens, uint32_t n, uint32_t pos, const engine_draft_req *req,
                    err_t *err)
{
    vk_engine *e = impl;
    return spec_usable(e, err) ? -1 : spec_host_draft(e->spec, &vk_fwd, e, tokens, n, pos, req, err);
}

static int vk_verify(void *impl, const int32_t *tokens, uint32_t pos, const engine_verify_req *req, err_t *err)
{
    vk_engine *e = impl;
    return spec_usable(e, err) ? -1 : spec_host_verify(e->spec, &vk_fwd, e, tokens, pos, req, err);
}

/* The decode graph's kernels, and the selection's as often as it ran. */
static void vk_get_stats(void *impl, engine_stats *st)
{
    vk_engine *e = impl;
    vk_profile_report(&e->rec.decode, &e->prof.decode, st);
    st->spec_host_seconds = spec_host_seconds(e->spec);
    st->sync_gave_up_at = e->prof.gave_up_at;
    st->sync_give_ups = e->prof.give_ups;
    st->sync_retry_at = e->prof.gave_up_at && e->prof.retry_at ? e->prof.retry_at + 1 : 0;
    if (e->hx.n_layers) {
        vk_hostmoe_kernel_stats(e, st);
        vk_hostmoe_split_stat(e, &st->split);
    }
    for (uint32_t set = 0; set < VK_SEL_SETS; set++)
        if (e->prof.selects[set] && e->prof.decoded)
            vk_profile_add(&e->rec.select[set], &e->prof.select[set], (double)e->prof.selects[set] / (double)e->prof.decoded, st);
}

/* The host-memory split's breakdown starts anew (the kernel table keeps
 * each dispatch's latest figure: nothing to reset). */
static void vk_reset_profile(void *impl)
{
    vk_engine *e = impl;
    memset(&e->hx.sum, 0, sizeof e->hx.sum);
}

static void vk_prefill_stats(void *impl, engine_stats *st)
{
    vk_engine *e = impl;
    memset(st, 0, sizeof *st);
    vk_profile_report(&e->rec.prefill, &e->prof.prefill, st);
    vk_profile_add(&e->rec.sample, &e->prof.sample, 1.0, st);
}

static void vk_set_profile(void *impl, profile_mode mode)
{
    ((vk_engine *)impl)->p.profile = mode;
}

static int vk_routing(void *impl, uint32_t n_tokens, uint32_t *distinct, uint32_t cap, uint32_t *n_layers,
                      uint32_t *n_expert, err_t *err)
{
    vk_engine *e = impl;
    const model_config *c = &e->m->cfg;
    uint32_t K = c->n_expert_used;
    *n_layers = 0;
    *n_expert = c->n_expert;
    if (n_tokens > e->b.n_batch || !K)
        return err_set(err, "routing: %u tokens do not fit one prefill batch of %u (or the model has no experts)",
                       n_tokens, e->b.n_batch);
    /* the ids of every layer, copied once to host memory */
    vk_arena a;
    vk_buf hb;
    vk_arena_init(&e->c, &a, VK_MEM_HOST, e->b.ids.size, "routing readback");
    if (vk_arena_alloc(&e->c, &a, e->b.ids.size, "routing readback", &hb, err))
        return -1;
    VkCommandBuffer cb;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = e->c.cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    int rc = 0;
    VkResult res = vkAllocateCommandBuffers(e->c.dev, &ai, &cb);
    if (res != VK_SUCCESS)
        rc = vk_fail(&e->c, err, res, "vkAllocateCommandBuffers");
    if (!rc) {
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        if ((res = vkBeginCommandBuffer(cb, &bi)) == VK_SUCCESS) {
            VkBufferCopy region = {.srcOffset = e->b.ids.off, .dstOffset = hb.off, .size = e->b.ids.size};
            vkCmdCopyBuffer(cb, e->b.ids.buf, hb.buf, 1, &region);
            res = vkEndCommandBuffer(cb);
        }
        rc = res == VK_SUCCESS ? vk_submit_wait(&e->c, cb, err) : vk_fail(&e->c, err, res, "recording a copy");
        vkFreeCommandBuffers(e->c.dev, e->c.cmd_pool, 1, &cb);
    }
    const int32_t *ids = (const int32_t *)hb.map;
    for (uint32_t il = 0; !rc && il < c->n_layer && *n_layers < cap; il++) {
        if (!e->w.layers[il].is_moe || e->w.layers[il].host_exps) /* a host layer's ids go to the CPU */
            continue;
        uint32_t seen[512] = {0}, d = 0;
        for (uint32_t t = 0; t < n_tokens; t++)
            for (uint32_t k = 0; k < K; k++) {
                int32_t x = ids[((uint64_t)il * e->b.n_batch + t) * K + k];
                if (x >= 0 && (uint32_t)x < c->n_expert && x < 512 && !seen[x]++)
                    d++;
            }
        distinct[(*n_layers)++] = d;
    }
    vk_arena_release(&e->c, &a);
    return rc;
}

static const char *vk_describe(void *impl)
{
    return ((vk_engine *)impl)->desc;
}

/* One program's listing after a line that names it and counts its steps. */
static int list_program(vk_engine *e, FILE *f, const char *what, const vk_family *fam, vk_program p, uint32_t set,
                        err_t *err)
{
    const vk_prog *pg = &fam->prog;
    if (!fam->plain.cb)
        return 0;
    fprintf(f, "\n# %s: %u dispatches, %u dependent steps, %u joined by counters or tagged words (%u by tagged words)\n",
            what, pg->n_disp, pg->n_dep + 1, pg->n_link, pg->n_tagged);
    return vk_program_list(e, p, set, f, err);
}

static int vk_print_plan(void *impl, FILE *f, err_t *err)
{
    vk_engine *e = impl;
    fprintf(f, "# The recorded programs, each as it is recorded: a line \"segment N\" where the\n"
               "# profiler's segment N begins (0 the embedding, 1 + i layer i, then the head);\n"
               "# a line a dispatch: its name, shader, specialization constants, grid (or the\n"
               "# buffer it takes its grid from), push words in hex and bindings (wN weight\n"
               "# slots, bN bindings: bK+offset/bytes, buffers numbered as they appear);\n"
               "# \"| barrier\" or \"~ link\" (a counter or tagged words, gpu/vk_sync.h) between\n"
               "# dependent steps; \"# ...\" what a dispatch waits for, signals or polls.\n");
    char name[64];
    int rc = list_program(e, f, "the decode graph (one token)", &e->rec.decode, VK_PROGRAM_DECODE, 0, err) ||
             list_program(e, f, "sampling after a prompt", &e->rec.sample, VK_PROGRAM_SAMPLE, 0, err);
    for (uint32_t set = 0; set < VK_SEL_SETS && !rc; set++) {
        snprintf(name, sizeof name, "the selection over the whole vocabulary, set %u", set);
        rc = list_program(e, f, name, &e->rec.select[set], VK_PROGRAM_SELECT, set, err);
    }
    if (!rc)
        rc = list_program(e, f, "the prompt graph (a batch)", &e->rec.prefill, VK_PROGRAM_PREFILL, 0, err) ||
             list_program(e, f, "the prompt graph with every position's logits", &e->rec.prefill_logits,
                          VK_PROGRAM_PREFILL_LOGITS, 0, err);
    return rc ? -1 : 0;
}

/* A prompt batch stops between host layers (vk_hostmoe_prefill): only with
 * experts in host memory, where a chunk's fixed part makes chunks long;
 * elsewhere a chunk is ~0.16 s and Esc waits for it.  Not between every
 * layer: the GPU's stretch after the last host layer (all the rest of the
 * model where few layers are in host memory) runs to its end; the longest
 * stretch is measured (vk_eval_stretch) and the chunks cut to it. */
static engine_cancel_reach vk_set_cancel(void *impl, const atomic_bool *flag)
{
    vk_engine *e = impl;
    e->cancel = flag;
    return e->hx.n_layers > 0 ? ENGINE_CANCEL_HOST_LAYERS : ENGINE_CANCEL_BETWEEN_EVALS;
}

static double vk_eval_stretch(void *impl)
{
    return ((const vk_engine *)impl)->hx.pf_stretch_s;
}

const engine_backend vk_engine_backend = {
    .name = "vulkan",
    .create = vk_create,
    .destroy = vk_destroy,
    .eval = vk_eval,
    .get_stats = vk_get_stats,
    .describe = vk_describe,
    .samples = true,
    .plans_batch = true,
    .set_cancel = vk_set_cancel,
    .eval_stretch = vk_eval_stretch,
    .set_profile = vk_set_profile,
    .prefill_stats = vk_prefill_stats,
    .reset_profile = vk_reset_profile,
    .routing = vk_routing,
    .print_plan = vk_print_plan,
    /* Not yet: the verify runs its k + 1 columns at once (vk_spec.c), but
     * each decode kernel's grid fills the GPU for one token, so k + 1
     * columns cost 1.7-2.6 tokens' time; a step at full acceptance reaches
     * 1.0-1.3x single-token decode, ~0.8x at the demo head's acceptance
     * (gpu/PERF.md runs 53-55).  --draft K still drafts. */
    .draft_pays = false,
    .draft = vk_draft,
    .verify = vk_verify,
};
