/* gguf.h: GGUF v2/v3 reader (over mmap; core/format/gguf.c) and streaming writer (core/format/gguf_write.c).
 *
 * Promises:
 *  - gguf_open() maps the file read-only and validates everything before it
 *    returns: header, every key/value (all 13 value types, nested arrays),
 *    general.alignment, the tensor table (names unique, dims non-zero,
 *    element counts and byte sizes overflow-free, types known, data aligned,
 *    inside the file and not overlapping).  Any problem gives one err_t line
 *    "FILE: at byte OFFSET: PROBLEM" and NULL; nothing is allocated in
 *    proportion to a count the file claims unless the file is big enough to
 *    hold that many items.
 *  - Accessors never crash on a missing key or a wrong type: they return -1
 *    with "FILE: key 'K' ..." in err.
 *  - Tensor data pointers point into the mapping (no copy).
 */
#ifndef GLM_GGUF_H
#define GLM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the mapping: not NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct {
    const char *name;   /* NUL-terminated, owned by the context */
    uint32_t n_dims;    /* 1..4 */
    uint64_t ne[GGUF_MAX_DIMS]; /* elements per dim, ne[0] fastest; unused dims are 1 */
    uint32_t type;      /* ggml type id (see quant.h) */
    uint64_t offset;    /* from the start of the data section */
    uint64_t size;      /* bytes */
    const void *data;   /* into the mapping */
} gguf_tensor;

typedef struct gguf_ctx gguf_ctx;

/* ---- opening ---------------------------------------------------------- */

gguf_ctx *gguf_open(const char *path, err_t *err);
/* Parses a caller-owned buffer (fuzzing, tests); `name` is used in errors.
 * The buffer must outlive the context. */
gguf_ctx *gguf_open_memory(const void *data, size_t size, const char *name, err_t *err);
void gguf_close(gguf_ctx *ctx);

const char *gguf_path(const gguf_ctx *ctx);
uint32_t gguf_version(const gguf_ctx *ctx);
uint64_t gguf_alignment(const gguf_ctx *ctx);
uint64_t gguf_file_size(const gguf_ctx *ctx);
uint64_t gguf_data_offset(const gguf_ctx *ctx); /* byte offset of the data section */
const void *gguf_file_data(const gguf_ctx *ctx); /* start of the mapping */

/* ---- metadata ----------------------------------------------------------- */

size_t gguf_n_kv(const gguf_ctx *ctx);
const char *gguf_kv_key(const gguf_ctx *ctx, size_t i);
gguf_type gguf_kv_type(const gguf_ctx *ctx, size_t i);
/* Index of key, or -1 when absent. */
int64_t gguf_find_key(const gguf_ctx *ctx, const char *key);
bool gguf_has_key(const gguf_ctx *ctx, const char *key);
const char *gguf_type_name(gguf_type t);

/* Typed scalar accessors.  Integers: any integer type whose value fits the
 * destination is accepted (writers differ: u32 vs i32 vs u64).  Floats:
 * float32 or float64.  Return 0, or -1 with err set (missing key, wrong
 * type, value out of range). */
int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out, err_t *err);
int gguf_get_i32(const gguf_ctx *ctx, const char *key, int32_t *out, err_t *err);
int gguf_get_u64(const gguf_ctx *ctx, const char *key, uint64_t *out, err_t *err);
int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out, err_t *err);
int gguf_get_bool(const gguf_ctx *ctx, const char *key, bool *out, err_t *err);
int gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out, err_t *err);

/* Optional variants: a missing key stores `def` and returns 0; a present key
 * of the wrong type is still an error. */
int gguf_get_u32_or(const gguf_ctx *ctx, const char *key, uint32_t def, uint32_t *out, err_t *err);
int gguf_get_f32_or(const gguf_ctx *ctx, const char *key, float def, float *out, err_t *err);
int gguf_get_bool_or(const gguf_ctx *ctx, const char *key, bool def, bool *out, err_t *err);

/* Arrays.  gguf_get_arr gives the element type and count; for fixed-size
 * element types `data` points at the packed little-endian elements in the
 * mapping (may be unaligned: read with memcpy).  For string arrays use
 * gguf_get_arr_str (O(1) per element: offsets are indexed at open).
 * Nested arrays: elem_type is GGUF_TYPE_ARRAY and data is NULL (they are
 * validated and skipped; no model key needs their contents). */
typedef struct {
    gguf_type elem_type;
    uint64_t n;
    const void *data;
    int64_t kv_index;
} gguf_arr;
int gguf_get_arr(const gguf_ctx *ctx, const char *key, gguf_arr *out, err_t *err);
int gguf_get_arr_str(const gguf_ctx *ctx, const gguf_arr *arr, uint64_t i, gguf_str *out, err_t *err);

/* Formats any value (scalar, string, short array summary) for `info`-style
 * listings into buf; returns buf. */
const char *gguf_kv_to_string(const gguf_ctx *ctx, size_t i, char *buf, size_t buflen);

/* ---- tensors ------------------------------------------------------------ */

size_t gguf_n_tensors(const gguf_ctx *ctx);
const gguf_tensor *gguf_tensor_at(const gguf_ctx *ctx, size_t i);
/* Hash lookup by name; NULL when absent. */
const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name);

/* ---- writer --------------------------------------------------------------
 * Streaming: declare metadata and every tensor (name, type, dims) first,
 * then gguf_writer_begin() writes the header and tensor table, then the data
 * of each tensor is written in declaration order with any number of
 * gguf_writer_write() calls (padding between tensors is inserted
 * automatically once a tensor's byte count is complete), then
 * gguf_writer_finish().  Memory use is independent of the tensor sizes, so
 * a 17 GB model can be written with little RAM.  Always writes GGUF v3.
 * Setting a key again replaces its value where it first appeared; setters
 * return -1 after gguf_writer_begin(). */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (copied). */
int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n);
/* Array of strings (copied). */
int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Alignment (default 32); also writes general.alignment when not 32. */
int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment);

/* Declares a tensor; its size follows from type and dims (quant.h). */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *ne, err_t *err);

/* What was declared: tensor count and byte size of tensor i (0 when out of
 * range), so a producer can stream exactly that many bytes. */
size_t gguf_writer_n_tensors(const gguf_writer *w);
uint64_t gguf_writer_tensor_size(const gguf_writer *w, size_t i);
/* Bytes of the file emitted so far (after finish: the file size). */
uint64_t gguf_writer_bytes_written(const gguf_writer *w);

/* Creates `path` and writes the header, metadata and tensor table.  Until
 * gguf_writer_finish() succeeds, gguf_writer_free() removes the file (no
 * half-written model is left behind). */
int gguf_writer_begin(gguf_writer *w, const char *path, err_t *err);
int gguf_writer_write(gguf_writer *w, const void *data, size_t n, err_t *err);
int gguf_writer_finish(gguf_writer *w, err_t *err);

/* Convenience for small files (tests): everything in memory, tensors given
 * with their data.  `datas[i]` holds the bytes of tensor i. */
int gguf_writer_write_file(gguf_writer *w, const char *path, const void *const *datas, err_t *err);

#endif
