/* test_cpu_pool.c: the fast CPU backend's threads (core/cpu/cpu_pool.h): every
 * thread runs the body, barriers order the steps (what one thread wrote
 * before a barrier every thread reads after it), cpu_pool_take hands out
 * each index of a step exactly once and starts afresh after every barrier,
 * and a pool of one thread, more threads than cores, and runs after the
 * workers went to sleep all work; thousands of barriers with more threads
 * than cores keep every step's writes visible after it.  On a loaded 2-core
 * machine these runs oversubscribe the CPU: the pool must still finish (its
 * waits sleep after a short poll). */
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "cpu/cpu_pool.h"
#include "testlib.h"

enum { MAX_T = 16, STEPS = 40, ITEMS = 1000 };

typedef struct {
    cpu_pool *p;
    int ran[MAX_T];                  /* runs per thread */
    int n_threads_seen[MAX_T];
    uint64_t slot[STEPS][MAX_T];     /* step s: what thread t wrote before the barrier */
    bool order_ok[MAX_T];
    atomic_int taken[STEPS][ITEMS];  /* how often each index of a step was handed out */
} ctx_t;

static void body(void *arg, int tid, int nth)
{
    ctx_t *c = arg;
    c->ran[tid]++;
    c->n_threads_seen[tid] = nth;
    bool ok = true;
    for (int s = 0; s < STEPS; s++) {
        c->slot[s][tid] = (uint64_t)(s * 1000 + tid);
        for (uint64_t i = cpu_pool_take(c->p, 7); i < ITEMS; i = cpu_pool_take(c->p, 7))
            for (uint64_t k = i; k < i + 7 && k < ITEMS; k++)
                atomic_fetch_add(&c->taken[s][k], 1);
        cpu_pool_barrier(c->p);
        /* after the barrier: every thread's write of this step is visible */
        for (int t = 0; t < nth; t++)
            ok &= c->slot[s][t] == (uint64_t)(s * 1000 + t);
    }
    c->order_ok[tid] = ok;
}

static void run_and_check(int threads, int runs)
{
    err_t err;
    cpu_pool *p = cpu_pool_new(threads, &err);
    CHECK(p != NULL, "cpu_pool_new(%d): %.200s", threads, err.msg);
    if (!p)
        return;
    int nth = cpu_pool_size(p);
    CHECK(nth == threads, "%d threads asked, %d made", threads, nth);
    static ctx_t c;
    for (int r = 0; r < runs; r++) {
        memset(&c, 0, sizeof c);
        c.p = p;
        cpu_pool_run(p, body, &c);
        for (int t = 0; t < nth; t++) {
            CHECK(c.ran[t] == 1 && c.n_threads_seen[t] == nth, "run %d: thread %d ran %d times", r, t, c.ran[t]);
            CHECK(c.order_ok[t], "run %d: thread %d saw a step's writes late", r, t);
        }
        for (int s = 0; s < STEPS; s++)
            for (int i = 0; i < ITEMS; i++)
                if (atomic_load(&c.taken[s][i]) != 1) {
                    CHECK(0, "run %d step %d: index %d handed out %d times", r, s, i, atomic_load(&c.taken[s][i]));
                    s = STEPS;
                    break;
                }
    }
    cpu_pool_free(p);
}

static void test_one_thread(void) { run_and_check(1, 3); }
static void test_two_threads_many_runs(void) { run_and_check(2, 50); }
static void test_more_threads_than_cores(void) { run_and_check(MAX_T, 5); }

/* Between runs the workers spin a while, then sleep on a condition
 * variable; a run after they slept must wake them all.  Waiting for a
 * clock to pass (busy, not a sleep) is past the spin on any machine. */
static void test_run_after_the_workers_slept(void)
{
    err_t err;
    cpu_pool *p = cpu_pool_new(4, &err);
    CHECK(p != NULL, "%.200s", err.msg);
    if (!p)
        return;
    static ctx_t c;
    for (int r = 0; r < 3; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        do /* past the pool's 0.3 ms spin, by a wide margin */
            clock_gettime(CLOCK_MONOTONIC, &b);
        while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 20e6);
        memset(&c, 0, sizeof c);
        c.p = p;
        cpu_pool_run(p, body, &c);
        for (int t = 0; t < 4; t++)
            CHECK(c.ran[t] == 1 && c.order_ok[t], "run %d after a pause: thread %d", r, t);
    }
    cpu_pool_free(p);
}

/* Thousands of barriers with more threads than cores (8 on the 2-core CI
 * machine): each step every thread writes its own slot, and after the
 * barrier checks every other thread's slot of that step.  Two slot rows
 * alternate, so a thread that ran ahead would overwrite a row only after
 * the next barrier, which waits for the slow readers.  Then many short
 * runs, so that the workers' wait for the next run (and its sleep) is
 * crossed as often.  Plain (non-atomic) slots: under TSan a missing
 * happens-before is a reported race. */
enum { STRESS_T = 8, STRESS_STEPS = 2000, STRESS_RUNS = 125, STRESS_RUN_STEPS = 8 };

typedef struct {
    cpu_pool *p;
    int steps;
    unsigned slot[2][STRESS_T];
    int stale[STRESS_T]; /* slots seen with another step's value */
} stress_ctx;

static void stress_body(void *arg, int tid, int nth)
{
    stress_ctx *c = arg;
    for (int s = 0; s < c->steps; s++) {
        c->slot[s & 1][tid] = (unsigned)s * 64u + (unsigned)tid;
        cpu_pool_barrier(c->p);
        for (int t = 0; t < nth; t++)
            c->stale[tid] += c->slot[s & 1][t] != (unsigned)s * 64u + (unsigned)t;
    }
}

static void test_barrier_stress_more_threads_than_cores(void)
{
    err_t err;
    cpu_pool *p = cpu_pool_new(STRESS_T, &err);
    CHECK(p != NULL, "%.200s", err.msg);
    if (!p)
        return;
    static stress_ctx c;
    for (int r = 0; r <= STRESS_RUNS; r++) {
        memset(&c, 0, sizeof c);
        c.p = p;
        c.steps = r == 0 ? STRESS_STEPS : STRESS_RUN_STEPS;
        cpu_pool_run(p, stress_body, &c);
        for (int t = 0; t < STRESS_T; t++)
            if (c.stale[t]) {
                CHECK(0, "run %d: thread %d saw %d slots of another step", r, t, c.stale[t]);
                r = STRESS_RUNS;
                break;
            }
    }
    cpu_pool_free(p);
}

static void test_bad_thread_count(void)
{
    err_t err;
    CHECK(cpu_pool_new(100000, &err) == NULL && strstr(err.msg, "too many"), "100000 threads: %.200s", err.msg);
    cpu_pool *p = cpu_pool_new(0, &err); /* one per CPU */
    CHECK(p != NULL && cpu_pool_size(p) >= 1, "0 threads: %.200s", err.msg);
    cpu_pool_free(p);
}

int main(void)
{
    RUN(test_one_thread);
    RUN(test_two_threads_many_runs);
    RUN(test_more_threads_than_cores);
    RUN(test_run_after_the_workers_slept);
    RUN(test_barrier_stress_more_threads_than_cores);
    RUN(test_bad_thread_count);
    TESTS_DONE();
}
