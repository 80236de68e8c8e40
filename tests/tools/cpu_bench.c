/* cpu_bench: prefill and decode speed of a CPU backend.
 *
 *   cpu_bench MODEL [--backend cpu|ref] [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] [--kv-type f16]
 *             [--draft]
 *
 * Evaluates a prompt of pseudo-random ids in one call, then decodes
 * greedily one token at a time, and prints for both phases tokens/s and
 * the process's CPU seconds per token (user + system: on a machine other
 * programs load, the work a token costs, which wall-clock figures blur),
 * then the per-step table the side pane shows (decode).  --draft (a model
 * with a NextN block): the same greedy answer again with speculative steps
 * of k = 1, 2, 3 drafts (engine_spec_step), with the NextN block's own
 * drafts (their real acceptance) and with forced ones (the answer itself:
 * every draft kept, the ceiling), each as CPU ms per answer token and its
 * ratio to plain decoding; the answer must come out the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/engine.h"
#include "sample/sampler.h"

static int usage(void)
{
    fprintf(stderr, "usage: cpu_bench MODEL [--backend cpu|ref] [-t THREADS] [-p PROMPT_TOKENS] [-n DECODE_TOKENS] "
                    "[--kv-type f16] [--draft]\n");
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

/* The greedy answer want[0..nd) after the prompt (n_past np, want[0] the
 * prompt's next token) again by speculative steps of k drafts (forced:
 * want's own continuation); prints CPU ms per answer token against
 * `plain`. Returns 0, or -1 on an error or a different answer. */
static int draft_line(engine *e, sampler *smp, uint32_t np, const int32_t *want, long nd, uint32_t k, bool forced,
                      double plain_ms)
{
    engine_rewind(e, np);
    sampler_reset(smp);
    int32_t got[ENGINE_MAX_DRAFT + 1];
    long have = 1;
    uint32_t steps = 0, kept = 0, drafted = 0;
    err_t err;
    bool same = true;
    double w0 = now_s(), c0 = cpu_s();
    while (have < nd) {
        uint32_t kk = (uint32_t)(nd - have) < k ? (uint32_t)(nd - have) : k, n;
        if (engine_spec_step(e, smp, want[have - 1], kk, forced ? want + have : NULL, got, &n, &err) != 0) {
            fprintf(stderr, "cpu_bench: %s\n", err.msg);
            return -1;
        }
        steps++;
        drafted += kk;
        kept += n - 1;
        for (uint32_t i = 0; i < n && have < nd; i++)
            same &= got[i] == want[have++];
    }
    double w = now_s() - w0, c = (cpu_s() - c0) * 1e3 / (double)(nd - 1);
    printf("  drafting k=%u%s: %.0f%% of drafts kept, %.2f tokens/step, %.2f tok/s, %.2f CPU ms/token (%.2fx plain)%s\n",
           k, forced ? " forced" : "       ", drafted ? 100.0 * kept / drafted : 0.0,
           steps ? (double)(nd - 1) / steps : 0.0, (double)(nd - 1) / w, c, c > 0 ? plain_ms / c : 0.0,
           same ? "" : "  ANSWER DIFFERS");
    return same ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    int threads = 0;
    long np = 64, nd = 32;
    kv_type kv = KV_F32;
    bool draft = false;
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
        else if (strcmp(argv[i], "--draft") == 0)
            draft = true;
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
    p.n_ctx = (uint32_t)(np + nd + ENGINE_MAX_DRAFT + 1);
    p.n_batch = (uint32_t)np;
    p.n_threads = threads;
    p.kv = kv;
    p.draft = draft ? ENGINE_MAX_DRAFT : ENGINE_DRAFT_OFF;
    engine e;
    if (engine_open(&e, be, &m, &p, &err) < 0) {
        fprintf(stderr, "cpu_bench: %s\n", err.msg);
        model_free(&m);
        return 1;
    }
    int32_t *tok = malloc((size_t)np * sizeof *tok), *answer = malloc((size_t)nd * sizeof *answer);
    for (long i = 0; tok && i < np; i++)
        tok[i] = (int32_t)((i * 7919 + 13) % m.cfg.n_vocab);
    int32_t id = 0;
    float best;
    engine_output o = {.top_k = 1, .top_ids = &id, .top_logits = &best};
    double w0 = now_s(), c0 = cpu_s();
    int rc = tok ? engine_eval(&e, tok, (uint32_t)np, &o, &err) : -1;
    double w1 = now_s(), c1 = cpu_s();
    for (long i = 0; i < nd && rc == 0 && answer; i++) {
        answer[i] = id;
        rc = engine_eval(&e, &id, 1, &o, &err);
    }
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
        if (draft && !engine_can_draft(&e)) {
            printf("  no drafting: the model has no NextN block\n");
        } else if (draft && nd >= 2) {
            sampler_params sp;
            sampler_params_default(&sp);
            sp.temp = 0;
            sampler *smp = sampler_new(&sp, m.cfg.n_vocab);
            double plain_ms = (c2 - c1) * 1e3 / nd;
            for (uint32_t k = 1; k <= 3 && rc == 0 && smp; k++)
                if (draft_line(&e, smp, (uint32_t)np, answer, nd, k, false, plain_ms) < 0 ||
                    draft_line(&e, smp, (uint32_t)np, answer, nd, k, true, plain_ms) < 0)
                    rc = -1;
            sampler_free(smp);
        }
    }
    free(tok);
    free(answer);
    engine_close(&e);
    model_free(&m);
    return rc == 0 ? 0 : 1;
}
