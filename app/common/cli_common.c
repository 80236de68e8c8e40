/* cli_common.c: shared option parsing and model + engine opening. */
#include "cli_common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends.h"
#include "settings.h"
#include "vk.h"

void cli_options_init(cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->kv = KV_F32;
    o->device = -1;
    o->n_cpu_moe = ENGINE_CPU_MOE_AUTO;
}

kv_type cli_kv_type(const cli_options *o, const engine_backend *be)
{
    if (o->kv_given)
        return o->kv;
    return be == &vk_engine_backend ? KV_F16 : KV_F32;
}

void cli_options_free(cli_options *o)
{
    free(o->tokens);
    o->tokens = NULL;
    o->n_tokens = 0;
}

const char *cli_common_help(void)
{
    return "  -m, --model FILE     GGUF model (deepseek2: GLM-4.7-Flash, DeepSeek-V2)\n"
           "      --backend NAME   cpu, ref (the plain-C reference), vulkan or auto (default: auto)\n"
           "      --kv-type TYPE   KV cache storage: f32 or f16 (default: f16 on Vulkan, f32 on cpu and ref)\n"
           "  -c, --ctx N          context size in tokens\n"
           "  -b, --batch N        most prompt tokens per backend call (default: on a GPU the largest\n"
           "                       up to 1024 that its memory holds, else 256)\n"
           "  -t, --threads N      CPU threads (default: all cores)\n"
           "      --device N       Vulkan device index (see `glmchat devices`)\n"
           "      --gpu-mem SIZE   the most GPU memory to use, e.g. 6G or 512M (default: what is free)\n"
           "      --n-cpu-moe N|auto  the routed experts of the first N layers in host memory, computed\n"
           "                       by the CPU (default auto: as many as the GPU's memory needs)\n"
           "      --tokens LIST    prompt as comma-separated token ids, e.g. 1,2,3\n"
           "      --tune KEY=VALUE a Vulkan tuning knob (repeatable; `glmchat bench --tune help` lists them)\n";
}

int cli_parse_u32(const char *s, const char *what, uint32_t min, uint32_t max, uint32_t *out, err_t *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end || errno == ERANGE || v < min || v > max)
        return err_set(err, "%s: '%s' is not a number from %u to %u", what, s, min, max);
    *out = (uint32_t)v;
    return 0;
}

int cli_parse_float(const char *s, const char *what, float *out, err_t *err)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end || !isfinite(v))
        return err_set(err, "%s: '%s' is not a number", what, s);
    if (errno == ERANGE) /* too close to 0 for a float (or 0 only by rounding) */
        return err_set(err, "%s: %s is out of range", what, s);
    *out = v;
    return 0;
}

int cli_parse_tokens(const char *s, int32_t **ids, uint32_t *n, err_t *err)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v)
        return err_set(err, "out of memory");
    uint32_t k = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ')
            p++;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || *p == '+' || *p == '-' || errno == ERANGE || x > INT32_MAX) {
            free(v);
            return err_set(err, "--tokens: '%s' is not a list of token ids like 1,2,3", s);
        }
        v[k++] = (int32_t)x;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == 0)
            break;
        if (*p != ',') {
            free(v);
            return err_set(err, "--tokens: '%s' is not a list of token ids like 1,2,3", s);
        }
        p++;
    }
    *ids = v;
    *n = k;
    return 0;
}

/* The value of option argv[*i]; advances *i. */
static const char *option_value(int argc, char **argv, int *i, err_t *err)
{
    if (*i + 1 >= argc) {
        err_set(err, "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

static bool is(const char *a, const char *short_name, const char *long_name)
{
    return (short_name && strcmp(a, short_name) == 0) || strcmp(a, long_name) == 0;
}

int cli_parse_common(cli_options *o, int argc, char **argv, int *i, err_t *err)
{
    const char *a = argv[*i];
    const char *v;
    uint32_t u;
    if (is(a, "-m", "--model")) {
        if (!(v = option_value(argc, argv, i, err)))
            return -1;
        o->model_path = v;
    } else if (is(a, NULL, "--backend")) {
        if (!(v = option_value(argc, argv, i, err)))
            return -1;
        if (!app_backend_known(v))
            return err_set(err, "unknown backend '%s' (choose from: %s)", v, app_backend_names());
        o->backend = v;
    } else if (is(a, NULL, "--kv-type")) {
        if (!(v = option_value(argc, argv, i, err)))
            return -1;
        if (strcmp(v, "f32") == 0)
            o->kv = KV_F32;
        else if (strcmp(v, "f16") == 0)
            o->kv = KV_F16;
        else
            return err_set(err, "--kv-type: '%s' is not f32 or f16", v);
        o->kv_given = true;
    } else if (is(a, "-c", "--ctx")) {
        if (!(v = option_value(argc, argv, i, err)) || cli_parse_u32(v, a, 1, 1u << 24, &o->n_ctx, err) < 0)
            return -1;
    } else if (is(a, "-b", "--batch")) {
        if (!(v = option_value(argc, argv, i, err)) || cli_parse_u32(v, a, 1, 1u << 16, &o->n_batch, err) < 0)
            return -1;
    } else if (is(a, "-t", "--threads")) {
        if (!(v = option_value(argc, argv, i, err)) || cli_parse_u32(v, a, 0, 512, &u, err) < 0)
            return -1;
        o->n_threads = (int)u;
    } else if (is(a, NULL, "--device")) {
        if (!(v = option_value(argc, argv, i, err)) || cli_parse_u32(v, a, 0, 255, &u, err) < 0)
            return -1;
        o->device = (int)u;
    } else if (is(a, NULL, "--gpu-mem")) {
        if (!(v = option_value(argc, argv, i, err)) || settings_parse_size(a, v, &o->gpu_mem, err) < 0)
            return -1;
    } else if (is(a, NULL, "--n-cpu-moe")) {
        if (!(v = option_value(argc, argv, i, err)) || settings_parse_cpu_moe(a, v, &o->n_cpu_moe, err) < 0)
            return -1;
    } else if (is(a, NULL, "--tokens")) {
        if (!(v = option_value(argc, argv, i, err)))
            return -1;
        cli_options_free(o);
        if (cli_parse_tokens(v, &o->tokens, &o->n_tokens, err) < 0)
            return -1;
        o->have_tokens = true;
    } else if (is(a, NULL, "--tune")) {
        if (!(v = option_value(argc, argv, i, err)) || vk_tune_check(v, err) < 0)
            return -1;
        if (o->n_tune == CLI_MAX_TUNE)
            return err_set(err, "--tune: more than %d overrides", CLI_MAX_TUNE);
        o->tune[o->n_tune++] = v;
    } else {
        return 0;
    }
    return 1;
}

int cli_check_tune(const cli_options *o, const engine_backend *be, err_t *err)
{
    if (o->n_tune && be != &vk_engine_backend)
        return err_set(err, "--tune: the tuning knobs are the Vulkan backend's (this run uses %s)", be->name);
    return 0;
}

int cli_session_open(cli_session *s, const cli_options *o, uint32_t n_ctx_default, bool all_logits, err_t *err)
{
    memset(s, 0, sizeof *s);
    const engine_backend *be = app_find_backend(o->backend, err);
    if (!be || cli_check_tune(o, be, err))
        return -1;
    if (model_load(&s->m, o->model_path, err) < 0)
        return -1;
    s->loaded = true;
    engine_params p;
    engine_params_default(&p);
    p.kv = cli_kv_type(o, be);
    p.n_threads = o->n_threads;
    p.device_index = o->device;
    p.gpu_mem = o->gpu_mem;
    p.n_cpu_moe = o->n_cpu_moe;
    if (o->n_batch)
        p.n_batch = o->n_batch;
    if (o->n_ctx)
        p.n_ctx = o->n_ctx;
    else if (n_ctx_default)
        p.n_ctx = n_ctx_default;
    else
        p.n_ctx = s->m.cfg.n_ctx_train < 4096 ? s->m.cfg.n_ctx_train : 4096;
    p.tune = o->tune;
    p.n_tune = o->n_tune;
    p.all_logits = all_logits;
    if (engine_open(&s->eng, be, &s->m, &p, err) < 0) {
        err_prefix(err, "%s", o->model_path);
        cli_session_close(s);
        return -1;
    }
    s->opened = true;
    return 0;
}

void cli_session_close(cli_session *s)
{
    if (s->opened)
        engine_close(&s->eng);
    if (s->loaded)
        model_free(&s->m);
    s->opened = s->loaded = false;
}
