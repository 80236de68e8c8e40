/* cpu_matmul.h: a weight matrix times prepared activations, by ranges of
 * rows (cpu_mm_).
 *
 * A job names one matrix (an expert's, a head's) and the tokens it takes;
 * cpu_mm_rows() computes a range of its output rows for all of them: rows
 * in groups small enough to stay in the L1/L2 cache while every tile of
 * CPU_TILE_TOK tokens passes over them, so a weight byte comes from memory
 * once per call however many tokens there are (a prompt is a mat-mat).
 *
 * Promises: an output element depends only on its row, its token's
 * activations and the kernel set -- not on the range, the tile or the
 * thread -- so any split of rows over threads gives the same bits.
 * Nothing is allocated.
 */
#ifndef GLM_CPU_MATMUL_H
#define GLM_CPU_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "model/model.h"

typedef struct {
    const mtensor *w;     /* the weights; matrix e of them */
    uint32_t e;
    uint32_t n_tok;
    const uint8_t *x;     /* prepared activation rows (as w's type wants), xs bytes apart */
    uint64_t xs;
    const uint32_t *xrow; /* token t reads row xrow[t] (NULL: row t) */
    float *y;             /* token t's output row r at y[yrow(t) * ys + r] */
    uint64_t ys;
    const uint32_t *yrow; /* NULL: t */
    bool accumulate;      /* y += W x instead of y = W x (a residual) */
    const uint8_t *packed; /* w's matrices packed (cpu_pack.h: cpu_packs_find), NULL: w's own rows */
} cpu_mm;

/* Output rows [r0, r1) of the job. */
void cpu_mm_rows(const cpu_kernels *k, const cpu_mm *job, uint64_t r0, uint64_t r1);

/* Inside a pool run, every thread: the rows of all n jobs (one step),
 * handed out in chunks.  Returns the weight bytes this call streams (for
 * the profile; the same on every thread). */
double cpu_mm_step(cpu_pool *p, const cpu_kernels *k, const cpu_mm *jobs, uint32_t n, int n_threads);

#endif
