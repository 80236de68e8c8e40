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
#include "conversation.h"
#include "decoder.h"
#include "paths.h"
#include "text_safe.h"
#include "theme.h"
#include "ui_app.h"
#include "version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glmchat [options]                 chat in the terminal\n"
            "       glmchat [options] -p TEXT         answer once, to stdout\n"
            "       glmchat SUBCOMMAND ...            see `glmchat help`\n"
            "\n"
            "  -p, --prompt TEXT      answer TEXT once and exit (plain text on stdout)\n"
            "  -C, --conversation FILE  continue the conversation in FILE and save new turns\n"
            "                         into it (with -p: one turn)\n"
            "      --theme NAME       colour theme: default, light, high-contrast, mono, or a file\n"
            "%s"
            "  -h, --help             this text;  -V, --version  the version\n"
            "\nSettings: ~/.config/glmchat/settings (key = value, the long option names).\n"
            "`man glmchat` describes the keys, the commands and the files.\n",
            chat_args_help());
}

/* ---- one answer: -p --------------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* Writes model text: inert forms of control characters when going to a
 * terminal; the bytes as they are into pipes and files. */
static void write_text(FILE *f, const char *s, size_t n, bool tty)
{
    if (!tty) {
        fwrite(s, 1, n, f);
        return;
    }
    sbuf b = {0};
    tsafe_sanitize(&b, s, n, false);
    fwrite(sbuf_str(&b), 1, b.len, f);
    sbuf_free(&b);
}

typedef struct {
    size_t printed_r, printed_c;
    bool tty_out, tty_err, think_open;
} printer;

static void print_progress(printer *p, const chat_stream *st)
{
    if (p->tty_err && st->reasoning.len > p->printed_r) {
        if (!p->think_open)
            fputs("\033[2m", stderr); /* reasoning, dimmed, on the terminal only */
        p->think_open = true;
        write_text(stderr, st->reasoning.s + p->printed_r, st->reasoning.len - p->printed_r, true);
        p->printed_r = st->reasoning.len;
    }
    if (st->content.len > p->printed_c) {
        if (p->think_open) {
            fputs("\033[0m\n\n", stderr);
            p->think_open = false;
        }
        write_text(stdout, st->content.s + p->printed_c, st->content.len - p->printed_c, p->tty_out);
        p->printed_c = st->content.len;
        fflush(stdout);
    }
    fflush(stderr);
}

static int one_shot(const chat_args *a, chat_model *cm, conversation *initial)
{
    err_t err;
    chat_session chat;
    chat_init(&chat, cm->tok, cm->tmpl, a->s.think);
    if (initial) {
        conv_free(&chat.conv);
        chat.conv = *initial;
        conv_init(initial); /* moved */
    }
    if (a->system)
        conv_set_system(&chat.conv, a->system);
    conv_msg *um = conv_add(&chat.conv, "user", a->prompt, NULL);
    um->time = conv_now();
    int32_t *ids = NULL;
    uint32_t n = 0;
    bool opens = false;
    decoder *dec = NULL;
    int rc = 1;
    if (chat_prompt(&chat, chat.conv.n, &ids, &n, &opens, &err) != 0 || chat_start_decoder(cm, &dec, &err) != 0) {
        chat_error("%s", err.msg);
        goto out;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    uint64_t seed = settings_random_seed();
    dec_job job = {.prompt = ids, .n_prompt = n, .n_predict = a->s.n_predict, .stop = chat.stop,
                   .n_stop = a->s.ignore_eos ? 0 : chat.n_stop};
    settings_to_sampler(&a->s, chat.tmpl, seed, &job.sampling);
    if (decoder_submit(dec, &job, &err) < 0) {
        chat_error("%s", err.msg);
        goto out;
    }
    chat_stream st;
    chat_stream_init(&st, opens);
    printer pr = {0, 0, isatty(STDOUT_FILENO) != 0, isatty(STDERR_FILENO) != 0, false};
    dec_event ev = {0};
    double prefill_tps = 0;
    bool done = false, failed = false;
    while (!done) {
        if (interrupted == 1) {
            decoder_cancel(dec);
            interrupted = 2;
        }
        if (!decoder_wait(dec, &ev, 100))
            continue;
        if (ev.type == DEC_EV_TEXT) {
            chat_stream_feed(&st, ev.text, ev.len);
            print_progress(&pr, &st);
        } else if (ev.type == DEC_EV_PREFILL) {
            prefill_tps = ev.prefill_tps;
            um->n_tokens = ev.n_prompt - ev.n_reused;
        } else if (ev.type == DEC_EV_ERROR) {
            if (pr.think_open)
                fputs("\033[0m\n", stderr);
            chat_error("%s", ev.text);
            failed = done = true;
        } else if (ev.type == DEC_EV_DONE) {
            done = true;
            break;
        }
        decoder_event_free(&ev);
    }
    chat_stream_finish(&st);
    print_progress(&pr, &st);
    if (pr.think_open)
        fputs("\033[0m\n", stderr);
    if (!failed) {
        fputc('\n', stdout);
        fflush(stdout);
        conv_msg *m = conv_add(&chat.conv, "assistant", sbuf_str(&st.content), st.reasoning.len ? sbuf_str(&st.reasoning) : NULL);
        m->time = conv_now();
        m->n_tokens = ev.n_gen;
        m->tps = ev.decode_tps;
        m->prefill_tps = prefill_tps;
        m->stopped = ev.stop == DEC_STOP_CANCEL;
    }
    decoder_event_free(&ev);
    chat_stream_free(&st);
    rc = failed ? 1 : interrupted ? 130 : 0;
    if (a->conversation) {
        conv_set_str(&chat.conv.model_path, cm->demo_note ? "(built-in demo model)" : cm->path);
        conv_set_str(&chat.conv.model_name, cm->name);
        conv_set_str(&chat.conv.model_fingerprint, cm->fingerprint);
        chat.conv.model_size = cm->size;
        conv_set_str(&chat.conv.tmpl, tmpl_name(chat.tmpl));
        chat.conv.thinking = chat.thinking;
        chat.conv.sampling = (conv_sampling){true, job.sampling.temp, job.sampling.top_p, job.sampling.min_p,
                                             job.sampling.top_k, job.sampling.seed, a->s.n_predict};
        if (conv_save(&chat.conv, a->conversation, &err) != 0) {
            chat_error("%s", err.msg);
            rc = 1;
        }
    }
out:
    free(ids);
    decoder_free(dec);
    chat_free(&chat);
    return rc;
}

/* ---- the UI ---------------------------------------------------------------------------- */

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
    for (int i = 0; i < 4; i++)
        c.model_lines[i] = cm->lines[i];
    c.n_model_lines = 4;
    sc->cfg = a->s;
    sc->m = &cm->m;
    sc->tok = cm->tok;
    sc->tmpl = cm->tmpl;
    sc->be = cm->be;
    sc->fallback = cm->fallback;
    sc->params = cm->params;
    snprintf(sc->model_path, sizeof sc->model_path, "%s", cm->path);
    snprintf(sc->model_name, sizeof sc->model_name, "%s", cm->name);
    snprintf(sc->fingerprint, sizeof sc->fingerprint, "%s", cm->fingerprint);
    sc->model_size = cm->size;
    sc->demo_note = cm->demo_note;
    sc->backend_note = cm->backend_note[0] ? cm->backend_note : NULL;
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
    if (cm.demo_note && !a.prompt)
        chat_error("no model given: using the built-in demo model");
    else if (cm.demo_note)
        chat_error("note: %s", cm.demo_note);
    if (a.prompt && cm.backend_note[0])
        chat_error("note: %s", cm.backend_note);
    int rc = a.prompt ? one_shot(&a, &cm, init) : run_ui(&a, &cm, init);
    if (init)
        conv_free(init);
    chat_model_close(&cm);
    chat_args_free(&a);
    return rc;
}
