/* pc_attn.h: the attention kernels (pc_common.h): attn and attn_fd (the
 * chunk partials), attn_vb and attn_vb_xs (combine + v_b), attn_combine
 * (prefill: the combine alone), kv_store (the cache row). */
#ifndef PC_ATTN_H
#define PC_ATTN_H

#include "params.h"
#include "pc_matvec.h"

/* ---- attn, attn_fd: partials over chunks of the cache ---- */
#if PC_HOST || defined(PC_USE_ATTN)
PC_BEGIN(pc_attn)
    PC_U32 n_head, dlat;    /* dlat = kv_lora: the value part of a row */
    PC_F32 kq_scale;
    PC_U32 cache_off;       /* elements (multiple of 8) */
    PC_U32 q_abs_off, q_abs_z;    /* elements (multiples of 4) */
    PC_U32 part_off;
    PC_U32 cmax_chunks;     /* chunk capacity per (token, head) */
    PC_U32 chunk_word;      /* params word holding the chunk length (VKP_CHUNK or VKP_CHUNK_PF) */
    PC_U32 dep_signal;      /* attn_fd SIGNAL: this dispatch's counter */
    PC_U32 dep_wait, dep_n; /* attn_fd WAIT: the producers' counter and workgroups */
    PC_U32 o_off, o_z, o_h; /* attn_fd DIRECT: o_lat of (token z, head h) at o_off + z*o_z + h*o_h (multiples of 4) */
    PC_U32 early_lag;       /* attn_fd WAIT: rows this far below the position are written by the step waited on too */
PC_END(pc_attn)
#endif
PC_ENUM_BEGIN(pc_attn_binding)
PC_ENUM(ATTN_B_Q_ABS, 1)
PC_ENUM(ATTN_B_CACHE, 2)
PC_ENUM(ATTN_B_PART, 3)
PC_ENUM(ATTN_B_PARAMS, 4)
PC_ENUM(ATTN_B_O, 5)            /* attn_fd DIRECT: the latent outputs (may be the q_abs rows) */
PC_ENUM_END(pc_attn_binding)

PC_ENUM_BEGIN(pc_attn_spec)
PC_ENUM(ATTN_S_HG, 1)           /* attn: heads per workgroup */
PC_ENUM(ATTN_S_KVF16, 2)
PC_ENUM(ATTN_S_RS, 3)           /* cache row stride (multiple of 8) */
PC_ENUM(ATTN_S_CMAX, 4)         /* longest chunk */
PC_ENUM(ATTN_S_SG, 5)
PC_ENUM(ATTN_S_KQ, 6)           /* 8-element groups of a row per lane */
PC_ENUM(ATTN_S_PU, 7)           /* positions scored together per subgroup */
PC_ENUM(ATTN_S_SGMAX, 8)        /* longest chunk scored by subgroups */
PC_ENUM(ATTN_S_COUNT, 9)
PC_ENUM(FD_S_MT, 1)             /* attn_fd: 16-row head tiles per workgroup */
PC_ENUM(FD_S_RS, 2)             /* cache row, multiple of 16 */
PC_ENUM(FD_S_DLAT, 3)           /* kv_lora, multiple of 16 */
PC_ENUM(FD_S_HG, 4)             /* head groups (grid y) */
PC_ENUM(FD_S_FLAT, 5)           /* 1: a prompt batch's (token, head) pairs as rows */
PC_ENUM(FD_S_PROWS, 6)          /* FLAT: head rows per (token, chunk) in the partials */
PC_ENUM(FD_S_DIRECT, 7)         /* FLAT with one chunk a token: O / l to the latents, no partials */
PC_ENUM(FD_S_COUNT, 14)
PC_ENUM_END(pc_attn_spec)

/* ---- attn_vb, attn_vb_xs: a head's chunk partials combined, then v_b ---- */
#if PC_HOST || defined(PC_USE_ATTN_VB)
PC_BEGIN(pc_attn_vb)
    PC_U32 K, Kp, N;        /* K = kv_lora, N = v_head */
    PC_U32 hbase, mat_blocks;
    PC_U32 part_off, part_heads, cmax_chunks; /* head rows per (token, chunk); chunk capacity */
    PC_U32 o_off, o_z;
    PC_U32 passes;          /* attn_vb_xs: row passes per team */
    PC_U32 dep_signal;      /* attn_vb_xs SIGNAL: this dispatch's counter */
    PC_U32 dep_wait, dep_n; /* attn_vb_xs WAIT: the producers' counter and workgroups */
PC_END(pc_attn_vb)
#endif

/* the partials are the input (binding 1, MATVEC_B_X) */
PC_ENUM_BEGIN(pc_attn_vb_binding)
PC_ENUM(AVB_B_O, 2)
PC_ENUM(AVB_B_PARAMS, 4)
PC_ENUM_END(pc_attn_vb_binding)

PC_ENUM_BEGIN(pc_attn_vb_spec)
PC_ENUM(AVB_S_KSH, 5)           /* attn_vb */
PC_ENUM(AVB_S_UPT, 6)           /* attn_vb */
PC_ENUM(AVB_S_CCAP, 7)          /* both: chunk capacity per head */
PC_ENUM(AVB_S_COUNT, 8)
PC_ENUM_END(pc_attn_vb_spec)

/* ---- attn_combine: a prefill batch's latent outputs ---- */
#if PC_HOST || defined(PC_USE_ATTN_COMBINE)
PC_BEGIN(pc_attn_combine)
    PC_U32 K;               /* kv_lora: the latent width */
    PC_U32 part_off, part_heads; /* head rows per (token, chunk) in the partials (vk_attn_part_heads) */
    PC_U32 o_off, o_z, o_h; /* o_lat of (token z, head h) at o_off + z*o_z + h*o_h */
PC_END(pc_attn_combine)
#endif
PC_ENUM_BEGIN(pc_attn_combine_slot)
PC_ENUM(COMBINE_B_PART, 1)
PC_ENUM(COMBINE_B_O, 2)
PC_ENUM(COMBINE_B_PARAMS, 4)
PC_ENUM(COMBINE_S_CCAP, 1)      /* chunk capacity per (token, head) */
PC_ENUM(COMBINE_S_COUNT, 2)
PC_ENUM_END(pc_attn_combine_slot)

/* ---- kv_store: the new token's cache row and its rotated query ---- */
#if PC_HOST || defined(PC_USE_KV_STORE)
PC_BEGIN(pc_kv_store)
    PC_U32 kv_lora, rope, nope, n_head, RS;
    PC_U32 kv_off, kv_z;
    PC_U32 nw_off;
    PC_F32 eps;
    PC_U32 cache_off;       /* elements */
    PC_U32 q_off, q_z;      /* q of token z, head h at q_off + z*q_z + h*(nope+rope) */
    PC_U32 q_abs_off, q_abs_z; /* absorbed query of token z, head h at q_abs_off + z*q_abs_z + h*RS */
    PC_U32 dep_signal;      /* SIGNAL: this dispatch's counter */
    PC_U32 dep_wait, dep_n; /* WAIT: the producers' counter and workgroups */
    PC_U32 ll_in;           /* kv_store_ll: kv as tagged words of this site (dep_flag.glsl) */
    PC_U32 ll_q;            /* kv_store_ll: q as tagged words of this site */
PC_END(pc_kv_store)
#endif
PC_ENUM_BEGIN(pc_kv_store_slot)
PC_ENUM(KVS_B_KV, 1)
PC_ENUM(KVS_B_NORM, 2)
PC_ENUM(KVS_B_CACHE, 3)
PC_ENUM(KVS_B_ROPE, 4)          /* (cos, sin) per position and pair */
PC_ENUM(KVS_B_Q, 5)
PC_ENUM(KVS_B_Q_ABS, 6)
PC_ENUM(KVS_B_PARAMS, 7)
PC_ENUM(KVS_S_KVF16, 1)
PC_ENUM(KVS_S_SG, 2)
PC_ENUM(KVS_S_COUNT, 16)       /* the dependency ends and LL last */
PC_ENUM_END(pc_kv_store_slot)

#endif
