/* cpu_pool.c: persistent threads running one function per forward pass,
 * with spinning barriers between its steps (cpu_pool.h).
 *
 * The barrier: each thread reads the generation, then adds one to the
 * arrival count; the last to arrive resets the count and the step's work
 * counter and bumps the generation, which the others spin on.  Reading the
 * generation before arriving is what makes it safe: it cannot change until
 * this thread has arrived.
 *
 * Why the counters sit on their own cache lines: every thread writes the
 * arrival count and the work counter, and none of them should drag the
 * read-mostly fields (fn, ctx, sizes) along from core to core. */
#include "cpu_pool.h"
#include "base/spin.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Between runs: spin this long for the next one, then sleep. */
#define IDLE_SPIN_NS 300000
/* Spins between yields of the CPU while waiting. */
#define SPINS_PER_YIELD 256

typedef struct {
    cpu_pool *p;
    int tid;
} worker_arg;

struct cpu_pool {
    int n_threads;
    pthread_t *threads;
    worker_arg *args;
    cpu_pool_fn fn;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_sleeping; /* guarded by mu */
    alignas(64) atomic_uint run_gen;
    atomic_bool quit;
    alignas(64) atomic_uint bar_count;
    alignas(64) atomic_uint bar_gen;
    alignas(64) atomic_uint_fast64_t next;
};

void cpu_pool_barrier(cpu_pool *p)
{
    if (p->n_threads == 1) {
        atomic_store_explicit(&p->next, 0, memory_order_relaxed);
        return;
    }
    unsigned gen = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == (unsigned)p->n_threads - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&p->next, 0, memory_order_relaxed);
        atomic_store_explicit(&p->bar_gen, gen + 1, memory_order_release);
        return;
    }
    for (unsigned i = 1; atomic_load_explicit(&p->bar_gen, memory_order_acquire) == gen; i++) {
        spin_pause();
        if (i % SPINS_PER_YIELD == 0)
            sched_yield();
    }
}

uint64_t cpu_pool_take(cpu_pool *p, uint64_t chunk)
{
    return atomic_fetch_add_explicit(&p->next, chunk, memory_order_relaxed);
}

/* Waits for a run newer than `seen`; returns its generation. */
static unsigned wait_run(cpu_pool *p, unsigned seen)
{
    uint64_t start = mono_ns();
    for (unsigned i = 1;; i++) {
        unsigned g = atomic_load_explicit(&p->run_gen, memory_order_acquire);
        if (g != seen || atomic_load(&p->quit))
            return g;
        spin_pause();
        if (i % SPINS_PER_YIELD == 0) {
            sched_yield();
            if (mono_ns() - start > IDLE_SPIN_NS)
                break;
        }
    }
    unsigned g;
    pthread_mutex_lock(&p->mu);
    p->n_sleeping++;
    while ((g = atomic_load(&p->run_gen)) == seen && !atomic_load(&p->quit))
        pthread_cond_wait(&p->cv, &p->mu);
    p->n_sleeping--;
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    cpu_pool *p = a->p;
    unsigned seen = 0;
    for (;;) {
        seen = wait_run(p, seen);
        if (atomic_load(&p->quit))
            return NULL;
        p->fn(p->ctx, a->tid, p->n_threads);
        cpu_pool_barrier(p); /* the run's end */
    }
}

void cpu_pool_run(cpu_pool *p, cpu_pool_fn fn, void *ctx)
{
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    if (p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->run_gen, 1, memory_order_release);
    if (p->n_sleeping > 0)
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n_threads);
    cpu_pool_barrier(p);
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1024 ? (int)n : 1;
}

cpu_pool *cpu_pool_new(int n_threads, err_t *err)
{
    if (n_threads <= 0)
        n_threads = online_cpus();
    if (n_threads > 512) {
        err_set(err, "%d threads is too many (at most 512)", n_threads);
        return NULL;
    }
    cpu_pool *p = aligned_alloc(64, sizeof *p);
    if (!p) {
        err_set(err, "out of memory for the thread pool");
        return NULL;
    }
    memset(p, 0, sizeof *p);
    p->n_threads = 1; /* until the workers run */
    atomic_init(&p->run_gen, 0);
    atomic_init(&p->quit, false);
    atomic_init(&p->bar_count, 0);
    atomic_init(&p->bar_gen, 0);
    atomic_init(&p->next, 0);
    int rc = pthread_mutex_init(&p->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&p->cv, NULL)) != 0)
        pthread_mutex_destroy(&p->mu);
    if (rc != 0) {
        free(p);
        err_set(err, "cannot create the thread pool: %s", strerror(rc));
        return NULL;
    }
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->args = calloc((size_t)n_threads, sizeof *p->args);
    if (!p->threads || !p->args) {
        cpu_pool_free(p);
        err_set(err, "out of memory for the thread pool");
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        p->args[i] = (worker_arg){p, i};
        rc = pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]);
        if (rc != 0) {
            cpu_pool_free(p);
            err_set(err, "cannot start thread %d of %d: %s", i + 1, n_threads, strerror(rc));
            return NULL;
        }
        p->n_threads = i + 1;
    }
    return p;
}

void cpu_pool_free(cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p->args);
    free(p);
}

int cpu_pool_size(const cpu_pool *p)
{
    return p ? p->n_threads : 1;
}
