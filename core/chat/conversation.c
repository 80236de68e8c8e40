/* conversation.c: conversations in memory, their JSON text and Markdown,
 * model fingerprints.  Files on disk (loading, saving, locks): conv_store.c. */
#include "conversation.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/file_read.h"
#include "base/sha256.h"
#include "base/text_safe.h"

#define CONV_FORMAT_NAME "glmchat-conversation" /* as CONV_FILE_HEAD spells it */

/* ---- messages ---------------------------------------------------------------- */

static char *dup_utf8(const char *s)
{
    sbuf b = {0};
    tsafe_repair(&b, s, strlen(s));
    return sbuf_take(&b);
}

void conv_init(conversation *c)
{
    memset(c, 0, sizeof *c);
    c->thinking = -1;
    c->sampling.repeat_penalty = 1.0; /* off, as the other zeros are */
    c->created = conv_now();
}

conv_sampling conv_sampling_of(const sampler_params *sp, int n_predict)
{
    return (conv_sampling){.set = true,
                           .temp = sp->temp,
                           .top_p = sp->top_p,
                           .min_p = sp->min_p,
                           .top_k = sp->top_k,
                           .repeat_penalty = sp->repeat_penalty,
                           .presence_penalty = sp->presence_penalty,
                           .frequency_penalty = sp->frequency_penalty,
                           .seed = sp->seed,
                           .n_predict = n_predict};
}

static void msg_free(conv_msg *m)
{
    free(m->role);
    free(m->content);
    free(m->reasoning);
    free(m->error);
}

void conv_clear(conversation *c)
{
    for (size_t i = 0; i < c->n; i++)
        msg_free(&c->msgs[i]);
    c->n = 0;
}

/* The list is conv_store.c's record of the files on disk, but only memory
 * is freed here: conv_free needs it, and the store calls down into this
 * file, never the other way (tests/t_layers.sh). */
void conv_forget_files(conversation *c)
{
    for (size_t i = 0; i < c->n_files; i++)
        free(c->files[i].path);
    free(c->files);
    c->files = NULL;
    c->n_files = 0;
}

void conv_free(conversation *c)
{
    conv_clear(c);
    free(c->msgs);
    free(c->model_path);
    free(c->model_name);
    free(c->model_fingerprint);
    free(c->tmpl);
    conv_forget_files(c);
    memset(c, 0, sizeof *c);
}

conv_msg *conv_add(conversation *c, const char *role, const char *content, const char *reasoning)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        conv_msg *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        c->msgs = m;
        c->cap = cap;
    }
    conv_msg *m = &c->msgs[c->n++];
    memset(m, 0, sizeof *m);
    m->role = dup_utf8(role);
    m->content = dup_utf8(content ? content : "");
    m->reasoning = reasoning ? dup_utf8(reasoning) : NULL;
    return m;
}

void conv_set_error(conv_msg *m, const char *why)
{
    free(m->error);
    m->error = why ? dup_utf8(why) : NULL;
    if (why)
        m->stopped = true;
}

void conv_set_seed(conv_msg *m, uint64_t seed)
{
    m->has_seed = true;
    m->seed = seed;
    snprintf(m->draw, sizeof m->draw, "%s", SAMPLER_DRAW);
}

const char *conv_msg_draw(const conv_msg *m)
{
    return m->draw[0] ? m->draw : SAMPLER_DRAW_BEFORE;
}

void conv_truncate(conversation *c, size_t n)
{
    while (c->n > n)
        msg_free(&c->msgs[--c->n]);
}

void conv_set_system(conversation *c, const char *text)
{
    bool has = c->n > 0 && !strcmp(c->msgs[0].role, "system");
    if (!text || !text[0]) {
        if (has) {
            msg_free(&c->msgs[0]);
            memmove(c->msgs, c->msgs + 1, (c->n - 1) * sizeof *c->msgs);
            c->n--;
        }
        return;
    }
    if (has) {
        free(c->msgs[0].content);
        c->msgs[0].content = dup_utf8(text);
        return;
    }
    conv_add(c, "system", text, NULL);
    conv_msg m = c->msgs[c->n - 1];
    memmove(c->msgs + 1, c->msgs, (c->n - 1) * sizeof *c->msgs);
    c->msgs[0] = m;
}

void conv_set_str(char **field, const char *value)
{
    free(*field);
    *field = value ? dup_utf8(value) : NULL;
}

long conv_last(const conversation *c, const char *role)
{
    for (size_t i = c->n; i-- > 0;)
        if (!strcmp(c->msgs[i].role, role))
            return (long)i;
    return -1;
}

/* ---- time ---------------------------------------------------------------------- */

double conv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void conv_format_time(double t, char *buf, size_t cap)
{
    time_t s = (time_t)floor(t);
    /* Rounded, not truncated: 0.157 s is stored as 0.15699..., and a file
     * written and read again must say the same. */
    long ms = lround((t - (double)s) * 1000.0);
    if (ms >= 1000) {
        s += 1;
        ms -= 1000;
    }
    struct tm tm;
    if (!gmtime_r(&s, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999) {
        snprintf(buf, cap, "1970-01-01T00:00:00.000Z");
        return;
    }
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

int conv_parse_time(const char *s, double *t)
{
    struct tm tm = {0};
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &used) != 6 || used != 19)
        return -1;
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    double frac = 0;
    const char *p = s + 19;
    if (*p == '.') {
        double scale = 0.1;
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9') {
            frac += (*p - '0') * scale;
            scale /= 10;
            p++;
        }
    }
    if (strcmp(p, "Z") != 0)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    /* The fields were checked above; -1 is then 1969-12-31T23:59:59, not an error. */
    time_t sec = timegm(&tm);
    *t = (double)sec + frac;
    return 0;
}

/* ---- parsing ------------------------------------------------------------------------ */

typedef struct {
    const char *name; /* file name for errors */
    err_t *err;
} pctx;

static int perr(pctx *p, const char *field, const char *what)
{
    return err_set(p->err, "%s: %s: %s", p->name, field, what);
}

/* Optional string member: absent or null leaves *out untouched. */
static int get_opt_str(pctx *p, json_t *obj, const char *key, const char *field, const char **out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return perr(p, field, "expected a string");
    *out = json_string_value(v);
    return 0;
}

static int get_opt_num(pctx *p, json_t *obj, const char *key, const char *field, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return perr(p, field, "expected a number");
    *out = json_number_value(v);
    return 0;
}

/* A speed: a finite number >= 0 (absent or null: unknown, 0). */
static int get_opt_rate(pctx *p, json_t *obj, const char *key, const char *field, double *out)
{
    double v = 0;
    if (get_opt_num(p, obj, key, field, &v) != 0)
        return -1;
    if (v < 0 || v > 1e12)
        return perr(p, field, "expected a speed in tokens/s (0 or more)");
    *out = v;
    return 0;
}

/* A number within [lo, hi] (absent or null: *out untouched). */
/* A sampler setting: sampler_check's ranges, the same as the command
 * line's and the settings file's (a recording is replayed with them). */
static int get_opt_setting(pctx *p, json_t *obj, const char *key, const char *field, sampler_setting which,
                           double *out)
{
    double v = *out;
    if (get_opt_num(p, obj, key, field, &v) != 0)
        return -1;
    err_t why;
    if (sampler_check(which, field, v, &why) != 0)
        return err_set(p->err, "%s: %s", p->name, why.msg);
    *out = v;
    return 0;
}

static int get_opt_int(pctx *p, json_t *obj, const char *key, const char *field, long long lo,
                       long long hi, long long *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return perr(p, field, "expected an integer");
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return perr(p, field, "value out of range");
    *out = x;
    return 0;
}

/* content: a string, null, or [{"type": "text", "text": ...}, ...]. */
static int parse_content(pctx *p, json_t *v, const char *field, sbuf *out)
{
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        sbuf_add(out, json_string_value(v), json_string_length(v));
        return 0;
    }
    if (!json_is_array(v))
        return perr(p, field, "expected a string, null or an array of text parts");
    size_t i;
    json_t *part;
    json_array_foreach(v, i, part) {
        json_t *type = json_object_get(part, "type");
        json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type))
            return perr(p, field, "each part must be an object with a \"type\"");
        if (strcmp(json_string_value(type), "text") != 0)
            continue; /* images etc.: nothing a text model can use */
        if (!json_is_string(text))
            return perr(p, field, "a text part needs a string \"text\"");
        sbuf_add(out, json_string_value(text), json_string_length(text));
    }
    return 0;
}

static int parse_message(pctx *p, conversation *c, json_t *m, size_t i)
{
    char field[64];
    snprintf(field, sizeof field, "messages[%zu]", i);
    if (!json_is_object(m))
        return perr(p, field, "expected an object");
    snprintf(field, sizeof field, "messages[%zu].role", i);
    json_t *role = json_object_get(m, "role");
    if (!json_is_string(role))
        return perr(p, field, role ? "expected a string" : "missing");
    const char *r = json_string_value(role);
    if (!strcmp(r, "developer"))
        r = "system"; /* OpenAI's newer name for the system prompt */
    if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))
        return err_set(p->err, "%s: %s: unknown role '%.40s' (system, user, assistant, tool)", p->name,
                       field, r);
    sbuf content = {0};
    snprintf(field, sizeof field, "messages[%zu].content", i);
    if (parse_content(p, json_object_get(m, "content"), field, &content) != 0) {
        sbuf_free(&content);
        return -1;
    }
    const char *reasoning = NULL;
    snprintf(field, sizeof field, "messages[%zu].reasoning_content", i);
    if (get_opt_str(p, m, "reasoning_content", field, &reasoning) != 0) {
        sbuf_free(&content);
        return -1;
    }
    conv_add(c, r, sbuf_str(&content), reasoning);
    sbuf_free(&content);
    return 0;
}

/* A seed (sampling.seed, turns[i].seed): a JSON integer (below 2^63: what
 * JSON parsers keep exactly), or for larger seeds the unsigned decimal as a
 * string; *present (when given) says whether the file had one. */
static int get_opt_seed(pctx *p, json_t *s, const char *field, uint64_t *out, bool *present)
{
    json_t *v = json_object_get(s, "seed");
    if (present)
        *present = false;
    if (!v || json_is_null(v))
        return 0;
    if (present)
        *present = true;
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *d = json_string_value(v);
        char *end;
        errno = 0;
        unsigned long long u = strtoull(d, &end, 10);
        if (d[0] >= '0' && d[0] <= '9' && !*end && errno == 0 && json_string_length(v) <= 20) {
            *out = u;
            return 0;
        }
    }
    return perr(p, field, "expected an integer from 0 to 18446744073709551615 (as a number or a string)");
}

/* The name of a sampler's draw (turns[i].draw): 1..cap-1 characters of
 * [a-z0-9_-], so that it shows as it is wherever it is shown. */
static bool draw_name_ok(const char *s, size_t cap)
{
    size_t n = strlen(s);
    if (n == 0 || n >= cap)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* A turn's metadata belongs to one message: "message" is required and must
 * be the index of a message of this file (null is not "absent" here: an
 * index the file does not name would point outside the messages). */
static int parse_turn(pctx *p, conversation *c, json_t *t, size_t i)
{
    char field[64];
    snprintf(field, sizeof field, "turns[%zu]", i);
    if (!json_is_object(t))
        return perr(p, field, "expected an object");
    snprintf(field, sizeof field, "turns[%zu].message", i);
    json_t *mv = json_object_get(t, "message");
    if (!mv)
        return perr(p, field, "missing");
    if (!json_is_integer(mv))
        return perr(p, field, "expected the index of a message (an integer)");
    long long idx = json_integer_value(mv);
    if (idx < 0 || (unsigned long long)idx >= c->n)
        return err_set(p->err, "%s: %s: %lld is not the index of a message (the file has %zu)", p->name, field,
                       idx, c->n);
    conv_msg *m = &c->msgs[idx];
    const char *time = NULL;
    snprintf(field, sizeof field, "turns[%zu].time", i);
    if (get_opt_str(p, t, "time", field, &time) != 0)
        return -1;
    if (time && conv_parse_time(time, &m->time) != 0)
        return perr(p, field, "expected a time like 2025-01-31T12:00:00.000Z");
    long long tokens = 0;
    snprintf(field, sizeof field, "turns[%zu].tokens", i);
    if (get_opt_int(p, t, "tokens", field, 0, UINT32_MAX, &tokens) != 0)
        return -1;
    m->n_tokens = (uint32_t)tokens;
    snprintf(field, sizeof field, "turns[%zu].tokens_per_second", i);
    if (get_opt_rate(p, t, "tokens_per_second", field, &m->tps) != 0)
        return -1;
    snprintf(field, sizeof field, "turns[%zu].prefill_tokens_per_second", i);
    if (get_opt_rate(p, t, "prefill_tokens_per_second", field, &m->prefill_tps) != 0)
        return -1;
    json_t *stopped = json_object_get(t, "stopped");
    if (stopped && !json_is_null(stopped) && !json_is_boolean(stopped)) {
        snprintf(field, sizeof field, "turns[%zu].stopped", i);
        return perr(p, field, "expected true or false");
    }
    m->stopped = stopped && json_is_true(stopped);
    const char *why = NULL;
    snprintf(field, sizeof field, "turns[%zu].error", i);
    if (get_opt_str(p, t, "error", field, &why) != 0)
        return -1;
    if (why)
        conv_set_error(m, why);
    const char *draw = NULL;
    snprintf(field, sizeof field, "turns[%zu].draw", i);
    if (get_opt_str(p, t, "draw", field, &draw) != 0)
        return -1;
    if (draw && !draw_name_ok(draw, sizeof m->draw))
        return perr(p, field, "expected the name of a draw (\"" SAMPLER_DRAW "\")");
    snprintf(m->draw, sizeof m->draw, "%s", draw ? draw : "");
    snprintf(field, sizeof field, "turns[%zu].seed", i);
    return get_opt_seed(p, t, field, &m->seed, &m->has_seed);
}

static int parse_header(pctx *p, conversation *c, json_t *root)
{
    json_t *fmt = json_object_get(root, "format");
    if (fmt && (!json_is_string(fmt) || strcmp(json_string_value(fmt), CONV_FORMAT_NAME)))
        return err_set(p->err, "%s: not a glmchat conversation (\"format\" is not \"%s\")", p->name,
                       CONV_FORMAT_NAME);
    json_t *ver = json_object_get(root, "version");
    if (ver) {
        if (!json_is_integer(ver))
            return perr(p, "version", "expected an integer");
        long long v = json_integer_value(ver);
        if (v > CONV_FORMAT_VERSION)
            return err_set(p->err,
                           "%s: conversation format version %lld is newer than this glmchat reads (%d); "
                           "update glmchat",
                           p->name, v, CONV_FORMAT_VERSION);
        if (v < 1)
            return err_set(p->err, "%s: unknown conversation format version %lld", p->name, v);
    }
    const char *created = NULL;
    if (get_opt_str(p, root, "created", "created", &created) != 0)
        return -1;
    if (created && conv_parse_time(created, &c->created) != 0)
        return perr(p, "created", "expected a time like 2025-01-31T12:00:00.000Z");
    return 0;
}

static int parse_model(pctx *p, conversation *c, json_t *root)
{
    json_t *m = json_object_get(root, "model");
    if (!m || json_is_null(m))
        return 0;
    if (!json_is_object(m))
        return perr(p, "model", "expected an object");
    const char *path = NULL, *name = NULL, *fp = NULL;
    long long size = 0;
    if (get_opt_str(p, m, "path", "model.path", &path) || get_opt_str(p, m, "name", "model.name", &name) ||
        get_opt_str(p, m, "fingerprint", "model.fingerprint", &fp) ||
        get_opt_int(p, m, "size", "model.size", 0, LLONG_MAX, &size))
        return -1;
    conv_set_str(&c->model_path, path);
    conv_set_str(&c->model_name, name);
    conv_set_str(&c->model_fingerprint, fp);
    c->model_size = (uint64_t)size;
    return 0;
}

static int check_top_k(pctx *p, long long top_k)
{
    err_t why;
    if (sampler_check(SAMPLER_TOP_K, "sampling.top_k", (double)top_k, &why) != 0)
        return err_set(p->err, "%s: %s", p->name, why.msg);
    return 0;
}

static int parse_settings(pctx *p, conversation *c, json_t *root)
{
    const char *tmpl = NULL;
    if (get_opt_str(p, root, "template", "template", &tmpl) != 0)
        return -1;
    conv_set_str(&c->tmpl, tmpl);
    json_t *th = json_object_get(root, "thinking");
    if (th && !json_is_null(th)) {
        if (!json_is_boolean(th))
            return perr(p, "thinking", "expected true or false");
        c->thinking = json_is_true(th);
    }
    json_t *s = json_object_get(root, "sampling");
    if (!s || json_is_null(s))
        return 0;
    if (!json_is_object(s))
        return perr(p, "sampling", "expected an object");
    conv_sampling *sp = &c->sampling;
    long long top_k = 0, n_predict = -1;
    static const struct {
        const char *key;
        unsigned bit;
    } fields[] = {{"temperature", CONV_S_TEMP},
                  {"top_k", CONV_S_TOP_K},
                  {"top_p", CONV_S_TOP_P},
                  {"min_p", CONV_S_MIN_P},
                  {"repeat_penalty", CONV_S_REPEAT_PENALTY},
                  {"presence_penalty", CONV_S_PRESENCE_PENALTY},
                  {"frequency_penalty", CONV_S_FREQUENCY_PENALTY},
                  {"seed", CONV_S_SEED},
                  {"n_predict", CONV_S_N_PREDICT}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *v = json_object_get(s, fields[i].key);
        if (!v || json_is_null(v))
            c->sampling_missing |= fields[i].bit; /* a replay then uses the current setting */
    }
    /* The ranges the settings accept: a recording is replayed with these.
     * A penalty left out is off (files from before they were recorded). */
    sp->repeat_penalty = 1.0;
    sp->presence_penalty = sp->frequency_penalty = 0.0;
    if (get_opt_setting(p, s, "temperature", "sampling.temperature", SAMPLER_TEMP, &sp->temp) ||
        get_opt_setting(p, s, "top_p", "sampling.top_p", SAMPLER_TOP_P, &sp->top_p) ||
        get_opt_setting(p, s, "min_p", "sampling.min_p", SAMPLER_MIN_P, &sp->min_p) ||
        get_opt_setting(p, s, "repeat_penalty", "sampling.repeat_penalty", SAMPLER_REPEAT_PENALTY,
                        &sp->repeat_penalty) ||
        get_opt_setting(p, s, "presence_penalty", "sampling.presence_penalty", SAMPLER_PRESENCE_PENALTY,
                        &sp->presence_penalty) ||
        get_opt_setting(p, s, "frequency_penalty", "sampling.frequency_penalty", SAMPLER_FREQUENCY_PENALTY,
                        &sp->frequency_penalty) ||
        get_opt_int(p, s, "top_k", "sampling.top_k", 0, INT_MAX, &top_k) ||
        check_top_k(p, top_k) ||
        get_opt_seed(p, s, "sampling.seed", &sp->seed, NULL) ||
        get_opt_int(p, s, "n_predict", "sampling.n_predict", -1, INT_MAX, &n_predict))
        return -1;
    sp->top_k = (int)top_k;
    sp->n_predict = (int)n_predict;
    sp->set = true;
    return 0;
}

static int parse_root(pctx *p, conversation *c, json_t *root)
{
    if (!json_is_object(root))
        return err_set(p->err, "%s: expected a JSON object with \"messages\" at the top level", p->name);
    if (parse_header(p, c, root) != 0)
        return -1;
    json_t *msgs = json_object_get(root, "messages");
    if (!msgs)
        return err_set(p->err, "%s: no \"messages\" array: not a conversation", p->name);
    if (!json_is_array(msgs))
        return perr(p, "messages", "expected an array");
    size_t i;
    json_t *v;
    json_array_foreach(msgs, i, v) {
        if (parse_message(p, c, v, i) != 0)
            return -1;
    }
    if (parse_model(p, c, root) != 0 || parse_settings(p, c, root) != 0)
        return -1;
    json_t *turns = json_object_get(root, "turns");
    if (turns && !json_is_null(turns)) {
        if (!json_is_array(turns))
            return perr(p, "turns", "expected an array");
        json_array_foreach(turns, i, v) {
            if (parse_turn(p, c, v, i) != 0)
                return -1;
        }
    }
    return 0;
}

int conv_parse(conversation *c, const char *text, size_t len, const char *name, err_t *err)
{
    conv_init(c);
    size_t bom = file_bom_len(text, len);
    text += bom;
    len -= bom;
    if (len == 0)
        return err_set(err, "%s: empty file", name);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* jansson quotes the bytes near the error: file content, shown inert. */
        sbuf near = {0};
        tsafe_one_line(&near, je.text, strlen(je.text));
        err_set(err, "%s: not valid JSON: %s (line %d, column %d)", name, sbuf_str(&near), je.line, je.column);
        sbuf_free(&near);
        return -1;
    }
    pctx p = {name, err};
    int rc = parse_root(&p, c, root);
    json_decref(root);
    if (rc != 0) {
        conv_free(c);
        conv_init(c);
        /* Errors quote the file (a role, a field): one line, inert. */
        if (err) {
            sbuf line = {0};
            tsafe_one_line(&line, err->msg, strlen(err->msg));
            snprintf(err->msg, sizeof err->msg, "%s", sbuf_str(&line));
            sbuf_free(&line);
        }
    }
    return rc;
}

/* ---- writing ------------------------------------------------------------------------ */

/* Settings come from floats: round to 6 digits so 0.8 is written as 0.8. */
static json_t *real6(double x)
{
    char b[32];
    snprintf(b, sizeof b, "%.6g", x);
    return json_real(strtod(b, NULL));
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *time_str(double t)
{
    char b[40];
    conv_format_time(t, b, sizeof b);
    return json_string(b);
}

/* Seeds below 2^63 as a number; larger ones as their exact unsigned
 * decimal in a string (a JSON integer that large is not portable: jansson
 * refuses it, others round it through a double). */
static json_t *seed_json(uint64_t seed)
{
    if (seed <= INT64_MAX)
        return json_integer((json_int_t)seed);
    char b[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)seed);
    return json_string(b);
}

static bool has_meta(const conv_msg *m)
{
    return m->time > 0 || m->n_tokens || m->tps > 0 || m->prefill_tps > 0 || m->stopped || m->error || m->has_seed;
}

static json_t *turns_json(const conversation *c)
{
    json_t *turns = json_array();
    for (size_t i = 0; i < c->n; i++) {
        const conv_msg *m = &c->msgs[i];
        if (!has_meta(m))
            continue;
        json_t *t = json_object();
        json_object_set_new(t, "message", json_integer((json_int_t)i));
        if (m->time > 0)
            json_object_set_new(t, "time", time_str(m->time));
        json_object_set_new(t, "tokens", json_integer(m->n_tokens));
        if (!strcmp(m->role, "assistant")) {
            json_object_set_new(t, "tokens_per_second", real6(m->tps));
            json_object_set_new(t, "prefill_tokens_per_second", real6(m->prefill_tps));
            json_object_set_new(t, "stopped", json_boolean(m->stopped));
            if (m->has_seed)
                json_object_set_new(t, "seed", seed_json(m->seed));
            if (m->draw[0])
                json_object_set_new(t, "draw", json_string(m->draw));
        }
        if (m->error)
            json_object_set_new(t, "error", json_string(m->error));
        json_array_append_new(turns, t);
    }
    return turns;
}

char *conv_to_json(const conversation *c)
{
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string(CONV_FORMAT_NAME));
    json_object_set_new(root, "version", json_integer(CONV_FORMAT_VERSION));
    json_object_set_new(root, "created", time_str(c->created));
    json_t *model = json_object();
    json_object_set_new(model, "path", str_or_null(c->model_path));
    json_object_set_new(model, "name", str_or_null(c->model_name));
    json_object_set_new(model, "size", json_integer((json_int_t)c->model_size));
    json_object_set_new(model, "fingerprint", str_or_null(c->model_fingerprint));
    json_object_set_new(root, "model", model);
    json_object_set_new(root, "template", str_or_null(c->tmpl));
    json_object_set_new(root, "thinking", c->thinking < 0 ? json_null() : json_boolean(c->thinking));
    if (c->sampling.set) {
        const conv_sampling *s = &c->sampling;
        json_t *sp = json_object();
        json_object_set_new(sp, "temperature", real6(s->temp));
        json_object_set_new(sp, "top_k", json_integer(s->top_k));
        json_object_set_new(sp, "top_p", real6(s->top_p));
        json_object_set_new(sp, "min_p", real6(s->min_p));
        json_object_set_new(sp, "repeat_penalty", real6(s->repeat_penalty));
        json_object_set_new(sp, "presence_penalty", real6(s->presence_penalty));
        json_object_set_new(sp, "frequency_penalty", real6(s->frequency_penalty));
        json_object_set_new(sp, "seed", seed_json(s->seed));
        json_object_set_new(sp, "n_predict", json_integer(s->n_predict));
        json_object_set_new(root, "sampling", sp);
    }
    json_t *msgs = json_array();
    for (size_t i = 0; i < c->n; i++) {
        const conv_msg *m = &c->msgs[i];
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string(m->role));
        json_object_set_new(o, "content", json_string(m->content));
        if (m->reasoning)
            json_object_set_new(o, "reasoning_content", json_string(m->reasoning));
        json_array_append_new(msgs, o);
    }
    json_object_set_new(root, "messages", msgs);
    json_object_set_new(root, "turns", turns_json(c));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!text) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    return text;
}

/* ---- Markdown -------------------------------------------------------------------- */

static const char *role_title(const char *role)
{
    if (!strcmp(role, "system"))
        return "System";
    if (!strcmp(role, "user"))
        return "User";
    if (!strcmp(role, "assistant"))
        return "Assistant";
    return "Tool";
}

void conv_to_markdown(const conversation *c, sbuf *out)
{
    char when[40];
    conv_format_time(c->created, when, sizeof when);
    sbuf_adds(out, "# Conversation\n\n");
    sbuf_printf(out, "- started: %s\n", when);
    if (c->model_path || c->model_name) {
        sbuf_adds(out, "- model: ");
        /* Metadata is untrusted too: shown inert like the messages. */
        const char *mn = c->model_name && c->model_name[0] ? c->model_name : c->model_path;
        tsafe_sanitize(out, mn, strlen(mn), false);
        sbuf_addc(out, '\n');
    }
    if (c->tmpl) {
        sbuf_adds(out, "- template: ");
        tsafe_sanitize(out, c->tmpl, strlen(c->tmpl), false);
        sbuf_addc(out, '\n');
    }
    for (size_t i = 0; i < c->n; i++) {
        const conv_msg *m = &c->msgs[i];
        sbuf_printf(out, "\n## %s\n\n", role_title(m->role));
        if (m->reasoning && m->reasoning[0]) {
            sbuf_adds(out, "<details><summary>Reasoning</summary>\n\n");
            tsafe_sanitize(out, m->reasoning, strlen(m->reasoning), false);
            sbuf_adds(out, "\n\n</details>\n\n");
        }
        tsafe_sanitize(out, m->content, strlen(m->content), false);
        sbuf_addc(out, '\n');
        if (!strcmp(m->role, "assistant") && (m->tps > 0 || m->stopped))
            sbuf_printf(out, "\n*%u tokens, %.1f tokens/s%s*\n", m->n_tokens, m->tps,
                        m->error ? ", failed" : m->stopped ? ", stopped" : "");
        if (m->error) {
            sbuf_adds(out, "\n*The answer failed: ");
            tsafe_sanitize(out, m->error, strlen(m->error), false);
            sbuf_adds(out, "*\n");
        }
    }
}

/* ---- fingerprint ------------------------------------------------------------------- */

#define FP_SPAN (1u << 20)

static void fp_finish(sha256_ctx *h, char out[72])
{
    unsigned char d[32];
    char hex[65];
    sha256_final(h, d);
    sha256_hex(d, hex);
    snprintf(out, 72, "sha256:%s", hex);
}

static void fp_size(sha256_ctx *h, uint64_t size)
{
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(size >> (8 * i));
    sha256_update(h, le, 8);
}

void conv_fingerprint_mem(const void *data, uint64_t size, char out[72])
{
    sha256_ctx h;
    sha256_init(&h);
    fp_size(&h, size);
    uint64_t head = size < FP_SPAN ? size : FP_SPAN;
    sha256_update(&h, data, (size_t)head);
    uint64_t tail = size < FP_SPAN ? size : FP_SPAN;
    sha256_update(&h, (const char *)data + (size - tail), (size_t)tail);
    fp_finish(&h, out);
}

static int read_at(int fd, char *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

int conv_fingerprint(const char *path, char out[72], uint64_t *size_out, err_t *err)
{
    /* O_NONBLOCK: a FIFO given as the model must not block the open. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(err, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, "%s: %s, not a model file", path,
                       S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    }
    char *buf = malloc(FP_SPAN);
    if (!buf) {
        close(fd);
        return err_set(err, "%s: out of memory", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    sha256_ctx h;
    sha256_init(&h);
    fp_size(&h, size);
    uint64_t span = size < FP_SPAN ? size : FP_SPAN;
    int rc = 0;
    if (read_at(fd, buf, (size_t)span, 0) != 0)
        rc = -1;
    else
        sha256_update(&h, buf, (size_t)span);
    if (rc == 0 && read_at(fd, buf, (size_t)span, size - span) != 0)
        rc = -1;
    else if (rc == 0)
        sha256_update(&h, buf, (size_t)span);
    free(buf);
    close(fd);
    if (rc != 0)
        return err_set(err, "%s: read error while fingerprinting", path);
    fp_finish(&h, out);
    if (size_out)
        *size_out = size;
    return 0;
}
