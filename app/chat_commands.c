/* chat_commands.c: /help /quit /clear /system /retry /edit /set /template
 * /think /theme /save /load /replay /export /stats. */
#include "chat_commands.h"

#include <ctype.h>
#include <readline/readline.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conversation.h"
#include "paths.h"
#include "ui_input.h"

typedef enum { ARG_NONE, ARG_TEXT, ARG_PATH, ARG_SETKEY, ARG_TEMPLATE, ARG_ONOFF, ARG_THEME } arg_kind;

typedef struct {
    const char *name;
    arg_kind arg;
    bool while_busy; /* allowed while an answer is being generated */
    void (*run)(ui_app *a, const char *arg);
} command;

/* ---- helpers ----------------------------------------------------------------------- */

static bool refuse_busy(ui_app *a, const char *what)
{
    if (!ui_app_busy(a))
        return false;
    ui_app_status(a, TH_ERROR, "%s: wait for the answer to finish, or stop it with Esc", what);
    return true;
}

static bool need_arg(ui_app *a, const char *arg, const char *usage)
{
    if (arg[0])
        return false;
    ui_app_note(a, TH_ERROR, "usage: %s", usage);
    return true;
}

static int expand_path(ui_app *a, const char *arg, char *out, size_t cap)
{
    err_t err;
    if (paths_expand_user(arg, out, cap, &err) != 0) {
        ui_app_note(a, TH_ERROR, "%s", err.msg);
        return -1;
    }
    return 0;
}

/* ---- the commands -------------------------------------------------------------------- */

static void cmd_help(ui_app *a, const char *arg)
{
    ui_app_note(a, TH_NOTICE, "%s", chatcmd_help());
}

static void cmd_quit(ui_app *a, const char *arg)
{
    ui_app_request_quit(a);
}

static void cmd_clear(ui_app *a, const char *arg)
{
    if (refuse_busy(a, "/clear"))
        return;
    double now = conv_now();
    conversation *c = &a->chat.conv;
    bool has_turns = c->n > (c->n && !strcmp(c->msgs[0].role, "system") ? 1u : 0u);
    if (has_turns && now - a->clear_at > 5.0) {
        a->clear_at = now;
        if (a->autosave_path[0] && !a->unsaved)
            ui_app_status(a, TH_STATUS_MSG, "Type /clear again to start over (this conversation is saved in %s)",
                          a->autosave_path);
        else
            ui_app_status(a, TH_STATUS_MSG, "Type /clear again to start over");
        return;
    }
    a->clear_at = 0;
    if (has_turns && a->unsaved)
        ui_app_autosave(a);
    /* The system prompt is a setting of the chat: it stays. */
    size_t keep = c->n && !strcmp(c->msgs[0].role, "system") ? 1 : 0;
    conv_truncate(c, keep);
    c->created = conv_now();
    /* The next turn starts a new file (also after -C FILE: the old
     * conversation stays in its file). */
    a->autosave_path[0] = 0;
    a->edit_index = -1;
    ui_chatview_reset(&a->view);
    ui_app_conversation_changed(a);
    ui_app_status(a, TH_STATUS_MSG, "New conversation");
}

static void cmd_system(ui_app *a, const char *arg)
{
    if (!arg[0]) {
        const conversation *c = &a->chat.conv;
        if (c->n && !strcmp(c->msgs[0].role, "system"))
            ui_app_note(a, TH_NOTICE, "System prompt: %s\n(/system TEXT replaces it, /system - removes it)",
                        c->msgs[0].content);
        else
            ui_app_note(a, TH_NOTICE, "No system prompt. /system TEXT sets one.");
        return;
    }
    if (refuse_busy(a, "/system"))
        return;
    bool remove = !strcmp(arg, "-");
    conv_set_system(&a->chat.conv, remove ? "" : arg);
    ui_app_conversation_changed(a);
    ui_app_status(a, TH_STATUS_MSG, remove ? "System prompt removed" : "System prompt set; it applies to the next answer");
}

static void cmd_retry(ui_app *a, const char *arg)
{
    if (refuse_busy(a, "/retry"))
        return;
    conversation *c = &a->chat.conv;
    if (c->n && !strcmp(c->msgs[c->n - 1].role, "assistant"))
        conv_truncate(c, c->n - 1);
    if (!c->n || strcmp(c->msgs[c->n - 1].role, "user") != 0) {
        ui_app_status(a, TH_ERROR, "Nothing to retry: there is no message of yours to answer");
        return;
    }
    ui_app_conversation_changed(a);
    ui_app_answer(a);
}

static void cmd_edit(ui_app *a, const char *arg)
{
    if (refuse_busy(a, "/edit"))
        return;
    long u = conv_last(&a->chat.conv, "user");
    if (u < 0) {
        ui_app_status(a, TH_ERROR, "Nothing to edit: you have not written anything yet");
        return;
    }
    a->edit_index = u;
    ui_input_set_line(a->chat.conv.msgs[u].content);
    ui_app_status(a, TH_STATUS_MSG, "Editing your last message: Enter sends it and regenerates, Esc cancels");
}

static void cmd_set(ui_app *a, const char *arg)
{
    char buf[256];
    if (!arg[0]) {
        settings_format_sampling(&a->cfg, buf, sizeof buf);
        sampler_params sp;
        ui_app_sampling(a, &sp);
        ui_app_note(a, TH_NOTICE,
                    "%s\nIn use: temp %g, top-k %d, top-p %g, min-p %g, seed %llu (\"default\": the %s template's)",
                    buf, (double)sp.temp, sp.top_k, (double)sp.top_p, (double)sp.min_p,
                    (unsigned long long)sp.seed, tmpl_name(a->chat.tmpl));
        return;
    }
    char key[32];
    const char *sp = strchr(arg, ' ');
    size_t klen = sp ? (size_t)(sp - arg) : strlen(arg);
    if (klen >= sizeof key || !sp) {
        ui_app_note(a, TH_ERROR, "usage: /set temp|top-k|top-p|min-p|seed|n-predict VALUE");
        return;
    }
    memcpy(key, arg, klen);
    key[klen] = 0;
    while (*sp == ' ')
        sp++;
    if (!settings_is_sampling_key(key)) {
        ui_app_note(a, TH_ERROR, "/set: '%s' is not a setting (temp, top-k, top-p, min-p, seed, n-predict)", key);
        return;
    }
    err_t err;
    settings trial = a->cfg;
    if (settings_set(&trial, key, sp, &err) != 0) {
        ui_app_note(a, TH_ERROR, "/set %s", err.msg);
        return;
    }
    a->cfg = trial;
    ui_app_status(a, TH_STATUS_MSG, "%s = %s (from the next answer on)", key, sp);
}

static void cmd_template(ui_app *a, const char *arg)
{
    if (!arg[0]) {
        ui_app_note(a, TH_NOTICE, "Template: %s (available: %s)", tmpl_name(a->chat.tmpl), tmpl_names());
        return;
    }
    if (refuse_busy(a, "/template"))
        return;
    const tmpl_preset *p = tmpl_find(arg);
    if (!p) {
        ui_app_note(a, TH_ERROR, "/template: no template '%s' (available: %s)", arg, tmpl_names());
        return;
    }
    chat_set_template(&a->chat, p);
    ui_app_status(a, TH_STATUS_MSG, "Template: %s", tmpl_name(p));
}

static void cmd_think(ui_app *a, const char *arg)
{
    if (!strcmp(arg, "on") || !strcmp(arg, "off")) {
        a->chat.thinking = !strcmp(arg, "on");
        ui_app_status(a, TH_STATUS_MSG, "Thinking %s (templates that support it: glm47)", arg);
        return;
    }
    ui_app_note(a, TH_ERROR, "usage: /think on|off (now %s)", a->chat.thinking ? "on" : "off");
}

static void cmd_theme(ui_app *a, const char *arg)
{
    char list[512];
    if (!arg[0]) {
        theme_list(list, sizeof list);
        ui_app_note(a, TH_NOTICE, "Theme: %s (available: %s)", a->th.name, list);
        return;
    }
    theme t;
    err_t err;
    if (theme_load(&t, arg, &err) != 0) {
        ui_app_note(a, TH_ERROR, "/theme: %s", err.msg);
        return;
    }
    ui_app_apply_theme(a, &t);
    ui_app_status(a, TH_STATUS_MSG, "Theme: %s", t.name);
}

static void cmd_save(ui_app *a, const char *arg)
{
    if (!arg[0]) {
        if (!a->autosave_path[0] && a->chat.conv.n == 0)
            ui_app_status(a, TH_STATUS_MSG, "Nothing to save yet");
        else if (ui_app_autosave(a))
            ui_app_status(a, TH_STATUS_MSG, a->autosave_path[0] ? "Saved to %s" : "Nothing to save yet%s",
                          a->autosave_path);
        return;
    }
    char path[PATH_MAX];
    if (expand_path(a, arg, path, sizeof path) != 0)
        return;
    err_t err;
    ui_app_fill_metadata(a, &a->chat.conv);
    if (conv_save(&a->chat.conv, path, &err) != 0) {
        ui_app_note(a, TH_ERROR, "/save: %s", err.msg);
        return;
    }
    ui_app_status(a, TH_STATUS_MSG, "Saved %zu messages to %s", a->chat.conv.n, path);
}

static void cmd_load(ui_app *a, const char *arg)
{
    if (need_arg(a, arg, "/load FILE") || refuse_busy(a, "/load"))
        return;
    char path[PATH_MAX];
    if (expand_path(a, arg, path, sizeof path) != 0)
        return;
    conversation c;
    err_t err;
    if (conv_load(&c, path, &err) != 0) {
        ui_app_note(a, TH_ERROR, "/load: %s", err.msg);
        return;
    }
    if (a->unsaved)
        ui_app_autosave(a);
    /* Before the conversation takes the current metadata on its first save. */
    char extra[200] = "";
    if (c.tmpl && strcmp(c.tmpl, tmpl_name(a->chat.tmpl)) != 0 && tmpl_find(c.tmpl))
        snprintf(extra, sizeof extra, "\nIt was made with the %.40s template (now %s: /template %.40s switches).",
                 c.tmpl, tmpl_name(a->chat.tmpl), c.tmpl);
    size_t n = c.n;
    conv_free(&a->chat.conv);
    a->chat.conv = c;
    /* New turns go to a new file: the loaded one is never written to. */
    a->autosave_path[0] = 0;
    a->edit_index = -1;
    ui_chatview_reset(&a->view);
    ui_app_conversation_changed(a);
    ui_app_note(a, TH_NOTICE, "Loaded %zu messages from %s. New turns are saved to a new file.%s", n, path, extra);
}

static void cmd_replay(ui_app *a, const char *arg)
{
    if (need_arg(a, arg, "/replay FILE") || refuse_busy(a, "/replay"))
        return;
    char path[PATH_MAX];
    if (expand_path(a, arg, path, sizeof path) != 0)
        return;
    conversation c;
    err_t err;
    if (conv_load(&c, path, &err) != 0) {
        ui_app_note(a, TH_ERROR, "/replay: %s", err.msg);
        return;
    }
    ui_app_start_replay(a, &c, path);
}

static void cmd_export(ui_app *a, const char *arg)
{
    if (need_arg(a, arg, "/export FILE.md"))
        return;
    char path[PATH_MAX];
    if (expand_path(a, arg, path, sizeof path) != 0)
        return;
    sbuf md = {0};
    ui_app_fill_metadata(a, &a->chat.conv);
    conv_to_markdown(&a->chat.conv, &md);
    err_t err;
    int rc = conv_write_private(path, md.s, md.len, &err);
    sbuf_free(&md);
    if (rc != 0)
        ui_app_note(a, TH_ERROR, "/export: %s", err.msg);
    else
        ui_app_status(a, TH_STATUS_MSG, "Exported %zu messages to %s", a->chat.conv.n, path);
}

static int cmp_us(const void *x, const void *y)
{
    const engine_kernel_stat *a = x, *b = y;
    return a->us_per_token < b->us_per_token ? 1 : a->us_per_token > b->us_per_token ? -1 : 0;
}

static void cmd_stats(ui_app *a, const char *arg)
{
    if (!a->dec || !a->ready) {
        ui_app_status(a, TH_ERROR, "No statistics yet: the model is not loaded");
        return;
    }
    dec_stats st;
    decoder_get_stats(a->dec, &st);
    sbuf s = {0};
    const engine_stats *e = &st.engine;
    sbuf_printf(&s, "Backend: %s\n", decoder_describe(a->dec));
    sbuf_printf(&s, "Context: %u of %u tokens\n", st.n_past, st.n_ctx);
    sbuf_printf(&s, "Prefill: %llu tokens in %.2f s (last %.1f tok/s)\n", (unsigned long long)e->n_prefill_tokens,
                e->prefill_seconds, st.prefill_tps);
    sbuf_printf(&s, "Decode: %llu tokens in %.2f s (last answer %.1f tok/s)", (unsigned long long)e->n_decode_tokens,
                e->decode_seconds, st.decode_tps);
    if (e->dispatches_per_token)
        sbuf_printf(&s, "\nDispatches per token: %u; GPU time per token: %.0f us", e->dispatches_per_token,
                    e->us_per_token_measured);
    uint32_t n = e->n_kernels < ENGINE_MAX_KERNEL_STATS ? e->n_kernels : ENGINE_MAX_KERNEL_STATS;
    if (n) {
        engine_kernel_stat ks[ENGINE_MAX_KERNEL_STATS];
        memcpy(ks, e->kernels, n * sizeof *ks);
        qsort(ks, n, sizeof *ks, cmp_us);
        sbuf_adds(&s, "\nSlowest kernels (us per token, GB/s):");
        for (uint32_t i = 0; i < n && i < 8; i++)
            sbuf_printf(&s, "\n  %-28.48s %9.1f %8.1f", ks[i].name, ks[i].us_per_token, ks[i].gbps);
    }
    ui_app_note(a, TH_NOTICE, "%s", sbuf_str(&s));
    sbuf_free(&s);
}

static const command commands[] = {
    {"help", ARG_NONE, true, cmd_help},
    {"quit", ARG_NONE, true, cmd_quit},
    {"clear", ARG_NONE, false, cmd_clear},
    {"system", ARG_TEXT, true, cmd_system},
    {"retry", ARG_NONE, false, cmd_retry},
    {"edit", ARG_NONE, false, cmd_edit},
    {"set", ARG_SETKEY, true, cmd_set},
    {"template", ARG_TEMPLATE, true, cmd_template},
    {"think", ARG_ONOFF, true, cmd_think},
    {"theme", ARG_THEME, true, cmd_theme},
    {"save", ARG_PATH, true, cmd_save},
    {"load", ARG_PATH, false, cmd_load},
    {"replay", ARG_PATH, false, cmd_replay},
    {"export", ARG_PATH, true, cmd_export},
    {"stats", ARG_NONE, true, cmd_stats},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

const char *chatcmd_help(void)
{
    return "Chatting\n"
           "  Enter sends, Alt-Enter starts a new line (pastes keep their lines)\n"
           "  Esc or Ctrl-C stops the answer; Ctrl-C twice quits\n"
           "  /retry          regenerate the last answer\n"
           "  /edit           edit your last message, then Enter regenerates\n"
           "  /system TEXT    set the system prompt (/system - removes it)\n"
           "  /clear          start a new conversation (type it twice)\n"
           "Model and sampling\n"
           "  /set KEY VALUE  temp, top-k, top-p, min-p, seed, n-predict (/set shows them)\n"
           "  /template NAME  the chat template (/template lists them)\n"
           "  /think on|off   reasoning before the answer (GLM-4.7)\n"
           "  /stats          speed and the slowest kernels so far\n"
           "Conversations (saved after every turn)\n"
           "  /save [FILE]    save now, or a copy to FILE\n"
           "  /load FILE      continue a saved conversation\n"
           "  /replay FILE    re-run its questions, old and new answers side by side\n"
           "  /export FILE.md write it as Markdown\n"
           "Screen\n"
           "  F1 this help, F2 side pane, F3 fold reasoning, F4 sort kernels\n"
           "  PgUp/PgDn or the mouse wheel scroll, /theme NAME changes colours\n"
           "  Tab completes commands and file names; //text sends \"/text\"\n"
           "  /quit leaves (so do Ctrl-D on an empty line and Ctrl-C twice)";
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

void chatcmd_run(ui_app *a, const char *line)
{
    const char *p = line + 1;
    char name[32];
    size_t n = 0;
    while (p[n] && !isspace((unsigned char)p[n]))
        n++;
    if (n >= sizeof name) {
        ui_app_note(a, TH_ERROR, "Unknown command. Type /help for the list.");
        return;
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
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) != 0)
            continue;
        if (!commands[i].while_busy && refuse_busy(a, line))
            return;
        commands[i].run(a, argbuf);
        return;
    }
    const char *hint = chatcmd_closest(name);
    if (hint)
        ui_app_note(a, TH_ERROR, "Unknown command '/%s'. Did you mean /%s? Type /help for the list.", name, hint);
    else
        ui_app_note(a, TH_ERROR, "Unknown command '/%s'. Type /help for the list.", name);
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
            cand_add_list("temp top-k top-p min-p seed n-predict", " ");
        break;
    case ARG_TEMPLATE:
        cand_add_list(tmpl_names(), ", ");
        break;
    case ARG_ONOFF:
        cand_add_list("on off", " ");
        break;
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
