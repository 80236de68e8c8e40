/* requant: quantizes a float GGUF (the fixtures' F32 files) into a file
 * type with our own quantizer (core/format/quant.c, ggml's reference quantizers)
 * and the per-tensor types llama-quantize would pick for that file type and
 * shape (the generator's rules, core/model/synth.c, for the shape read from the
 * file), for the fidelity tests of file types the fixtures do not ship
 * (Q5_K_M, the dynamic mix Q4_K_XL).
 *
 *   requant IN.gguf OUT.gguf TYPE        TYPE: a `glmchat mkmodel --type` name
 *
 * Keys are copied as they are, general.file_type set as llama-quantize
 * sets it; tensors keep their order.  Exit status 0, or 1 with one line on
 * stderr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model_edit.h"
#include "format/quant.h"
#include "model/synth.h"

/* The generator's configuration of a loaded model's shape and flavour. */
static void config_of(const model_config *m, uint32_t ftype, synth_config *c)
{
    memset(c, 0, sizeof *c);
    c->glm = m->gating == MODEL_GATING_SIGMOID;
    c->hidden = m->n_embd;
    c->layers = m->n_layer;
    c->nextn = m->n_nextn;
    c->dense_layers = m->n_dense_lead;
    c->heads = m->n_head;
    c->q_lora = m->q_lora_rank;
    c->kv_lora = m->kv_lora_rank;
    c->qk_nope = m->qk_nope;
    c->qk_rope = m->qk_rope;
    c->v_head = m->v_head;
    c->ff = m->n_ff_dense;
    c->moe_ff = m->n_ff_exp;
    c->experts = m->n_expert;
    c->experts_used = m->n_expert_used;
    c->shared = m->n_expert_shared;
    c->vocab = m->n_vocab;
    c->ctx = m->n_ctx_train;
    c->merged_gate_up = m->merged_gate_up;
    c->legacy_kv_b = m->legacy_kv_b;
    c->no_tokenizer = true; /* the table only */
    c->ftype = ftype;
}

/* Tensor t's rows quantized to `type` (a fresh buffer of *len bytes). */
static void *quantize_tensor(const gguf_tensor *t, uint32_t type, size_t *len)
{
    uint64_t k = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3], src_row, dst_row;
    if (!quant_row_bytes(t->type, k, &src_row) || !quant_row_bytes(type, k, &dst_row))
        return NULL;
    uint8_t *out = malloc(dst_row * rows + 1);
    float *row = malloc(k * sizeof *row);
    for (uint64_t r = 0; out && row && r < rows; r++) {
        quant_dequant_row(t->type, (const uint8_t *)t->data + r * src_row, row, k);
        if (quant_quantize_row(type, row, out + r * dst_row, k) != dst_row) {
            free(out);
            out = NULL;
        }
    }
    free(row);
    *len = dst_row * rows;
    return out;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: requant IN.gguf OUT.gguf TYPE\n");
        return 2;
    }
    int ft = synth_ftype_from_name(argv[3]);
    if (ft < 0) {
        fprintf(stderr, "requant: unknown type '%s' (types: %s)\n", argv[3], synth_ftype_names());
        return 1;
    }
    model m;
    err_t err = {{0}};
    if (model_load_ex(&m, argv[1], MODEL_LOAD_NO_CONVERT, &err) < 0) {
        fprintf(stderr, "requant: %s\n", err.msg);
        return 1;
    }
    synth_config c;
    synth_table tab;
    config_of(&m.cfg, (uint32_t)ft, &c);
    if (synth_build_table(&c, &tab, &err) < 0) {
        fprintf(stderr, "requant: %s: %s\n", argv[1], err.msg);
        model_free(&m);
        return 1;
    }
    model_edit e;
    int rc = me_open(&e, argv[1]);
    for (size_t i = 0; rc == 0 && i < e.n; i++) {
        me_tensor *t = &e.t[i];
        const synth_tensor *want = NULL;
        for (size_t j = 0; j < tab.n && !want; j++)
            if (strcmp(tab.t[j].name, t->name) == 0)
                want = &tab.t[j];
        if (!want) {
            fprintf(stderr, "requant: tensor '%s' is not in the %s table of this shape\n", t->name, argv[3]);
            rc = -1;
            break;
        }
        if (want->type == t->type)
            continue;
        const gguf_tensor *g = gguf_find_tensor(e.src, t->name);
        size_t len = 0;
        void *q = g ? quantize_tensor(g, want->type, &len) : NULL;
        if (!q) {
            fprintf(stderr, "requant: tensor '%s': cannot quantize %s to %s\n", t->name, quant_type_name(t->type),
                    quant_type_name(want->type));
            rc = -1;
            break;
        }
        rc = me_add_tensor(&e, t->name, want->type, t->n_dims, t->ne, q, len);
        free(q);
    }
    if (rc == 0) {
        /* as synth writes it: the dynamic mix says Q4_K_M (15) */
        me_set_u32(&e, "general.file_type", ft == SYNTH_FT_Q4_K_XL ? SYNTH_FT_Q4_K_M : (uint32_t)ft);
        me_set_u32(&e, "general.quantization_version", 2);
        rc = me_write(&e, argv[2]);
        if (rc)
            fprintf(stderr, "requant: %s: %s\n", argv[2], e.err.msg[0] ? e.err.msg : "cannot write");
    }
    me_close(&e);
    synth_table_free(&tab);
    model_free(&m);
    return rc ? 1 : 0;
}
