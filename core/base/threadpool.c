/* threadpool.c: persistent workers behind a parallel-for.
 *
 * A call publishes the loop (body, range, grain) and bumps a generation
 * counter; workers notice it, take chunks from a shared atomic cursor, and
 * decrement a pending count when the cursor runs out.  The forward pass makes
 * hundreds of short calls per token, so workers spin (then yield) for about
 * SPIN_NS before they block on the condition variable: a wake-up through the
 * kernel (50-100 us on a VM) would cost more than many of the loops
 * themselves, while the serial work between two loops of a token is shorter
 * than the spin. */
#include "threadpool.h"
#include "base/spin.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS 200000 /* then sleep */

typedef struct {
    threadpool *tp;
    int tid;
} worker_arg;

struct threadpool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_sleeping;      /* guarded by mu */
    atomic_uint generation;
    atomic_bool quit;
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

/* Waits until the generation differs from `seen`; returns the new one. */
static unsigned wait_generation(threadpool *tp, unsigned seen)
{
    unsigned g;
    uint64_t start = mono_ns();
    for (unsigned i = 1;; i++) {
        g = atomic_load(&tp->generation);
        if (g != seen || atomic_load(&tp->quit))
            return g;
        spin_pause();
        if (i % 256 == 0) { /* more threads than cores: let others run */
            sched_yield();
            if (mono_ns() - start > SPIN_NS)
                break;
        }
    }
    pthread_mutex_lock(&tp->mu);
    tp->n_sleeping++;
    while ((g = atomic_load(&tp->generation)) == seen && !atomic_load(&tp->quit))
        pthread_cond_wait(&tp->cv, &tp->mu);
    tp->n_sleeping--;
    pthread_mutex_unlock(&tp->mu);
    return g;
}

static void *worker_main(void *p)
{
    worker_arg *a = p;
    threadpool *tp = a->tp;
    unsigned seen = 0;
    for (;;) {
        seen = wait_generation(tp, seen);
        if (atomic_load(&tp->quit))
            return NULL;
        run_chunks(tp, a->tid);
        atomic_fetch_sub(&tp->pending, 1);
    }
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1024 ? (int)n : 1;
}

threadpool *threadpool_new(int n_threads, err_t *err)
{
    if (n_threads <= 0)
        n_threads = online_cpus();
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
    atomic_init(&tp->generation, 0);
    atomic_init(&tp->quit, false);
    atomic_init(&tp->next, 0);
    atomic_init(&tp->pending, 0);
    int rc = pthread_mutex_init(&tp->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&tp->cv, NULL)) != 0)
        pthread_mutex_destroy(&tp->mu);
    if (rc != 0) {
        free(tp);
        err_set(err, "cannot create the thread pool: %s", strerror(rc));
        return NULL;
    }
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
        rc = pthread_create(&tp->threads[i], NULL, worker_main, &tp->args[i]);
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
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->quit, true);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 0; i < tp->n_threads - 1; i++)
        pthread_join(tp->threads[i], NULL);
    pthread_cond_destroy(&tp->cv);
    pthread_mutex_destroy(&tp->mu);
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
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add(&tp->generation, 1);
    if (tp->n_sleeping > 0)
        pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    run_chunks(tp, 0);
    for (unsigned i = 1; atomic_load(&tp->pending) > 0; i++) {
        spin_pause();
        if (i % 256 == 0)
            sched_yield();
    }
}
