/* vk_k_prefill.c: the prompt graph's own builders (vk_kernels.h): rmsnorm,
 * the tiled mat-mat (fp32 or tensor cores), the expert grouping and
 * combine.  Their interfaces: shaders/pc_prefill.h. */
#include "pc_prefill.h"
#include "vk_k_common.h"

int vk_k_rmsnorm(const vk_kb *k, const vk_rmsnorm_args *a, vk_call *out)
{
    if (a->y16 && (a->y.off % 8 || a->y_z % 8 || a->n % 8))
        return err_set(k->err, "rmsnorm: an fp16 twin needs offsets, row stride and length in multiples of 8");
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = 256;
    spec[RMSNORM_S_SG] = k->c->subgroup;
    spec[RMSNORM_S_Y16] = a->y16 ? 1 : 0;
    memset(out, 0, sizeof *out);
    out->name = "rmsnorm";
    if (!(out->pipe = pipe(k, SPV_RMSNORM, spec, RMSNORM_S_COUNT)))
        return -1;
    out->b[RMSNORM_B_X] = a->x.b;
    out->b[RMSNORM_B_Y] = a->y.b;
    out->b[RMSNORM_B_W] = a->w.b;
    out->b[RMSNORM_B_PARAMS] = a->params;
    if (a->y16)
        out->b[RMSNORM_B_Y16] = *a->y16;
    pc_rmsnorm pc = {.n = a->n, .x_off = a->x.off, .x_z = a->x_z, .y_off = a->y.off, .y_z = a->y_z,
                     .w_off = a->w.off, .eps = a->eps, .y_at_pos = a->y_at_pos, .x_prev_pos = a->x_prev_pos};
    VK_PUSH(out, pc);
    out->groups[0] = a->nz;
    out->groups[1] = out->groups[2] = 1;
    out->bytes = (a->y16 ? 10ull : 8ull) * a->n * a->nz;
    return 0;
}

#define MM_BM 64u
#define MM_BM_EXPERT 32u
#define MM_BN 64u
/* mm_coop's K per step (both measured on every kernel, gpu/PERF.md run 23):
 * 64 where every workgroup of the grid has an SM of its own (a batch's
 * narrower mat-mats: q_a, kv_a, attn_output, the shared expert), each step
 * waiting on its loads' latency, which a longer step pays half as often; 32
 * for larger grids (q_b, k_b, v_b, the expert work lists), where the smaller
 * tiles (23 KB for gate/up instead of 42) let more workgroups share an SM
 * and hide that latency better than a longer step does. */
#define MM_COOP_BK 64u
#define MM_COOP_BK_WIDE 32u

/* mm_coop's tiles in shared memory for every variant that is built (64 or
 * 32 tokens, steps of 64 or 32, gate/up: two weight tiles, or split
 * activations: two activation tiles, never both) within the 48 KiB of the
 * devices that have cooperative matrices (vk_k_mm checks the device's own
 * limit); the epilogue's staging fits the weight tile. */
_Static_assert(MM_COOP_SHARED_BYTES(64u, MM_COOP_BK, 1, 0) <= 48u * 1024u, "mm_coop gate/up of a batch: 48 KiB");
_Static_assert(MM_COOP_SHARED_BYTES(64u, MM_COOP_BK, 0, 1) <= 48u * 1024u, "mm_coop split activations: 48 KiB");
_Static_assert(MM_COOP_SHARED_BYTES(64u, MM_COOP_BK_WIDE, 1, 0) <= MM_COOP_SHARED_BYTES(64u, MM_COOP_BK, 1, 0),
               "mm_coop: the longer step has the larger tiles");
_Static_assert(MM_COOP_B_VECS(MM_COOP_BK_WIDE) >= MM_COOP_STAGE_VECS, "mm_coop's epilogue staging fits its weight tile");

/* Tensor cores (NV cooperative matrices, fp16 in / fp32 accumulate) for
 * quantized weights where the device has them; F32 weights keep the fp32
 * kernel (their models' 1e-4 criterion).  mm_coop: 128 rows x 64 or 32
 * tokens, 8 subgroups, packed fp16 tiles, the next step's loads in flight
 * during the MMAs; tune->coopmat = 0 runs the fp32 kernel (mm) instead,
 * e.g. for activations beyond fp16's range. */
enum { MM_FP32, MM_COOP };

static uint32_t mm_kind(const vk_kb *k, const vk_tensor *w, const vk_tensor *u)
{
    if (!k->c->coopmat || !k->tune->coopmat || w->type == QT_F32 || (u && u->type == QT_F32))
        return MM_FP32;
    return MM_COOP;
}

static const enum spv_id MM_SHADER[] = {SPV_MM, SPV_MM_COOP};

/* Shared bytes of the low-bit types' tables the kernel copies for w and up
 * (shaders/quant_iq.glsl: one for each distinct type that has one). */
static uint32_t iq_table_bytes(const vk_tensor *w, const vk_tensor *u)
{
    uint32_t t2 = u && u->type != w->type ? u->type : 0;
    return 4u * (PC_IQ_TABLE_WORDS(w->type) + PC_IQ_TABLE_WORDS(t2));
}

/* Shared bytes of mm.comp's tiles (BK = 32: As, Bs, gate/up's Bs2, the row
 * maps) for bm tokens x bn rows, and the tables. */
static uint32_t mm_fp32_shared(uint32_t bm, uint32_t bn, const vk_tensor *w, const vk_tensor *u)
{
    return 4u * (32u * bm + 32u * bn + (u ? 32u * bn : 1u) + 2u * bm) + iq_table_bytes(w, u);
}

/* mm.comp's rows per tile: 64, or 32 where the tiles and a grid type's
 * table exceed the device's shared memory (lavapipe's 32 KiB: gate/up of
 * IQ2_S). */
static uint32_t mm_fp32_bn(const vk_kb *k, const vk_tensor *w, const vk_tensor *u)
{
    return mm_fp32_shared(MM_BM, MM_BN, w, u) <= k->c->shared_bytes ? MM_BN : MM_BN / 2;
}

const char *vk_mm_kernel(const vk_kb *k, const vk_tensor *w, const vk_tensor *up)
{
    return spv_table[MM_SHADER[mm_kind(k, w, up)]].name;
}

bool vk_mm_on_tensor_cores(const vk_kb *k, const vk_tensor *w, const vk_tensor *up)
{
    return mm_kind(k, w, up) == MM_COOP;
}

uint32_t vk_mm_expert_bm(const vk_kb *k, const vk_tensor *w)
{
    /* 32 pairs (~one expert's share of a 512-token batch); tiles of 64 on
     * tensor cores were 8-24 % slower (gpu/PERF.md run 24) */
    (void)k, (void)w;
    return MM_BM_EXPERT;
}

uint32_t vk_mm_bn(const vk_kb *k, const vk_tensor *w, const vk_tensor *up)
{
    return mm_kind(k, w, up) == MM_COOP ? MM_COOP_BN : mm_fp32_bn(k, w, up);
}

int vk_k_mm(const vk_kb *k, const vk_mm_args *a, vk_call *out)
{
    const vk_tensor *w = a->w, *u = a->up;
    bool list = a->tiles != NULL;
    if (u && (u->K != w->K || u->N != w->N || u->Kp != w->Kp))
        return err_set(k->err, "%s: gate and up shapes differ", a->name);
    if (u && a->x_split)
        return err_set(k->err, "%s: split activations with gate and up", a->name);
    uint32_t kind = mm_kind(k, w, u);
    if (list && a->tile != MM_BM_EXPERT && !(a->tile == 64 && kind != MM_FP32))
        return err_set(k->err, "%s: expert tiles of %u pairs do not match the kernel", a->name, a->tile);
    /* mm_coop takes the list's tile size (32 or 64); the fp32 kernel 32 */
    uint32_t bm = list ? (kind == MM_COOP ? a->tile : MM_BM_EXPERT) : MM_BM;
    uint32_t bn = kind == MM_COOP ? MM_COOP_BN : mm_fp32_bn(k, w, u);
    uint32_t grid = ceil_div(w->N, bn) * ceil_div(a->max_tokens, bm) * (a->nz ? a->nz : 1);
    uint32_t bk = kind != MM_COOP ? 0 : !list && grid <= k->c->n_sm_hint ? MM_COOP_BK : MM_COOP_BK_WIDE;
    bool split = kind == MM_COOP && a->x_split;
    uint32_t tables = iq_table_bytes(w, u);
    /* a grid type's table beside the tiles of a step of 64 (gate/up: 46
     * KiB) may not fit the device's shared memory: steps of 32 */
    if (kind == MM_COOP && bk == MM_COOP_BK && MM_COOP_SHARED_BYTES(bm, bk, u != NULL, split) + tables > k->c->shared_bytes)
        bk = MM_COOP_BK_WIDE;
    if (kind == MM_COOP && MM_COOP_SHARED_BYTES(bm, bk, u != NULL, split) + tables > k->c->shared_bytes)
        return err_set(k->err, "%s: mm_coop needs %u bytes of shared memory (%u tokens, step %u), the device has %u",
                       a->name, MM_COOP_SHARED_BYTES(bm, bk, u != NULL, split) + tables, bm, bk, k->c->shared_bytes);
    if (kind == MM_FP32 && mm_fp32_shared(bm, bn, w, u) > k->c->shared_bytes)
        return err_set(k->err, "%s: mm needs %u bytes of shared memory (%u tokens, %u rows), the device has %u", a->name,
                       mm_fp32_shared(bm, bn, w, u), bm, bn, k->c->shared_bytes);
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = 256;
    spec[MM_S_TYPE] = w->type;
    spec[MM_S_TYPE2] = u ? u->type : w->type;
    spec[MM_S_BM] = bm;
    spec[MM_S_BN] = bn;
    spec[MM_S_MODE] = u ? 2 : a->accumulate ? 1 : 0;
    spec[MM_S_LIST] = list ? 1 : 0;
    /* the split only where activations are rounded (one pipeline otherwise) */
    spec[MM_S_XSPLIT] = split ? 1 : 0;
    spec[MM_S_BK] = bk;
    /* fp16 inputs written by their producer (not with split activations,
     * which need x's low bits) */
    bool x16 = kind == MM_COOP && a->x16 && !split;
    spec[MM_S_XF16] = x16 ? 1 : 0;
    if (a->y16 && (kind != MM_COOP || a->accumulate || a->y.off % 8 || a->y_stride % 8 || a->y_z % 8 || w->N % 8))
        return err_set(k->err, "%s: an fp16 twin of y needs the tensor-core kernel, a store or gate/up, and offsets, "
                       "strides and rows in multiples of 8", a->name);
    spec[MM_S_YF16] = a->y16 ? 1 : 0;
    memset(out, 0, sizeof *out);
    out->name = a->name;
    if (!(out->pipe = pipe(k, MM_SHADER[kind], spec, MM_S_COUNT)))
        return -1;
    out->w[0] = w->buf;
    if (u)
        out->w[1] = u->buf;
    out->b[MM_B_X] = x16 ? *a->x16 : a->x.b;
    out->b[MM_B_Y] = a->y.b;
    if (list) {
        out->b[MM_B_LIST] = *a->list;
        out->b[MM_B_TILES] = *a->tiles;
    }
    out->b[MM_B_PARAMS] = a->params;
    if (a->y16)
        out->b[MM_B_Y16] = *a->y16;
    pc_mm pc = {.K = w->K, .Kp = w->Kp, .N = w->N, .hbase = (uint32_t)w->head_off,
                .hbase2 = u ? (uint32_t)u->head_off : 0, .mblk = w->bpr * w->N, .mblk2 = u ? u->bpr * u->N : 0,
                .x_off = a->x.off, .x_stride = a->x_stride, .x_z = a->x_z, .x_div = a->x_div ? a->x_div : 1,
                .y_off = a->y.off, .y_stride = a->y_stride, .y_z = a->y_z};
    VK_PUSH(out, pc);
    out->groups[0] = ceil_div(w->N, bn);
    out->groups[1] = ceil_div(a->max_tokens, bm);
    out->groups[2] = a->nz ? a->nz : 1;
    out->indirect = list ? a->indirect : NULL;
    uint64_t wb = w->src_bytes + (u ? u->src_bytes : 0);
    out->bytes = list ? wb : wb / (w->n_mat ? w->n_mat : 1) * out->groups[2];
    return 0;
}

int vk_k_moe_group(const vk_kb *k, const vk_moe_group_args *a, vk_call *out)
{
    if (a->n_expert > 512)
        return err_set(k->err, "moe_group: %u experts (at most 512)", a->n_expert);
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = 256;
    spec[GROUP_S_BM] = a->tile;
    memset(out, 0, sizeof *out);
    out->name = "moe_group";
    if (!(out->pipe = pipe(k, SPV_MOE_GROUP, spec, GROUP_S_COUNT)))
        return -1;
    out->b[GROUP_B_IDS] = a->ids.b;
    out->b[GROUP_B_LIST] = a->list;
    out->b[GROUP_B_TILES] = a->tiles;
    out->b[GROUP_B_IND] = a->indirect;
    out->b[GROUP_B_PARAMS] = a->params;
    pc_moe_group pc = {.K = a->K, .n_expert = a->n_expert, .ids_off = a->ids.off, .x_gu = a->x_gu, .x_dn = a->x_dn};
    VK_PUSH(out, pc);
    out->groups[0] = out->groups[1] = out->groups[2] = 1;
    return 0;
}

int vk_k_moe_combine(const vk_kb *k, const vk_moe_combine_args *a, vk_call *out)
{
    if (a->y.off)
        return err_set(k->err, "moe_combine: expert outputs must start their buffer");
    uint32_t spec[VKC_MAX_SPEC] = {0};
    spec[PC_S_WGS] = 256;
    memset(out, 0, sizeof *out);
    out->name = "moe_combine";
    if (!(out->pipe = pipe(k, SPV_MOE_COMBINE, spec, MCOMB_S_COUNT)))
        return -1;
    out->b[MCOMB_B_Y] = a->y.b;
    out->b[MCOMB_B_X] = a->x.b;
    out->b[MCOMB_B_WTS] = a->wts.b;
    out->b[MCOMB_B_PARAMS] = a->params;
    pc_moe_combine pc = {.H = a->H, .K = a->K, .x_off = a->x.off, .w_off = a->wts.off};
    VK_PUSH(out, pc);
    out->groups[0] = ceil_div(a->H, 256);
    out->groups[1] = a->max_tokens;
    out->groups[2] = 1;
    return 0;
}
