/* params.h: the words of the params buffer the host writes before each
 * submit (gpu/vk_engine.c write_params) and the layout of the attention
 * partials, shared by the host and the shaders (pc_common.h). */
#ifndef PARAMS_H
#define PARAMS_H

#include "pc_common.h"

PC_ENUM_BEGIN(vk_params_word)
PC_ENUM(VKP_POS0, 0)            /* position of the batch's first token */
PC_ENUM(VKP_NTOK, 1)            /* tokens in the batch */
PC_ENUM(VKP_NKV, 2)             /* pos0 + ntok */
PC_ENUM(VKP_NCHUNK, 3)          /* attention chunks (decode) */
PC_ENUM(VKP_CHUNK, 4)           /* positions per chunk */
PC_ENUM(VKP_TOPK, 5)            /* candidates the top-K kernel returns */
PC_ENUM(VKP_NCHUNK_PF, 6)       /* attention chunks of a prefill batch */
PC_ENUM(VKP_CHUNK_PF, 7)        /* positions per prefill chunk */
PC_ENUM(VKP_ATTN_IND, 8)        /* VkDispatchIndirectCommand of the decode attention (3 words) */
PC_ENUM(VKP_EPOCH, 11)          /* decode submits so far, this one included (dependency counters) */
PC_ENUM(VKP_ATTN_IND_PF, 12)    /* ... of the prefill attention (3 words) */
PC_ENUM(VKP_ATTN_TOTAL, 15)     /* decode attention workgroups so far, this submit's included */
PC_ENUM(VKP_TOKENS, 16)         /* the batch's token ids */
PC_ENUM_END(vk_params_word)

/* An attention partial (one token, chunk and head) is VK_PART_HDR words --
 * m, l, padding -- then the kv_lora latent sums; partials lie (token,
 * chunk, head)-major, so a chunk's heads are side by side.  VK_PART_HDR
 * keeps every latent row 128-byte aligned when kv_lora is a multiple of 32,
 * which attn_fd's fragment stores need to run at full speed.  Written by
 * attn and attn_fd, read by attn_vb, attn_vb_xs and attn_combine. */
/* LL (shaders/dep_flag.glsl): a tagged word's tag is params[VKP_EPOCH] *
 * VK_LL_SITES + site, site (1 .. VK_LL_SITES - 1) naming the write of the
 * decode graph that stored it (vk_forward.c); VK_LL_STALL_SITE is written by
 * none (fault injection: a read expecting it gives up). */
PC_ENUM_BEGIN(vk_ll_layout)
PC_ENUM(VK_LL_SITES, 4096)
PC_ENUM(VK_LL_STALL_SITE, 4095)
PC_ENUM_END(vk_ll_layout)

PC_ENUM_BEGIN(vk_part_layout)
PC_ENUM(VK_PART_HDR, 32)
PC_ENUM_END(vk_part_layout)

#endif
