/* test_gguf.c: the GGUF reader and writer.
 *
 * Round trips of every value type and of tensor data through the writer and
 * reader, a v2 file written by hand, the fixture files, accessor errors,
 * alignment, nested arrays, writer misuse, and a short in-process mutation
 * run (random byte edits of a valid file must give an error or a valid
 * context, never a crash: the sanitizer build checks the "never").
 */
#include <stdint.h>
#include <unistd.h>

#include "format/gguf.h"
#include "format/quant.h"
#include "testlib.h"

/* err_t messages as printf arguments (keeps -Wformat-truncation quiet about
 * the harness's 512-byte message buffer; long messages are cut there). */
__attribute__((noinline)) static const char *msg_of(const err_t *e) { return e->msg; }
#define M(e) msg_of(&(e))

static char tmpdir[] = "/tmp/test_gguf.XXXXXX";

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* Deterministic non-zero bytes (xorshift). */
static void fill_random(void *p, size_t n, uint64_t seed)
{
    uint8_t *b = p;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        b[i] = (uint8_t)(s >> 24) | 1;
    }
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* ---- a small byte builder for files written by hand --------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *v, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, v, n);
    b->n += n;
}
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void pad_to(bytes *b, size_t a)
{
    static const uint8_t z[64];
    put(b, z, (a - b->n % a) % a);
}

/* ======================================================================
 * Round trip of every value type and of tensor data
 * ====================================================================== */

static const uint8_t arr_u8[] = {0, 1, 255};
static const int8_t arr_i8[] = {-128, 0, 127};
static const uint16_t arr_u16[] = {0, 65535, 7};
static const int16_t arr_i16[] = {-32768, 32767, -1};
static const uint32_t arr_u32[] = {0, 4000000000u, 3};
static const int32_t arr_i32[] = {INT32_MIN, INT32_MAX, -5};
static const float arr_f32[] = {1.5f, -0.25f, 3e38f};
static const uint8_t arr_bool[] = {1, 0, 1};
static const uint64_t arr_u64[] = {0, UINT64_MAX, 1ull << 40};
static const int64_t arr_i64[] = {INT64_MIN, INT64_MAX, -9};
static const double arr_f64[] = {1e-300, -2.5, 1e300};
static const char *const arr_str[] = {"", "hello", "Ġthe", "<|user|>"};

static void write_all_types(gguf_writer *w)
{
    gguf_writer_set_u8(w, "t.u8", 200);
    gguf_writer_set_i8(w, "t.i8", -100);
    gguf_writer_set_u16(w, "t.u16", 60000);
    gguf_writer_set_i16(w, "t.i16", -30000);
    gguf_writer_set_u32(w, "t.u32", 4000000000u);
    gguf_writer_set_i32(w, "t.i32", -2000000000);
    gguf_writer_set_f32(w, "t.f32", 0.1f);
    gguf_writer_set_bool(w, "t.bool", true);
    gguf_writer_set_str(w, "t.str", "deepseek2");
    gguf_writer_set_u64(w, "t.u64", 1ull << 50);
    gguf_writer_set_i64(w, "t.i64", -(1ll << 50));
    gguf_writer_set_f64(w, "t.f64", 1e-5);
    gguf_writer_set_arr(w, "a.u8", GGUF_TYPE_UINT8, arr_u8, 3);
    gguf_writer_set_arr(w, "a.i8", GGUF_TYPE_INT8, arr_i8, 3);
    gguf_writer_set_arr(w, "a.u16", GGUF_TYPE_UINT16, arr_u16, 3);
    gguf_writer_set_arr(w, "a.i16", GGUF_TYPE_INT16, arr_i16, 3);
    gguf_writer_set_arr(w, "a.u32", GGUF_TYPE_UINT32, arr_u32, 3);
    gguf_writer_set_arr(w, "a.i32", GGUF_TYPE_INT32, arr_i32, 3);
    gguf_writer_set_arr(w, "a.f32", GGUF_TYPE_FLOAT32, arr_f32, 3);
    gguf_writer_set_arr(w, "a.bool", GGUF_TYPE_BOOL, arr_bool, 3);
    gguf_writer_set_arr(w, "a.u64", GGUF_TYPE_UINT64, arr_u64, 3);
    gguf_writer_set_arr(w, "a.i64", GGUF_TYPE_INT64, arr_i64, 3);
    gguf_writer_set_arr(w, "a.f64", GGUF_TYPE_FLOAT64, arr_f64, 3);
    gguf_writer_set_arr_str(w, "a.str", arr_str, 4);
    gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_UINT32, NULL, 0);
}

#define CHECK_ARR(ctx, key, et, ref)                                                                  \
    do {                                                                                              \
        gguf_arr a_;                                                                                  \
        err_t e_;                                                                                     \
        CHECK(gguf_get_arr(ctx, key, &a_, &e_) == 0, "%s: %s", key, M(e_));                           \
        CHECK(a_.elem_type == et && a_.n == 3, "%s: type %d n %llu", key, a_.elem_type,               \
              (unsigned long long)a_.n);                                                              \
        CHECK(a_.data && memcmp(a_.data, ref, sizeof ref) == 0, "%s: elements differ", key);          \
    } while (0)

static void test_roundtrip_all_value_types(void)
{
    gguf_writer *w = gguf_writer_new();
    write_all_types(w);
    err_t err;
    const char *path = tmp_path("types.gguf");
    CHECK(gguf_writer_write_file(w, path, NULL, &err) == 0, "%s", M(err));
    gguf_writer_free(w);

    gguf_ctx *ctx = gguf_open(path, &err);
    CHECK(ctx != NULL, "%s", M(err));
    if (!ctx)
        return;
    CHECK(gguf_version(ctx) == 3, "version %u", gguf_version(ctx));
    CHECK(gguf_n_kv(ctx) == 25, "n_kv %zu", gguf_n_kv(ctx));
    CHECK(gguf_n_tensors(ctx) == 0, "n_tensors");
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f;
    bool b;
    gguf_str s;
    CHECK(gguf_get_u32(ctx, "t.u8", &u32, &err) == 0 && u32 == 200, "u8");
    CHECK(gguf_get_i32(ctx, "t.i8", &i32, &err) == 0 && i32 == -100, "i8");
    CHECK(gguf_get_u32(ctx, "t.u16", &u32, &err) == 0 && u32 == 60000, "u16");
    CHECK(gguf_get_i32(ctx, "t.i16", &i32, &err) == 0 && i32 == -30000, "i16");
    CHECK(gguf_get_u32(ctx, "t.u32", &u32, &err) == 0 && u32 == 4000000000u, "u32");
    CHECK(gguf_get_i32(ctx, "t.i32", &i32, &err) == 0 && i32 == -2000000000, "i32");
    CHECK(gguf_get_f32(ctx, "t.f32", &f, &err) == 0 && f == 0.1f, "f32");
    CHECK(gguf_get_bool(ctx, "t.bool", &b, &err) == 0 && b, "bool");
    CHECK(gguf_get_str(ctx, "t.str", &s, &err) == 0 && s.len == 9 && memcmp(s.ptr, "deepseek2", 9) == 0, "str");
    CHECK(gguf_get_u64(ctx, "t.u64", &u64, &err) == 0 && u64 == 1ull << 50, "u64");
    CHECK(gguf_get_f32(ctx, "t.f64", &f, &err) == 0 && f == 1e-5f, "f64 as f32");
    CHECK(gguf_kv_type(ctx, (size_t)gguf_find_key(ctx, "t.i64")) == GGUF_TYPE_INT64, "i64 type");
    CHECK_ARR(ctx, "a.u8", GGUF_TYPE_UINT8, arr_u8);
    CHECK_ARR(ctx, "a.i8", GGUF_TYPE_INT8, arr_i8);
    CHECK_ARR(ctx, "a.u16", GGUF_TYPE_UINT16, arr_u16);
    CHECK_ARR(ctx, "a.i16", GGUF_TYPE_INT16, arr_i16);
    CHECK_ARR(ctx, "a.u32", GGUF_TYPE_UINT32, arr_u32);
    CHECK_ARR(ctx, "a.i32", GGUF_TYPE_INT32, arr_i32);
    CHECK_ARR(ctx, "a.f32", GGUF_TYPE_FLOAT32, arr_f32);
    CHECK_ARR(ctx, "a.bool", GGUF_TYPE_BOOL, arr_bool);
    CHECK_ARR(ctx, "a.u64", GGUF_TYPE_UINT64, arr_u64);
    CHECK_ARR(ctx, "a.i64", GGUF_TYPE_INT64, arr_i64);
    CHECK_ARR(ctx, "a.f64", GGUF_TYPE_FLOAT64, arr_f64);
    gguf_arr a;
    CHECK(gguf_get_arr(ctx, "a.str", &a, &err) == 0 && a.elem_type == GGUF_TYPE_STRING && a.n == 4, "str arr");
    for (uint64_t i = 0; i < 4; i++) {
        CHECK(gguf_get_arr_str(ctx, &a, i, &s, &err) == 0, "%s", M(err));
        CHECK(s.len == strlen(arr_str[i]) && memcmp(s.ptr, arr_str[i], s.len) == 0, "string %llu",
              (unsigned long long)i);
    }
    CHECK(gguf_get_arr(ctx, "a.empty", &a, &err) == 0 && a.n == 0 && a.elem_type == GGUF_TYPE_UINT32, "empty arr");
    gguf_close(ctx);
}

/* Tensors of several types and shapes: declared order kept, data intact,
 * offsets aligned, lookup by name. */
static void test_roundtrip_tensors(void)
{
    static const struct {
        const char *name;
        uint32_t type, n_dims;
        uint64_t ne[4];
    } spec[] = {
        {"token_embd.weight", QT_Q4_0, 2, {64, 7}},  {"output_norm.weight", QT_F32, 1, {13}},
        {"blk.0.ffn_up_exps.weight", QT_Q4_K, 3, {256, 3, 2}}, {"x.f16", QT_F16, 4, {3, 2, 2, 2}},
        {"x.q6k", QT_Q6_K, 2, {256, 2}},             {"x.bf16", QT_BF16, 1, {5}},
        {"x.q8", QT_Q8_0, 2, {32, 3}},
    };
    enum { N = sizeof spec / sizeof spec[0] };
    gguf_writer *w = gguf_writer_new();
    err_t err;
    void *datas[N];
    for (int i = 0; i < N; i++)
        CHECK(gguf_writer_add_tensor(w, spec[i].name, spec[i].type, spec[i].n_dims, spec[i].ne, &err) == 0, "%s", M(err));
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)gguf_writer_tensor_size(w, (size_t)i);
        datas[i] = malloc(n);
        fill_random(datas[i], n, (uint64_t)i + 1);
    }
    gguf_writer_set_str(w, "general.architecture", "test");
    const char *path = tmp_path("tensors.gguf");
    CHECK(gguf_writer_write_file(w, path, (const void *const *)datas, &err) == 0, "%s", M(err));
    gguf_writer_free(w);

    gguf_ctx *ctx = gguf_open(path, &err);
    CHECK(ctx != NULL, "%s", M(err));
    if (ctx) {
        CHECK(gguf_n_tensors(ctx) == N, "n_tensors %zu", gguf_n_tensors(ctx));
        CHECK(gguf_data_offset(ctx) % 32 == 0, "data offset %llu", (unsigned long long)gguf_data_offset(ctx));
        for (int i = 0; i < N; i++) {
            const gguf_tensor *t = gguf_tensor_at(ctx, (size_t)i);
            CHECK(t && strcmp(t->name, spec[i].name) == 0, "order at %d", i);
            CHECK(gguf_find_tensor(ctx, spec[i].name) == t, "lookup %s", spec[i].name);
            CHECK(t->type == spec[i].type && t->n_dims == spec[i].n_dims, "%s type/dims", t->name);
            for (uint32_t d = 0; d < 4; d++)
                CHECK(t->ne[d] == (d < spec[i].n_dims ? spec[i].ne[d] : 1), "%s ne[%u]", t->name, d);
            CHECK(t->offset % 32 == 0, "%s offset %llu", t->name, (unsigned long long)t->offset);
            CHECK((const uint8_t *)t->data == (const uint8_t *)gguf_file_data(ctx) + gguf_data_offset(ctx) + t->offset,
                  "%s data pointer", t->name);
            CHECK(memcmp(t->data, datas[i], (size_t)t->size) == 0, "%s data differs", t->name);
        }
        uint64_t q4 = 7 * 2 * 18;
        CHECK(gguf_tensor_at(ctx, 0)->size == q4, "Q4_0 size %llu", (unsigned long long)gguf_tensor_at(ctx, 0)->size);
        CHECK(gguf_tensor_at(ctx, 2)->size == 6 * 144, "Q4_K size");
        CHECK(gguf_find_tensor(ctx, "missing.weight") == NULL, "absent tensor");
        gguf_close(ctx);
    }
    for (int i = 0; i < N; i++)
        free(datas[i]);
}

/* Streaming in odd-sized pieces gives the same file as one write per tensor. */
static void test_writer_streams_in_pieces(void)
{
    const uint64_t ne_a[2] = {96, 5}, ne_b[1] = {7};
    err_t err;
    uint8_t a[96 / 32 * 18 * 5], b[28];
    fill_random(a, sizeof a, 11);
    fill_random(b, sizeof b, 12);
    const char *p1 = tmp_path("whole.gguf"), *p2 = tmp_path("pieces.gguf");
    for (int variant = 0; variant < 2; variant++) {
        gguf_writer *w = gguf_writer_new();
        gguf_writer_add_tensor(w, "a", QT_Q4_0, 2, ne_a, &err);
        gguf_writer_add_tensor(w, "b", QT_F32, 1, ne_b, &err);
        CHECK(gguf_writer_begin(w, variant ? p2 : p1, &err) == 0, "%s", M(err));
        if (variant == 0) {
            gguf_writer_write(w, a, sizeof a, &err);
            gguf_writer_write(w, b, sizeof b, &err);
        } else {
            uint8_t all[sizeof a + sizeof b];
            memcpy(all, a, sizeof a);
            memcpy(all + sizeof a, b, sizeof b);
            for (size_t off = 0; off < sizeof all;) {
                size_t k = off % 7 + 1 < sizeof all - off ? off % 7 + 1 : sizeof all - off;
                CHECK(gguf_writer_write(w, all + off, k, &err) == 0, "%s", M(err));
                off += k;
            }
        }
        CHECK(gguf_writer_finish(w, &err) == 0, "%s", M(err));
        gguf_writer_free(w);
    }
    size_t n1, n2;
    uint8_t *f1 = read_file(p1, &n1), *f2 = read_file(p2, &n2);
    CHECK(f1 && f2 && n1 == n2 && memcmp(f1, f2, n1) == 0, "files differ (%zu vs %zu bytes)", n1, n2);
    free(f1);
    free(f2);
}

/* ======================================================================
 * v2, alignment, nested arrays (hand-written files)
 * ====================================================================== */

/* A complete v2 file built byte by byte: 2 keys, one F32 tensor {4, 2}. */
static bytes v2_file(uint32_t version)
{
    bytes b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, version);
    put_u64(&b, 1); /* tensors */
    put_u64(&b, 2); /* kvs */
    put_str(&b, "general.architecture");
    put_u32(&b, GGUF_TYPE_STRING);
    put_str(&b, "llama");
    put_str(&b, "llama.block_count");
    put_u32(&b, GGUF_TYPE_UINT32);
    put_u32(&b, 12);
    put_str(&b, "w");
    put_u32(&b, 2);
    put_u64(&b, 4);
    put_u64(&b, 2);
    put_u32(&b, QT_F32);
    put_u64(&b, 0);
    pad_to(&b, 32);
    for (int i = 0; i < 8; i++) {
        float v = (float)i - 3.5f;
        put(&b, &v, 4);
    }
    return b;
}

static void test_v2_file(void)
{
    bytes b = v2_file(2);
    err_t err;
    gguf_ctx *ctx = gguf_open_memory(b.p, b.n, "v2.gguf", &err);
    CHECK(ctx != NULL, "%s", M(err));
    if (ctx) {
        uint32_t n;
        CHECK(gguf_version(ctx) == 2, "version");
        CHECK(gguf_get_u32(ctx, "llama.block_count", &n, &err) == 0 && n == 12, "block_count");
        const gguf_tensor *t = gguf_find_tensor(ctx, "w");
        CHECK(t && t->ne[0] == 4 && t->ne[1] == 2 && t->size == 32, "tensor w");
        float v;
        if (t) {
            memcpy(&v, (const uint8_t *)t->data + 4 * 7, 4);
            CHECK(v == 3.5f, "last element %g", (double)v);
        }
        gguf_close(ctx);
    }
    free(b.p);
    /* v1 (u32 counts) is refused by name. */
    b = v2_file(1);
    ctx = gguf_open_memory(b.p, b.n, "v1.gguf", &err);
    CHECK(ctx == NULL && strstr(err.msg, "v1.gguf: at byte 4: unsupported GGUF version 1"), "v1: %s", M(err));
    gguf_close(ctx);
    free(b.p);
}

static void test_alignment(void)
{
    err_t err;
    gguf_writer *w = gguf_writer_new();
    CHECK(gguf_writer_set_alignment(w, 0) < 0, "alignment 0 accepted");
    CHECK(gguf_writer_set_alignment(w, 48) < 0, "alignment 48 accepted");
    CHECK(gguf_writer_set_alignment(w, 256) == 0, "alignment 256 refused");
    const uint64_t ne1[1] = {3}, ne2[2] = {32, 1};
    gguf_writer_add_tensor(w, "a", QT_F32, 1, ne1, &err);
    gguf_writer_add_tensor(w, "b", QT_Q8_0, 2, ne2, &err);
    gguf_writer_add_tensor(w, "c", QT_F16, 1, ne1, &err);
    uint8_t da[12], db[34], dc[6];
    fill_random(da, sizeof da, 1);
    fill_random(db, sizeof db, 2);
    fill_random(dc, sizeof dc, 3);
    const void *datas[3] = {da, db, dc};
    const char *path = tmp_path("align.gguf");
    CHECK(gguf_writer_write_file(w, path, datas, &err) == 0, "%s", M(err));
    gguf_writer_free(w);
    gguf_ctx *ctx = gguf_open(path, &err);
    CHECK(ctx != NULL, "%s", M(err));
    if (ctx) {
        uint32_t a;
        CHECK(gguf_alignment(ctx) == 256, "alignment %llu", (unsigned long long)gguf_alignment(ctx));
        CHECK(gguf_get_u32(ctx, "general.alignment", &a, &err) == 0 && a == 256, "general.alignment key");
        CHECK(gguf_data_offset(ctx) % 256 == 0, "data offset");
        for (size_t i = 0; i < 3; i++) {
            const gguf_tensor *t = gguf_tensor_at(ctx, i);
            CHECK(t->offset == 256 * i, "%s offset %llu", t->name, (unsigned long long)t->offset);
            CHECK(memcmp(t->data, datas[i], (size_t)t->size) == 0, "%s data", t->name);
        }
        gguf_close(ctx);
    }
    /* Back to the default removes the key. */
    w = gguf_writer_new();
    gguf_writer_set_alignment(w, 64);
    gguf_writer_set_alignment(w, 32);
    path = tmp_path("align32.gguf");
    CHECK(gguf_writer_write_file(w, path, NULL, &err) == 0, "%s", M(err));
    gguf_writer_free(w);
    ctx = gguf_open(path, &err);
    CHECK(ctx && !gguf_has_key(ctx, "general.alignment") && gguf_alignment(ctx) == 32, "default alignment");
    gguf_close(ctx);

    /* A misaligned offset and a bad alignment value are refused. */
    bytes b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, GGUF_TYPE_UINT32);
    put_u32(&b, 24);
    ctx = gguf_open_memory(b.p, b.n, "a24", &err);
    CHECK(!ctx && strstr(err.msg, "general.alignment is 24: must be a non-zero power of two"), "%s", M(err));
    free(b.p);
}

/* An array of arrays nested `depth` deep, the innermost holding 2 u16. */
static bytes nested_file(int depth)
{
    bytes b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 2);
    put_str(&b, "nested");
    put_u32(&b, GGUF_TYPE_ARRAY);
    for (int d = 1; d < depth; d++) {
        put_u32(&b, GGUF_TYPE_ARRAY);
        put_u64(&b, 1);
    }
    put_u32(&b, GGUF_TYPE_UINT16);
    put_u64(&b, 2);
    put_u32(&b, 0x00070005);
    put_str(&b, "after");
    put_u32(&b, GGUF_TYPE_UINT32);
    put_u32(&b, 42);
    return b;
}

static void test_nested_arrays(void)
{
    err_t err;
    for (int depth = 1; depth <= 5; depth++) {
        bytes b = nested_file(depth);
        gguf_ctx *ctx = gguf_open_memory(b.p, b.n, "nested", &err);
        if (depth <= 4) {
            CHECK(ctx != NULL, "depth %d: %s", depth, M(err));
            gguf_arr a;
            uint32_t v;
            if (ctx) {
                CHECK(gguf_get_arr(ctx, "nested", &a, &err) == 0, "%s", M(err));
                CHECK(a.elem_type == (depth == 1 ? GGUF_TYPE_UINT16 : GGUF_TYPE_ARRAY), "depth %d elem type", depth);
                CHECK(depth == 1 ? a.data != NULL : a.data == NULL, "depth %d data", depth);
                CHECK(gguf_get_u32(ctx, "after", &v, &err) == 0 && v == 42, "key after nested array");
            }
        } else {
            CHECK(!ctx && strstr(err.msg, "arrays nested more than 4 deep"), "depth %d: %s", depth, M(err));
        }
        gguf_close(ctx);
        free(b.p);
    }
}

/* ======================================================================
 * Accessor errors
 * ====================================================================== */

static void test_accessor_errors(void)
{
    gguf_writer *w = gguf_writer_new();
    write_all_types(w);
    err_t err;
    const char *path = tmp_path("acc.gguf");
    CHECK(gguf_writer_write_file(w, path, NULL, &err) == 0, "%s", M(err));
    gguf_writer_free(w);
    gguf_ctx *ctx = gguf_open(path, &err);
    if (!ctx) {
        CHECK(0, "%s", M(err));
        return;
    }
    char want[512];
    uint32_t u32 = 7;
    int32_t i32;
    float f;
    bool b;
    gguf_str s;
    gguf_arr a;

    CHECK(gguf_get_u32(ctx, "deepseek2.block_count", &u32, &err) < 0, "missing key accepted");
    snprintf(want, sizeof want, "%s: key 'deepseek2.block_count' not found", path);
    CHECK(strcmp(err.msg, want) == 0, "'%s'", M(err));

    CHECK(gguf_get_u32(ctx, "t.str", &u32, &err) < 0, "string as u32");
    snprintf(want, sizeof want, "%s: key 't.str' has type string, expected an integer", path);
    CHECK(strcmp(err.msg, want) == 0, "'%s'", M(err));

    CHECK(gguf_get_u32(ctx, "t.i8", &u32, &err) < 0 && strstr(err.msg, "key 't.i8' value -100 does not fit in u32"),
          "negative as u32: '%s'", M(err));
    CHECK(gguf_get_i32(ctx, "t.u32", &i32, &err) < 0 && strstr(err.msg, "value 4000000000 does not fit in i32"),
          "'%s'", M(err));
    CHECK(gguf_get_u32(ctx, "t.u64", &u32, &err) < 0 && strstr(err.msg, "does not fit in u32"), "'%s'", M(err));
    CHECK(gguf_get_f32(ctx, "t.u32", &f, &err) < 0 && strstr(err.msg, "has type u32, expected f32 or f64"), "'%s'", M(err));
    CHECK(gguf_get_bool(ctx, "t.u8", &b, &err) < 0 && strstr(err.msg, "has type u8, expected bool"), "'%s'", M(err));
    CHECK(gguf_get_str(ctx, "a.str", &s, &err) < 0 && strstr(err.msg, "has type array, expected string"), "'%s'", M(err));
    CHECK(gguf_get_arr(ctx, "t.str", &a, &err) < 0 && strstr(err.msg, "has type string, expected array"), "'%s'", M(err));
    CHECK(gguf_get_arr(ctx, "a.u32", &a, &err) == 0, "a.u32");
    CHECK(gguf_get_arr_str(ctx, &a, 0, &s, &err) < 0 && strstr(err.msg, "key 'a.u32' is not an array of strings"),
          "'%s'", M(err));
    CHECK(gguf_get_arr(ctx, "a.str", &a, &err) == 0, "a.str");
    CHECK(gguf_get_arr_str(ctx, &a, 4, &s, &err) < 0 && strstr(err.msg, "index 4 out of range (4 strings)"), "'%s'", M(err));

    /* Optional variants: default when absent, error when mistyped. */
    CHECK(gguf_get_u32_or(ctx, "absent", 17, &u32, &err) == 0 && u32 == 17, "u32_or default");
    CHECK(gguf_get_u32_or(ctx, "t.u16", 17, &u32, &err) == 0 && u32 == 60000, "u32_or present");
    CHECK(gguf_get_u32_or(ctx, "t.str", 17, &u32, &err) < 0, "u32_or wrong type accepted");
    CHECK(gguf_get_f32_or(ctx, "absent", 2.5f, &f, &err) == 0 && f == 2.5f, "f32_or default");
    CHECK(gguf_get_bool_or(ctx, "absent", true, &b, &err) == 0 && b, "bool_or default");
    CHECK(gguf_get_bool_or(ctx, "t.f32", true, &b, &err) < 0, "bool_or wrong type accepted");
    CHECK(gguf_find_key(ctx, "absent") == -1 && !gguf_has_key(ctx, "absent"), "find absent");
    CHECK(gguf_kv_key(ctx, 1000) == NULL, "kv_key out of range");

    /* Listings. */
    char buf[256];
    int64_t k = gguf_find_key(ctx, "t.str");
    CHECK(strcmp(gguf_kv_to_string(ctx, (size_t)k, buf, sizeof buf), "\"deepseek2\"") == 0, "'%s'", buf);
    k = gguf_find_key(ctx, "a.i16");
    CHECK(strcmp(gguf_kv_to_string(ctx, (size_t)k, buf, sizeof buf), "[i16 x 3: -32768, 32767, -1]") == 0, "'%s'",
          buf);
    k = gguf_find_key(ctx, "a.str");
    CHECK(strstr(gguf_kv_to_string(ctx, (size_t)k, buf, sizeof buf), "\"<|user|>\"") != NULL, "'%s'", buf);
    k = gguf_find_key(ctx, "t.bool");
    CHECK(strcmp(gguf_kv_to_string(ctx, (size_t)k, buf, 3), "tr") == 0, "truncated listing '%s'", buf);
    gguf_close(ctx);
}

/* ======================================================================
 * Files from the fixtures (written by another GGUF writer + llama-quantize)
 * ====================================================================== */

static void check_fixture(const char *path, size_t n_tensors, size_t n_kv, uint32_t file_type,
                          const char *tensor, uint32_t tensor_type)
{
    err_t err;
    gguf_ctx *ctx = gguf_open(path, &err);
    CHECK(ctx != NULL, "%s", M(err));
    if (!ctx)
        return;
    gguf_str s;
    uint32_t u;
    gguf_arr a;
    CHECK(gguf_n_tensors(ctx) == n_tensors, "%s: %zu tensors", path, gguf_n_tensors(ctx));
    CHECK(gguf_n_kv(ctx) == n_kv, "%s: %zu keys", path, gguf_n_kv(ctx));
    CHECK(gguf_get_str(ctx, "general.architecture", &s, &err) == 0 && s.len == 9 && !memcmp(s.ptr, "deepseek2", 9),
          "%s: architecture", path);
    CHECK(gguf_get_u32(ctx, "deepseek2.block_count", &u, &err) == 0 && u == 3, "%s: block_count", path);
    CHECK(gguf_get_u32(ctx, "general.file_type", &u, &err) == 0 && u == file_type, "%s: file_type %u", path, u);
    CHECK(gguf_get_arr(ctx, "tokenizer.ggml.tokens", &a, &err) == 0 && a.n == 324, "%s: tokens", path);
    CHECK(gguf_get_arr_str(ctx, &a, 304, &s, &err) == 0 && s.len == 7 && !memcmp(s.ptr, "[gMASK]", 7), "[gMASK]");
    CHECK(gguf_get_arr_str(ctx, &a, 32, &s, &err) == 0 && s.len == 2 && !memcmp(s.ptr, "\xc4\xa0", 2), "byte 32");
    CHECK(gguf_get_arr(ctx, "tokenizer.ggml.token_type", &a, &err) == 0 && a.elem_type == GGUF_TYPE_INT32, "types");
    CHECK(gguf_get_str(ctx, "tokenizer.chat_template", &s, &err) == 0 && s.len == 3120, "%s: template", path);
    const gguf_tensor *t = gguf_find_tensor(ctx, tensor);
    CHECK(t && t->type == tensor_type, "%s: %s type %u", path, tensor, t ? t->type : 999);
    uint64_t sum = 0;
    for (size_t i = 0; i < gguf_n_tensors(ctx); i++)
        sum += gguf_tensor_at(ctx, i)->size;
    CHECK(sum <= gguf_file_size(ctx) - gguf_data_offset(ctx), "%s: tensor bytes exceed data", path);
    gguf_close(ctx);
}

static void test_fixture_files(void)
{
    const char *g = "tests/data/models/tiny-glm-a/tiny-glm-a", *l = "tests/data/models/tiny-lite-a/tiny-lite-a";
    char p[256];
    snprintf(p, sizeof p, "%s.f32.gguf", g);
    check_fixture(p, 52, 45, 0, "blk.1.ffn_gate_exps.weight", QT_F32);
    snprintf(p, sizeof p, "%s.q8_0.gguf", g);
    check_fixture(p, 52, 45, 7, "blk.1.ffn_gate_inp.weight", QT_F32);
    snprintf(p, sizeof p, "%s.q4_0.gguf", g);
    check_fixture(p, 52, 45, 2, "output.weight", QT_Q6_K);
    snprintf(p, sizeof p, "%s.q4_k_m.gguf", g);
    check_fixture(p, 52, 45, 15, "blk.2.ffn_down_exps.weight", QT_Q8_0);
    snprintf(p, sizeof p, "%s.q4_k_m.gguf", l);
    check_fixture(p, 44, 50, 15, "blk.0.attn_q.weight", QT_Q5_0);
    snprintf(p, sizeof p, "%s.q4_0.gguf", l);
    check_fixture(p, 44, 50, 2, "output.weight", QT_Q8_0);

    err_t err;
    snprintf(p, sizeof p, "%s.q4_k_m.gguf", g);
    gguf_ctx *ctx = gguf_open(p, &err);
    if (ctx) {
        const gguf_tensor *t = gguf_find_tensor(ctx, "blk.1.ffn_up_exps.weight");
        CHECK(t && t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 32 && t->ne[2] == 8 && t->size == 8 * 32 * 144,
              "ffn_up_exps shape");
        float yl;
        CHECK(gguf_get_f32(ctx, "deepseek2.expert_weights_scale", &yl, &err) == 0 && fabsf(yl - 1.8f) < 1e-6f,
              "expert_weights_scale");
        gguf_close(ctx);
    }
}

/* ======================================================================
 * Opening errors and writer misuse
 * ====================================================================== */

static void test_open_errors(void)
{
    err_t err;
    CHECK(!gguf_open("/nonexistent/x.gguf", &err) && strstr(err.msg, "/nonexistent/x.gguf: cannot open"), "'%s'", M(err));
    CHECK(!gguf_open(tmpdir, &err) && strstr(err.msg, "is a directory"), "'%s'", M(err));
    const char *empty = tmp_path("empty.gguf");
    FILE *f = fopen(empty, "wb");
    fclose(f);
    CHECK(!gguf_open(empty, &err) && strstr(err.msg, "at byte 0: file truncated in the header"), "'%s'", M(err));
    CHECK(!gguf_open_memory("GGUF\x03\x00\x00\x00", 8, "short", &err) &&
              strstr(err.msg, "short: at byte 8: file truncated in the header (tensor count)"),
          "'%s'", M(err));
    CHECK(!gguf_open_memory("\x7f" "ELF\x02\x01\x01", 8, "elf", &err) &&
              strstr(err.msg, "elf: at byte 0: bad magic 7f 45 4c 46: not a GGUF file"),
          "'%s'", M(err));
    CHECK(!gguf_open_memory("GGUF\x00\x00\x00\x03", 8, "be", &err) && strstr(err.msg, "big-endian"), "'%s'", M(err));
}

static void test_writer_misuse(void)
{
    err_t err;
    gguf_writer *w = gguf_writer_new();
    const uint64_t ne[2] = {33, 2}, ok[2] = {32, 2}, zero[2] = {32, 0};
    CHECK(gguf_writer_add_tensor(w, "bad", QT_Q4_0, 2, ne, &err) < 0 && strstr(err.msg, "not a multiple"), "'%s'", M(err));
    CHECK(gguf_writer_add_tensor(w, "z", QT_F32, 2, zero, &err) < 0, "zero dim accepted");
    CHECK(gguf_writer_add_tensor(w, "u", 99, 2, ok, &err) < 0 && strstr(err.msg, "unknown tensor type id 99"), "'%s'", M(err));
    CHECK(gguf_writer_add_tensor(w, "d", QT_F32, 0, ok, &err) < 0, "0 dims accepted");
    CHECK(gguf_writer_add_tensor(w, "t", QT_Q4_0, 2, ok, &err) == 0, "%s", M(err));
    CHECK(gguf_writer_add_tensor(w, "t", QT_F32, 2, ok, &err) < 0 && strstr(err.msg, "duplicate tensor name 't'"),
          "'%s'", M(err));
    /* A key set twice keeps one entry with the last value. */
    gguf_writer_set_u32(w, "k", 1);
    gguf_writer_set_str(w, "k", "two");
    const char *path = tmp_path("misuse.gguf");
    CHECK(gguf_writer_begin(w, path, &err) == 0, "%s", M(err));
    CHECK(gguf_writer_set_u32(w, "late", 1) < 0, "metadata after begin accepted");
    uint8_t data[2 * 18 + 1] = {0};
    CHECK(gguf_writer_write(w, data, 10, &err) == 0, "%s", M(err));
    CHECK(gguf_writer_finish(w, &err) < 0 && strstr(err.msg, "tensor 't' is incomplete (10 of 36 bytes written)"),
          "'%s'", M(err));
    gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0, "incomplete file left behind");

    w = gguf_writer_new();
    gguf_writer_add_tensor(w, "t", QT_Q4_0, 2, ok, &err);
    gguf_writer_set_u32(w, "k", 1);
    gguf_writer_set_str(w, "k", "two");
    CHECK(gguf_writer_begin(w, path, &err) == 0, "%s", M(err));
    CHECK(gguf_writer_write(w, data, sizeof data, &err) < 0 && strstr(err.msg, "beyond the last declared tensor"),
          "'%s'", M(err));
    gguf_writer_free(w);

    w = gguf_writer_new();
    gguf_writer_set_u32(w, "k", 1);
    gguf_writer_set_str(w, "k", "two");
    CHECK(gguf_writer_write_file(w, path, NULL, &err) == 0, "%s", M(err));
    gguf_writer_free(w);
    gguf_ctx *ctx = gguf_open(path, &err);
    gguf_str s;
    CHECK(ctx && gguf_n_kv(ctx) == 1 && gguf_get_str(ctx, "k", &s, &err) == 0 && s.len == 3, "replaced key");
    gguf_close(ctx);
    w = gguf_writer_new();
    CHECK(gguf_writer_begin(w, "/nonexistent/dir/x.gguf", &err) < 0 &&
              strstr(err.msg, "/nonexistent/dir/x.gguf: cannot create"),
          "'%s'", M(err));
    gguf_writer_free(w);
}

/* ======================================================================
 * Big string arrays, mutations
 * ====================================================================== */

/* 154880 strings (the real vocabulary's size): random access by index. */
static void test_big_string_array(void)
{
    enum { N = 154880 };
    char **strs = malloc(N * sizeof *strs);
    for (int i = 0; i < N; i++) {
        strs[i] = malloc(24);
        snprintf(strs[i], 24, "[PAD%d]", i);
    }
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)strs, N);
    err_t err;
    const char *path = tmp_path("vocab.gguf");
    CHECK(gguf_writer_write_file(w, path, NULL, &err) == 0, "%s", M(err));
    gguf_writer_free(w);
    gguf_ctx *ctx = gguf_open(path, &err);
    CHECK(ctx != NULL, "%s", M(err));
    if (ctx) {
        gguf_arr a;
        gguf_str s;
        CHECK(gguf_get_arr(ctx, "tokenizer.ggml.tokens", &a, &err) == 0 && a.n == N, "n");
        for (int i = N - 1; i >= 0; i -= 997) {
            CHECK(gguf_get_arr_str(ctx, &a, (uint64_t)i, &s, &err) == 0 && s.len == strlen(strs[i]) &&
                      memcmp(s.ptr, strs[i], s.len) == 0,
                  "string %d", i);
        }
        gguf_close(ctx);
    }
    for (int i = 0; i < N; i++)
        free(strs[i]);
    free(strs);
}

/* Random edits of a valid small file: each open either succeeds or fails
 * with one "NAME: at byte N: ..." line; accessors and the tensor walk work on
 * whatever opens.  (The sanitizer build turns any overrun into a failure.) */
static void test_mutations_never_crash(void)
{
    gguf_writer *w = gguf_writer_new();
    write_all_types(w);
    err_t err;
    const uint64_t ne[2] = {64, 3}, ne1[1] = {5};
    gguf_writer_add_tensor(w, "a.weight", QT_Q4_0, 2, ne, &err);
    gguf_writer_add_tensor(w, "b.weight", QT_F32, 1, ne1, &err);
    uint8_t da[2 * 3 * 18], db[20];
    fill_random(da, sizeof da, 5);
    fill_random(db, sizeof db, 6);
    const void *datas[2] = {da, db};
    const char *path = tmp_path("mut.gguf");
    CHECK(gguf_writer_write_file(w, path, datas, &err) == 0, "%s", M(err));
    gguf_writer_free(w);
    size_t n;
    uint8_t *orig = read_file(path, &n);
    uint8_t *buf = malloc(n);
    uint64_t s = 88172645463325252ull;
    int opened = 0, failed = 0, bad_msgs = 0;
    for (int iter = 0; iter < 4000; iter++) {
        memcpy(buf, orig, n);
        int edits = 1 + iter % 4;
        size_t len = n;
        for (int e = 0; e < edits; e++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            size_t at = (size_t)(s % n);
            uint8_t v = (uint8_t)(s >> 40);
            if (e == 0 && iter % 5 == 0)
                v = (uint8_t)(v | 0x80); /* huge lengths/counts */
            buf[at] = v;
            if (iter % 11 == 0)
                len = at; /* truncation */
        }
        gguf_ctx *ctx = gguf_open_memory(buf, len, "mut", &err);
        if (!ctx) {
            failed++;
            if (strncmp(err.msg, "mut: at byte ", 13) != 0)
                bad_msgs++;
            continue;
        }
        opened++;
        char line[128];
        for (size_t i = 0; i < gguf_n_kv(ctx); i++)
            gguf_kv_to_string(ctx, i, line, sizeof line);
        uint64_t sum = 0;
        for (size_t i = 0; i < gguf_n_tensors(ctx); i++) {
            const gguf_tensor *t = gguf_tensor_at(ctx, i);
            CHECK(gguf_find_tensor(ctx, t->name) == t, "lookup");
            const uint8_t *p = t->data;
            sum += p[0] + p[t->size - 1];
        }
        (void)sum;
        gguf_close(ctx);
    }
    CHECK(opened > 100 && failed > 1000, "opened %d failed %d: mutations not exercising both paths", opened, failed);
    CHECK(bad_msgs == 0, "%d errors without the 'NAME: at byte N:' form", bad_msgs);
    free(buf);
    free(orig);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_roundtrip_all_value_types);
    RUN(test_roundtrip_tensors);
    RUN(test_writer_streams_in_pieces);
    RUN(test_v2_file);
    RUN(test_alignment);
    RUN(test_nested_arrays);
    RUN(test_accessor_errors);
    RUN(test_fixture_files);
    RUN(test_open_errors);
    RUN(test_writer_misuse);
    RUN(test_big_string_array);
    RUN(test_mutations_never_crash);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    TESTS_DONE();
}
