/* quant_bench: throughput of the CPU matrix-vector kernels (quant_matvec).
 *
 *   quant_bench [-n COLS] [-r ROWS] [-s SECONDS] [TYPE...]
 *
 * For each type: a ROWS x COLS matrix of random blocks (large enough by
 * default to stream from DRAM, as the model's weights do), multiplied with
 * a random vector repeatedly for about SECONDS.  Prints, per kernel set
 * (avx2 where the CPU has it, portable, and the scalar oracle quant_dot_row
 * for reference): time per matvec, rows/s, weight GB/s and the speed-up over
 * the oracle.  Single-threaded, like quant_matvec itself. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/quant.h"
#include "format/quant_fast.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x243F6A8885A308D3ULL;

static uint64_t next_u64(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static float next_float(void) /* [-1, 1) */
{
    return (float)((int64_t)(next_u64() >> 40) - (1 << 23)) * 0x1p-23f;
}

typedef enum { IMPL_AVX2, IMPL_PORTABLE, IMPL_ORACLE } impl;

static void matvec_with(impl k, uint32_t type, const uint8_t *w, uint64_t rb, uint64_t rows,
                        const float *x, uint64_t n, float *y)
{
    if (k == IMPL_ORACLE) {
        for (uint64_t r = 0; r < rows; r++)
            y[r] = quant_dot_row(type, w + r * rb, x, n);
        return;
    }
    quant_kernels_matvec(k == IMPL_AVX2 ? QUANT_KERNELS_AVX2 : QUANT_KERNELS_PORTABLE, type, w, rb,
                         rows, x, n, y);
}

/* Seconds per matvec: repeats until `budget` seconds have passed (at least
 * 3 runs after a warm-up run), keeps the best. */
static double time_matvec(impl k, uint32_t type, const uint8_t *w, uint64_t rb, uint64_t rows,
                          const float *x, uint64_t n, float *y, double budget)
{
    matvec_with(k, type, w, rb, rows, x, n, y);
    double best = 1e30, start = now_s();
    for (int it = 0; it < 3 || now_s() - start < budget; it++) {
        double t0 = now_s();
        matvec_with(k, type, w, rb, rows, x, n, y);
        double dt = now_s() - t0;
        if (dt < best)
            best = dt;
    }
    return best;
}

static int bench_type(uint32_t type, uint64_t n, uint64_t rows, double budget)
{
    const quant_traits *t = quant_traits_of(type);
    uint64_t rb = 0;
    if (!t || !t->can_quantize || !quant_row_bytes(type, n, &rb)) {
        fprintf(stderr, "quant_bench: %s: no quantizer or %" PRIu64 " not a multiple of %u\n",
                quant_type_name(type), n, t ? t->block_elems : 0);
        return -1;
    }
    uint8_t *w = malloc(rb * rows);
    float *x = malloc(n * sizeof *x), *y = malloc(rows * sizeof *y);
    float *tmp = malloc(n * sizeof *tmp);
    if (!w || !x || !y || !tmp) {
        fprintf(stderr, "quant_bench: out of memory\n");
        return -1;
    }
    /* Real quantized rows (random values through the quantizer), so every
     * scale and level is plausible. */
    for (uint64_t r = 0; r < rows; r++) {
        for (uint64_t i = 0; i < n; i++)
            tmp[i] = next_float() * 0.05f;
        quant_quantize_row(type, tmp, w + r * rb, n);
    }
    for (uint64_t i = 0; i < n; i++)
        x[i] = next_float();
    double oracle = 0;
    const char *names[] = {"avx2", "portable", "oracle"};
    for (int k = IMPL_ORACLE; k >= IMPL_AVX2; k--) {
        if (k == IMPL_AVX2 && !quant_kernels_available(QUANT_KERNELS_AVX2))
            continue;
        double s = time_matvec((impl)k, type, w, rb, rows, x, n, y, budget);
        if (k == IMPL_ORACLE)
            oracle = s;
        printf("%-5s %-8s %6" PRIu64 " x %-6" PRIu64 " %9.3f ms  %11.0f rows/s  %6.2f GB/s  x%.1f\n",
               t->name, names[k], rows, n, s * 1e3, (double)rows / s, (double)(rb * rows) / s / 1e9,
               oracle / s);
    }
    free(w);
    free(x);
    free(y);
    free(tmp);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t n = 2048, rows = 16384;
    double seconds = 1.0;
    int first_type = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            n = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            rows = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            seconds = strtod(argv[++i], NULL);
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: quant_bench [-n COLS] [-r ROWS] [-s SECONDS] [TYPE...]\n");
            return 2;
        } else {
            first_type = i;
            break;
        }
    }
    if (n == 0 || rows == 0) {
        fprintf(stderr, "quant_bench: -n and -r must be positive\n");
        return 2;
    }
    printf("# quant_matvec kernels on this CPU: %s; one thread\n", quant_cpu_kernels());
    static const char *defaults[] = {"Q4_0", "Q6_K", "Q4_K", "Q8_0", "Q5_0", "F16"};
    int status = 0;
    if (first_type == argc) {
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
            status |= bench_type((uint32_t)quant_type_from_name(defaults[i]), n, rows, seconds);
    }
    for (int i = first_type; i < argc; i++) {
        int type = quant_type_from_name(argv[i]);
        if (type < 0) {
            fprintf(stderr, "quant_bench: unknown type '%s'\n", argv[i]);
            return 2;
        }
        status |= bench_type((uint32_t)type, n, rows, seconds);
    }
    return status ? 1 : 0;
}
