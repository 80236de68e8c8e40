/* oneshot.c: `glmchat -p`: the prompt (argument and/or stdin), the -C
 * conversation under its lock, the answer streamed to stdout, signals and
 * output errors. */
#include "oneshot.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat.h"
#include "chat/conversation.h"
#include "engine/decoder.h"
#include "base/text_safe.h"

/* A prompt on stdin larger than this is surely a mistake (a model's whole
 * context is far smaller). */
#define STDIN_MAX (64u << 20)

/* ---- the prompt --------------------------------------------------------------------------- */

static int read_stdin(sbuf *out, err_t *err)
{
    char buf[65536];
    for (;;) {
        ssize_t r = read(STDIN_FILENO, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return err_set(err, "standard input: %s", strerror(errno));
        if (r == 0)
            return 0;
        if (out->len + (size_t)r > STDIN_MAX)
            return err_set(err, "standard input: more than %u MiB for the prompt", STDIN_MAX >> 20);
        if (memchr(buf, 0, (size_t)r))
            return err_set(err, "standard input holds a NUL byte: not text");
        sbuf_add(out, buf, (size_t)r);
    }
}

/* `-p -`: stdin is the prompt.  `-p TEXT` with stdin not a terminal: TEXT,
 * a blank line, then what stdin holds (as `ollama run` does). */
static int build_prompt(const chat_args *a, sbuf *prompt, err_t *err)
{
    bool dash = !strcmp(a->prompt, "-");
    if (!dash)
        sbuf_adds(prompt, a->prompt);
    if (!dash && isatty(STDIN_FILENO))
        return 0;
    sbuf in = {0};
    if (read_stdin(&in, err) != 0) {
        sbuf_free(&in);
        return -1;
    }
    /* `echo text |` ends with a newline that is no part of the prompt. */
    while (in.len && (in.s[in.len - 1] == '\n' || in.s[in.len - 1] == '\r'))
        in.s[--in.len] = 0;
    if (dash && in.len == 0) {
        sbuf_free(&in);
        return err_set(err, "-p -: nothing on standard input");
    }
    if (in.len) {
        if (!dash)
            sbuf_adds(prompt, "\n\n");
        sbuf_add(prompt, in.s, in.len);
    }
    sbuf_free(&in);
    return 0;
}

/* ---- signals ------------------------------------------------------------------------------ */

/* Installed before anything else (the -C lock, the model's load, the
 * engine's start, which take seconds): until the answer starts there is
 * nothing to save, so a signal ends the process at once -- removing the
 * -C lock file when one is held, as conv_lock_release would (the lock
 * itself goes with the process).  Once the answer runs, a signal ends the
 * answer instead, and the main loop saves it and exits 128+N. */
static volatile sig_atomic_t caught;    /* the first signal while answering, 0 if none */
static volatile sig_atomic_t answering; /* the answer has started */
static char held_lock[PATH_MAX + 16];   /* the -C lock file's path while it is held, else "" */

static void on_signal(int sig)
{
    if (!answering) {
        if (held_lock[0])
            unlink(held_lock);
        _exit(128 + sig);
    }
    if (!caught)
        caught = sig;
}

static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof handled_signals / sizeof handled_signals[0]; i++)
        sigaction(handled_signals[i], &sa, NULL);
}

/* The handled signals wait while the mask holds them (old gets the mask
 * before). */
static void hold_signals(sigset_t *old)
{
    sigset_t all;
    sigemptyset(&all);
    for (size_t i = 0; i < sizeof handled_signals / sizeof handled_signals[0]; i++)
        sigaddset(&all, handled_signals[i]);
    pthread_sigmask(SIG_BLOCK, &all, old);
}

/* Records (or forgets, with NULL) the lock file the handler removes; the
 * signals wait meanwhile, so the handler never sees half a path. */
static void set_held_lock(const char *path)
{
    sigset_t old;
    hold_signals(&old);
    if (path && strlen(path) < sizeof held_lock)
        memcpy(held_lock, path, strlen(path) + 1);
    else
        held_lock[0] = 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* One try at the -C lock (0 taken, 1 another run holds it, -1 error).  The
 * signals wait from before the lock file may be created until the handler
 * knows its path: one in between used to end the run with the file left
 * behind. */
static int try_lock(const char *path, conv_lock *lock, err_t *err)
{
    sigset_t old;
    hold_signals(&old);
    int r = conv_lock_acquire(lock, path, 0, err);
    if (r == 0)
        set_held_lock(lock->path);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

/* ---- printing ----------------------------------------------------------------------------- */

typedef struct {
    size_t printed_r, printed_c;
    bool tty_out, tty_err, think_open;
    int out_errno; /* the first failed write to stdout, 0 if none */
} printer;

/* Model text: inert forms of control characters for a terminal, the bytes
 * as they are for pipes and files.  false when the write failed. */
static bool write_text(FILE *f, const char *s, size_t n, bool tty)
{
    if (!tty)
        return fwrite(s, 1, n, f) == n;
    sbuf b = {0};
    tsafe_sanitize(&b, s, n, false);
    bool ok = fwrite(sbuf_str(&b), 1, b.len, f) == b.len;
    sbuf_free(&b);
    return ok;
}

static void out_failed(printer *p)
{
    if (!p->out_errno)
        p->out_errno = errno ? errno : EIO;
}

static void print_progress(printer *p, const chat_stream *st)
{
    if (p->tty_err && st->reasoning.len > p->printed_r) {
        if (!p->think_open)
            fputs("\033[2m", stderr); /* reasoning, dimmed, on the terminal only */
        p->think_open = true;
        write_text(stderr, st->reasoning.s + p->printed_r, st->reasoning.len - p->printed_r, true);
        p->printed_r = st->reasoning.len;
    }
    if (st->content.len > p->printed_c && !p->out_errno) {
        if (p->think_open) {
            fputs("\033[0m\n\n", stderr);
            p->think_open = false;
        }
        errno = 0;
        if (!write_text(stdout, st->content.s + p->printed_c, st->content.len - p->printed_c, p->tty_out) ||
            fflush(stdout) != 0)
            out_failed(p);
        p->printed_c = st->content.len;
    }
    fflush(stderr);
}

static void close_reasoning(printer *p)
{
    if (p->think_open)
        fputs("\033[0m\n", stderr);
    p->think_open = false;
}

/* ---- the answer --------------------------------------------------------------------------- */

typedef struct {
    chat_stream st;
    dec_event done;     /* the DONE event's counters */
    double prefill_tps;
    uint32_t n_prompt_evaluated;
    bool failed;        /* the decoder reported an error (already printed) */
    char why[512];      /* that error */
} answer;

static void stream_answer(decoder *dec, printer *pr, answer *ans)
{
    dec_event ev;
    bool cancelled = false;
    for (bool done = false; !done;) {
        if ((caught || pr->out_errno) && !cancelled) {
            decoder_cancel(dec);
            cancelled = true;
        }
        if (!decoder_wait(dec, &ev, 100))
            continue;
        if (ev.type == DEC_EV_TEXT) {
            chat_stream_feed(&ans->st, ev.text, ev.len);
            print_progress(pr, &ans->st);
        } else if (ev.type == DEC_EV_PREFILL) {
            ans->prefill_tps = ev.prefill_tps;
            ans->n_prompt_evaluated = ev.n_prompt - ev.n_reused;
        } else if (ev.type == DEC_EV_ERROR) {
            close_reasoning(pr);
            chat_error("the answer failed: %s", ev.text);
            snprintf(ans->why, sizeof ans->why, "%s", ev.text ? ev.text : "unknown error");
            ans->failed = done = true;
        } else if (ev.type == DEC_EV_DONE) {
            ans->done = ev;
            ans->done.text = NULL;
            done = true;
        }
        decoder_event_free(&ev);
    }
    chat_stream_finish(&ans->st);
    print_progress(pr, &ans->st);
    close_reasoning(pr);
    if ((!ans->failed || pr->printed_c) && !pr->out_errno) {
        errno = 0;
        if (fputc('\n', stdout) == EOF || fflush(stdout) != 0)
            out_failed(pr);
    }
}

/* The answer, also a failed one: what it said before the failure, marked
 * with why (conv_set_error), so the file keeps the user's message and stays
 * a conversation of turns (a message left without its answer made the next
 * -C run two user messages in a row). */
static void record_answer(chat_session *chat, const answer *ans, uint64_t seed)
{
    const chat_stream *st = &ans->st;
    conv_msg *m = conv_add(&chat->conv, "assistant", sbuf_str(&st->content),
                           st->reasoning.len ? sbuf_str(&st->reasoning) : NULL);
    m->time = conv_now();
    m->n_tokens = ans->failed ? 0 : ans->done.n_gen;
    m->tps = ans->done.decode_tps;
    m->prefill_tps = ans->prefill_tps;
    m->stopped = ans->done.stop == DEC_STOP_CANCEL;
    if (ans->failed)
        conv_set_error(m, ans->why);
    conv_set_seed(m, seed);
}

static void fill_metadata(conversation *c, const chat_model *cm, const chat_session *chat, const dec_job *job)
{
    conv_set_str(&c->model_path, cm->demo_note ? "(built-in demo model)" : cm->path);
    conv_set_str(&c->model_name, cm->name);
    conv_set_str(&c->model_fingerprint, cm->fingerprint);
    c->model_size = cm->size;
    conv_set_str(&c->tmpl, tmpl_name(chat->tmpl));
    c->thinking = chat->thinking;
    c->sampling = conv_sampling_of(&job->sampling, job->n_predict);
}

/* The template of a continued conversation: the recorded one when it was
 * made with this very model file (another model has its own template) and
 * --template is not given, else the model's. */
static const tmpl_preset *recorded_template(const chat_args *a, const chat_model *cm, const conversation *conv)
{
    const tmpl_preset *t = conv->tmpl ? tmpl_find(conv->tmpl) : NULL;
    bool same_model = conv->model_fingerprint && !strcmp(conv->model_fingerprint, cm->fingerprint);
    return t && same_model && !settings_given(&a->s, "template") ? t : cm->tmpl;
}

/* The prompt for the conversation in chat within the decoder's context,
 * as the context-overflow setting says (the oldest exchanges left out, with
 * a note, or none and a refusal); -1 after printing why there is none. */
static int fit_prompt(const chat_args *a, const settings *set, const chat_session *chat, decoder *dec, chat_fit *fit)
{
    err_t err;
    uint32_t n_ctx = decoder_n_ctx(dec), reserve = chat_answer_reserve(n_ctx, set->n_predict);
    if (chat_prompt_fit(chat, chat->conv.n, n_ctx, reserve, set->ctx_overflow, fit, &err) != 0) {
        chat_error("%s", err.msg);
        return -1;
    }
    const char *least = fit->bounded ? "at least " : "";
    const char *file = a->conversation;
    if (!fit->fits && fit->policy == CHAT_CTX_STOP)
        chat_error("not answered: the conversation is %s%u tokens; the context holds %u with %u kept for the answer: "
                   "raise -c, or --context-overflow trim leaves the oldest turns out of the prompt%s%s%s",
                   least, fit->n_full, n_ctx, reserve, file ? " (" : "", file ? file : "", file ? " is unchanged)" : "");
    else if (!fit->fits)
        chat_error("not answered: the system prompt and this message alone are %s%u tokens; the context holds %u with "
                   "%u kept for the answer: raise -c or shorten the message%s%s%s",
                   least, fit->n_least ? fit->n_least : fit->n_full, n_ctx, reserve, file ? " (" : "", file ? file : "",
                   file ? " is unchanged)" : "");
    if (!fit->fits)
        return -1;
    if (fit->n_dropped) {
        sbuf why = {0};
        chat_fit_describe(fit, &why);
        chat_error("note: %s --context-overflow stop refuses instead; -c sets the context size.", sbuf_str(&why));
        sbuf_free(&why);
    }
    return 0;
}

/* An answer that is all reasoning: what ended it says what helps (raising
 * -n only helps when -n is what ended it). */
static void note_reasoning_only(const dec_event *done, int n_predict, uint32_t n_ctx)
{
    unsigned n = done->n_gen;
    switch (done->stop) {
    case DEC_STOP_LIMIT:
        chat_error("note: the answer is empty: all %u generated tokens went into the reasoning and -n %d ended it "
                   "(raise -n, or use --think off)", n, n_predict);
        break;
    case DEC_STOP_CTX:
        chat_error("note: the answer is empty: all %u generated tokens went into the reasoning until the context "
                   "(%u tokens) was full (a larger -c, or --think off)", n, n_ctx);
        break;
    default:
        chat_error("note: the answer is empty: the model ended its turn while still reasoning (%u tokens; "
                   "--think off asks for the answer without it)", n);
        break;
    }
}

/* The answer to conversation `conv` + the prompt; saves to -C when given.
 * Returns the exit status. */
int oneshot_answer(const chat_args *a, chat_model *cm, conversation *conv, const char *prompt)
{
    err_t err;
    /* A continued conversation keeps the settings it was made with
     * (thinking, sampling, its seed) unless the command line changes them:
     * the file records one set of settings, and a replay of every turn of
     * it uses them. */
    settings set = a->s;
    if (!settings_given(&set, "think"))
        set.think = cm->think_default;
    settings_follow_recording(&set, conv);
    chat_session chat;
    chat_init(&chat, cm->tok, recorded_template(a, cm, conv), set.think);
    conv_free(&chat.conv);
    chat.conv = *conv;
    conv_init(conv); /* moved */
    if (a->system)
        conv_set_system(&chat.conv, a->system);
    conv_msg *um = conv_add(&chat.conv, "user", prompt, NULL);
    um->time = conv_now();
    size_t user_index = chat.conv.n - 1;
    chat_fit fit = {0};
    decoder *dec = NULL;
    int rc = 1;
    if (chat_start_decoder(cm, &dec, &err) != 0) {
        chat_error("%s", err.msg);
        goto out;
    }
    /* a cap asked for, or experts left in host memory (the backend's
     * description names them): say what went where */
    if (a->s.gpu_mem || strstr(decoder_describe(dec), " in host memory"))
        chat_error("note: %s", decoder_describe(dec));
    if (fit_prompt(a, &set, &chat, dec, &fit) != 0)
        goto out; /* nothing answered, nothing saved */
    /* From here a signal ends the answer instead of the process. */
    answering = 1;
    dec_job job = {.prompt = fit.ids, .n_prompt = fit.n_ids, .n_predict = set.n_predict, .stop = chat.stop,
                   .n_stop = set.ignore_eos ? 0 : chat.n_stop};
    settings_to_sampler(&set, chat.tmpl, cm->m.gguf, settings_random_seed(), &job.sampling);
    if (decoder_submit(dec, &job, &err) < 0) {
        chat_error("%s", err.msg);
        goto out;
    }
    printer pr = {0, 0, isatty(STDOUT_FILENO) != 0, isatty(STDERR_FILENO) != 0, false, 0};
    answer ans;
    memset(&ans, 0, sizeof ans);
    chat_stream_init(&ans.st, fit.opens_think);
    stream_answer(dec, &pr, &ans);
    chat.conv.msgs[user_index].n_tokens = ans.n_prompt_evaluated;
    record_answer(&chat, &ans, job.sampling.seed);
    if (!ans.failed && !caught && !pr.out_errno && ans.st.content.len == 0 && ans.st.reasoning.len > 0)
        note_reasoning_only(&ans.done, set.n_predict, decoder_n_ctx(dec));
    chat_stream_free(&ans.st);
    /* A closed pipe is the reader's choice, not an error to report. */
    if (pr.out_errno && !(pr.out_errno == EPIPE && caught == SIGPIPE))
        chat_error("standard output: %s", strerror(pr.out_errno));
    rc = ans.failed || (pr.out_errno && !caught) ? 1 : caught ? 128 + caught : 0;
    if (a->conversation) {
        fill_metadata(&chat.conv, cm, &chat, &job);
        if (conv_save_locked(&chat.conv, a->conversation, &err) != 0) {
            chat_error("%s", err.msg);
            rc = 1;
        } else if (ans.failed) {
            chat_error("your message and what was answered before the failure are saved in %s", a->conversation);
        }
    }
out:
    chat_fit_free(&fit);
    decoder_free(dec);
    chat_free(&chat);
    return rc;
}

/* ---- the command --------------------------------------------------------------------------- */

/* -C FILE: its writers' lock (waiting for other runs on the same file),
 * then the conversation it holds, or a new one when it does not exist. */
static int open_conversation(const chat_args *a, conv_lock *lock, conversation *conv, err_t *err)
{
    conv_init(conv);
    if (!a->conversation)
        return 0;
    int r = try_lock(a->conversation, lock, err);
    if (r == 1)
        chat_error("waiting: %s", err->msg);
    /* Polled, not a blocking flock: a signal while waiting ends the run
     * between two tries, where no lock of ours exists. */
    while (r == 1) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        r = try_lock(a->conversation, lock, err);
    }
    if (r != 0)
        return -1;
    if (access(a->conversation, F_OK) != 0)
        return 0;
    conv_free(conv);
    return conv_load(conv, a->conversation, err);
}

int oneshot_run(const chat_args *a)
{
    err_t err;
    sbuf prompt = {0};
    if (build_prompt(a, &prompt, &err) != 0) {
        chat_error("%s", err.msg);
        sbuf_free(&prompt);
        return 1;
    }
    conv_lock lock = {-1, NULL};
    conversation conv;
    int rc = 1;
    catch_signals();
    /* The conversation first: a broken file is reported (never replaced)
     * before the slow model load. */
    int opened = open_conversation(a, &lock, &conv, &err);
    if (opened != 0) {
        chat_error("%s", err.msg);
        goto done;
    }
    chat_model cm;
    if (chat_model_open(&cm, a, &err) != 0) {
        chat_error("%s", err.msg);
        goto done;
    }
    if (cm.demo_note)
        chat_error("note: %s", cm.demo_note);
    if (cm.pick_note[0])
        chat_error("note: %s", cm.pick_note);
    if (cm.backend_note[0])
        chat_error("note: %s", cm.backend_note);
    rc = oneshot_answer(a, &cm, &conv, sbuf_str(&prompt));
    chat_model_close(&cm);
done:
    set_held_lock(NULL);
    conv_lock_release(&lock);
    conv_free(&conv);
    sbuf_free(&prompt);
    return rc;
}
