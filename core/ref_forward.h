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

/* Records the router's choices of the following rf_eval calls (NULL stops):
 * the chosen experts of MoE layer il for the call's token t, best first, at
 * sel[((il * n_batch) + t) * n_expert_used + k]; rows of dense layers are
 * left as they were.  `sel` holds n_layer * n_batch * n_expert_used ids.
 * For `bench --routing`: reading the choices costs one copy per layer. */
void rf_record_routing(rf_state *s, int32_t *sel);

/* Where the time goes, by stage, since rf_new. */
enum {
    RF_ST_EMBED, RF_ST_ATTN_PROJ, RF_ST_ROPE_ABSORB, RF_ST_ATTENTION, RF_ST_ATTN_OUT,
    RF_ST_FFN_DENSE, RF_ST_ROUTER, RF_ST_EXPERTS, RF_ST_SHARED, RF_ST_HEAD, RF_ST_COUNT
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
