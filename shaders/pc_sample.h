/* pc_sample.h: sampling on the GPU (core/sample/sampler.h's definition; the
 * kernels sample_cand, sample_pick and sample_select, gpu/vk_k_sample.c):
 * the words of the sampling buffer the host writes per token, the result
 * the host reads, the state of the full-vocabulary selection, and each
 * kernel's push constants and slots (pc_common.h). */
#ifndef PC_SAMPLE_H
#define PC_SAMPLE_H

#include "pc_common.h"

/* The sampling buffer (host-written before each submit): a header, then
 * SMP_PEN_MAX (id, count) pairs of the penalty window's distinct tokens.
 * Floats are stored as their bits. */
PC_ENUM_BEGIN(smp_word)
PC_ENUM(SMP_FLAGS, 0)        /* SMP_F_* */
PC_ENUM(SMP_K, 1)            /* candidates sample_cand keeps (1..SMP_KMAX) */
PC_ENUM(SMP_TOPK, 2)         /* 0: off (or >= the vocabulary) */
PC_ENUM(SMP_TOPP, 3)         /* floor(top_p * 2^32), with SMP_F_TOPP */
PC_ENUM(SMP_LOG_MINP, 4)     /* logf(min_p), with SMP_F_MINP */
PC_ENUM(SMP_INV_T, 5)        /* 1 / temperature */
PC_ENUM(SMP_RP, 6)           /* repeat penalty and its inverse, frequency, presence */
PC_ENUM(SMP_INV_RP, 7)
PC_ENUM(SMP_FREQ, 8)
PC_ENUM(SMP_PRES, 9)
PC_ENUM(SMP_UNIFORM, 10)     /* the draw's 32 random bits */
PC_ENUM(SMP_NPEN, 11)        /* (id, count) pairs from SMP_PEN */
PC_ENUM(SMP_PICK_IND, 12)    /* VkDispatchIndirectCommand of sample_pick (3 words) */
PC_ENUM(SMP_PEN, 16)
PC_ENUM(SMP_PEN_MAX, 4096)   /* = SAMPLER_MAX_WINDOW */
PC_ENUM(SMP_KMAX, 64)        /* candidates at most */
PC_ENUM(SMP_MAX_SLICES, 32)  /* workgroups over the vocabulary at most */
PC_ENUM_END(smp_word)

PC_ENUM_BEGIN(smp_flag)
PC_ENUM(SMP_F_PICK, 1)       /* pick a token (else: candidates only) */
PC_ENUM(SMP_F_GREEDY, 2)
PC_ENUM(SMP_F_TOPP, 4)
PC_ENUM(SMP_F_MINP, 8)
PC_ENUM(SMP_F_PEN, 16)       /* apply the penalties */
PC_ENUM(SMP_F_HOST_TOPK, 32) /* also write the candidates and the logsumexp for the host */
PC_ENUM(SMP_F_MASS, 64)      /* sample_pick sums m over the whole vocabulary (top-p without top-k) */
PC_ENUM_END(smp_flag)

/* The result (host-visible): the token, its probability among the kept
 * tokens (float bits; for display), and whether the candidates could not
 * hold the kept tokens (SMP_STATUS_SELECT: run sample_select). */
PC_ENUM_BEGIN(smp_result_word)
PC_ENUM(SMPR_TOKEN, 0)
PC_ENUM(SMPR_PROB, 1)
PC_ENUM(SMPR_STATUS, 2)
PC_ENUM(SMPR_KEPT, 3)        /* tokens kept, when decided on the candidates */
PC_ENUM(SMPR_WAY, 4)         /* SMP_WAY_*: how sample_pick went on */
PC_ENUM(SMPR_WORDS, 8)
PC_ENUM(SMP_STATUS_DONE, 0)
PC_ENUM(SMP_STATUS_SELECT, 1)
PC_ENUM(SMP_WAY_CAND, 0)     /* the token from the candidates (or none yet: SMP_STATUS_SELECT) */
PC_ENUM(SMP_WAY_TAIL, 1)     /* sample_pick set the grids of the selections after it (SST_IND) */
PC_ENUM(SMP_WAY_WHOLE, 2)    /* sample_pick drew over the whole vocabulary itself (min-p first) */
PC_ENUM_END(smp_result_word)

/* The state of the full-vocabulary selection (device): two selections
 * s (0: the top-k bound, 1: the top-p cut), each the first token of the
 * order whose running weight reaches a target, found by a histogram per
 * byte of the key (passes 0-3), then a count of the tokens that tie on the
 * found key and the token (pass 4); and the draw (s = 2, one pass: the
 * kept tokens in id order). */
PC_ENUM_BEGIN(smp_state_word)
PC_ENUM(SST_MAX, 0)          /* the best logit (float bits) */
PC_ENUM(SST_FIRST_KEY, 1)    /* the first token of the order */
PC_ENUM(SST_FIRST_ID, 2)
PC_ENUM(SST_MINP_KEY, 3)     /* min-p keeps keys <= this (0xffffffff: off) */
PC_ENUM(SST_COUNT, 4)        /* finished workgroups of a pass 4 (zero between uses) */
PC_ENUM(SST_SEL, 8)          /* selection s at SST_SEL + s * SST_SEL_WORDS: */
PC_ENUM(SST_SEL_WORDS, 24)
PC_ENUM(SSS_ACTIVE, 0)       /* run it (else RES holds its answer, or all-ones: no bound) */
PC_ENUM(SSS_RES_KEY, 1)
PC_ENUM(SSS_RES_ID, 2)
PC_ENUM(SSS_TGT, 3)          /* 2 words: the target */
PC_ENUM(SSS_TOTAL, 5)        /* 2 words: the weight of the restricted tokens */
PC_ENUM(SSS_PFX, 7)          /* 5 words: the key bits found before pass p */
PC_ENUM(SSS_CUM, 12)         /* 5 x 2 words: the weight before them */
PC_ENUM(SST_IND, 80)          /* selections 1 and 2: VkDispatchIndirectCommand each (3 words), */
                              /* written by sample_cand (0) and sample_pick, read by the */
                              /* passes recorded after it (pc_sample_pick.tail) */
PC_ENUM(SST_WORDS, 88)
PC_ENUM(SMP_HIST_WORDS, 6144) /* 3 selections x 4 passes x 256 bins x 2 words (the draw: its slices' weights) */
PC_ENUM(SMP_TIE_BINS, 256)    /* per selection: tokens on the found key, by block of ids */
PC_ENUM_END(smp_state_word)

#if PC_HOST || defined(PC_USE_SAMPLE_CAND)
PC_BEGIN(pc_sample_cand)
    PC_U32 n;           /* vocabulary */
    PC_U32 slice;       /* tokens per workgroup (WGS * PER) */
    PC_U32 l_off;
PC_END(pc_sample_cand)
#endif
PC_ENUM_BEGIN(pc_sample_cand_slot)
PC_ENUM(SCAND_B_LOGITS, 1)   /* penalised in place */
PC_ENUM(SCAND_B_CAND_V, 2)   /* [SMP_MAX_SLICES + 1][SMP_KMAX]: per slice, then the merged list */
PC_ENUM(SCAND_B_CAND_I, 3)
PC_ENUM(SCAND_B_MS, 4)       /* [slice] (max, sum of exp) */
PC_ENUM(SCAND_B_COUNT, 5)    /* word 0 */
PC_ENUM(SCAND_B_OUT_IDS, 6)  /* host: [K] */
PC_ENUM(SCAND_B_OUT_VALS, 7) /* host: [K + 1] values, then the logsumexp */
PC_ENUM(SCAND_B_SMP, 8)
PC_ENUM(SCAND_B_STATE, 9)    /* the tail's grids (SST_IND), zeroed */
PC_ENUM(SCAND_S_PER, 1)      /* tokens per thread */
PC_ENUM(SCAND_S_COUNT, 2)
PC_ENUM_END(pc_sample_cand_slot)

#if PC_HOST || defined(PC_USE_SAMPLE_PICK)
PC_BEGIN(pc_sample_pick)
    PC_U32 n;
    PC_U32 slice;
    PC_U32 l_off;
    PC_U32 tail;        /* 1: the program goes on with selections 1 and 2 on the grids at SST_IND */
PC_END(pc_sample_pick)
#endif
PC_ENUM_BEGIN(pc_sample_pick_slot)
PC_ENUM(SPICK_B_LOGITS, 1)
PC_ENUM(SPICK_B_CAND_V, 2)
PC_ENUM(SPICK_B_CAND_I, 3)
PC_ENUM(SPICK_B_PART, 4)     /* [3][slice] uvec2: m summed over the slice; over its tokens min-p keeps; r over those */
PC_ENUM(SPICK_B_COUNT, 5)    /* word 1 */
PC_ENUM(SPICK_B_RESULT, 6)   /* host */
PC_ENUM(SPICK_B_SMP, 7)
PC_ENUM(SPICK_B_STATE, 8)    /* set up for sample_select */
PC_ENUM(SPICK_S_COUNT, 1)
PC_ENUM_END(pc_sample_pick_slot)

#if PC_HOST || defined(PC_USE_SAMPLE_SELECT)
PC_BEGIN(pc_sample_select)
    PC_U32 n;
    PC_U32 slice;
    PC_U32 l_off;
    PC_U32 sel;         /* 0, 1, 2 */
    PC_U32 pass;        /* 0-3 a byte of the key, 4 the ties and (last workgroup) the token; the draw: 0 */
    PC_U32 block;       /* ids per tie bin: ceil(n / SMP_TIE_BINS) */
PC_END(pc_sample_select)
#endif
PC_ENUM_BEGIN(pc_sample_select_slot)
PC_ENUM(SSEL_B_LOGITS, 1)
PC_ENUM(SSEL_B_HIST, 2)      /* SMP_HIST_WORDS, then 3 x SMP_TIE_BINS (zeroed before the program) */
PC_ENUM(SSEL_B_STATE, 3)
PC_ENUM(SSEL_B_RESULT, 4)    /* host */
PC_ENUM(SSEL_B_SMP, 5)
PC_ENUM(SSEL_S_COUNT, 1)
PC_ENUM_END(pc_sample_select_slot)

#endif
