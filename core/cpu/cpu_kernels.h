/* cpu_kernels.h: the fast CPU backend's kernels, one table per instruction
 * set (cpu_kernels_).
 *
 * For every weight type the table says which activation form it multiplies
 * with (cpu_q8.h) and holds the kernel that takes one stored row against up
 * to CPU_TILE_TOK prepared activation rows: 8-bit integer products for the
 * block-quantized types, f32 arithmetic for F32 / F16 / BF16.  A tile of
 * several tokens decodes each weight block once for all of them, which is
 * what makes a prompt a mat-mat rather than a series of mat-vecs.
 *
 * The sets, each filled from the one below it and replacing what it does
 * better (so a set without a kernel of its own for a type runs the lower
 * set's):  portable (plain C: any CPU, and the tests' second opinion) <
 * avx2 (x86-64 AVX2 + FMA + F16C) < avxvnni (+ VEX-encoded VNNI) ; avx2 <
 * avx512 (AVX-512 F/BW/VL/DQ) < avx512vnni (+ AVX-512 VNNI).  Chosen at run
 * time (cpuid), compiled with per-function target attributes, so the binary
 * runs on any x86-64.
 *
 * Promises:
 *  - cpu_kernels_best() is the fastest set this CPU runs, unless the
 *    environment variable GLMCHAT_CPU_KERNELS names another (portable, avx2,
 *    avxvnni, avx512, avx512vnni): then that set, or an error naming what the
 *    CPU lacks.
 *  - A type quant.c can decode but for which no set has an integer kernel
 *    (the newer types, until they get one) runs through cpu_kernels_dot's
 *    fallback: 256 elements dequantized at a time, f32 dot products with f32
 *    activations (CPU_ACT_F32) -- exact weights, the reference's precision.
 *  - Kernels are pure (no state, no allocation, reentrant).  Each token's
 *    sum is formed in the same order whatever nt is and whichever tokens
 *    share the call, so results do not depend on batching or threads.
 */
#ifndef GLM_CPU_KERNELS_H
#define GLM_CPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_q8.h"
#include "base/error.h"
#include "format/quant.h"

#define CPU_TILE_TOK 8

typedef enum {
    CPU_ISA_PORTABLE = 0,
    CPU_ISA_AVX2,
    CPU_ISA_AVXVNNI,
    CPU_ISA_AVX512,
    CPU_ISA_AVX512VNNI,
    CPU_ISA_COUNT
} cpu_isa;

/* For rows r < n_rows of w (row_bytes apart) and tokens t < nt
 * (1..CPU_TILE_TOK): y[t][r] = dot(row r, activation row x[t]), or
 * y[t][r] += that when `accumulate`; n elements, a multiple of the type's
 * block.  One call per group of rows keeps the call and the tile's set-up
 * off the per-row path. */
typedef void (*cpu_rows_fn)(const void *w, uint64_t row_bytes, uint64_t n_rows, const void *const *x, int nt,
                            uint64_t n, float *const *y, bool accumulate);
/* The same for types with no kernel of their own: the type is an argument. */
typedef void (*cpu_rows_any_fn)(uint32_t type, const void *w, uint64_t row_bytes, uint64_t n_rows,
                                const void *const *x, int nt, uint64_t n, float *const *y, bool accumulate);
/* Rows packed by cpu_pack.h (groups of CPU_PACK_ROWS = 16 rows,
 * group_bytes apart): all 16 n_groups rows of the groups from `groups`,
 * y[t][r] for r < 16 n_groups (padding rows included: the caller's y has
 * room for them); otherwise as cpu_rows_fn. */
typedef void (*cpu_packed_fn)(const void *groups, uint64_t group_bytes, uint64_t n_groups, const void *const *x,
                              int nt, uint64_t n, float *const *y, bool accumulate);
/* cpu_q8.h's preparers: elements [from, to) of the row x of n elements. */
typedef void (*cpu_prepare_fn)(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row);

typedef struct {
    cpu_act_kind act; /* the activation form of this weight type */
    cpu_rows_fn rows; /* NULL: the dequantizing fallback (act is then F32) */
    cpu_packed_fn packed; /* NULL: no packed form (cpu_pack.h); the same bits as the portable set's rows */
} cpu_type_kernel;

typedef struct cpu_kernels {
    const char *name; /* "portable", "avx2", ... */
    cpu_isa isa;
    cpu_type_kernel type[QT_COUNT];
    cpu_prepare_fn prepare[CPU_ACT_KINDS];
    cpu_rows_any_fn rows_fallback;
    /* attention over the latent cache (f32 or f16 rows) */
    float (*dot_f32)(const float *a, const float *b, uint64_t n);
    float (*dot_f16)(const uint16_t *a, const float *b, uint64_t n);
    void (*axpy_f32)(float *y, float a, const float *x, uint64_t n); /* y += a x */
    void (*axpy_f16)(float *y, float a, const uint16_t *x, uint64_t n);
} cpu_kernels;

/* The set for isa, or NULL when this CPU (or build) cannot run it. */
const cpu_kernels *cpu_kernels_get(cpu_isa isa);
/* The fastest set, or the one GLMCHAT_CPU_KERNELS names (NULL + err when it
 * names an unknown set or one this CPU cannot run). */
const cpu_kernels *cpu_kernels_best(err_t *err);
const char *cpu_isa_name(cpu_isa isa);

/* The activation form weights of `type` multiply with under set k. */
static inline cpu_act_kind cpu_kernels_act(const cpu_kernels *k, uint32_t type)
{
    return type < QT_COUNT && k->type[type].rows ? k->type[type].act : CPU_ACT_F32;
}

/* cpu_rows_fn through the type's kernel or the fallback. */
static inline void cpu_kernels_rows(const cpu_kernels *k, uint32_t type, const void *w, uint64_t row_bytes,
                                    uint64_t n_rows, const void *const *x, int nt, uint64_t n, float *const *y,
                                    bool accumulate)
{
    if (type < QT_COUNT && k->type[type].rows)
        k->type[type].rows(w, row_bytes, n_rows, x, nt, n, y, accumulate);
    else
        k->rows_fallback(type, w, row_bytes, n_rows, x, nt, n, y, accumulate);
}

/* out[t] = dot(one row of `type`, x[t]). */
static inline void cpu_kernels_dot(const cpu_kernels *k, uint32_t type, const void *row, const void *const *x,
                                   int nt, uint64_t n, float *out)
{
    float *y[CPU_TILE_TOK];
    for (int t = 0; t < nt; t++)
        y[t] = out + t;
    cpu_kernels_rows(k, type, row, 0, 1, x, nt, n, y, false);
}

/* ---- filled by the per-instruction-set files ---------------------------- */
void cpu_kernels_fill_portable(cpu_kernels *k);
void cpu_kernels_fill_avx2(cpu_kernels *k);
void cpu_kernels_fill_avxvnni(cpu_kernels *k);
void cpu_kernels_fill_avx512(cpu_kernels *k);
void cpu_kernels_fill_avx512vnni(cpu_kernels *k);

#endif
