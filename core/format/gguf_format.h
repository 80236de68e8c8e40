/* gguf_format.h: the GGUF file layout, shared by the reader (gguf.c) and the
 * writer (gguf_write.c).  Internal to core/: callers use gguf.h.
 *
 * Layout of a GGUF file (all little-endian):
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv x   { str key, u32 type, value }
 *   n_tensors x { str name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment, then the tensor data section.
 * A str is { u64 len, bytes }; an array value is { u32 elem_type, u64 n, n values }.
 */
#ifndef GLM_GGUF_FORMAT_H
#define GLM_GGUF_FORMAT_H

#include <stdint.h>

#include "gguf.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_WRITE_VERSION 3u       /* what the writer emits; the reader takes 2 and 3 */
#define GGUF_MAX_NAME_LEN 63u       /* tensor names: ggml's GGML_MAX_NAME - 1 */

/* Encoded size of a fixed-size value type; 0 for string, array and unknown types. */
static inline uint64_t gguf_fixed_size(uint32_t t)
{
    static const uint8_t sizes[GGUF_TYPE_COUNT] = {
        [GGUF_TYPE_UINT8] = 1,  [GGUF_TYPE_INT8] = 1,    [GGUF_TYPE_UINT16] = 2,
        [GGUF_TYPE_INT16] = 2,  [GGUF_TYPE_UINT32] = 4,  [GGUF_TYPE_INT32] = 4,
        [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,   [GGUF_TYPE_STRING] = 0,
        [GGUF_TYPE_ARRAY] = 0,  [GGUF_TYPE_UINT64] = 8,  [GGUF_TYPE_INT64] = 8,
        [GGUF_TYPE_FLOAT64] = 8,
    };
    return t < GGUF_TYPE_COUNT ? sizes[t] : 0;
}

#endif
