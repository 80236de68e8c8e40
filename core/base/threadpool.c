/* threadpool.c: persistent workers behind a parallel-for.
 *
 * A call publishes the loop (body, range, grain) and the next generation;
 * workers notice it, take chunks from a shared atomic cursor, and count
 * themselves out of `pending` when the cursor runs out; the last one
 * publishes the loop's generation on `done`, which the caller waits for.
 * The forward pass makes hundreds of short calls per token, so the waits
 * poll a while (yielding the core) before they sleep on a futex:
 * core/base/gen_wait.h says why and how long. */
#include "threadpool.h"
#include "base/gen_wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Poll budgets (gen_wait.h): workers between loops poll up to
 * IDLE_SPIN_MAX_NS, the caller waiting for a loop's end up to
 * DONE_SPIN_MAX_NS, both down to SPIN_MIN_NS when waits run long or the
 * pool has more threads than the process has CPUs. */
#define IDLE_SPIN_MAX_NS 200000
#define DONE_SPIN_MAX_NS 100000
#define SPIN_MIN_NS 2000

typedef struct {
    threadpool *tp;
    int tid;
} worker_arg;

struct threadpool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    worker_arg *args;
    atomic_bool quit;
    gen_spin idle_spin, done_spin;
    gen_word generation; /* the loop being run */
    gen_word done;       /* the last loop every worker finished */
    /* the current loop */
    threadpool_fn fn;
    void *ctx;
    uint64_t n, grain;
    atomic_uint_fast64_t next;
    atomic_int pending; /* workers still in the current loop */
};

static void run_chunks(threadpool *tp, int tid)
{
    for (;;) {
        uint64_t begin = atomic_fetch_add(&tp->next, tp->grain);
        if (begin >= tp->n)
            return;
        uint64_t end = begin + tp->grain < tp->n ? begin + tp->grain : tp->n;
        tp->fn(tp->ctx, begin, end, tid);
    }
}

static void *worker_main(void *p)
{
    worker_arg *a = p;
    threadpool *tp = a->tp;
    unsigned seen = 0;
    for (;;) {
        seen = gen_wait(&tp->generation, seen, &tp->idle_spin);
        if (atomic_load(&tp->quit))
            return NULL;
        run_chunks(tp, a->tid);
        if (atomic_fetch_sub(&tp->pending, 1) == 1)
            gen_publish(&tp->done, seen);
    }
}

threadpool *threadpool_new(int n_threads, err_t *err)
{
    if (n_threads <= 0)
        n_threads = gen_usable_cpus();
    if (n_threads > 512) {
        err_set(err, "%d threads is too many (at most 512)", n_threads);
        return NULL;
    }
    threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) {
        err_set(err, "out of memory for the thread pool");
        return NULL;
    }
    tp->n_threads = n_threads;
    atomic_init(&tp->quit, false);
    gen_spin_init(&tp->idle_spin, n_threads, SPIN_MIN_NS, IDLE_SPIN_MAX_NS);
    gen_spin_init(&tp->done_spin, n_threads, SPIN_MIN_NS, DONE_SPIN_MAX_NS);
    gen_word_init(&tp->generation, 0);
    gen_word_init(&tp->done, 0);
    atomic_init(&tp->next, 0);
    atomic_init(&tp->pending, 0);
    int n_workers = n_threads - 1;
    tp->threads = calloc((size_t)n_workers + 1, sizeof *tp->threads);
    tp->args = calloc((size_t)n_workers + 1, sizeof *tp->args);
    if (!tp->threads || !tp->args) {
        tp->n_threads = 1;
        threadpool_free(tp);
        err_set(err, "out of memory for the thread pool");
        return NULL;
    }
    for (int i = 0; i < n_workers; i++) {
        tp->args[i] = (worker_arg){tp, i + 1};
        int rc = pthread_create(&tp->threads[i], NULL, worker_main, &tp->args[i]);
        if (rc != 0) {
            tp->n_threads = i + 1; /* the ones that did start */
            threadpool_free(tp);
            err_set(err, "cannot start thread %d of %d: %s", i + 2, n_threads, strerror(rc));
            return NULL;
        }
    }
    return tp;
}

void threadpool_free(threadpool *tp)
{
    if (!tp)
        return;
    atomic_store(&tp->quit, true);
    gen_publish(&tp->generation, atomic_load_explicit(&tp->generation.value, memory_order_relaxed) + 1);
    for (int i = 0; i < tp->n_threads - 1; i++)
        pthread_join(tp->threads[i], NULL);
    free(tp->threads);
    free(tp->args);
    free(tp);
}

int threadpool_size(const threadpool *tp)
{
    return tp ? tp->n_threads : 1;
}

void threadpool_for(threadpool *tp, uint64_t n, uint64_t grain, threadpool_fn fn, void *ctx)
{
    if (n == 0)
        return;
    int nt = threadpool_size(tp);
    if (grain == 0) {
        /* a few chunks per thread balances uneven rows without much traffic */
        grain = (n + (uint64_t)nt * 4 - 1) / ((uint64_t)nt * 4);
        if (grain == 0)
            grain = 1;
    }
    if (nt == 1 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    tp->fn = fn;
    tp->ctx = ctx;
    tp->n = n;
    tp->grain = grain;
    atomic_store(&tp->next, 0);
    atomic_store(&tp->pending, nt - 1);
    /* the loop's fields reach the workers through the release of the publish */
    unsigned gen = atomic_load_explicit(&tp->generation.value, memory_order_relaxed) + 1;
    gen_publish(&tp->generation, gen);
    run_chunks(tp, 0);
    /* done holds gen - 1 until the last worker is out of this loop */
    gen_wait(&tp->done, gen - 1, &tp->done_spin);
}
