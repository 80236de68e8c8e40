/* cmd_chat.c: `glmchat [options]`: the chat UI, or one answer with -p. */
#include <limits.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "chat_setup.h"
#include "commands.h"
#include "conv_list.h"
#include "conversation.h"
#include "decoder.h"
#include "oneshot.h"
#include "paths.h"
#include "text_safe.h"
#include "theme.h"
#include "ui_app.h"
#include "version.h"

/* Space-separated words on lines of at most `width` columns, indented. */
static void put_wrapped(FILE *f, const char *words, int indent, int width)
{
    int col = 0;
    for (const char *p = words; *p;) {
        size_t n = strcspn(p, " ");
        if (col && col + 1 + (int)n > width) {
            fputc('\n', f);
            col = 0;
        }
        if (!col)
            col = fprintf(f, "%*s", indent, "");
        else
            col += fprintf(f, " ");
        col += fprintf(f, "%.*s", (int)n, p);
        p += n;
        while (*p == ' ')
            p++;
    }
    if (col)
        fputc('\n', f);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glmchat [options]                 chat in the terminal\n"
            "       glmchat [options] -p TEXT         answer once, to stdout\n"
            "       glmchat SUBCOMMAND ...            see `glmchat help`\n"
            "\n"
            "  -p, --prompt TEXT      answer TEXT once and exit (plain text on stdout); piped\n"
            "                         stdin is added after TEXT; -p - reads the prompt from stdin\n"
            "  -C, --conversation FILE  continue the conversation in FILE and save new turns\n"
            "                         into it (with -p: one turn)\n"
            "      --resume [N]       continue saved conversation N (default 1: the most recent;\n"
            "                         or a file name from the list /list shows)\n"
            "      --theme NAME       colour theme: default, light, high-contrast, mono, or a file\n"
            "%s"
            "  -h, --help             this text;  -V, --version  the version\n"
            "\nSettings: ~/.config/glmchat/settings, lines of `key = value` with these keys\n"
            "(the long options' names):\n",
            chat_args_help());
    put_wrapped(f, settings_keys(), 2, 78);
    fprintf(f, "`man glmchat` describes the keys, the commands and the files.\n");
}

/* ---- the UI ---------------------------------------------------------------------------- */

/* /model FILE: the model opened as `-m FILE` with the same options would be. */
static int open_other_model(void *user, const char *path, chat_model *out, err_t *err)
{
    chat_args other = *(const chat_args *)user;
    other.model = path;
    return chat_model_open(out, &other, err);
}

static int run_ui(const chat_args *a, chat_model *cm, conversation *initial)
{
    err_t err;
    ui_app_config c;
    memset(&c, 0, sizeof c);
    ui_session_config *sc = &c.session;
    if (theme_load(&c.th, a->s.theme, &err) != 0) {
        chat_error("%s", err.msg);
        return 1;
    }
    char hist_dir[PATH_MAX], hist[PATH_MAX + 16];
    if (paths_ensure_dir(PATHS_DATA, "conversations", sc->conv_dir, sizeof sc->conv_dir, &err) != 0 ||
        paths_ensure_dir(PATHS_STATE, NULL, hist_dir, sizeof hist_dir, &err) != 0) {
        chat_error("%s", err.msg);
        return 1;
    }
    snprintf(hist, sizeof hist, "%s/history", hist_dir);
    c.history_path = hist;
    sc->cfg = a->s;
    if (!settings_given(&sc->cfg, "think"))
        sc->cfg.think = cm->think_default;
    ui_session_config_set_model(sc, cm);
    sc->open_model = open_other_model;
    sc->open_model_user = (void *)a;
    sc->seed = settings_random_seed();
    sc->conversation_file = a->conversation;
    sc->initial = initial;
    conversation fresh;
    if (a->system) {
        /* -s sets the system prompt of the new (or continued) conversation. */
        if (!initial) {
            conv_init(&fresh);
            initial = &fresh;
        }
        conv_set_system(initial, a->system);
        sc->initial = initial;
    }
    int rc = ui_app_run(&c);
    if (initial == &fresh)
        conv_free(&fresh);
    return rc;
}

/* --resume N: the file of saved conversation N (conv_list's numbering, as
 * /list shows it), or of the one named. */
static int resolve_resume(const char *arg, char *path, size_t cap, err_t *err)
{
    char dir[PATH_MAX];
    if (paths_dir(PATHS_DATA, "conversations", dir, sizeof dir, err) != 0)
        return -1;
    convlist l;
    convlist_opts o = {.title_width = 40, .include_unreadable = true};
    if (convlist_scan(dir, &o, &l, err) != 0)
        return -1;
    int rc = 0;
    const convlist_entry *e = convlist_pick(&l, arg, err);
    if (!e)
        rc = -1;
    else if (snprintf(path, cap, "%s", e->path) >= (int)cap)
        rc = err_set(err, "%s: path too long", e->path);
    convlist_free(&l);
    return rc;
}

int cmd_chat(int argc, char **argv)
{
    chat_args a;
    err_t err;
    bool is_usage;
    /* The terminal's encoding: wide characters, wcwidth, readline's multibyte input. */
    setlocale(LC_ALL, "");
    if (chat_args_parse(&a, argc, argv, false, &is_usage, &err) != 0) {
        chat_error("%s", err.msg);
        if (is_usage)
            fprintf(stderr, "Try 'glmchat --help'.\n");
        chat_args_free(&a);
        return is_usage ? 2 : 1;
    }
    if (a.help || a.version) {
        if (a.help)
            usage(stdout);
        else
            printf("glmchat %s\n", GLMCHAT_VERSION);
        chat_args_free(&a);
        return 0;
    }
    char resumed[PATH_MAX];
    if (a.resume) {
        if (a.conversation) {
            chat_error("--resume and -C both name the conversation to continue: give one");
            fprintf(stderr, "Try 'glmchat --help'.\n");
            chat_args_free(&a);
            return 2;
        }
        if (resolve_resume(a.resume, resumed, sizeof resumed, &err) != 0) {
            chat_error("--resume: %s", err.msg);
            chat_args_free(&a);
            return 1;
        }
        a.conversation = resumed;
    }
    if (a.prompt) {
        int rc = oneshot_run(&a);
        chat_args_free(&a);
        return rc;
    }
    conversation initial, *init = NULL;
    if (a.conversation) {
        /* Checked before anything else: a broken file is reported, never replaced. */
        if (paths_is_file(a.conversation) || access(a.conversation, F_OK) == 0) {
            if (conv_load(&initial, a.conversation, &err) != 0) {
                chat_error("%s", err.msg);
                chat_args_free(&a);
                return 1;
            }
            init = &initial;
        }
    }
    chat_model cm;
    if (chat_model_open(&cm, &a, &err) != 0) {
        chat_error("%s", err.msg);
        if (init)
            conv_free(init);
        chat_args_free(&a);
        return 1;
    }
    if (cm.demo_note)
        chat_error("no model given: using the built-in demo model");
    int rc = run_ui(&a, &cm, init);
    if (init)
        conv_free(init);
    chat_model_close(&cm);
    chat_args_free(&a);
    return rc;
}
