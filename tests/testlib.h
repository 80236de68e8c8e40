/* testlib.h: the project's tiny test harness.
 *
 * A test program is a main() that calls RUN(test_fn) for each case.  Each
 * case prints one line, "ok - NAME" or "FAIL - NAME: why", which tests/run.sh
 * counts.  CHECK() records a failure with its location and keeps going
 * (so one run shows every broken expectation); a case fails if any CHECK in
 * it failed.  Paths to test data are relative to the repository root (the
 * runner's working directory). */
#ifndef GLM_TESTLIB_H
#define GLM_TESTLIB_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int tl_case_failed;
static int tl_total_failed;
static char tl_first_msg[512];

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            if (!tl_case_failed) {                                                    \
                int tl_n = snprintf(tl_first_msg, sizeof tl_first_msg, "%s:%d: ",   \
                                    __FILE__, __LINE__);                              \
                snprintf(tl_first_msg + tl_n, sizeof tl_first_msg - (size_t)tl_n,     \
                         __VA_ARGS__);                                                \
            } else {                                                                  \
                fprintf(stderr, "  also %s:%d: ", __FILE__, __LINE__);                \
                fprintf(stderr, __VA_ARGS__);                                         \
                fprintf(stderr, "\n");                                                \
            }                                                                         \
            tl_case_failed = 1;                                                       \
        }                                                                             \
    } while (0)

/* Floats: |a-b| <= tol. */
#define CHECK_NEAR(a, b, tol)                                                         \
    CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%s = %g, expected %g (tol %g)",  \
          #a, (double)(a), (double)(b), (double)(tol))

/* TEST_ONLY=substring runs only the cases whose names contain it, and
 * TEST_ONLY='a|b|c' those that contain any of a, b, c (for a quick look at
 * one kernel family, or a chosen subset: tests/t_vk_subgroups.sh). */
static inline int tl_wanted(const char *name)
{
    const char *only = getenv("TEST_ONLY");
    if (!only || !*only)
        return 1;
    while (*only) {
        const char *bar = strchr(only, '|');
        size_t n = bar ? (size_t)(bar - only) : strlen(only);
        for (const char *p = name; n && *p; p++)
            if (strncmp(p, only, n) == 0)
                return 1;
        if (!bar)
            break;
        only = bar + 1;
    }
    return 0;
}

/* TEST_SAMPLE=N runs every Nth wanted case only (the first, the N+1st, ...):
 * tests/run.sh sets it for the long kernel-case programs in the sanitizer
 * run, where what is looked for -- memory and undefined-behaviour errors
 * in our host code -- shows on any case, and the full lists run in the
 * normal build. */
static inline int tl_sampled(void)
{
    static long seen;
    const char *s = getenv("TEST_SAMPLE");
    long n = s ? strtol(s, NULL, 10) : 1;
    return n <= 1 || seen++ % n == 0;
}

/* TEST_TIMES=1 prints each case's wall time ("# NAME: 1.23 s") to stderr:
 * for finding where a slow program spends its time. */
static inline double tl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void tl_report_time(const char *name, double t0)
{
    const char *on = getenv("TEST_TIMES");
    if (on && strcmp(on, "1") == 0)
        fprintf(stderr, "# %s: %.2f s\n", name, tl_now() - t0);
}

#define RUN_NAMED(fn, name)                                                           \
    do {                                                                              \
        if (!tl_wanted(name) || !tl_sampled())                                        \
            break;                                                                    \
        tl_case_failed = 0;                                                           \
        tl_first_msg[0] = 0;                                                          \
        double tl_t0 = tl_now();                                                      \
        fn();                                                                         \
        tl_report_time(name, tl_t0);                                                  \
        if (tl_case_failed) {                                                         \
            printf("FAIL - %s: %s\n", name, tl_first_msg);                            \
            tl_total_failed++;                                                        \
        } else {                                                                      \
            printf("ok - %s\n", name);                                                \
        }                                                                             \
        fflush(stdout);                                                               \
    } while (0)

#define RUN(fn) RUN_NAMED(fn, #fn)

/* Ends main: non-zero exit when any case failed. */
#define TESTS_DONE() return tl_total_failed ? 1 : 0

#endif
