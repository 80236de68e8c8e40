/* cpu_bench: prefill and decode speed of a CPU backend.
 *
 *   cpu_bench MODEL [--backend cpu|ref] [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] [--kv-type f16]
 *
 * Evaluates a prompt of pseudo-random ids in one call, then decodes
 * greedily one token at a time, and prints for both phases tokens/s and
 * the process's CPU seconds per token (user + system: on a machine other
 * programs load, the work a token costs, which wall-clock figures blur),
 * then the per-step table the side pane shows (decode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine.h"

static int usage(void)
{
    fprintf(stderr, "usage: cpu_bench MODEL [--backend cpu|ref] [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] "
                    "[--kv-type f16]\n");
    return 2;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    int threads = 0;
    long np = 64, nd = 32;
    kv_type kv = KV_F32;
    const engine_backend *be = &cpu_engine_backend;
    for (int i = 2; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "-t") == 0)
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "-p") == 0)
            np = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "-n") == 0)
            nd = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--kv-type") == 0)
            kv = strcmp(argv[++i], "f16") == 0 ? KV_F16 : KV_F32;
        else if (i + 1 < argc && strcmp(argv[i], "--backend") == 0) {
            const char *b = argv[++i];
            if (strcmp(b, "cpu") && strcmp(b, "ref"))
                return usage();
            be = strcmp(b, "ref") == 0 ? &ref_engine_backend : &cpu_engine_backend;
        } else
            return usage();
    }
    if (np < 1 || nd < 1 || np > 65536 || nd > 65536)
        return usage();
    model m;
    err_t err;
    if (model_load(&m, argv[1], &err) < 0) {
        fprintf(stderr, "cpu_bench: %s\n", err.msg);
        return 1;
    }
    engine_params p;
    engine_params_default(&p);
    p.n_ctx = (uint32_t)(np + nd);
    p.n_batch = (uint32_t)np;
    p.n_threads = threads;
    p.kv = kv;
    engine e;
    if (engine_open(&e, be, &m, &p, &err) < 0) {
        fprintf(stderr, "cpu_bench: %s\n", err.msg);
        model_free(&m);
        return 1;
    }
    int32_t *tok = malloc((size_t)np * sizeof *tok);
    for (long i = 0; tok && i < np; i++)
        tok[i] = (int32_t)((i * 7919 + 13) % m.cfg.n_vocab);
    int32_t id = 0;
    float best;
    engine_output o = {.top_k = 1, .top_ids = &id, .top_logits = &best};
    double w0 = now_s(), c0 = cpu_s();
    int rc = tok ? engine_eval(&e, tok, (uint32_t)np, &o, &err) : -1;
    double w1 = now_s(), c1 = cpu_s();
    for (long i = 0; i < nd && rc == 0; i++)
        rc = engine_eval(&e, &id, 1, &o, &err);
    double w2 = now_s(), c2 = cpu_s();
    if (rc != 0) {
        fprintf(stderr, "cpu_bench: %s\n", tok ? err.msg : "out of memory");
    } else {
        engine_stats st;
        engine_get_stats(&e, &st);
        printf("%s\n  %s\n", argv[1], e.be->describe(e.impl));
        printf("  prefill %ld tokens: %.2f tok/s, %.2f CPU ms/token\n", np, np / (w1 - w0), (c1 - c0) * 1e3 / np);
        printf("  decode  %ld tokens: %.2f tok/s, %.2f CPU ms/token\n", nd, nd / (w2 - w1), (c2 - c1) * 1e3 / nd);
        if (be == &cpu_engine_backend) { /* the table is the decode steps' (the reference mixes both phases) */
            printf("  %-22s %9s %10s %8s\n", "step (decode)", "calls/tok", "us/token", "GB/s");
            for (uint32_t k = 0; k < st.n_kernels; k++)
                printf("  %-22s %9.1f %10.1f %8.2f\n", st.kernels[k].name, st.kernels[k].calls_per_token,
                       st.kernels[k].us_per_token, st.kernels[k].gbps);
            printf("  %u steps per token\n", st.dispatches_per_token);
        }
    }
    free(tok);
    engine_close(&e);
    model_free(&m);
    return rc == 0 ? 0 : 1;
}
