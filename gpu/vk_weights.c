/* vk_weights.c: model tensors -> GPU buffers (see vk_weights.h). */
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "base/threadpool.h"
#include "vk_weights.h"

/* ---- the list of tensors, in upload order ---------------------------------------- */

typedef struct {
    const mtensor *src;
    const mtensor *src2; /* merged matrices: src's rows, then src2's (same type and K) */
    vk_tensor *dst;     /* matrices */
    vk_vec *vec;        /* vectors: f32 */
    uint64_t bytes;     /* device bytes */
} upload_item;

typedef struct {
    upload_item *it;
    uint32_t n, cap;
    bool ok;
} item_list;

static void add(item_list *l, const mtensor *src, vk_tensor *dst, vk_vec *vec)
{
    if (!src->name && !src->data)
        return; /* absent optional tensor */
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 256;
        upload_item *n = realloc(l->it, cap * sizeof *n);
        if (!n) {
            l->ok = false;
            return;
        }
        l->it = n;
        l->cap = cap;
    }
    l->it[l->n++] = (upload_item){src, NULL, dst, vec, 0};
}

/* Whether rows [n1, ..) of a matrix of type/K can be a view: the view's
 * buffer offset must keep the device's storage alignment and its scales
 * array 16-byte alignment (the kernels read whole uvec4s). */
static bool row_view_ok(const vk_ctx *c, uint32_t type, uint64_t K, uint64_t n1)
{
    vk_qlayout q;
    if (!vk_qlayout_of(type, &q))
        return false;
    uint64_t bpr = (K + q.blk - 1) / q.blk;
    return n1 * bpr * q.body % c->align == 0 && n1 * bpr * q.head % 16 == 0;
}

/* q_a / q and kv_a_mqa as one matrix where they can be (vk_weights.h). */
static bool merge_qkv(const vk_ctx *c, const vk_tuning *t, const mtensor *q, const mtensor *kv)
{
    return q->data && kv->data && q->type == kv->type && q->ne[0] == kv->ne[0] && q->ne[2] * q->ne[3] == 1 &&
           kv->ne[2] * kv->ne[3] == 1 && row_view_ok(c, q->type, q->ne[0], q->ne[1]) && t->qkv_merge;
}

/* Layer il's tensors (the NextN block's layer too); `host_exps`: its routed
 * experts stay in host memory (vk_hostmoe.c), not uploaded. */
static void collect_layer(const vk_ctx *vc, const vk_tuning *t, const model *m, uint32_t il, bool host_exps,
                          vk_layer_w *d, item_list *l)
{
    const model_config *c = &m->cfg;
    const model_layer *s = &m->layers[il];
    d->is_moe = s->is_moe;
    add(l, &s->attn_norm, NULL, &d->attn_norm);
    add(l, &s->kv_a_norm, NULL, &d->kv_a_norm);
    const mtensor *qin = c->q_lora_rank > 0 ? &s->q_a : &s->q;
    d->qkv_merged = merge_qkv(vc, t, qin, &s->kv_a_mqa);
    if (d->qkv_merged) {
        add(l, qin, &d->qkv_a, NULL);
        if (l->ok)
            l->it[l->n - 1].src2 = &s->kv_a_mqa;
    } else {
        add(l, qin, c->q_lora_rank > 0 ? &d->q_a : &d->q, NULL);
        add(l, &s->kv_a_mqa, &d->kv_a, NULL);
    }
    if (c->q_lora_rank > 0) {
        add(l, &s->q_a_norm, NULL, &d->q_a_norm);
        add(l, &s->q_b, &d->q_b, NULL);
    }
    add(l, &s->k_b, &d->k_b, NULL);
    add(l, &s->v_b, &d->v_b, NULL);
    add(l, &s->attn_out, &d->attn_out, NULL);
    add(l, &s->ffn_norm, NULL, &d->ffn_norm);
    if (!s->is_moe) {
        add(l, &s->ffn_gate, &d->ffn_gate, NULL);
        add(l, &s->ffn_up, &d->ffn_up, NULL);
        add(l, &s->ffn_down, &d->ffn_down, NULL);
        return;
    }
    add(l, &s->gate_inp, &d->router, NULL);
    d->has_bias = s->exp_probs_b.data != NULL;
    if (d->has_bias)
        add(l, &s->exp_probs_b, NULL, &d->exp_probs_b);
    d->host_exps = host_exps;
    if (!d->host_exps) {
        add(l, &s->gate_exps, &d->gate_exps, NULL);
        add(l, &s->up_exps, &d->up_exps, NULL);
        add(l, &s->down_exps, &d->down_exps, NULL);
    }
    d->has_shared = s->gate_shexp.data != NULL;
    if (d->has_shared) {
        add(l, &s->gate_shexp, &d->gate_sh, NULL);
        add(l, &s->up_shexp, &d->up_sh, NULL);
        add(l, &s->down_shexp, &d->down_sh, NULL);
    }
}

/* The NextN block's own tensors after its layer's (vk_nextn_w). */
static void collect_nextn(const vk_ctx *vc, const vk_tuning *t, const model *m, vk_weights *w, item_list *l)
{
    const model_layer *s = &m->layers[m->cfg.n_layer];
    vk_nextn_w *x = &w->nextn;
    collect_layer(vc, t, m, m->cfg.n_layer, false, &w->layers[m->cfg.n_layer], l);
    add(l, &s->nextn_eh_proj, &x->eh_proj, NULL);
    add(l, &s->nextn_enorm, NULL, &x->enorm);
    add(l, &s->nextn_hnorm, NULL, &x->hnorm);
    x->own_head_norm = s->nextn_shared_head_norm.data != NULL;
    x->own_embed = s->nextn_embed_tokens.data != NULL;
    x->own_head = s->nextn_shared_head_head.data != NULL;
    if (x->own_head_norm)
        add(l, &s->nextn_shared_head_norm, NULL, &x->head_norm);
    if (x->own_embed)
        add(l, &s->nextn_embed_tokens, &x->embed, NULL);
    if (x->own_head)
        add(l, &s->nextn_shared_head_head, &x->head, NULL);
}

static int collect(const vk_ctx *vc, const vk_tuning *t, const model *m, const bool *host_exps, vk_weights *w,
                   item_list *l)
{
    l->ok = true;
    add(l, &m->tok_embd, &w->tok_embd, NULL);
    add(l, &m->output_norm, NULL, &w->output_norm);
    add(l, &m->output, &w->output, NULL);
    for (uint32_t il = 0; il < m->cfg.n_layer; il++)
        collect_layer(vc, t, m, il, host_exps && host_exps[il], &w->layers[il], l);
    if (w->has_nextn)
        collect_nextn(vc, t, m, w, l);
    return l->ok ? 0 : -1;
}

static uint64_t elems(const mtensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static int item_bytes(const vk_ctx *c, upload_item *it, err_t *err)
{
    const mtensor *t = it->src;
    if (it->vec) {
        it->bytes = elems(t) * 4;
        return 0;
    }
    vk_qlayout q;
    if (!vk_qlayout_of(t->type, &q))
        return err_set(err, "tensor '%s' has type %s, which the Vulkan backend cannot read", t->name,
                       quant_type_name(t->type));
    uint64_t n_mat = t->ne[2] * t->ne[3], rows = t->ne[1] + (it->src2 ? it->src2->ne[1] : 0);
    it->bytes = vk_tensor_bytes(t->type, t->ne[0], rows, n_mat, c->align);
    return 0;
}

int vk_weights_plan(const vk_ctx *c, const vk_tuning *t, const model *m, const bool *host_exps, bool nextn,
                    uint64_t *device_bytes, err_t *err)
{
    vk_weights w = {0};
    w.has_nextn = nextn && m->cfg.n_nextn > 0;
    w.layers = calloc(m->cfg.n_layer + w.has_nextn + 1, sizeof *w.layers);
    item_list l = {0};
    int rc = w.layers && collect(c, t, m, host_exps, &w, &l) == 0 ? 0 : err_set(err, "out of host memory");
    uint64_t *sizes = rc ? NULL : malloc((l.n ? l.n : 1) * sizeof *sizes);
    if (!rc && !sizes)
        rc = err_set(err, "out of host memory");
    for (uint32_t i = 0; !rc && i < l.n; i++) {
        rc = item_bytes(c, &l.it[i], err);
        sizes[i] = l.it[i].bytes;
    }
    if (!rc)
        *device_bytes = vk_arena_plan(c, 1ull << 30, sizes, l.n, NULL, NULL, 0);
    free(sizes);
    free(l.it);
    free(w.layers);
    return rc;
}

/* ---- upload ------------------------------------------------------------------------ */

static int upload_vec(vk_uploader *u, const upload_item *it, vk_buf *dst, err_t *err)
{
    const mtensor *t = it->src;
    uint64_t n = elems(t);
    float *p = vk_upload_map(u, dst, 0, n * 4, err);
    if (!p)
        return -1;
    quant_dequant_row(t->type, t->data, p, n);
    return 0;
}

/* Rows [b, e) of one staging batch, repacked on one thread of the pool. */
typedef struct {
    uint32_t type;
    uint64_t K, stride, row_body, row_head;
    const uint8_t *src;
    uint8_t *body, *head;
} repack_job;

static void repack_part(void *ctx, uint64_t b, uint64_t e, int tid)
{
    const repack_job *j = ctx;
    (void)tid;
    vk_repack_rows(j->type, j->K, j->src + b * j->stride, j->stride, e - b, j->body ? j->body + b * j->row_body : NULL,
                   j->head ? j->head + b * j->row_head : NULL);
}

void vk_tensor_shape(const mtensor *t, const mtensor *merged, uint64_t align, vk_tensor *d)
{
    vk_qlayout q;
    vk_qlayout_of(t->type, &q);
    d->type = t->type;
    d->K = (uint32_t)t->ne[0];
    uint64_t n1 = t->ne[1];
    d->N = (uint32_t)(n1 + (merged ? merged->ne[1] : 0));
    d->n_mat = (uint32_t)(t->ne[2] * t->ne[3]);
    d->bpr = (d->K + q.blk - 1) / q.blk;
    d->Kp = d->bpr * q.blk;
    uint64_t blocks = (uint64_t)d->N * d->n_mat * d->bpr;
    d->head_off = (blocks * q.body + align - 1) / align * align;
    d->bytes = vk_tensor_bytes(t->type, t->ne[0], d->N, d->n_mat, align);
    d->src_bytes = n1 * d->n_mat * t->nb1 + (merged ? merged->ne[1] * merged->nb1 : 0);
}

/* Repacks the matrix rows in batches that fit one staging slot; the rows of
 * a batch are split over the pool (the repack is ~2 small copies per quant
 * block: on one thread a 17 GB file took 16 s to load). */
static int upload_matrix(vk_uploader *u, threadpool *tp, const upload_item *it, vk_tensor *d, uint64_t align,
                         err_t *err)
{
    const mtensor *t = it->src;
    vk_qlayout q;
    vk_qlayout_of(t->type, &q);
    vk_tensor_shape(t, it->src2, align, d);
    uint64_t n1 = t->ne[1], rows = (uint64_t)d->N * d->n_mat;
    uint64_t row_body = (uint64_t)d->bpr * q.body, row_head = (uint64_t)d->bpr * q.head;
    uint64_t per = vk_uploader_slot_bytes(u) / 2 / (row_body + row_head + 16);
    if (per == 0)
        return err_set(err, "tensor '%s': a row does not fit the staging ring", t->name);
    for (uint64_t r0 = 0; r0 < rows;) {
        /* stay within one matrix: rows of different matrices are nb2 apart */
        uint64_t e = r0 / d->N, r = r0 % d->N;
        uint64_t n = d->N - r < per ? d->N - r : per;
        /* merged: a batch takes rows of one source only */
        const mtensor *st = it->src2 && r >= n1 ? it->src2 : t;
        uint64_t sr = st == t ? r : r - n1;
        if (st == t && it->src2 && n > n1 - r)
            n = n1 - r;
        const uint8_t *src = (const uint8_t *)st->data + e * st->nb2 + sr * st->nb1;
        /* each mapping is filled before the next one may flush its slot */
        repack_job j = {.type = t->type, .K = d->K, .stride = st->nb1, .row_body = row_body, .row_head = row_head,
                        .src = src};
        j.body = vk_upload_map(u, &d->buf, r0 * row_body, n * row_body, err);
        if (!j.body)
            return -1;
        threadpool_for(tp, n, 0, repack_part, &j);
        if (q.head) {
            j.body = NULL;
            j.head = vk_upload_map(u, &d->buf, d->head_off + r0 * row_head, n * row_head, err);
            if (!j.head)
                return -1;
            threadpool_for(tp, n, 0, repack_part, &j);
        }
        r0 += n;
    }
    return 0;
}

/* Rows [r0, r0 + n) of single-matrix tensor t as a tensor of its own: the
 * same buffer from the first row's body on, the scales array where it was
 * (row_view_ok made both offsets legal). */
static void rows_view(const vk_tensor *t, uint32_t r0, uint32_t n, vk_tensor *v)
{
    vk_qlayout q;
    vk_qlayout_of(t->type, &q);
    uint64_t row_body = (uint64_t)t->bpr * q.body, row_head = (uint64_t)t->bpr * q.head, skip = r0 * row_body;
    *v = *t;
    v->N = n;
    v->buf.off += skip;
    v->buf.size -= skip;
    v->head_off = t->head_off - skip + r0 * row_head;
    v->bytes = v->head_off + (n * row_head + 15) / 16 * 16;
    v->src_bytes = t->src_bytes / t->N * n;
}

int vk_weights_upload(vk_ctx *c, const vk_tuning *t, const model *m, const bool *host_exps, bool nextn, vk_weights *w,
                      void (*progress)(void *, const char *, uint64_t, uint64_t), void *user, err_t *err)
{
    memset(w, 0, sizeof *w);
    vk_arena *arena = &w->arena;
    vk_arena_init(c, arena, VK_MEM_DEVICE, 1ull << 30, "the weights");
    w->n_layer = m->cfg.n_layer;
    w->has_nextn = nextn && m->cfg.n_nextn > 0;
    w->layers = calloc(w->n_layer + w->has_nextn + 1, sizeof *w->layers);
    item_list l = {0};
    if (!w->layers || collect(c, t, m, host_exps, w, &l))
        return err_set(err, "out of host memory");
    int rc = 0;
    uint64_t *sizes = malloc((l.n ? l.n : 1) * sizeof *sizes), total = 0, done = 0;
    if (!sizes)
        rc = err_set(err, "out of host memory");
    for (uint32_t i = 0; !rc && i < l.n; i++) {
        rc = item_bytes(c, &l.it[i], err);
        sizes[i] = l.it[i].bytes;
        total += l.it[i].src->nbytes;
    }
    if (!rc)
        rc = vk_arena_reserve(c, arena, sizes, l.n, err);
    vk_uploader *u = NULL;
    threadpool *tp = NULL;
    if (!rc)
        rc = vk_uploader_new(c, 64ull << 20, &u, err);
    if (!rc && !(tp = threadpool_new(0, err)))
        rc = -1;
    for (uint32_t i = 0; !rc && i < l.n; i++) {
        upload_item *it = &l.it[i];
        vk_buf *dst = it->vec ? &it->vec->b : &it->dst->buf;
        rc = vk_arena_alloc(c, arena, it->bytes, it->src->name, dst, err);
        if (!rc && it->vec) {
            it->vec->off = 0;
            rc = upload_vec(u, it, dst, err);
        } else if (!rc) {
            rc = upload_matrix(u, tp, it, it->dst, c->align, err);
        }
        if (rc)
            err_prefix(err, "uploading '%s'", it->src->name);
        done += it->src->nbytes;
        w->device_bytes += it->bytes;
        w->file_bytes += it->src->nbytes;
        if (progress && (i % 16 == 15 || i + 1 == l.n))
            progress(user, "uploading weights", done, total);
    }
    for (uint32_t il = 0; !rc && il < w->n_layer + w->has_nextn; il++) {
        vk_layer_w *d = &w->layers[il];
        if (!d->qkv_merged)
            continue;
        const model_layer *s = &m->layers[il];
        uint32_t nq = (uint32_t)(m->cfg.q_lora_rank > 0 ? s->q_a.ne[1] : s->q.ne[1]);
        rows_view(&d->qkv_a, 0, nq, m->cfg.q_lora_rank > 0 ? &d->q_a : &d->q);
        rows_view(&d->qkv_a, nq, d->qkv_a.N - nq, &d->kv_a);
    }
    if (!rc)
        rc = vk_uploader_finish(u, err);
    vk_uploader_free(u);
    threadpool_free(tp);
    free(sizes);
    free(l.it);
    return rc;
}

void vk_weights_free(vk_ctx *c, vk_weights *w)
{
    if (c->dev)
        vk_arena_release(c, &w->arena);
    free(w->layers);
    memset(w, 0, sizeof *w);
}
