/* cmd_replay.c: `glmchat replay FILE`: re-runs a saved conversation's user
 * turns through the current model and settings and prints a transcript.
 *
 * Each turn is answered with the recorded conversation before it as the
 * context (so every turn is compared on the same footing), and the
 * transcript puts its metadata (paths, speeds, the settings) on lines
 * starting with '#': `grep -v '^#'` of two replays diffs cleanly, which
 * makes a replay a regression check.  The replay follows the recording's
 * settings (template, thinking, sampling and its penalties, seed,
 * n-predict) except those given on the command line, so it reproduces what
 * was recorded.
 *
 * Strings from the file or the model (names, paths) are shown inert and on
 * one line: a conversation or GGUF from elsewhere must not drive the
 * terminal (OSC 52 clipboard writes, OSC 8 links) or forge transcript lines. */
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat.h"
#include "common/chat_setup.h"
#include "commands.h"
#include "chat/conversation.h"
#include "engine/decoder.h"
#include "base/text_safe.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glmchat replay FILE [-m MODEL] [-n N] [options]\n"
            "\n"
            "Re-runs the user turns of the conversation in FILE through the model and\n"
            "prints each recorded answer and the new one.  Lines starting with '#' hold\n"
            "what varies between runs (speeds, paths); with a fixed --seed (or --temp 0)\n"
            "the rest is reproducible, so two replays can be diffed.\n\n"
            "%s",
            chat_args_help());
}

/* Metadata from the file or the model, on a '#' line: inert, one line. */
static void put_meta(const char *s)
{
    sbuf b = {0};
    tsafe_one_line(&b, s, strlen(s));
    fputs(sbuf_str(&b), stdout);
    sbuf_free(&b);
}

static void put_text(const char *s, bool tty)
{
    if (!tty) {
        fputs(s, stdout);
        return;
    }
    sbuf b = {0};
    tsafe_sanitize(&b, s, strlen(s), false);
    fputs(sbuf_str(&b), stdout);
    sbuf_free(&b);
}

/* Text lines are indented, so none can pass for a '#' or '---' line. */
static void section(const char *title, const char *text, bool tty)
{
    printf("--- %s\n", title);
    const char *p = text;
    do {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, n);
        fputs("  ", stdout);
        put_text(line ? line : "", tty);
        fputc('\n', stdout);
        free(line);
        p = nl ? nl + 1 : NULL;
    } while (p);
}

typedef struct {
    chat_stream st;
    uint32_t n_gen;
    double tps;
    dec_stop stop;
} answer;

static const char *stop_name(dec_stop s)
{
    switch (s) {
    case DEC_STOP_EOS: return "end of turn";
    case DEC_STOP_LIMIT: return "n-predict reached";
    case DEC_STOP_CTX: return "context full";
    default: return "interrupted";
    }
}

/* One answer to the first n_msgs messages; -1 with err on failure.
 * turn_seed (non-NULL): the recorded answer's own seed, which replaces the
 * settings' (the chat draws a new seed for every answer). */
static int generate(decoder *dec, chat_session *chat, size_t n_msgs, const chat_args *a, const gguf_ctx *meta,
                    uint64_t seed,
                    const uint64_t *turn_seed, answer *ans, err_t *err)
{
    int32_t *ids = NULL;
    uint32_t n = 0;
    bool opens = false;
    if (chat_prompt(chat, n_msgs, &ids, &n, &opens, err) != 0)
        return -1;
    dec_job job = {.prompt = ids, .n_prompt = n, .n_predict = a->s.n_predict, .stop = chat->stop,
                   .n_stop = a->s.ignore_eos ? 0 : chat->n_stop};
    settings_to_sampler(&a->s, chat->tmpl, meta, seed, &job.sampling);
    if (turn_seed)
        job.sampling.seed = *turn_seed;
    int id = decoder_submit(dec, &job, err);
    free(ids);
    if (id < 0)
        return -1;
    chat_stream_init(&ans->st, opens);
    int rc = 0;
    for (bool done = false; !done;) {
        if (interrupted == 1) {
            decoder_cancel(dec);
            interrupted = 2;
        }
        dec_event ev;
        if (!decoder_wait(dec, &ev, 100))
            continue;
        if (ev.type == DEC_EV_TEXT) {
            chat_stream_feed(&ans->st, ev.text, ev.len);
        } else if (ev.type == DEC_EV_ERROR) {
            err_set(err, "%s", ev.text);
            rc = -1;
            done = true;
        } else if (ev.type == DEC_EV_DONE) {
            ans->n_gen = ev.n_gen;
            ans->tps = ev.decode_tps;
            ans->stop = ev.stop;
            done = true;
        }
        decoder_event_free(&ev);
    }
    chat_stream_finish(&ans->st);
    return rc;
}

static void header(const char *file, const conversation *c, const chat_model *cm, const chat_session *chat,
                   const chat_args *a, uint64_t seed)
{
    sampler_params sp;
    settings_to_sampler(&a->s, chat->tmpl, cm->m.gguf, seed, &sp);
    fputs("# glmchat replay of ", stdout);
    put_meta(file);
    fputs("\n# model: ", stdout);
    put_meta(cm->name);
    fputs(", ", stdout);
    put_meta(cm->path);
    fputc('\n', stdout);
    if (c->model_name || c->model_path) {
        fputs("# recorded with: ", stdout);
        put_meta(c->model_name ? c->model_name : "?");
        fputs(", ", stdout);
        put_meta(c->model_path ? c->model_path : "?");
        bool same = c->model_fingerprint && strcmp(c->model_fingerprint, cm->fingerprint) == 0;
        printf("%s\n", same ? " (the same file)" : "");
    }
    printf("# settings: template %s, thinking %s, temp %g, top-k %d, top-p %g, min-p %g, repeat-penalty %g, "
           "presence-penalty %g, frequency-penalty %g, seed %llu, n-predict %d\n",
           tmpl_name(chat->tmpl), chat->thinking ? "on" : "off", (double)sp.temp, sp.top_k, (double)sp.top_p,
           (double)sp.min_p, (double)sp.repeat_penalty, (double)sp.presence_penalty, (double)sp.frequency_penalty,
           (unsigned long long)sp.seed, a->s.n_predict);
}

/* ---- the recording's settings --------------------------------------------------------------- */

/* The recorded settings replace the settings file's and the defaults, but
 * not the command line's: a replay reproduces the recording unless told
 * otherwise. */
static void follow_recording(chat_args *a, const conversation *c)
{
    settings *s = &a->s;
    if (c->tmpl && !settings_given(s, "template")) {
        if (tmpl_find(c->tmpl) && strlen(c->tmpl) < sizeof s->tmpl)
            snprintf(s->tmpl, sizeof s->tmpl, "%s", c->tmpl);
        else
            chat_error("note: the recorded template '%s' is unknown here; using the model's", c->tmpl);
    }
    settings_follow_recording(s, c);
}

/* ---- the replay ------------------------------------------------------------------------------ */

/* false (after one line on stderr) once stdout cannot be written: a
 * truncated transcript must not pass for a whole one. */
static bool output_ok(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return true;
    chat_error("standard output: %s", errno ? strerror(errno) : "write error");
    return false;
}

static int replay(const chat_args *a, chat_model *cm, conversation *c)
{
    chat_session chat;
    /* the recording's thinking (follow_recording), else the user's, else the model's default */
    bool think = settings_given(&a->s, "think") || c->thinking >= 0 ? a->s.think : cm->think_default;
    chat_init(&chat, cm->tok, cm->tmpl, think);
    conv_free(&chat.conv);
    chat.conv = *c;
    conv_init(c);
    bool tty = isatty(STDOUT_FILENO) != 0;
    /* Without a recorded seed or --seed, a replay draws one and shows it, so it can be repeated. */
    uint64_t seed = settings_random_seed();
    header(a->positional, &chat.conv, cm, &chat, a, seed);
    if (!output_ok()) {
        chat_free(&chat);
        return 1;
    }
    int turns = 0, total = 0;
    for (size_t i = 0; i < chat.conv.n; i++)
        total += !strcmp(chat.conv.msgs[i].role, "user");
    decoder *dec = NULL;
    err_t err;
    int rc = 0;
    if (total == 0) {
        chat_error("%s: no user messages to replay", a->positional);
        chat_free(&chat);
        return 1;
    }
    if (chat_start_decoder(cm, &dec, &err) != 0) {
        chat_error("%s", err.msg);
        chat_free(&chat);
        return 1;
    }
    sampler_params rsp;
    settings_to_sampler(&a->s, chat.tmpl, cm->m.gguf, seed, &rsp);
    bool draws = rsp.temp > 0; /* greedy answers do not depend on the draw's order */
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    for (size_t u = 0; u < chat.conv.n && !interrupted; u++) {
        const conv_msg *m = &chat.conv.msgs[u];
        if (strcmp(m->role, "user") != 0)
            continue;
        turns++;
        printf("\n=== turn %d of %d\n", turns, total);
        section("user", m->content, tty);
        const conv_msg *old = u + 1 < chat.conv.n && !strcmp(chat.conv.msgs[u + 1].role, "assistant")
                                  ? &chat.conv.msgs[u + 1] : NULL;
        if (old) {
            if (old->reasoning && old->reasoning[0])
                section("recorded reasoning", old->reasoning, tty);
            section("recorded answer", old->content, tty);
            printf("# recorded: %u tokens, %.1f tokens/s%s", old->n_tokens, old->tps,
                   old->error ? ", failed: " : old->stopped ? ", stopped" : "");
            if (old->error)
                put_meta(old->error);
            fputc('\n', stdout);
        } else {
            printf("--- recorded answer\n  (none)\n");
        }
        if (!output_ok()) {
            rc = 1;
            break;
        }
        answer ans = {0};
        /* The answer's own recorded seed, unless --seed says otherwise. */
        bool own_seed = old && old->has_seed && !settings_given(&a->s, "seed");
        if (own_seed)
            printf("# seed %llu (recorded with this answer)\n", (unsigned long long)old->seed);
        if (own_seed && draws && strcmp(conv_msg_draw(old), SAMPLER_DRAW) != 0) {
            fputs("# note: another glmchat drew the recorded answer (its draw: ", stdout);
            put_meta(conv_msg_draw(old));
            fputs("; this one's: " SAMPLER_DRAW "), so with the same seed a sampled answer differs (greedy "
                  "answers do not)\n",
                  stdout);
        }
        if (generate(dec, &chat, u + 1, a, cm->m.gguf, seed, own_seed ? &old->seed : NULL, &ans, &err) != 0) {
            chat_error("turn %d: %s", turns, err.msg);
            chat_stream_free(&ans.st);
            rc = 1;
            break;
        }
        if (ans.st.reasoning.len)
            section("new reasoning", sbuf_str(&ans.st.reasoning), tty);
        section("new answer", sbuf_str(&ans.st.content), tty);
        printf("new: %u tokens, %s\n", ans.n_gen, stop_name(ans.stop));
        printf("# new: %.1f tokens/s\n", ans.tps);
        chat_stream_free(&ans.st);
        if (!output_ok()) {
            rc = 1;
            break;
        }
    }
    decoder_free(dec);
    chat_free(&chat);
    if (interrupted && rc == 0) {
        chat_error("replay interrupted");
        return 130;
    }
    return rc;
}

int cmd_replay(int argc, char **argv)
{
    chat_args a;
    err_t err;
    bool is_usage;
    setlocale(LC_ALL, "");
    if (chat_args_parse(&a, argc, argv, true, &is_usage, &err) != 0) {
        chat_error("%s", err.msg);
        if (is_usage)
            fprintf(stderr, "Try 'glmchat replay --help'.\n");
        chat_args_free(&a);
        return is_usage ? 2 : 1;
    }
    if (a.help || a.version) {
        usage(stdout);
        chat_args_free(&a);
        return 0;
    }
    if (!a.positional) {
        chat_error("replay needs a conversation FILE");
        usage(stderr);
        chat_args_free(&a);
        return 2;
    }
    conversation c;
    if (conv_load(&c, a.positional, &err) != 0) {
        chat_error("%s", err.msg);
        chat_args_free(&a);
        return 1;
    }
    follow_recording(&a, &c);
    chat_model cm;
    if (chat_model_open(&cm, &a, &err) != 0) {
        chat_error("%s", err.msg);
        conv_free(&c);
        chat_args_free(&a);
        return 1;
    }
    if (cm.pick_note[0])
        chat_error("note: %s", cm.pick_note);
    if (cm.demo_note)
        chat_error("no model given: replaying on the built-in demo model");
    int rc = replay(&a, &cm, &c);
    conv_free(&c);
    chat_model_close(&cm);
    chat_args_free(&a);
    return rc;
}
