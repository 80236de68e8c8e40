/* mkcorrupt: writes the corrupt-GGUF corpus for tests/t_corrupt.sh, and
 * the fuzzer's seeds.
 *
 *   mkcorrupt OUTDIR
 *   mkcorrupt --seeds DIR     (tests/fuzz/seeds/gguf/: a few small valid files)
 *
 * Makes a valid small model (the tiny-glm preset, Q4_0, through the
 * generator) and from it one file per case, OUTDIR/NAME.gguf, plus
 * OUTDIR/cases.txt with a line "NAME<TAB>PATTERN" per case: PATTERN
 * (grep -E) is what `glmchat info -m` must say about that file.
 *
 * Format-level cases patch bytes of the valid file at offsets found by
 * walking it (the walker trusts the file: it is ours); model-level cases
 * copy it through the GGUF reader and writer with one edit (a tensor left
 * out, a shape or type changed, a key dropped or mistyped).  A few files
 * (nested-array bombs) are built byte by byte. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/gguf.h"
#include "format/quant.h"
#include "model/synth.h"

static const char *outdir;
static FILE *manifest;
static int n_cases;

/* ======================================================================
 * Output
 * ====================================================================== */

static void die(const char *what)
{
    fprintf(stderr, "mkcorrupt: %s\n", what);
    exit(1);
}

static void emit_case(const char *name, const char *pattern, const uint8_t *data, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", outdir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0)
        die("cannot write a case");
    fprintf(manifest, "%s\t%s\n", name, pattern);
    n_cases++;
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot read the base model");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len)
        die("cannot read the base model");
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* ======================================================================
 * Where everything is in the valid file
 * ====================================================================== */

typedef struct {
    char key[128];
    uint32_t type, elem_type;
    uint64_t start, type_pos, val_pos, count_pos, end;
} kv_at;

typedef struct {
    char name[64];
    uint32_t n_dims;
    uint64_t start, name_pos, ndims_pos, ne_pos, type_pos, offset_pos, end;
} tensor_at;

typedef struct {
    const uint8_t *b;
    size_t n;
    kv_at kv[64];
    size_t n_kv;
    tensor_at t[128];
    size_t n_t;
    uint64_t kv_end, table_end, data_start;
} layout;

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static void set32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void set64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static uint64_t skip_value(const uint8_t *b, uint64_t p, uint32_t type)
{
    static const int size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == GGUF_TYPE_STRING)
        return p + 8 + get64(b + p);
    if (type == GGUF_TYPE_ARRAY) {
        uint32_t et = get32(b + p);
        uint64_t n = get64(b + p + 4);
        p += 12;
        for (uint64_t i = 0; i < n; i++)
            p = skip_value(b, p, et);
        return p;
    }
    return p + (uint64_t)size[type];
}

static void walk(layout *L)
{
    const uint8_t *b = L->b;
    uint64_t n_t = get64(b + 8), n_kv = get64(b + 16), p = 24;
    if (n_kv > 64 || n_t > 128)
        die("base model too big for the walker");
    for (uint64_t i = 0; i < n_kv; i++) {
        kv_at *k = &L->kv[L->n_kv++];
        k->start = p;
        uint64_t len = get64(b + p);
        snprintf(k->key, sizeof k->key, "%.*s", (int)len, (const char *)b + p + 8);
        k->type_pos = p + 8 + len;
        k->type = get32(b + k->type_pos);
        k->val_pos = k->type_pos + 4;
        if (k->type == GGUF_TYPE_ARRAY) {
            k->elem_type = get32(b + k->val_pos);
            k->count_pos = k->val_pos + 4;
        }
        p = k->end = skip_value(b, k->val_pos, k->type);
    }
    L->kv_end = p;
    for (uint64_t i = 0; i < n_t; i++) {
        tensor_at *t = &L->t[L->n_t++];
        t->start = p;
        uint64_t len = get64(b + p);
        t->name_pos = p + 8;
        snprintf(t->name, sizeof t->name, "%.*s", (int)len, (const char *)b + p + 8);
        t->ndims_pos = p + 8 + len;
        t->n_dims = get32(b + t->ndims_pos);
        t->ne_pos = t->ndims_pos + 4;
        t->type_pos = t->ne_pos + 8ull * t->n_dims;
        t->offset_pos = t->type_pos + 4;
        p = t->end = t->offset_pos + 8;
    }
    L->table_end = p;
    L->data_start = (p + 31) / 32 * 32;
}

static const kv_at *kv_named(const layout *L, const char *key)
{
    for (size_t i = 0; i < L->n_kv; i++)
        if (strcmp(L->kv[i].key, key) == 0)
            return &L->kv[i];
    die(key);
    return NULL;
}

static const tensor_at *tensor_named(const layout *L, const char *name)
{
    for (size_t i = 0; i < L->n_t; i++)
        if (strcmp(L->t[i].name, name) == 0)
            return &L->t[i];
    die(name);
    return NULL;
}

/* A copy of the valid file to patch. */
static uint8_t *copy_of(const layout *L)
{
    uint8_t *c = malloc(L->n);
    if (!c)
        die("out of memory");
    memcpy(c, L->b, L->n);
    return c;
}

/* ======================================================================
 * Format-level cases
 * ====================================================================== */

static void truncations(const layout *L)
{
    char pat[256];
    const kv_at *tmpl = kv_named(L, "tokenizer.chat_template");
    const tensor_at *t10 = &L->t[10], *last = &L->t[L->n_t - 1];
    emit_case("trunc_empty", "at byte 0: file truncated in the header", L->b, 0);
    emit_case("trunc_in_magic", "at byte 0: file truncated in the header: 3 bytes, not a GGUF file", L->b, 3);
    emit_case("trunc_in_header", "at byte 16: file truncated in the header \\(metadata count\\)", L->b, 20);
    snprintf(pat, sizeof pat, "at byte 16: metadata count %zu is impossible: the 0 bytes left", L->n_kv);
    emit_case("trunc_after_header", pat, L->b, 24);
    emit_case("trunc_in_kv_section",
              "at byte [0-9]+: tokenizer.chat_template: string length 3120 runs past the end of the file", L->b,
              (size_t)tmpl->val_pos + 8 + 100);
    emit_case("trunc_at_tensor_table", "file truncated in tensor #0 name", L->b, (size_t)L->kv_end);
    snprintf(pat, sizeof pat, "at byte %" PRIu64 ": file truncated in %s", t10->ne_pos + 8, t10->name);
    emit_case("trunc_in_tensor_table", pat, L->b, (size_t)t10->ne_pos + 12);
    emit_case("trunc_at_table_end", "tensor 'output.weight': data \\[0, \\+[0-9]+\\) runs past the end of the file",
              L->b, (size_t)L->table_end);
    emit_case("trunc_at_data_start", "tensor 'output.weight': data .* runs past the end of the file \\(data section "
                                     "holds 0 bytes\\)",
              L->b, (size_t)L->data_start);
    emit_case("trunc_in_data", "runs past the end of the file", L->b, (size_t)(L->data_start + (L->n - L->data_start) / 2));
    snprintf(pat, sizeof pat, "tensor '%s': data .* runs past the end of the file", last->name);
    emit_case("trunc_last_byte", pat, L->b, L->n - 1);
}

static void header_cases(const layout *L)
{
    uint8_t *c = copy_of(L);
    memcpy(c, "GGML", 4);
    emit_case("bad_magic", "at byte 0: bad magic 47 47 4d 4c: not a GGUF file", c, L->n);
    memcpy(c, "GGUF", 4);
    set32(c + 4, 1);
    emit_case("version_1", "at byte 4: unsupported GGUF version 1: only versions 2 and 3 are supported", c, L->n);
    set32(c + 4, 4);
    emit_case("version_4", "unsupported GGUF version 4", c, L->n);
    set32(c + 4, 0x03000000);
    emit_case("version_big_endian", "unsupported GGUF version 50331648 \\(a big-endian file\\?\\)", c, L->n);
    set32(c + 4, 3);
    set64(c + 16, 1ull << 60);
    emit_case("kv_count_absurd", "at byte 16: metadata count 1152921504606846976 is impossible", c, L->n);
    set64(c + 16, L->n_kv);
    set64(c + 8, 1ull << 62);
    emit_case("tensor_count_absurd", "at byte 8: tensor count 4611686018427387904 is impossible", c, L->n);
    /* One tensor more than the table holds: entry #52 is read from the data. */
    set64(c + 8, L->n_t + 1);
    char pat[64];
    snprintf(pat, sizeof pat, "tensor #%zu", L->n_t);
    emit_case("tensor_count_one_more", pat, c, L->n);
    free(c);
}

static void kv_cases(const layout *L)
{
    uint8_t *c;
    const kv_at *arch = kv_named(L, "general.architecture"), *type = kv_named(L, "general.type");
    const kv_at *toks = kv_named(L, "tokenizer.ggml.tokens"), *tt = kv_named(L, "tokenizer.ggml.token_type");
    const kv_at *norm = kv_named(L, "deepseek2.expert_weights_norm"), *bos = kv_named(L, "tokenizer.ggml.bos_token_id");

    c = copy_of(L);
    set64(c + arch->start, 1ull << 63);
    emit_case("key_length_absurd", "at byte 24: metadata key #0: string length 9223372036854775808 runs past the end",
              c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + arch->val_pos, 1000000000000ull);
    emit_case("string_length_past_end", "key 'general.architecture'|general.architecture: string length 1000000000000 "
                                        "runs past the end of the file",
              c, L->n);
    free(c);

    c = copy_of(L);
    set32(c + type->type_pos, 99);
    emit_case("kv_type_unknown", "key 'general.type': unknown value type 99", c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + toks->count_pos, 1ull << 61);
    emit_case("array_count_absurd",
              "key 'tokenizer.ggml.tokens': array of 2305843009213693952 string elements cannot fit", c, L->n);
    free(c);

    c = copy_of(L);
    set32(c + tt->val_pos, 77);
    emit_case("array_elem_type_unknown", "key 'tokenizer.ggml.token_type': unknown array element type 77", c, L->n);
    free(c);

    c = copy_of(L);
    c[norm->val_pos] = 7;
    emit_case("bool_not_0_or_1", "key 'deepseek2.expert_weights_norm': bool value is 7 \\(must be 0 or 1\\)", c, L->n);
    free(c);

    c = copy_of(L); /* bos -> eos: two keys of the same length */
    memcpy(c + bos->start + 8 + strlen("tokenizer.ggml."), "eos", 3);
    emit_case("duplicate_key", "duplicate metadata key 'tokenizer.ggml.eos_token_id'", c, L->n);
    free(c);

    c = copy_of(L);
    c[type->start + 8 + 3] = 0;
    emit_case("key_with_nul", "metadata key #1 contains a NUL byte", c, L->n);
    free(c);
}

/* A file of one array-valued key, built by hand: `depth` levels of nesting,
 * each claiming `count` elements. */
static void nested_bomb(const char *name, const char *pattern, int depth, uint64_t count)
{
    uint8_t b[4096];
    size_t n = 0;
    memcpy(b, "GGUF", 4);
    set32(b + 4, 3);
    set64(b + 8, 0);
    set64(b + 16, 1);
    n = 24;
    set64(b + n, 4);
    memcpy(b + n + 8, "bomb", 4);
    set32(b + n + 12, GGUF_TYPE_ARRAY);
    n += 16;
    for (int d = 0; d < depth && n + 12 <= sizeof b; d++) {
        set32(b + n, d + 1 < depth ? GGUF_TYPE_ARRAY : GGUF_TYPE_UINT8);
        set64(b + n + 4, count);
        n += 12;
    }
    emit_case(name, pattern, b, n);
}

/* A valid file whose one key is an array of 2 arrays of 3 u16 (depth 2). */
static void nested_seed(const char *dir)
{
    uint8_t b[256];
    size_t n = 24;
    memcpy(b, "GGUF", 4);
    set32(b + 4, 3);
    set64(b + 8, 0);
    set64(b + 16, 1);
    set64(b + n, 6);
    memcpy(b + n + 8, "nested", 6);
    set32(b + n + 14, GGUF_TYPE_ARRAY);
    n += 18;
    set32(b + n, GGUF_TYPE_ARRAY);
    set64(b + n + 4, 2);
    n += 12;
    for (int i = 0; i < 2; i++) {
        set32(b + n, GGUF_TYPE_UINT16);
        set64(b + n + 4, 3);
        memset(b + n + 12, i + 1, 6);
        n += 18;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/nested_arrays.gguf", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0)
        die("cannot write a seed");
}

static void tensor_cases(const layout *L)
{
    uint8_t *c;
    const tensor_at *out = tensor_named(L, "output.weight"), *emb = tensor_named(L, "token_embd.weight");
    const tensor_at *kb = tensor_named(L, "blk.1.attn_k_b.weight"), *n0 = tensor_named(L, "output_norm.weight");
    const tensor_at *a1 = tensor_named(L, "blk.1.attn_norm.weight");

    c = copy_of(L);
    set32(c + out->ndims_pos, 0);
    emit_case("tensor_ndims_0", "tensor 'output.weight': n_dims is 0 \\(must be 1..4\\)", c, L->n);
    set32(c + out->ndims_pos, 5);
    emit_case("tensor_ndims_5", "tensor 'output.weight': n_dims is 5 \\(must be 1..4\\)", c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + out->ne_pos + 8, 0);
    emit_case("tensor_dim_zero", "tensor 'output.weight': dimension 1 is 0", c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + emb->ne_pos, 1ull << 33);
    set64(c + emb->ne_pos + 8, 1ull << 31);
    emit_case("tensor_dims_product_overflow", "tensor 'token_embd.weight': element count overflows at dimension 1", c,
              L->n);
    free(c);

    c = copy_of(L); /* F32 rows of 2^62 elements: 2^64 bytes */
    set64(c + n0->ne_pos, 1ull << 62);
    emit_case("tensor_bytes_overflow", "tensor 'output_norm.weight': byte size overflows", c, L->n);
    free(c);

    c = copy_of(L);
    set32(c + out->type_pos, 99);
    emit_case("tensor_type_unknown", "tensor 'output.weight': unknown tensor type id 99", c, L->n);
    free(c);

    c = copy_of(L);
    set32(c + kb->type_pos, QT_Q4_K);
    emit_case("tensor_row_not_whole_blocks",
              "tensor 'blk.1.attn_k_b.weight': ne\\[0\\] = 32 is not a multiple of the Q4_K block size 256", c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + out->offset_pos, 1ull << 40);
    emit_case("tensor_offset_past_end", "tensor 'output.weight': data \\[1099511627776, .* runs past the end", c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + emb->offset_pos, get64(L->b + emb->offset_pos) + 1);
    emit_case("tensor_offset_misaligned", "tensor 'token_embd.weight': data offset [0-9]+ is not a multiple of the "
                                          "alignment 32",
              c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + L->t[2].offset_pos, get64(L->b + L->t[1].offset_pos));
    emit_case("tensors_overlap", "overlaps tensor", c, L->n);
    free(c);

    c = copy_of(L); /* blk.1.attn_norm.weight -> blk.0.attn_norm.weight */
    c[a1->name_pos + 4] = '0';
    emit_case("duplicate_tensor_name", "duplicate tensor name 'blk.0.attn_norm.weight'", c, L->n);
    free(c);

    c = copy_of(L);
    set64(c + out->start, 64);
    emit_case("tensor_name_too_long", "tensor #0 name is 64 bytes long \\(at most 63\\)", c, L->n);
    set64(c + out->start, 0);
    emit_case("tensor_name_empty", "tensor #0 has an empty name", c, L->n);
    free(c);
}

/* ======================================================================
 * Copies with one edit (alignment and model-level cases)
 * ====================================================================== */

typedef struct {
    const char *drop_key;
    const char *key_to_string;   /* write this integer key as a string */
    const char *arch;            /* general.architecture value */
    uint32_t u32_key_value;      /* with u32_key: its new value */
    const char *u32_key;
    const char *drop_tensor;
    const char *edit_tensor;     /* new type/shape, random data */
    uint32_t new_type, new_n_dims;
    uint64_t new_ne[4];
    uint32_t alignment;          /* 0: default */
} edit;

static char *cstr(gguf_str s)
{
    char *c = malloc(s.len + 1);
    if (!c)
        die("out of memory");
    memcpy(c, s.ptr, s.len);
    c[s.len] = 0;
    return c;
}

static void copy_kv(const gguf_ctx *src, size_t i, gguf_writer *w, const edit *e)
{
    const char *k = gguf_kv_key(src, i);
    err_t err;
    if (e->drop_key && strcmp(k, e->drop_key) == 0)
        return;
    if (e->arch && strcmp(k, "general.architecture") == 0) {
        gguf_writer_set_str(w, k, e->arch);
        return;
    }
    if (e->key_to_string && strcmp(k, e->key_to_string) == 0) {
        uint64_t v = 0;
        char s[32];
        gguf_get_u64(src, k, &v, &err);
        snprintf(s, sizeof s, "%" PRIu64, v);
        gguf_writer_set_str(w, k, s);
        return;
    }
    if (e->u32_key && strcmp(k, e->u32_key) == 0) {
        gguf_writer_set_u32(w, k, e->u32_key_value);
        return;
    }
    gguf_type t = gguf_kv_type(src, i);
    if (t == GGUF_TYPE_STRING) {
        gguf_str s;
        gguf_get_str(src, k, &s, &err);
        char *c = cstr(s);
        gguf_writer_set_str(w, k, c);
        free(c);
    } else if (t == GGUF_TYPE_ARRAY) {
        gguf_arr a;
        gguf_get_arr(src, k, &a, &err);
        if (a.elem_type == GGUF_TYPE_STRING) {
            char **v = calloc(a.n ? a.n : 1, sizeof *v);
            for (uint64_t j = 0; j < a.n; j++) {
                gguf_str s;
                gguf_get_arr_str(src, &a, j, &s, &err);
                v[j] = cstr(s);
            }
            gguf_writer_set_arr_str(w, k, (const char *const *)v, a.n);
            for (uint64_t j = 0; j < a.n; j++)
                free(v[j]);
            free(v);
        } else if (a.data) {
            gguf_writer_set_arr(w, k, a.elem_type, a.data, a.n);
        }
    } else {
        uint32_t u;
        float f;
        bool b;
        if (t == GGUF_TYPE_FLOAT32 && gguf_get_f32(src, k, &f, &err) == 0)
            gguf_writer_set_f32(w, k, f);
        else if (t == GGUF_TYPE_BOOL && gguf_get_bool(src, k, &b, &err) == 0)
            gguf_writer_set_bool(w, k, b);
        else if (t == GGUF_TYPE_UINT32 && gguf_get_u32(src, k, &u, &err) == 0)
            gguf_writer_set_u32(w, k, u);
        else
            die("base model has a key type the copier does not handle");
    }
}

/* Copies `base` to `path` through the reader and writer, applying e. */
static void edited_copy(const char *base, const char *path, const edit *e)
{
    err_t err;
    gguf_ctx *src = gguf_open(base, &err);
    if (!src)
        die(err.msg);
    gguf_writer *w = gguf_writer_new();
    for (size_t i = 0; i < gguf_n_kv(src); i++)
        copy_kv(src, i, w, e);
    if (e->alignment)
        gguf_writer_set_alignment(w, e->alignment);
    const void **datas = calloc(gguf_n_tensors(src), sizeof *datas);
    size_t n = 0;
    for (size_t i = 0; i < gguf_n_tensors(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        if (e->drop_tensor && strcmp(t->name, e->drop_tensor) == 0)
            continue;
        bool edited = e->edit_tensor && strcmp(t->name, e->edit_tensor) == 0;
        if (gguf_writer_add_tensor(w, t->name, edited ? e->new_type : t->type, edited ? e->new_n_dims : t->n_dims,
                                   edited ? e->new_ne : t->ne, &err) < 0)
            die(err.msg);
        if (edited) { /* random bytes of the new size */
            uint64_t size = gguf_writer_tensor_size(w, n);
            uint8_t *d = malloc(size);
            for (uint64_t j = 0; j < size; j++)
                d[j] = (uint8_t)(j * 7 + 1);
            datas[n] = d;
        } else {
            datas[n] = t->data;
        }
        n++;
    }
    if (gguf_writer_write_file(w, path, datas, &err) < 0)
        die(err.msg);
    for (size_t i = 0; i < n; i++)
        if (e->edit_tensor && strcmp(gguf_tensor_at(src, i)->name, e->edit_tensor) == 0)
            free((void *)datas[i]);
    free(datas);
    gguf_writer_free(w);
    gguf_close(src);
}

static void edited_case(const char *base, const char *name, const char *pattern, const edit *e)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", outdir, name);
    edited_copy(base, path, e);
    fprintf(manifest, "%s\t%s\n", name, pattern);
    n_cases++;
}

static void alignment_cases(const char *base)
{
    /* the base written again with general.alignment = 64, then patched */
    char path[512];
    snprintf(path, sizeof path, "%s/aligned64.tmp", outdir);
    edit e = {.alignment = 64};
    edited_copy(base, path, &e);
    size_t n;
    uint8_t *b = read_all(path, &n);
    remove(path);
    layout L = {.b = b, .n = n};
    walk(&L);
    const kv_at *al = kv_named(&L, "general.alignment");
    set32(b + al->val_pos, 0);
    emit_case("alignment_zero", "general.alignment is 0: must be a non-zero power of two", b, n);
    set32(b + al->val_pos, 48);
    emit_case("alignment_not_power_of_2", "general.alignment is 48: must be a non-zero power of two", b, n);
    set32(b + al->val_pos, 64);
    set32(b + al->type_pos, GGUF_TYPE_INT32);
    emit_case("alignment_wrong_type", "general.alignment has type i32, expected u32", b, n);
    set32(b + al->type_pos, GGUF_TYPE_UINT32);
    set32(b + al->val_pos, 128); /* tensors were placed for 64 */
    emit_case("alignment_larger_than_layout", "is not a multiple of the alignment 128", b, n);
    free(b);
}

static void model_cases(const char *base)
{
    edit e;
    e = (edit){.drop_tensor = "blk.1.attn_k_b.weight"};
    edited_case(base, "model_missing_tensor", "missing tensor 'blk.1.attn_k_b.weight'", &e);
    e = (edit){.edit_tensor = "blk.1.attn_kv_a_mqa.weight", .new_type = QT_Q4_0, .new_n_dims = 2, .new_ne = {256, 96}};
    edited_case(base, "model_wrong_shape", "tensor 'blk.1.attn_kv_a_mqa.weight' has shape .*, expected", &e);
    e = (edit){.edit_tensor = "blk.0.attn_k_b.weight", .new_type = QT_Q4_0, .new_n_dims = 2, .new_ne = {32, 256}};
    edited_case(base, "model_wrong_rank", "tensor 'blk.0.attn_k_b.weight' has shape .*, expected", &e);
    e = (edit){.edit_tensor = "blk.0.attn_norm.weight", .new_type = QT_Q4_0, .new_n_dims = 1, .new_ne = {256}};
    edited_case(base, "model_norm_quantized", "tensor 'blk.0.attn_norm.weight' has type Q4_0, expected F32", &e);
    e = (edit){.edit_tensor = "output.weight", .new_type = QT_TQ2_0, .new_n_dims = 2, .new_ne = {256, 324}};
    edited_case(base, "model_type_not_computable", "tensor 'output.weight' has type TQ2_0", &e);
    e = (edit){.arch = "llama"};
    edited_case(base, "model_wrong_architecture", "general.architecture is 'llama'", &e);
    e = (edit){.drop_key = "general.architecture"};
    edited_case(base, "model_no_architecture", "general.architecture", &e);
    e = (edit){.drop_key = "deepseek2.embedding_length"};
    edited_case(base, "model_missing_hparam", "deepseek2.embedding_length", &e);
    e = (edit){.key_to_string = "deepseek2.block_count"};
    edited_case(base, "model_hparam_wrong_type", "key 'deepseek2.block_count' has type string, expected an integer", &e);
    e = (edit){.u32_key = "deepseek2.expert_used_count", .u32_key_value = 9};
    edited_case(base, "model_more_experts_used_than_exist", "expert_used_count is 9, expected 1..8", &e);
    e = (edit){.u32_key = "deepseek2.block_count", .u32_key_value = 4};
    edited_case(base, "model_block_count_too_big", "missing tensor 'blk.3.", &e);
    e = (edit){.u32_key = "deepseek2.expert_gating_func", .u32_key_value = 3};
    edited_case(base, "model_unknown_gating", "expert_gating_func is 3, expected 1 \\(softmax\\) or 2 \\(sigmoid\\)", &e);
}

/* ======================================================================
 * Fuzzer seeds: small valid files covering the parser and the loader
 * ====================================================================== */

/* A model of the given flavour and type, as small as its types allow:
 * every dimension `dim` (32 for block types, less for float files). */
static void seed_model(const char *dir, const char *name, const char *preset, uint32_t ftype, uint32_t dim,
                       bool variants)
{
    synth_config c;
    err_t err;
    synth_preset(preset, &c, &err);
    c.ftype = ftype;
    c.hidden = c.kv_lora = c.qk_nope = c.v_head = c.ff = c.moe_ff = dim;
    c.q_lora = c.q_lora ? dim : 0;
    c.qk_rope = dim / 4 > 2 ? dim / 4 : 2;
    c.layers = 2;
    c.dense_layers = 1;
    c.heads = 1;
    c.experts = 2;
    c.experts_used = 1;
    c.shared = 1;
    c.vocab = 8;
    c.no_tokenizer = true; /* keeps the seed a few KB */
    c.merged_gate_up = c.legacy_kv_b = c.no_gating_key = variants;
    c.nextn = variants ? 1 : 0;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    synth_options opt = {.n_threads = 1};
    if (synth_write(&c, path, &opt, NULL, &err) < 0)
        die(err.msg);
}

/* Every value type (nested arrays too), version 2, alignment 64 and one small
 * tensor of each computable type. */
static void seed_types(const char *dir)
{
    static const uint32_t types[] = {QT_F32, QT_F16, QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0,
                                     QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    gguf_writer *w = gguf_writer_new();
    err_t err;
    gguf_writer_set_alignment(w, 64);
    gguf_writer_set_u8(w, "a.u8", 1);
    gguf_writer_set_i8(w, "a.i8", -1);
    gguf_writer_set_u16(w, "a.u16", 2);
    gguf_writer_set_i16(w, "a.i16", -2);
    gguf_writer_set_u32(w, "a.u32", 3);
    gguf_writer_set_i32(w, "a.i32", -3);
    gguf_writer_set_f32(w, "a.f32", 0.5f);
    gguf_writer_set_bool(w, "a.bool", true);
    gguf_writer_set_str(w, "a.str", "deepseek2");
    gguf_writer_set_u64(w, "a.u64", 4);
    gguf_writer_set_i64(w, "a.i64", -4);
    gguf_writer_set_f64(w, "a.f64", 0.25);
    const int32_t ints[3] = {1, -2, 3};
    const char *strs[3] = {"x", "", "<|user|>"};
    gguf_writer_set_arr(w, "a.arr_i32", GGUF_TYPE_INT32, ints, 3);
    gguf_writer_set_arr_str(w, "a.arr_str", strs, 3);
    uint8_t *zeros = calloc(1, 256 * 210);
    const void *datas[16];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        uint64_t ne[2] = {quant_traits_of(types[i])->block_elems == 1 ? 4 : quant_traits_of(types[i])->block_elems, 1};
        char name[32];
        snprintf(name, sizeof name, "t.%s", quant_type_name(types[i]));
        if (gguf_writer_add_tensor(w, name, types[i], 2, ne, &err) < 0)
            die(err.msg);
        datas[i] = zeros;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/types_v2_align64.gguf", dir);
    if (gguf_writer_write_file(w, path, datas, &err) < 0)
        die(err.msg);
    gguf_writer_free(w);
    free(zeros);
    /* version 2 (same layout as 3) and a nested array appended by hand */
    size_t n;
    uint8_t *b = read_all(path, &n);
    set32(b + 4, 2);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0)
        die("cannot write a seed");
    free(b);
    nested_seed(dir);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--seeds") == 0) {
        if (mkdir(argv[2], 0755) < 0 && errno != EEXIST)
            die("cannot create the seed directory");
        seed_model(argv[2], "glm_q4_0.gguf", "tiny-glm", SYNTH_FT_Q4_0, 32, false);
        seed_model(argv[2], "glm_variants_f16.gguf", "tiny-glm", SYNTH_FT_F16, 8, true);
        seed_model(argv[2], "lite_yarn_f32.gguf", "tiny-dsv2lite", SYNTH_FT_F32, 8, false);
        seed_types(argv[2]);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: mkcorrupt OUTDIR | mkcorrupt --seeds DIR\n");
        return 2;
    }
    outdir = argv[1];
    if (mkdir(outdir, 0755) < 0 && errno != EEXIST)
        die("cannot create OUTDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/cases.txt", outdir);
    if (!(manifest = fopen(path, "w")))
        die("cannot write cases.txt");

    /* the valid base: the tiny GLM preset in Q4_0 */
    synth_config cfg;
    err_t err;
    synth_preset("tiny-glm", &cfg, &err);
    cfg.ftype = SYNTH_FT_Q4_0;
    char base[512];
    snprintf(base, sizeof base, "%s/valid.gguf", outdir);
    synth_options opt = {.n_threads = 1};
    if (synth_write(&cfg, base, &opt, NULL, &err) < 0)
        die(err.msg);
    layout L = {0};
    L.b = read_all(base, &L.n);
    walk(&L);

    truncations(&L);
    header_cases(&L);
    kv_cases(&L);
    nested_bomb("nested_array_count_bomb", "key 'bomb': array of 1099511627776 array elements cannot fit", 2, 1ull << 40);
    nested_bomb("nested_array_depth_bomb", "key 'bomb': arrays nested more than 4 deep", 200, 1);
    tensor_cases(&L);
    alignment_cases(base);
    model_cases(base);

    free((void *)L.b);
    if (fclose(manifest) != 0)
        die("cannot write cases.txt");
    printf("%d cases in %s\n", n_cases, outdir);
    return 0;
}
