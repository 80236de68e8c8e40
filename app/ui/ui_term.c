/* ui_term.c: curses start-up, restore on every exit path, signals. */
#include "ui_term.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <term.h>
#include <unistd.h>

/* Turns off what we turned on, without curses (async-signal-safe). */
#define RESET_SEQ "\033[?2004l\033[?1000l\033[?1002l\033[?1006l\033[0m\033[?25h"

static volatile sig_atomic_t active;
static struct termios saved_tio;
static bool have_tio;
static char rmcup[64]; /* leave the alternate screen, copied from terminfo */
static int sig_pipe[2] = {-1, -1};
static SCREEN *screen;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static struct sigaction old_fatal[sizeof fatal_signals / sizeof fatal_signals[0]];
static const int event_signals[] = {SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGCONT};

static void write_str(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w <= 0 && errno != EINTR)
            return;
        if (w > 0)
            s += w, n -= (size_t)w;
    }
}

static void on_fatal(int sig)
{
    if (active) {
        active = 0;
        if (have_tio)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
        write_str(rmcup);
        write_str(RESET_SEQ);
        write_str("\r\n");
    }
    /* Hand the signal to whoever had it before (the default action, or a
     * sanitizer's report). */
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        if (fatal_signals[i] == sig)
            sigaction(sig, &old_fatal[i], NULL);
    raise(sig);
}

static void on_event(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    if (sig_pipe[1] >= 0 && write(sig_pipe[1], &c, 1) < 0) {
        /* A full pipe already holds a wake-up; nothing to do. */
    }
    errno = saved;
}

static int install_signals(err_t *err)
{
    if (sig_pipe[0] < 0) {
        if (pipe(sig_pipe) != 0)
            return err_set(err, "pipe: %s", strerror(errno));
        for (int i = 0; i < 2; i++) {
            fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
            fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_event;
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof event_signals / sizeof event_signals[0]; i++)
        if (sigaction(event_signals[i], &sa, NULL) != 0)
            return err_set(err, "sigaction: %s", strerror(errno));
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_NODEFER;
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        if (sigaction(fatal_signals[i], &sa, &old_fatal[i]) != 0)
            return err_set(err, "sigaction: %s", strerror(errno));
    return 0;
}

void ui_term_restore(void)
{
    if (!active)
        return;
    active = 0;
    mousemask(0, NULL);
    endwin();
    write_str(RESET_SEQ);
    if (have_tio)
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
}

bool ui_term_active(void)
{
    return active != 0;
}

static void at_exit(void)
{
    ui_term_restore();
    if (screen) {
        delscreen(screen);
        screen = NULL;
    }
}

int ui_term_start(bool mouse, err_t *err)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return err_set(err, "the chat needs a terminal (for one answer without one, use -p TEXT)");
    if (tcgetattr(STDIN_FILENO, &saved_tio) == 0)
        have_tio = true;
    if (install_signals(err) != 0)
        return -1;
    const char *term = getenv("TERM");
    screen = newterm(NULL, stdout, stdin);
    if (!screen)
        return err_set(err, "cannot use the terminal type '%s' (check $TERM)", term ? term : "(unset)");
    set_term(screen);
    active = 1;
    atexit(at_exit);
    const char *rm = tigetstr("rmcup");
    if (rm && rm != (char *)-1 && strlen(rm) < sizeof rmcup)
        strcpy(rmcup, rm);
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    if (has_colors()) {
        start_color();
        use_default_colors();
    }
    if (mouse)
        mousemask(BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
    define_key("\033[200~", UI_KEY_PASTE_BEGIN);
    define_key("\033[201~", UI_KEY_PASTE_END);
    /* Bracketed paste: a multi-line paste arrives as one piece (sent after
     * curses has set up the screen, and undone by RESET_SEQ). */
    fflush(stdout);
    write_str("\033[?2004h");
    return 0;
}

bool ui_term_can_address(char *why, size_t cap)
{
    const char *term = getenv("TERM");
    int status = 0;
    why[0] = 0;
    if (!term || !term[0]) {
        snprintf(why, cap, "TERM is not set");
        return false;
    }
    /* Asked of terminfo apart from curses (del_curterm after): nothing is
     * sent to the terminal, and readline and newterm start afresh. */
    if (setupterm(NULL, STDOUT_FILENO, &status) != OK) {
        snprintf(why, cap, "the terminal type '%.40s' is unknown", term);
        return false;
    }
    const char *cup = tigetstr("cup");
    bool ok = cup && cup != (char *)-1;
    del_curterm(cur_term);
    if (!ok)
        snprintf(why, cap, "the terminal type '%.40s' cannot place the cursor", term);
    return ok;
}

int ui_term_start_lines(err_t *err)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return err_set(err, "the chat needs a terminal (for one answer without one, use -p TEXT)");
    return install_signals(err);
}

int ui_term_signal_fd(void)
{
    return sig_pipe[0];
}

int ui_term_next_signal(void)
{
    unsigned char c;
    ssize_t n = read(sig_pipe[0], &c, 1);
    return n == 1 ? c : 0;
}

void ui_term_resize(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
        resize_term(ws.ws_row, ws.ws_col);
}

double ui_term_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
