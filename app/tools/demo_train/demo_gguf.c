/* demo_gguf.c: writes the trained demo model's GGUF with the project's writer.
 *
 *   demo_gguf MANIFEST.json TENSORS.f32 OUT.gguf
 *
 * export.py (beside this file) dumps every tensor as raw little-endian f32
 * into TENSORS.f32 and describes the file in MANIFEST.json:
 *
 *   {"metadata": [[key, type, value], ...],      in file order; type is one of
 *                                                 str, u32, f32, bool, arr_str, arr_i32
 *    "tensors": [{"name", "ne": [..], "type": "F32"|"F16"|"Q8_0", "offset": bytes}, ...]}
 *
 * and this tool converts each tensor to its type (core/quant.c's
 * quantizers: the same rounding glmchat's own writers use) and writes the
 * file through core/gguf_write.c.  Every value is checked; a bad manifest
 * gets one line naming the entry and a non-zero exit, and no partial file
 * is left (gguf_writer removes it). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"

static int fail(const char *fmt, const char *what)
{
    fprintf(stderr, "demo_gguf: ");
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return 1;
}

/* One metadata entry [key, type, value] into the writer; 0 or -1. */
static int set_key(gguf_writer *w, const json_t *e)
{
    const char *key = json_string_value(json_array_get(e, 0));
    const char *type = json_string_value(json_array_get(e, 1));
    const json_t *v = json_array_get(e, 2);
    if (!key || !type || !v)
        return -1;
    if (!strcmp(type, "str") && json_is_string(v))
        return gguf_writer_set_str(w, key, json_string_value(v));
    if (!strcmp(type, "u32") && json_is_integer(v) && json_integer_value(v) >= 0 &&
        json_integer_value(v) <= 0xffffffffll)
        return gguf_writer_set_u32(w, key, (uint32_t)json_integer_value(v));
    if (!strcmp(type, "f32") && json_is_number(v))
        return gguf_writer_set_f32(w, key, (float)json_number_value(v));
    if (!strcmp(type, "bool") && json_is_boolean(v))
        return gguf_writer_set_bool(w, key, json_is_true(v));
    if (!strcmp(type, "arr_str") && json_is_array(v)) {
        size_t n = json_array_size(v);
        const char **s = malloc((n ? n : 1) * sizeof *s);
        if (!s)
            return -1;
        int rc = 0;
        for (size_t i = 0; i < n && !rc; i++)
            rc = (s[i] = json_string_value(json_array_get(v, i))) ? 0 : -1;
        if (!rc)
            rc = gguf_writer_set_arr_str(w, key, s, n);
        free(s);
        return rc;
    }
    if (!strcmp(type, "arr_i32") && json_is_array(v)) {
        size_t n = json_array_size(v);
        int32_t *a = malloc((n ? n : 1) * sizeof *a);
        if (!a)
            return -1;
        int rc = 0;
        for (size_t i = 0; i < n && !rc; i++) {
            const json_t *x = json_array_get(v, i);
            rc = json_is_integer(x) ? 0 : -1;
            a[i] = (int32_t)json_integer_value(x);
        }
        if (!rc)
            rc = gguf_writer_set_arr(w, key, GGUF_TYPE_INT32, a, n);
        free(a);
        return rc;
    }
    return -1;
}

typedef struct {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t n;      /* elements */
    uint64_t offset; /* bytes into the f32 dump */
} tensor_desc;

static int read_tensor_desc(const json_t *t, tensor_desc *d)
{
    const json_t *ne = json_object_get(t, "ne");
    const char *type = json_string_value(json_object_get(t, "type"));
    const json_t *off = json_object_get(t, "offset");
    d->name = json_string_value(json_object_get(t, "name"));
    if (!d->name || !type || !json_is_array(ne) || !json_is_integer(off) || json_integer_value(off) < 0)
        return -1;
    int qt = quant_type_from_name(type);
    if (qt < 0)
        return -1;
    d->type = (uint32_t)qt;
    d->n_dims = (uint32_t)json_array_size(ne);
    if (d->n_dims < 1 || d->n_dims > GGUF_MAX_DIMS)
        return -1;
    d->n = 1;
    for (uint32_t i = 0; i < GGUF_MAX_DIMS; i++) {
        const json_t *x = json_array_get(ne, i);
        d->ne[i] = i < d->n_dims ? (uint64_t)json_integer_value(x) : 1;
        if (i < d->n_dims && (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > (1 << 24)))
            return -1;
        d->n *= d->ne[i];
    }
    d->offset = (uint64_t)json_integer_value(off);
    return 0;
}

/* Converts and writes one tensor, row by row. */
static int write_tensor(gguf_writer *w, const tensor_desc *d, const float *src, err_t *err)
{
    uint64_t row_bytes;
    if (!quant_row_bytes(d->type, d->ne[0], &row_bytes))
        return err_set(err, "tensor '%s': a row of %llu is not a whole number of %s blocks", d->name,
                       (unsigned long long)d->ne[0], quant_type_name(d->type));
    void *row = malloc(row_bytes);
    if (!row)
        return err_set(err, "out of memory");
    int rc = 0;
    for (uint64_t r = 0; r < d->n / d->ne[0] && !rc; r++) {
        if (quant_quantize_row(d->type, src + r * d->ne[0], row, d->ne[0]) != row_bytes) {
            rc = err_set(err, "tensor '%s': no quantizer for %s", d->name, quant_type_name(d->type));
            break;
        }
        rc = gguf_writer_write(w, row, row_bytes, err);
    }
    free(row);
    return rc;
}

static long file_size(FILE *f)
{
    if (fseek(f, 0, SEEK_END) != 0)
        return -1;
    long n = ftell(f);
    rewind(f);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: demo_gguf MANIFEST.json TENSORS.f32 OUT.gguf\n");
        return 2;
    }
    json_error_t jerr;
    json_t *man = json_load_file(argv[1], 0, &jerr);
    if (!man)
        return fail("%s", jerr.text);
    FILE *f = fopen(argv[2], "rb");
    if (!f)
        return fail("cannot open %s", argv[2]);
    long size = file_size(f);
    float *data = size > 0 ? malloc((size_t)size) : NULL;
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        return fail("cannot read %s", argv[2]);
    }
    fclose(f);

    gguf_writer *w = gguf_writer_new();
    const json_t *meta = json_object_get(man, "metadata");
    const json_t *tens = json_object_get(man, "tensors");
    if (!w || !json_is_array(meta) || !json_is_array(tens))
        return fail("%s: needs \"metadata\" and \"tensors\" arrays", argv[1]);
    for (size_t i = 0; i < json_array_size(meta); i++)
        if (set_key(w, json_array_get(meta, i)) != 0)
            return fail("bad metadata entry %s", json_dumps(json_array_get(meta, i), JSON_COMPACT));
    size_t n_t = json_array_size(tens);
    tensor_desc *td = calloc(n_t ? n_t : 1, sizeof *td);
    err_t err;
    for (size_t i = 0; i < n_t; i++) {
        if (read_tensor_desc(json_array_get(tens, i), &td[i]) != 0)
            return fail("bad tensor entry %s", json_dumps(json_array_get(tens, i), JSON_COMPACT));
        if (td[i].offset % 4 || td[i].offset + td[i].n * 4 > (uint64_t)size)
            return fail("tensor '%s' lies outside the f32 dump", td[i].name);
        if (gguf_writer_add_tensor(w, td[i].name, td[i].type, td[i].n_dims, td[i].ne, &err) != 0)
            return fail("%s", err.msg);
    }
    if (gguf_writer_begin(w, argv[3], &err) != 0)
        return fail("%s", err.msg);
    for (size_t i = 0; i < n_t; i++)
        if (write_tensor(w, &td[i], data + td[i].offset / 4, &err) != 0) {
            gguf_writer_free(w);
            return fail("%s", err.msg);
        }
    if (gguf_writer_finish(w, &err) != 0) {
        gguf_writer_free(w);
        return fail("%s", err.msg);
    }
    printf("%s: %zu tensors, %llu bytes\n", argv[3], n_t, (unsigned long long)gguf_writer_bytes_written(w));
    gguf_writer_free(w);
    free(td);
    free(data);
    json_decref(man);
    return 0;
}
