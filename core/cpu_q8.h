/* cpu_q8.h: activations prepared for the fast CPU kernels (cpu_act_).
 *
 * Before a weight matrix multiplies an activation vector, the vector is put
 * in the form the weight type's kernel reads (llama.cpp's precision):
 *  - CPU_ACT_Q8_32: blocks of 32 quantized to int8 with one scale each, as
 *    ggml's q8_0 / q8_1 (the 32-element weight types: Q4_0, Q4_1, Q5_0,
 *    Q5_1, Q8_0): scale d = f16(amax / 127), q = round-half-even(x * 127 /
 *    amax); plus, per block, the sum of q (the offset of Q4_0 / Q5_0 levels,
 *    exact) and q8_1's s = f16((amax / 127) * sum(q)) for the mins of Q4_1 /
 *    Q5_1, rounded as llama.cpp rounds it (an exact s moved the fixtures'
 *    logits 1.7 % away from llama.cpp's, all through the Q5_1 attn_output);
 *  - CPU_ACT_Q8_K: blocks of 256 with one f32 scale, as ggml's q8_K (the
 *    K-quants): q = round-half-even(x * 127 / amax), d = amax / 127 computed
 *    as 1 / (127 / amax), and the sum of q per 16 elements;
 *  - CPU_ACT_F32: the f32 values themselves (F32 / F16 / BF16 weights and the
 *    types without an integer kernel).
 *
 * A prepared row of n elements is laid out as (n a multiple of the block):
 *   Q8_32: int8 q[n] | float d[n/32] | float s[n/32] | int32 sum[n/32]
 *   Q8_K:  int8 q[n] | float d[n/256] | int16 bsum[n/16]
 *   F32:   float x[n]
 * and rows are cpu_act_row_bytes() apart (a multiple of 64 bytes).
 *
 * Promises: the portable quantizers here and the vectorized ones in the
 * kernel table (cpu_kernels.h) write the same bytes for finite input
 * (tests/test_cpu_kernels.c checks it); NaN or inf give defined but
 * meaningless values, never undefined behaviour.  Nothing is allocated.
 */
#ifndef GLM_CPU_Q8_H
#define GLM_CPU_Q8_H

#include <stdint.h>

typedef enum { CPU_ACT_F32 = 0, CPU_ACT_Q8_32 = 1, CPU_ACT_Q8_K = 2, CPU_ACT_KINDS = 3 } cpu_act_kind;

/* Elements per block of a kind (1 for F32). */
uint32_t cpu_act_block(cpu_act_kind k);
/* Bytes of one prepared row of n elements, rounded up to 64. */
uint64_t cpu_act_row_bytes(cpu_act_kind k, uint64_t n);

/* The portable preparers (the kernel table holds the fastest ones): elements
 * [from, to) -- whole blocks -- of the row x of n elements into the prepared
 * row `row` (a row may be prepared piece by piece, by different threads). */
void cpu_act_prepare_f32(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row);
void cpu_act_prepare_q8_32(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row);
void cpu_act_prepare_q8_K(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row);

/* Where the parts of a prepared row of n elements lie. */
static inline const int8_t *cpu_act_q(const void *row)
{
    return (const int8_t *)row;
}
static inline const float *cpu_act_d(const void *row, uint64_t n)
{
    return (const float *)((const char *)row + n);
}
/* Q8_32: q8_1's s per block. */
static inline const float *cpu_act_s(const void *row, uint64_t n)
{
    return cpu_act_d(row, n) + n / 32;
}
/* Q8_32: the sum of q per block. */
static inline const int32_t *cpu_act_sum(const void *row, uint64_t n)
{
    return (const int32_t *)(cpu_act_d(row, n) + 2 * (n / 32));
}
/* Q8_K: sum(q) per 16 elements. */
static inline const int16_t *cpu_act_bsum(const void *row, uint64_t n)
{
    return (const int16_t *)(cpu_act_d(row, n) + n / 256);
}

/* Round half to even of |v| < 2^22 without a libm call: adding 1.5 * 2^23
 * leaves the integer in the low mantissa bits (ggml's nearest_int). */
static inline int cpu_round_even(float v)
{
    union {
        float f;
        int32_t i;
    } u = {.f = v + 12582912.f};
    return (u.i & 0x007fffff) - 0x00400000;
}

#endif
