/* quant.h: the GGML tensor formats, scalar reference implementation.
 *
 * Promises: exact GGML block layouts (ggml-common.h) for every supported
 * type; dequantization bit-exact with ggml's reference decoders (and with
 * gguf-py's, tests/data/quant); dot products of a stored row with an f32
 * vector that accumulate in f32 over the exactly dequantized weights (no
 * activation quantization); a quantizer for every type we compute with:
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
 * IQ4_XS, MXFP4, F16 and BF16 produce the same bytes as llama-quantize does
 * without an importance matrix (ggml's quantize_row_*_ref, IQ4 with its
 * scale search); the grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
 * IQ1_S, IQ1_M) get a nearest-grid-point search of our own (quant_iq_quantize.c)
 * whose error is within the bounds tests/test_quant_iq.c states.  These
 * functions are the oracle the GPU kernels are checked against; they are
 * written for clarity first.
 *
 * One table of type traits (quant_traits_of) says, per ggml type id, the
 * block geometry and the block codecs: a backend that adds its own kernels
 * for a type keeps using decode_block as the definition of the values.
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
    QT_NVFP4 = 40,
    QT_Q1_0 = 41,
    QT_Q2_0 = 42,
    QT_COUNT = 43 /* upper bound of the id space we describe */
} quant_type;
/* Q8_1, Q8_K, the integer types, F64, TQ1_0, TQ2_0, NVFP4, Q1_0 and Q2_0 are
 * known only by size (so a GGUF holding them can be parsed and the type
 * named in an error): no codecs. */

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK_K 256
#define K_SCALE_SIZE 12
#define QK4_NL 32
#define QK_MXFP4 32

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
/* Q2_K: 16 sub-blocks of 16, value = d*sc*q - dmin*m (4-bit sc and m per
 * sub-block in scales[], 2-bit q); Q3_K: value = d*(sc-32)*(q-4*!hbit)
 * (6-bit sc packed as in ggml, 2 low bits in qs, the third in hmask). */
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; } block_q2_K; /* 84 */
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; } block_q3_K; /* 110 */
/* The non-linear 4-bit formats: a 16-entry table of levels (quant_grids.h).
 * IQ4_XS: eight 32-element sub-blocks with 6-bit scales (ls-32), 4 low bits
 * in scales_l, 2 high in scales_h.  MXFP4: e2m1 levels, E8M0 scale e. */
typedef struct { uint16_t d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl; /* 18 */
typedef struct { uint16_t d, scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs; /* 136 */
typedef struct { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; } block_mxfp4; /* 17 */
/* The grid formats: magnitudes of groups of 8 (IQ2) or 4 (IQ3) elements come
 * from a grid (quant_grids.h), signs from sign bits, one 4-bit scale per 32
 * (IQ2_XXS, IQ3_XXS, IQ3_S) or 16 (IQ2_XS, IQ2_S) elements. */
typedef struct { uint16_t d; uint16_t qs[QK_K / 8]; } block_iq2_xxs; /* 66 */
typedef struct { uint16_t d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; } block_iq2_xs; /* 74 */
typedef struct { uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; } block_iq2_s; /* 82 */
typedef struct { uint16_t d; uint8_t qs[3 * QK_K / 8]; } block_iq3_xxs; /* 98 */
typedef struct { uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64]; } block_iq3_s; /* 110 */
typedef struct { uint16_t d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; } block_iq1_s; /* 50 */
typedef struct { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; } block_iq1_m; /* 56 */

/* Type families (which test file and which source file hold a type). */
typedef enum {
    QF_OTHER = 0,  /* known by size only */
    QF_FLOAT,      /* F32, F16, BF16 */
    QF_LEGACY,     /* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (core/format/quant.c) */
    QF_KQUANT,     /* Q2_K .. Q6_K (core/format/quant_kquant.c) */
    QF_IQ4,        /* IQ4_NL, IQ4_XS, MXFP4: 16-level tables (core/format/quant_iq4.c) */
    QF_GRID,       /* IQ2_*, IQ3_*, IQ1_*: grids (core/format/quant_iq.c, quant_iq_quantize.c) */
} quant_family;

typedef struct {
    const char *name;      /* "Q4_0", "F32", ... */
    uint32_t block_elems;  /* elements per block (1 for F32/F16/BF16) */
    uint32_t block_bytes;  /* bytes per block */
    bool can_dequant;      /* decode_block is set: dequant + dot work */
    bool can_quantize;     /* quantize_block is set */
    quant_family family;
    /* One block (block_bytes, any alignment) -> block_elems floats, the
     * values ggml's dequantize_row_* gives, bit for bit. */
    void (*decode_block)(const void *block, float *out);
    /* block_elems floats -> one block. */
    void (*quantize_block)(const float *x, void *block);
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
