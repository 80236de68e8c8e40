/* pc_token.h: the token in and the token out (pc_common.h): embed (a row
 * of token_embd per token) and topk (the K best logits and logsumexp). */
#ifndef PC_TOKEN_H
#define PC_TOKEN_H

#include "params.h"

#if PC_HOST || defined(PC_USE_EMBED)
PC_BEGIN(pc_embed)
    PC_U32 K, Kp, hbase;
    PC_U32 tok_off;
    PC_U32 x_off, x_z;
    PC_U32 n_vocab;
    PC_U32 check_batch;     /* 1: the token buffer is the params buffer; tokens past params[VKP_NTOK] are skipped */
PC_END(pc_embed)
#endif
PC_ENUM_BEGIN(pc_embed_slot)
PC_ENUM(EMBED_B_TOKENS, 1)
PC_ENUM(EMBED_B_X, 2)
PC_ENUM(EMBED_S_TYPE, 1)
PC_ENUM(EMBED_S_COUNT, 2)       /* the workgroup size and the type */
PC_ENUM_END(pc_embed_slot)

#if PC_HOST || defined(PC_USE_TOPK)
PC_BEGIN(pc_topk)
    PC_U32 N, Kc, slice;
    PC_U32 l_off;
    PC_U32 k_in_params;     /* 1: K is params[VKP_TOPK], written per token */
PC_END(pc_topk)
#endif
PC_ENUM_BEGIN(pc_topk_slot)
PC_ENUM(TOPK_B_LOGITS, 1)
PC_ENUM(TOPK_B_CAND_V, 2)       /* [slice][K] */
PC_ENUM(TOPK_B_CAND_I, 3)       /* [slice][K] */
PC_ENUM(TOPK_B_MS, 4)           /* [slice] (max, sum) */
PC_ENUM(TOPK_B_COUNT, 5)
PC_ENUM(TOPK_B_OUT_IDS, 6)      /* [K] */
PC_ENUM(TOPK_B_OUT_VALS, 7)     /* [K + 1]: values, then logsumexp */
PC_ENUM(TOPK_B_PARAMS, 8)
PC_ENUM(TOPK_S_SG, 1)
PC_ENUM(TOPK_S_COUNT, 2)
PC_ENUM_END(pc_topk_slot)

#endif
