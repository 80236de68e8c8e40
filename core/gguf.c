/* gguf.c: the GGUF v2/v3 reader: validates a whole file (over mmap) at open,
 * then answers metadata and tensor queries.  The writer is gguf_write.c; the
 * byte layout both follow is in gguf_format.h.
 *
 * The reader trusts nothing: every count, length, offset and size read from
 * the file is checked against the bytes that remain (overflow-safe) before it
 * is used, and nothing is allocated in proportion to a claimed count unless
 * the rest of the file could hold that many items.  The first problem found
 * becomes one line "PATH: at byte OFFSET: PROBLEM".
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_format.h"
#include "quant.h"
#include "text_safe.h"

/* ======================================================================
 * Limits
 * ====================================================================== */

#define GGUF_MAX_KEY_LEN 65535u     /* the GGUF spec's limit */
#define GGUF_MAX_ARRAY_DEPTH 4u     /* nested arrays: enough for any writer, bounds recursion */
#define GGUF_MIN_KV_BYTES 13u       /* u64 key len + u32 type + 1-byte value (empty key) */
#define GGUF_MIN_TENSOR_BYTES 33u   /* u64 len + 1-byte name + u32 n_dims + 1 dim + u32 type + u64 offset */
/* The fewest bytes one element of this type can occupy in an array. */
static uint64_t type_min_size(uint32_t t)
{
    if (t == GGUF_TYPE_STRING)
        return 8;
    if (t == GGUF_TYPE_ARRAY)
        return 12;
    return gguf_fixed_size(t);
}

const char *gguf_type_name(gguf_type t)
{
    static const char *const names[GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "?";
}

static bool is_integer_type(gguf_type t)
{
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_INT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_INT16 ||
           t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64;
}

/* ======================================================================
 * The context
 * ====================================================================== */

typedef struct {
    char *key;
    gguf_type type;
    uint64_t pos;           /* byte offset of the value (after the type field) */
    /* arrays */
    gguf_type elem_type;
    uint64_t n;
    uint64_t data_pos;      /* first element */
    uint64_t *str_pos;      /* string arrays: offset of each element's length field */
} kv_entry;

typedef struct {
    uint32_t *slots;        /* index + 1; 0 = empty */
    uint64_t mask;
} name_table;

struct gguf_ctx {
    char *path;
    const uint8_t *base;
    uint64_t size;
    bool mapped;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    kv_entry *kvs;
    uint64_t n_kv;
    gguf_tensor *tensors;
    uint64_t n_tensors;
    name_table key_index;
    name_table tensor_index;
};

/* ---- little-endian reads (the mapping may be unaligned) ---------------- */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- name hash table (FNV-1a, open addressing) ------------------------- */

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int table_init(name_table *t, uint64_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    t->slots = calloc(cap, sizeof *t->slots);
    t->mask = cap - 1;
    return t->slots ? 0 : -1;
}

/* Looks `name` up; `name_of(i)` gives the name of entry i.  Returns the slot
 * where it is (or would go) and sets *found. */
static uint64_t table_probe(const name_table *t, const char *name, const char *(*name_of)(const void *, uint32_t),
                            const void *owner, bool *found)
{
    uint64_t i = hash_name(name, strlen(name)) & t->mask;
    while (t->slots[i]) {
        if (strcmp(name_of(owner, t->slots[i] - 1), name) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & t->mask;
    }
    *found = false;
    return i;
}

static const char *kv_name_of(const void *ctx, uint32_t i) { return ((const gguf_ctx *)ctx)->kvs[i].key; }
static const char *tensor_name_of(const void *ctx, uint32_t i) { return ((const gguf_ctx *)ctx)->tensors[i].name; }

/* ======================================================================
 * Parsing
 * ====================================================================== */

typedef struct {
    gguf_ctx *ctx;
    uint64_t pos;
    err_t *err;
} cursor;

static uint64_t remaining(const cursor *c) { return c->ctx->size - c->pos; }

/* Keys and names come from the file: err_set keeps every message in the
 * inert one-line form (core/error.c), so a newline or an escape sequence in
 * them neither splits the error line nor reaches the terminal. */
/* One error line: "PATH: at byte OFFSET: PROBLEM". */
static int fail_at(const cursor *c, uint64_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(const cursor *c, uint64_t at, const char *fmt, ...)
{
    char problem[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    err_set(c->err, "%s: at byte %" PRIu64 ": %s", c->ctx->path, at, problem);
    return -1;
}

/* Ensures n more bytes exist for `what`. */
static int need(const cursor *c, uint64_t n, const char *what)
{
    if (remaining(c) < n)
        return fail_at(c, c->pos, "file truncated in %s: %" PRIu64 " bytes needed, %" PRIu64 " left", what, n,
                       remaining(c));
    return 0;
}

static int read_u32(cursor *c, uint32_t *v, const char *what)
{
    if (need(c, 4, what) < 0)
        return -1;
    *v = rd32(c->ctx->base + c->pos);
    c->pos += 4;
    return 0;
}

static int read_u64(cursor *c, uint64_t *v, const char *what)
{
    if (need(c, 8, what) < 0)
        return -1;
    *v = rd64(c->ctx->base + c->pos);
    c->pos += 8;
    return 0;
}

/* Reads a GGUF string's header and checks its bytes are there; *at is the
 * offset of its first byte. */
static int read_str(cursor *c, uint64_t *at, uint64_t *len, const char *what)
{
    uint64_t start = c->pos;
    if (read_u64(c, len, what) < 0)
        return -1;
    if (*len > remaining(c))
        return fail_at(c, start, "%s: string length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes left)",
                       what, *len, remaining(c));
    *at = c->pos;
    c->pos += *len;
    return 0;
}

/* Copies a key or tensor name out of the mapping as a C string. */
static char *dup_name(const cursor *c, uint64_t at, uint64_t len)
{
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, c->ctx->base + at, len);
        s[len] = 0;
    }
    return s;
}

static int parse_value(cursor *c, uint32_t type, uint32_t depth, const char *key, kv_entry *top);

/* An array value: { u32 elem_type, u64 n, n elements }.  `top` (the kv
 * entry, NULL for nested arrays) records where the elements are. */
static int parse_array(cursor *c, uint32_t depth, const char *key, kv_entry *top)
{
    uint64_t at = c->pos;
    uint32_t et;
    uint64_t n;
    if (read_u32(c, &et, "array element type") < 0 || read_u64(c, &n, "array length") < 0)
        return -1;
    if (et >= GGUF_TYPE_COUNT)
        return fail_at(c, at, "key '%s': unknown array element type %" PRIu32, key, et);
    if (et == GGUF_TYPE_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return fail_at(c, at, "key '%s': arrays nested more than %u deep", key, GGUF_MAX_ARRAY_DEPTH);
    uint64_t min = type_min_size(et);
    if (n > remaining(c) / min)
        return fail_at(c, at + 4, "key '%s': array of %" PRIu64 " %s elements cannot fit in the %" PRIu64
                       " bytes left", key, n, gguf_type_name((gguf_type)et), remaining(c));
    if (top) {
        top->elem_type = (gguf_type)et;
        top->n = n;
        top->data_pos = c->pos;
    }
    uint64_t fixed = gguf_fixed_size(et);
    if (fixed) {
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->ctx->base[c->pos + i] > 1)
                    return fail_at(c, c->pos + i, "key '%s': bool array element %" PRIu64 " is %u (must be 0 or 1)",
                                   key, i, c->ctx->base[c->pos + i]);
        c->pos += n * fixed; /* n * fixed <= remaining: checked above */
        return 0;
    }
    if (et == GGUF_TYPE_STRING && top) {
        /* Indexed so gguf_get_arr_str is O(1); n*8 <= remaining bytes. */
        top->str_pos = malloc((n ? n : 1) * sizeof *top->str_pos);
        if (!top->str_pos)
            return fail_at(c, at, "key '%s': out of memory indexing %" PRIu64 " strings", key, n);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (top && top->str_pos)
            top->str_pos[i] = c->pos;
        if (parse_value(c, et, depth + 1, key, NULL) < 0)
            return -1;
    }
    return 0;
}

static int parse_value(cursor *c, uint32_t type, uint32_t depth, const char *key, kv_entry *top)
{
    uint64_t at = c->pos;
    if (type == GGUF_TYPE_STRING) {
        uint64_t s, len;
        return read_str(c, &s, &len, key);
    }
    if (type == GGUF_TYPE_ARRAY)
        return parse_array(c, depth, key, top);
    uint64_t size = gguf_fixed_size(type);
    if (need(c, size, key) < 0)
        return -1;
    if (type == GGUF_TYPE_BOOL && c->ctx->base[at] > 1)
        return fail_at(c, at, "key '%s': bool value is %u (must be 0 or 1)", key, c->ctx->base[at]);
    c->pos += size;
    return 0;
}

static int parse_header(cursor *c)
{
    gguf_ctx *ctx = c->ctx;
    if (ctx->size < 4 || memcmp(ctx->base, GGUF_MAGIC, 4) != 0) {
        if (ctx->size < 4)
            return fail_at(c, 0, "file truncated in the header: %" PRIu64 " bytes, not a GGUF file", ctx->size);
        const uint8_t *m = ctx->base;
        return fail_at(c, 0, "bad magic %02x %02x %02x %02x: not a GGUF file (expected \"GGUF\")", m[0], m[1], m[2],
                       m[3]);
    }
    c->pos = 4;
    if (read_u32(c, &ctx->version, "the header (version)") < 0)
        return -1;
    if (ctx->version != 2 && ctx->version != 3) {
        const char *hint = (ctx->version & 0xffff) == 0 && ctx->version ? " (a big-endian file?)" : "";
        return fail_at(c, 4, "unsupported GGUF version %" PRIu32 "%s: only versions 2 and 3 are supported",
                       ctx->version, hint);
    }
    if (read_u64(c, &ctx->n_tensors, "the header (tensor count)") < 0 ||
        read_u64(c, &ctx->n_kv, "the header (metadata count)") < 0)
        return -1;
    uint64_t left = remaining(c);
    if (ctx->n_kv > left / GGUF_MIN_KV_BYTES)
        return fail_at(c, 16, "metadata count %" PRIu64 " is impossible: the %" PRIu64 " bytes left hold at most %" PRIu64,
                       ctx->n_kv, left, left / GGUF_MIN_KV_BYTES);
    if (ctx->n_tensors > left / GGUF_MIN_TENSOR_BYTES)
        return fail_at(c, 8, "tensor count %" PRIu64 " is impossible: the %" PRIu64 " bytes left hold at most %" PRIu64,
                       ctx->n_tensors, left, left / GGUF_MIN_TENSOR_BYTES);
    if (ctx->n_tensors > UINT32_MAX - 1 || ctx->n_kv > UINT32_MAX - 1)
        return fail_at(c, 8, "tensor count %" PRIu64 " / metadata count %" PRIu64 " too large", ctx->n_tensors,
                       ctx->n_kv);
    return 0;
}

/* general.alignment: a uint32, non-zero power of two. */
static int check_alignment(cursor *c, const kv_entry *kv)
{
    if (kv->type != GGUF_TYPE_UINT32)
        return fail_at(c, kv->pos, "general.alignment has type %s, expected u32", gguf_type_name(kv->type));
    uint32_t a = rd32(c->ctx->base + kv->pos);
    if (a == 0 || (a & (a - 1)) != 0)
        return fail_at(c, kv->pos, "general.alignment is %" PRIu32 ": must be a non-zero power of two", a);
    c->ctx->alignment = a;
    return 0;
}

static int parse_kvs(cursor *c)
{
    gguf_ctx *ctx = c->ctx;
    ctx->kvs = calloc(ctx->n_kv ? ctx->n_kv : 1, sizeof *ctx->kvs);
    if (!ctx->kvs || table_init(&ctx->key_index, ctx->n_kv) < 0)
        return fail_at(c, c->pos, "out of memory for %" PRIu64 " metadata entries", ctx->n_kv);
    for (uint64_t i = 0; i < ctx->n_kv; i++) {
        uint64_t at = c->pos, kat, klen;
        char what[48];
        snprintf(what, sizeof what, "metadata key #%" PRIu64, i);
        if (read_str(c, &kat, &klen, what) < 0)
            return -1;
        if (klen > GGUF_MAX_KEY_LEN)
            return fail_at(c, at, "%s: key length %" PRIu64 " exceeds %u", what, klen, GGUF_MAX_KEY_LEN);
        if (memchr(ctx->base + kat, 0, klen))
            return fail_at(c, kat, "%s contains a NUL byte", what);
        kv_entry *kv = &ctx->kvs[i];
        if (!(kv->key = dup_name(c, kat, klen)))
            return fail_at(c, at, "out of memory");
        bool dup;
        uint64_t slot = table_probe(&ctx->key_index, kv->key, kv_name_of, ctx, &dup);
        if (dup)
            return fail_at(c, at, "duplicate metadata key '%s'", kv->key);
        ctx->key_index.slots[slot] = (uint32_t)i + 1;
        uint32_t type;
        uint64_t tat = c->pos;
        if (read_u32(c, &type, kv->key) < 0)
            return -1;
        if (type >= GGUF_TYPE_COUNT)
            return fail_at(c, tat, "key '%s': unknown value type %" PRIu32, kv->key, type);
        kv->type = (gguf_type)type;
        kv->pos = c->pos;
        if (parse_value(c, type, 0, kv->key, kv) < 0)
            return -1;
        if (strcmp(kv->key, "general.alignment") == 0 && check_alignment(c, kv) < 0)
            return -1;
    }
    return 0;
}

/* Reads one tensor-info entry and checks it on its own (not its range). */
static int parse_tensor_info(cursor *c, uint64_t i)
{
    gguf_ctx *ctx = c->ctx;
    gguf_tensor *t = &ctx->tensors[i];
    uint64_t at = c->pos, nat, nlen;
    char what[48];
    snprintf(what, sizeof what, "tensor #%" PRIu64 " name", i);
    if (read_str(c, &nat, &nlen, what) < 0)
        return -1;
    if (nlen == 0)
        return fail_at(c, at, "tensor #%" PRIu64 " has an empty name", i);
    if (nlen > GGUF_MAX_NAME_LEN)
        return fail_at(c, at, "tensor #%" PRIu64 " name is %" PRIu64 " bytes long (at most %u)", i, nlen,
                       GGUF_MAX_NAME_LEN);
    if (memchr(ctx->base + nat, 0, nlen))
        return fail_at(c, nat, "tensor #%" PRIu64 " name contains a NUL byte", i);
    char *name = dup_name(c, nat, nlen);
    if (!name)
        return fail_at(c, at, "out of memory");
    t->name = name;
    bool dup;
    uint64_t slot = table_probe(&ctx->tensor_index, name, tensor_name_of, ctx, &dup);
    if (dup)
        return fail_at(c, at, "duplicate tensor name '%s'", name);
    ctx->tensor_index.slots[slot] = (uint32_t)i + 1;

    uint64_t dat = c->pos;
    if (read_u32(c, &t->n_dims, name) < 0)
        return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fail_at(c, dat, "tensor '%s': n_dims is %" PRIu32 " (must be 1..%d)", name, t->n_dims, GGUF_MAX_DIMS);
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims)
            continue;
        uint64_t eat = c->pos;
        if (read_u64(c, &t->ne[d], name) < 0)
            return -1;
        if (t->ne[d] == 0)
            return fail_at(c, eat, "tensor '%s': dimension %" PRIu32 " is 0", name, d);
        if (t->ne[d] > INT64_MAX || __builtin_mul_overflow(nelem, t->ne[d], &nelem) || nelem > INT64_MAX)
            return fail_at(c, eat, "tensor '%s': element count overflows at dimension %" PRIu32 " (ne = %" PRIu64 ")",
                           name, d, t->ne[d]);
    }
    uint64_t tat = c->pos;
    if (read_u32(c, &t->type, name) < 0)
        return -1;
    const quant_traits *qt = quant_traits_of(t->type);
    if (!qt)
        return fail_at(c, tat, "tensor '%s': unknown tensor type id %" PRIu32, name, t->type);
    uint64_t row;
    if (t->ne[0] % qt->block_elems != 0)
        return fail_at(c, dat, "tensor '%s': ne[0] = %" PRIu64 " is not a multiple of the %s block size %" PRIu32, name,
                       t->ne[0], qt->name, qt->block_elems);
    if (!quant_row_bytes(t->type, t->ne[0], &row) || __builtin_mul_overflow(row, nelem / t->ne[0], &t->size) ||
        t->size > INT64_MAX)
        return fail_at(c, dat, "tensor '%s': byte size overflows (%" PRIu64 " elements of %s)", name, nelem, qt->name);
    uint64_t oat = c->pos;
    if (read_u64(c, &t->offset, name) < 0)
        return -1;
    if (t->offset % ctx->alignment != 0)
        return fail_at(c, oat, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                       name, t->offset, ctx->alignment);
    return 0;
}

/* Tensor-info offsets are needed again for range errors: the position of
 * entry i's offset field is recomputed from its name and n_dims. */
static uint64_t offset_field_pos(const gguf_tensor *t, uint64_t info_pos)
{
    return info_pos + 8 + strlen(t->name) + 4 + 8ull * t->n_dims + 4;
}

static int cmp_by_offset(const void *a, const void *b, void *tensors)
{
    const gguf_tensor *ts = tensors;
    uint64_t oa = ts[*(const uint32_t *)a].offset, ob = ts[*(const uint32_t *)b].offset;
    return oa < ob ? -1 : oa > ob;
}

/* Every tensor's bytes inside the data section, none overlapping. */
static int check_tensor_ranges(cursor *c, const uint64_t *info_pos)
{
    gguf_ctx *ctx = c->ctx;
    uint64_t data_size = ctx->data_offset <= ctx->size ? ctx->size - ctx->data_offset : 0;
    for (uint64_t i = 0; i < ctx->n_tensors; i++) {
        const gguf_tensor *t = &ctx->tensors[i];
        if (t->offset > data_size || t->size > data_size - t->offset)
            return fail_at(c, offset_field_pos(t, info_pos[i]),
                           "tensor '%s': data [%" PRIu64 ", +%" PRIu64 ") runs past the end of the file (data section "
                           "holds %" PRIu64 " bytes)", t->name, t->offset, t->size, data_size);
    }
    if (ctx->n_tensors < 2)
        return 0;
    uint32_t *order = malloc(ctx->n_tensors * sizeof *order);
    if (!order)
        return fail_at(c, 0, "out of memory");
    for (uint64_t i = 0; i < ctx->n_tensors; i++)
        order[i] = (uint32_t)i;
    qsort_r(order, ctx->n_tensors, sizeof *order, cmp_by_offset, ctx->tensors);
    int rc = 0;
    for (uint64_t k = 1; k < ctx->n_tensors && rc == 0; k++) {
        const gguf_tensor *a = &ctx->tensors[order[k - 1]], *b = &ctx->tensors[order[k]];
        if (b->offset < a->offset + a->size)
            rc = fail_at(c, offset_field_pos(b, info_pos[order[k]]),
                         "tensor '%s' data [%" PRIu64 ", +%" PRIu64 ") overlaps tensor '%s' [%" PRIu64 ", +%" PRIu64 ")",
                         b->name, b->offset, b->size, a->name, a->offset, a->size);
    }
    free(order);
    return rc;
}

static int parse_tensors(cursor *c)
{
    gguf_ctx *ctx = c->ctx;
    ctx->tensors = calloc(ctx->n_tensors ? ctx->n_tensors : 1, sizeof *ctx->tensors);
    uint64_t *info_pos = malloc((ctx->n_tensors ? ctx->n_tensors : 1) * sizeof *info_pos);
    int rc = 0;
    if (!ctx->tensors || !info_pos || table_init(&ctx->tensor_index, ctx->n_tensors) < 0)
        rc = fail_at(c, c->pos, "out of memory for %" PRIu64 " tensors", ctx->n_tensors);
    for (uint64_t i = 0; i < ctx->n_tensors && rc == 0; i++) {
        info_pos[i] = c->pos;
        rc = parse_tensor_info(c, i);
    }
    if (rc == 0) {
        /* The data section starts at the next multiple of the alignment. */
        uint64_t a = ctx->alignment;
        ctx->data_offset = c->pos + (a - c->pos % a) % a;
        rc = check_tensor_ranges(c, info_pos);
    }
    if (rc == 0)
        for (uint64_t i = 0; i < ctx->n_tensors; i++)
            ctx->tensors[i].data = ctx->base + ctx->data_offset + ctx->tensors[i].offset;
    free(info_pos);
    return rc;
}

static gguf_ctx *parse(gguf_ctx *ctx, err_t *err)
{
    cursor c = {.ctx = ctx, .pos = 0, .err = err};
    ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (parse_header(&c) < 0 || parse_kvs(&c) < 0 || parse_tensors(&c) < 0) {
        gguf_close(ctx);
        return NULL;
    }
    return ctx;
}

/* ======================================================================
 * Opening and closing
 * ====================================================================== */

gguf_ctx *gguf_open_memory(const void *data, size_t size, const char *name, err_t *err)
{
    gguf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx || !(ctx->path = strdup(name ? name : "(memory)"))) {
        free(ctx);
        err_set(err, "%s: out of memory", name ? name : "(memory)");
        return NULL;
    }
    ctx->base = data;
    ctx->size = size;
    return parse(ctx, err);
}

gguf_ctx *gguf_open(const char *path, err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        err_set(err, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        close(fd);
        return NULL;
    }
    const void *map = NULL;
    if (st.st_size > 0) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            err_set(err, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size, strerror(errno));
            close(fd);
            return NULL;
        }
    }
    close(fd); /* the mapping stays valid */
    gguf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx || !(ctx->path = strdup(path))) {
        free(ctx);
        if (map)
            munmap((void *)map, (size_t)st.st_size);
        err_set(err, "%s: out of memory", path);
        return NULL;
    }
    static const uint8_t empty[1];
    ctx->base = map ? map : empty;
    ctx->size = (uint64_t)st.st_size;
    ctx->mapped = map != NULL;
    return parse(ctx, err);
}

void gguf_close(gguf_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->kvs)
        for (uint64_t i = 0; i < ctx->n_kv; i++) {
            free(ctx->kvs[i].key);
            free(ctx->kvs[i].str_pos);
        }
    if (ctx->tensors)
        for (uint64_t i = 0; i < ctx->n_tensors; i++)
            free((char *)ctx->tensors[i].name);
    free(ctx->kvs);
    free(ctx->tensors);
    free(ctx->key_index.slots);
    free(ctx->tensor_index.slots);
    if (ctx->mapped)
        munmap((void *)ctx->base, ctx->size);
    free(ctx->path);
    free(ctx);
}

const char *gguf_path(const gguf_ctx *ctx) { return ctx->path; }
uint32_t gguf_version(const gguf_ctx *ctx) { return ctx->version; }
uint64_t gguf_alignment(const gguf_ctx *ctx) { return ctx->alignment; }
uint64_t gguf_file_size(const gguf_ctx *ctx) { return ctx->size; }
uint64_t gguf_data_offset(const gguf_ctx *ctx) { return ctx->data_offset; }
const void *gguf_file_data(const gguf_ctx *ctx) { return ctx->base; }

/* ======================================================================
 * Metadata accessors
 * ====================================================================== */

size_t gguf_n_kv(const gguf_ctx *ctx) { return (size_t)ctx->n_kv; }
const char *gguf_kv_key(const gguf_ctx *ctx, size_t i) { return i < ctx->n_kv ? ctx->kvs[i].key : NULL; }
gguf_type gguf_kv_type(const gguf_ctx *ctx, size_t i) { return i < ctx->n_kv ? ctx->kvs[i].type : GGUF_TYPE_COUNT; }

int64_t gguf_find_key(const gguf_ctx *ctx, const char *key)
{
    if (!ctx->key_index.slots)
        return -1;
    bool found;
    uint64_t slot = table_probe(&ctx->key_index, key, kv_name_of, ctx, &found);
    return found ? (int64_t)ctx->key_index.slots[slot] - 1 : -1;
}

bool gguf_has_key(const gguf_ctx *ctx, const char *key) { return gguf_find_key(ctx, key) >= 0; }

/* The entry for key, or NULL with "FILE: key 'K' not found". */
static const kv_entry *get_kv(const gguf_ctx *ctx, const char *key, err_t *err)
{
    int64_t i = gguf_find_key(ctx, key);
    if (i < 0) {
        err_set(err, "%s: key '%s' not found", ctx->path, key);
        return NULL;
    }
    return &ctx->kvs[i];
}

static int wrong_type(const gguf_ctx *ctx, const kv_entry *kv, const char *expected, err_t *err)
{
    err_set(err, "%s: key '%s' has type %s, expected %s", ctx->path, kv->key, gguf_type_name(kv->type), expected);
    return -1;
}

/* An integer value as sign + magnitude, whatever its stored width. */
static void kv_integer(const gguf_ctx *ctx, const kv_entry *kv, bool *neg, uint64_t *mag)
{
    const uint8_t *p = ctx->base + kv->pos;
    int64_t s = 0;
    *neg = false;
    switch (kv->type) {
    case GGUF_TYPE_UINT8: *mag = p[0]; return;
    case GGUF_TYPE_UINT16: *mag = rd16(p); return;
    case GGUF_TYPE_UINT32: *mag = rd32(p); return;
    case GGUF_TYPE_UINT64: *mag = rd64(p); return;
    case GGUF_TYPE_INT8: s = (int8_t)p[0]; break;
    case GGUF_TYPE_INT16: s = (int16_t)rd16(p); break;
    case GGUF_TYPE_INT32: s = (int32_t)rd32(p); break;
    default: s = (int64_t)rd64(p); break;
    }
    *neg = s < 0;
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
}

/* Integer value of key within [-neg_max, pos_max]. */
static int get_int(const gguf_ctx *ctx, const char *key, uint64_t neg_max, uint64_t pos_max, const char *dst,
                   bool *neg, uint64_t *mag, err_t *err)
{
    const kv_entry *kv = get_kv(ctx, key, err);
    if (!kv)
        return -1;
    if (!is_integer_type(kv->type))
        return wrong_type(ctx, kv, "an integer", err);
    kv_integer(ctx, kv, neg, mag);
    if ((*neg && *mag > neg_max) || (!*neg && *mag > pos_max)) {
        err_set(err, "%s: key '%s' value %s%" PRIu64 " does not fit in %s", ctx->path, key, *neg ? "-" : "", *mag, dst);
        return -1;
    }
    return 0;
}

int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out, err_t *err)
{
    bool neg;
    uint64_t mag;
    if (get_int(ctx, key, 0, UINT32_MAX, "u32", &neg, &mag, err) < 0)
        return -1;
    *out = (uint32_t)mag;
    return 0;
}

int gguf_get_i32(const gguf_ctx *ctx, const char *key, int32_t *out, err_t *err)
{
    bool neg;
    uint64_t mag;
    if (get_int(ctx, key, (uint64_t)INT32_MAX + 1, INT32_MAX, "i32", &neg, &mag, err) < 0)
        return -1;
    *out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
    return 0;
}

int gguf_get_u64(const gguf_ctx *ctx, const char *key, uint64_t *out, err_t *err)
{
    bool neg;
    uint64_t mag;
    if (get_int(ctx, key, 0, UINT64_MAX, "u64", &neg, &mag, err) < 0)
        return -1;
    *out = mag;
    return 0;
}

int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out, err_t *err)
{
    const kv_entry *kv = get_kv(ctx, key, err);
    if (!kv)
        return -1;
    const uint8_t *p = ctx->base + kv->pos;
    if (kv->type == GGUF_TYPE_FLOAT32) {
        uint32_t bits = rd32(p);
        memcpy(out, &bits, 4);
        return 0;
    }
    if (kv->type != GGUF_TYPE_FLOAT64)
        return wrong_type(ctx, kv, "f32 or f64", err);
    uint64_t bits = rd64(p);
    double d;
    memcpy(&d, &bits, 8);
    if (d == d && (d > 3.4028234663852886e38 || d < -3.4028234663852886e38) && d - d == 0)
        return err_set(err, "%s: key '%s' value %g does not fit in f32", ctx->path, key, d);
    *out = (float)d;
    return 0;
}

int gguf_get_bool(const gguf_ctx *ctx, const char *key, bool *out, err_t *err)
{
    const kv_entry *kv = get_kv(ctx, key, err);
    if (!kv)
        return -1;
    if (kv->type != GGUF_TYPE_BOOL)
        return wrong_type(ctx, kv, "bool", err);
    *out = ctx->base[kv->pos] != 0;
    return 0;
}

int gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out, err_t *err)
{
    const kv_entry *kv = get_kv(ctx, key, err);
    if (!kv)
        return -1;
    if (kv->type != GGUF_TYPE_STRING)
        return wrong_type(ctx, kv, "string", err);
    out->len = rd64(ctx->base + kv->pos);
    out->ptr = (const char *)ctx->base + kv->pos + 8;
    return 0;
}

int gguf_get_u32_or(const gguf_ctx *ctx, const char *key, uint32_t def, uint32_t *out, err_t *err)
{
    if (!gguf_has_key(ctx, key)) {
        *out = def;
        return 0;
    }
    return gguf_get_u32(ctx, key, out, err);
}

int gguf_get_f32_or(const gguf_ctx *ctx, const char *key, float def, float *out, err_t *err)
{
    if (!gguf_has_key(ctx, key)) {
        *out = def;
        return 0;
    }
    return gguf_get_f32(ctx, key, out, err);
}

int gguf_get_bool_or(const gguf_ctx *ctx, const char *key, bool def, bool *out, err_t *err)
{
    if (!gguf_has_key(ctx, key)) {
        *out = def;
        return 0;
    }
    return gguf_get_bool(ctx, key, out, err);
}

int gguf_get_arr(const gguf_ctx *ctx, const char *key, gguf_arr *out, err_t *err)
{
    const kv_entry *kv = get_kv(ctx, key, err);
    if (!kv)
        return -1;
    if (kv->type != GGUF_TYPE_ARRAY)
        return wrong_type(ctx, kv, "array", err);
    out->elem_type = kv->elem_type;
    out->n = kv->n;
    out->data = gguf_fixed_size(kv->elem_type) ? ctx->base + kv->data_pos : NULL;
    out->kv_index = kv - ctx->kvs;
    return 0;
}

int gguf_get_arr_str(const gguf_ctx *ctx, const gguf_arr *arr, uint64_t i, gguf_str *out, err_t *err)
{
    if (arr->kv_index < 0 || (uint64_t)arr->kv_index >= ctx->n_kv)
        return err_set(err, "%s: array does not belong to this file", ctx->path);
    const kv_entry *kv = &ctx->kvs[arr->kv_index];
    if (kv->type != GGUF_TYPE_ARRAY || kv->elem_type != GGUF_TYPE_STRING) {
        err_set(err, "%s: key '%s' is not an array of strings", ctx->path, kv->key);
        return -1;
    }
    if (i >= kv->n) {
        err_set(err, "%s: key '%s': index %" PRIu64 " out of range (%" PRIu64 " strings)", ctx->path, kv->key, i,
                kv->n);
        return -1;
    }
    out->len = rd64(ctx->base + kv->str_pos[i]);
    out->ptr = (const char *)ctx->base + kv->str_pos[i] + 8;
    return 0;
}

/* ---- formatting for listings -------------------------------------------- */

typedef struct {
    char *buf;
    size_t cap, len;
} listing;

static void sb_printf(listing *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(listing *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len = b->len + (size_t)n < b->cap ? b->len + (size_t)n : b->cap - 1;
}

/* A string, quoted, cut after `max` bytes; what text_safe.h shows inert
 * (control characters, C1 and bidi controls) and invalid UTF-8 as \xNN
 * escapes of its bytes. */
static void sb_quoted(listing *b, const uint8_t *s, uint64_t len, uint64_t max)
{
    sb_printf(b, "\"");
    uint64_t end = len < max ? len : max;
    for (uint64_t i = 0; i < end;) {
        uint32_t cp;
        size_t n = tsafe_decode((const char *)s + i, (size_t)(end - i), &cp);
        if (s[i] == '"' || s[i] == '\\')
            sb_printf(b, "\\%c", s[i]);
        else if (s[i] == '\n')
            sb_printf(b, "\\n");
        else if (tsafe_is_control(cp) || (cp == 0xfffd && n == 1 && s[i] >= 0x80))
            for (size_t j = 0; j < n; j++)
                sb_printf(b, "\\x%02x", s[i + j]);
        else
            sb_printf(b, "%.*s", (int)n, (const char *)s + i);
        i += n;
    }
    sb_printf(b, len > max ? "\"... (%" PRIu64 " bytes)" : "\"", len);
}

/* One fixed-size value at p. */
static void sb_scalar(listing *b, gguf_type t, const uint8_t *p)
{
    switch (t) {
    case GGUF_TYPE_UINT8: sb_printf(b, "%u", p[0]); break;
    case GGUF_TYPE_INT8: sb_printf(b, "%d", (int8_t)p[0]); break;
    case GGUF_TYPE_UINT16: sb_printf(b, "%u", rd16(p)); break;
    case GGUF_TYPE_INT16: sb_printf(b, "%d", (int16_t)rd16(p)); break;
    case GGUF_TYPE_UINT32: sb_printf(b, "%" PRIu32, rd32(p)); break;
    case GGUF_TYPE_INT32: sb_printf(b, "%" PRId32, (int32_t)rd32(p)); break;
    case GGUF_TYPE_UINT64: sb_printf(b, "%" PRIu64, rd64(p)); break;
    case GGUF_TYPE_INT64: sb_printf(b, "%" PRId64, (int64_t)rd64(p)); break;
    case GGUF_TYPE_BOOL: sb_printf(b, "%s", p[0] ? "true" : "false"); break;
    case GGUF_TYPE_FLOAT32: {
        uint32_t bits = rd32(p);
        float f;
        memcpy(&f, &bits, 4);
        sb_printf(b, "%.9g", (double)f);
        break;
    }
    case GGUF_TYPE_FLOAT64: {
        uint64_t bits = rd64(p);
        double d;
        memcpy(&d, &bits, 8);
        sb_printf(b, "%.17g", d);
        break;
    }
    default: sb_printf(b, "?"); break;
    }
}

const char *gguf_kv_to_string(const gguf_ctx *ctx, size_t i, char *buf, size_t buflen)
{
    listing b = {buf, buflen, 0};
    if (!buflen)
        return buf;
    buf[0] = 0;
    if (i >= ctx->n_kv)
        return buf;
    const kv_entry *kv = &ctx->kvs[i];
    const uint8_t *p = ctx->base + kv->pos;
    if (kv->type == GGUF_TYPE_STRING) {
        sb_quoted(&b, p + 8, rd64(p), 80);
    } else if (kv->type != GGUF_TYPE_ARRAY) {
        sb_scalar(&b, kv->type, p);
    } else {
        sb_printf(&b, "[%s x %" PRIu64 "%s", gguf_type_name(kv->elem_type), kv->n, kv->n ? ": " : "");
        uint64_t shown = kv->n < 6 ? kv->n : 6, size = gguf_fixed_size(kv->elem_type);
        for (uint64_t k = 0; k < shown && kv->elem_type != GGUF_TYPE_ARRAY; k++) {
            if (k)
                sb_printf(&b, ", ");
            if (kv->elem_type == GGUF_TYPE_STRING)
                sb_quoted(&b, ctx->base + kv->str_pos[k] + 8, rd64(ctx->base + kv->str_pos[k]), 24);
            else
                sb_scalar(&b, kv->elem_type, ctx->base + kv->data_pos + k * size);
        }
        sb_printf(&b, "%s]", shown < kv->n || kv->elem_type == GGUF_TYPE_ARRAY ? "..." : "");
    }
    return buf;
}

/* ======================================================================
 * Tensors
 * ====================================================================== */

size_t gguf_n_tensors(const gguf_ctx *ctx) { return (size_t)ctx->n_tensors; }

const gguf_tensor *gguf_tensor_at(const gguf_ctx *ctx, size_t i)
{
    return i < ctx->n_tensors ? &ctx->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name)
{
    if (!ctx->tensor_index.slots)
        return NULL;
    bool found;
    uint64_t slot = table_probe(&ctx->tensor_index, name, tensor_name_of, ctx, &found);
    return found ? &ctx->tensors[ctx->tensor_index.slots[slot] - 1] : NULL;
}
