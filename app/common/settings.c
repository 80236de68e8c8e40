/* settings.c: the settings file and the shared key=value parser. */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "backends.h"
#include "engine/engine.h"
#include "base/file_read.h"

/* Far more than any settings file needs; a bigger one is a mistake. */
#define SETTINGS_MAX_FILE (1u << 20)

/* ---- value parsers --------------------------------------------------------- */

/* A sampler setting: a number, then the sampler's one check of it
 * (sampler_check: the same ranges as conversation files). */
static int parse_setting(const char *key, const char *v, sampler_setting which, float *out, err_t *err)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end)
        return err_set(err, "%s: '%s' is not a number", key, v);
    if (errno == ERANGE) /* beyond a double: 1e-400 would read as 0, which means something else */
        return err_set(err, "%s: %s is out of range", key, v);
    if (sampler_check(which, key, d, err) != 0)
        return -1;
    *out = (float)d;
    return 0;
}

static int parse_long(const char *key, const char *v, long lo, long hi, long *out, err_t *err)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno)
        return err_set(err, "%s: '%s' is not an integer", key, v);
    if (x < lo || x > hi)
        return err_set(err, "%s: %s is out of range [%ld, %ld]", key, v, lo, hi);
    *out = x;
    return 0;
}

int settings_parse_cpu_moe(const char *key, const char *v, int *out, err_t *err)
{
    long x;
    if (!strcmp(v, "auto")) {
        *out = ENGINE_CPU_MOE_AUTO;
        return 0;
    }
    if (parse_long(key, v, 0, 4096, &x, err) != 0)
        return err_set(err, "%s: '%s' is not auto or a number of layers from 0 to 4096", key, v);
    *out = (int)x;
    return 0;
}

int settings_parse_size(const char *key, const char *v, uint64_t *out, err_t *err)
{
    if (!strcmp(v, "auto") || !strcmp(v, "0")) {
        *out = 0;
        return 0;
    }
    /* digits, an optional fraction, then K, M, G or T (binary units, any
     * case, "B" or "iB" after them allowed): 6G, 1.5G, 512MiB */
    const char *p = v;
    double x = 0, scale = 1;
    bool digits = false, point = false;
    for (; (*p >= '0' && *p <= '9') || (*p == '.' && !point); p++) {
        if (*p == '.') {
            point = true;
            continue;
        }
        digits = true;
        if (point)
            scale /= 10;
        x = x * 10 + (*p - '0');
    }
    x *= scale;
    static const char units[] = "KMGT";
    const char *u = *p ? strchr(units, *p >= 'a' && *p <= 'z' ? *p - 32 : *p) : NULL;
    if (!digits || !u)
        return err_set(err, "%s: '%s' is not a size like 6G, 1.5G or 512M (or auto: what the device has)", key, v);
    p++;
    if (!strcmp(p, "iB") || !strcmp(p, "B") || !strcmp(p, "ib") || !strcmp(p, "b"))
        p += strlen(p);
    if (*p)
        return err_set(err, "%s: '%s' is not a size like 6G, 1.5G or 512M (or auto: what the device has)", key, v);
    for (const char *k = units; k <= u; k++)
        x *= 1024;
    if (x < 1 || x > (double)(1ull << 50))
        return err_set(err, "%s: %s is out of range (1K to 1024T)", key, v);
    *out = (uint64_t)x;
    return 0;
}

static int parse_bool(const char *key, const char *v, bool *out, err_t *err)
{
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1")) {
        *out = true;
        return 0;
    }
    if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0")) {
        *out = false;
        return 0;
    }
    return err_set(err, "%s: '%s' is not on or off", key, v);
}

static int copy_str(const char *key, const char *v, char *dst, size_t cap, err_t *err)
{
    size_t n = strlen(v);
    if (n >= cap)
        return err_set(err, "%s: value is too long (%zu bytes, at most %zu)", key, n, cap - 1);
    memcpy(dst, v, n + 1);
    return 0;
}

/* ---- keys ------------------------------------------------------------------ */

void settings_defaults(settings *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->backend, "auto");
    s->repeat_penalty = 1.0f;
    s->device = -1;
    s->think = 1;
    s->n_predict = -1;
    strcpy(s->theme, "default");
    s->side_pane = SETTINGS_PANE_AUTO;
    s->mouse = true;
    s->draft = ENGINE_DRAFT_AUTO;
    s->n_cpu_moe = ENGINE_CPU_MOE_AUTO;
}

/* Every key, as settings_keys() lists them; a key's bit in settings.given
 * is 1 << its index here. */
static const char *const all_keys[] = {
    "model", "backend", "device", "template", "think",
    "temp", "top-k", "top-p", "min-p", "repeat-penalty", "presence-penalty", "frequency-penalty", "seed",
    "n-predict", "ctx", "context-overflow",
    "theme", "side-pane", "side-width", "mouse", "ignore-eos", "draft", "gpu-mem", "n-cpu-moe",
};
_Static_assert(sizeof all_keys / sizeof all_keys[0] <= 32, "settings.given has a bit per key");

static int key_index(const char *key)
{
    for (size_t i = 0; i < sizeof all_keys / sizeof all_keys[0]; i++)
        if (!strcmp(key, all_keys[i]))
            return (int)i;
    return -1;
}

bool settings_given(const settings *s, const char *key)
{
    int i = key_index(key);
    return i >= 0 && (s->given >> i & 1u);
}

const char *settings_keys(void)
{
    /* The table, joined: one list for help, errors and the tests that walk it. */
    static char list[512];
    if (!list[0]) {
        size_t n = 0;
        for (size_t i = 0; i < sizeof all_keys / sizeof all_keys[0] && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? " " : "", all_keys[i]);
    }
    return list;
}

const char *settings_option_key(const char *arg)
{
    /* Every key is "--KEY" but `model` (-m/--model, which the commands
     * parse: it outranks $GLMCHAT_MODEL) and `ignore-eos` (the flag
     * --ignore-eos, which takes no value). */
    if (!strcmp(arg, "-n"))
        return "n-predict";
    if (!strcmp(arg, "-c"))
        return "ctx";
    if (strncmp(arg, "--", 2) != 0 || !strcmp(arg + 2, "model") || !strcmp(arg + 2, "ignore-eos"))
        return NULL;
    int i = key_index(arg + 2);
    return i >= 0 ? all_keys[i] : NULL;
}

bool settings_is_sampling_key(const char *key)
{
    static const char *const keys[] = {"temp", "top-k", "top-p", "min-p", "repeat-penalty", "presence-penalty",
                                       "frequency-penalty", "seed", "n-predict"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i]))
            return true;
    return false;
}

static int set_sampling(settings *s, const char *key, const char *v, err_t *err)
{
    long x;
    /* has_* only once the value is good: a refused /set leaves the setting as it was. */
    if (!strcmp(key, "temp"))
        return parse_setting(key, v, SAMPLER_TEMP, &s->temp, err) ? -1 : (s->has_temp = true, 0);
    if (!strcmp(key, "top-p"))
        return parse_setting(key, v, SAMPLER_TOP_P, &s->top_p, err) ? -1 : (s->has_top_p = true, 0);
    if (!strcmp(key, "min-p"))
        return parse_setting(key, v, SAMPLER_MIN_P, &s->min_p, err) ? -1 : (s->has_min_p = true, 0);
    if (!strcmp(key, "repeat-penalty"))
        return parse_setting(key, v, SAMPLER_REPEAT_PENALTY, &s->repeat_penalty, err);
    if (!strcmp(key, "presence-penalty"))
        return parse_setting(key, v, SAMPLER_PRESENCE_PENALTY, &s->presence_penalty, err);
    if (!strcmp(key, "frequency-penalty"))
        return parse_setting(key, v, SAMPLER_FREQUENCY_PENALTY, &s->frequency_penalty, err);
    if (!strcmp(key, "top-k")) {
        if (parse_long(key, v, LONG_MIN, LONG_MAX, &x, err) != 0 || sampler_check(SAMPLER_TOP_K, key, (double)x, err))
            return -1;
        s->has_top_k = true;
        s->top_k = (int)x;
        return 0;
    }
    if (!strcmp(key, "n-predict")) {
        if (parse_long(key, v, -1, 10000000, &x, err) != 0)
            return -1;
        s->n_predict = (int)x;
        return 0;
    }
    /* seed */
    if (!strcmp(v, "random")) {
        s->has_seed = false;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long u = strtoull(v, &end, 10);
    /* digits only: strtoull would take " -5" (2^64 - 5) and "+5" */
    if (end == v || *end || errno || !(v[0] >= '0' && v[0] <= '9'))
        return err_set(err, "seed: '%s' is not a non-negative integer or 'random'", v);
    s->has_seed = true;
    s->seed = u;
    return 0;
}

static int set_key(settings *s, const char *key, const char *v, err_t *err)
{
    long x;
    if (settings_is_sampling_key(key))
        return set_sampling(s, key, v, err);
    if (!strcmp(key, "model"))
        return copy_str(key, v, s->model, sizeof s->model, err);
    /* Names are checked here, so a bad one is a usage error on the command
     * line (status 2) and FILE:LINE in the settings file. */
    if (!strcmp(key, "backend")) {
        if (strcmp(v, "cpu") && strcmp(v, "ref") && strcmp(v, "vulkan") && strcmp(v, "auto"))
            return err_set(err, "unknown backend '%s' (choose from: %s)", v, APP_BACKEND_NAMES);
        return copy_str(key, v, s->backend, sizeof s->backend, err);
    }
    if (!strcmp(key, "template")) {
        if (!tmpl_find(v))
            return err_set(err, "unknown template '%s' (choose from: %s)", v, tmpl_names());
        return copy_str(key, v, s->tmpl, sizeof s->tmpl, err);
    }
    if (!strcmp(key, "theme"))
        return copy_str(key, v, s->theme, sizeof s->theme, err);
    if (!strcmp(key, "device")) {
        if (parse_long(key, v, -1, 64, &x, err) != 0)
            return -1;
        s->device = (int)x;
        return 0;
    }
    if (!strcmp(key, "ctx")) {
        if (parse_long(key, v, 0, 1 << 24, &x, err) != 0)
            return -1;
        if (x != 0 && x < 16)
            return err_set(err, "ctx: %ld is too small (at least 16 tokens, or 0 for the largest that fits)", x);
        s->n_ctx = (uint32_t)x;
        return 0;
    }
    if (!strcmp(key, "gpu-mem"))
        return settings_parse_size(key, v, &s->gpu_mem, err);
    if (!strcmp(key, "n-cpu-moe"))
        return settings_parse_cpu_moe(key, v, &s->n_cpu_moe, err);
    if (!strcmp(key, "context-overflow")) {
        if (chat_ctx_policy_parse(v, &s->ctx_overflow) != 0)
            return err_set(err, "context-overflow: '%s' is not trim or stop", v);
        return 0;
    }
    if (!strcmp(key, "think")) {
        bool b;
        if (parse_bool(key, v, &b, err) != 0)
            return -1;
        s->think = b;
        return 0;
    }
    if (!strcmp(key, "mouse"))
        return parse_bool(key, v, &s->mouse, err);
    if (!strcmp(key, "draft")) { /* NextN speculative decoding */
        if (!strcmp(v, "auto")) {
            s->draft = ENGINE_DRAFT_AUTO;
            return 0;
        }
        if (!strcmp(v, "off") || !strcmp(v, "0")) {
            s->draft = ENGINE_DRAFT_OFF;
            return 0;
        }
        if (parse_long(key, v, 1, ENGINE_MAX_DRAFT, &x, err) != 0)
            return err_set(err, "draft: '%s' is not auto, off or 1 to %d drafts per step", v, ENGINE_MAX_DRAFT);
        s->draft = (int)x;
        return 0;
    }
    if (!strcmp(key, "ignore-eos"))
        return parse_bool(key, v, &s->ignore_eos, err);
    if (!strcmp(key, "side-pane")) {
        bool b;
        if (!strcmp(v, "auto")) {
            s->side_pane = SETTINGS_PANE_AUTO;
            return 0;
        }
        if (parse_bool(key, v, &b, err) != 0)
            return err_set(err, "side-pane: '%s' is not on, off or auto", v);
        s->side_pane = b ? SETTINGS_PANE_ON : SETTINGS_PANE_OFF;
        return 0;
    }
    if (!strcmp(key, "side-width")) {
        if (parse_long(key, v, 0, 200, &x, err) != 0)
            return -1;
        if (x != 0 && x < 24)
            return err_set(err, "side-width: %ld is too narrow (at least 24, or 0 to adapt)", x);
        s->side_width = (int)x;
        return 0;
    }
    return err_set(err, "unknown setting '%s' (known: %s)", key, settings_keys());
}

int settings_set(settings *s, const char *key, const char *v, err_t *err)
{
    if (set_key(s, key, v, err) != 0)
        return -1;
    int i = key_index(key);
    if (i >= 0)
        s->given |= 1u << i;
    return 0;
}

void settings_format_sampling(const settings *s, char *buf, size_t cap)
{
    char t[32], k[32], p[32], m[32], sd[32];
    snprintf(t, sizeof t, s->has_temp ? "%g" : "default", (double)s->temp);
    snprintf(k, sizeof k, s->has_top_k ? "%d" : "default", s->top_k);
    snprintf(p, sizeof p, s->has_top_p ? "%g" : "default", (double)s->top_p);
    snprintf(m, sizeof m, s->has_min_p ? "%g" : "default", (double)s->min_p);
    if (s->has_seed)
        snprintf(sd, sizeof sd, "%llu", (unsigned long long)s->seed);
    else
        snprintf(sd, sizeof sd, "random");
    snprintf(buf, cap,
             "temp = %s, top-k = %s, top-p = %s, min-p = %s, repeat-penalty = %g, presence-penalty = %g, "
             "frequency-penalty = %g, seed = %s, n-predict = %d",
             t, k, p, m, (double)s->repeat_penalty, (double)s->presence_penalty, (double)s->frequency_penalty, sd,
             s->n_predict);
}

/* ---- the file ---------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

/* One `key = value` line (comments and blanks allowed); line is modified. */
static int parse_line(settings *s, char *line, const char *path, int lineno, err_t *err)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = 0;
    char *l = trim(line);
    if (!*l)
        return 0;
    char *eq = strchr(l, '=');
    if (!eq)
        return err_set(err, "%s:%d: expected 'key = value'", path, lineno);
    *eq = 0;
    char *key = trim(l), *val = trim(eq + 1);
    if (!*val)
        return err_set(err, "%s:%d: %s: missing value", path, lineno, key);
    if (settings_set(s, key, val, err) != 0)
        return err_prefix(err, "%s:%d", path, lineno);
    return 0;
}

int settings_parse(settings *s, const char *text, size_t len, const char *path, err_t *err)
{
    char line[PATH_MAX + 64];
    int lineno = 0, rc = 0;
    uint32_t given = s->given; /* the file's keys are defaults, not given explicitly */
    for (size_t pos = file_bom_len(text, len); pos < len && rc == 0;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        lineno++;
        if (n >= sizeof line)
            rc = err_set(err, "%s:%d: line too long", path, lineno);
        else if (memchr(text + pos, 0, n))
            rc = err_set(err, "%s:%d: NUL byte in a settings file", path, lineno);
        else {
            memcpy(line, text + pos, n);
            line[n] = 0;
            rc = parse_line(s, line, path, lineno, err);
        }
        pos += n + (nl ? 1 : 0);
    }
    s->given = given;
    return rc;
}

int settings_load(settings *s, const char *path, bool missing_ok, err_t *err)
{
    char *text;
    size_t len;
    /* The shared reader: only a regular file (a FIFO or /dev/zero behind the
     * name would block or never end), at most SETTINGS_MAX_FILE bytes. */
    if (file_read_regular(path, SETTINGS_MAX_FILE, "settings file", &text, &len, err) != 0)
        return errno == ENOENT && missing_ok ? 0 : -1;
    int rc = settings_parse(s, text, len, path, err);
    free(text);
    return rc;
}

/* ---- sampling -------------------------------------------------------------------- */

void settings_to_sampler(const settings *s, const tmpl_preset *tmpl, const gguf_ctx *meta, uint64_t seed,
                         sampler_params *sp)
{
    sampler_params_default(sp);
    float temp = sp->temp, top_p = sp->top_p, min_p = sp->min_p;
    int top_k = sp->top_k;
    if (tmpl)
        tmpl_sampling_defaults(tmpl, &temp, &top_p, &min_p, &top_k);
    tmpl_model_sampling(meta, &temp, &top_p, &min_p, &top_k);
    sp->temp = s->has_temp ? s->temp : temp;
    sp->top_p = s->has_top_p ? s->top_p : top_p;
    sp->min_p = s->has_min_p ? s->min_p : min_p;
    sp->top_k = s->has_top_k ? s->top_k : top_k;
    sp->repeat_penalty = s->repeat_penalty;
    sp->presence_penalty = s->presence_penalty;
    sp->frequency_penalty = s->frequency_penalty;
    sp->seed = s->has_seed ? s->seed : seed;
}

void settings_follow_recording(settings *s, const conversation *c)
{
    if (c->thinking >= 0 && !settings_given(s, "think"))
        s->think = c->thinking;
    const conv_sampling *r = &c->sampling;
    unsigned missing = c->sampling_missing;
    if (!r->set)
        return;
#define FOLLOW(key, bit) (!(missing & (bit)) && !settings_given(s, key))
    if (FOLLOW("temp", CONV_S_TEMP)) {
        s->has_temp = true;
        s->temp = (float)r->temp;
    }
    if (FOLLOW("top-k", CONV_S_TOP_K)) {
        s->has_top_k = true;
        s->top_k = r->top_k;
    }
    if (FOLLOW("top-p", CONV_S_TOP_P)) {
        s->has_top_p = true;
        s->top_p = (float)r->top_p;
    }
    if (FOLLOW("min-p", CONV_S_MIN_P)) {
        s->has_min_p = true;
        s->min_p = (float)r->min_p;
    }
    if (FOLLOW("repeat-penalty", CONV_S_REPEAT_PENALTY))
        s->repeat_penalty = (float)r->repeat_penalty;
    if (FOLLOW("presence-penalty", CONV_S_PRESENCE_PENALTY))
        s->presence_penalty = (float)r->presence_penalty;
    if (FOLLOW("frequency-penalty", CONV_S_FREQUENCY_PENALTY))
        s->frequency_penalty = (float)r->frequency_penalty;
    if (FOLLOW("seed", CONV_S_SEED)) {
        s->has_seed = true;
        s->seed = r->seed;
    }
    if (FOLLOW("n-predict", CONV_S_N_PREDICT))
        s->n_predict = r->n_predict;
#undef FOLLOW
}

uint64_t settings_random_seed(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 32;
    }
    return v & INT64_MAX;
}
