/* gen_wait.c: poll, then sleep, until a generation word moves on
 * (gen_wait.h).
 *
 * No lost wake-up, why: a waiter that gives up spinning first counts itself
 * in `sleepers`, then reads the word again, then asks the kernel to sleep
 * only while the word still holds `seen` (the futex compares inside the
 * kernel, atomically with queueing the waiter).  The publisher stores the
 * word, then reads `sleepers`.  All four are sequentially consistent, so
 * one order contains them: either the waiter's read of the word comes after
 * the store (it sees the new value and does not sleep), or the publisher's
 * read of `sleepers` comes after the waiter's increment (it wakes it).  A
 * waiter woken for nothing (a signal, a stale count) reads again and sleeps
 * again.
 *
 * Why every poll yields the core: the thread being waited for is often
 * runnable on this very core (a wake-up lands near the waker), so a poll
 * without a yield holds back what it waits for.  Polling with pause hints
 * between yields was measurably slower on a loaded 2-core machine (a
 * microsecond of pauses first: ~half the tokens/s at 4 threads); a yield
 * with nothing else to run costs well under a microsecond, little beside the
 * hundreds of microseconds a step of a big model's token takes.
 *
 * The adaptation: each wait's whole length (polls and sleep) is compared
 * with the longest poll allowed.  Waits that would have fitted in it grow
 * the budget (doubling), waits longer than it shrink it (halving): on a
 * machine where stragglers are descheduled for whole time slices, waiters
 * soon sleep after a couple of microseconds; once waits are short again the
 * budget is back at its ceiling after a handful of them. */
#include "gen_wait.h"
#include "spin.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#ifdef __linux__
static void sleep_while_equal(atomic_uint *word, unsigned seen)
{
    long rc = syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    /* EAGAIN: the word had already moved; EINTR: a signal.  Anything else
     * (a sandbox that forbids futexes) must not turn the caller's loop
     * into a hard spin. */
    if (rc == -1 && errno != EAGAIN && errno != EINTR)
        sched_yield();
}

static void wake_all(atomic_uint *word)
{
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#else
static void sleep_while_equal(atomic_uint *word, unsigned seen)
{
    (void)word;
    (void)seen;
    sched_yield();
}

static void wake_all(atomic_uint *word)
{
    (void)word;
}
#endif

void gen_word_init(gen_word *w, unsigned value)
{
    atomic_init(&w->value, value);
    atomic_init(&w->sleepers, 0);
}

int gen_usable_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1024 ? (int)n : 1;
}

void gen_spin_init(gen_spin *s, int n_threads, unsigned min_ns, unsigned max_ns)
{
    if (n_threads > gen_usable_cpus())
        max_ns = min_ns;
    s->min_ns = min_ns;
    s->max_ns = max_ns;
    atomic_init(&s->spin_ns, max_ns);
}

unsigned gen_spin_next(const gen_spin *s, unsigned budget, uint64_t wait_ns)
{
    if (wait_ns <= s->max_ns)
        return budget > s->max_ns / 2 ? s->max_ns : budget * 2;
    return budget / 2 < s->min_ns ? s->min_ns : budget / 2;
}

/* Stores only on a change, so that steady short waits leave the line
 * shared and clean. */
static void adapt(gen_spin *s, unsigned budget, uint64_t wait_ns)
{
    unsigned next = gen_spin_next(s, budget, wait_ns);
    if (next != budget)
        atomic_store_explicit(&s->spin_ns, next, memory_order_relaxed);
}

unsigned gen_wait(gen_word *w, unsigned seen, gen_spin *s)
{
    unsigned v = atomic_load_explicit(&w->value, memory_order_acquire);
    if (v != seen)
        return v;
    unsigned budget = atomic_load_explicit(&s->spin_ns, memory_order_relaxed);
    uint64_t start = mono_ns(), now = start;
    while (now - start < budget) {
        sched_yield();
        if ((v = atomic_load_explicit(&w->value, memory_order_acquire)) != seen) {
            adapt(s, budget, mono_ns() - start);
            return v;
        }
        now = mono_ns();
    }
    atomic_fetch_add(&w->sleepers, 1);
    while ((v = atomic_load(&w->value)) == seen)
        sleep_while_equal(&w->value, seen);
    atomic_fetch_sub(&w->sleepers, 1);
    adapt(s, budget, mono_ns() - start);
    return v;
}

void gen_publish(gen_word *w, unsigned value)
{
    atomic_store(&w->value, value);
    if (atomic_load(&w->sleepers) > 0)
        wake_all(&w->value);
}
