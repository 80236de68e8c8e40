/* vk_weights.h: the model's weights on the GPU.
 *
 * Every matrix is uploaded once from the mapped file through the staging
 * ring, repacked into the GPU layout (vk_layout.c); vectors (norms, biases)
 * become f32.  Sizes are planned first so a model that does not fit is
 * refused, with the numbers, before anything is uploaded.  The routed
 * experts of the layers host_exps marks (NULL: none) are left out: they
 * stay in the mapped file, for the CPU (vk_hostmoe.c). */
#ifndef GLM_VK_WEIGHTS_H
#define GLM_VK_WEIGHTS_H

#include "model/model.h"
#include "vk_kernels.h"

typedef struct {
    bool is_moe, has_bias;
    vk_vec attn_norm, q_a_norm, kv_a_norm, ffn_norm, exp_probs_b;
    vk_tensor q_a, q_b, q, kv_a, k_b, v_b, attn_out;
    vk_tensor ffn_gate, ffn_up, ffn_down;                   /* dense */
    vk_tensor router, gate_exps, up_exps, down_exps;        /* MoE */
    vk_tensor gate_sh, up_sh, down_sh;                      /* shared expert(s), may be absent */
    bool has_shared;
    bool host_exps;         /* gate/up/down_exps stay in host memory (not uploaded) */
    /* q_a (or q, without q compression) and kv_a_mqa read the same input:
     * where their types and row lengths match they are uploaded as one
     * matrix, qkv_a (q's rows first), and q_a / q and kv_a are views of its
     * rows -- decode runs one matvec instead of two dispatches (tuning
     * qkv_merge = 0: two matrices). */
    vk_tensor qkv_a;
    bool qkv_merged;
} vk_layer_w;

/* The NextN (MTP) block's own tensors (its layer is layers[n_layer]);
 * where the file has no embedding, head norm or head of its own the main
 * model's are used (core/ref/ref_forward.h). */
typedef struct {
    vk_tensor eh_proj;      /* (2 n_embd -> n_embd) */
    vk_vec enorm, hnorm, head_norm;
    vk_tensor embed, head;
    bool own_embed, own_head_norm, own_head;
} vk_nextn_w;

typedef struct {
    vk_tensor tok_embd, output;
    vk_vec output_norm;
    vk_layer_w *layers;     /* cfg.n_layer, then the NextN block's layer where has_nextn */
    uint32_t n_layer;
    bool has_nextn;         /* asked for (drafting) and in the file */
    vk_nextn_w nextn;
    uint64_t device_bytes;  /* GPU bytes of all weights */
    uint64_t file_bytes;    /* the same tensors in the file */
    vk_arena arena;         /* their device memory */
} vk_weights;

/* Bytes the weights will take on this device (for the fit check). */
int vk_weights_plan(const vk_ctx *c, const vk_tuning *t, const model *m, const bool *host_exps, bool nextn,
                    uint64_t *device_bytes, err_t *err);
/* Uploads everything into device memory of its own (w->arena, reserved
 * here): `host_exps[il]` (NULL: none) leaves layer il's routed experts in
 * the mapped file; `nextn`: the NextN block too, where the file has one. */
int vk_weights_upload(vk_ctx *c, const vk_tuning *t, const model *m, const bool *host_exps, bool nextn, vk_weights *w,
                      void (*progress)(void *, const char *, uint64_t, uint64_t), void *user, err_t *err);
/* The host and the device memory of w (the device's when c still has one). */
void vk_weights_free(vk_ctx *c, vk_weights *w);

/* A matrix tensor's shape and GPU layout (vk_layout.c) for model tensor t,
 * with `merged`'s rows after its own (NULL: none), `align` the device's
 * storage alignment; d->buf is left as it was (the caller's). */
void vk_tensor_shape(const mtensor *t, const mtensor *merged, uint64_t align, vk_tensor *d);

#endif
