/* cmd_run.c: `glmchat logits` and `glmchat generate`: the model run on a
 * prompt of token ids, for tests and scripts.
 *
 *   glmchat logits -m MODEL --tokens 1,2,3 -o OUT.bin [options]
 *       one eval over the whole prompt; OUT.bin holds [n_tokens][n_vocab]
 *       little-endian float32 logits
 *   glmchat generate -m MODEL --tokens 1,2,3 -n N --temp 0 --ids [options]
 *       the N greedy ids (argmax, lowest id on ties), space-separated
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli_common.h"
#include "sample/sampler.h"
#include "commands.h"

static void logits_usage(FILE *f)
{
    fprintf(f, "usage: glmchat logits -m MODEL --tokens 1,2,3 -o OUT.bin [options]\n"
               "Runs the prompt once and writes the logits of every position as\n"
               "little-endian float32, row-major [n_tokens][n_vocab].\n\noptions:\n"
               "  -o, --output FILE    where to write the logits\n%s",
               cli_common_help());
}

static void generate_usage(FILE *f)
{
    fprintf(f, "usage: glmchat generate -m MODEL --tokens 1,2,3 -n N [--temp 0] [--ids] [options]\n"
               "Continues the prompt and prints the N new token ids.\n\noptions:\n"
               "  -n, --n-predict N    tokens to generate\n"
               "      --temp T         sampling temperature (default 0: greedy, lowest id on ties)\n"
               "      --top-k K, --top-p P, --min-p P, --seed S   sampling filters and seed\n"
               "      --ids            print token ids (the output format of this command)\n%s",
               cli_common_help());
}

static int usage_error(const err_t *err, const char *cmd)
{
    fprintf(stderr, "glmchat: %s\n(see `glmchat %s --help`)\n", err->msg, cmd);
    return 2;
}

static int runtime_error(const err_t *err)
{
    fprintf(stderr, "glmchat: %s\n", err->msg);
    return 1;
}

static int require_model_tokens(const cli_options *o, err_t *err)
{
    if (!o->model_path)
        return err_set(err, "no model given (-m FILE)");
    if (!o->have_tokens || o->n_tokens == 0)
        return err_set(err, "no prompt given (--tokens 1,2,3)");
    return 0;
}

/* Little-endian float32, whatever the host order; written to a temporary
 * file renamed into place, so a failed run leaves no half-written output. */
static int write_logits(const char *path, const float *v, uint64_t n, err_t *err)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp)
        return err_set(err, "out of memory");
    snprintf(tmp, len + 16, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(tmp);
        return err_set(err, "%s: cannot create: %m", path);
    }
    unsigned char buf[4096];
    size_t used = 0;
    bool ok = true;
    for (uint64_t i = 0; i < n && ok; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int b = 0; b < 4; b++)
            buf[used++] = (unsigned char)(u >> (8 * b));
        if (used == sizeof buf || i + 1 == n) {
            ok = fwrite(buf, 1, used, f) == used;
            used = 0;
        }
    }
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int rc = err_set(err, "%s: cannot write: %m", path);
        unlink(tmp);
        free(tmp);
        return rc;
    }
    free(tmp);
    return 0;
}

int cmd_logits(int argc, char **argv)
{
    cli_options o;
    cli_options_init(&o);
    const char *out_path = NULL;
    err_t err = {{0}};
    for (int i = 1; i < argc; i++) {
        int r = cli_parse_common(&o, argc, argv, &i, &err);
        if (r < 0)
            goto usage;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            logits_usage(stdout);
            cli_options_free(&o);
            return 0;
        } else if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) && i + 1 < argc) {
            out_path = argv[++i];
        } else {
            err_set(&err, "logits: unknown option or missing value: '%s'", argv[i]);
            goto usage;
        }
    }
    if (require_model_tokens(&o, &err) < 0)
        goto usage;
    if (!out_path) {
        err_set(&err, "no output file given (-o OUT.bin)");
        goto usage;
    }
    cli_session s;
    if (cli_session_open(&s, &o, o.n_tokens, true /* every position's logits */, &err) < 0) {
        cli_options_free(&o);
        return runtime_error(&err);
    }
    uint64_t n = (uint64_t)o.n_tokens * s.m.cfg.n_vocab;
    float *logits = malloc(n * sizeof(float));
    int rc = 0;
    if (!logits) {
        err_set(&err, "out of memory for %llu logits", (unsigned long long)n);
        rc = 1;
    } else {
        engine_output out = {.logits = logits, .all_positions = true};
        if (engine_eval(&s.eng, o.tokens, o.n_tokens, &out, &err) != 0 ||
            write_logits(out_path, logits, n, &err) < 0)
            rc = 1;
    }
    if (rc && strncmp(err.msg, o.model_path, strlen(o.model_path)) != 0 && !strstr(err.msg, out_path))
        err_prefix(&err, "%s", o.model_path);
    free(logits);
    cli_session_close(&s);
    cli_options_free(&o);
    return rc ? runtime_error(&err) : 0;
usage:
    cli_options_free(&o);
    return usage_error(&err, "logits");
}

/* Greedy decoding: the prompt in one eval, then one token at a time; each
 * step asks the engine only for the best candidate of the last position. */
static int generate_greedy(cli_session *s, const cli_options *o, uint32_t n_predict, err_t *err)
{
    int32_t id;
    float best;
    engine_output out = {.top_k = 1, .top_ids = &id, .top_logits = &best};
    if (n_predict == 0) {
        printf("\n");
        return 0;
    }
    if (engine_eval(&s->eng, o->tokens, o->n_tokens, &out, err) != 0)
        return -1;
    for (uint32_t i = 0; i < n_predict; i++) {
        printf(i ? " %d" : "%d", id);
        fflush(stdout);
        if (i + 1 < n_predict && engine_eval(&s->eng, &id, 1, &out, err) != 0) {
            printf("\n");
            return -1;
        }
    }
    printf("\n");
    return 0;
}

/* Sampled decoding: full logits of the last position through the sampler
 * (exact over the whole vocabulary; the chat's decode thread uses the
 * engine's top-K candidates instead). */
static int generate_sampled(cli_session *s, const cli_options *o, const sampler_params *sp, uint32_t n_predict,
                            err_t *err)
{
    uint32_t n_vocab = s->m.cfg.n_vocab;
    float *logits = malloc((size_t)n_vocab * sizeof(float));
    sampler *smp = sampler_new(sp, n_vocab);
    int rc = 0;
    if (!logits || !smp) {
        rc = err_set(err, "out of memory for the sampler");
        goto done;
    }
    for (uint32_t i = 0; i < o->n_tokens; i++)
        sampler_accept(smp, o->tokens[i]);
    engine_output out = {.logits = logits};
    if (engine_eval(&s->eng, o->tokens, o->n_tokens, &out, err) != 0) {
        rc = -1;
        goto done;
    }
    for (uint32_t i = 0; i < n_predict; i++) {
        int32_t id = sampler_sample(smp, logits);
        sampler_accept(smp, id);
        printf(i ? " %d" : "%d", id);
        fflush(stdout);
        if (i + 1 < n_predict && engine_eval(&s->eng, &id, 1, &out, err) != 0) {
            rc = -1;
            break;
        }
    }
done:
    if (n_predict)
        printf("\n");
    sampler_free(smp);
    free(logits);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    cli_options o;
    cli_options_init(&o);
    err_t err = {{0}};
    uint32_t n_predict = 16;
    float temp = 0.0f;
    sampler_params sp;
    sampler_params_default(&sp);
    for (int i = 1; i < argc; i++) {
        int r = cli_parse_common(&o, argc, argv, &i, &err);
        if (r < 0)
            goto usage;
        if (r > 0)
            continue;
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            generate_usage(stdout);
            cli_options_free(&o);
            return 0;
        } else if (strcmp(a, "--ids") == 0) {
            /* ids are what this command prints */
        } else if ((strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0) && i + 1 < argc) {
            if (cli_parse_u32(argv[++i], a, 0, 1u << 24, &n_predict, &err) < 0)
                goto usage;
        } else if (strcmp(a, "--temp") == 0 && i + 1 < argc) {
            if (cli_parse_float(argv[++i], a, &temp, &err) < 0)
                goto usage;
        } else if (strcmp(a, "--top-k") == 0 && i + 1 < argc) {
            uint32_t k;
            if (cli_parse_u32(argv[++i], a, 0, 1u << 24, &k, &err) < 0)
                goto usage;
            sp.top_k = (int)k;
        } else if (strcmp(a, "--top-p") == 0 && i + 1 < argc) {
            if (cli_parse_float(argv[++i], a, &sp.top_p, &err) < 0)
                goto usage;
        } else if (strcmp(a, "--min-p") == 0 && i + 1 < argc) {
            if (cli_parse_float(argv[++i], a, &sp.min_p, &err) < 0)
                goto usage;
        } else if (strcmp(a, "--seed") == 0 && i + 1 < argc) {
            uint32_t seed;
            if (cli_parse_u32(argv[++i], a, 0, UINT32_MAX, &seed, &err) < 0)
                goto usage;
            sp.seed = seed;
        } else {
            err_set(&err, "generate: unknown option or missing value: '%s'", a);
            goto usage;
        }
    }
    if (require_model_tokens(&o, &err) < 0)
        goto usage;
    sp.temp = temp;
    if (sampler_params_check(&sp, &err) != 0) /* the check every entry path makes (sampler.h) */
        goto usage;
    uint64_t need = (uint64_t)o.n_tokens + n_predict;
    if (o.n_ctx && need - 1 > o.n_ctx) {
        err_set(&err, "--ctx %u is too small for %u prompt + %u generated tokens", o.n_ctx, o.n_tokens, n_predict);
        goto usage;
    }
    cli_session s;
    if (cli_session_open(&s, &o, need > UINT32_MAX ? UINT32_MAX : (uint32_t)need, false, &err) < 0) {
        cli_options_free(&o);
        return runtime_error(&err);
    }
    int rc = temp == 0.0f ? generate_greedy(&s, &o, n_predict, &err)
                          : generate_sampled(&s, &o, &sp, n_predict, &err);
    if (rc < 0 && strncmp(err.msg, o.model_path, strlen(o.model_path)) != 0)
        err_prefix(&err, "%s", o.model_path);
    cli_session_close(&s);
    cli_options_free(&o);
    return rc < 0 ? runtime_error(&err) : 0;
usage:
    cli_options_free(&o);
    return usage_error(&err, "generate");
}
