/* ui_app.c: the interactive chat: events in, frames out.
 *
 * One thread runs the screen: it poll()s the terminal, the signal pipe and
 * the decoder's event fd, so typing, scrolling and resizing stay live while
 * the decode thread generates.  Keys, /commands and the session's events
 * return what they changed (UI_CHANGED_*); apply() turns that into the
 * panels to feed and draw, and a frame draws only those (at most 40 a
 * second).  The session speaks to the screen through the ui_frontend made
 * here: notes into the chat view, messages into the status line. */
#include "ui_app.h"

#include <errno.h>
#include <poll.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_commands.h"
#include "chat_setup.h"
#include "text_safe.h"
#include "ui_input.h"
#include "ui_keys.h"
#include "ui_linemode.h"
#include "ui_screen.h"
#include "ui_term.h"

#define FRAME_S 0.025          /* at most 40 frames a second */
#define STATS_S 0.1            /* side pane refresh: at most 10 a second */
#define STATUS_S 4.0           /* transient status messages */
#define DOUBLE_KEY_S 2.0       /* quitting with an unsaved conversation: twice */

typedef struct {
    ui_app_config c;
    ui_session *session;
    ui_frontend fe;
    ui_screen screen;
    chatcmd_ctx commands;
    ui_keys keys;
    theme th;
    int live_job;              /* the answer the chat view streams, 0: none */
    double last_stats, quit_at;
    bool quit;
    int exit_code;
} ui_app;

/* ---- the frontend: how the session and the commands reach the screen ---------------- */

static void fe_note(void *user, ui_level level, const char *text)
{
    ui_app *a = user;
    ui_chatview_note(&a->screen.view, level == UI_ERROR ? TH_ERROR : TH_NOTICE, text);
    ui_screen_dirty(&a->screen, UI_SLOT_CHAT);
}

static void fe_status(void *user, ui_level level, const char *text)
{
    ui_app *a = user;
    ui_statusline_message(&a->screen.status, level == UI_ERROR ? TH_ERROR : TH_STATUS_MSG, text,
                          ui_term_now() + STATUS_S);
    ui_screen_dirty(&a->screen, UI_SLOT_STATUS);
}

static void fe_set_input(void *user, const char *text)
{
    (void)user;
    ui_input_set_line(text);
}

static void fe_restore_input(void *user, const char *text, const char *why)
{
    ui_app *a = user;
    ui_input_restore(text);
    ui_status(&a->fe, UI_INFO, "%s: your message is back in the input line", why);
}

static bool fe_write_terminal(void *user, const char *bytes, size_t n)
{
    (void)user;
    /* Between frames: curses has flushed what it drew, and these bytes
     * move no cursor and print nothing. */
    fflush(stdout);
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, bytes, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        bytes += w;
        n -= (size_t)w;
    }
    return true;
}

static void fe_new_conversation(void *user)
{
    ui_app *a = user;
    ui_chatview_reset(&a->screen.view);
    ui_screen_dirty(&a->screen, UI_SLOT_CHAT);
}

static void fe_replay_turn(void *user, const ui_replay_turn *turn, bool is_new)
{
    ui_app *a = user;
    if (is_new)
        ui_chatview_replay(&a->screen.view, turn);
    else
        ui_chatview_replay_update(&a->screen.view, turn);
    ui_screen_dirty(&a->screen, UI_SLOT_CHAT);
}

/* ---- what changed, onto the panels --------------------------------------------------------- */

static void request_quit(ui_app *a)
{
    double now = ui_term_now();
    if (ui_session_unsaved(a->session) && now - a->quit_at > DOUBLE_KEY_S * 2) {
        a->quit_at = now;
        ui_status(&a->fe, UI_ERROR,
                  "Quit again to leave without saving, or /save FILE (the conversation is NOT saved: see above)");
        return;
    }
    a->quit = true;
}

static void show_live(ui_app *a)
{
    int job;
    const chat_stream *live = ui_session_live(a->session, &job);
    if (job != a->live_job) {
        /* Another answer: it starts unfolded, with the view following it. */
        ui_chatview_set_live(&a->screen.view, NULL, NULL);
        a->live_job = job;
    }
    ui_chatview_set_live(&a->screen.view, live, live ? ui_session_live_meta(a->session) : NULL);
    ui_screen_dirty(&a->screen, UI_SLOT_CHAT);
}

/* The model's summary and its file (/model changes them). */
static void show_model(ui_app *a)
{
    int n;
    const char *const *lines = ui_session_model_lines(a->session, &n);
    const char *path = ui_session_model_path(a->session);
    const char *slash = strrchr(path, '/');
    ui_sidepane_set_model(&a->screen.pane, lines, n, slash ? slash + 1 : path);
}

static void show_engine(ui_app *a)
{
    show_model(a);
    const char *stage;
    double frac;
    bool loading = ui_session_loading(a->session, &stage, &frac);
    ui_sidepane_set_loading(&a->screen.pane, loading, loading ? stage : NULL, loading ? frac : 0);
    ui_sidepane_set_backend(&a->screen.pane, ui_session_backend(a->session));
    ui_screen_dirty(&a->screen, UI_SLOT_PANE);
}

/* The status line's state: what the chat is doing. */
static void show_state(ui_app *a)
{
    const ui_session *s = a->session;
    char buf[160];
    int turn, turns;
    bool busy = ui_session_busy(s);
    const dec_stats *st = ui_session_stats(s);
    if (ui_session_load_failed(s))
        snprintf(buf, sizeof buf, "The model is not available; /quit leaves");
    else if (!ui_session_ready(s))
        snprintf(buf, sizeof buf, "Loading the model...");
    else if (busy && ui_session_replaying(s, &turn, &turns))
        snprintf(buf, sizeof buf, "Replaying turn %d of %d | Esc stops", turn, turns);
    else if (busy && st && st->prompt_total)
        /* The prompt is being read: how far, how fast (not "0 tok/s"). */
        snprintf(buf, sizeof buf, "Answering | reading the prompt: %u / %u tokens, %.0f tok/s | Esc stops",
                 st->prompt_done, st->prompt_total, st->prefill_tps);
    else if (busy)
        snprintf(buf, sizeof buf, "Answering | %.1f tok/s | Esc stops", st ? st->decode_tps : 0.0);
    else if (ui_session_edit_text(s))
        snprintf(buf, sizeof buf, "Editing your last message: Enter regenerates, Esc cancels");
    else
        snprintf(buf, sizeof buf, "Ready");
    if (ui_statusline_set_state(&a->screen.status, buf, busy))
        ui_screen_dirty(&a->screen, UI_SLOT_STATUS);
}

/* The chat's rule names the template and the file the conversation goes to. */
static void show_label(ui_app *a)
{
    const ui_session *s = a->session;
    char label[PATH_MAX + 64];
    const char *path = ui_session_autosave_path(s);
    const char *file = path[0] ? strrchr(path, '/') : NULL;
    int n = snprintf(label, sizeof label, " %s%s", tmpl_name(ui_session_template(s)),
                     ui_session_thinking(s) ? ", thinking" : "");
    if (n > 0 && (size_t)n < sizeof label)
        snprintf(label + n, sizeof label - (size_t)n, "%s%s ", file ? " | " : "", file ? file + 1 : "");
    ui_screen_set_label(&a->screen, label);
}

static void apply(ui_app *a, unsigned changed)
{
    ui_screen *scr = &a->screen;
    ui_session *s = a->session;
    if (changed & UI_CHANGED_CONVERSATION) {
        ui_chatview_messages_changed(&scr->view);
        ui_screen_dirty(scr, UI_SLOT_CHAT);
    }
    if (changed & UI_CHANGED_LIVE)
        show_live(a);
    if (changed & UI_CHANGED_STATS) {
        const dec_stats *st = ui_session_stats(s);
        if (st)
            ui_sidepane_update(&scr->pane, st, ui_session_busy(s) && st->decode_tps > 0);
        ui_screen_dirty(scr, UI_SLOT_PANE);
    }
    if (changed & UI_CHANGED_PREFILL) {
        ui_sidepane_add_prefill(&scr->pane, ui_session_prefill_tps(s));
        ui_screen_dirty(scr, UI_SLOT_PANE);
    }
    if (changed & UI_CHANGED_ENGINE)
        show_engine(a);
    if (changed & (UI_CHANGED_STATS | UI_CHANGED_ENGINE | UI_CHANGED_CONVERSATION)) {
        size_t dropped;
        uint32_t n_ctx = ui_session_n_ctx(s, &dropped, NULL);
        if (ui_sidepane_set_context(&scr->pane, n_ctx, dropped))
            ui_screen_dirty(scr, UI_SLOT_PANE);
    }
    if (changed & UI_CHANGED_THEME) {
        theme_apply(&a->th);
        clearok(curscr, TRUE);
        ui_screen_dirty_all(scr);
    }
    if (changed & UI_CHANGED_LAYOUT)
        ui_screen_relayout(scr);
    if (changed & UI_QUIT)
        request_quit(a);
    if (changed & UI_QUIT_NOW)
        a->quit = true;
    /* Cheap, and drawn only when they differ. */
    show_state(a);
    show_label(a);
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void handle_signal(ui_app *a, int sig)
{
    switch (sig) {
    case SIGWINCH:
        ui_term_resize();
        ui_screen_relayout(&a->screen);
        break;
    case SIGINT:
        apply(a, ui_keys_ctrl_c(&a->keys));
        break;
    case SIGCONT:
        clearok(curscr, TRUE);
        ui_screen_dirty_all(&a->screen);
        break;
    default: /* SIGTERM, SIGHUP: leave cleanly, saving */
        a->quit = true;
        a->exit_code = 128 + sig;
        break;
    }
}

static int loop_timeout(ui_app *a, double now)
{
    double t = 1.0;
    if (ui_screen_pending(&a->screen))
        t = a->screen.last_draw + FRAME_S - now;
    if ((ui_session_busy(a->session) || !ui_session_ready(a->session)) && t > STATS_S)
        t = STATS_S;
    double esc = ui_keys_wait_s(&a->keys, now); /* a lone Esc waits for its key */
    if (esc >= 0 && esc < t)
        t = esc + 0.005;
    double until = ui_statusline_until(&a->screen.status);
    if (until > now && until - now < t)
        t = until - now + 0.01;
    return t <= 0 ? 0 : (int)(t * 1000) + 1;
}

static void run_loop(ui_app *a)
{
    while (!a->quit) {
        double now = ui_term_now();
        struct pollfd fds[3] = {{STDIN_FILENO, POLLIN, 0}, {ui_term_signal_fd(), POLLIN, 0},
                                {ui_session_fd(a->session), POLLIN, 0}};
        int n = poll(fds, 3, loop_timeout(a, now));
        if (n < 0 && errno != EINTR)
            break;
        int sig;
        while ((sig = ui_term_next_signal()) != 0)
            handle_signal(a, sig);
        if (fds[0].revents & (POLLHUP | POLLERR)) {
            a->quit = true; /* the terminal went away */
            a->exit_code = 129;
        }
        WINDOW *w;
        wint_t ch;
        int r;
        while (!a->quit && (w = ui_screen_input_window(&a->screen)) && (r = wget_wch(w, &ch)) != ERR)
            apply(a, ui_keys_handle(&a->keys, r, ch));
        apply(a, ui_session_pump(a->session));
        now = ui_term_now();
        apply(a, ui_keys_tick(&a->keys, now));
        if (now - a->last_stats >= STATS_S) {
            a->last_stats = now;
            apply(a, ui_session_poll_stats(a->session));
        }
        if (ui_statusline_expire(&a->screen.status, now))
            ui_screen_dirty(&a->screen, UI_SLOT_STATUS);
        if (ui_screen_pending(&a->screen) && now - a->screen.last_draw >= FRAME_S)
            ui_screen_draw(&a->screen);
    }
}

static void start(ui_app *a)
{
    const ui_session_config *sc = &a->c.session;
    const conversation *conv = ui_session_conv(a->session);
    show_model(a);
    ui_sidepane_set_backend(&a->screen.pane, ui_session_backend(a->session));
    if (sc->demo_note)
        ui_note(&a->fe, UI_INFO, "%s", sc->demo_note);
    if (sc->pick_note) {
        ui_note(&a->fe, UI_INFO, "%s", sc->pick_note);
        ui_status(&a->fe, UI_INFO, "%s", sc->pick_note);
    }
    if (sc->backend_note)
        ui_note(&a->fe, UI_INFO, "%s", sc->backend_note);
    if (sc->conversation_file && conv->n)
        ui_note(&a->fe, UI_INFO, "Continuing %s (%zu messages); new turns are saved into it.",
                ui_session_autosave_path(a->session), conv->n);
    ui_note(&a->fe, UI_INFO, "Type a message and press Enter. F1 or /help lists the commands.");
    apply(a, ui_session_start(a->session));
}

int ui_app_run(const ui_app_config *config)
{
    /* A terminal that cannot place the cursor gets lines, not a blank
     * screen and escape sequences it shows as garbage (issue 16.6, 17.11). */
    char why[128];
    if (!ui_term_can_address(why, sizeof why))
        return ui_linemode_run(config, why);
    ui_app *a = calloc(1, sizeof *a);
    if (!a) {
        fputs("glmchat: out of memory\n", stderr);
        return 1;
    }
    a->c = *config;
    a->th = config->th;
    a->fe = (ui_frontend){.user = a,
                          .note = fe_note,
                          .status = fe_status,
                          .set_input = fe_set_input,
                          .restore_input = fe_restore_input,
                          .new_conversation = fe_new_conversation,
                          .replay_turn = fe_replay_turn,
                          .write_terminal = fe_write_terminal};
    a->session = ui_session_new(&config->session, &a->fe);
    if (!a->session) {
        fputs("glmchat: out of memory\n", stderr);
        free(a);
        return 1;
    }
    const settings *cfg = ui_session_settings(a->session);
    int want_pane = cfg->side_pane == SETTINGS_PANE_AUTO ? -1 : cfg->side_pane == SETTINGS_PANE_ON;
    ui_screen_init(&a->screen, ui_session_conv(a->session), want_pane, cfg->side_width);
    a->commands = (chatcmd_ctx){.session = a->session, .fe = &a->fe, .theme = &a->th};
    ui_keys_init(&a->keys, a->session, &a->screen, &a->commands, &a->fe);
    /* Readline first: its set-up calls tgetent(), which would replace the
     * terminal description curses works with (both use libtinfo). */
    ui_input_init(config->history_path, ui_keys_on_line, ui_keys_on_matches, &a->keys);
    rl_attempted_completion_function = chatcmd_complete;
    err_t err;
    int code = 1;
    if (ui_term_start(cfg->mouse, &err) != 0) {
        chat_error("%s", err.msg);
        ui_input_shutdown();
        goto out;
    }
    apply(a, UI_CHANGED_THEME);
    start(a);
    ui_screen_draw(&a->screen);
    run_loop(a);
    ui_session_wind_down(a->session);
    ui_input_shutdown();
    ui_term_restore();
    code = a->exit_code;
    const char *saved = ui_session_saved_path(a->session);
    if (saved) {
        sbuf name = {0}; /* a file name: from a directory listing (--resume), inert */
        tsafe_one_line(&name, saved, strlen(saved));
        printf("glmchat: conversation saved in %s\n", sbuf_str(&name));
        sbuf_free(&name);
    } else if (ui_session_unsaved(a->session)) {
        chat_error("the conversation could not be saved");
        code = code ? code : 1;
    }
out:
    ui_keys_free(&a->keys);
    ui_screen_free(&a->screen);
    ui_session_free(a->session);
    free(a);
    return code;
}
