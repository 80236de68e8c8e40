/* cpu_bench: prefill and decode speed of the CPU reference backend.
 *
 *   cpu_bench MODEL [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] [--kv-type f16]
 *
 * Evaluates a prompt of pseudo-random ids in one call, then decodes
 * greedily one token at a time, and prints tokens/s for both phases and the
 * per-stage table the side pane shows (decode phase only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static int usage(void)
{
    fprintf(stderr, "usage: cpu_bench MODEL [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] [--kv-type f16]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    int threads = 0;
    long np = 64, nd = 32;
    kv_type kv = KV_F32;
    for (int i = 2; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "-t") == 0)
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "-p") == 0)
            np = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "-n") == 0)
            nd = atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--kv-type") == 0)
            kv = strcmp(argv[++i], "f16") == 0 ? KV_F16 : KV_F32;
        else
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
    p.n_threads = threads;
    p.kv = kv;
    engine e;
    if (engine_open(&e, &ref_engine_backend, &m, &p, &err) < 0) {
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
    int rc = tok ? engine_eval(&e, tok, (uint32_t)np, &o, &err) : -1;
    engine_stats before;
    engine_get_stats(&e, &before);
    for (long i = 0; i < nd && rc == 0; i++)
        rc = engine_eval(&e, &id, 1, &o, &err);
    if (rc != 0) {
        fprintf(stderr, "cpu_bench: %s\n", tok ? err.msg : "out of memory");
    } else {
        engine_stats st;
        engine_get_stats(&e, &st);
        printf("%s\n  %s\n", argv[1], e.be->describe(e.impl));
        printf("  prefill %ld tokens: %.2f tok/s\n", np, st.prefill_tps);
        printf("  decode  %ld tokens: %.2f tok/s\n", nd, (double)st.n_decode_tokens / st.decode_seconds);
        printf("  %-16s %10s %8s\n", "stage (decode)", "us/token", "GB/s");
        for (uint32_t k = 0; k < st.n_kernels && k < before.n_kernels; k++) {
            /* per-stage totals are cumulative: subtract the prefill part */
            double tot = st.kernels[k].us_per_token * (double)(np + nd);
            double pre = before.kernels[k].us_per_token * (double)np;
            double bytes = st.kernels[k].bytes_per_token * (double)(np + nd) -
                           before.kernels[k].bytes_per_token * (double)np;
            double us = (tot - pre) / (double)nd;
            printf("  %-16s %10.1f %8.2f\n", st.kernels[k].name, us, us > 0 ? bytes / nd / us / 1e3 : 0.0);
        }
    }
    free(tok);
    engine_close(&e);
    model_free(&m);
    return rc == 0 ? 0 : 1;
}
