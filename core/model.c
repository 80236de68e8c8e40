/* model.c: deepseek2 hyperparameters, tensor binding, and size census.
 *
 * Sections, in load order: hyperparameters (llama.cpp's keys, defaults and
 * rules), the tensor table (every tensor the forward pass uses, with the
 * shape its hyperparameters imply and the types it may have), binding and
 * layout conversion (legacy attn_kv_b, merged ffn_gate_up_exps), census. */
#include "model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY(k) "deepseek2." k

/* ======================================================================
 * Hyperparameters
 * ====================================================================== */

typedef struct {
    const gguf_ctx *g;
    const char *path;
    err_t *err;
} kv_reader;

/* Required key: the gguf accessor names the file and the key. */
static int req_u32(kv_reader *r, const char *key, uint32_t *out)
{
    return gguf_get_u32(r->g, key, out, r->err);
}

static int opt_u32(kv_reader *r, const char *key, uint32_t def, uint32_t *out)
{
    return gguf_get_u32_or(r->g, key, def, out, r->err);
}

static int opt_f32(kv_reader *r, const char *key, float def, float *out)
{
    return gguf_get_f32_or(r->g, key, def, out, r->err);
}

static int read_arch(kv_reader *r, model_config *c)
{
    gguf_str s;
    if (gguf_get_str(r->g, "general.architecture", &s, r->err) < 0)
        return -1;
    if (s.len != strlen("deepseek2") || memcmp(s.ptr, "deepseek2", s.len) != 0) {
        /* from the file: err_set shows control characters inert */
        return err_set(r->err, "%s: general.architecture is '%.*s'; glmchat runs 'deepseek2' models "
                       "(GLM-4.7-Flash, DeepSeek-V2)", r->path, (int)(s.len > 64 ? 64 : s.len), s.ptr);
    }
    snprintf(c->arch, sizeof c->arch, "deepseek2");
    if (gguf_has_key(r->g, "general.name")) {
        if (gguf_get_str(r->g, "general.name", &s, r->err) < 0)
            return -1;
        size_t n = s.len < sizeof c->name - 1 ? (size_t)s.len : sizeof c->name - 1;
        memcpy(c->name, s.ptr, n);
        c->name[n] = 0;
    }
    return opt_u32(r, "general.file_type", 0, &c->file_type);
}

/* Head widths: MLA-era files carry key/value_length_mla (per-head q/k and
 * v widths) and key/value_length describe the latent; older files only
 * have key/value_length, which then are the per-head widths. */
static int read_head_dims(kv_reader *r, model_config *c)
{
    uint32_t k_len, v_len;
    if (gguf_has_key(r->g, KEY("attention.key_length_mla"))) {
        if (req_u32(r, KEY("attention.key_length_mla"), &k_len) < 0 ||
            req_u32(r, KEY("attention.value_length_mla"), &v_len) < 0)
            return -1;
    } else if (req_u32(r, KEY("attention.key_length"), &k_len) < 0 ||
               req_u32(r, KEY("attention.value_length"), &v_len) < 0) {
        return -1;
    }
    if (req_u32(r, KEY("rope.dimension_count"), &c->qk_rope) < 0)
        return -1;
    if (c->qk_rope == 0 || c->qk_rope % 2 != 0 || c->qk_rope >= k_len)
        return err_set(r->err, "%s: rope.dimension_count %u does not fit a key length of %u "
                       "(must be even and smaller)", r->path, c->qk_rope, k_len);
    c->qk_nope = k_len - c->qk_rope;
    c->v_head = v_len;
    return 0;
}

static int read_moe(kv_reader *r, model_config *c)
{
    if (opt_u32(r, KEY("expert_count"), 0, &c->n_expert) < 0 ||
        opt_u32(r, KEY("expert_used_count"), 0, &c->n_expert_used) < 0 ||
        opt_u32(r, KEY("expert_shared_count"), 0, &c->n_expert_shared) < 0 ||
        opt_u32(r, KEY("leading_dense_block_count"), 0, &c->n_dense_lead) < 0 ||
        opt_f32(r, KEY("expert_weights_scale"), 0.0f, &c->expert_weights_scale) < 0 ||
        gguf_get_bool_or(r->g, KEY("expert_weights_norm"), false, &c->expert_weights_norm, r->err) < 0 ||
        opt_u32(r, KEY("expert_gating_func"), 0, &c->gating) < 0)
        return -1;
    if (c->n_expert == 0) { /* a dense model: every block uses the dense FFN */
        c->n_dense_lead = c->n_layer;
        c->n_expert_used = 0;
        return 0;
    }
    if (req_u32(r, KEY("expert_feed_forward_length"), &c->n_ff_exp) < 0)
        return -1;
    if (c->n_expert_used == 0 || c->n_expert_used > c->n_expert)
        return err_set(r->err, "%s: expert_used_count is %u, expected 1..%u (expert_count)",
                       r->path, c->n_expert_used, c->n_expert);
    if (c->n_dense_lead > c->n_layer)
        c->n_dense_lead = c->n_layer;
    uint32_t groups, groups_used;
    if (opt_u32(r, KEY("expert_group_count"), 1, &groups) < 0 ||
        opt_u32(r, KEY("expert_group_used_count"), groups, &groups_used) < 0)
        return -1;
    if (groups > 1 && groups_used < groups)
        return err_set(r->err, "%s: group-limited expert routing (expert_group_count %u, %u used) "
                       "is not supported", r->path, groups, groups_used);
    if (c->gating == 0) {
        /* llama.cpp: files written before the key existed.  GLM-4.7-Flash has
         * 47 blocks (48 with its MTP block) and a 154880 vocabulary and uses
         * sigmoid; DeepSeek-V2/2.5 use softmax. */
        bool glm = (c->n_layer_file == 47 || c->n_layer_file == 48) && c->n_vocab == 154880;
        c->gating = glm ? MODEL_GATING_SIGMOID : MODEL_GATING_SOFTMAX;
    }
    if (c->gating != MODEL_GATING_SOFTMAX && c->gating != MODEL_GATING_SIGMOID)
        return err_set(r->err, "%s: expert_gating_func is %u, expected 1 (softmax) or 2 (sigmoid)",
                       r->path, c->gating);
    return 0;
}

/* RoPE scaling as llama.cpp applies it for deepseek2: YaRN with its default
 * betas (the file's yarn_beta_* keys are not read for this architecture),
 * cos/sin left unscaled, and the magnitude correction moved into the
 * attention scale as mscale^2. */
static int read_rope(kv_reader *r, model_config *c)
{
    if (opt_f32(r, KEY("rope.freq_base"), 10000.0f, &c->rope_base) < 0)
        return -1;
    char type[16] = "none";
    if (gguf_has_key(r->g, KEY("rope.scaling.type"))) {
        gguf_str s;
        if (gguf_get_str(r->g, KEY("rope.scaling.type"), &s, r->err) < 0)
            return -1;
        int n = s.len < sizeof type - 1 ? (int)s.len : (int)sizeof type - 1;
        memcpy(type, s.ptr, (size_t)n);
        type[n] = 0;
    }
    float factor = 0.0f, log_mul = 0.0f;
    if (opt_f32(r, KEY("rope.scaling.factor"), 0.0f, &factor) < 0 ||
        opt_u32(r, KEY("rope.scaling.original_context_length"), c->n_ctx_train, &c->n_ctx_orig) < 0 ||
        opt_f32(r, KEY("rope.scaling.yarn_log_multiplier"), 0.0f, &log_mul) < 0)
        return -1;
    if (factor == 0.0f && opt_f32(r, KEY("rope.scale_linear"), 0.0f, &factor) < 0)
        return -1;
    if (!(c->rope_base > 0.0f) || !isfinite(c->rope_base))
        return err_set(r->err, "%s: rope.freq_base is %g, expected a positive number", r->path,
                       (double)c->rope_base);
    if (!(factor >= 0.0f) || !isfinite(factor) || !isfinite(log_mul))
        return err_set(r->err, "%s: rope.scaling.factor is %g, expected a positive number", r->path,
                       (double)factor);
    bool is_yarn = strcmp(type, "yarn") == 0;
    if (!is_yarn && strcmp(type, "linear") != 0 && strcmp(type, "none") != 0)
        return err_set(r->err, "%s: rope.scaling.type '%s' is not supported (none, linear, yarn)",
                       r->path, type);
    c->rope_freq_scale = factor > 0.0f && strcmp(type, "none") != 0 ? 1.0f / factor : 1.0f;
    c->yarn = is_yarn && c->rope_freq_scale != 1.0f;
    c->yarn_ext_factor = c->yarn ? 1.0f : 0.0f;
    c->yarn_attn_factor = 1.0f;
    c->yarn_beta_fast = 32.0f;
    c->yarn_beta_slow = 1.0f;
    if (c->n_ctx_orig == 0)
        c->n_ctx_orig = c->n_ctx_train;
    float m = c->yarn ? 1.0f + log_mul * logf(1.0f / c->rope_freq_scale) : 1.0f;
    c->kq_scale = m * m / sqrtf((float)(c->qk_nope + c->qk_rope));
    return 0;
}

/* Upper bound for any one dimension: far above every real model, low enough
 * that products of a few stay far from overflow. */
#define DIM_MAX (1u << 24)

static int check_dims(kv_reader *r, const model_config *c)
{
    const struct { const char *key; uint32_t v; bool may_be_zero; } d[] = {
        {"block_count", c->n_layer_file, false},
        {"embedding_length", c->n_embd, false},
        {"attention.head_count", c->n_head, false},
        {"attention.kv_lora_rank", c->kv_lora_rank, false},
        {"attention.q_lora_rank", c->q_lora_rank, true},
        {"key length", c->qk_nope, false},
        {"value length", c->v_head, false},
        {"feed_forward_length", c->n_ff_dense, c->n_dense_lead == 0},
        {"expert_feed_forward_length", c->n_ff_exp, c->n_expert == 0},
        {"expert_count", c->n_expert, true},
        {"vocab", c->n_vocab, false},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        if ((d[i].v == 0 && !d[i].may_be_zero) || d[i].v > DIM_MAX)
            return err_set(r->err, "%s: %s is %u, out of range (1..%u)", r->path, d[i].key, d[i].v,
                           DIM_MAX);
    }
    if (c->n_expert_shared > 64)
        return err_set(r->err, "%s: expert_shared_count %u is out of range", r->path, c->n_expert_shared);
    if (!(c->rms_eps > 0.0f) || !(c->rms_eps < 1.0f))
        return err_set(r->err, "%s: attention.layer_norm_rms_epsilon is %g, expected 0 < eps < 1",
                       r->path, (double)c->rms_eps);
    return 0;
}

/* The vocabulary size: deepseek2.vocab_size when present, else the rows of
 * token_embd (tensor shapes are checked against it later). */
static int read_vocab(kv_reader *r, model_config *c)
{
    const gguf_tensor *t = gguf_find_tensor(r->g, "token_embd.weight");
    uint32_t def = t && t->ne[1] <= DIM_MAX ? (uint32_t)t->ne[1] : 0;
    if (opt_u32(r, KEY("vocab_size"), def, &c->n_vocab) < 0)
        return -1;
    if (!t)
        return err_set(r->err, "%s: missing tensor 'token_embd.weight'", r->path);
    return 0;
}

static int read_config(const gguf_ctx *g, const char *path, model_config *c, err_t *err)
{
    kv_reader r = {g, path, err};
    memset(c, 0, sizeof *c);
    if (read_arch(&r, c) < 0 ||
        req_u32(&r, KEY("block_count"), &c->n_layer_file) < 0 ||
        opt_u32(&r, KEY("nextn_predict_layers"), 0, &c->n_nextn) < 0 ||
        req_u32(&r, KEY("context_length"), &c->n_ctx_train) < 0 ||
        req_u32(&r, KEY("embedding_length"), &c->n_embd) < 0 ||
        opt_u32(&r, KEY("feed_forward_length"), 0, &c->n_ff_dense) < 0 ||
        req_u32(&r, KEY("attention.head_count"), &c->n_head) < 0 ||
        gguf_get_f32(g, KEY("attention.layer_norm_rms_epsilon"), &c->rms_eps, err) < 0 ||
        opt_u32(&r, KEY("attention.q_lora_rank"), 0, &c->q_lora_rank) < 0 ||
        req_u32(&r, KEY("attention.kv_lora_rank"), &c->kv_lora_rank) < 0 ||
        read_head_dims(&r, c) < 0 || read_vocab(&r, c) < 0)
        return -1;
    if (c->n_nextn >= c->n_layer_file)
        return err_set(err, "%s: nextn_predict_layers (%u) must be smaller than block_count (%u)",
                       path, c->n_nextn, c->n_layer_file);
    c->n_layer = c->n_layer_file - c->n_nextn;
    if (read_moe(&r, c) < 0 || read_rope(&r, c) < 0 || check_dims(&r, c) < 0)
        return -1;
    return 0;
}

/* ======================================================================
 * The tensor table: every weight, its shape and the types it may have
 * ====================================================================== */

typedef enum { K_VEC, K_MAT } tensor_kind; /* vectors: F32/F16/BF16; matrices: any we compute */

typedef enum {
    IN_ALL,      /* every block */
    IN_QLORA,    /* q_lora_rank > 0 */
    IN_NOQLORA,  /* q_lora_rank == 0 */
    IN_DENSE,    /* dense FFN blocks */
    IN_MOE,      /* MoE blocks */
    IN_SHARED,   /* MoE blocks with shared experts */
    IN_NEXTN     /* NextN/MTP blocks only */
} tensor_where;

enum {
    F_OPTIONAL = 1,
    F_KB_SPLIT = 2,  /* only with split attn_k_b / attn_v_b */
    F_KB_LEGACY = 4, /* only with a legacy attn_kv_b */
    F_GU_SPLIT = 8,  /* only with separate ffn_gate_exps / ffn_up_exps */
    F_GU_MERGED = 16 /* only with a merged ffn_gate_up_exps */
};

typedef enum {
    D_1, D_EMBD, D_EMBD2, D_VOCAB, D_QLORA, D_KVLORA, D_KVA, D_QOUT, D_NOPE, D_NHEAD,
    D_VHEAD, D_VOUT, D_KVB, D_FF, D_FFEXP, D_FFEXP2, D_NEXP, D_FFSH
} dim_code;

/* Where a bound view goes: a field of model_layer, or a per-layer slot that
 * the loader converts (legacy kv_b, merged gate_up). */
enum { SLOT_KV_B = -1, SLOT_GATE_UP = -2 };

typedef struct {
    const char *fmt;   /* name with %u for the block */
    long field;        /* offsetof(model_layer, ...) or SLOT_* */
    tensor_kind kind;
    tensor_where where;
    unsigned flags;
    dim_code dims[3];  /* GGUF ne order; D_1 pads */
} tensor_spec;

#define L(f) ((long)offsetof(model_layer, f))

static const tensor_spec layer_specs[] = {
    {"blk.%u.attn_norm.weight", L(attn_norm), K_VEC, IN_ALL, 0, {D_EMBD, D_1, D_1}},
    {"blk.%u.attn_q_a_norm.weight", L(q_a_norm), K_VEC, IN_QLORA, 0, {D_QLORA, D_1, D_1}},
    {"blk.%u.attn_kv_a_norm.weight", L(kv_a_norm), K_VEC, IN_ALL, 0, {D_KVLORA, D_1, D_1}},
    {"blk.%u.attn_q_a.weight", L(q_a), K_MAT, IN_QLORA, 0, {D_EMBD, D_QLORA, D_1}},
    {"blk.%u.attn_q_b.weight", L(q_b), K_MAT, IN_QLORA, 0, {D_QLORA, D_QOUT, D_1}},
    {"blk.%u.attn_q.weight", L(q), K_MAT, IN_NOQLORA, 0, {D_EMBD, D_QOUT, D_1}},
    {"blk.%u.attn_kv_a_mqa.weight", L(kv_a_mqa), K_MAT, IN_ALL, 0, {D_EMBD, D_KVA, D_1}},
    {"blk.%u.attn_k_b.weight", L(k_b), K_MAT, IN_ALL, F_KB_SPLIT, {D_NOPE, D_KVLORA, D_NHEAD}},
    {"blk.%u.attn_v_b.weight", L(v_b), K_MAT, IN_ALL, F_KB_SPLIT, {D_KVLORA, D_VHEAD, D_NHEAD}},
    {"blk.%u.attn_kv_b.weight", SLOT_KV_B, K_MAT, IN_ALL, F_KB_LEGACY, {D_KVLORA, D_KVB, D_1}},
    {"blk.%u.attn_output.weight", L(attn_out), K_MAT, IN_ALL, 0, {D_VOUT, D_EMBD, D_1}},
    {"blk.%u.ffn_norm.weight", L(ffn_norm), K_VEC, IN_ALL, 0, {D_EMBD, D_1, D_1}},
    {"blk.%u.ffn_gate.weight", L(ffn_gate), K_MAT, IN_DENSE, 0, {D_EMBD, D_FF, D_1}},
    {"blk.%u.ffn_up.weight", L(ffn_up), K_MAT, IN_DENSE, 0, {D_EMBD, D_FF, D_1}},
    {"blk.%u.ffn_down.weight", L(ffn_down), K_MAT, IN_DENSE, 0, {D_FF, D_EMBD, D_1}},
    {"blk.%u.ffn_gate_inp.weight", L(gate_inp), K_MAT, IN_MOE, 0, {D_EMBD, D_NEXP, D_1}},
    {"blk.%u.exp_probs_b.bias", L(exp_probs_b), K_VEC, IN_MOE, F_OPTIONAL, {D_NEXP, D_1, D_1}},
    {"blk.%u.ffn_gate_exps.weight", L(gate_exps), K_MAT, IN_MOE, F_GU_SPLIT, {D_EMBD, D_FFEXP, D_NEXP}},
    {"blk.%u.ffn_up_exps.weight", L(up_exps), K_MAT, IN_MOE, F_GU_SPLIT, {D_EMBD, D_FFEXP, D_NEXP}},
    {"blk.%u.ffn_gate_up_exps.weight", SLOT_GATE_UP, K_MAT, IN_MOE, F_GU_MERGED, {D_EMBD, D_FFEXP2, D_NEXP}},
    {"blk.%u.ffn_down_exps.weight", L(down_exps), K_MAT, IN_MOE, 0, {D_FFEXP, D_EMBD, D_NEXP}},
    {"blk.%u.ffn_gate_shexp.weight", L(gate_shexp), K_MAT, IN_SHARED, 0, {D_EMBD, D_FFSH, D_1}},
    {"blk.%u.ffn_up_shexp.weight", L(up_shexp), K_MAT, IN_SHARED, 0, {D_EMBD, D_FFSH, D_1}},
    {"blk.%u.ffn_down_shexp.weight", L(down_shexp), K_MAT, IN_SHARED, 0, {D_FFSH, D_EMBD, D_1}},
    {"blk.%u.nextn.eh_proj.weight", L(nextn_eh_proj), K_MAT, IN_NEXTN, 0, {D_EMBD2, D_EMBD, D_1}},
    {"blk.%u.nextn.enorm.weight", L(nextn_enorm), K_VEC, IN_NEXTN, 0, {D_EMBD, D_1, D_1}},
    {"blk.%u.nextn.hnorm.weight", L(nextn_hnorm), K_VEC, IN_NEXTN, 0, {D_EMBD, D_1, D_1}},
    {"blk.%u.nextn.shared_head_norm.weight", L(nextn_shared_head_norm), K_VEC, IN_NEXTN, F_OPTIONAL, {D_EMBD, D_1, D_1}},
    {"blk.%u.nextn.embed_tokens.weight", L(nextn_embed_tokens), K_MAT, IN_NEXTN, F_OPTIONAL, {D_EMBD, D_VOCAB, D_1}},
    {"blk.%u.nextn.shared_head_head.weight", L(nextn_shared_head_head), K_MAT, IN_NEXTN, F_OPTIONAL, {D_EMBD, D_VOCAB, D_1}},
};

#undef L

static uint64_t dim_value(const model_config *c, dim_code d)
{
    switch (d) {
    case D_1: return 1;
    case D_EMBD: return c->n_embd;
    case D_EMBD2: return 2ull * c->n_embd;
    case D_VOCAB: return c->n_vocab;
    case D_QLORA: return c->q_lora_rank;
    case D_KVLORA: return c->kv_lora_rank;
    case D_KVA: return (uint64_t)c->kv_lora_rank + c->qk_rope;
    case D_QOUT: return (uint64_t)c->n_head * (c->qk_nope + c->qk_rope);
    case D_NOPE: return c->qk_nope;
    case D_NHEAD: return c->n_head;
    case D_VHEAD: return c->v_head;
    case D_VOUT: return (uint64_t)c->n_head * c->v_head;
    case D_KVB: return (uint64_t)c->n_head * (c->qk_nope + c->v_head);
    case D_FF: return c->n_ff_dense;
    case D_FFEXP: return c->n_ff_exp;
    case D_FFEXP2: return 2ull * c->n_ff_exp;
    case D_NEXP: return c->n_expert;
    case D_FFSH: return (uint64_t)c->n_ff_exp * c->n_expert_shared;
    }
    return 0;
}

/* ======================================================================
 * Binding: look up, check, make a view
 * ====================================================================== */

typedef struct {
    model *m;
    const char *path;
    err_t *err;
    unsigned flags; /* MODEL_LOAD_* */
} binder;

static void shape_str(const uint64_t *ne, int n, char *buf, size_t len)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? ", " : "", (unsigned long long)ne[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
}

static int used_dims(const uint64_t *ne)
{
    int n = GGUF_MAX_DIMS;
    while (n > 1 && ne[n - 1] == 1)
        n--;
    return n;
}

static int check_type(binder *b, const gguf_tensor *t, tensor_kind kind)
{
    const quant_traits *q = quant_traits_of(t->type);
    if (kind == K_VEC) {
        if (t->type != QT_F32 && t->type != QT_F16 && t->type != QT_BF16)
            return err_set(b->err, "%s: tensor '%s' has type %s, expected F32, F16 or BF16", b->path,
                           t->name, quant_type_name(t->type));
        return 0;
    }
    if (q && !q->can_dequant && (b->flags & MODEL_LOAD_ANY_TYPE))
        return 0; /* known by size: `info` counts it */
    if (!q || !q->can_dequant) {
        char known[320];
        size_t o = 0;
        for (uint32_t ty = 0; ty < QT_COUNT && o < sizeof known; ty++) {
            const quant_traits *k = quant_traits_of(ty);
            if (k && k->can_dequant)
                o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", o ? ", " : "", k->name);
        }
        return err_set(b->err, "%s: tensor '%s' has type %s, which glmchat cannot compute with (%s)", b->path,
                       t->name, quant_type_name(t->type), known);
    }
    return 0;
}

/* Checks shape and type of `t` against the expected ne and fills the view. */
static int make_view(binder *b, const gguf_tensor *t, const uint64_t *want, tensor_kind kind, mtensor *v)
{
    uint64_t exp[GGUF_MAX_DIMS] = {want[0], want[1], want[2], 1};
    if (memcmp(exp, t->ne, sizeof exp) != 0) {
        char have_s[96], want_s[96];
        shape_str(t->ne, used_dims(t->ne), have_s, sizeof have_s);
        shape_str(exp, used_dims(exp), want_s, sizeof want_s);
        return err_set(b->err, "%s: tensor '%s' has shape %s, expected %s", b->path, t->name, have_s,
                       want_s);
    }
    if (check_type(b, t, kind) < 0)
        return -1;
    uint64_t row;
    if (!quant_row_bytes(t->type, t->ne[0], &row))
        return err_set(b->err, "%s: tensor '%s': a row of %llu elements is not a whole number of %s "
                       "blocks", b->path, t->name, (unsigned long long)t->ne[0],
                       quant_type_name(t->type));
    *v = (mtensor){
        .name = t->name, .type = t->type, .n_dims = t->n_dims,
        .ne = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
        .nb1 = row, .nb2 = row * t->ne[1], .data = t->data, .nbytes = t->size,
        .file_offset = gguf_data_offset(b->m->gguf) + t->offset,
    };
    return 0;
}

static bool spec_applies(const model_config *c, const tensor_spec *s, uint32_t il)
{
    bool moe = c->n_expert > 0 && il >= c->n_dense_lead;
    switch (s->where) {
    case IN_ALL: return true;
    case IN_QLORA: return c->q_lora_rank > 0;
    case IN_NOQLORA: return c->q_lora_rank == 0;
    case IN_DENSE: return !moe;
    case IN_MOE: return moe;
    case IN_SHARED: return moe && c->n_expert_shared > 0;
    case IN_NEXTN: return il >= c->n_layer;
    }
    return false;
}

static bool has_tensor(const model *m, const char *fmt, uint32_t il)
{
    char name[96];
    snprintf(name, sizeof name, fmt, il);
    return gguf_find_tensor(m->gguf, name) != NULL;
}

typedef struct {
    mtensor kv_b, gate_up;
    unsigned layout; /* F_KB_* | F_GU_* */
} layer_extra;

static int bind_layer(binder *b, uint32_t il, layer_extra *x)
{
    const model_config *c = &b->m->cfg;
    model_layer *l = &b->m->layers[il];
    l->is_moe = c->n_expert > 0 && il >= c->n_dense_lead;
    /* Which of the alternative layouts this block uses. */
    bool legacy = !has_tensor(b->m, "blk.%u.attn_k_b.weight", il) &&
                  has_tensor(b->m, "blk.%u.attn_kv_b.weight", il);
    bool merged = !has_tensor(b->m, "blk.%u.ffn_gate_exps.weight", il) &&
                  has_tensor(b->m, "blk.%u.ffn_gate_up_exps.weight", il);
    x->layout = (legacy ? F_KB_LEGACY : F_KB_SPLIT) | (merged ? F_GU_MERGED : F_GU_SPLIT);
    const unsigned alt = F_KB_SPLIT | F_KB_LEGACY | F_GU_SPLIT | F_GU_MERGED;
    for (size_t i = 0; i < sizeof layer_specs / sizeof layer_specs[0]; i++) {
        const tensor_spec *s = &layer_specs[i];
        if (!spec_applies(c, s, il) || ((s->flags & alt) && !(s->flags & alt & x->layout)))
            continue;
        char name[96];
        snprintf(name, sizeof name, s->fmt, il);
        const gguf_tensor *t = gguf_find_tensor(b->m->gguf, name);
        if (!t) {
            if (s->flags & F_OPTIONAL)
                continue;
            return err_set(b->err, "%s: missing tensor '%s'", b->path, name);
        }
        uint64_t want[3] = {dim_value(c, s->dims[0]), dim_value(c, s->dims[1]), dim_value(c, s->dims[2])};
        mtensor *dst = s->field == SLOT_KV_B ? &x->kv_b
                       : s->field == SLOT_GATE_UP ? &x->gate_up
                                                  : (mtensor *)((char *)l + s->field);
        if (make_view(b, t, want, s->kind, dst) < 0)
            return -1;
    }
    return 0;
}

/* ======================================================================
 * Layout conversion
 * ====================================================================== */

static void *own(model *m, size_t bytes)
{
    void **grown = realloc(m->owned, (m->n_owned + 1) * sizeof *m->owned);
    if (!grown)
        return NULL;
    m->owned = grown;
    void *p = malloc(bytes ? bytes : 1);
    if (p)
        m->owned[m->n_owned++] = p;
    return p;
}

/* An F32 view over a loader-owned buffer of shape ne. */
static mtensor owned_f32_view(const char *name, float *data, uint64_t ne0, uint64_t ne1, uint64_t ne2)
{
    return (mtensor){
        .name = name, .type = QT_F32, .n_dims = ne2 > 1 ? 3 : 2, .ne = {ne0, ne1, ne2, 1},
        .nb1 = ne0 * 4, .nb2 = ne0 * ne1 * 4, .data = data, .nbytes = ne0 * ne1 * ne2 * 4,
        .file_offset = UINT64_MAX,
    };
}

/* Legacy attn_kv_b (kv_lora, n_head*(nope+v)): per head, nope rows that
 * produce k_nope and then v rows that produce v, each kv_lora long.  The
 * split tensors store k_b transposed (per head kv_lora rows of nope) and
 * v_b as is (per head v rows of kv_lora); build exactly that in F32. */
static int split_kv_b(binder *b, model_layer *l, const mtensor *kv_b)
{
    const model_config *c = &b->m->cfg;
    uint64_t lora = c->kv_lora_rank, nope = c->qk_nope, vh = c->v_head, nh = c->n_head;
    uint64_t rows = nh * (nope + vh);
    float *full = malloc(rows * lora * sizeof(float));
    float *kb = own(b->m, nope * lora * nh * sizeof(float));
    float *vb = own(b->m, vh * lora * nh * sizeof(float));
    if (!full || !kb || !vb) {
        free(full);
        return err_set(b->err, "%s: out of memory splitting '%s'", b->path, kv_b->name);
    }
    for (uint64_t r = 0; r < rows; r++)
        quant_dequant_row(kv_b->type, (const char *)kv_b->data + r * kv_b->nb1, full + r * lora, lora);
    for (uint64_t h = 0; h < nh; h++) {
        const float *head = full + h * (nope + vh) * lora;
        for (uint64_t i = 0; i < nope; i++)          /* k_b[h][c][i] = kv_b[h][i][c] */
            for (uint64_t cc = 0; cc < lora; cc++)
                kb[(h * lora + cc) * nope + i] = head[i * lora + cc];
        memcpy(vb + h * vh * lora, head + nope * lora, vh * lora * sizeof(float));
    }
    free(full);
    l->k_b = owned_f32_view(kv_b->name, kb, nope, lora, nh);
    l->v_b = owned_f32_view(kv_b->name, vb, lora, vh, nh);
    return 0;
}

/* Merged ffn_gate_up_exps (n_embd, 2*n_ff, n_expert): within each expert's
 * matrix the gate rows come first, then the up rows (llama.cpp views the
 * product's first half as gate).  Two views with the merged matrix stride. */
static void split_gate_up(const model_config *c, model_layer *l, const mtensor *gu)
{
    mtensor g = *gu;
    g.ne[1] = c->n_ff_exp;
    g.nbytes = gu->nbytes / 2;
    mtensor u = g;
    u.data = (const char *)gu->data + (uint64_t)c->n_ff_exp * gu->nb1;
    u.file_offset = gu->file_offset + (uint64_t)c->n_ff_exp * gu->nb1;
    l->gate_exps = g;
    l->up_exps = u;
}

/* ======================================================================
 * Loading
 * ====================================================================== */

static int bind_globals(binder *b)
{
    model *m = b->m;
    const model_config *c = &m->cfg;
    const struct { const char *name; mtensor *dst; tensor_kind kind; bool optional; uint64_t ne0, ne1; } g[] = {
        {"token_embd.weight", &m->tok_embd, K_MAT, false, c->n_embd, c->n_vocab},
        {"output_norm.weight", &m->output_norm, K_VEC, false, c->n_embd, 1},
        {"output.weight", &m->output, K_MAT, true, c->n_embd, c->n_vocab},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        const gguf_tensor *t = gguf_find_tensor(m->gguf, g[i].name);
        if (!t) {
            if (g[i].optional)
                continue;
            return err_set(b->err, "%s: missing tensor '%s'", b->path, g[i].name);
        }
        uint64_t want[3] = {g[i].ne0, g[i].ne1, 1};
        if (make_view(b, t, want, g[i].kind, g[i].dst) < 0)
            return -1;
    }
    if (!m->output.name) /* no separate head: the embedding is tied */
        m->output = m->tok_embd;
    return 0;
}

int model_load_gguf_ex(model *m, gguf_ctx *ctx, unsigned flags, err_t *err)
{
    memset(m, 0, sizeof *m);
    m->gguf = ctx;
    const char *path = gguf_path(ctx);
    binder b = {m, path, err, flags};
    if (read_config(ctx, path, &m->cfg, err) < 0)
        goto fail;
    if (m->cfg.n_layer_file > gguf_n_tensors(ctx)) { /* each block has tensors: bounds the allocation below */
        err_set(err, "%s: block_count %u exceeds the file's %zu tensors", path, m->cfg.n_layer_file,
                gguf_n_tensors(ctx));
        goto fail;
    }
    m->layers = calloc(m->cfg.n_layer_file, sizeof *m->layers);
    if (!m->layers) {
        err_set(err, "%s: out of memory", path);
        goto fail;
    }
    if (bind_globals(&b) < 0)
        goto fail;
    for (uint32_t il = 0; il < m->cfg.n_layer_file; il++) {
        layer_extra x = {0};
        if (bind_layer(&b, il, &x) < 0)
            goto fail;
        if (x.layout & F_KB_LEGACY) {
            m->cfg.legacy_kv_b = true;
            if (!(flags & MODEL_LOAD_NO_CONVERT) && split_kv_b(&b, &m->layers[il], &x.kv_b) < 0)
                goto fail;
        }
        if (m->layers[il].is_moe && (x.layout & F_GU_MERGED)) {
            m->cfg.merged_gate_up = true;
            split_gate_up(&m->cfg, &m->layers[il], &x.gate_up);
        }
    }
    return 0;
fail:
    model_free(m);
    return -1;
}

int model_load_gguf(model *m, gguf_ctx *ctx, err_t *err)
{
    return model_load_gguf_ex(m, ctx, 0, err);
}

int model_load_ex(model *m, const char *path, unsigned flags, err_t *err)
{
    memset(m, 0, sizeof *m);
    gguf_ctx *g = gguf_open(path, err);
    if (!g)
        return -1;
    return model_load_gguf_ex(m, g, flags, err);
}

int model_load(model *m, const char *path, err_t *err)
{
    return model_load_ex(m, path, 0, err);
}

void model_free(model *m)
{
    if (!m)
        return;
    for (uint32_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    gguf_close(m->gguf);
    memset(m, 0, sizeof *m);
}

/* ======================================================================
 * Census
 * ====================================================================== */

/* Block index of "blk.N.*" names, -1 for global tensors. */
static long block_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    char *end;
    long il = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' ? il : -1;
}

static uint64_t n_elements(const gguf_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        n *= t->ne[d];
    return n;
}

/* What a decoded token reads: every tensor of the blocks that run, routed
 * experts only n_expert_used of n_expert (the three expert tensors are
 * n_expert equal slices), one row of token_embd (plus the whole table when
 * it doubles as the output head).  NextN blocks are loaded, not run. */
void model_census_add(model_census *out, const model_config *c, const gguf_tensor *t, bool tied_output)
{
    uint64_t ne = n_elements(t);
    out->total_params += ne;
    out->weight_bytes += t->size;
    if (t->type < QT_COUNT) {
        out->bytes_by_type[t->type] += t->size;
        out->tensors_by_type[t->type]++;
    }
    long il = block_of(t->name);
    uint64_t act_ne = ne, act_bytes = t->size;
    if (il >= (long)c->n_layer) {
        act_ne = act_bytes = 0;
    } else if (strcmp(t->name, "token_embd.weight") == 0 && t->ne[1] > 0) {
        uint64_t rows = tied_output ? t->ne[1] + 1 : 1;
        act_ne = t->ne[0] * rows;
        act_bytes = t->size / t->ne[1] * rows;
    } else if (strstr(t->name, "_exps.") && c->n_expert > 0) {
        act_ne = ne / c->n_expert * c->n_expert_used;
        act_bytes = t->size / c->n_expert * c->n_expert_used;
    }
    out->active_params += act_ne;
    out->active_bytes += act_bytes;
}

void model_census_compute(const model *m, model_census *out)
{
    memset(out, 0, sizeof *out);
    bool tied = m->output.data == m->tok_embd.data;
    size_t n = gguf_n_tensors(m->gguf);
    for (size_t i = 0; i < n; i++)
        model_census_add(out, &m->cfg, gguf_tensor_at(m->gguf, i), tied);
}
