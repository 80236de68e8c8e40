/* cpu_forward.h: the fast CPU forward pass of deepseek2 (cf_).
 *
 * The same model as core/ref/ref_forward.h computes, at llama.cpp's precision:
 * every quantized weight multiplies activations quantized per block to 8
 * bits (cpu_kernels.h), integer dot products, f32 everywhere else (norms,
 * RoPE, softmax, attention over the cache, routing); F32 / F16 / BF16
 * weights multiply f32 activations.  MLA runs absorbed: q_nope goes through
 * attn_k_b so attention reads only the latent cache (kv_lora + rope per
 * position), attn_v_b is applied to the attention-weighted latent.
 *
 * One eval is one run of the thread pool (cpu_pool.h): every thread walks
 * the model in order, the steps separated by barriers; matrices are split
 * by rows, a MoE layer's experts by (expert, rows) for gate/up and by
 * output rows across all experts for down, so every weight byte is read
 * once per eval whether it serves one token or a whole prompt chunk.
 *
 * Promises:
 *  - cf_new() sizes everything once; cf_eval() allocates nothing.
 *  - Thread count and the split of a prompt into calls do not change a bit
 *    of the results (each value is computed by one thread, in one order).
 *  - Step timings cost a clock read per step on thread 0.
 *  - With cf_params.nextn on a model with a NextN (MTP) block, cf_eval also
 *    keeps every position's final hidden state h_p (after output_norm, as
 *    llama.cpp's h_nextn) and cf_nextn_eval runs the block -- the same
 *    computation as ref_forward.h's rf_nextn_eval, through the same kernels
 *    as the main blocks (its attention over its own latent cache, its MoE).
 *    The batch independence above holds for its rows and the kept states.
 *    Without the block (or without the flag) nothing of it is allocated.
 */
#ifndef GLM_CPU_FORWARD_H
#define GLM_CPU_FORWARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpu_kernels.h"
#include "base/error.h"
#include "model/model.h"

typedef struct {
    uint32_t n_ctx;   /* KV cache capacity in tokens */
    uint32_t n_batch; /* most tokens per cf_eval call */
    bool kv_f16;      /* KV cache stored as f16 (else f32) */
    int n_threads;    /* <= 0: one per CPU */
    const cpu_kernels *kernels; /* NULL: cpu_kernels_best() */
    bool nextn;       /* keep what the NextN block needs (ignored without the block) */
} cf_params;

typedef struct cf_state cf_state;

cf_state *cf_new(const model *m, const cf_params *p, err_t *err);
void cf_free(cf_state *s);

/* Evaluates tokens[0..n) at positions pos..pos+n-1; `logits` (optional)
 * receives [n][n_vocab] (all_positions) or [1][n_vocab].  Returns 0, -1
 * on error, 1 when stopped by cf_set_cancel's flag. */
int cf_eval(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, bool all_positions,
            err_t *err);

/* A flag cf_eval then checks between the layers of a multi-token eval
 * (NULL: none): seen set, the eval stops there and returns 1, having
 * written part of the KV cache at pos.. (positions the caller does not
 * count as written, so a later eval overwrites them). */
void cf_set_cancel(cf_state *s, const atomic_bool *flag);

/* cf_eval of every position's logits, booked as decoding (the verify of
 * drafts: its figures go with the single-token evals', not the prompt's). */
int cf_eval_verify(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits, err_t *err);

int cf_threads(const cf_state *s);

/* ---- the NextN (MTP) block: drafting (ref_forward.h says what it computes) ----
 * Its runs are booked in the profile of the main eval before them. */

/* True when the block is there and cf_params.nextn asked for it. */
bool cf_has_nextn(const cf_state *s);
/* Rows pos..pos+n-1 for tokens[0..n) (n <= n_batch, pos + n <= n_ctx).  h:
 * NULL takes h_{p-1} from the kept hidden states (h_{-1} = 0), else
 * [n][n_embd] given rows.  `logits` (optional) receives [n][n_vocab] (all)
 * or the last row's. */
int cf_nextn_eval(cf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *logits,
                  bool all, err_t *err);
/* The last row's out (n_embd floats) of the latest cf_nextn_eval. */
const float *cf_nextn_out(const cf_state *s);
/* The kept hidden state of position pos (n_embd floats into out). */
int cf_hidden(const cf_state *s, uint32_t pos, float *out, err_t *err);
const cpu_kernels *cf_kernels(const cf_state *s);
/* Bytes of the packed copies of Q4_0 / Q5_0 / Q8_0 / IQ4_NL matrices (cpu_pack.h) it holds. */
uint64_t cf_packed_bytes(const cf_state *s);

/* The steps of the profile (what the side pane lists). */
typedef enum {
    CF_ST_EMBED,
    CF_ST_QKV_A,      /* attn norm, q_a | q and kv_a_mqa */
    CF_ST_Q_B,        /* q_a norm, kv norm, k rope, cache write, q_b */
    CF_ST_K_B,        /* q rope, q_nope . attn_k_b (absorption) */
    CF_ST_ATTENTION,  /* softmax(q . cache) . latent */
    CF_ST_V_B,        /* attn_v_b */
    CF_ST_ATTN_OUT,   /* attn_output + residual */
    CF_ST_ROUTER,     /* ffn norm, ffn_gate_inp, top-k */
    CF_ST_EXP_GATE_UP,/* routed + shared experts' gate, up, SwiGLU */
    CF_ST_EXP_DOWN,   /* their down, weighted sum, residual */
    CF_ST_DENSE_GATE_UP,
    CF_ST_DENSE_DOWN,
    CF_ST_HEAD,       /* output norm (every row when the NextN block keeps them), output */
    CF_ST_NEXTN,      /* the NextN block's input (embedding, norms, eh_proj) and head */
    CF_ST_COUNT
} cf_step;

typedef struct {
    const char *name;
    uint64_t calls;  /* counted once per layer (or per eval) */
    double seconds;  /* thread 0's wall time from the previous step's end */
    double bytes;    /* weights (and cache) read */
} cf_step_stat;

typedef struct {
    cf_step_stat step[CF_ST_COUNT];
    uint64_t evals, tokens;
    uint64_t steps;  /* barriers */
    double seconds;  /* whole evals */
} cf_profile;

/* The profile of decoding (one-token evals and verifies, with the NextN
 * runs after them) or of the prompt (the longer evals, with theirs), since
 * cf_new; tokens counts the main model's tokens evaluated. */
void cf_profile_get(const cf_state *s, bool decode, cf_profile *out);
/* Starts both profiles afresh. */
void cf_profile_reset(cf_state *s);

#endif
