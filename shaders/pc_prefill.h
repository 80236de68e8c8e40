/* pc_prefill.h: the prompt graph's own kernels (pc_common.h): mm and
 * mm_coop (tiled mat-mat), rmsnorm, moe_group, moe_combine. */
#ifndef PC_PREFILL_H
#define PC_PREFILL_H

#include "params.h"

/* ---- mm, mm_coop: Y (=|+=) W . X, or silu(W.X) * (W2.X) ---- */
#if PC_HOST || defined(PC_USE_MM)
PC_BEGIN(pc_mm)
    PC_U32 K, Kp, N;
    PC_U32 hbase, hbase2;
    PC_U32 mblk, mblk2;     /* blocks per matrix */
    PC_U32 x_off, x_stride, x_z, x_div;
    PC_U32 y_off, y_stride, y_z;
PC_END(pc_mm)
#endif
PC_ENUM_BEGIN(pc_mm_slot)
PC_ENUM(MM_B_X, 1)
PC_ENUM(MM_B_Y, 2)
PC_ENUM(MM_B_LIST, 3)           /* expert mode: (token, slot) pairs by expert */
PC_ENUM(MM_B_TILES, 4)          /* expert mode: (expert, start, count) per tile */
PC_ENUM(MM_B_PARAMS, 5)
PC_ENUM(MM_B_Y16, 6)            /* mm_coop YF16 1: y's fp16 twin (packed pairs, y's element layout) */
PC_ENUM(MM_S_TYPE, 1)
PC_ENUM(MM_S_TYPE2, 2)
PC_ENUM(MM_S_BM, 3)             /* tokens per tile */
PC_ENUM(MM_S_BN, 4)             /* mm: rows per tile (mm_coop's are fixed) */
PC_ENUM(MM_S_MODE, 5)           /* 0 store, 1 add, 2 silu(W.X) * (W2.X) */
PC_ENUM(MM_S_LIST, 6)           /* 1: expert mode */
PC_ENUM(MM_S_XSPLIT, 7)         /* mm_coop: activations as hi + lo fp16 pairs */
PC_ENUM(MM_S_BK, 8)             /* mm_coop: K per step, 32 or 64 (mm's is fixed) */
PC_ENUM(MM_S_XF16, 9)           /* mm_coop: 1 -- X holds fp16 (packed pairs), x's twin (vk_mm_args.x16) */
PC_ENUM(MM_S_YF16, 10)          /* mm_coop: 1 -- y also in fp16 at MM_B_Y16 (vk_mm_args.y16) */
PC_ENUM(MM_S_COUNT, 11)
PC_ENUM_END(pc_mm_slot)

/* mm_coop's shared memory, in uvec4 (16 bytes, 8 fp16): the shader sizes
 * its tiles with these and the builder checks the sum against the device
 * (48 KiB on NVIDIA): 128 weight rows (Bs; Bs2 for gate/up) and BM tokens
 * (As; As2 for split activations) of BK halves each, a row padded by 16
 * bytes (80 or 144 bytes: the rows of a fragment load fall on distinct
 * banks); after the K loop, Bs holds the epilogue's 16 x 16 fp32 staging
 * areas of the 8 subgroups (MM_COOP_STAGE_VECS). */
#define MM_COOP_BN 128u
#define MM_COOP_LDV(bk) ((bk) / 8u + 1u)
#define MM_COOP_A_VECS(bm, bk) ((bm) * MM_COOP_LDV(bk))
#define MM_COOP_B_VECS(bk) (MM_COOP_BN * MM_COOP_LDV(bk))
#define MM_COOP_STAGE_VECS (8u * 16u * 16u / 4u)
#if PC_HOST
/* bytes of the shader's shared declarations (an unused tile is one uvec4;
 * xrow, yrow: 2 x BM words) */
#define MM_COOP_SHARED_BYTES(bm, bk, glu, xsplit)                                                          \
    (16u * (MM_COOP_A_VECS(bm, bk) * ((xsplit) ? 2u : 1u) + ((xsplit) ? 0u : 1u) + MM_COOP_B_VECS(bk) +    \
            ((glu) ? MM_COOP_B_VECS(bk) : 1u)) +                                                            \
     8u * (bm))
#endif

/* ---- rmsnorm: a batch's rows ---- */
#if PC_HOST || defined(PC_USE_RMSNORM)
PC_BEGIN(pc_rmsnorm)
    PC_U32 n;
    PC_U32 x_off, x_z, y_off, y_z, w_off;
    PC_F32 eps;
    /* rows by position (the NextN block's kept hidden states, one row per
     * cache position): y_at_pos, token t writes row params[VKP_POS0] + t;
     * x_prev_pos, it reads row params[VKP_POS0] + t - 1, zeros before 0 */
    PC_U32 y_at_pos, x_prev_pos;
PC_END(pc_rmsnorm)
#endif
PC_ENUM_BEGIN(pc_rmsnorm_slot)
PC_ENUM(RMSNORM_B_X, 1)
PC_ENUM(RMSNORM_B_Y, 2)
PC_ENUM(RMSNORM_B_W, 3)
PC_ENUM(RMSNORM_B_PARAMS, 4)
PC_ENUM(RMSNORM_B_Y16, 5)       /* Y16 1: y's fp16 twin (packed pairs, y's element layout) */
PC_ENUM(RMSNORM_S_SG, 1)
PC_ENUM(RMSNORM_S_Y16, 2)
PC_ENUM(RMSNORM_S_COUNT, 3)
PC_ENUM_END(pc_rmsnorm_slot)

/* ---- moe_group: (token, slot) pairs grouped by expert, tiles, indirect grids ---- */
#if PC_HOST || defined(PC_USE_MOE_GROUP)
PC_BEGIN(pc_moe_group)
    PC_U32 K, n_expert;
    PC_U32 ids_off;
    PC_U32 x_gu, x_dn;      /* workgroups across the outputs of each pass */
PC_END(pc_moe_group)
#endif
PC_ENUM_BEGIN(pc_moe_group_slot)
PC_ENUM(GROUP_B_IDS, 1)
PC_ENUM(GROUP_B_LIST, 2)
PC_ENUM(GROUP_B_TILES, 3)
PC_ENUM(GROUP_B_IND, 4)         /* 2 x VkDispatchIndirectCommand */
PC_ENUM(GROUP_B_PARAMS, 5)
PC_ENUM(GROUP_S_BM, 1)          /* pairs per tile */
PC_ENUM(GROUP_S_COUNT, 2)
PC_ENUM_END(pc_moe_group_slot)

/* ---- moe_combine: x += sum_k w_k y_k per token ---- */
#if PC_HOST || defined(PC_USE_MOE_COMBINE)
PC_BEGIN(pc_moe_combine)
    PC_U32 H, K;
    PC_U32 x_off, w_off;
PC_END(pc_moe_combine)
#endif
PC_ENUM_BEGIN(pc_moe_combine_slot)
PC_ENUM(MCOMB_B_Y, 1)
PC_ENUM(MCOMB_B_X, 2)
PC_ENUM(MCOMB_B_WTS, 3)
PC_ENUM(MCOMB_B_PARAMS, 4)
PC_ENUM(MCOMB_S_COUNT, 1)
PC_ENUM_END(pc_moe_combine_slot)

#endif
