/* chat_setup.c: options, model discovery and opening for chat / -p / replay. */
#include "chat_setup.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends.h"
#include "chat/conversation.h"
#include "engine/decoder.h"
#include "demo_model.h"
#include "paths.h"
#include "model/synth.h"
#include "base/text_safe.h"

/* ---- options --------------------------------------------------------------------- */

const char *chat_args_help(void)
{
    return "  -m, --model FILE       GGUF model (default: $GLMCHAT_MODEL, the settings file,\n"
           "                         a .gguf in ~/.local/share/glmchat/models, else the demo)\n"
           "  -n, --n-predict N      at most N tokens per answer (-1: no limit)\n"
           "  -c, --ctx N            context size in tokens (default: the largest the memory\n"
           "                         holds, at most 32768 and the model's)\n"
           "  -s, --system TEXT      system prompt\n"
           "      --temp T           temperature (0: greedy)\n"
           "      --top-k K          keep the K most likely tokens (0: off)\n"
           "      --top-p P          nucleus sampling (1: off)\n"
           "      --min-p P          drop tokens below P x the best one's probability\n"
           "      --repeat-penalty R, --presence-penalty P, --frequency-penalty F\n"
           "                         penalties on the last 64 tokens (default 1, 0, 0: off)\n"
           "      --seed S           sampling seed (default: random, recorded)\n"
           "      --template NAME    chat template (default: from the model)\n"
           "      --think on|off     reasoning before the answer (GLM-4.7; default on, off for\n"
           "                         models whose file says so, such as the built-in demo)\n"
           "      --ignore-eos       do not stop at the end of the turn (only -n or the context)\n"
           "      --draft K|auto|off speculative decoding with the model's NextN block: K drafts\n"
           "                         per step (1-4), auto (default: by the acceptance) or off\n"
           "      --side-pane on|off|auto  the side pane (default auto: on wide terminals)\n"
           "      --side-width N     side pane columns (0: adapt to the terminal)\n"
           "      --mouse on|off     wheel scrolling (off leaves selection to the terminal)\n"
           "      --backend NAME     cpu, vulkan or auto (default auto)\n"
           "      --device N         Vulkan device index (see `glmchat devices`)\n"
           "      --gpu-mem SIZE     the most GPU memory to use, e.g. 6G or 512M (default auto:\n"
           "                         what is free); the context is sized to what it leaves\n"
           "      --n-cpu-moe N|auto the routed experts of the first N layers in host memory,\n"
           "                         computed by the CPU (default auto: as many as the GPU's\n"
           "                         memory needs)\n"
           "      --kv-type TYPE     KV cache: f32 or f16 (default: f16 on Vulkan, f32 on cpu)\n"
           "  -t, --threads N        CPU threads (default: all cores)\n"
           "  -b, --batch N          most prompt tokens per backend call (default: on a GPU\n"
           "                         the largest up to 1024 that its memory holds, else 256)\n"
           "      --tune KEY=VALUE   a Vulkan tuning knob for this run (repeatable;\n"
           "                         `glmchat bench --tune help` lists them)\n";
}

static bool is(const char *a, const char *s, const char *l)
{
    return (s && !strcmp(a, s)) || !strcmp(a, l);
}

static int load_settings_file(chat_args *a, err_t *err)
{
    char path[PATH_MAX];
    if (paths_dir(PATHS_CONFIG, "settings", path, sizeof path, NULL) != 0)
        return 0; /* no home: no settings file, defaults it is */
    return settings_load(&a->s, path, true, err);
}

int chat_args_parse(chat_args *a, int argc, char **argv, bool replay, bool *usage, err_t *err)
{
    memset(a, 0, sizeof *a);
    settings_defaults(&a->s);
    cli_options_init(&a->cli);
    *usage = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            a->help = true;
        if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V"))
            a->version = true;
    }
    if (a->help || a->version)
        return 0;
    if (load_settings_file(a, err) != 0) {
        *usage = false;
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *key = settings_option_key(o); /* every settings key is a long option */
        if (key) {
            if (i + 1 >= argc)
                return err_set(err, "option %s needs a value", o);
            if (settings_set(&a->s, key, argv[++i], err) != 0)
                return err_prefix(err, "%s", o);
            continue;
        }
        if (!strcmp(o, "--ignore-eos")) {
            a->s.ignore_eos = true;
            continue;
        }
        if (is(o, "-m", "--model")) {
            if (i + 1 >= argc)
                return err_set(err, "option %s needs a value", o);
            a->model = argv[++i];
            continue;
        }
        if (!replay && !strcmp(o, "--resume")) {
            /* An argument is optional: the next word when it is no option. */
            if (i + 1 < argc && argv[i + 1][0] != '-' && argv[i + 1][0])
                a->resume = argv[++i];
            else
                a->resume = "1";
            continue;
        }
        if (!replay && (is(o, "-p", "--prompt") || is(o, "-s", "--system") || is(o, "-C", "--conversation"))) {
            if (i + 1 >= argc)
                return err_set(err, "option %s needs a value", o);
            const char *v = argv[++i];
            if (is(o, "-p", "--prompt"))
                a->prompt = v;
            else if (is(o, "-s", "--system"))
                a->system = v;
            else
                a->conversation = v;
            continue;
        }
        int r = cli_parse_common(&a->cli, argc, argv, &i, err);
        if (r < 0)
            return -1;
        if (r > 0) {
            if (a->cli.have_tokens)
                return err_set(err, "--tokens is for `glmchat generate`");
            continue;
        }
        if (replay && o[0] != '-' && !a->positional) {
            a->positional = o;
            continue;
        }
        if (o[0] == '-')
            return err_set(err, "unknown option '%s'", o);
        return err_set(err, "unexpected argument '%s'%s", o, replay ? "" : " (a prompt goes after -p)");
    }
    return 0;
}

void chat_args_free(chat_args *a)
{
    cli_options_free(&a->cli);
}

/* ---- finding the model ------------------------------------------------------------------ */

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

void chat_models_free(chat_models *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}

int chat_models_scan(chat_models *l, err_t *err)
{
    memset(l, 0, sizeof *l);
    if (paths_dir(PATHS_DATA, "models", l->dir, sizeof l->dir, err) != 0)
        return -1;
    DIR *d = opendir(l->dir);
    if (!d)
        return 0; /* no directory: no models (not an error) */
    size_t cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) && l->n < CHAT_MODELS_MAX) {
        size_t len = strlen(de->d_name);
        char path[PATH_MAX];
        if (len <= 5 || strcmp(de->d_name + len - 5, ".gguf") != 0 || de->d_name[0] == '.')
            continue;
        int k = snprintf(path, sizeof path, "%s/%s", l->dir, de->d_name);
        if (k <= 0 || (size_t)k >= sizeof path || !paths_is_file(path))
            continue;
        if (l->n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **grown = realloc(l->names, ncap * sizeof *grown);
            if (!grown) {
                rc = err_set(err, "out of memory listing %s", l->dir);
                break;
            }
            l->names = grown;
            cap = ncap;
        }
        if (!(l->names[l->n] = strdup(de->d_name))) {
            rc = err_set(err, "out of memory listing %s", l->dir);
            break;
        }
        l->n++;
    }
    closedir(d);
    if (rc != 0) {
        chat_models_free(l);
        return -1;
    }
    qsort(l->names, l->n, sizeof *l->names, cmp_str);
    return 0;
}

int chat_models_path(const chat_models *l, size_t i, char *out, size_t cap)
{
    int k = snprintf(out, cap, "%s/%s", l->dir, l->names[i]);
    return k > 0 && (size_t)k < cap ? 0 : -1;
}

/* The first .gguf (by name) in the XDG models directory; when it holds
 * more than one, a note says which was taken (the choice must not be silent). */
static bool find_in_data_dir(chat_model *cm)
{
    chat_models l;
    if (chat_models_scan(&l, NULL) != 0 || l.n == 0) {
        chat_models_free(&l);
        return false;
    }
    bool found = chat_models_path(&l, 0, cm->path, sizeof cm->path) == 0;
    if (found && l.n > 1 &&
        snprintf(cm->pick_note, sizeof cm->pick_note,
                 "Model: %.200s, the first by name of the %zu .gguf files in %.500s (-m FILE, or /model in the chat, "
                 "picks another).",
                 l.names[0], l.n, l.dir) < 0)
        cm->pick_note[0] = 0;
    chat_models_free(&l);
    return found;
}

static const char demo_note[] =
    "This is the built-in demo model: a tiny model of the GLM-4.7-Flash architecture trained on "
    "dictionary definitions and manual pages -- ask it what a word means or what a command does; "
    "it knows little else. Point glmchat at a real GGUF with -m FILE or $GLMCHAT_MODEL, "
    "or put one in ~/.local/share/glmchat/models/.";

static int resolve_path(chat_model *cm, const chat_args *a, err_t *err)
{
    /* -m, then $GLMCHAT_MODEL, then the settings file. */
    const char *env = getenv("GLMCHAT_MODEL");
    const char *given = a->model;
    if (!given && env && env[0])
        given = env;
    if (!given && a->s.model[0])
        given = a->s.model;
    if (given)
        return paths_expand_user(given, cm->path, sizeof cm->path, err);
    if (find_in_data_dir(cm))
        return 0;
    snprintf(cm->path, sizeof cm->path, "%s", DEMO_MODEL_NAME);
    cm->demo_note = demo_note;
    return 0;
}

static void describe(chat_model *cm)
{
    const model_config *c = &cm->m.cfg;
    snprintf(cm->lines[0], sizeof cm->lines[0], "%.95s", cm->name);
    model_census cen;
    model_census_compute(&cm->m, &cen);
    snprintf(cm->lines[1], sizeof cm->lines[1], "%s %s, %.1fM params", c->arch,
             c->file_type ? synth_ftype_name(c->file_type) : "", cen.total_params / 1e6);
    snprintf(cm->lines[2], sizeof cm->lines[2], "%u blocks, %u experts (%u used)", c->n_layer, c->n_expert,
             c->n_expert_used);
    snprintf(cm->lines[3], sizeof cm->lines[3], "%.1f MiB, vocab %u", cm->size / 1048576.0, c->n_vocab);
}

int chat_model_open(chat_model *cm, const chat_args *a, err_t *err)
{
    memset(cm, 0, sizeof *cm);
    if (resolve_path(cm, a, err) != 0)
        return -1;
    /* The template and backend names are checked before the (slow) load. */
    if (a->s.tmpl[0] && !tmpl_find(a->s.tmpl))
        return err_set(err, "unknown template '%s' (choose from: %s)", a->s.tmpl, tmpl_names());
    if (!app_find_backend(a->s.backend, err))
        return -1;
    if (cm->demo_note) {
        size_t size;
        const void *data = demo_model_data(&size);
        conv_fingerprint_mem(data, size, cm->fingerprint);
        cm->size = size;
        if (demo_model_load(&cm->m, err) != 0)
            return -1;
    } else {
        if (conv_fingerprint(cm->path, cm->fingerprint, &cm->size, err) != 0 ||
            model_load(&cm->m, cm->path, err) != 0)
            return -1;
    }
    cm->loaded = true;
    /* auto weighs the model against the device (backends.h) */
    cm->be = app_choose_backend(a->s.backend, &cm->m, cm->backend_note, sizeof cm->backend_note, err);
    if (!cm->be) {
        chat_model_close(cm);
        return -1;
    }
    if (!strcmp(a->s.backend, "auto") && cm->be != &cpu_engine_backend)
        cm->fallback = &cpu_engine_backend;
    cm->tok = tok_load(cm->m.gguf, err);
    if (!cm->tok) {
        chat_model_close(cm);
        return -1;
    }
    cm->tmpl = a->s.tmpl[0] ? tmpl_find(a->s.tmpl) : tmpl_detect(cm->m.gguf);
    cm->think_default = tmpl_thinking_default(cm->m.gguf);
    const char *slash = strrchr(cm->path, '/');
    snprintf(cm->name, sizeof cm->name, "%.127s", cm->m.cfg.name[0] ? cm->m.cfg.name : slash ? slash + 1 : cm->path);
    engine_params_default(&cm->params);
    cm->params.kv = cli_kv_type(&a->cli, cm->be);
    cm->params.n_threads = a->cli.n_threads;
    cm->params.device_index = a->s.device >= 0 ? a->s.device : a->cli.device;
    /* -b wins; else the backend's (the Vulkan core's memory plan) */
    cm->params.n_batch = a->cli.n_batch ? a->cli.n_batch : ENGINE_BATCH_AUTO;
    cm->params.tune = a->cli.tune;
    cm->params.n_tune = a->cli.n_tune;
    cm->params.n_ctx = a->s.n_ctx; /* 0: the engine takes the largest that fits (engine.h) */
    cm->params.gpu_mem = a->s.gpu_mem;
    cm->params.n_cpu_moe = a->s.n_cpu_moe;
    cm->params.draft = a->s.draft; /* drafts where the file has a NextN block and the backend can */
    describe(cm);
    return 0;
}

void chat_model_close(chat_model *cm)
{
    if (cm->tok)
        tok_free(cm->tok);
    cm->tok = NULL;
    if (cm->loaded)
        model_free(&cm->m);
    cm->loaded = false;
}

/* ---- starting the engine ------------------------------------------------------------------- */

static int wait_ready(decoder *d, err_t *err)
{
    dec_event ev;
    for (;;) {
        if (!decoder_wait(d, &ev, -1))
            return err_set(err, "the decode thread stopped");
        int type = ev.type;
        if (type == DEC_EV_ERROR)
            err_set(err, "%s", ev.text);
        decoder_event_free(&ev);
        if (type == DEC_EV_READY)
            return 0;
        if (type == DEC_EV_ERROR)
            return -1;
    }
}

int chat_start_decoder(chat_model *cm, decoder **out, err_t *err)
{
    const engine_backend *be = cm->be;
    for (;;) {
        decoder *d = decoder_start(be, &cm->m, cm->tok, &cm->params, err);
        if (!d)
            return -1;
        if (wait_ready(d, err) == 0) {
            *out = d;
            cm->be = be;
            return 0;
        }
        decoder_free(d);
        if (!cm->fallback || be == cm->fallback)
            return -1;
        chat_error("the %s backend did not start (%s); using %s", be->name, err->msg, cm->fallback->name);
        be = cm->fallback;
    }
}

/* ---- errors -------------------------------------------------------------------------------- */

void chat_error(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sbuf b = {0};
    tsafe_one_line(&b, msg, strlen(msg)); /* a newline inside is a control character too */
    fprintf(stderr, "glmchat: %s\n", sbuf_str(&b));
    sbuf_free(&b);
}
