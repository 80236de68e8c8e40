/* synth_types.c: the file types `glmchat mkmodel --type` offers and the
 * per-tensor types each gives, in llama-quantize's tensor order.
 *
 * Four kinds of file type:
 *  - float (F32, F16, BF16): what llama.cpp's HF->GGUF converter writes
 *    (1-D tensors, norms and the router F32);
 *  - llama-quantize's presets (Q4_0 .. Q6_K, Q2_K, Q3_K_S/M/L, IQ4_XS,
 *    IQ4_NL, MXFP4_MOE, IQ3_XXS, IQ2_XXS, IQ1_S, IQ1_M): the type of each
 *    tensor as llama.cpp's llama_tensor_get_type chooses it for a deepseek2
 *    model without an importance matrix (src/llama-quant.cpp at llama.cpp
 *    d32676d7, rules below);
 *  - plain types (IQ3_S, IQ2_XS, IQ2_S): every weight of that type, as
 *    llama-quantize --pure makes them, where a row fits its blocks;
 *  - dynamic mixes in the style of the "UD" files people download
 *    (Q4_K_XL, Q3_K_XL, Q2_K_XL): by tensor kind and layer.
 * Rows that do not fit a type's blocks take llama-quantize's fallback type.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format/quant.h"
#include "synth.h"
#include "synth_internal.h"

/* ======================================================================
 * File types
 * ====================================================================== */

typedef enum { FT_FLOAT, FT_LLAMA, FT_PLAIN, FT_DYNAMIC } ftype_kind;

typedef struct {
    const char *name;
    uint32_t ftype;
    uint32_t base;      /* default tensor type (llama_ftype_get_default_type) */
    ftype_kind kind;
    uint32_t file_type; /* general.file_type: llama_ftype (see below for plain and dynamic ones) */
} ftype_info;

/* Plain types and dynamic mixes have no llama_ftype of their own: a plain
 * file says the preset whose default type it is (IQ2_S: llama's IQ2_M; its
 * "IQ2_S" preset is mostly IQ2_XS), a dynamic one the preset it is a
 * per-tensor override of. */
static const ftype_info ftypes[] = {
    {"F32", SYNTH_FT_F32, QT_F32, FT_FLOAT, 0},
    {"F16", SYNTH_FT_F16, QT_F16, FT_FLOAT, 1},
    {"BF16", SYNTH_FT_BF16, QT_BF16, FT_FLOAT, 32},
    {"Q8_0", SYNTH_FT_Q8_0, QT_Q8_0, FT_LLAMA, 7},
    {"Q4_0", SYNTH_FT_Q4_0, QT_Q4_0, FT_LLAMA, 2},
    {"Q4_1", SYNTH_FT_Q4_1, QT_Q4_1, FT_LLAMA, 3},
    {"Q5_0", SYNTH_FT_Q5_0, QT_Q5_0, FT_LLAMA, 8},
    {"Q5_1", SYNTH_FT_Q5_1, QT_Q5_1, FT_LLAMA, 9},
    {"Q2_K", SYNTH_FT_Q2_K, QT_Q2_K, FT_LLAMA, 10},
    {"Q3_K_S", SYNTH_FT_Q3_K_S, QT_Q3_K, FT_LLAMA, 11},
    {"Q3_K_M", SYNTH_FT_Q3_K_M, QT_Q3_K, FT_LLAMA, 12},
    {"Q3_K_L", SYNTH_FT_Q3_K_L, QT_Q3_K, FT_LLAMA, 13},
    {"Q4_K_S", SYNTH_FT_Q4_K_S, QT_Q4_K, FT_LLAMA, 14},
    {"Q4_K_M", SYNTH_FT_Q4_K_M, QT_Q4_K, FT_LLAMA, 15},
    {"Q5_K_S", SYNTH_FT_Q5_K_S, QT_Q5_K, FT_LLAMA, 16},
    {"Q5_K_M", SYNTH_FT_Q5_K_M, QT_Q5_K, FT_LLAMA, 17},
    {"Q6_K", SYNTH_FT_Q6_K, QT_Q6_K, FT_LLAMA, 18},
    {"IQ4_NL", SYNTH_FT_IQ4_NL, QT_IQ4_NL, FT_LLAMA, 25},
    {"IQ4_XS", SYNTH_FT_IQ4_XS, QT_IQ4_XS, FT_LLAMA, 30},
    {"MXFP4_MOE", SYNTH_FT_MXFP4_MOE, QT_MXFP4, FT_LLAMA, 38},
    {"IQ3_XXS", SYNTH_FT_IQ3_XXS, QT_IQ3_XXS, FT_LLAMA, 23},
    {"IQ2_XXS", SYNTH_FT_IQ2_XXS, QT_IQ2_XXS, FT_LLAMA, 19},
    {"IQ1_S", SYNTH_FT_IQ1_S, QT_IQ1_S, FT_LLAMA, 24},
    {"IQ1_M", SYNTH_FT_IQ1_M, QT_IQ1_M, FT_LLAMA, 31},
    {"IQ3_S", SYNTH_FT_IQ3_S, QT_IQ3_S, FT_PLAIN, 26},
    {"IQ2_XS", SYNTH_FT_IQ2_XS, QT_IQ2_XS, FT_PLAIN, 20},
    {"IQ2_S", SYNTH_FT_IQ2_S, QT_IQ2_S, FT_PLAIN, 29},
    {"Q4_K_XL", SYNTH_FT_Q4_K_XL, QT_Q4_K, FT_DYNAMIC, 15},
    {"Q3_K_XL", SYNTH_FT_Q3_K_XL, QT_Q3_K, FT_DYNAMIC, 12},
    {"Q2_K_XL", SYNTH_FT_Q2_K_XL, QT_Q2_K, FT_DYNAMIC, 10},
};

static const ftype_info *ftype_of(uint32_t ftype)
{
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (ftypes[i].ftype == ftype)
            return &ftypes[i];
    return NULL;
}

int synth_ftype_from_name(const char *name)
{
    /* llama-quantize's aliases, and ours */
    static const struct { const char *alias; uint32_t ftype; } aliases[] = {
        {"Q3_K", SYNTH_FT_Q3_K_M}, {"Q4_K", SYNTH_FT_Q4_K_M}, {"Q5_K", SYNTH_FT_Q5_K_M},
        {"MXFP4", SYNTH_FT_MXFP4_MOE}, {"dynamic", SYNTH_FT_Q4_K_XL},
        {"UD-Q4_K_XL", SYNTH_FT_Q4_K_XL}, {"UD-Q3_K_XL", SYNTH_FT_Q3_K_XL}, {"UD-Q2_K_XL", SYNTH_FT_Q2_K_XL},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(aliases[i].alias, name) == 0)
            return (int)aliases[i].ftype;
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (strcasecmp(ftypes[i].name, name) == 0)
            return (int)ftypes[i].ftype;
    return -1;
}

const char *synth_ftype_name(uint32_t ftype)
{
    const ftype_info *f = ftype_of(ftype);
    return f ? f->name : "?";
}

const char *synth_ftype_names(void)
{
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M (Q3_K), Q3_K_L, Q4_K_S, "
           "Q4_K_M (Q4_K), Q5_K_S, Q5_K_M (Q5_K), Q6_K, IQ4_NL, IQ4_XS, MXFP4_MOE (MXFP4), IQ3_XXS, IQ2_XXS, "
           "IQ1_S, IQ1_M, IQ3_S, IQ2_XS, IQ2_S, Q4_K_XL (dynamic), Q3_K_XL, Q2_K_XL";
}

bool synth_ftype_known(uint32_t ftype)
{
    return ftype_of(ftype) != NULL;
}

bool synth_is_float_ftype(uint32_t ftype)
{
    const ftype_info *f = ftype_of(ftype);
    return f && f->kind == FT_FLOAT;
}

uint32_t synth_file_type_key(uint32_t ftype)
{
    const ftype_info *f = ftype_of(ftype);
    return f ? f->file_type : ftype;
}

/* ======================================================================
 * llama-quantize's order and type rules
 *
 * llama-quantize writes tensors sorted by (layer, name) with the non-block
 * tensors (layer -1) first, and picks each type in that order (two
 * counters depend on it).  mixture_type() is llama.cpp's
 * llama_tensor_get_type_impl (llama-quant.cpp, d32676d7) for what a
 * deepseek2 file holds, written from its source and checked against the
 * fixtures' per-tensor types:
 *  - categories by name: "output.weight", "token_embd.weight",
 *    "attn_kv_b.weight" (attn_v-like; the MLA split's attn_k_b/attn_v_b,
 *    attn_q_a/q_b and attn_kv_a_mqa are "other": they keep the default
 *    type), "attn_q.weight" (DeepSeek-V2-Lite's uncompressed q),
 *    "attn_output.weight", and ffn_up / ffn_gate / ffn_down anywhere in the
 *    name (dense, routed and shared alike; the merged ffn_gate_up_exps is
 *    a gate);
 *  - the model facts it reads: n_gqa = n_head (head_count_kv is 1 in MLA
 *    files) is always >= 4 here; n_expert == 8 (the tiny fixtures) has its
 *    own bumps; no importance matrix; not Falcon, not a 70B;
 *  - ffn_down's layer is parsed from the name (n_expert > 1) except in
 *    the IQ1/IQ2 branch, which counts ffn_down tensors instead;
 *  - n_layer there is block_count, NextN blocks included.
 * ====================================================================== */

static int layer_of(const char *name)
{
    int il = -1;
    if (strncmp(name, "blk.", 4) == 0)
        il = atoi(name + 4);
    return il;
}

static int cmp_quantize_order(const void *pa, const void *pb)
{
    const synth_tensor *a = pa, *b = pb;
    int la = layer_of(a->name), lb = layer_of(b->name);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a->name, b->name);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Converter (F32/F16/BF16 output): 1-D tensors, norms and the router stay F32. */
static uint32_t converter_type(const ftype_info *f, const synth_tensor *t)
{
    if (t->n_dims < 2 || ends_with(t->name, "_norm.weight") || strstr(t->name, "ffn_gate_inp"))
        return QT_F32;
    return f->base;
}

typedef struct {
    int n_attn_v, i_attn_v; /* attn_v-like tensors: all, and seen so far */
    int i_ffn_down;         /* ffn_down tensors seen so far */
    int n_layer_all;        /* block_count */
} quant_state;

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* Incompatible row length: llama-quantize's fallback types (a 256-block
 * IQ type -> IQ4_NL, Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K
 * -> Q8_0; F16 where even that does not fit; an error for the others,
 * which llama-quantize refuses too). */
static int fallback_type(const synth_tensor *t, uint32_t type, uint32_t *out, err_t *err)
{
    uint32_t blk = quant_traits_of(type)->block_elems;
    if (t->ne[0] % blk == 0) {
        *out = type;
        return 0;
    }
    uint32_t fb;
    switch (type) {
    case QT_IQ1_S: case QT_IQ1_M: case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: case QT_IQ3_XXS:
    case QT_IQ3_S: case QT_IQ4_XS: fb = QT_IQ4_NL; break;
    case QT_Q2_K: case QT_Q3_K: fb = QT_Q4_0; break;
    case QT_Q4_K: fb = QT_Q5_0; break;
    case QT_Q5_K: fb = QT_Q5_1; break;
    case QT_Q6_K: fb = QT_Q8_0; break;
    default:
        return err_set(err, "tensor %s: row length %" PRIu64 " is not a multiple of the %s block size %" PRIu32
                       " (llama-quantize has no fallback for it)", t->name, t->ne[0], quant_type_name(type), blk);
    }
    *out = t->ne[0] % quant_traits_of(fb)->block_elems == 0 ? fb : QT_F16;
    return 0;
}

static bool is_iq12(uint32_t ft)
{
    return ft == SYNTH_FT_IQ2_XXS || ft == SYNTH_FT_IQ1_S || ft == SYNTH_FT_IQ1_M;
}

/* output.weight (not tied: deepseek2 files have their own head). */
static uint32_t output_type(uint32_t ft, const synth_tensor *t, uint32_t type)
{
    if (ft == SYNTH_FT_MXFP4_MOE || t->ne[0] % quant_traits_of(type)->block_elems != 0)
        return QT_Q8_0;
    if (is_iq12(ft) || ft == SYNTH_FT_IQ3_XXS)
        return QT_Q5_K;
    return type == QT_Q8_0 ? QT_Q8_0 : QT_Q6_K;
}

static uint32_t token_embd_type(uint32_t ft, uint32_t type)
{
    if (is_iq12(ft))
        return QT_Q2_K;
    if (ft == SYNTH_FT_IQ3_XXS)
        return QT_IQ3_S;
    return type;
}

/* attn_kv_b (legacy files only). */
static uint32_t attn_v_type(const synth_config *c, uint32_t ft, uint32_t type, quant_state *qs)
{
    if (is_iq12(ft) || ft == SYNTH_FT_Q2_K || ft == SYNTH_FT_IQ3_XXS)
        type = QT_Q4_K; /* n_gqa >= 4 */
    else if (ft == SYNTH_FT_Q3_K_M)
        type = qs->i_attn_v < 2 ? QT_Q5_K : QT_Q4_K;
    else if (ft == SYNTH_FT_Q3_K_L || ft == SYNTH_FT_IQ4_NL || ft == SYNTH_FT_IQ4_XS)
        type = QT_Q5_K;
    else if ((ft == SYNTH_FT_Q4_K_M || ft == SYNTH_FT_Q5_K_M) && use_more_bits(qs->i_attn_v, qs->n_attn_v))
        type = QT_Q6_K;
    else if (ft == SYNTH_FT_Q4_K_S && qs->i_attn_v < 4)
        type = QT_Q5_K;
    if (c->experts == 8 && !is_iq12(ft)) /* llama.cpp bumps the 8-expert models' attn_v to Q8_0 */
        type = QT_Q8_0;
    qs->i_attn_v++;
    return type;
}

static uint32_t ffn_down_type(uint32_t ft, int il, uint32_t type, quant_state *qs)
{
    const int nl = qs->n_layer_all;
    if (is_iq12(ft)) {
        if (qs->i_ffn_down < nl / 8) /* a count of ffn_down tensors, not a layer */
            type = QT_Q2_K;
    } else if (ft == SYNTH_FT_Q2_K) {
        type = QT_Q3_K;
    } else if (ft == SYNTH_FT_IQ3_XXS) {
        type = il < nl / 8 ? QT_Q4_K : QT_Q3_K;
    } else if (ft == SYNTH_FT_Q3_K_M) {
        type = il < nl / 16 ? QT_Q5_K : QT_Q4_K;
    } else if (ft == SYNTH_FT_Q3_K_L) {
        type = QT_Q5_K;
    } else if (ft == SYNTH_FT_Q4_K_M) {
        if (use_more_bits(il, nl))
            type = QT_Q6_K;
    } else if (il < nl / 8 && (ft == SYNTH_FT_IQ4_NL || ft == SYNTH_FT_IQ4_XS)) {
        type = QT_Q5_K;
    } else if (ft == SYNTH_FT_Q5_K_M && use_more_bits(il, nl)) {
        type = QT_Q6_K;
    } else if (ft == SYNTH_FT_Q4_K_S && il < nl / 8) {
        type = QT_Q5_K;
    }
    qs->i_ffn_down++;
    return type;
}

static uint32_t attn_output_type(const synth_config *c, uint32_t ft, uint32_t type)
{
    if (c->experts == 8) {
        if (is_iq12(ft) || ft == SYNTH_FT_Q2_K || ft == SYNTH_FT_IQ3_XXS || ft == SYNTH_FT_Q3_K_S ||
            ft == SYNTH_FT_Q3_K_M || ft == SYNTH_FT_IQ4_NL || ft == SYNTH_FT_Q4_K_S || ft == SYNTH_FT_Q4_K_M ||
            ft == SYNTH_FT_IQ4_XS)
            return QT_Q5_K;
        return type;
    }
    if (ft == SYNTH_FT_IQ1_S || ft == SYNTH_FT_IQ1_M)
        return QT_IQ2_XXS;
    if (ft == SYNTH_FT_Q2_K)
        return QT_Q3_K;
    if (ft == SYNTH_FT_IQ3_XXS)
        return QT_IQ3_S;
    if (ft == SYNTH_FT_Q3_K_M)
        return QT_Q4_K;
    if (ft == SYNTH_FT_Q3_K_L)
        return QT_Q5_K;
    return type;
}

static uint32_t mixture_type(const synth_config *c, const synth_tensor *t, uint32_t type, quant_state *qs)
{
    const uint32_t ft = c->ftype;
    const char *n = t->name;
    if (strcmp(n, "output.weight") == 0)
        return output_type(ft, t, type);
    if (ft == SYNTH_FT_MXFP4_MOE) /* the routed experts MXFP4, everything else Q8_0 */
        return t->ne[2] > 1 ? QT_MXFP4 : QT_Q8_0;
    if (strcmp(n, "token_embd.weight") == 0)
        return token_embd_type(ft, type);
    if (strstr(n, "attn_kv_b.weight"))
        return attn_v_type(c, ft, type, qs);
    if (strstr(n, "attn_q.weight"))
        return ft == SYNTH_FT_IQ3_XXS ? QT_IQ2_S : type;
    if (strstr(n, "ffn_down"))
        return ffn_down_type(ft, layer_of(n), type, qs);
    if (strstr(n, "attn_output.weight"))
        return attn_output_type(c, ft, type);
    return type;
}

/* ======================================================================
 * Dynamic mixes
 *
 * In the style of the "dynamic" files people download (Unsloth's
 * UD-Q4_K_XL, UD-Q3_K_XL, UD-Q2_K_XL): what runs for every token -- the
 * attention, the shared expert, the dense layer, the head -- keeps more
 * bits; the routed experts, nearly all of the weights and a few per token,
 * take fewer, with more in the first and last eighth of the layers (gate,
 * up) and where llama-quantize gives Q4_K_M's ffn_down more bits (down):
 *
 *   mix       attention  shared, dense  token_embd  output  gate/up (ends)  down (more bits)
 *   Q4_K_XL   Q8_0       Q6_K           Q6_K        Q6_K    Q4_K (Q5_K)     Q5_K (Q6_K)
 *   Q3_K_XL   Q6_K       Q6_K           Q4_K        Q6_K    Q3_K (Q4_K)     Q4_K (Q5_K)
 *   Q2_K_XL   Q5_K       Q5_K           Q4_K        Q6_K    Q2_K (Q3_K)     Q3_K (Q4_K)
 * ====================================================================== */

typedef struct {
    uint32_t attn, shared, embd, head, gate_up, gate_up_ends, down, down_more;
} dynamic_mix;

static uint32_t dynamic_type(const synth_config *c, const synth_tensor *t, quant_state *qs)
{
    static const dynamic_mix q4 = {QT_Q8_0, QT_Q6_K, QT_Q6_K, QT_Q6_K, QT_Q4_K, QT_Q5_K, QT_Q5_K, QT_Q6_K};
    static const dynamic_mix q3 = {QT_Q6_K, QT_Q6_K, QT_Q4_K, QT_Q6_K, QT_Q3_K, QT_Q4_K, QT_Q4_K, QT_Q5_K};
    static const dynamic_mix q2 = {QT_Q5_K, QT_Q5_K, QT_Q4_K, QT_Q6_K, QT_Q2_K, QT_Q3_K, QT_Q3_K, QT_Q4_K};
    const dynamic_mix *m = c->ftype == SYNTH_FT_Q2_K_XL ? &q2 : c->ftype == SYNTH_FT_Q3_K_XL ? &q3 : &q4;
    const char *n = t->name;
    int il = layer_of(n), nl = qs->n_layer_all;
    if (strcmp(n, "output.weight") == 0 || strcmp(n, "token_embd.weight") == 0) {
        if (t->ne[0] % QK_K)
            return QT_Q8_0;
        return strcmp(n, "output.weight") == 0 ? m->head : m->embd;
    }
    if (strstr(n, ".attn_") || strstr(n, ".nextn."))
        return m->attn;
    if (strstr(n, "_shexp.") || (il >= 0 && (uint32_t)il < c->dense_layers))
        return m->shared;
    if (strstr(n, "ffn_down_exps"))
        return use_more_bits(il, nl) ? m->down_more : m->down;
    /* the routed experts' gate/up (merged or not) */
    return il < nl / 8 || il >= 7 * nl / 8 ? m->gate_up_ends : m->gate_up;
}

/* ======================================================================
 * Every tensor's type
 * ====================================================================== */

static int quantize_type(const synth_config *c, const ftype_info *f, const synth_tensor *t, quant_state *qs,
                         uint32_t *out, err_t *err)
{
    bool quantize = t->n_dims >= 2 && ends_with(t->name, "weight") && !strstr(t->name, "_norm.weight") &&
                    !strstr(t->name, "ffn_gate_inp.weight");
    if (!quantize) {
        *out = QT_F32; /* as converted: llama-quantize copies it */
        return 0;
    }
    switch (f->kind) {
    case FT_DYNAMIC: return fallback_type(t, dynamic_type(c, t, qs), out, err);
    case FT_PLAIN: return fallback_type(t, f->base, out, err);
    default: return fallback_type(t, mixture_type(c, t, f->base, qs), out, err);
    }
}

int synth_assign_types(const synth_config *c, synth_table *tab, err_t *err)
{
    const ftype_info *f = ftype_of(c->ftype);
    if (!f)
        return err_set(err, "unknown file type %" PRIu32, c->ftype);
    quant_state qs = {.n_layer_all = (int)(c->layers + c->nextn)};
    if (f->kind != FT_FLOAT) {
        qsort(tab->t, tab->n, sizeof *tab->t, cmp_quantize_order);
        for (size_t i = 0; i < tab->n; i++)
            qs.n_attn_v += strstr(tab->t[i].name, "attn_kv_b.weight") != NULL;
    }
    for (size_t i = 0; i < tab->n; i++) {
        synth_tensor *t = &tab->t[i];
        if (f->kind == FT_FLOAT)
            t->type = converter_type(f, t);
        else if (quantize_type(c, f, t, &qs, &t->type, err) < 0)
            return -1;
    }
    return 0;
}
