/* model_variants.h: the layouts real files come in, written from a
 * fixture model with model_edit.h:
 *   legacy attn_kv_b (older GGUFs) instead of attn_k_b/attn_v_b,
 *   one merged ffn_gate_up_exps instead of ffn_gate_exps/ffn_up_exps,
 *   an extra NextN/MTP block (block_count + 1, nextn_predict_layers = 1).
 * Each writes `out` and returns 0, or -1 with err set. */
#ifndef GLM_TESTS_MODEL_VARIANTS_H
#define GLM_TESTS_MODEL_VARIANTS_H

#include "model/model.h"
#include "model_edit.h"

static inline const gguf_tensor *mv_src(model_edit *e, const char *fmt, uint32_t il)
{
    char name[96];
    snprintf(name, sizeof name, fmt, il);
    return gguf_find_tensor(e->src, name);
}

/* attn_kv_b (kv_lora, n_head*(nope+v)): per head the nope rows of k (k_b
 * transposed back) then the v rows.  Needs F32 k_b/v_b (exact).  Written
 * the way old files were: key/value_length are the per-head widths and
 * the *_mla keys are absent. */
static inline int mv_legacy_kv_b(const model_config *c, const char *src, const char *out, err_t *err)
{
    model_edit e;
    if (me_open(&e, src) < 0) {
        *err = e.err;
        me_close(&e);
        return -1;
    }
    uint64_t lora = c->kv_lora_rank, nope = c->qk_nope, vh = c->v_head, nh = c->n_head;
    float *kvb = malloc(lora * nh * (nope + vh) * sizeof(float));
    int rc = kvb ? 0 : -1;
    for (uint32_t il = 0; il < c->n_layer_file && rc == 0; il++) {
        const gguf_tensor *kb = mv_src(&e, "blk.%u.attn_k_b.weight", il);
        const gguf_tensor *vb = mv_src(&e, "blk.%u.attn_v_b.weight", il);
        if (!kb || !vb || kb->type != QT_F32 || vb->type != QT_F32) {
            rc = err_set(err, "legacy variant needs F32 attn_k_b/attn_v_b");
            break;
        }
        const float *k = kb->data, *v = vb->data; /* k: [h][c][i], v: [h][r][c] */
        for (uint64_t h = 0; h < nh; h++) {
            float *head = kvb + h * (nope + vh) * lora;
            for (uint64_t i = 0; i < nope; i++)
                for (uint64_t cc = 0; cc < lora; cc++)
                    head[i * lora + cc] = k[(h * lora + cc) * nope + i];
            memcpy(head + nope * lora, v + h * vh * lora, vh * lora * sizeof(float));
        }
        char name[96];
        uint64_t ne[2] = {lora, nh * (nope + vh)};
        snprintf(name, sizeof name, "blk.%u.attn_kv_b.weight", il);
        rc = me_add_tensor(&e, name, QT_F32, 2, ne, kvb, lora * nh * (nope + vh) * sizeof(float));
        snprintf(name, sizeof name, "blk.%u.attn_k_b.weight", il);
        me_drop_tensor(&e, name);
        snprintf(name, sizeof name, "blk.%u.attn_v_b.weight", il);
        me_drop_tensor(&e, name);
    }
    free(kvb);
    me_drop_key(&e, "deepseek2.attention.key_length_mla");
    me_drop_key(&e, "deepseek2.attention.value_length_mla");
    me_set_u32(&e, "deepseek2.attention.key_length", c->qk_nope + c->qk_rope);
    me_set_u32(&e, "deepseek2.attention.value_length", c->v_head);
    if (rc == 0 && (rc = me_write(&e, out)) < 0)
        *err = e.err;
    me_close(&e);
    return rc;
}

/* ffn_gate_up_exps (n_embd, 2*n_ff, n_expert): each expert's gate rows,
 * then its up rows; works for any type (whole rows are moved). */
static inline int mv_merged_gate_up(const model_config *c, const char *src, const char *out, err_t *err)
{
    model_edit e;
    if (me_open(&e, src) < 0) {
        *err = e.err;
        me_close(&e);
        return -1;
    }
    int rc = 0;
    for (uint32_t il = c->n_dense_lead; il < c->n_layer_file && rc == 0; il++) {
        const gguf_tensor *g = mv_src(&e, "blk.%u.ffn_gate_exps.weight", il);
        const gguf_tensor *u = mv_src(&e, "blk.%u.ffn_up_exps.weight", il);
        if (!g || !u || g->type != u->type || g->size != u->size) {
            rc = err_set(err, "merged variant needs gate/up experts of one type");
            break;
        }
        uint64_t per = g->size / c->n_expert;
        unsigned char *m = malloc(2 * g->size);
        if (!m) {
            rc = -1;
            break;
        }
        for (uint32_t x = 0; x < c->n_expert; x++) {
            memcpy(m + (2 * x) * per, (const unsigned char *)g->data + x * per, per);
            memcpy(m + (2 * x + 1) * per, (const unsigned char *)u->data + x * per, per);
        }
        char name[96];
        uint64_t ne[3] = {g->ne[0], 2 * g->ne[1], g->ne[2]};
        snprintf(name, sizeof name, "blk.%u.ffn_gate_up_exps.weight", il);
        rc = me_add_tensor(&e, name, g->type, 3, ne, m, 2 * g->size);
        free(m);
        snprintf(name, sizeof name, "blk.%u.ffn_gate_exps.weight", il);
        me_drop_tensor(&e, name);
        snprintf(name, sizeof name, "blk.%u.ffn_up_exps.weight", il);
        me_drop_tensor(&e, name);
    }
    if (rc == 0 && (rc = me_write(&e, out)) < 0)
        *err = e.err;
    me_close(&e);
    return rc;
}

/* A NextN block after the last one: a copy of the last block's tensors
 * plus eh_proj, enorm, hnorm and shared_head_norm; block_count + 1 and
 * nextn_predict_layers = 1.  It must load and change nothing. */
static inline int mv_nextn(const model_config *c, const char *src, const char *out, err_t *err)
{
    model_edit e;
    if (me_open(&e, src) < 0) {
        *err = e.err;
        me_close(&e);
        return -1;
    }
    uint32_t last = c->n_layer_file - 1, mtp = c->n_layer_file;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "blk.%u.", last);
    int rc = 0;
    size_t n = gguf_n_tensors(e.src);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const gguf_tensor *t = gguf_tensor_at(e.src, i);
        if (strncmp(t->name, prefix, strlen(prefix)) != 0)
            continue;
        char name[96];
        snprintf(name, sizeof name, "blk.%u.%s", mtp, t->name + strlen(prefix));
        rc = me_add_tensor(&e, name, t->type, t->n_dims, t->ne, t->data, t->size);
    }
    uint64_t H = c->n_embd;
    float *buf = malloc(2 * H * H * sizeof(float));
    if (!buf)
        rc = -1;
    for (uint64_t i = 0; buf && i < 2 * H * H; i++) /* small deterministic values */
        buf[i] = (float)((int)(i * 2654435761u % 2001) - 1000) * 1e-4f;
    char name[96];
    uint64_t ne2[2] = {2 * H, H};
    snprintf(name, sizeof name, "blk.%u.nextn.eh_proj.weight", mtp);
    if (rc == 0)
        rc = me_add_tensor(&e, name, QT_F32, 2, ne2, buf, 2 * H * H * sizeof(float));
    const char *norms[] = {"enorm", "hnorm", "shared_head_norm"};
    for (int k = 0; k < 3 && rc == 0; k++) {
        snprintf(name, sizeof name, "blk.%u.nextn.%s.weight", mtp, norms[k]);
        rc = me_add_tensor(&e, name, QT_F32, 1, &H, buf, H * sizeof(float));
    }
    free(buf);
    me_set_u32(&e, "deepseek2.block_count", c->n_layer_file + 1);
    me_set_u32(&e, "deepseek2.nextn_predict_layers", 1);
    if (rc == 0 && (rc = me_write(&e, out)) < 0)
        *err = e.err;
    me_close(&e);
    return rc;
}

/* The source with some keys removed. */
static inline int mv_without_keys(const char *src, const char *out, const char *const *keys, int n_keys, err_t *err)
{
    model_edit e;
    if (me_open(&e, src) < 0) {
        *err = e.err;
        me_close(&e);
        return -1;
    }
    for (int i = 0; i < n_keys; i++)
        me_drop_key(&e, keys[i]);
    int rc = me_write(&e, out);
    if (rc < 0)
        *err = e.err;
    me_close(&e);
    return rc;
}

#endif
