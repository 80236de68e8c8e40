/* spin.h: what a thread that spins on a shared word needs -- the CPU's
 * pause hint between polls and a monotonic clock in nanoseconds to bound
 * the spin.  Shared by the thread pools' waits (core/base/gen_wait.c: the
 * clock) and the Vulkan host's fence and semaphore polls (gpu/vk_device.c,
 * gpu/vk_hostmoe_linked.c).
 *
 * Promises:
 *  - spin_pause() only hints the core (x86 pause, arm64 yield; nothing
 *    elsewhere): it never sleeps or yields the thread;
 *  - mono_ns() is CLOCK_MONOTONIC, never goes back. */
#ifndef GLM_SPIN_H
#define GLM_SPIN_H

#include <stdint.h>
#include <time.h>

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
