/* synth.h: synthetic models in the real GLM-4.7-Flash / DeepSeek-V2 GGUF layout.
 *
 * Promises:
 *  - The same metadata keys (and key order), tensor names, shapes, tensor
 *    order and per-tensor types as llama.cpp's HF->GGUF converter followed by
 *    llama-quantize (without an importance matrix) produce for the requested
 *    file type (Q4_K_M mixes Q4_K/Q5_0/Q5_1/Q6_K/Q8_0, Q3_K_M Q3_K/Q4_K/
 *    Q5_K/Q6_K, IQ2_XXS IQ2_XXS/Q2_K/Q4_K/Q5_K/IQ4_NL, ... by llama-quantize's
 *    per-tensor rules: synth_types.c).
 *  - Plain types (IQ3_S, IQ2_XS, IQ2_S): every weight of that type where
 *    its rows fit the blocks (llama-quantize --pure).
 *  - Q4_K_XL ("dynamic"), Q3_K_XL, Q2_K_XL: per-layer, per-tensor mixes in
 *    the style of the "dynamic" files people download (Unsloth's UD-*_XL):
 *    attention, the shared expert, the dense FFN and the head with more
 *    bits than the routed experts (synth_types.c has the table); norms,
 *    router and biases F32.
 *  - Weights are random, zero-mean and deterministic per (seed, tensor, chunk),
 *    independent of the thread count; matrices have rms 1/sqrt(fan_in)
 *    (token_embd rms 1), norms 1 + 0.1 N(0,1), exp_probs_b SYNTH_BIAS_RMS N(0,1).
 *    Quantized tensors are written as random blocks directly (random codes,
 *    grid points and signs, random-sign block scales) with the right
 *    magnitudes, not by quantizing (synth_blocks.c).
 *  - synth_write() streams to disk: memory use is a few buffers per thread,
 *    whatever the model size.
 *  - The tokenizer is a byte-level GPT-2 vocabulary (256 byte tokens, a few
 *    merges, GLM's added tokens), with GLM-4.7-Flash's real chat template.
 */
#ifndef GLM_SYNTH_H
#define GLM_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"

/* File types: llama.cpp's llama_ftype values (general.file_type) where the
 * file is one of llama-quantize's presets; ours (1000 and up) for the
 * plain types and the dynamic mixes (synth_types.c says which
 * general.file_type they carry; the mixes are 1000 + the llama_ftype they
 * override). */
enum {
    SYNTH_FT_F32 = 0,
    SYNTH_FT_F16 = 1,
    SYNTH_FT_Q4_0 = 2,
    SYNTH_FT_Q4_1 = 3,
    SYNTH_FT_Q8_0 = 7,
    SYNTH_FT_Q5_0 = 8,
    SYNTH_FT_Q5_1 = 9,
    SYNTH_FT_Q2_K = 10,
    SYNTH_FT_Q3_K_S = 11,
    SYNTH_FT_Q3_K_M = 12,
    SYNTH_FT_Q3_K_L = 13,
    SYNTH_FT_Q4_K_S = 14,
    SYNTH_FT_Q4_K_M = 15,
    SYNTH_FT_Q5_K_S = 16,
    SYNTH_FT_Q5_K_M = 17,
    SYNTH_FT_Q6_K = 18,
    SYNTH_FT_IQ2_XXS = 19,
    SYNTH_FT_IQ3_XXS = 23,
    SYNTH_FT_IQ1_S = 24,
    SYNTH_FT_IQ4_NL = 25,
    SYNTH_FT_IQ4_XS = 30,
    SYNTH_FT_IQ1_M = 31,
    SYNTH_FT_BF16 = 32,
    SYNTH_FT_MXFP4_MOE = 38,
    /* The dynamic mix ("Q4_K_XL", alias "dynamic"): no llama_ftype of its
     * own -- such files are llama-quantize's Q4_K_M with per-tensor
     * overrides, and say 15 (Q4_K_M) in general.file_type. */
    SYNTH_FT_Q4_K_XL = 1015,
    SYNTH_FT_Q3_K_XL = 1012, /* says 12 (Q3_K_M) */
    SYNTH_FT_Q2_K_XL = 1010, /* says 10 (Q2_K) */
    /* Plain types (1000 + the ggml type id): every weight of one type
     * (llama-quantize --pure); they say the llama_ftype whose default type
     * it is: 26, 20 and 29 (IQ2_M). */
    SYNTH_FT_IQ3_S = 1021,
    SYNTH_FT_IQ2_XS = 1017,
    SYNTH_FT_IQ2_S = 1022,
};

typedef struct {
    char name[96];            /* general.name */
    bool glm;                 /* GLM flavour: sigmoid gating + exp_probs_b + normalized weights */
    uint32_t hidden, layers, dense_layers, heads;
    uint32_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
    uint32_t ff, moe_ff, experts, experts_used, shared;
    uint32_t vocab, ctx;
    float rope_base, rms_eps, expert_weights_scale;
    /* YaRN rope scaling (DeepSeek-V2 style); yarn_factor 0 = none */
    float yarn_factor, yarn_beta_fast, yarn_beta_slow;
    double yarn_mscale_all_dim; /* double: the key stores 0.1 x this, rounded once */
    uint32_t yarn_orig_ctx;
    /* layout variants of real files */
    bool merged_gate_up;      /* ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps */
    bool legacy_kv_b;         /* attn_kv_b instead of attn_k_b + attn_v_b (older converters) */
    bool no_gating_key;       /* leave out expert_gating_func (older converters) */
    uint32_t nextn;           /* extra NextN/MTP blocks after the `layers` blocks */
    bool no_tokenizer;        /* leave out the tokenizer.* keys (tiny test inputs: any vocab >= 1) */
    /* file */
    uint32_t ftype;           /* SYNTH_FT_* */
    uint64_t seed;
} synth_config;

/* Fills cfg with a preset: "tiny-glm", "tiny-dsv2lite", "demo", "glm47-flash". */
int synth_preset(const char *name, synth_config *cfg, err_t *err);
const char *synth_preset_names(void); /* "tiny-glm, tiny-dsv2lite, ..." */

/* File type by llama-quantize's name ("Q4_K_M", "q8_0", "F32"; "Q4_K" and
 * "Q5_K" are llama-quantize's aliases of Q4_K_M and Q5_K_M). -1 if unknown. */
int synth_ftype_from_name(const char *name);
const char *synth_ftype_name(uint32_t ftype);
const char *synth_ftype_names(void);

/* Checks the shape for consistency and size limits. */
int synth_validate(const synth_config *cfg, err_t *err);

/* ---- the tensor table ---------------------------------------------------- */

typedef enum { SYNTH_WEIGHT, SYNTH_NORM, SYNTH_BIAS } synth_kind;

/* exp_probs_b (selection bias) rms.  Small: with 64 experts a bias of 0.1
 * (the fixtures' generator, 8 experts) already sends a quarter of the
 * experts almost no token, which would flatter MoE prefill benchmarks. */
#define SYNTH_BIAS_RMS 0.01f

typedef struct {
    char name[64];
    uint32_t type;            /* ggml type id */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t bytes;
    synth_kind kind;
    float rms;                /* SYNTH_WEIGHT: target rms of the values */
} synth_tensor;

typedef struct {
    synth_tensor *t;
    size_t n;
} synth_table;

/* The tensors of the file, in file order, with their types and sizes. */
int synth_build_table(const synth_config *cfg, synth_table *out, err_t *err);
void synth_table_free(synth_table *tab);

/* The metadata (keys in the converter's order, tokenizer included). */
int synth_set_metadata(const synth_config *cfg, gguf_writer *w, err_t *err);

/* ---- writing ------------------------------------------------------------- */

typedef struct {
    int n_threads;            /* <= 0: all online CPUs */
    /* Called from the writing thread about every half second and at the end. */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *user;
} synth_options;

typedef struct {
    uint64_t bytes;           /* file size */
    uint64_t tensor_bytes;
    double seconds;
} synth_stats;

int synth_write(const synth_config *cfg, const char *path, const synth_options *opt, synth_stats *stats,
                err_t *err);

/* Fills `n_blocks` blocks of tensor `t` starting at block `first_block`
 * (deterministic per seed, tensor index and chunk); exposed for tests. */
void synth_fill_blocks(const synth_tensor *t, uint64_t seed, uint32_t tensor_index, uint64_t first_block,
                       uint64_t n_blocks, void *dst);

#endif
