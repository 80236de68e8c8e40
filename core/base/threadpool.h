/* threadpool.h: a small pthread parallel-for for the CPU forward pass.
 *
 * Promises: threads are created once (threadpool_new) and reused for every
 * call; threadpool_for() splits [0, n) into chunks handed out dynamically,
 * runs them on the workers and on the calling thread, and returns when all
 * are done.  Each index is processed exactly once by exactly one thread, so
 * a body that writes only its own outputs gives bit-identical results for
 * any thread count.  Nothing is allocated per call.  One caller at a time.
 */
#ifndef GLM_THREADPOOL_H
#define GLM_THREADPOOL_H

#include <stdint.h>

#include "error.h"

typedef struct threadpool threadpool;

/* Body of a parallel loop: processes indices [begin, end) on thread `tid`
 * (0 .. threadpool_size()-1; the caller is thread 0), e.g. to pick a
 * per-thread scratch buffer. */
typedef void (*threadpool_fn)(void *ctx, uint64_t begin, uint64_t end, int tid);

/* n_threads <= 0: one per online CPU. */
threadpool *threadpool_new(int n_threads, err_t *err);
void threadpool_free(threadpool *tp);
int threadpool_size(const threadpool *tp);

/* Runs fn over [0, n) in chunks of at most `grain` indices (0: automatic). */
void threadpool_for(threadpool *tp, uint64_t n, uint64_t grain, threadpool_fn fn, void *ctx);

#endif
