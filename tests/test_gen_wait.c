/* test_gen_wait.c: the thread pools' wait (core/base/gen_wait.h): a waiter
 * past its poll budget sleeps and the publish wakes it; no wake-up is lost
 * when every wait sleeps (thousands of hand-offs between threads that
 * outnumber the cores); the budget halves after long waits down to its
 * floor and doubles after short ones up to its ceiling; a pool with more
 * threads than CPUs starts at the floor.  A lost wake-up would hang: the
 * watchdog turns that into a failure. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "base/gen_wait.h"
#include "base/spin.h"
#include "testlib.h"

/* Far beyond what the cases take on a loaded 2-core machine (~1 s). */
#define WATCHDOG_S 120

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL - watchdog: a wait never ended (a lost wake-up?)\n";
    ssize_t rc = write(1, msg, sizeof msg - 1);
    (void)rc;
    _exit(1);
}

/* Waits (polling the condition, never a fixed sleep) until fn(arg) holds
 * or 30 s pass; returns whether it held. */
static int wait_until(int (*fn)(void *), void *arg)
{
    uint64_t start = mono_ns();
    while (!fn(arg)) {
        if (mono_ns() - start > 30000000000ull)
            return 0;
        sched_yield();
    }
    return 1;
}

typedef struct {
    gen_word word;
    gen_spin spin;
    unsigned seen, got;
} one_wait;

static void *wait_once(void *arg)
{
    one_wait *o = arg;
    o->got = gen_wait(&o->word, o->seen, &o->spin);
    return NULL;
}

static int asleep(void *arg)
{
    return atomic_load(&((one_wait *)arg)->word.sleepers) == 1;
}

/* Publishes `value` once the waiter sleeps and at least hold_ns later, and
 * returns what the waiter saw. */
static unsigned wait_and_publish(one_wait *o, unsigned value, uint64_t hold_ns)
{
    pthread_t th;
    if (pthread_create(&th, NULL, wait_once, o) != 0) {
        CHECK(0, "pthread_create failed");
        return ~0u;
    }
    CHECK(wait_until(asleep, o), "the waiter did not go to sleep within 30 s");
    uint64_t t = mono_ns();
    while (mono_ns() - t < hold_ns)
        ;
    gen_publish(&o->word, value);
    pthread_join(th, NULL);
    return o->got;
}

static void test_a_waiter_sleeps_and_the_publish_wakes_it(void)
{
    static one_wait o;
    gen_word_init(&o.word, 7);
    gen_spin_init(&o.spin, 1, 2000, 2000);
    o.seen = 7;
    unsigned got = wait_and_publish(&o, 8, 0);
    CHECK(got == 8, "the waiter returned %u, expected 8", got);
    CHECK(atomic_load(&o.word.sleepers) == 0, "%u sleepers left", atomic_load(&o.word.sleepers));
    /* a word that already moved: no wait at all */
    CHECK(gen_wait(&o.word, 7, &o.spin) == 8, "a stale `seen` must return at once");
}

/* Ping-pong over two words with the smallest budget, so that nearly every
 * hand-off sleeps: each side publishes the other's next value and waits
 * for its own.  Eight pairs on a 2-core machine oversubscribe it. */
enum { PAIRS = 8, HANDOFFS = 3000 };

typedef struct {
    gen_word ping, pong;
    gen_spin spin;
    unsigned last_ping, last_pong;
} pair;

static void *pinger(void *arg)
{
    pair *p = arg;
    for (unsigned i = 1; i <= HANDOFFS; i++) {
        gen_publish(&p->ping, i);
        p->last_pong = gen_wait(&p->pong, i - 1, &p->spin);
    }
    return NULL;
}

static void *ponger(void *arg)
{
    pair *p = arg;
    for (unsigned i = 1; i <= HANDOFFS; i++) {
        p->last_ping = gen_wait(&p->ping, i - 1, &p->spin);
        gen_publish(&p->pong, i);
    }
    return NULL;
}

static void test_no_lost_wakeup_in_sleeping_handoffs(void)
{
    static pair pairs[PAIRS];
    pthread_t th[2 * PAIRS];
    int made = 0;
    for (int k = 0; k < PAIRS; k++) {
        gen_word_init(&pairs[k].ping, 0);
        gen_word_init(&pairs[k].pong, 0);
        gen_spin_init(&pairs[k].spin, 1, 1000, 1000);
        if (pthread_create(&th[made], NULL, pinger, &pairs[k]) == 0)
            made++;
        if (pthread_create(&th[made], NULL, ponger, &pairs[k]) == 0)
            made++;
    }
    CHECK(made == 2 * PAIRS, "only %d of %d threads started", made, 2 * PAIRS);
    for (int i = 0; i < made; i++)
        pthread_join(th[i], NULL);
    for (int k = 0; k < PAIRS; k++)
        CHECK(pairs[k].last_ping == HANDOFFS && pairs[k].last_pong == HANDOFFS, "pair %d ended at %u/%u", k,
              pairs[k].last_ping, pairs[k].last_pong);
}

static void test_budget_halves_after_long_waits(void)
{
    static one_wait o;
    gen_word_init(&o.word, 0);
    gen_spin_init(&o.spin, 1, 2000, 64000);
    CHECK(atomic_load(&o.spin.spin_ns) == 64000, "starts at %u, expected the ceiling", atomic_load(&o.spin.spin_ns));
    unsigned expect[] = {32000, 16000, 8000, 4000, 2000, 2000};
    for (int i = 0; i < 6; i++) {
        o.seen = (unsigned)i;
        /* held past the ceiling after the waiter fell asleep: a long wait */
        wait_and_publish(&o, (unsigned)i + 1, 2 * 64000);
        CHECK(atomic_load(&o.spin.spin_ns) == expect[i], "after long wait %d: %u ns, expected %u", i + 1,
              atomic_load(&o.spin.spin_ns), expect[i]);
    }
}

static void test_budget_rule(void)
{
    gen_spin s;
    gen_spin_init(&s, 1, 2000, 100000);
    CHECK(gen_spin_next(&s, 100000, 5000) == 100000, "a short wait at the ceiling stays there");
    CHECK(gen_spin_next(&s, 100000, 100001) == 50000, "a long wait halves");
    CHECK(gen_spin_next(&s, 3000, 1000000) == 2000, "halving stops at the floor");
    CHECK(gen_spin_next(&s, 2000, 100000) == 4000, "a wait that fits the ceiling doubles");
    CHECK(gen_spin_next(&s, 60000, 10) == 100000, "doubling stops at the ceiling");
}

static void test_oversubscribed_pool_starts_at_the_floor(void)
{
    int cpus = gen_usable_cpus();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(cpus >= 1 && (online <= 0 || cpus <= online), "%d usable CPUs of %ld online", cpus, online);
    gen_spin s;
    gen_spin_init(&s, cpus, 2000, 100000);
    CHECK(atomic_load(&s.spin_ns) == 100000 && s.max_ns == 100000, "%d threads on %d CPUs: %u ns", cpus, cpus,
          atomic_load(&s.spin_ns));
    gen_spin_init(&s, cpus + 1, 2000, 100000);
    CHECK(atomic_load(&s.spin_ns) == 2000 && s.max_ns == 2000, "%d threads on %d CPUs: %u ns, ceiling %u",
          cpus + 1, cpus, atomic_load(&s.spin_ns), s.max_ns);
}

int main(void)
{
    signal(SIGALRM, watchdog);
    alarm(WATCHDOG_S);
    RUN(test_a_waiter_sleeps_and_the_publish_wakes_it);
    RUN(test_no_lost_wakeup_in_sleeping_handoffs);
    RUN(test_budget_halves_after_long_waits);
    RUN(test_budget_rule);
    RUN(test_oversubscribed_pool_starts_at_the_floor);
    TESTS_DONE();
}
