/* ref_forward.h: the plain-C reference forward pass of deepseek2 (rf_).
 *
 * The numerical oracle for the GPU kernels and the no-GPU fallback: f32
 * activations against the stored weights exactly dequantized (quant_matvec:
 * f32 accumulation, no activation quantization), MLA attention in the
 * absorbed form over a latent KV cache, RoPE and YaRN as ggml applies them,
 * MoE routing as llama.cpp does.
 *
 * Promises:
 *  - rf_new() sizes everything once (KV cache for n_ctx tokens, activations
 *    for n_batch tokens, per-thread scratch); rf_eval() allocates nothing.
 *  - Any number of tokens (<= n_batch) per call at any position <= the
 *    cached length; the cache persists between calls, so a prompt split
 *    into several calls gives the same logits as one call (bit for bit:
 *    every token's arithmetic is the same whatever the batch).
 *  - Thread count does not change results: each output element is computed
 *    by one thread in a fixed order.
 *  - With rf_params.nextn on a model with a NextN (MTP) block, rf_eval also
 *    keeps every position's final hidden state h_p (after output_norm, as
 *    llama.cpp's h_nextn) and rf_nextn_eval runs the block: NextN row p is
 *    made from the pair (h_{p-1}, token x_p) (h_{-1} = 0, as llama.cpp),
 *    attends over the block's own latent cache rows 0..p, and its logits
 *    predict x_{p+1}.  The same batch independence holds for its rows.
 *    Without the block (or without the flag) nothing of it is allocated.
 */
#ifndef GLM_REF_FORWARD_H
#define GLM_REF_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

typedef struct {
    uint32_t n_ctx;   /* KV cache capacity in tokens */
    uint32_t n_batch; /* most tokens per rf_eval call */
    bool kv_f16;      /* KV cache stored as f16 (else f32) */
    int n_threads;    /* <= 0: one per CPU */
    bool nextn;       /* keep what the NextN block needs (ignored without the block) */
} rf_params;

typedef struct rf_state rf_state;

rf_state *rf_new(const model *m, const rf_params *p, err_t *err);
void rf_free(rf_state *s);

/* Evaluates tokens[0..n) at positions pos..pos+n-1 (positions >= pos are
 * overwritten in the cache).  `logits`, when non-NULL, receives
 * [n][n_vocab] (all_positions) or [1][n_vocab] (the last token). */
int rf_eval(rf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, float *logits,
            bool all_positions, err_t *err);

int rf_threads(const rf_state *s);

/* ---- the NextN (MTP) block: drafting ---------------------------------------
 *
 * NextN row p: e = enorm(embedding of x_p) (nextn.embed_tokens, else
 * token_embd), g_in = hnorm(h_{p-1}); x = eh_proj · [e | g_in]; then the
 * block's attention (its own cache, position p) and FFN; out = norm(x) with
 * shared_head_norm (else output_norm), the logits = shared_head_head (else
 * output) · out.  `out` of a row is what a chained draft step takes as its
 * h: row p+1 = (out_p, d) (llama.cpp's MTP draft loop). */

/* True when the block is there and rf_params.nextn asked for it. */
bool rf_has_nextn(const rf_state *s);
/* Rows pos..pos+n-1 for tokens[0..n) (n <= n_batch, pos + n <= n_ctx).  h:
 * NULL takes h_{p-1} from the hidden states rf_eval kept (the caller makes
 * sure positions < pos + n - 1 were evaluated), else [n][n_embd] given
 * rows.  `logits` (optional) receives [n][n_vocab] (all) or the last
 * row's. */
int rf_nextn_eval(rf_state *s, const int32_t *tokens, uint32_t n, uint32_t pos, const float *h, float *logits,
                  bool all, err_t *err);
/* The last row's out (n_embd floats) of the latest rf_nextn_eval. */
const float *rf_nextn_out(const rf_state *s);
/* The kept hidden state of position pos (n_embd floats into out). */
int rf_hidden(const rf_state *s, uint32_t pos, float *out, err_t *err);

/* Records the router's choices of the following rf_eval calls (NULL stops):
 * the chosen experts of MoE layer il for the call's token t, best first, at
 * sel[((il * n_batch) + t) * n_expert_used + k]; rows of dense layers are
 * left as they were.  `sel` holds n_layer * n_batch * n_expert_used ids.
 * For `bench --routing`: reading the choices costs one copy per layer. */
void rf_record_routing(rf_state *s, int32_t *sel);

/* Where the time goes, by stage, since rf_new. */
enum {
    RF_ST_EMBED, RF_ST_ATTN_PROJ, RF_ST_ROPE_ABSORB, RF_ST_ATTENTION, RF_ST_ATTN_OUT,
    RF_ST_FFN_DENSE, RF_ST_ROUTER, RF_ST_EXPERTS, RF_ST_SHARED, RF_ST_HEAD, RF_ST_NEXTN, RF_ST_COUNT
};
typedef struct {
    const char *name;
    uint64_t calls;   /* per layer and eval */
    double seconds;
    double bytes;     /* weights and KV read, activations written (estimate) */
} rf_stage_stat;

/* Fills out[RF_ST_COUNT]; returns the tokens evaluated so far. */
uint64_t rf_stage_stats(const rf_state *s, rf_stage_stat *out);

#endif
