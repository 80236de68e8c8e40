/* quant.h: the GGML tensor formats, scalar reference implementation.
 *
 * Promises: exact GGML block layouts (ggml-common.h) for every supported
 * type; dequantization bit-exact with ggml's reference decoders; dot products
 * of a stored row with an f32 vector that accumulate in f32 over the exactly
 * dequantized weights (no activation quantization); quantizers for Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16, BF16 producing the same bytes as ggml's
 * *_ref quantizers.  These functions are the oracle the GPU kernels are
 * checked against; they are written for clarity first.
 */
#ifndef GLM_QUANT_H
#define GLM_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF. */
typedef enum {
    QT_F32 = 0,
    QT_F16 = 1,
    QT_Q4_0 = 2,
    QT_Q4_1 = 3,
    QT_Q5_0 = 6,
    QT_Q5_1 = 7,
    QT_Q8_0 = 8,
    QT_Q8_1 = 9,
    QT_Q2_K = 10,
    QT_Q3_K = 11,
    QT_Q4_K = 12,
    QT_Q5_K = 13,
    QT_Q6_K = 14,
    QT_Q8_K = 15,
    /* Known only by size (so a GGUF holding them can be parsed and the type
     * named in an error); no dequantization. */
    QT_IQ2_XXS = 16,
    QT_IQ2_XS = 17,
    QT_IQ3_XXS = 18,
    QT_IQ1_S = 19,
    QT_IQ4_NL = 20,
    QT_IQ3_S = 21,
    QT_IQ2_S = 22,
    QT_IQ4_XS = 23,
    QT_I8 = 24,
    QT_I16 = 25,
    QT_I32 = 26,
    QT_I64 = 27,
    QT_F64 = 28,
    QT_IQ1_M = 29,
    QT_BF16 = 30,
    QT_TQ1_0 = 34,
    QT_TQ2_0 = 35,
    QT_MXFP4 = 39,
    QT_COUNT = 40 /* upper bound of the id space we describe */
} quant_type;

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* Block layouts (packed, little-endian, as in ggml-common.h). Half floats are
 * stored as uint16_t bit patterns. */
typedef struct { uint16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;             /* 18 bytes */
typedef struct { uint16_t d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;          /* 20 */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0; /* 22 */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1; /* 24 */
typedef struct { uint16_t d; int8_t qs[QK8_0]; } block_q8_0;                  /* 34 */
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K; /* 144 */
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K; /* 176 */
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; } block_q6_K; /* 210 */

typedef struct {
    const char *name;      /* "Q4_0", "F32", ... */
    uint32_t block_elems;  /* elements per block (1 for F32/F16/BF16) */
    uint32_t block_bytes;  /* bytes per block */
    bool can_dequant;      /* dequant + dot implemented */
    bool can_quantize;     /* quantizer implemented */
} quant_traits;

/* Traits of a ggml type id, or NULL for an id we do not know at all. */
const quant_traits *quant_traits_of(uint32_t type);
const char *quant_type_name(uint32_t type); /* "?" for unknown */
/* Parses "Q4_0", "q4_k", "f16", ... ; returns -1 when unknown. */
int quant_type_from_name(const char *name);

/* Bytes of a row of n elements; false if n is not a multiple of the block
 * size, the type is unknown, or the result overflows. */
bool quant_row_bytes(uint32_t type, uint64_t n, uint64_t *out);

/* Half/bfloat conversion (round-to-nearest-even, as ggml). */
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);

/* The functions below take n as a multiple of the type's block size (they
 * read only whole blocks: a remainder is ignored) and a type whose traits say
 * can_dequant (for any other type dequant and dot produce NaN, so a caller
 * that skipped the check sees it at once instead of plausible numbers). */

/* Dequantizes n elements starting at a block boundary of `src`. */
void quant_dequant_row(uint32_t type, const void *src, float *dst, uint64_t n);

/* Dot product of a stored row (n elements) with f32 x, accumulated in f32
 * block by block (float64 would be slower and is not what the GPU does). */
float quant_dot_row(uint32_t type, const void *row, const float *x, uint64_t n);

/* y[r] = dot(row r of W, x) for r in [0, n_rows); W rows are `row_bytes`
 * apart (any stride).  The building block of the CPU forward pass: it runs
 * the fastest kernels this CPU has (quant_cpu_kernels), which sum the same
 * exactly dequantized weights as quant_dot_row in f32 but in another order,
 * so results agree with quant_dot_row within f32 rounding, not bit for bit.
 * A row's result depends only on (type, row, x, n) and the CPU, never on
 * n_rows or on how rows are split between calls, so threads may each take
 * a range of rows and get the same numbers.  Single-threaded and reentrant
 * (no allocation, no shared state). */
void quant_matvec(uint32_t type, const void *w, uint64_t row_bytes, uint64_t n_rows,
                  const float *x, uint64_t n, float *y);

/* Which kernels quant_matvec uses on this CPU: "avx2" (x86-64 with AVX2, FMA
 * and F16C, chosen at run time) or "portable" (plain C). */
const char *quant_cpu_kernels(void);

/* Quantizes n elements (a multiple of the block size) to `type`; returns the
 * bytes written, or 0 when this type has no quantizer (F32 is copied).
 * Finite input gives ggml's bytes exactly; NaN/inf give unspecified bytes,
 * never undefined behaviour. */
size_t quant_quantize_row(uint32_t type, const float *src, void *dst, uint64_t n);

#endif
