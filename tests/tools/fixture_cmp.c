/* fixture_cmp: checks a GGUF against a fixture's fixture.json, for shell tests.
 *
 *   fixture_cmp MODEL.gguf fixture.json FILE_KEY
 *
 * Every key of "hparams" must be in the GGUF with the same value (integers
 * exactly, floats as the same float32, bools, strings), the GGUF must have no
 * deepseek2.* key the fixture lacks, the tensors must be exactly those of
 * files.FILE_KEY.tensor_types, each with its type, and the file size must be
 * files.FILE_KEY.bytes.  Prints each
 * difference (at most 20) and exits 1 if there is any, else prints
 * "same hparams and tensor types (N keys, M tensors)". */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/quant.h"

static int n_diff;

static void diff(const char *fmt, const char *a, const char *b)
{
    if (n_diff++ < 20) {
        printf(fmt, a, b);
        printf("\n");
    }
}

static void compare_key(const gguf_ctx *ctx, const char *key, const json_t *want)
{
    err_t err;
    char got[64], exp[64];
    if (!gguf_has_key(ctx, key)) {
        diff("missing key %s%s", key, "");
        return;
    }
    if (json_is_string(want)) {
        gguf_str s;
        const char *w = json_string_value(want);
        if (gguf_get_str(ctx, key, &s, &err) < 0 || s.len != strlen(w) || memcmp(s.ptr, w, s.len) != 0)
            diff("key %s differs from \"%s\"", key, w);
    } else if (json_is_boolean(want)) {
        bool b;
        if (gguf_get_bool(ctx, key, &b, &err) < 0 || b != json_is_true(want))
            diff("key %s differs from %s", key, json_is_true(want) ? "true" : "false");
    } else if (json_is_integer(want)) {
        uint64_t v;
        snprintf(exp, sizeof exp, "%lld", (long long)json_integer_value(want));
        if (gguf_get_u64(ctx, key, &v, &err) < 0 || (long long)v != json_integer_value(want)) {
            snprintf(got, sizeof got, "%s", exp);
            diff("key %s differs from %s", key, got);
        }
    } else if (json_is_real(want)) {
        float f;
        snprintf(exp, sizeof exp, "%.9g", json_real_value(want));
        if (gguf_get_f32(ctx, key, &f, &err) < 0 || f != (float)json_real_value(want))
            diff("key %s differs from %s", key, exp);
    } else {
        diff("key %s: unsupported JSON value%s", key, "");
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fixture_cmp MODEL.gguf fixture.json FILE_KEY\n");
        return 2;
    }
    err_t err;
    gguf_ctx *ctx = gguf_open(argv[1], &err);
    if (!ctx) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    json_error_t je;
    json_t *root = json_load_file(argv[2], 0, &je);
    json_t *hp = root ? json_object_get(root, "hparams") : NULL;
    json_t *files = root ? json_object_get(root, "files") : NULL;
    json_t *file = files ? json_object_get(files, argv[3]) : NULL;
    json_t *types = file ? json_object_get(file, "tensor_types") : NULL;
    if (!json_is_object(hp) || !json_is_object(types)) {
        fprintf(stderr, "%s: no hparams or files.%s.tensor_types\n", argv[2], argv[3]);
        return 2;
    }
    const char *key;
    json_t *v;
    json_object_foreach(hp, key, v) compare_key(ctx, key, v);
    for (size_t i = 0; i < gguf_n_kv(ctx); i++) {
        const char *k = gguf_kv_key(ctx, i);
        if (strncmp(k, "deepseek2.", 10) == 0 && !json_object_get(hp, k))
            diff("extra key %s%s", k, "");
    }
    size_t n_listed = 0;
    json_object_foreach(types, key, v)
    {
        int want = quant_type_from_name(key);
        size_t j;
        json_t *name;
        json_array_foreach(v, j, name)
        {
            n_listed++;
            const gguf_tensor *t = gguf_find_tensor(ctx, json_string_value(name));
            if (!t)
                diff("missing tensor %s%s", json_string_value(name), "");
            else if ((int)t->type != want)
                diff("tensor %s is not %s", t->name, key);
        }
    }
    if (n_listed != gguf_n_tensors(ctx)) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%zu", gguf_n_tensors(ctx));
        snprintf(b, sizeof b, "%zu", n_listed);
        diff("%s tensors in the file, %s in the fixture", a, b);
    }
    json_t *bytes = json_object_get(file, "bytes");
    if (!json_is_integer(bytes) || (uint64_t)json_integer_value(bytes) != gguf_file_size(ctx)) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%llu", (unsigned long long)gguf_file_size(ctx));
        snprintf(b, sizeof b, "%lld", json_is_integer(bytes) ? (long long)json_integer_value(bytes) : -1LL);
        diff("file size %s, fixture %s", a, b);
    }
    if (n_diff == 0)
        printf("same size, hparams and tensor types (%zu keys, %zu tensors)\n", json_object_size(hp), n_listed);
    json_decref(root);
    gguf_close(ctx);
    return n_diff ? 1 : 0;
}
