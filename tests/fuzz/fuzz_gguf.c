/* fuzz_gguf.c: libFuzzer target for the GGUF parser and the model loader.
 *
 * Any input must either be refused with one "fuzz.gguf: at byte N: ..."
 * line, or give a context on which every accessor, the string-array index,
 * the tensor walk and the hash lookup behave (all tensor bytes inside the
 * input); accepted files then go through model_load_gguf and the census.
 * ASan/UBSan (make fuzz builds with them) turn any overrun into a crash;
 * the explicit checks below abort on logic errors the sanitizers cannot see.
 *
 *   make fuzz FUZZ_SECONDS=20     (seeds: tests/fuzz/seeds/gguf/, made by
 *                                  build/rel/tools/mkcorrupt --seeds DIR) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "model/model.h"

#define REQUIRE(cond)                                                              \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "fuzz_gguf: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                               \
        }                                                                          \
    } while (0)

static volatile uint64_t sink;

static void touch(const void *p, uint64_t n)
{
    const uint8_t *b = p;
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += b[i];
    sink += s;
}

static void walk_metadata(const gguf_ctx *ctx)
{
    err_t err;
    char line[200];
    for (size_t i = 0; i < gguf_n_kv(ctx); i++) {
        const char *k = gguf_kv_key(ctx, i);
        REQUIRE(k && gguf_find_key(ctx, k) == (int64_t)i);
        gguf_kv_to_string(ctx, i, line, sizeof line);
        REQUIRE(strlen(line) < sizeof line);
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        float f;
        bool b;
        gguf_str s;
        gguf_arr a;
        int ok = 0;
        ok += gguf_get_u32(ctx, k, &u32, &err) == 0;
        ok += gguf_get_i32(ctx, k, &i32, &err) == 0;
        ok += gguf_get_u64(ctx, k, &u64, &err) == 0;
        ok += gguf_get_f32(ctx, k, &f, &err) == 0;
        ok += gguf_get_bool(ctx, k, &b, &err) == 0;
        if (gguf_get_str(ctx, k, &s, &err) == 0)
            touch(s.ptr, s.len);
        if (gguf_get_arr(ctx, k, &a, &err) == 0) {
            if (a.elem_type == GGUF_TYPE_STRING) {
                for (uint64_t j = 0; j < a.n && j < 4096; j++) {
                    REQUIRE(gguf_get_arr_str(ctx, &a, j, &s, &err) == 0);
                    touch(s.ptr, s.len);
                }
                REQUIRE(gguf_get_arr_str(ctx, &a, a.n, &s, &err) < 0);
            } else if (a.data) {
                static const uint8_t size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
                touch(a.data, a.n * size[a.elem_type]);
            }
        }
        sink += (uint64_t)ok;
    }
}

static void walk_tensors(const gguf_ctx *ctx, size_t size)
{
    const uint8_t *base = gguf_file_data(ctx);
    for (size_t i = 0; i < gguf_n_tensors(ctx); i++) {
        const gguf_tensor *t = gguf_tensor_at(ctx, i);
        REQUIRE(t && gguf_find_tensor(ctx, t->name) == t);
        REQUIRE(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS && t->size > 0);
        const uint8_t *d = t->data;
        REQUIRE(d >= base && (uint64_t)(d - base) + t->size <= size);
        sink += d[0] + d[t->size - 1];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    err_t err;
    gguf_ctx *ctx = gguf_open_memory(data, size, "fuzz.gguf", &err);
    if (!ctx) {
        REQUIRE(strncmp(err.msg, "fuzz.gguf: at byte ", 19) == 0 && !strchr(err.msg, '\n'));
        return 0;
    }
    walk_metadata(ctx);
    walk_tensors(ctx, size);
    model m;
    memset(&m, 0, sizeof m);
    if (model_load_gguf(&m, ctx, &err) == 0) { /* takes the context, also on failure */
        model_census cs;
        model_census_compute(&m, &cs);
        REQUIRE(cs.weight_bytes <= size);
        model_free(&m);
    } else {
        REQUIRE(strncmp(err.msg, "fuzz.gguf", 9) == 0 && !strchr(err.msg, '\n'));
    }
    return 0;
}
