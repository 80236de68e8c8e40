/* cpu_matmul.c: rows of a weight matrix against tiles of tokens
 * (cpu_matmul.h). */
#include "cpu_matmul.h"

#include "cpu_pack.h"

/* Rows per group: 16 rows of 2048 4-bit weights are 18 KiB, which stay in
 * the L1/L2 cache while the token tiles pass. */
enum { ROW_GROUP = 16 };

/* The job's token tile t0.. into x, y (rows from 0). */
static int tile_of(const cpu_mm *job, uint32_t t0, const void **x, float **y)
{
    int nt = job->n_tok - t0 < CPU_TILE_TOK ? (int)(job->n_tok - t0) : CPU_TILE_TOK;
    for (int i = 0; i < nt; i++) {
        uint32_t t = t0 + (uint32_t)i;
        x[i] = job->x + (uint64_t)(job->xrow ? job->xrow[t] : t) * job->xs;
        y[i] = job->y + (uint64_t)(job->yrow ? job->yrow[t] : t) * job->ys;
    }
    return nt;
}

/* Rows [r0, r1) from the packed groups: whole groups straight into y; a
 * group the range covers only in part (a range's ends off the 16-row grid,
 * the matrix's padded last group) through a small buffer, of which only
 * the range's rows are kept.  Either way a row's value is the same. */
static void packed_rows(const cpu_kernels *k, const cpu_mm *job, uint64_t r0, uint64_t r1)
{
    const mtensor *w = job->w;
    const cpu_packed_fn fn = k->type[w->type].packed;
    const uint64_t gb = cpu_pack_group_bytes(w), n = w->ne[0];
    const uint8_t *base = job->packed + (uint64_t)job->e * cpu_pack_matrix_bytes(w);
    for (uint64_t g = r0 / CPU_PACK_ROWS; g * CPU_PACK_ROWS < r1; g++) {
        const uint64_t gr = g * CPU_PACK_ROWS;
        const bool whole = gr >= r0 && gr + CPU_PACK_ROWS <= r1;
        for (uint32_t t0 = 0; t0 < job->n_tok; t0 += CPU_TILE_TOK) {
            const void *x[CPU_TILE_TOK];
            float *y[CPU_TILE_TOK];
            int nt = tile_of(job, t0, x, y);
            if (whole) {
                for (int i = 0; i < nt; i++)
                    y[i] += gr;
                fn(base + g * gb, gb, 1, x, nt, n, y, job->accumulate);
                continue;
            }
            float part[CPU_TILE_TOK][CPU_PACK_ROWS];
            float *py[CPU_TILE_TOK];
            for (int i = 0; i < nt; i++)
                py[i] = part[i];
            fn(base + g * gb, gb, 1, x, nt, n, py, false);
            const uint64_t lo = gr > r0 ? gr : r0, hi = gr + CPU_PACK_ROWS < r1 ? gr + CPU_PACK_ROWS : r1;
            for (int i = 0; i < nt; i++)
                for (uint64_t r = lo; r < hi; r++)
                    y[i][r] = job->accumulate ? y[i][r] + part[i][r - gr] : part[i][r - gr];
        }
    }
}

void cpu_mm_rows(const cpu_kernels *k, const cpu_mm *job, uint64_t r0, uint64_t r1)
{
    const mtensor *w = job->w;
    if (job->packed && w->type < QT_COUNT && k->type[w->type].packed) {
        packed_rows(k, job, r0, r1);
        return;
    }
    const uint8_t *base = mtensor_matrix(w, job->e);
    const uint64_t n = w->ne[0];
    for (uint64_t g = r0; g < r1; g += ROW_GROUP) {
        uint64_t ge = g + ROW_GROUP < r1 ? g + ROW_GROUP : r1;
        for (uint32_t t0 = 0; t0 < job->n_tok; t0 += CPU_TILE_TOK) {
            const void *x[CPU_TILE_TOK];
            float *y[CPU_TILE_TOK];
            int nt = tile_of(job, t0, x, y);
            for (int i = 0; i < nt; i++)
                y[i] += g;
            cpu_kernels_rows(k, w->type, base + g * w->nb1, w->nb1, ge - g, x, nt, n, y, job->accumulate);
        }
    }
}

double cpu_mm_step(cpu_pool *p, const cpu_kernels *k, const cpu_mm *jobs, uint32_t n, int n_threads)
{
    uint64_t total = 0;
    double bytes = 0, macs = 0;
    for (uint32_t j = 0; j < n; j++) {
        total += jobs[j].w->ne[1];
        bytes += (double)jobs[j].w->ne[1] * (double)jobs[j].w->nb1;
        macs += (double)jobs[j].w->ne[1] * (double)jobs[j].w->ne[0] * jobs[j].n_tok;
    }
    /* about 4 chunks per thread (uneven speeds even out), each at least
     * ~32k multiply-adds (below that taking a chunk costs more than it
     * saves), in whole row groups when there are enough rows */
    uint64_t chunk = (total + (uint64_t)n_threads * 4 - 1) / ((uint64_t)n_threads * 4);
    uint64_t least = total ? (uint64_t)(32768.0 * (double)total / (macs + 1)) + 1 : 1;
    chunk = chunk > least ? chunk : least;
    if (chunk > ROW_GROUP)
        chunk = (chunk + ROW_GROUP - 1) / ROW_GROUP * ROW_GROUP;
    uint32_t j = 0;
    uint64_t j_start = 0; /* first row of job j, counting all jobs' rows; chunks come in increasing order */
    for (uint64_t g = cpu_pool_take(p, chunk); g < total; g = cpu_pool_take(p, chunk)) {
        uint64_t end = g + chunk < total ? g + chunk : total;
        for (uint64_t at = g; at < end;) { /* a chunk may span jobs */
            while (at >= j_start + jobs[j].w->ne[1]) {
                j_start += jobs[j].w->ne[1];
                j++;
            }
            uint64_t stop = end < j_start + jobs[j].w->ne[1] ? end : j_start + jobs[j].w->ne[1];
            if (jobs[j].n_tok)
                cpu_mm_rows(k, &jobs[j], at - j_start, stop - j_start);
            at = stop;
        }
    }
    return bytes;
}
