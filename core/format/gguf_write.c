/* gguf_write.c: the streaming GGUF v3 writer (gguf.h's "writer" section).
 *
 * Metadata values are encoded when they are set; tensors are declared first
 * and their data streamed afterwards in declaration order, through one 8 MiB
 * buffer, so writing a 17 GB model takes little memory.  The byte layout is
 * gguf_format.h's, the same the reader (gguf.c) checks.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_format.h"
#include "quant.h"

typedef struct {
    char *key;
    gguf_type type;
    uint8_t *val; /* the encoded value (what follows the type field) */
    size_t len;
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t size, offset;
} wtensor;

#define WBUF_SIZE (8u << 20)

struct gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    uint32_t alignment;
    /* streaming state */
    char *path;
    int fd;
    uint8_t *buf;
    size_t buf_len;
    uint64_t file_pos;     /* bytes emitted so far (buffered or written) */
    size_t cur;            /* tensor being written */
    uint64_t cur_written;  /* its bytes so far */
    bool failed, finished;
    bool regular;          /* output is a regular file (only those are removed on failure) */
};

gguf_writer *gguf_writer_new(void)
{
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->alignment = GGUF_DEFAULT_ALIGNMENT;
        w->fd = -1;
    }
    return w;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        if (!w->finished && w->path && w->regular)
            unlink(w->path); /* never leave a half-written model behind */
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].val);
    }
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w->buf);
    free(w->path);
    free(w);
}

/* ---- metadata ------------------------------------------------------------ */

/* Sets key to an encoded value (taking ownership of val); an existing key is
 * replaced in place so the order of first setting is kept. */
static int set_kv(gguf_writer *w, const char *key, gguf_type type, uint8_t *val, size_t len)
{
    if (!w || !key || !val || w->fd >= 0) {
        free(val);
        return -1;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0) {
            free(w->kvs[i].val);
            w->kvs[i].type = type;
            w->kvs[i].val = val;
            w->kvs[i].len = len;
            return 0;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *k = realloc(w->kvs, cap * sizeof *k);
        if (!k) {
            free(val);
            return -1;
        }
        w->kvs = k;
        w->cap_kv = cap;
    }
    char *kcopy = strdup(key);
    if (!kcopy) {
        free(val);
        return -1;
    }
    w->kvs[w->n_kv++] = (wkv){kcopy, type, val, len};
    return 0;
}

static int set_fixed(gguf_writer *w, const char *key, gguf_type type, const void *v)
{
    size_t n = (size_t)gguf_fixed_size(type);
    uint8_t *val = malloc(n);
    if (val)
        memcpy(val, v, n); /* little-endian host (x86-64, arm64) */
    return set_kv(w, key, type, val, n);
}

int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v) { return set_fixed(w, key, GGUF_TYPE_UINT8, &v); }
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v) { return set_fixed(w, key, GGUF_TYPE_INT8, &v); }
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v) { return set_fixed(w, key, GGUF_TYPE_UINT16, &v); }
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v) { return set_fixed(w, key, GGUF_TYPE_INT16, &v); }
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return set_fixed(w, key, GGUF_TYPE_UINT32, &v); }
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return set_fixed(w, key, GGUF_TYPE_INT32, &v); }
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return set_fixed(w, key, GGUF_TYPE_UINT64, &v); }
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v) { return set_fixed(w, key, GGUF_TYPE_INT64, &v); }
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { return set_fixed(w, key, GGUF_TYPE_FLOAT32, &v); }
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v) { return set_fixed(w, key, GGUF_TYPE_FLOAT64, &v); }

int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return set_fixed(w, key, GGUF_TYPE_BOOL, &b);
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return -1;
    size_t n = strlen(v);
    uint8_t *val = malloc(8 + n);
    if (val) {
        put64(val, n);
        memcpy(val + 8, v, n);
    }
    return set_kv(w, key, GGUF_TYPE_STRING, val, 8 + n);
}

int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n)
{
    uint64_t size = gguf_fixed_size(elem_type), bytes;
    if (!size || __builtin_mul_overflow(size, n, &bytes) || bytes > SIZE_MAX - 12 || (n && !data))
        return -1;
    uint8_t *val = malloc(12 + (size_t)bytes);
    if (val) {
        put32(val, elem_type);
        put64(val + 4, n);
        if (bytes)
            memcpy(val + 12, data, (size_t)bytes);
    }
    return set_kv(w, key, GGUF_TYPE_ARRAY, val, 12 + (size_t)bytes);
}

int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n)
{
    size_t total = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i])
            return -1;
        total += 8 + strlen(strs[i]);
    }
    uint8_t *val = malloc(total);
    if (val) {
        put32(val, GGUF_TYPE_STRING);
        put64(val + 4, n);
        size_t p = 12;
        for (uint64_t i = 0; i < n; i++) {
            size_t len = strlen(strs[i]);
            put64(val + p, len);
            memcpy(val + p + 8, strs[i], len);
            p += 8 + len;
        }
    }
    return set_kv(w, key, GGUF_TYPE_ARRAY, val, total);
}

int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment)
{
    if (!w || alignment == 0 || (alignment & (alignment - 1)) != 0 || w->fd >= 0)
        return -1;
    w->alignment = alignment;
    if (alignment != GGUF_DEFAULT_ALIGNMENT)
        return gguf_writer_set_u32(w, "general.alignment", alignment);
    for (size_t i = 0; i < w->n_kv; i++) /* back to the default: drop the key */
        if (strcmp(w->kvs[i].key, "general.alignment") == 0) {
            free(w->kvs[i].key);
            free(w->kvs[i].val);
            memmove(&w->kvs[i], &w->kvs[i + 1], (w->n_kv - i - 1) * sizeof *w->kvs);
            w->n_kv--;
            break;
        }
    return 0;
}

/* ---- tensors ------------------------------------------------------------- */

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                           err_t *err)
{
    if (!w || !name || w->fd >= 0)
        return err_set(err, "gguf writer: tensors must be added before gguf_writer_begin");
    size_t len = strlen(name);
    if (len == 0 || len > GGUF_MAX_NAME_LEN)
        return err_set(err, "tensor '%s': name must be 1..%u bytes", name, GGUF_MAX_NAME_LEN);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return err_set(err, "tensor '%s': n_dims %" PRIu32 " out of range 1..%d", name, n_dims, GGUF_MAX_DIMS);
    const quant_traits *qt = quant_traits_of(type);
    if (!qt)
        return err_set(err, "tensor '%s': unknown tensor type id %" PRIu32, name, type);
    uint64_t rows = 1, row_bytes, size;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] == 0 || (d > 0 && __builtin_mul_overflow(rows, ne[d], &rows)))
            return err_set(err, "tensor '%s': dimension %" PRIu32 " is 0 or too large", name, d);
    if (!quant_row_bytes(type, ne[0], &row_bytes))
        return err_set(err, "tensor '%s': ne[0] = %" PRIu64 " is not a multiple of the %s block size %" PRIu32, name,
                       ne[0], qt->name, qt->block_elems);
    if (__builtin_mul_overflow(row_bytes, rows, &size) || size > INT64_MAX)
        return err_set(err, "tensor '%s': byte size overflows", name);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return err_set(err, "duplicate tensor name '%s'", name);
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        wtensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t)
            return err_set(err, "out of memory");
        w->tensors = t;
        w->cap_tensors = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    *t = (wtensor){.name = strdup(name), .type = type, .n_dims = n_dims, .size = size};
    if (!t->name)
        return err_set(err, "out of memory");
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    w->n_tensors++;
    return 0;
}

/* ---- output -------------------------------------------------------------- */

static int write_all(gguf_writer *w, const uint8_t *p, size_t n, err_t *err)
{
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            w->failed = true;
            return err_set(err, "%s: write failed: %s", w->path, k < 0 ? strerror(errno) : "no progress");
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int flush_buf(gguf_writer *w, err_t *err)
{
    int rc = write_all(w, w->buf, w->buf_len, err);
    w->buf_len = 0;
    return rc;
}

/* Emits bytes through the buffer; big pieces (1 MiB and up) go straight to
 * the file, saving a copy. */
static int emit(gguf_writer *w, const void *data, size_t n, err_t *err)
{
    const uint8_t *p = data;
    w->file_pos += n;
    if ((w->buf_len + n > WBUF_SIZE || n >= (1u << 20)) && w->buf_len && flush_buf(w, err) < 0)
        return -1;
    if (n >= (1u << 20))
        return write_all(w, p, n, err);
    memcpy(w->buf + w->buf_len, p, n);
    w->buf_len += n;
    return 0;
}

static int emit_padding(gguf_writer *w, err_t *err)
{
    static const uint8_t zeros[256];
    uint64_t a = w->alignment, pad = (a - w->file_pos % a) % a;
    while (pad > 0) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        if (emit(w, zeros, k, err) < 0)
            return -1;
        pad -= k;
    }
    return 0;
}

static int emit_u32(gguf_writer *w, uint32_t v, err_t *err) { return emit(w, &v, 4, err); }
static int emit_u64(gguf_writer *w, uint64_t v, err_t *err) { return emit(w, &v, 8, err); }

static int emit_str(gguf_writer *w, const char *s, err_t *err)
{
    size_t n = strlen(s);
    return emit_u64(w, n, err) < 0 ? -1 : emit(w, s, n, err);
}

/* Header, metadata and tensor table, then padding up to the data. */
static int emit_header(gguf_writer *w, err_t *err)
{
    if (emit(w, GGUF_MAGIC, 4, err) < 0 || emit_u32(w, GGUF_WRITE_VERSION, err) < 0 || emit_u64(w, w->n_tensors, err) < 0 ||
        emit_u64(w, w->n_kv, err) < 0)
        return -1;
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kvs[i];
        if (emit_str(w, kv->key, err) < 0 || emit_u32(w, kv->type, err) < 0 || emit(w, kv->val, kv->len, err) < 0)
            return -1;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        off += (w->alignment - off % w->alignment) % w->alignment;
        t->offset = off;
        off += t->size;
        if (emit_str(w, t->name, err) < 0 || emit_u32(w, t->n_dims, err) < 0)
            return -1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if (emit_u64(w, t->ne[d], err) < 0)
                return -1;
        if (emit_u32(w, t->type, err) < 0 || emit_u64(w, t->offset, err) < 0)
            return -1;
    }
    return emit_padding(w, err);
}

int gguf_writer_begin(gguf_writer *w, const char *path, err_t *err)
{
    if (!w || w->fd >= 0 || w->failed)
        return err_set(err, "gguf writer: begin called twice");
    if (!(w->path = strdup(path)) || !(w->buf = malloc(WBUF_SIZE)))
        return err_set(err, "%s: out of memory", path);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        return err_set(err, "%s: cannot create: %s", path, strerror(errno));
    struct stat st;
    w->regular = fstat(w->fd, &st) == 0 && S_ISREG(st.st_mode);
    if (emit_header(w, err) < 0) {
        w->failed = true;
        return -1;
    }
    return 0;
}

uint64_t gguf_writer_tensor_size(const gguf_writer *w, size_t i)
{
    return w && i < w->n_tensors ? w->tensors[i].size : 0;
}

size_t gguf_writer_n_tensors(const gguf_writer *w) { return w ? w->n_tensors : 0; }

uint64_t gguf_writer_bytes_written(const gguf_writer *w) { return w ? w->file_pos : 0; }

int gguf_writer_write(gguf_writer *w, const void *data, size_t n, err_t *err)
{
    if (!w || w->fd < 0 || w->failed || w->finished)
        return err_set(err, "gguf writer: write outside begin/finish or after an error");
    const uint8_t *p = data;
    while (n > 0) {
        if (w->cur >= w->n_tensors) {
            w->failed = true;
            return err_set(err, "%s: %zu bytes written beyond the last declared tensor", w->path, n);
        }
        const wtensor *t = &w->tensors[w->cur];
        uint64_t left = t->size - w->cur_written;
        size_t k = n < left ? n : (size_t)left;
        if (emit(w, p, k, err) < 0)
            return -1;
        p += k;
        n -= k;
        w->cur_written += k;
        if (w->cur_written == t->size) {
            w->cur++;
            w->cur_written = 0;
            if (emit_padding(w, err) < 0)
                return -1;
        }
    }
    return 0;
}

int gguf_writer_finish(gguf_writer *w, err_t *err)
{
    if (!w || w->fd < 0 || w->failed || w->finished)
        return err_set(err, "gguf writer: finish without a successful begin");
    if (w->cur < w->n_tensors) {
        w->failed = true;
        return err_set(err, "%s: tensor '%s' is incomplete (%" PRIu64 " of %" PRIu64 " bytes written)", w->path,
                       w->tensors[w->cur].name, w->cur_written, w->tensors[w->cur].size);
    }
    if (flush_buf(w, err) < 0)
        return -1;
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) < 0) {
        w->failed = true;
        if (w->regular)
            unlink(w->path);
        return err_set(err, "%s: close failed: %s", w->path, strerror(errno));
    }
    w->finished = true;
    return 0;
}

int gguf_writer_write_file(gguf_writer *w, const char *path, const void *const *datas, err_t *err)
{
    if (gguf_writer_begin(w, path, err) < 0)
        return -1;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (gguf_writer_write(w, datas[i], (size_t)w->tensors[i].size, err) < 0)
            return -1;
    return gguf_writer_finish(w, err);
}
