/* gen_wait.h: waiting for a generation word to move on -- poll briefly,
 * then sleep in the kernel (gen_wait_).  The waits of both thread pools
 * (core/base/threadpool.c, core/cpu/cpu_pool.c): a barrier's release, the
 * next run, the end of a parallel loop.
 *
 * Why poll at all, and why not for long: a wake-up through the kernel costs
 * tens of microseconds, more than most waits at a barrier on an idle
 * machine, so a waiter first polls the word, yielding the core between
 * polls.  But when the machine has fewer free cores than the pool has
 * threads, the thread everyone waits for may be descheduled, and a poller
 * then keeps the others (and other programs) from the cores; the pools'
 * old endless spin (256 pause hints, then a yield) cost ~10x in tokens/s
 * there.  So the polling is bounded in time, the bound shrinks when recent
 * waits outlasted it (long waits: a straggler, not noise), grows back when
 * waits end inside it, and starts (and stays) short when the pool alone
 * has more threads than the CPUs the process may run on -- as libgomp drops
 * its spin count from 300,000 to 100 when threads outnumber the available
 * CPUs.
 *
 * Promises:
 *  - gen_wait() returns the word's value once it differs from `seen`, with
 *    acquire ordering: what the publisher wrote before gen_publish() is
 *    visible to the waiter after it.
 *  - No lost wake-up: a waiter asleep (or about to sleep) when the word is
 *    published is woken.  The publisher pays a system call only when some
 *    waiter sleeps.
 *  - Nothing is allocated; a gen_word is plain memory, initialised by
 *    gen_word_init(), usable by any number of waiters and one publisher at a
 *    time.
 *  - On Linux the sleep is a futex on the word; elsewhere waiters keep
 *    polling with sched_yield() (correct, only slower when oversubscribed).
 */
#ifndef GLM_GEN_WAIT_H
#define GLM_GEN_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

/* The word and its sleepers, on one cache line of their own: waiters read
 * the value, the publisher writes it and reads the sleeper count. */
typedef struct {
    _Alignas(64) atomic_uint value;
    atomic_uint sleepers; /* waiters between deciding to sleep and waking */
} gen_word;

/* How long waiters poll before they sleep: spin_ns adapts between min_ns
 * and max_ns, shared by the waiters of one pool (relaxed: a lost update
 * only delays the adaptation by one wait). */
typedef struct {
    atomic_uint spin_ns;
    unsigned min_ns, max_ns;
} gen_spin;

void gen_word_init(gen_word *w, unsigned value);

/* The policy for a pool of n_threads (the caller included), with
 * 0 < min_ns <= max_ns: max_ns when the threads fit the CPUs this process
 * may use, min_ns (both bounds) when they do not. */
void gen_spin_init(gen_spin *s, int n_threads, unsigned min_ns, unsigned max_ns);

/* The budget after a wait of wait_ns that began with `budget`: doubled
 * (at most max_ns) when the wait would have fitted in max_ns, halved (at
 * least min_ns) when it did not. */
unsigned gen_spin_next(const gen_spin *s, unsigned budget, uint64_t wait_ns);

/* Blocks until w's value differs from `seen`; returns that value. */
unsigned gen_wait(gen_word *w, unsigned seen, gen_spin *s);

/* Stores `value` (release) and wakes every sleeping waiter. */
void gen_publish(gen_word *w, unsigned value);

/* The CPUs this process may run on (sched_getaffinity; the online count
 * where that is unavailable), at least 1. */
int gen_usable_cpus(void);

#endif
