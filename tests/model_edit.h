/* model_edit.h: copy a GGUF with edits, for tests that need variants of
 * a fixture model (legacy attn_kv_b, merged ffn_gate_up_exps, an extra
 * NextN block, keys removed, a tensor missing or mis-shaped...).
 *
 *   model_edit e;
 *   me_open(&e, "tiny.gguf");            // every key and tensor, unchanged
 *   me_drop_key(&e, "deepseek2.expert_gating_func");
 *   me_set_u32(&e, "deepseek2.block_count", 4);
 *   me_drop_tensor(&e, "blk.1.ffn_gate_inp.weight");
 *   me_set_token(&e, 42, "\x1b]0;t\x07");   // a vocabulary entry's text
 *   me_add_tensor(&e, "blk.3.nextn.enorm.weight", QT_F32, 1, ne, data, len);
 *   me_write(&e, "out.gguf");
 *   me_close(&e);
 *
 * Keys keep their order (set keys replace in place, new ones come last);
 * tensors keep their order, data stays in the source mapping unless
 * replaced (me_add_tensor copies). */
#ifndef GLM_TESTS_MODEL_EDIT_H
#define GLM_TESTS_MODEL_EDIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"

typedef struct {
    char name[96];
    uint32_t type, n_dims;
    uint64_t ne[4];
    const void *data;
    void *owned;
    bool dropped;
} me_tensor;

typedef struct {
    char key[96];
    gguf_type type; /* UINT32, FLOAT32 or STRING */
    uint32_t u;
    float f;
    char str[64];
} me_key;

typedef struct {
    gguf_ctx *src;
    gguf_writer *w; /* the writer me_write fills */
    me_key set[32];
    int n_set;
    char *dropped_keys[32];
    int n_dropped_keys;
    struct {
        uint64_t id;
        char *text;
    } token_set[8];       /* tokenizer.ggml.tokens entries replaced */
    int n_token_set;
    me_tensor *t;
    size_t n, cap;
    err_t err;
} model_edit;

static inline int me_copy_array(model_edit *e, const char *key)
{
    gguf_arr a;
    if (gguf_get_arr(e->src, key, &a, &e->err) < 0)
        return -1;
    if (a.elem_type == GGUF_TYPE_ARRAY)
        return 0; /* nested arrays: no model key uses them */
    if (a.elem_type != GGUF_TYPE_STRING)
        return gguf_writer_set_arr(e->w, key, a.elem_type, a.data, a.n);
    char **strs = calloc(a.n ? a.n : 1, sizeof *strs);
    int rc = strs ? 0 : -1;
    bool vocab = strcmp(key, "tokenizer.ggml.tokens") == 0;
    for (uint64_t i = 0; i < a.n && rc == 0; i++) {
        gguf_str s;
        rc = gguf_get_arr_str(e->src, &a, i, &s, &e->err);
        for (int k = 0; vocab && rc == 0 && k < e->n_token_set; k++)
            if (e->token_set[k].id == i) {
                s.ptr = e->token_set[k].text;
                s.len = strlen(e->token_set[k].text);
            }
        if (rc == 0 && (strs[i] = malloc(s.len + 1)) != NULL) {
            memcpy(strs[i], s.ptr, s.len);
            strs[i][s.len] = 0;
        } else {
            rc = -1;
        }
    }
    if (rc == 0)
        rc = gguf_writer_set_arr_str(e->w, key, (const char *const *)strs, a.n);
    for (uint64_t i = 0; strs && i < a.n; i++)
        free(strs[i]);
    free(strs);
    return rc;
}

static inline int me_copy_kv(model_edit *e, size_t i)
{
    const char *key = gguf_kv_key(e->src, i);
    uint64_t u;
    int32_t s32;
    float f;
    bool b;
    gguf_str str;
    switch (gguf_kv_type(e->src, i)) {
    case GGUF_TYPE_UINT8: return gguf_get_u64(e->src, key, &u, &e->err) ? -1 : gguf_writer_set_u8(e->w, key, (uint8_t)u);
    case GGUF_TYPE_UINT16: return gguf_get_u64(e->src, key, &u, &e->err) ? -1 : gguf_writer_set_u16(e->w, key, (uint16_t)u);
    case GGUF_TYPE_UINT32: return gguf_get_u64(e->src, key, &u, &e->err) ? -1 : gguf_writer_set_u32(e->w, key, (uint32_t)u);
    case GGUF_TYPE_UINT64: return gguf_get_u64(e->src, key, &u, &e->err) ? -1 : gguf_writer_set_u64(e->w, key, u);
    case GGUF_TYPE_INT8: return gguf_get_i32(e->src, key, &s32, &e->err) ? -1 : gguf_writer_set_i8(e->w, key, (int8_t)s32);
    case GGUF_TYPE_INT16: return gguf_get_i32(e->src, key, &s32, &e->err) ? -1 : gguf_writer_set_i16(e->w, key, (int16_t)s32);
    case GGUF_TYPE_INT32: return gguf_get_i32(e->src, key, &s32, &e->err) ? -1 : gguf_writer_set_i32(e->w, key, s32);
    case GGUF_TYPE_INT64: return gguf_get_i32(e->src, key, &s32, &e->err) ? -1 : gguf_writer_set_i64(e->w, key, s32);
    case GGUF_TYPE_FLOAT32: return gguf_get_f32(e->src, key, &f, &e->err) ? -1 : gguf_writer_set_f32(e->w, key, f);
    case GGUF_TYPE_FLOAT64: return gguf_get_f32(e->src, key, &f, &e->err) ? -1 : gguf_writer_set_f64(e->w, key, f);
    case GGUF_TYPE_BOOL: return gguf_get_bool(e->src, key, &b, &e->err) ? -1 : gguf_writer_set_bool(e->w, key, b);
    case GGUF_TYPE_STRING: {
        if (gguf_get_str(e->src, key, &str, &e->err) < 0)
            return -1;
        char *z = malloc(str.len + 1);
        if (!z)
            return -1;
        memcpy(z, str.ptr, str.len);
        z[str.len] = 0;
        int rc = gguf_writer_set_str(e->w, key, z);
        free(z);
        return rc;
    }
    case GGUF_TYPE_ARRAY: return me_copy_array(e, key);
    default: return -1;
    }
}

static inline me_tensor *me_push(model_edit *e)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 64;
        me_tensor *t = realloc(e->t, cap * sizeof *t);
        if (!t)
            return NULL;
        e->t = t;
        e->cap = cap;
    }
    me_tensor *t = &e->t[e->n++];
    memset(t, 0, sizeof *t);
    return t;
}

static inline void me_close(model_edit *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->t[i].owned);
    free(e->t);
    for (int i = 0; i < e->n_dropped_keys; i++)
        free(e->dropped_keys[i]);
    for (int i = 0; i < e->n_token_set; i++)
        free(e->token_set[i].text);
    gguf_writer_free(e->w);
    gguf_close(e->src);
    memset(e, 0, sizeof *e);
}

static inline int me_open(model_edit *e, const char *path)
{
    memset(e, 0, sizeof *e);
    e->src = gguf_open(path, &e->err);
    if (!e->src)
        return -1;
    for (size_t i = 0; i < gguf_n_tensors(e->src); i++) {
        const gguf_tensor *s = gguf_tensor_at(e->src, i);
        me_tensor *t = me_push(e);
        if (!t)
            return -1;
        snprintf(t->name, sizeof t->name, "%s", s->name);
        t->type = s->type;
        t->n_dims = s->n_dims;
        memcpy(t->ne, s->ne, sizeof t->ne);
        t->data = s->data;
    }
    return 0;
}

static inline void me_drop_key(model_edit *e, const char *key)
{
    if (e->n_dropped_keys < 32)
        e->dropped_keys[e->n_dropped_keys++] = strdup(key);
}

static inline me_key *me_new_key(model_edit *e, const char *key, gguf_type type)
{
    if (e->n_set == 32)
        return NULL;
    me_key *k = &e->set[e->n_set++];
    memset(k, 0, sizeof *k);
    snprintf(k->key, sizeof k->key, "%s", key);
    k->type = type;
    return k;
}

static inline void me_set_u32(model_edit *e, const char *key, uint32_t v)
{
    me_key *k = me_new_key(e, key, GGUF_TYPE_UINT32);
    if (k)
        k->u = v;
}

static inline void me_set_f32(model_edit *e, const char *key, float v)
{
    me_key *k = me_new_key(e, key, GGUF_TYPE_FLOAT32);
    if (k)
        k->f = v;
}

static inline void me_set_str(model_edit *e, const char *key, const char *v)
{
    me_key *k = me_new_key(e, key, GGUF_TYPE_STRING);
    if (k)
        snprintf(k->str, sizeof k->str, "%s", v);
}

/* Replaces the text of vocabulary entry id (tokenizer.ggml.tokens). */
static inline void me_set_token(model_edit *e, uint64_t id, const char *text)
{
    if (e->n_token_set < 8) {
        e->token_set[e->n_token_set].id = id;
        e->token_set[e->n_token_set++].text = strdup(text);
    }
}

static inline me_tensor *me_find(model_edit *e, const char *name)
{
    for (size_t i = 0; i < e->n; i++)
        if (!e->t[i].dropped && strcmp(e->t[i].name, name) == 0)
            return &e->t[i];
    return NULL;
}

static inline const void *me_data(model_edit *e, const char *name)
{
    me_tensor *t = me_find(e, name);
    return t ? t->data : NULL;
}

static inline void me_drop_tensor(model_edit *e, const char *name)
{
    me_tensor *t = me_find(e, name);
    if (t)
        t->dropped = true;
}

/* Adds (or replaces, keeping its place) a tensor; `data` (len bytes) is copied. */
static inline int me_add_tensor(model_edit *e, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                         const void *data, size_t len)
{
    char copy[sizeof ((me_tensor *)0)->name];
    snprintf(copy, sizeof copy, "%s", name); /* name may be t->name itself */
    me_tensor *t = me_find(e, copy);
    if (!t && !(t = me_push(e)))
        return -1;
    free(t->owned);
    t->owned = NULL;
    memcpy(t->name, copy, sizeof copy);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++)
        t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->owned = malloc(len ? len : 1);
    if (!t->owned)
        return -1;
    memcpy(t->owned, data, len);
    t->data = t->owned;
    t->dropped = false;
    return 0;
}

static inline int me_write(model_edit *e, const char *path)
{
    gguf_writer *w = e->w = gguf_writer_new();
    if (!w)
        return -1;
    gguf_writer_set_alignment(w, (uint32_t)gguf_alignment(e->src));
    int rc = 0;
    for (size_t i = 0; i < gguf_n_kv(e->src) && rc == 0; i++) {
        const char *key = gguf_kv_key(e->src, i);
        bool drop = strcmp(key, "general.alignment") == 0;
        for (int k = 0; k < e->n_dropped_keys; k++)
            drop |= strcmp(key, e->dropped_keys[k]) == 0;
        if (!drop)
            rc = me_copy_kv(e, i);
    }
    for (int i = 0; i < e->n_set && rc == 0; i++) {
        const me_key *k = &e->set[i];
        rc = k->type == GGUF_TYPE_UINT32    ? gguf_writer_set_u32(w, k->key, k->u)
             : k->type == GGUF_TYPE_FLOAT32 ? gguf_writer_set_f32(w, k->key, k->f)
                                            : gguf_writer_set_str(w, k->key, k->str);
    }
    const void **datas = calloc(e->n ? e->n : 1, sizeof *datas);
    size_t k = 0;
    for (size_t i = 0; i < e->n && rc == 0 && datas; i++) {
        if (e->t[i].dropped)
            continue;
        rc = gguf_writer_add_tensor(w, e->t[i].name, e->t[i].type, e->t[i].n_dims, e->t[i].ne, &e->err);
        datas[k++] = e->t[i].data;
    }
    if (rc == 0 && datas)
        rc = gguf_writer_write_file(w, path, datas, &e->err);
    free(datas);
    gguf_writer_free(w);
    e->w = NULL;
    return datas ? rc : -1;
}

#endif
