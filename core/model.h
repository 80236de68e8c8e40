/* model.h: the deepseek2 architecture (GLM-4.7-Flash, DeepSeek-V2/-Lite).
 *
 * Three plain parts, as in llama2.c: the configuration (hyperparameters read
 * from GGUF metadata), the weights (views into the mapped file, or buffers
 * the loader made, e.g. attn_k_b/attn_v_b split from a legacy attn_kv_b),
 * and -- in the forward-pass modules, not here -- the run state.
 *
 * Promises: model_load() reads every hyperparameter with llama.cpp's
 * defaults and rules, binds every tensor by name in one place, checks its
 * type (one we can compute with) and its exact shape, and fails with one line
 * naming the file and the tensor (or key) on any mismatch.  It copies no
 * weight bytes except where a layout must be converted (legacy attn_kv_b).
 */
#ifndef GLM_MODEL_H
#define GLM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"
#include "quant.h"

enum { MODEL_GATING_SOFTMAX = 1, MODEL_GATING_SIGMOID = 2 };

typedef struct {
    char arch[32];            /* "deepseek2" */
    char name[128];           /* general.name, may be empty */
    uint32_t file_type;       /* general.file_type (llama_ftype), 0 if absent */

    uint32_t n_layer;         /* blocks the forward pass runs (block_count - nextn) */
    uint32_t n_layer_file;    /* block_count: includes NextN/MTP blocks */
    uint32_t n_nextn;         /* nextn_predict_layers (loaded, not run) */
    uint32_t n_embd;          /* hidden size */
    uint32_t n_vocab;
    uint32_t n_ctx_train;
    uint32_t n_head;
    uint32_t q_lora_rank;     /* 0: no q compression, attn_q is used */
    uint32_t kv_lora_rank;    /* latent width */
    uint32_t qk_nope;         /* per-head non-rope q/k width */
    uint32_t qk_rope;         /* rope width (rope.dimension_count) */
    uint32_t v_head;          /* per-head value width */
    uint32_t n_ff_dense;      /* feed_forward_length */
    uint32_t n_ff_exp;        /* expert_feed_forward_length */
    uint32_t n_expert;
    uint32_t n_expert_used;
    uint32_t n_expert_shared;
    uint32_t n_dense_lead;    /* leading_dense_block_count */
    uint32_t gating;          /* MODEL_GATING_* */
    bool expert_weights_norm;
    float expert_weights_scale;
    float rms_eps;
    float rope_base;

    /* RoPE scaling (YaRN), as llama.cpp applies it for deepseek2. */
    bool yarn;
    float rope_freq_scale;    /* 1/factor, 1 without scaling */
    uint32_t n_ctx_orig;      /* original context of the YaRN fit */
    float yarn_ext_factor;    /* 1 with YaRN, 0 without */
    float yarn_attn_factor;   /* cos/sin multiplier (1 for deepseek2, see model.c) */
    float yarn_beta_fast;     /* 32 (llama.cpp default; GGUF keys ignored) */
    float yarn_beta_slow;     /* 1 */
    float kq_scale;           /* attention scale incl. YaRN mscale^2 */

    bool merged_gate_up;      /* ffn_gate_up_exps instead of gate/up */
    bool legacy_kv_b;         /* attn_kv_b was split at load */
} model_config;

/* A view of one weight tensor.  Rows (ne[0] elements) are contiguous;
 * consecutive rows are `nb1` bytes apart and consecutive matrices (ne[2],
 * the expert index) are `nb2` bytes apart, which lets gate/up be views of a
 * merged ffn_gate_up_exps. */
typedef struct {
    const char *name;     /* NULL when the tensor is absent (optional ones) */
    uint32_t type;        /* quant_type */
    uint32_t n_dims;
    uint64_t ne[4];
    uint64_t nb1;         /* bytes per row */
    uint64_t nb2;         /* bytes per matrix */
    const void *data;
    uint64_t nbytes;      /* bytes this view covers */
    uint64_t file_offset; /* offset of data in the file, UINT64_MAX when owned by the loader */
} mtensor;

typedef struct {
    bool is_moe;
    mtensor attn_norm;    /* (n_embd) */
    mtensor q_a_norm;     /* (q_lora) when q_lora_rank > 0 */
    mtensor kv_a_norm;    /* (kv_lora) */
    mtensor q_a;          /* (n_embd -> q_lora) */
    mtensor q_b;          /* (q_lora -> n_head*(nope+rope)) */
    mtensor q;            /* (n_embd -> n_head*(nope+rope)) when q_lora_rank == 0 */
    mtensor kv_a_mqa;     /* (n_embd -> kv_lora+rope) */
    mtensor k_b;          /* (nope, kv_lora, n_head): per head, kv_lora rows of nope */
    mtensor v_b;          /* (kv_lora, v_head, n_head): per head, v_head rows of kv_lora */
    mtensor attn_out;     /* (n_head*v_head -> n_embd) */
    mtensor ffn_norm;     /* (n_embd) */
    /* dense blocks */
    mtensor ffn_gate, ffn_up;   /* (n_embd -> n_ff_dense) */
    mtensor ffn_down;           /* (n_ff_dense -> n_embd) */
    /* MoE blocks */
    mtensor gate_inp;           /* router (n_embd -> n_expert), usually F32 */
    mtensor exp_probs_b;        /* (n_expert) selection bias, optional */
    mtensor gate_exps, up_exps; /* (n_embd -> n_ff_exp) x n_expert (views if merged) */
    mtensor down_exps;          /* (n_ff_exp -> n_embd) x n_expert */
    mtensor gate_shexp, up_shexp; /* (n_embd -> n_ff_exp*n_shared) */
    mtensor down_shexp;         /* (n_ff_exp*n_shared -> n_embd) */
    /* NextN/MTP blocks only (loaded, not run) */
    mtensor nextn_eh_proj, nextn_enorm, nextn_hnorm, nextn_shared_head_norm;
    mtensor nextn_embed_tokens, nextn_shared_head_head;
} model_layer;

typedef struct {
    model_config cfg;
    gguf_ctx *gguf;
    mtensor tok_embd;     /* (n_embd, n_vocab) */
    mtensor output_norm;  /* (n_embd) */
    mtensor output;       /* (n_embd -> n_vocab) */
    model_layer *layers;  /* n_layer_file entries */
    void **owned;         /* buffers the loader allocated */
    uint32_t n_owned;
} model;

int model_load(model *m, const char *path, err_t *err);
/* Same, over an already opened context (takes ownership of it, also on
 * failure). */
int model_load_gguf(model *m, gguf_ctx *ctx, err_t *err);
void model_free(model *m);

/* Flags for the _ex variants. */
enum {
    /* Validate and bind, but convert no layout (legacy attn_kv_b stays
     * unsplit: k_b/v_b are left empty).  For `info`, which must not touch
     * weight data; such a model cannot be run. */
    MODEL_LOAD_NO_CONVERT = 1,
    /* Bind tensors of types known only by their size (Q2_K, the IQ types),
     * which glmchat cannot compute with, as well: for `info`'s census of a
     * file it will not run.  Such a model cannot be run either. */
    MODEL_LOAD_ANY_TYPE = 2
};
int model_load_ex(model *m, const char *path, unsigned flags, err_t *err);
int model_load_gguf_ex(model *m, gguf_ctx *ctx, unsigned flags, err_t *err);

/* Size facts for `info` and for the GPU uploader. */
typedef struct {
    uint64_t total_params;          /* every tensor of the file */
    uint64_t active_params;         /* per decoded token: dense parts + n_expert_used experts + shared */
    uint64_t weight_bytes;          /* every tensor's bytes */
    uint64_t active_bytes;          /* bytes read per decoded token (one embedding row, not the table) */
    uint64_t bytes_by_type[QT_COUNT];
    uint32_t tensors_by_type[QT_COUNT];
} model_census;

void model_census_compute(const model *m, model_census *out);
/* Adds one tensor of a table to a census: what model_census_compute does for
 * each tensor of the file, usable on a planned table (generator, tests).
 * `tied_output`: token_embd also serves as the output head. */
void model_census_add(model_census *out, const model_config *c, const gguf_tensor *t, bool tied_output);

/* Rows of a weight view: the matrix of expert e starts at data + e*nb2. */
static inline const void *mtensor_matrix(const mtensor *t, uint32_t e)
{
    return (const char *)t->data + (uint64_t)e * t->nb2;
}

#endif
