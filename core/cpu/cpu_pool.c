/* cpu_pool.c: persistent threads running one function per forward pass,
 * with barriers between its steps (cpu_pool.h).
 *
 * The barrier: each thread reads the generation, then adds one to the
 * arrival count; the last to arrive resets the count and the step's work
 * counter and publishes the next generation, which the others wait for.
 * Reading the generation before arriving is what makes it safe: it cannot
 * change until this thread has arrived.  The waits (here and for the next
 * run) poll briefly, yielding the core, then sleep on a futex
 * (core/base/gen_wait.h says why and how long).
 *
 * Why the counters sit on their own cache lines: every thread writes the
 * arrival count and the work counter, and none of them should drag the
 * read-mostly fields (fn, ctx, sizes) along from core to core. */
#include "cpu_pool.h"
#include "base/gen_wait.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Poll budgets (gen_wait.h).  Where the pool's threads fit the CPUs the
 * process may use, the budgets are fixed, long enough that an idle
 * machine's waits stay polls as they were before the pool could sleep: a
 * barrier polls up to BARRIER_SPIN_MAX_NS (a step's imbalance among 16
 * threads, the CPU's experts of a host layer included, is well under it),
 * a worker between runs IDLE_SPIN_MAX_NS (the spin the pool had before it
 * slept on a condition variable: with experts in host memory the GPU's
 * part of a layer runs meanwhile).  Only a pool with more threads than
 * CPUs starts at SPIN_MIN_NS and adapts (gen_wait.h): that is where a
 * straggler is descheduled for whole time slices.  Both fixed budgets are
 * what the 16-core host measured before (runs 37-40) until an A/B there
 * (tests/bench/pool_ab.sh) shows that shorter ones cost nothing. */
#define BARRIER_SPIN_MAX_NS 1000000
#define IDLE_SPIN_MAX_NS 300000
#define SPIN_MIN_NS 2000

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
    atomic_bool quit;
    alignas(64) gen_spin run_spin;
    gen_spin bar_spin;
    gen_word run_gen;
    gen_word bar_gen;
    alignas(64) atomic_uint bar_count;
    alignas(64) atomic_uint_fast64_t next;
};

void cpu_pool_barrier(cpu_pool *p)
{
    if (p->n_threads == 1) {
        atomic_store_explicit(&p->next, 0, memory_order_relaxed);
        return;
    }
    unsigned gen = atomic_load_explicit(&p->bar_gen.value, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == (unsigned)p->n_threads - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&p->next, 0, memory_order_relaxed);
        gen_publish(&p->bar_gen, gen + 1);
        return;
    }
    gen_wait(&p->bar_gen, gen, &p->bar_spin);
}

uint64_t cpu_pool_take(cpu_pool *p, uint64_t chunk)
{
    return atomic_fetch_add_explicit(&p->next, chunk, memory_order_relaxed);
}

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    cpu_pool *p = a->p;
    unsigned seen = 0;
    for (;;) {
        seen = gen_wait(&p->run_gen, seen, &p->run_spin);
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
    /* fn and ctx reach the workers through the release of the publish */
    gen_publish(&p->run_gen, atomic_load_explicit(&p->run_gen.value, memory_order_relaxed) + 1);
    fn(ctx, 0, p->n_threads);
    cpu_pool_barrier(p);
}

cpu_pool *cpu_pool_new(int n_threads, err_t *err)
{
    if (n_threads <= 0)
        n_threads = gen_usable_cpus();
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
    atomic_init(&p->quit, false);
    bool fits = n_threads <= gen_usable_cpus();
    gen_spin_init(&p->run_spin, n_threads, fits ? IDLE_SPIN_MAX_NS : SPIN_MIN_NS, IDLE_SPIN_MAX_NS);
    gen_spin_init(&p->bar_spin, n_threads, fits ? BARRIER_SPIN_MAX_NS : SPIN_MIN_NS, BARRIER_SPIN_MAX_NS);
    gen_word_init(&p->run_gen, 0);
    gen_word_init(&p->bar_gen, 0);
    atomic_init(&p->bar_count, 0);
    atomic_init(&p->next, 0);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->args = calloc((size_t)n_threads, sizeof *p->args);
    if (!p->threads || !p->args) {
        cpu_pool_free(p);
        err_set(err, "out of memory for the thread pool");
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        p->args[i] = (worker_arg){p, i};
        int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]);
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
    atomic_store(&p->quit, true);
    gen_publish(&p->run_gen, atomic_load_explicit(&p->run_gen.value, memory_order_relaxed) + 1);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->args);
    free(p);
}

int cpu_pool_size(const cpu_pool *p)
{
    return p ? p->n_threads : 1;
}
