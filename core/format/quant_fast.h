/* quant_fast.h: internals shared by core/format/quant.c, core/format/quant_fast.c and the
 * quant tests; not part of the public API (use quant.h).
 *
 * quant.c holds the readable scalar oracle; quant_fast.c holds the kernels
 * quant_matvec runs: a portable block-at-a-time C path and, on x86-64 CPUs
 * with AVX2+FMA+F16C (checked at run time), hand-vectorized kernels.  Both
 * accumulate in f32 over the same exactly dequantized weights as the oracle,
 * only in a different order, so they agree with it within f32 rounding. */
#ifndef GLM_QUANT_FAST_H
#define GLM_QUANT_FAST_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    QUANT_KERNELS_PORTABLE = 0,
    QUANT_KERNELS_AVX2 = 1,
} quant_kernels;

/* Decodes one block of `type` (can_dequant types only) into
 * block_elems floats, bit-exact with ggml's dequantize_row_*. */
void quant_decode_block(uint32_t type, const void *block, float *out);

/* Whether kernel set k can run on this CPU (portable: always). */
bool quant_kernels_available(quant_kernels k);

/* quant_matvec with kernel set k (an unavailable set falls back to the
 * portable one). */
void quant_kernels_matvec(quant_kernels k, uint32_t type, const void *w, uint64_t row_bytes,
                          uint64_t n_rows, const float *x, uint64_t n, float *y);

/* The dot product of one stored row with x using kernel set k (a one-row
 * quant_kernels_matvec); n a multiple of the block size. */
float quant_kernels_dot_row(quant_kernels k, uint32_t type, const void *row, const float *x,
                            uint64_t n);

#endif
