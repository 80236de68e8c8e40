/* test_model.c: deepseek2 hyperparameters, tensor binding, layout
 * conversion, load errors, and the size census (incl. the full-size
 * GLM-4.7-Flash Q4_0 figures). */
#include <stdlib.h>
#include <unistd.h>

#include "fixtures.h"
#include "model/model.h"
#include "model_variants.h"
#include "testlib.h"

static fixture_model fx[FIXTURE_MAX];
static int n_fx;
static char tmpdir[256];

static void tmp_path(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static uint32_t hp_u32(const fixture_model *f, const char *key, uint32_t def)
{
    json_t *v = json_object_get(json_object_get(f->json, "hparams"), key);
    return v ? (uint32_t)json_integer_value(v) : def;
}

static double hp_real(const fixture_model *f, const char *key, double def)
{
    json_t *v = json_object_get(json_object_get(f->json, "hparams"), key);
    return v ? json_number_value(v) : def;
}

/* ---- hyperparameters ---------------------------------------------------- */

static void test_hparams_match_fixture_metadata(void)
{
    CHECK(n_fx > 0, "no fixture models under %s", FIXTURE_ROOT);
    for (int i = 0; i < n_fx; i++) {
        const fixture_model *f = &fx[i];
        char path[512];
        fixture_path(f, "f32", path, sizeof path);
        model m;
        err_t err;
        if (model_load(&m, path, &err) < 0) {
            CHECK(0, "%s", err.msg);
            continue;
        }
        const model_config *c = &m.cfg;
        uint32_t rope = hp_u32(f, "deepseek2.rope.dimension_count", 0);
        CHECK(strcmp(c->arch, "deepseek2") == 0, "%s: arch %s", f->name, c->arch);
        CHECK(c->n_layer == hp_u32(f, "deepseek2.block_count", 0), "%s: n_layer %u", f->name, c->n_layer);
        CHECK(c->n_embd == hp_u32(f, "deepseek2.embedding_length", 0), "%s: n_embd", f->name);
        CHECK(c->n_head == hp_u32(f, "deepseek2.attention.head_count", 0), "%s: n_head", f->name);
        CHECK(c->q_lora_rank == hp_u32(f, "deepseek2.attention.q_lora_rank", 0), "%s: q_lora", f->name);
        CHECK(c->kv_lora_rank == hp_u32(f, "deepseek2.attention.kv_lora_rank", 0), "%s: kv_lora", f->name);
        CHECK(c->qk_rope == rope, "%s: rope", f->name);
        CHECK(c->qk_nope == hp_u32(f, "deepseek2.attention.key_length_mla", 0) - rope, "%s: nope", f->name);
        CHECK(c->v_head == hp_u32(f, "deepseek2.attention.value_length_mla", 0), "%s: v_head", f->name);
        CHECK(c->n_expert == hp_u32(f, "deepseek2.expert_count", 0), "%s: n_expert", f->name);
        CHECK(c->n_expert_used == hp_u32(f, "deepseek2.expert_used_count", 0), "%s: used", f->name);
        CHECK(c->n_expert_shared == hp_u32(f, "deepseek2.expert_shared_count", 0), "%s: shared", f->name);
        CHECK(c->n_dense_lead == hp_u32(f, "deepseek2.leading_dense_block_count", 0), "%s: dense", f->name);
        CHECK(c->n_ff_dense == hp_u32(f, "deepseek2.feed_forward_length", 0), "%s: ff", f->name);
        CHECK(c->n_ff_exp == hp_u32(f, "deepseek2.expert_feed_forward_length", 0), "%s: ff_exp", f->name);
        CHECK(c->n_vocab == hp_u32(f, "deepseek2.vocab_size", 0), "%s: vocab", f->name);
        CHECK(c->gating == hp_u32(f, "deepseek2.expert_gating_func", 0), "%s: gating %u", f->name, c->gating);
        CHECK_NEAR(c->expert_weights_scale, hp_real(f, "deepseek2.expert_weights_scale", 0), 1e-7);
        CHECK_NEAR(c->rms_eps, hp_real(f, "deepseek2.attention.layer_norm_rms_epsilon", 0), 1e-12);
        CHECK_NEAR(c->rope_base, hp_real(f, "deepseek2.rope.freq_base", 1e4), 1e-3);
        CHECK(c->n_nextn == 0 && c->n_layer_file == c->n_layer, "%s: nextn", f->name);
        CHECK(!c->legacy_kv_b && !c->merged_gate_up, "%s: layout flags", f->name);
        /* the attention scale, YaRN mscale^2 included, as the f64 reference used */
        json_t *ref = fixture_sidecar(f, "logits.ref_f64.f32.json");
        json_t *kq = json_at(ref, "ref_info.kq_scale");
        CHECK(kq != NULL, "%s: no ref_info.kq_scale", f->name);
        if (kq)
            CHECK(fabs(c->kq_scale - json_number_value(kq)) <= 1e-6 * json_number_value(kq),
                  "%s: kq_scale %.9g, reference %.9g", f->name, (double)c->kq_scale, json_number_value(kq));
        json_t *yarn = json_at(ref, "ref_info.yarn");
        CHECK(!yarn || json_is_true(yarn) == c->yarn, "%s: yarn %d", f->name, c->yarn);
        json_decref(ref);
        model_free(&m);
    }
}

/* Every variant binds; each view's type is the one fixture.json lists. */
static void test_views_have_the_file_types(void)
{
    for (int i = 0; i < n_fx; i++) {
        const fixture_model *f = &fx[i];
        for (int v = 0; v < f->n_variants; v++) {
            char path[512], key[128];
            fixture_path(f, f->variants[v], path, sizeof path);
            model m;
            err_t err;
            if (model_load(&m, path, &err) < 0) {
                CHECK(0, "%s", err.msg);
                continue;
            }
            snprintf(key, sizeof key, "%s.%s.gguf", f->name, f->variants[v]);
            json_t *types = json_object_get(json_object_get(json_object_get(f->json, "files"), key), "tensor_types");
            const mtensor *probe[] = {&m.tok_embd, &m.output, &m.layers[0].attn_norm, &m.layers[0].kv_a_mqa,
                                      &m.layers[m.cfg.n_layer - 1].down_exps, &m.layers[m.cfg.n_layer - 1].k_b};
            for (size_t p = 0; p < sizeof probe / sizeof probe[0]; p++) {
                const char *want = NULL, *tname;
                json_t *names;
                json_object_foreach(types, tname, names) {
                    for (size_t k = 0; k < json_array_size(names); k++)
                        if (probe[p]->name && strcmp(json_string_value(json_array_get(names, k)), probe[p]->name) == 0)
                            want = tname;
                }
                CHECK(probe[p]->name && want && strcmp(quant_type_name(probe[p]->type), want) == 0,
                      "%s: %s is %s, fixture says %s", key, probe[p]->name ? probe[p]->name : "?",
                      quant_type_name(probe[p]->type), want ? want : "?");
            }
            model_free(&m);
        }
    }
}

/* ---- census ------------------------------------------------------------- */

static void test_census_counts_every_tensor(void)
{
    for (int i = 0; i < n_fx; i++) {
        const fixture_model *f = &fx[i];
        for (int v = 0; v < f->n_variants; v++) {
            char path[512], key[128];
            fixture_path(f, f->variants[v], path, sizeof path);
            snprintf(key, sizeof key, "%s.%s.gguf", f->name, f->variants[v]);
            model m;
            err_t err;
            if (model_load(&m, path, &err) < 0) {
                CHECK(0, "%s", err.msg);
                continue;
            }
            model_census cs;
            model_census_compute(&m, &cs);
            json_t *types = json_object_get(json_object_get(json_object_get(f->json, "files"), key), "tensor_types");
            const char *tname;
            json_t *names;
            uint32_t n_listed = 0, n_counted = 0;
            uint64_t bytes = 0;
            json_object_foreach(types, tname, names) {
                int t = quant_type_from_name(tname);
                CHECK(t >= 0 && cs.tensors_by_type[t] == json_array_size(names), "%s: %s count %u, fixture %zu",
                      key, tname, t >= 0 ? cs.tensors_by_type[t] : 0, json_array_size(names));
                n_listed += (uint32_t)json_array_size(names);
            }
            for (int t = 0; t < QT_COUNT; t++) {
                n_counted += cs.tensors_by_type[t];
                bytes += cs.bytes_by_type[t];
            }
            CHECK(n_counted == n_listed && n_counted == gguf_n_tensors(m.gguf), "%s: %u tensors", key, n_counted);
            CHECK(bytes == cs.weight_bytes && bytes < gguf_file_size(m.gguf), "%s: bytes %llu", key,
                  (unsigned long long)bytes);
            CHECK(cs.active_bytes < cs.weight_bytes && cs.active_params < cs.total_params, "%s: active", key);
            model_free(&m);
        }
    }
}

/* The full-size GLM-4.7-Flash table as llama-quantize lays out a Q4_0 file
 * (no MTP block): the figures. */
typedef struct {
    gguf_tensor t[900];
    char names[900][64];
    size_t n;
} table;

static void add(table *tb, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1, uint64_t ne2)
{
    gguf_tensor *t = &tb->t[tb->n];
    snprintf(tb->names[tb->n], sizeof tb->names[0], "%s", name);
    uint64_t row;
    quant_row_bytes(type, ne0, &row);
    *t = (gguf_tensor){.name = tb->names[tb->n], .n_dims = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1,
                       .ne = {ne0, ne1, ne2, 1}, .type = type, .size = row * ne1 * ne2};
    tb->n++;
}

static void test_census_full_size_glm47_flash_q4_0(void)
{
    model_config c = {.n_layer = 47, .n_layer_file = 47, .n_embd = 2048, .n_head = 20, .q_lora_rank = 768,
                      .kv_lora_rank = 512, .qk_nope = 192, .qk_rope = 64, .v_head = 256, .n_ff_dense = 10240,
                      .n_ff_exp = 1536, .n_expert = 64, .n_expert_used = 4, .n_expert_shared = 1,
                      .n_dense_lead = 1, .n_vocab = 154880};
    static table tb;
    tb.n = 0;
    const uint32_t Q = QT_Q4_0, F = QT_F32;
    char nm[96];
    add(&tb, "token_embd.weight", Q, 2048, 154880, 1);
    add(&tb, "output_norm.weight", F, 2048, 1, 1);
    add(&tb, "output.weight", QT_Q6_K, 2048, 154880, 1);
    for (uint32_t il = 0; il < c.n_layer; il++) {
#define T(s, type, a, b, d) (snprintf(nm, sizeof nm, "blk.%u." s, il), add(&tb, nm, type, a, b, d))
        T("attn_norm.weight", F, 2048, 1, 1);
        T("attn_q_a_norm.weight", F, 768, 1, 1);
        T("attn_kv_a_norm.weight", F, 512, 1, 1);
        T("ffn_norm.weight", F, 2048, 1, 1);
        T("attn_q_a.weight", Q, 2048, 768, 1);
        T("attn_q_b.weight", Q, 768, 20 * 256, 1);
        T("attn_kv_a_mqa.weight", Q, 2048, 576, 1);
        T("attn_k_b.weight", Q, 192, 512, 20);
        T("attn_v_b.weight", Q, 512, 256, 20);
        T("attn_output.weight", Q, 20 * 256, 2048, 1);
        if (il == 0) {
            T("ffn_gate.weight", Q, 2048, 10240, 1);
            T("ffn_up.weight", Q, 2048, 10240, 1);
            T("ffn_down.weight", Q, 10240, 2048, 1);
        } else {
            T("ffn_gate_inp.weight", F, 2048, 64, 1);
            T("exp_probs_b.bias", F, 64, 1, 1);
            T("ffn_gate_exps.weight", Q, 2048, 1536, 64);
            T("ffn_up_exps.weight", Q, 2048, 1536, 64);
            T("ffn_down_exps.weight", Q, 1536, 2048, 64);
            T("ffn_gate_shexp.weight", Q, 2048, 1536, 1);
            T("ffn_up_shexp.weight", Q, 2048, 1536, 1);
            T("ffn_down_shexp.weight", Q, 1536, 2048, 1);
        }
#undef T
    }
    model_census cs = {0};
    for (size_t i = 0; i < tb.n; i++)
        model_census_add(&cs, &c, &tb.t[i], false);
    CHECK(tb.n == 844, "%zu tensors", tb.n);
    CHECK(cs.tensors_by_type[QT_Q4_0] == 562 && cs.bytes_by_type[QT_Q4_0] == 16661200896ull,
          "Q4_0: %u tensors, %llu bytes", cs.tensors_by_type[QT_Q4_0], (unsigned long long)cs.bytes_by_type[QT_Q4_0]);
    CHECK(cs.tensors_by_type[QT_Q6_K] == 1 && cs.bytes_by_type[QT_Q6_K] == 260198400ull, "Q6_K: %llu bytes",
          (unsigned long long)cs.bytes_by_type[QT_Q6_K]);
    CHECK(cs.tensors_by_type[QT_F32] == 281 && cs.bytes_by_type[QT_F32] == 25147904ull, "F32: %u, %llu bytes",
          cs.tensors_by_type[QT_F32], (unsigned long long)cs.bytes_by_type[QT_F32]);
    CHECK(cs.active_bytes == 2116898432ull, "active bytes %llu, expected 2,116,898,432",
          (unsigned long long)cs.active_bytes);
    /* the same table with an MTP block: nothing of it is read per token */
    uint64_t active = cs.active_bytes;
    c.n_layer_file = 48;
    c.n_nextn = 1;
    cs = (model_census){0};
    snprintf(nm, sizeof nm, "blk.47.ffn_down_exps.weight");
    add(&tb, nm, Q, 1536, 2048, 64);
    for (size_t i = 0; i < tb.n; i++)
        model_census_add(&cs, &c, &tb.t[i], false);
    CHECK(cs.active_bytes == active, "NextN block counted as active: %llu", (unsigned long long)cs.active_bytes);
}

/* ---- layout variants ---------------------------------------------------- */

static const fixture_model *fixture_with(bool q_lora)
{
    for (int i = 0; i < n_fx; i++)
        if ((hp_u32(&fx[i], "deepseek2.attention.q_lora_rank", 0) > 0) == q_lora)
            return &fx[i];
    return NULL;
}

static int load_cfg(const fixture_model *f, const char *variant, model *m)
{
    char path[512];
    err_t err;
    fixture_path(f, variant, path, sizeof path);
    if (model_load(m, path, &err) < 0) {
        CHECK(0, "%s", err.msg);
        return -1;
    }
    return 0;
}

/* Legacy attn_kv_b split at load gives exactly the file's k_b and v_b. */
static void test_legacy_kv_b_splits_into_the_same_k_b_v_b(void)
{
    for (int i = 0; i < n_fx; i++) {
        model orig, leg;
        if (load_cfg(&fx[i], "f32", &orig) < 0)
            continue;
        char src[512], out[512];
        err_t err;
        fixture_path(&fx[i], "f32", src, sizeof src);
        tmp_path("legacy.gguf", out, sizeof out);
        CHECK(mv_legacy_kv_b(&orig.cfg, src, out, &err) == 0, "write: %s", err.msg);
        if (model_load(&leg, out, &err) < 0) {
            CHECK(0, "%s", err.msg);
            model_free(&orig);
            continue;
        }
        CHECK(leg.cfg.legacy_kv_b, "legacy flag");
        CHECK(leg.cfg.qk_nope == orig.cfg.qk_nope && leg.cfg.v_head == orig.cfg.v_head, "head dims from old keys");
        for (uint32_t il = 0; il < orig.cfg.n_layer; il++) {
            const mtensor *a[2] = {&orig.layers[il].k_b, &orig.layers[il].v_b};
            const mtensor *b[2] = {&leg.layers[il].k_b, &leg.layers[il].v_b};
            for (int k = 0; k < 2; k++)
                CHECK(b[k]->type == QT_F32 && memcmp(a[k]->ne, b[k]->ne, sizeof a[k]->ne) == 0 &&
                          b[k]->nb1 == a[k]->nb1 && b[k]->nb2 == a[k]->nb2 &&
                          memcmp(a[k]->data, b[k]->data, a[k]->nbytes) == 0,
                      "%s: block %u %s differs after the split", fx[i].name, il, k ? "v_b" : "k_b");
        }
        /* info-style loading converts nothing */
        model lazy;
        CHECK(model_load_ex(&lazy, out, MODEL_LOAD_NO_CONVERT, &err) == 0 && lazy.layers[0].k_b.data == NULL &&
                  lazy.n_owned == 0,
              "NO_CONVERT still converted");
        model_free(&lazy);
        model_free(&leg);
        model_free(&orig);
    }
}

/* Merged ffn_gate_up_exps: the gate/up views read the original rows. */
static void test_merged_gate_up_views_read_the_same_rows(void)
{
    for (int i = 0; i < n_fx; i++) {
        const fixture_model *f = &fx[i];
        const char *variant = f->variants[f->n_variants - 1]; /* a quantized one */
        model orig, mg;
        if (load_cfg(f, variant, &orig) < 0)
            continue;
        char src[512], out[512];
        err_t err;
        fixture_path(f, variant, src, sizeof src);
        tmp_path("merged.gguf", out, sizeof out);
        CHECK(mv_merged_gate_up(&orig.cfg, src, out, &err) == 0, "write: %s", err.msg);
        if (model_load(&mg, out, &err) < 0) {
            CHECK(0, "%s", err.msg);
            model_free(&orig);
            continue;
        }
        CHECK(mg.cfg.merged_gate_up, "merged flag");
        for (uint32_t il = orig.cfg.n_dense_lead; il < orig.cfg.n_layer; il++) {
            const model_layer *a = &orig.layers[il], *b = &mg.layers[il];
            for (uint32_t e = 0; e < orig.cfg.n_expert; e++) {
                size_t bytes = a->gate_exps.nb1 * a->gate_exps.ne[1];
                CHECK(memcmp(mtensor_matrix(&a->gate_exps, e), mtensor_matrix(&b->gate_exps, e), bytes) == 0 &&
                          memcmp(mtensor_matrix(&a->up_exps, e), mtensor_matrix(&b->up_exps, e), bytes) == 0,
                      "%s %s: block %u expert %u gate/up differ", f->name, variant, il, e);
            }
            CHECK(b->gate_exps.ne[1] == orig.cfg.n_ff_exp && b->up_exps.nb2 == 2 * a->gate_exps.nb2,
                  "view shape");
        }
        model_free(&mg);
        model_free(&orig);
    }
}

static void test_nextn_block_is_loaded_not_run(void)
{
    for (int i = 0; i < n_fx; i++) {
        model orig, nx;
        if (load_cfg(&fx[i], "f32", &orig) < 0)
            continue;
        char src[512], out[512];
        err_t err;
        fixture_path(&fx[i], "f32", src, sizeof src);
        tmp_path("nextn.gguf", out, sizeof out);
        CHECK(mv_nextn(&orig.cfg, src, out, &err) == 0, "write: %s", err.msg);
        if (model_load(&nx, out, &err) < 0) {
            CHECK(0, "%s", err.msg);
            model_free(&orig);
            continue;
        }
        uint32_t L = orig.cfg.n_layer;
        CHECK(nx.cfg.n_layer == L && nx.cfg.n_layer_file == L + 1 && nx.cfg.n_nextn == 1, "block counts %u/%u/%u",
              nx.cfg.n_layer, nx.cfg.n_layer_file, nx.cfg.n_nextn);
        CHECK(nx.layers[L].nextn_eh_proj.data && nx.layers[L].nextn_enorm.data && nx.layers[L].nextn_hnorm.data &&
                  nx.layers[L].attn_norm.data && nx.layers[L].down_exps.data,
              "NextN tensors not bound");
        model_census a, b;
        model_census_compute(&orig, &a);
        model_census_compute(&nx, &b);
        CHECK(a.active_bytes == b.active_bytes && b.weight_bytes > a.weight_bytes, "NextN counted as active");
        model_free(&nx);
        model_free(&orig);
    }
}

/* expert_gating_func absent: llama.cpp's rule (sigmoid only for 47/48
 * blocks with a 154880 vocabulary), so softmax for every fixture. */
static void test_missing_gating_func_follows_llama_cpp_rule(void)
{
    for (int i = 0; i < n_fx; i++) {
        char src[512], out[512];
        err_t err;
        fixture_path(&fx[i], "f32", src, sizeof src);
        tmp_path("nogating.gguf", out, sizeof out);
        const char *keys[] = {"deepseek2.expert_gating_func"};
        CHECK(mv_without_keys(src, out, keys, 1, &err) == 0, "write: %s", err.msg);
        model m;
        if (model_load(&m, out, &err) < 0) {
            CHECK(0, "%s", err.msg);
            continue;
        }
        CHECK(m.cfg.gating == MODEL_GATING_SOFTMAX, "%s: gating %u", fx[i].name, m.cfg.gating);
        model_free(&m);
    }
}

/* q_lora_rank absent == 0: plain attn_q.  Without attn_q in the file that
 * is a missing tensor. */
static void test_missing_q_lora_rank_means_plain_attn_q(void)
{
    const char *keys[] = {"deepseek2.attention.q_lora_rank"};
    char src[512], out[512];
    err_t err;
    model m;
    const fixture_model *lite = fixture_with(false), *glm = fixture_with(true);
    if (lite) {
        fixture_path(lite, "f32", src, sizeof src);
        tmp_path("noqlora.gguf", out, sizeof out);
        CHECK(mv_without_keys(src, out, keys, 1, &err) == 0, "write: %s", err.msg);
        if (model_load(&m, out, &err) == 0) {
            CHECK(m.cfg.q_lora_rank == 0 && m.layers[0].q.data, "q_lora %u", m.cfg.q_lora_rank);
            model_free(&m);
        } else {
            CHECK(0, "%s", err.msg);
        }
    }
    if (glm) {
        fixture_path(glm, "f32", src, sizeof src);
        tmp_path("noqlora2.gguf", out, sizeof out);
        CHECK(mv_without_keys(src, out, keys, 1, &err) == 0, "write: %s", err.msg);
        CHECK(model_load(&m, out, &err) < 0 && strstr(err.msg, "missing tensor 'blk.0.attn_q.weight'") &&
                  strstr(err.msg, out),
              "got: %s", err.msg);
    }
}

/* ---- load errors ---------------------------------------------------------- */

typedef void (*edit_fn)(model_edit *e, const model_config *c);

static void edit_drop_router(model_edit *e, const model_config *c)
{
    char name[64];
    snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.weight", c->n_dense_lead);
    me_drop_tensor(e, name);
}

static void edit_misshape_q(model_edit *e, const model_config *c)
{
    const char *name = c->q_lora_rank ? "blk.0.attn_q_b.weight" : "blk.0.attn_q.weight";
    me_tensor *t = me_find(e, name);
    uint64_t ne[2] = {t->ne[0], t->ne[1] - 2}, row;
    quant_row_bytes(t->type, ne[0], &row);
    me_add_tensor(e, name, t->type, 2, ne, t->data, row * ne[1]);
}

static void edit_wrong_arch(model_edit *e, const model_config *c)
{
    (void)c;
    me_set_str(e, "general.architecture", "llama");
}

static void edit_unsupported_type(model_edit *e, const model_config *c)
{
    /* attn_kv_a_mqa as TQ2_0: a real ggml type we cannot compute with; its
     * rows are n_embd long, so give TQ2_0's block layout (256) a whole row
     * only where n_embd allows it, else NVFP4's (64) */
    me_tensor *t = me_find(e, "blk.0.attn_kv_a_mqa.weight");
    uint32_t type = c->n_embd % 256 == 0 ? QT_TQ2_0 : QT_NVFP4;
    uint64_t row;
    if (!quant_row_bytes(type, t->ne[0], &row))
        return;
    size_t len = row * t->ne[1];
    unsigned char *zero = calloc(1, len);
    me_add_tensor(e, t->name, type, 2, t->ne, zero, len);
    free(zero);
}

static void edit_too_many_used(model_edit *e, const model_config *c)
{
    me_set_u32(e, "deepseek2.expert_used_count", c->n_expert + 1);
}

static void edit_no_kv_lora(model_edit *e, const model_config *c)
{
    (void)c;
    me_drop_key(e, "deepseek2.attention.kv_lora_rank");
}

static void edit_nextn_all(model_edit *e, const model_config *c)
{
    me_set_u32(e, "deepseek2.nextn_predict_layers", c->n_layer_file);
}

static void edit_string_block_count(model_edit *e, const model_config *c)
{
    (void)c;
    me_set_str(e, "deepseek2.block_count", "three");
}

static void edit_drop_kv_b_too(model_edit *e, const model_config *c)
{
    (void)c;
    me_drop_tensor(e, "blk.0.attn_k_b.weight");
}

static void edit_group_routing(model_edit *e, const model_config *c)
{
    (void)c;
    me_set_u32(e, "deepseek2.expert_group_count", 4);
    me_set_u32(e, "deepseek2.expert_group_used_count", 2);
}

static void check_load_error(const char *what, edit_fn fn, const char *pattern)
{
    for (int i = 0; i < n_fx; i++) {
        model orig;
        if (load_cfg(&fx[i], "f32", &orig) < 0)
            continue;
        char src[512], out[512];
        fixture_path(&fx[i], "f32", src, sizeof src);
        tmp_path("broken.gguf", out, sizeof out);
        model_edit e;
        err_t err = {{0}};
        if (me_open(&e, src) < 0) {
            CHECK(0, "open %s: %s", src, e.err.msg);
            me_close(&e);
            model_free(&orig);
            continue;
        }
        fn(&e, &orig.cfg);
        int w = me_write(&e, out);
        CHECK(w == 0, "%s: write: %s", what, e.err.msg);
        me_close(&e);
        model m;
        int rc = model_load(&m, out, &err);
        CHECK(rc < 0, "%s: %s loaded", what, fx[i].name);
        if (rc == 0)
            model_free(&m);
        CHECK(strstr(err.msg, out) == err.msg && strstr(err.msg, pattern) && !strchr(err.msg, '\n'),
              "%s: message '%s' lacks '%s'", what, err.msg, pattern);
        model_free(&orig);
    }
}

static void test_errors_name_the_file_and_the_problem(void)
{
    check_load_error("missing router", edit_drop_router, "missing tensor 'blk.1.ffn_gate_inp.weight'");
    check_load_error("mis-shaped q", edit_misshape_q, "has shape [");
    check_load_error("wrong arch", edit_wrong_arch, "general.architecture is 'llama'");
    check_load_error("unsupported type", edit_unsupported_type, "cannot compute with");
    check_load_error("too many experts used", edit_too_many_used, "expert_used_count");
    check_load_error("no kv_lora_rank", edit_no_kv_lora, "deepseek2.attention.kv_lora_rank");
    check_load_error("all blocks NextN", edit_nextn_all, "nextn_predict_layers");
    check_load_error("string block_count", edit_string_block_count, "deepseek2.block_count");
    check_load_error("no k_b nor kv_b", edit_drop_kv_b_too, "missing tensor 'blk.0.attn_k_b.weight'");
    check_load_error("group routing", edit_group_routing, "expert_group_count");
}

static void test_error_for_missing_file(void)
{
    model m;
    err_t err = {{0}};
    CHECK(model_load(&m, "tests/data/no-such-model.gguf", &err) < 0 &&
              strstr(err.msg, "tests/data/no-such-model.gguf"),
          "got: %s", err.msg);
}

int main(void)
{
    n_fx = fixtures_list(fx, FIXTURE_MAX);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-model-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_hparams_match_fixture_metadata);
    RUN(test_views_have_the_file_types);
    RUN(test_census_counts_every_tensor);
    RUN(test_census_full_size_glm47_flash_q4_0);
    RUN(test_legacy_kv_b_splits_into_the_same_k_b_v_b);
    RUN(test_merged_gate_up_views_read_the_same_rows);
    RUN(test_nextn_block_is_loaded_not_run);
    RUN(test_missing_gating_func_follows_llama_cpp_rule);
    RUN(test_missing_q_lora_rank_means_plain_attn_q);
    RUN(test_errors_name_the_file_and_the_problem);
    RUN(test_error_for_missing_file);
    const char *names[] = {"legacy.gguf", "merged.gguf", "nextn.gguf", "nogating.gguf", "noqlora.gguf",
                           "noqlora2.gguf", "broken.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[512];
        tmp_path(names[i], p, sizeof p);
        unlink(p);
    }
    rmdir(tmpdir);
    fixtures_free(fx, n_fx);
    TESTS_DONE();
}
