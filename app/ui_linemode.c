/* ui_linemode.c: the chat as lines of text, for terminals without cursor
 * addressing.  One loop poll()s standard input, the signal pipe and the
 * decoder's events; the session speaks through a frontend that prints. */
#include "ui_linemode.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_commands.h"
#include "chat_setup.h"
#include "text_safe.h"
#include "ui_term.h"

#define DOUBLE_KEY_S 2.0 /* Ctrl-C twice, quitting unsaved twice */

typedef struct {
    const ui_app_config *c;
    ui_session *session;
    ui_frontend fe;
    chatcmd_ctx commands;
    theme th;
    sbuf pending;          /* input read but not yet a whole line */
    sbuf message;          /* lines continued with '\' */
    bool at_line_start;    /* the output's cursor is at the start of a line */
    bool prompt_shown;
    char last_status[256];
    /* the answer being printed */
    int job;
    size_t conv_n;         /* messages when it began */
    size_t printed_r, printed_c;
    /* the replay turn being printed */
    int replay_turn;
    size_t replay_printed;
    double ctrl_c_at, quit_at;
    bool quit;
    int exit_code;
} linemode;

/* ---- output ------------------------------------------------------------------------------- */

static void out(linemode *l, const char *s, size_t n)
{
    if (!n)
        return;
    fwrite(s, 1, n, stdout);
    l->at_line_start = s[n - 1] == '\n';
    l->prompt_shown = false;
}

static void out_str(linemode *l, const char *s)
{
    out(l, s, strlen(s));
}

/* Untrusted text (answers, notes quoting files): control characters inert. */
static void out_safe(linemode *l, const char *s, size_t n)
{
    sbuf b = {0};
    tsafe_sanitize(&b, s, n, false);
    out(l, sbuf_str(&b), b.len);
    sbuf_free(&b);
}

static void new_line(linemode *l)
{
    if (!l->at_line_start)
        out_str(l, "\n");
}

static void flush(linemode *l)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        l->quit = true; /* the terminal went away */
        l->exit_code = 1;
    }
}

/* ---- the frontend ---------------------------------------------------------------------------- */

static void finish_answer(linemode *l);

/* A note or a message about an answer that just ended (n-predict reached,
 * stopped) comes after the answer's last words. */
static void end_answer_first(linemode *l)
{
    if (l->job && !ui_session_live(l->session, NULL))
        finish_answer(l);
}

static void fe_note(void *user, ui_level level, const char *text)
{
    linemode *l = user;
    end_answer_first(l);
    new_line(l);
    out_safe(l, text, strlen(text));
    out_str(l, "\n");
}

static void fe_status(void *user, ui_level level, const char *text)
{
    linemode *l = user;
    /* Load progress would be a line per step; the screen has a bar for it. */
    if (!text[0] || !strncmp(text, "Loading the model", 17) || !strcmp(text, l->last_status))
        return;
    snprintf(l->last_status, sizeof l->last_status, "%s", text);
    end_answer_first(l);
    new_line(l);
    out_str(l, "-- ");
    out_safe(l, text, strlen(text));
    out_str(l, "\n");
}

static void fe_set_input(void *user, const char *text)
{
    linemode *l = user;
    new_line(l);
    out_str(l, "Your message was:\n");
    out_safe(l, text, strlen(text));
    out_str(l, "\n-- Type it anew (an empty line leaves it as it was).\n");
}

static void fe_restore_input(void *user, const char *text, const char *why)
{
    linemode *l = user;
    new_line(l);
    out_str(l, "-- ");
    out_str(l, why);
    out_str(l, "; this was not sent (type it again to send it):\n");
    out_safe(l, text, strlen(text));
    out_str(l, "\n");
}

/* Line mode sends no escape sequence at all (it is for terminals that would show them). */
static bool fe_write_terminal(void *user, const char *bytes, size_t n)
{
    return false;
}

static void fe_new_conversation(void *user)
{
    linemode *l = user;
    l->last_status[0] = 0;
}

static void fe_replay_turn(void *user, const ui_replay_turn *t, bool is_new)
{
    linemode *l = user;
    char buf[96];
    if (is_new) {
        new_line(l);
        snprintf(buf, sizeof buf, "Replay: turn %d of %d\n", t->turn, t->n_turns);
        out_str(l, buf);
        out_str(l, "Question: ");
        out_safe(l, t->user, strlen(t->user));
        out_str(l, "\nRecorded: ");
        out_safe(l, t->old_answer, strlen(t->old_answer));
        out_str(l, "\nNew: ");
        l->replay_turn = t->turn;
        l->replay_printed = 0;
    }
    size_t n = t->new_answer ? strlen(t->new_answer) : 0;
    if (t->turn == l->replay_turn && n > l->replay_printed) {
        out_safe(l, t->new_answer + l->replay_printed, n - l->replay_printed);
        l->replay_printed = n;
    }
    if (t->done) {
        snprintf(buf, sizeof buf, "\n(new %.1f tok/s, recorded %.1f%s)\n", t->new_tps, t->old_tps,
                 t->stopped ? ", stopped" : "");
        out_str(l, buf);
    }
}

/* ---- the answer as it streams ---------------------------------------------------------------- */

static void print_stream_part(linemode *l, const char *s, size_t len, size_t *printed, const char *head)
{
    if (len <= *printed)
        return;
    if (*printed == 0 && head)
        out_str(l, head);
    out_safe(l, s + *printed, len - *printed);
    *printed = len;
}

/* The end of an answer: what the stream held back (a partial tag), then its numbers. */
static void finish_answer(linemode *l)
{
    const conversation *c = ui_session_conv(l->session);
    const conv_msg *m = c->n > l->conv_n ? &c->msgs[c->n - 1] : NULL;
    if (m && !strcmp(m->role, "assistant")) {
        const char *r = m->reasoning ? m->reasoning : "";
        print_stream_part(l, r, strlen(r), &l->printed_r, "(thinking) ");
        if (l->printed_r && !l->printed_c && m->content[0])
            out_str(l, "\n\n");
        print_stream_part(l, m->content, strlen(m->content), &l->printed_c, NULL);
        char meta[96];
        snprintf(meta, sizeof meta, "\n(%u tokens, %.1f tok/s%s)\n", m->n_tokens, m->tps, m->stopped ? ", stopped" : "");
        out_str(l, meta);
    } else {
        new_line(l);
    }
    l->job = 0;
}

static void show_live(linemode *l)
{
    int job;
    const chat_stream *st = ui_session_live(l->session, &job);
    if (job != l->job) {
        if (l->job)
            finish_answer(l);
        if (job) {
            new_line(l);
            out_str(l, "Assistant:\n");
            l->job = job;
            l->conv_n = ui_session_conv(l->session)->n;
            l->printed_r = l->printed_c = 0;
        }
    }
    if (!st)
        return;
    print_stream_part(l, sbuf_str(&st->reasoning), st->reasoning.len, &l->printed_r, "(thinking) ");
    if (st->content.len > l->printed_c && l->printed_r && !l->printed_c)
        out_str(l, "\n\n");
    print_stream_part(l, sbuf_str(&st->content), st->content.len, &l->printed_c, NULL);
}

/* ---- what changed ------------------------------------------------------------------------------ */

static void request_quit(linemode *l)
{
    double now = ui_term_now();
    if (ui_session_unsaved(l->session) && now - l->quit_at > DOUBLE_KEY_S * 2) {
        l->quit_at = now;
        ui_status(&l->fe, UI_ERROR,
                  "Quit again to leave without saving, or /save FILE (the conversation is NOT saved: see above)");
        return;
    }
    l->quit = true;
}

static void apply(linemode *l, unsigned changed)
{
    if (changed & UI_CHANGED_LIVE)
        show_live(l);
    if (changed & UI_QUIT)
        request_quit(l);
    if (changed & UI_QUIT_NOW)
        l->quit = true;
}

/* "> " whenever the chat waits for the next line. */
static void maybe_prompt(linemode *l)
{
    if (l->quit || l->prompt_shown || !ui_session_ready(l->session) || ui_session_busy(l->session))
        return;
    new_line(l);
    out_str(l, l->message.len ? ". " : "> ");
    l->prompt_shown = true;
}

/* ---- input ---------------------------------------------------------------------------------------- */

static void run_line(linemode *l, char *line)
{
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
        line[--len] = 0;
    l->at_line_start = true; /* the terminal echoed the line and its newline */
    l->prompt_shown = false;
    l->last_status[0] = 0;   /* a new line: its messages are new, even if worded as before */
    if (len && line[len - 1] == '\\') {
        /* Continued: the message goes on with the next line. */
        sbuf_add(&l->message, line, len - 1);
        sbuf_addc(&l->message, '\n');
        return;
    }
    if (l->message.len) {
        sbuf_adds(&l->message, line);
        line = (char *)sbuf_str(&l->message);
    }
    if (ui_session_edit_text(l->session) && line[0] != '/') {
        if (!line[0]) {
            apply(l, ui_session_edit_cancel(l->session));
            ui_status(&l->fe, UI_INFO, "Edit cancelled");
        } else {
            unsigned changed = 0;
            ui_session_edit_finish(l->session, line, &changed);
            apply(l, changed);
        }
    } else if (line[0] == '/' && line[1] != '/') {
        apply(l, chatcmd_run(&l->commands, line));
    } else if (line[0]) {
        apply(l, ui_session_send(l->session, line[0] == '/' ? line + 1 : line));
    }
    sbuf_clear(&l->message);
}

/* Reads what the terminal has; runs every whole line.  End of input quits. */
static void read_input(linemode *l)
{
    char buf[4096];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        /* Ctrl-D on an empty line (or the terminal is gone): a last line, then out. */
        if (l->pending.len) {
            char *line = sbuf_take(&l->pending);
            run_line(l, line);
            free(line);
        }
        new_line(l);
        l->quit = true;
        return;
    }
    sbuf_add(&l->pending, buf, (size_t)n);
    for (;;) {
        char *nl = memchr(l->pending.s, '\n', l->pending.len);
        if (!nl)
            break;
        size_t len = (size_t)(nl - l->pending.s);
        char *line = malloc(len + 1);
        if (!line) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        memcpy(line, l->pending.s, len);
        line[len] = 0;
        memmove(l->pending.s, nl + 1, l->pending.len - len - 1);
        l->pending.len -= len + 1;
        l->pending.s[l->pending.len] = 0;
        run_line(l, line);
        free(line);
    }
}

static void on_signal(linemode *l, int sig)
{
    if (sig == SIGWINCH || sig == SIGCONT)
        return;
    if (sig != SIGINT) { /* SIGTERM, SIGHUP: leave cleanly, saving */
        l->quit = true;
        l->exit_code = 128 + sig;
        return;
    }
    double now = ui_term_now();
    if (now - l->ctrl_c_at < DOUBLE_KEY_S) {
        l->quit = true;
        return;
    }
    l->ctrl_c_at = now;
    sbuf_clear(&l->message);
    if (ui_session_busy(l->session)) {
        apply(l, ui_session_cancel(l->session));
        ui_status(&l->fe, UI_INFO, "Stopping the answer (Ctrl-C again quits)");
    } else {
        ui_status(&l->fe, UI_INFO, "Press Ctrl-C again to quit");
    }
    l->last_status[0] = 0;
}

/* ---- the loop ------------------------------------------------------------------------------------- */

static void run_loop(linemode *l)
{
    double last_stats = 0;
    while (!l->quit) {
        maybe_prompt(l);
        flush(l);
        struct pollfd fds[3] = {{STDIN_FILENO, POLLIN, 0}, {ui_term_signal_fd(), POLLIN, 0},
                                {ui_session_fd(l->session), POLLIN, 0}};
        int n = poll(fds, 3, ui_session_busy(l->session) ? 100 : 1000);
        if (n < 0 && errno != EINTR)
            break;
        int sig;
        while ((sig = ui_term_next_signal()) != 0)
            on_signal(l, sig);
        if (!l->quit && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
            read_input(l);
        apply(l, ui_session_pump(l->session));
        double now = ui_term_now();
        if (now - last_stats >= 0.1) { /* keeps the session's statistics for /stats */
            last_stats = now;
            apply(l, ui_session_poll_stats(l->session));
        }
    }
}

int ui_linemode_run(const ui_app_config *config, const char *why)
{
    linemode *l = calloc(1, sizeof *l);
    if (!l) {
        fputs("glmchat: out of memory\n", stderr);
        return 1;
    }
    l->c = config;
    l->th = config->th;
    l->at_line_start = true;
    l->fe = (ui_frontend){.user = l,
                          .note = fe_note,
                          .status = fe_status,
                          .set_input = fe_set_input,
                          .restore_input = fe_restore_input,
                          .new_conversation = fe_new_conversation,
                          .replay_turn = fe_replay_turn,
                          .write_terminal = fe_write_terminal};
    int code = 1;
    err_t err;
    if (ui_term_start_lines(&err) != 0) {
        chat_error("%s", err.msg);
        free(l);
        return 1;
    }
    l->session = ui_session_new(&config->session, &l->fe);
    if (!l->session) {
        fputs("glmchat: out of memory\n", stderr);
        free(l);
        return 1;
    }
    l->commands = (chatcmd_ctx){.session = l->session, .fe = &l->fe, .theme = &l->th};
    chat_error("%s: line mode (answers are printed as they come; /help lists the commands)", why);
    const ui_session_config *sc = &config->session;
    if (sc->demo_note)
        ui_note(&l->fe, UI_INFO, "%s", sc->demo_note);
    if (sc->conversation_file && ui_session_conv(l->session)->n)
        ui_note(&l->fe, UI_INFO, "Continuing %s (%zu messages); new turns are saved into it.",
                ui_session_autosave_path(l->session), ui_session_conv(l->session)->n);
    ui_note(&l->fe, UI_INFO, "Type a message and press Enter (end a line with \\ to go on with the next). "
                             "Ctrl-C stops an answer; /quit or Ctrl-D leaves.");
    apply(l, ui_session_start(l->session));
    run_loop(l);
    ui_session_wind_down(l->session);
    if (l->job)
        finish_answer(l);
    new_line(l);
    flush(l);
    code = l->exit_code;
    const char *saved = ui_session_saved_path(l->session);
    if (saved) {
        printf("glmchat: conversation saved in %s\n", saved);
    } else if (ui_session_unsaved(l->session)) {
        chat_error("the conversation could not be saved");
        code = code ? code : 1;
    }
    ui_session_free(l->session);
    sbuf_free(&l->pending);
    sbuf_free(&l->message);
    free(l);
    return code;
}
