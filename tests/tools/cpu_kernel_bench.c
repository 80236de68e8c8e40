/* cpu_kernel_bench: one thread's speed of the fast CPU kernels, per weight
 * type and kernel set (core/cpu/cpu_kernels.h).
 *
 *   cpu_kernel_bench [-n ROW_LENGTH] [-m MIB] [-t TYPES] [-s SETS] [-r SECONDS]
 *
 * For each type: a weight matrix of MIB mebibytes (default 64: larger than
 * the caches, so a mat-vec streams it from memory as decode does; -m 0.25
 * keeps it in L2 to see the kernel's own limit) times prepared activations:
 *   mv  one token (decode): weight GB/s;
 *   mm4 tiles of 4 tokens, mm tiles of CPU_TILE_TOK tokens (8; prompt): GMAC/s
 *       (multiply-adds per second).
 * A type with a packed form in the set (cpu_pack.h: Q4_0 on x86, MXFP4 on avx2, avxvnni and avx512vnni, Q5_0, Q8_0 and IQ4_NL on avx512vnni) has a
 * second line, TYPE/p: the same rows packed, 16 rows a call.
 * Best of repeated passes over about -r seconds (default 0.3).  Figures
 * only, for tuning and the performance log; nothing passes or fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_pack.h"
#include "model/synth.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int usage(void)
{
    fprintf(stderr, "usage: cpu_kernel_bench [-n ROW_LENGTH] [-m MIB] [-t Q4_0,Q4_K,...] [-s avx2,...] [-r SECONDS]\n");
    return 2;
}

static bool listed(const char *list, const char *name)
{
    if (!list)
        return true;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return true;
    return false;
}

/* Best seconds of one pass over the rows, 16 rows a call (as the forward
 * pass's groups). */
static double best_pass(const cpu_kernels *k, uint32_t type, const uint8_t *w, uint64_t rb, uint64_t rows,
                        const void *const *x, int nt, uint64_t n, double budget, float *out)
{
    double best = 1e30, start = now_s();
    float *y[CPU_TILE_TOK];
    for (int t = 0; t < CPU_TILE_TOK; t++)
        y[t] = out + t * 16;
    do {
        double t0 = now_s();
        for (uint64_t r = 0; r < rows; r += 16)
            cpu_kernels_rows(k, type, w + r * rb, rb, rows - r < 16 ? rows - r : 16, x, nt, n, y, true);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    } while (now_s() - start < budget);
    return best;
}

/* The same over packed rows (cpu_pack.h), one 16-row group a call. */
static double best_pass_packed(const cpu_kernels *k, uint32_t type, const uint8_t *pk, uint64_t gb, uint64_t groups,
                               const void *const *x, int nt, uint64_t n, double budget, float *out)
{
    double best = 1e30, start = now_s();
    float *y[CPU_TILE_TOK];
    for (int t = 0; t < CPU_TILE_TOK; t++)
        y[t] = out + t * 16;
    do {
        double t0 = now_s();
        for (uint64_t g = 0; g < groups; g++)
            k->type[type].packed(pk + g * gb, gb, 1, x, nt, n, y, true);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    } while (now_s() - start < budget);
    return best;
}

int main(int argc, char **argv)
{
    uint64_t n = 2048;
    double mib = 64, budget = 0.3;
    const char *types = NULL, *set_list = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], "-n"))
            n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-m"))
            mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "-t"))
            types = argv[++i];
        else if (!strcmp(argv[i], "-s"))
            set_list = argv[++i];
        else if (!strcmp(argv[i], "-r"))
            budget = atof(argv[++i]);
        else
            return usage();
    }
    if (n == 0 || n % 256 || mib <= 0)
        return usage();
    static const uint32_t all[] = {QT_Q4_0,   QT_Q4_1,  QT_Q5_0,   QT_Q5_1,    QT_Q8_0,  QT_Q4_K,  QT_Q5_K,
                                   QT_Q6_K,   QT_IQ4_XS, QT_IQ4_NL, QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS,
                                   QT_IQ3_S,  QT_IQ1_S, QT_IQ1_M,  QT_MXFP4,   QT_Q2_K,  QT_Q3_K,  QT_F16,
                                   QT_BF16,   QT_F32};
    float sink[16 * CPU_TILE_TOK] = {0}; /* 16 rows x the tile of outputs */
    printf("%-10s %-7s %9s %9s %10s %10s\n", "set", "type", "mv GB/s", "mv ns/row", "mm4 GMAC/s", "mm GMAC/s");
    for (int s = 0; s < CPU_ISA_COUNT; s++) {
        const cpu_kernels *k = cpu_kernels_get((cpu_isa)s);
        if (!k || !listed(set_list, cpu_isa_name((cpu_isa)s)))
            continue;
        for (size_t ti = 0; ti < sizeof all / sizeof all[0]; ti++) {
            uint32_t type = all[ti];
            const quant_traits *tr = quant_traits_of(type);
            if (!listed(types, tr->name))
                continue;
            uint64_t rb;
            quant_row_bytes(type, n, &rb);
            uint64_t rows = (uint64_t)(mib * 1048576.0 / (double)rb);
            rows = rows ? rows : 1;
            uint8_t *w = malloc(rows * rb);
            cpu_act_kind ak = cpu_kernels_act(k, type);
            uint64_t ab = cpu_act_row_bytes(ak, n);
            uint8_t *act = aligned_alloc(64, CPU_TILE_TOK * ab);
            float *xf = malloc(n * sizeof(float));
            if (!w || !act || !xf) {
                fprintf(stderr, "cpu_kernel_bench: out of memory\n");
                return 1;
            }
            synth_tensor st = {.type = type, .n_dims = 2, .ne = {n, rows, 1, 1}, .kind = SYNTH_WEIGHT, .rms = 0.02f};
            synth_fill_blocks(&st, 7, 1, 0, rows * n / tr->block_elems, w);
            const void *x[CPU_TILE_TOK];
            for (int t = 0; t < CPU_TILE_TOK; t++) {
                for (uint64_t i = 0; i < n; i++)
                    xf[i] = sinf((float)(i * 7 + t));
                k->prepare[ak](xf, n, 0, n, act + t * ab);
                x[t] = act + t * ab;
            }
            double mv = best_pass(k, type, w, rb, rows, x, 1, n, budget, sink);
            double mm4 = best_pass(k, type, w, rb, rows, x, 4, n, budget, sink);
            double mm = best_pass(k, type, w, rb, rows, x, CPU_TILE_TOK, n, budget, sink);
            printf("%-10s %-7s %9.2f %9.1f %10.2f %10.2f\n", k->name, tr->name, (double)rows * rb / mv / 1e9,
                   mv / rows * 1e9, (double)rows * n * 4 / mm4 / 1e9, (double)rows * n * CPU_TILE_TOK / mm / 1e9);
            fflush(stdout);
            mtensor mt = {.type = type, .n_dims = 2, .ne = {n, rows, 1, 1}, .nb1 = rb, .nb2 = rb * rows, .data = w};
            uint8_t *pk = cpu_pack_wanted(k, &mt) && rows >= CPU_PACK_ROWS ? aligned_alloc(64, (cpu_pack_bytes(&mt) + 63) / 64 * 64) : NULL;
            if (pk) {
                const uint64_t gb = cpu_pack_group_bytes(&mt), groups = rows / CPU_PACK_ROWS;
                cpu_pack_rows(&mt, pk, 0, cpu_pack_groups(&mt));
                double pv = best_pass_packed(k, type, pk, gb, groups, x, 1, n, budget, sink);
                double pm4 = best_pass_packed(k, type, pk, gb, groups, x, 4, n, budget, sink);
                double pm = best_pass_packed(k, type, pk, gb, groups, x, CPU_TILE_TOK, n, budget, sink);
                const double pr = (double)groups * CPU_PACK_ROWS;
                printf("%-10s %-5s/p %9.2f %9.1f %10.2f %10.2f\n", k->name, tr->name, pr * rb / pv / 1e9, pv / pr * 1e9,
                       pr * n * 4 / pm4 / 1e9, pr * n * CPU_TILE_TOK / pm / 1e9);
                fflush(stdout);
                free(pk);
            }
            free(w);
            free(act);
            free(xf);
        }
    }
    return sink[0] == 12345.f; /* keeps the results alive */
}
