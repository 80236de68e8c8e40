/* cpu_pool.h: the fast CPU backend's threads (cpu_pool_).
 *
 * A forward pass is one run: every thread executes the same function from
 * start to end (the caller is thread 0), and the steps inside it are
 * separated by cpu_pool_barrier().  A barrier is one atomic add per thread
 * and a spin on a generation counter -- about a microsecond, where waking a
 * sleeping thread through the kernel costs 50-100 us -- so the hundreds of
 * steps of a token cost little.  Between runs (between tokens, while the
 * user reads) the workers spin a short while, then sleep.
 *
 * Promises:
 *  - Threads are created once; nothing is allocated per run or barrier.
 *  - cpu_pool_run() returns when every thread has returned from fn; writes
 *    made before a barrier by any thread are visible after it to all.
 *  - cpu_pool_take() hands out [0, n) of the current step in chunks, each
 *    index once, to whichever thread asks first (threads that fall behind,
 *    e.g. on a loaded machine, take less); the counter restarts at every
 *    barrier.  A step's results therefore may not depend on which thread
 *    computes what -- only on the index.
 *  - Waiting threads yield the CPU every few hundred spins, so more threads
 *    than free cores slows a run down but never stalls it.
 *  - One run at a time (the engine's thread).
 */
#ifndef GLM_CPU_POOL_H
#define GLM_CPU_POOL_H

#include <stdint.h>

#include "error.h"

typedef struct cpu_pool cpu_pool;

/* Body of a run: thread tid of n_threads. */
typedef void (*cpu_pool_fn)(void *ctx, int tid, int n_threads);

/* n_threads <= 0: one per online CPU. */
cpu_pool *cpu_pool_new(int n_threads, err_t *err);
void cpu_pool_free(cpu_pool *p);
int cpu_pool_size(const cpu_pool *p);

void cpu_pool_run(cpu_pool *p, cpu_pool_fn fn, void *ctx);

/* Inside a run, called by every thread the same number of times. */
void cpu_pool_barrier(cpu_pool *p);
/* Inside a run: the first index of the next chunk of `chunk` indices of
 * the current step (>= n when none is left). */
uint64_t cpu_pool_take(cpu_pool *p, uint64_t chunk);

#endif
