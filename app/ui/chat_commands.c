/* chat_commands.c: the command table, the commands (/help /quit (/exit
 * /bye) /retry /edit /copy /system /undo /clear /set /template /think
 * /model /stats /save /load /list /resume /replay /export /theme), /help
 * made from the table, dispatch, hints, completion. */
#include "chat_commands.h"

#include <ctype.h>
#include <langinfo.h>
#include <sys/stat.h>
#include <readline/readline.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/chat_setup.h"
#include "clip_probe.h"
#include "clipboard.h"
#include "conv_list.h"
#include "chat/conversation.h"
#include "common/paths.h"
#include "base/sbuf.h"
#include "base/text_safe.h"
#include "ui_sidepane.h"

typedef enum { ARG_NONE, ARG_TEXT, ARG_PATH, ARG_SETKEY, ARG_TEMPLATE, ARG_ONOFF, ARG_THEME, ARG_COPY, ARG_MODEL } arg_kind;

/* Where /help lists a command; TOPIC_NONE: only the topic's own text names it. */
typedef enum { TOPIC_NONE, TOPIC_CHAT, TOPIC_MODEL, TOPIC_FILES, TOPIC_SCREEN, TOPIC_COUNT } help_topic;

typedef struct {
    const char *name;
    arg_kind arg;       /* what Tab completes after it */
    bool while_busy;    /* allowed while an answer is being generated */
    bool bang;          /* takes a '!' ("/save!"): replace a file that is not one of ours */
    unsigned (*run)(chatcmd_ctx *c, const char *arg);
    help_topic topic;
    const char *usage;  /* "/set KEY VALUE" */
    const char *help;   /* one line */
} command;

/* ---- helpers ----------------------------------------------------------------------- */

static bool refuse_busy(chatcmd_ctx *c, const char *what)
{
    if (!ui_session_busy(c->session))
        return false;
    ui_status(c->fe, UI_ERROR, "%s: wait for the answer to finish, or stop it with Esc", what);
    return true;
}

static bool need_arg(chatcmd_ctx *c, const char *arg, const char *usage)
{
    if (arg[0])
        return false;
    ui_note(c->fe, UI_ERROR, "usage: %s", usage);
    return true;
}

static int expand_path(chatcmd_ctx *c, const char *arg, char *out, size_t cap)
{
    err_t err;
    if (paths_expand_user(arg, out, cap, &err) != 0) {
        ui_note(c->fe, UI_ERROR, "%s", err.msg);
        return -1;
    }
    return 0;
}

/* ---- chatting ----------------------------------------------------------------------------- */

static unsigned cmd_help(chatcmd_ctx *c, const char *arg)
{
    ui_note(c->fe, UI_INFO, "%s", chatcmd_help());
    return 0;
}

static unsigned cmd_quit(chatcmd_ctx *c, const char *arg)
{
    return UI_QUIT;
}

static unsigned cmd_retry(chatcmd_ctx *c, const char *arg)
{
    return ui_session_retry(c->session);
}

static unsigned cmd_edit(chatcmd_ctx *c, const char *arg)
{
    unsigned changed = ui_session_edit(c->session);
    const char *text = ui_session_edit_text(c->session);
    if (text)
        c->fe->set_input(c->fe->user, text);
    return changed;
}

static unsigned cmd_system(chatcmd_ctx *c, const char *arg)
{
    if (!arg[0]) {
        const conversation *conv = ui_session_conv(c->session);
        if (conv->n && !strcmp(conv->msgs[0].role, "system"))
            ui_note(c->fe, UI_INFO, "System prompt: %s\n(/system TEXT replaces it, /system - removes it)",
                    conv->msgs[0].content);
        else
            ui_note(c->fe, UI_INFO, "No system prompt. /system TEXT sets one.");
        return 0;
    }
    if (refuse_busy(c, "/system"))
        return 0;
    bool remove = !strcmp(arg, "-");
    unsigned changed = ui_session_set_system(c->session, remove ? "" : arg);
    ui_status(c->fe, UI_INFO, "%s", remove ? "System prompt removed" : "System prompt set; it applies to the next answer");
    return changed;
}

static unsigned cmd_undo(chatcmd_ctx *c, const char *arg)
{
    return ui_session_undo(c->session);
}

static unsigned cmd_clear(chatcmd_ctx *c, const char *arg)
{
    ui_session *s = c->session;
    /* Destructive: asked twice (within 5 s) when there is something to lose. */
    double now = conv_now();
    if (ui_session_has_turns(s) && now - c->clear_at > 5.0) {
        c->clear_at = now;
        const char *file = ui_session_autosave_path(s);
        if (file[0] && !ui_session_unsaved(s))
            ui_status(c->fe, UI_INFO, "Type /clear again to start over (this conversation is saved in %s)", file);
        else
            ui_status(c->fe, UI_INFO, "Type /clear again to start over");
        return 0;
    }
    c->clear_at = 0;
    unsigned changed = ui_session_clear(s);
    ui_status(c->fe, UI_INFO, "New conversation");
    return changed;
}

/* ---- model and sampling ---------------------------------------------------------------------- */

/* The keys /set takes, as its usage, its error and Tab list them. */
#define SET_KEY_LIST                                                                                                  \
    "temp top-k top-p min-p repeat-penalty presence-penalty frequency-penalty seed n-predict ctx context-overflow"
#define SET_KEYS                                                                                                      \
    "temp, top-k, top-p, min-p, repeat-penalty, presence-penalty, frequency-penalty, seed, n-predict, ctx, "           \
    "context-overflow"
#define SET_KEYS_BAR                                                                                                  \
    "temp|top-k|top-p|min-p|repeat-penalty|presence-penalty|frequency-penalty|seed|n-predict|ctx|context-overflow"

static unsigned cmd_set(chatcmd_ctx *c, const char *arg)
{
    ui_session *s = c->session;
    char buf[512];
    if (!arg[0]) {
        const settings *cfg = ui_session_settings(s);
        settings_format_sampling(cfg, buf, sizeof buf);
        sampler_params sp;
        ui_session_sampling(s, &sp);
        uint32_t n_ctx = ui_session_n_ctx(s, NULL, NULL);
        char ctx[48] = "not known until the model is loaded";
        if (n_ctx)
            snprintf(ctx, sizeof ctx, "%u tokens", n_ctx);
        char seed[64];
        if (cfg->has_seed)
            snprintf(seed, sizeof seed, "seed %llu", (unsigned long long)sp.seed);
        else
            snprintf(seed, sizeof seed, "a new seed for every answer");
        ui_note(c->fe, UI_INFO,
                "%s\nIn use: temp %g, top-k %d, top-p %g, min-p %g, repeat-penalty %g, presence-penalty %g, "
                "frequency-penalty %g, %s (\"default\": the %s template's)\nctx = %s, context-overflow = %s",
                buf, (double)sp.temp, sp.top_k, (double)sp.top_p, (double)sp.min_p, (double)sp.repeat_penalty,
                (double)sp.presence_penalty, (double)sp.frequency_penalty, seed, tmpl_name(ui_session_template(s)),
                ctx, chat_ctx_policy_name(cfg->ctx_overflow));
        return 0;
    }
    char key[32];
    const char *sp = strchr(arg, ' ');
    size_t klen = sp ? (size_t)(sp - arg) : strlen(arg);
    if (klen >= sizeof key || !sp) {
        ui_note(c->fe, UI_ERROR, "usage: /set %s VALUE", SET_KEYS_BAR);
        return 0;
    }
    memcpy(key, arg, klen);
    key[klen] = 0;
    while (*sp == ' ')
        sp++;
    err_t err;
    if (!strcmp(key, "ctx")) {
        /* Checked as the settings file would check it, then the engine starts anew. */
        settings trial = *ui_session_settings(s);
        if (settings_set(&trial, key, sp, &err) != 0) {
            ui_note(c->fe, UI_ERROR, "/set %s", err.msg);
            return 0;
        }
        return ui_session_set_ctx(s, trial.n_ctx);
    }
    if (!settings_is_sampling_key(key) && strcmp(key, "context-overflow") != 0) {
        ui_note(c->fe, UI_ERROR, "/set: '%s' is not a setting (%s)", key, SET_KEYS);
        return 0;
    }
    if (ui_session_set(s, key, sp, &err) != 0) {
        ui_note(c->fe, UI_ERROR, "/set %s", err.msg);
        return 0;
    }
    ui_status(c->fe, UI_INFO, "%s = %s (from the next answer on)", key, sp);
    return UI_CHANGED_SETTINGS;
}

static unsigned cmd_template(chatcmd_ctx *c, const char *arg)
{
    if (!arg[0]) {
        ui_note(c->fe, UI_INFO, "Template: %s (available: %s)", tmpl_name(ui_session_template(c->session)),
                tmpl_names());
        return 0;
    }
    if (refuse_busy(c, "/template"))
        return 0;
    const tmpl_preset *p = tmpl_find(arg);
    if (!p) {
        ui_note(c->fe, UI_ERROR, "/template: no template '%s' (available: %s)", arg, tmpl_names());
        return 0;
    }
    unsigned changed = ui_session_set_template(c->session, p);
    ui_status(c->fe, UI_INFO, "Template: %s", tmpl_name(p));
    return changed;
}

static unsigned cmd_think(chatcmd_ctx *c, const char *arg)
{
    if (!strcmp(arg, "on") || !strcmp(arg, "off")) {
        unsigned changed = ui_session_set_thinking(c->session, !strcmp(arg, "on"));
        ui_status(c->fe, UI_INFO, "Thinking %s (templates that support it: glm47)", arg);
        return changed;
    }
    ui_note(c->fe, UI_ERROR, "usage: /think on|off (now %s)", ui_session_thinking(c->session) ? "on" : "off");
    return 0;
}

/* A file's size for /model's list. */
static void file_size_text(const char *path, char *buf, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0)
        snprintf(buf, cap, "?");
    else if (st.st_size >= 1000000000)
        snprintf(buf, cap, "%.1f GB", st.st_size / 1e9);
    else
        snprintf(buf, cap, "%.1f MB", st.st_size / 1e6);
}

static bool same_file(const char *a, const char *b)
{
    struct stat x, y;
    if (stat(a, &x) != 0 || stat(b, &y) != 0)
        return !strcmp(a, b);
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* /model's argument: a number of the list, a file name in the models
 * directory (".gguf" may be left out), or a path; 0, else -1 (noted). */
static int model_target(chatcmd_ctx *c, const chat_models *l, const char *arg, char *path, size_t cap)
{
    char *end;
    unsigned long k = isdigit((unsigned char)arg[0]) ? strtoul(arg, &end, 10) : 0;
    if (k && !*end) {
        if (k > l->n) {
            ui_note(c->fe, UI_ERROR, "/model: no model %lu: the list has %s%zu (/model lists them)", k,
                    l->n > 1 ? "1-" : "", l->n);
            return -1;
        }
        return chat_models_path(l, k - 1, path, cap);
    }
    if (!strchr(arg, '/') && arg[0] != '~') {
        for (size_t i = 0; i < l->n; i++) {
            size_t len = strlen(arg);
            if (!strcmp(l->names[i], arg) || (!strncmp(l->names[i], arg, len) && !strcmp(l->names[i] + len, ".gguf"))) {
                return chat_models_path(l, i, path, cap);
            }
        }
        if (!paths_is_file(arg)) {
            ui_note(c->fe, UI_ERROR, "/model: no model '%s' in %s (/model lists them; a path opens any file)", arg,
                    l->dir);
            return -1;
        }
    }
    return expand_path(c, arg, path, cap);
}

static unsigned cmd_model(chatcmd_ctx *c, const char *arg)
{
    chat_models l;
    err_t err;
    if (chat_models_scan(&l, &err) != 0) {
        ui_note(c->fe, UI_ERROR, "/model: %s", err.msg);
        return 0;
    }
    const char *now = ui_session_model_path(c->session);
    unsigned changed = 0;
    if (!arg[0]) {
        sbuf b = {0};
        sbuf_printf(&b, "Model in use: %s", now);
        if (l.n == 0)
            sbuf_printf(&b, "\nNo .gguf files in %s; /model FILE opens one from anywhere.", l.dir);
        else
            sbuf_printf(&b, "\nModels in %s (/model N or /model NAME switches):", l.dir);
        for (size_t i = 0; i < l.n; i++) {
            char path[PATH_MAX], size[32];
            if (chat_models_path(&l, i, path, sizeof path) != 0)
                continue;
            file_size_text(path, size, sizeof size);
            sbuf_printf(&b, "\n %2zu  %-40s %9s%s", i + 1, l.names[i], size, same_file(path, now) ? "  (in use)" : "");
        }
        ui_note(c->fe, UI_INFO, "%s", sbuf_str(&b));
        sbuf_free(&b);
    } else {
        char path[PATH_MAX];
        if (model_target(c, &l, arg, path, sizeof path) == 0) {
            if (same_file(path, now))
                ui_status(c->fe, UI_INFO, "%s is the model in use", path);
            else
                changed = ui_session_switch_model(c->session, path);
        }
    }
    chat_models_free(&l);
    return changed;
}

static int cmp_us(const void *x, const void *y)
{
    const engine_kernel_stat *a = x, *b = y;
    return a->us_per_token < b->us_per_token ? 1 : a->us_per_token > b->us_per_token ? -1 : 0;
}

static unsigned cmd_stats(chatcmd_ctx *c, const char *arg)
{
    decoder *dec = ui_session_decoder(c->session);
    if (!dec) {
        ui_status(c->fe, UI_ERROR, "No statistics yet: the model is not loaded");
        return 0;
    }
    dec_stats st;
    decoder_get_stats(dec, &st);
    sbuf s = {0};
    const engine_stats *e = &st.engine;
    sbuf_printf(&s, "Backend: %s\n", decoder_describe(dec));
    sbuf_printf(&s, "Context: %u of %u tokens\n", st.n_past, st.n_ctx);
    /* The decoder's counts: the answers' headers add up to "generated". */
    sbuf_printf(&s, "Prompts: %llu tokens read in %.2f s (the last at %.1f tok/s)\n",
                (unsigned long long)st.n_prompt_tokens, st.prompt_seconds, st.prefill_tps);
    sbuf_printf(&s, "Answers: %llu tokens generated in %.2f s (the last at %.1f tok/s)",
                (unsigned long long)st.n_gen_tokens, st.gen_seconds, st.decode_tps);
    if (e->spec_steps) /* NextN drafting: the session's, then the last answer's */
        sbuf_printf(&s, "\nDrafting (NextN): %llu steps kept %llu of %llu drafts (%.0f%%), %.2f tokens per step; "
                    "last answer k=%u, %u of %u kept, %.1f tok/s effective",
                    (unsigned long long)e->spec_steps, (unsigned long long)e->spec_accepted,
                    (unsigned long long)e->spec_drafted, 100.0 * e->spec_accepted / (e->spec_drafted ? e->spec_drafted : 1),
                    (double)e->spec_tokens / e->spec_steps, st.draft_k, st.spec_accepted, st.spec_drafted,
                    st.decode_tps);
    if (e->dispatches_per_token && e->cpu_steps)
        sbuf_printf(&s, "\nCPU steps per token (barriers): %u; CPU time per token: %.0f us",
                    e->dispatches_per_token, e->us_per_token_measured);
    else if (e->dispatches_per_token)
        sbuf_printf(&s, "\nDispatches per token: %u; GPU time per token: %.0f us", e->dispatches_per_token,
                    e->us_per_token_measured);
    if (e->sync_gave_up_at && e->sync_retry_at)
        sbuf_printf(&s, "\nA dependency wait gave up at token %llu (%u in all): every GPU program joins its steps by "
                        "barriers (slower) until token %llu, when the counters are tried again",
                    (unsigned long long)e->sync_gave_up_at, e->sync_give_ups, (unsigned long long)e->sync_retry_at);
    else if (e->sync_gave_up_at)
        sbuf_printf(&s, "\nA dependency wait gave up at token %llu (%u in all): every GPU program joins its steps by "
                        "barriers (slower) for the rest of the session",
                    (unsigned long long)e->sync_gave_up_at, e->sync_give_ups);
    else if (e->sync_give_ups)
        sbuf_printf(&s, "\nDependency waits gave up %u time%s; the counters were tried again and hold", e->sync_give_ups,
                    e->sync_give_ups == 1 ? "" : "s");
    const engine_split_stat *hs = &e->split;
    if (hs->layers && hs->tokens) /* experts in host memory (engine_split_stat), per host layer */
        sbuf_printf(&s, "\nExperts in host memory, %u layers, per host layer of a token: GPU part %.0f us, "
                    "CPU experts %.0f us, hand-over %.0f us (GPU idle %.0f us less the host's turn %.0f us)",
                    hs->layers, hs->gpu_us / hs->layers, hs->cpu_us / hs->layers,
                    (hs->idle_us - hs->turn_us) / hs->layers, hs->idle_us / hs->layers, hs->turn_us / hs->layers);
    uint32_t n = e->n_kernels < ENGINE_MAX_KERNEL_STATS ? e->n_kernels : ENGINE_MAX_KERNEL_STATS;
    if (n) {
        engine_kernel_stat ks[ENGINE_MAX_KERNEL_STATS];
        memcpy(ks, e->kernels, n * sizeof *ks);
        qsort(ks, n, sizeof *ks, cmp_us);
        bool calls, gbps;
        ui_sidepane_columns(e, &calls, &gbps);
        sbuf_printf(&s, "\nSlowest kernels (us per token%s):", gbps ? ", GB/s" : "");
        for (uint32_t i = 0; i < n && i < 8; i++) {
            sbuf_printf(&s, "\n  %-28.48s %9.1f", ks[i].name, ks[i].us_per_token);
            if (gbps)
                sbuf_printf(&s, " %8.1f", ks[i].gbps);
        }
    }
    ui_note(c->fe, UI_INFO, "%s", sbuf_str(&s));
    sbuf_free(&s);
    return 0;
}

/* ---- conversations ------------------------------------------------------------------------------ */

static unsigned cmd_save(chatcmd_ctx *c, const char *arg)
{
    ui_session *s = c->session;
    if (!arg[0]) {
        const char *file = ui_session_autosave_path(s); /* named by the first save */
        if (!file[0] && ui_session_conv(s)->n == 0)
            ui_status(c->fe, UI_INFO, "Nothing to save yet");
        else if (ui_session_autosave(s))
            ui_status(c->fe, UI_INFO, file[0] ? "Saved to %s" : "Nothing to save yet%s", file);
        return UI_CHANGED_SETTINGS;
    }
    char path[PATH_MAX];
    if (expand_path(c, arg, path, sizeof path) != 0)
        return 0;
    err_t err;
    if (ui_session_save_copy(s, path, c->bang, &err) != 0) {
        ui_note(c->fe, UI_ERROR, "/save: %s", err.msg);
        return 0;
    }
    ui_status(c->fe, UI_INFO, "Saved %zu messages to %s", ui_session_conv(s)->n, path);
    return 0;
}

/* Reads a conversation file for /load and /replay; -1 when it failed (noted). */
static int load_file(chatcmd_ctx *c, const char *what, const char *arg, conversation *conv, char *path, size_t cap)
{
    if (expand_path(c, arg, path, cap) != 0)
        return -1;
    err_t err;
    if (conv_load(conv, path, &err) != 0) {
        ui_note(c->fe, UI_ERROR, "%s: %s", what, err.msg);
        return -1;
    }
    return 0;
}

static unsigned cmd_load(chatcmd_ctx *c, const char *arg)
{
    if (need_arg(c, arg, "/load FILE") || refuse_busy(c, "/load"))
        return 0;
    char path[PATH_MAX];
    conversation conv;
    if (load_file(c, "/load", arg, &conv, path, sizeof path) != 0)
        return 0;
    return ui_session_load(c->session, &conv, path);
}

/* "…" and the like only where the locale can show them. */
static bool utf8_locale(void)
{
    const char *cs = nl_langinfo(CODESET);
    return cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
}

/* The saved conversations, newest first (app/ui/conv_list.h); -1 when the
 * directory cannot be read (noted). */
static int scan_saved(chatcmd_ctx *c, const char *what, convlist *l)
{
    convlist_opts o = {.title_width = 48, .include_unreadable = true, .ascii = !utf8_locale()};
    err_t err;
    if (convlist_scan(ui_session_conv_dir(c->session), &o, l, &err) != 0) {
        ui_note(c->fe, UI_ERROR, "%s: %s", what, err.msg);
        return -1;
    }
    return 0;
}

#define LIST_SHOWN 30

static unsigned cmd_list(chatcmd_ctx *c, const char *arg)
{
    convlist l;
    if (scan_saved(c, "/list", &l) != 0)
        return 0;
    if (l.n == 0) {
        ui_note(c->fe, UI_INFO, "No saved conversations yet in %s", ui_session_conv_dir(c->session));
        convlist_free(&l);
        return 0;
    }
    const char *current = ui_session_autosave_path(c->session);
    sbuf s = {0};
    sbuf_printf(&s, "Saved conversations, newest first (/resume N continues one):");
    for (size_t i = 0; i < l.n && i < LIST_SHOWN; i++) {
        sbuf_addc(&s, '\n');
        convlist_format(&l.v[i], i + 1, &s);
        if (current[0] && !strcmp(l.v[i].path, current))
            sbuf_adds(&s, "  (this one)");
    }
    size_t more = (l.n > LIST_SHOWN ? l.n - LIST_SHOWN : 0) + l.n_unread;
    if (more)
        sbuf_printf(&s, "\n... and %zu older (in %s)", more, ui_session_conv_dir(c->session));
    ui_note(c->fe, UI_INFO, "%s", sbuf_str(&s));
    sbuf_free(&s);
    convlist_free(&l);
    return 0;
}

static unsigned cmd_resume(chatcmd_ctx *c, const char *arg)
{
    convlist l;
    if (scan_saved(c, "/resume", &l) != 0)
        return 0;
    err_t err;
    const convlist_entry *e = convlist_pick(&l, arg[0] ? arg : "1", &err);
    unsigned changed = 0;
    conversation conv;
    if (!e)
        ui_note(c->fe, UI_ERROR, "/resume: %s (/list shows them)", err.msg);
    else if (conv_load(&conv, e->path, &err) != 0)
        ui_note(c->fe, UI_ERROR, "/resume: %s", err.msg);
    else
        changed = ui_session_resume(c->session, &conv, e->path);
    convlist_free(&l);
    return changed;
}

static unsigned cmd_replay(chatcmd_ctx *c, const char *arg)
{
    if (need_arg(c, arg, "/replay FILE") || refuse_busy(c, "/replay"))
        return 0;
    char path[PATH_MAX];
    conversation conv;
    if (load_file(c, "/replay", arg, &conv, path, sizeof path) != 0)
        return 0;
    return ui_session_start_replay(c->session, &conv, path);
}

static unsigned cmd_export(chatcmd_ctx *c, const char *arg)
{
    if (need_arg(c, arg, c->bang ? "/export! FILE.md" : "/export FILE.md"))
        return 0;
    char path[PATH_MAX];
    if (expand_path(c, arg, path, sizeof path) != 0)
        return 0;
    err_t err;
    if (ui_session_export(c->session, path, c->bang, &err) != 0)
        ui_note(c->fe, UI_ERROR, "/export: %s", err.msg);
    else
        ui_status(c->fe, UI_INFO, "Exported %zu messages to %s", ui_session_conv(c->session)->n, path);
    return 0;
}

/* ---- the clipboard --------------------------------------------------------------------------------- */

/* /copy [code [N]]: the last answer, or its code block N (the last one
 * without N), through the terminal (OSC 52; app/ui/clipboard.h). */
static unsigned cmd_copy(chatcmd_ctx *c, const char *arg)
{
    const conversation *conv = ui_session_conv(c->session);
    long a = conv_last(conv, "assistant");
    if (a < 0) {
        ui_status(c->fe, UI_ERROR, "Nothing to copy: there is no answer yet");
        return 0;
    }
    const char *answer = conv->msgs[a].content;
    sbuf text = {0};
    char what[160];
    err_t err;
    if (!arg[0]) {
        sbuf_adds(&text, answer);
        snprintf(what, sizeof what, "the last answer");
    } else if (!strncmp(arg, "code", 4) && (!arg[4] || arg[4] == ' ')) {
        const char *num = arg + 4;
        while (*num == ' ')
            num++;
        char *end = NULL;
        unsigned long index = num[0] ? strtoul(num, &end, 10) : 0;
        if (num[0] && (*end || index == 0 || index > 100000 || !isdigit((unsigned char)num[0]))) {
            ui_note(c->fe, UI_ERROR, "usage: /copy code [N] (N: the number over the code block, from 1)");
            return 0;
        }
        clip_block_info info;
        if (clip_code_block(answer, strlen(answer), (unsigned)index, &text, &info, &err) != 0) {
            ui_note(c->fe, UI_ERROR, "/copy code: %s", err.msg);
            sbuf_free(&text);
            return 0;
        }
        sbuf lang = {0};
        tsafe_one_line(&lang, info.lang, strlen(info.lang));
        snprintf(what, sizeof what, "code block %u of %u%s%.48s%s (%zu line%s)", info.index, info.count,
                 lang.len ? ", " : "", sbuf_str(&lang), info.closed ? "" : ", unfinished", info.n_lines,
                 info.n_lines == 1 ? "" : "s");
        sbuf_free(&lang);
    } else {
        ui_note(c->fe, UI_ERROR, "usage: /copy, or /copy code [N]");
        return 0;
    }
    clip_env env = clip_env_get();
    clip_wrap wrap = clip_wrap_for(&env);
    sbuf seq = {0};
    /* Plain, for the terminal (and for tmux with set-clipboard on, which
     * takes it itself), then wrapped for the multiplexer, whose
     * passthrough hands it to the terminal outside. */
    if (clip_osc52(sbuf_str(&text), text.len, CLIP_WRAP_NONE, &seq, &err) != 0 ||
        (wrap != CLIP_WRAP_NONE && clip_osc52(sbuf_str(&text), text.len, wrap, &seq, &err) != 0)) {
        ui_note(c->fe, UI_ERROR, "/copy: %s: %s", what, err.msg);
    } else if (!c->fe->write_terminal(c->fe->user, seq.s, seq.len)) {
        ui_note(c->fe, UI_ERROR, "/copy: this terminal takes no clipboard escape (line mode); nothing was copied");
    } else {
        const char *doubt = clip_note(&env);
        char why[256];
        if (!doubt && wrap == CLIP_WRAP_TMUX && clip_probe_tmux(why, sizeof why) == CLIP_PASS_NO)
            ui_note(c->fe, UI_ERROR, "/copy: nothing was copied: %s", why);
        else if (doubt)
            ui_note(c->fe, UI_ERROR, "/copy: sent %s (%zu bytes), but %s", what, text.len, doubt);
        else
            ui_status(c->fe, UI_INFO, "Copied %s (%zu bytes) through the terminal's clipboard (OSC 52)", what,
                      text.len);
    }
    sbuf_free(&seq);
    sbuf_free(&text);
    return 0;
}

/* ---- the screen ------------------------------------------------------------------------------------ */

static unsigned cmd_theme(chatcmd_ctx *c, const char *arg)
{
    char list[512];
    if (!arg[0]) {
        theme_list(list, sizeof list);
        ui_note(c->fe, UI_INFO, "Theme: %s (available: %s)", c->theme->name, list);
        return 0;
    }
    theme t;
    err_t err;
    if (theme_load(&t, arg, &err) != 0) {
        ui_note(c->fe, UI_ERROR, "/theme: %s", err.msg);
        return 0;
    }
    *c->theme = t;
    ui_status(c->fe, UI_INFO, "Theme: %s", t.name);
    return UI_CHANGED_THEME;
}

/* ---- the table ------------------------------------------------------------------------------------- */

/* In /help's order within each topic.  The order also breaks ties for
 * hints and completion ("/re" means /retry before /replay). */
static const command commands[] = {
    {"help", ARG_NONE, true, false, cmd_help, TOPIC_NONE, NULL, NULL},
    {"quit", ARG_NONE, true, false, cmd_quit, TOPIC_NONE, NULL, NULL},
    /* llama-cli's and ollama's words for it */
    {"exit", ARG_NONE, true, false, cmd_quit, TOPIC_NONE, NULL, NULL},
    {"bye", ARG_NONE, true, false, cmd_quit, TOPIC_NONE, NULL, NULL},
    {"retry", ARG_NONE, false, false, cmd_retry, TOPIC_CHAT, "/retry",
     "regenerate the last answer (a new seed unless you set one)"},
    {"edit", ARG_NONE, false, false, cmd_edit, TOPIC_CHAT, "/edit", "edit your last message, then Enter regenerates"},
    {"copy", ARG_COPY, true, false, cmd_copy, TOPIC_CHAT, "/copy [code [N]]",
     "the last answer, or its code block N, to the clipboard"},
    {"system", ARG_TEXT, true, false, cmd_system, TOPIC_CHAT, "/system TEXT", "set the system prompt (/system - removes it)"},
    {"undo", ARG_NONE, false, false, cmd_undo, TOPIC_CHAT, "/undo", "remove your last exchange (again: the one before)"},
    {"clear", ARG_NONE, false, false, cmd_clear, TOPIC_CHAT, "/clear", "start a new conversation (type it twice)"},
    {"set", ARG_SETKEY, true, false, cmd_set, TOPIC_MODEL, "/set KEY VALUE",
     "temp top-k top-p min-p seed n-predict ctx context-overflow;\n"
     "                     repeat-penalty presence-penalty frequency-penalty"},
    {"template", ARG_TEMPLATE, true, false, cmd_template, TOPIC_MODEL, "/template NAME",
     "the chat template (/template lists them)"},
    {"think", ARG_ONOFF, true, false, cmd_think, TOPIC_MODEL, "/think on|off", "reasoning before the answer (GLM-4.7)"},
    {"model", ARG_MODEL, true, false, cmd_model, TOPIC_MODEL, "/model [N|FILE]",
     "the models found, or switch to one (loads it)"},
    {"stats", ARG_NONE, true, false, cmd_stats, TOPIC_MODEL, "/stats", "speed and the slowest kernels so far"},
    {"save", ARG_PATH, true, true, cmd_save, TOPIC_FILES, "/save[!] [FILE]",
     "save now, or a copy to FILE (! to replace a non-conversation)"},
    {"load", ARG_PATH, false, false, cmd_load, TOPIC_FILES, "/load FILE", "continue a saved conversation"},
    {"list", ARG_NONE, true, false, cmd_list, TOPIC_FILES, "/list", "the saved conversations, newest first"},
    {"resume", ARG_TEXT, false, false, cmd_resume, TOPIC_FILES, "/resume [N]",
     "continue saved conversation N of /list (or a name) in its file"},
    {"replay", ARG_PATH, false, false, cmd_replay, TOPIC_FILES, "/replay FILE",
     "re-run its questions, old and new answers side by side"},
    {"export", ARG_PATH, true, true, cmd_export, TOPIC_FILES, "/export[!] FILE.md",
     "write it as Markdown (! to replace a file glmchat did not write)"},
    {"theme", ARG_THEME, true, false, cmd_theme, TOPIC_NONE, NULL, NULL},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* Each topic: its heading, lines before its commands, lines after them. */
static const struct {
    const char *title, *before, *after;
} topics[TOPIC_COUNT] = {
    [TOPIC_CHAT] = {"Chatting",
                    "  Enter sends, Alt-Enter starts a new line (pastes keep their lines)\n"
                    "  Esc or Ctrl-C stops the answer; Ctrl-C twice quits\n"
                    "  Ctrl-C on a line clears it (Ctrl-Y right after brings it back)\n",
                    NULL},
    [TOPIC_MODEL] = {"Model and sampling", NULL, NULL},
    [TOPIC_FILES] = {"Conversations (saved after every turn)", NULL, NULL},
    [TOPIC_SCREEN] = {"Screen", NULL,
                      "  F1 this help, F2 side pane, F3 fold reasoning, F4 sort kernels,\n"
                      "  F5 answers as written or rendered from their Markdown\n"
                      "  PgUp/PgDn or the mouse wheel scroll, /theme NAME changes colours\n"
                      "  Tab completes commands and file names; //text sends \"/text\"\n"
                      "  /quit (or /exit, /bye) leaves; so do Ctrl-D on an empty line and Ctrl-C twice\n"},
};

const char *chatcmd_help(void)
{
    static char text[4096];
    if (text[0])
        return text;
    sbuf s = {0};
    for (int t = TOPIC_NONE + 1; t < TOPIC_COUNT; t++) {
        sbuf_printf(&s, "%s\n%s", topics[t].title, topics[t].before ? topics[t].before : "");
        for (size_t i = 0; i < N_COMMANDS; i++)
            if (commands[i].topic == (help_topic)t)
                sbuf_printf(&s, "  %-18s %s\n", commands[i].usage, commands[i].help);
        sbuf_adds(&s, topics[t].after ? topics[t].after : "");
    }
    if (s.len && s.s[s.len - 1] == '\n')
        s.len--;
    snprintf(text, sizeof text, "%.*s", (int)s.len, sbuf_str(&s));
    sbuf_free(&s);
    return text;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

/* Edit distance counting a swap of two neighbours as one edit ("quti"). */
int chatcmd_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 32 || m > 32)
        return 99;
    int d[33][33];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *chatcmd_closest(const char *name)
{
    const char *best = NULL;
    int best_d = 99;
    size_t len = strlen(name);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        /* A typed prefix of a command is the likeliest meaning. */
        if (len >= 2 && !strncmp(commands[i].name, name, len))
            return commands[i].name;
        int d = chatcmd_edit_distance(name, commands[i].name);
        if (d < best_d) {
            best_d = d;
            best = commands[i].name;
        }
    }
    /* Allow one edit in short names, two in longer ones. */
    int limit = len <= 4 ? 1 : 2;
    return best_d <= limit ? best : NULL;
}

unsigned chatcmd_run(chatcmd_ctx *c, const char *line)
{
    /* What the status line said belongs to the command before: it goes, so
     * a command that fails (with a note) never leaves an old "Saved ..." or
     * "Theme: ..." standing as if it were its own (issue 16.6). */
    c->fe->status(c->fe->user, UI_INFO, "");
    const char *p = line + 1;
    char name[32];
    size_t n = 0;
    while (p[n] && !isspace((unsigned char)p[n]))
        n++;
    if (n >= sizeof name) {
        ui_note(c->fe, UI_ERROR, "Unknown command. Type /help for the list.");
        return 0;
    }
    memcpy(name, p, n);
    name[n] = 0;
    const char *arg = p + n;
    while (isspace((unsigned char)*arg))
        arg++;
    /* Trailing spaces are not part of an argument (file names included). */
    char argbuf[4096];
    snprintf(argbuf, sizeof argbuf, "%s", arg);
    size_t al = strlen(argbuf);
    while (al && isspace((unsigned char)argbuf[al - 1]))
        argbuf[--al] = 0;
    /* "/save!": the command, told to replace what it would otherwise refuse to. */
    bool bang = n > 1 && name[n - 1] == '!';
    if (bang)
        name[n - 1] = 0;
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) != 0)
            continue;
        if (bang && !commands[i].bang) {
            ui_note(c->fe, UI_ERROR, "/%s takes no '!' (only /save! and /export! do). Type /help for the list.", name);
            return 0;
        }
        if (!commands[i].while_busy && refuse_busy(c, line))
            return 0;
        c->bang = bang;
        unsigned changed = commands[i].run(c, argbuf);
        c->bang = false;
        return changed;
    }
    const char *hint = chatcmd_closest(name);
    if (hint)
        ui_note(c->fe, UI_ERROR, "Unknown command '/%s'. Did you mean /%s? Type /help for the list.", name, hint);
    else
        ui_note(c->fe, UI_ERROR, "Unknown command '/%s'. Type /help for the list.", name);
    return 0;
}

/* ---- completion -------------------------------------------------------------------------------- */

static char *cands[96];
static int n_cands, cand_i;

static void cands_clear(void)
{
    for (int i = 0; i < n_cands; i++)
        free(cands[i]);
    n_cands = cand_i = 0;
}

static void cand_add(const char *s)
{
    if (n_cands < 96)
        cands[n_cands++] = strdup(s);
}

static void cand_add_list(const char *list, const char *seps)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, seps, &save); t; t = strtok_r(NULL, seps, &save))
        cand_add(t);
}

static char *cand_generator(const char *text, int state)
{
    if (state == 0)
        cand_i = 0;
    size_t len = strlen(text);
    while (cand_i < n_cands) {
        const char *c = cands[cand_i++];
        if (c && !strncmp(c, text, len))
            return strdup(c);
    }
    return NULL;
}

char **chatcmd_complete(const char *text, int start, int end)
{
    (void)end;
    const char *line = rl_line_buffer;
    rl_attempted_completion_over = 1;
    if (!line || line[0] != '/')
        return NULL; /* chat text: nothing to complete */
    cands_clear();
    if (start <= 1 && !strchr(line, ' ')) {
        char name[40];
        for (size_t i = 0; i < N_COMMANDS; i++) {
            snprintf(name, sizeof name, "/%s", commands[i].name);
            cand_add(name);
        }
        return rl_completion_matches(text, cand_generator);
    }
    size_t n = strcspn(line + 1, " ");
    if (n > 1 && line[n] == '!')
        n--; /* "/save! FILE" completes as /save */
    const command *cmd = NULL;
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strlen(commands[i].name) == n && !strncmp(commands[i].name, line + 1, n))
            cmd = &commands[i];
    if (!cmd)
        return NULL;
    /* Only the first argument completes (except paths, which are one word). */
    bool first_arg = start <= (int)n + 2;
    switch (cmd->arg) {
    case ARG_PATH:
        rl_attempted_completion_over = 0; /* readline's own file name completion */
        return NULL;
    case ARG_SETKEY:
        if (first_arg)
            cand_add_list(SET_KEY_LIST, " ");
        break;
    case ARG_TEMPLATE:
        cand_add_list(tmpl_names(), ", ");
        break;
    case ARG_ONOFF:
        cand_add_list("on off", " ");
        break;
    case ARG_COPY:
        if (first_arg)
            cand_add("code");
        break;
    case ARG_MODEL: {
        chat_models l;
        if (first_arg && chat_models_scan(&l, NULL) == 0) {
            for (size_t i = 0; i < l.n; i++)
                cand_add(l.names[i]);
            chat_models_free(&l);
        }
        break;
    }
    case ARG_THEME: {
        char list[512];
        theme_list(list, sizeof list);
        cand_add_list(list, " ");
        break;
    }
    default:
        return NULL;
    }
    return rl_completion_matches(text, cand_generator);
}
