/* test_threadpool.c: every index of a parallel loop runs exactly once, on a
 * valid thread id, for any size, grain and thread count; the pool survives
 * thousands of back-to-back loops and wakes up after sleeping. */
#include <stdatomic.h>
#include <unistd.h>

#include "testlib.h"
#include "base/threadpool.h"

typedef struct {
    atomic_int *hits;
    int n_threads;
    atomic_int bad_tid;
    atomic_int by_thread[8];
} count_ctx;

static void count_body(void *p, uint64_t begin, uint64_t end, int tid)
{
    count_ctx *c = p;
    if (tid < 0 || tid >= c->n_threads)
        atomic_fetch_add(&c->bad_tid, 1);
    else
        atomic_fetch_add(&c->by_thread[tid], (int)(end - begin));
    for (uint64_t i = begin; i < end; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static void check_loop(threadpool *tp, uint64_t n, uint64_t grain)
{
    static atomic_int hits[5000];
    count_ctx c = {.hits = hits, .n_threads = threadpool_size(tp)};
    for (uint64_t i = 0; i < n; i++)
        atomic_store(&hits[i], 0);
    threadpool_for(tp, n, grain, count_body, &c);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < n; i++)
        wrong += atomic_load(&hits[i]) != 1;
    CHECK(wrong == 0 && atomic_load(&c.bad_tid) == 0, "n %llu grain %llu threads %d: %llu indices not run once",
          (unsigned long long)n, (unsigned long long)grain, c.n_threads, (unsigned long long)wrong);
}

static void test_every_index_once(void)
{
    for (int t = 1; t <= 4; t++) {
        err_t err;
        threadpool *tp = threadpool_new(t, &err);
        CHECK(tp && threadpool_size(tp) == t, "threadpool_new(%d): %.200s", t, tp ? "" : err.msg);
        if (!tp)
            continue;
        uint64_t sizes[] = {0, 1, 2, 7, 64, 1000, 4999};
        uint64_t grains[] = {0, 1, 3, 100, 10000};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++)
                check_loop(tp, sizes[i], grains[g]);
        threadpool_free(tp);
    }
}

static void test_many_loops_and_wake_after_sleep(void)
{
    err_t err;
    threadpool *tp = threadpool_new(3, &err);
    CHECK(tp != NULL, "%.200s", err.msg);
    if (!tp)
        return;
    for (int i = 0; i < 3000; i++)
        check_loop(tp, 97, 1);
    usleep(300000); /* longer than the spin: the workers are asleep now */
    count_ctx c = {.hits = NULL, .n_threads = 3};
    static atomic_int hits[5000];
    c.hits = hits;
    for (int i = 0; i < 600; i++)
        atomic_store(&hits[i], 0);
    threadpool_for(tp, 600, 1, count_body, &c);
    int used = 0;
    for (int t = 0; t < 3; t++)
        used += atomic_load(&c.by_thread[t]) > 0;
    CHECK(atomic_load(&c.by_thread[0]) + atomic_load(&c.by_thread[1]) + atomic_load(&c.by_thread[2]) == 600,
          "indices lost after sleeping");
    CHECK(used >= 1, "no thread ran");
    threadpool_free(tp);
}

static void test_default_size_and_limits(void)
{
    err_t err;
    threadpool *tp = threadpool_new(0, &err);
    CHECK(tp && threadpool_size(tp) >= 1, "default pool: %.200s", tp ? "" : err.msg);
    threadpool_free(tp);
    CHECK(threadpool_new(100000, &err) == NULL && strstr(err.msg, "too many"), "100000 threads accepted");
    threadpool_free(NULL);
}

int main(void)
{
    RUN(test_every_index_once);
    RUN(test_many_loops_and_wake_after_sleep);
    RUN(test_default_size_and_limits);
    TESTS_DONE();
}
