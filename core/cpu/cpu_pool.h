/* cpu_pool.h: the fast CPU backend's threads (cpu_pool_).
 *
 * A forward pass is one run: every thread executes the same function from
 * start to end (the caller is thread 0), and the steps inside it are
 * separated by cpu_pool_barrier().  A barrier is one atomic add per thread
 * and a wait on a generation counter that polls first -- about a
 * microsecond on an idle machine, where waking a sleeping thread through
 * the kernel costs tens of microseconds -- so the hundreds of steps of a
 * token cost little.  A wait that outlasts its poll budget sleeps on a
 * futex (core/base/gen_wait.h): a thread descheduled by a loaded machine
 * then costs the others a sleep, not a time slice of spinning.  Between
 * runs (between tokens, while the user reads) the workers poll a little
 * longer, then sleep.
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
 *  - Waiting threads poll (yielding the core) at most a fraction of a
 *    millisecond, then sleep; a couple of microseconds while recent waits
 *    were long, and from the start when the pool has more threads than the
 *    process has CPUs.  More threads than free cores therefore costs
 *    wake-ups, not spinning.
 *  - One run at a time (the engine's thread).
 */
#ifndef GLM_CPU_POOL_H
#define GLM_CPU_POOL_H

#include <stdint.h>

#include "base/error.h"

typedef struct cpu_pool cpu_pool;

/* Body of a run: thread tid of n_threads. */
typedef void (*cpu_pool_fn)(void *ctx, int tid, int n_threads);

/* n_threads <= 0: one per CPU this process may run on. */
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
