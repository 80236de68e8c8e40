/* clip_probe.c: asking tmux whether OSC 52 from a program gets through it. */
#include "clip_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROBE_MS 1000

clip_pass clip_tmux_verdict(const char *answer, char *why, size_t cap)
{
    char clip[32] = "", pass[32] = "";
    if (sscanf(answer, "%31s %31s", clip, pass) < 1)
        return CLIP_PASS_UNKNOWN;
    /* set-clipboard on: tmux takes the plain request (a buffer, and the
     * terminal outside when it can); allow-passthrough (1, on, all): the
     * wrapped request reaches the terminal outside. */
    if (!strcmp(clip, "on") || !strcmp(pass, "1") || !strcmp(pass, "on") || !strcmp(pass, "all"))
        return CLIP_PASS_YES;
    if (why)
        snprintf(why, cap,
                 "tmux passes no clipboard request from programs on (set-clipboard %s, allow-passthrough %s): "
                 "`tmux set -g set-clipboard on` (or that line in ~/.tmux.conf) lets it through",
                 clip, !strcmp(pass, "0") || !pass[0] ? "off" : pass);
    return CLIP_PASS_NO;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Runs tmux with its stdout on a pipe; up to cap-1 bytes of its output
 * within PROBE_MS; -1 when it could not run or did not answer in time. */
static int ask_tmux(const char *pane, char *out, size_t cap)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"tmux", "display-message", "-p", "-t", (char *)pane, "#{set-clipboard} #{allow-passthrough}",
                    NULL};
    if (!pane[0]) {
        argv[3] = argv[5];
        argv[4] = NULL; /* no pane known: the current one */
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, "tmux", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return -1;
    }
    size_t n = 0;
    double end = now_ms() + PROBE_MS;
    bool eof = false;
    while (!eof && n + 1 < cap) {
        int left = (int)(end - now_ms());
        struct pollfd p = {fds[0], POLLIN, 0};
        int r = left > 0 ? poll(&p, 1, left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t got = read(fds[0], out + n, cap - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            eof = true;
        else
            n += (size_t)got;
    }
    close(fds[0]);
    out[n] = 0;
    int status = 0;
    if (!eof)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return eof && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

clip_pass clip_probe_tmux(char *why, size_t cap)
{
    const char *tmux = getenv("TMUX"), *pane = getenv("TMUX_PANE");
    if (!tmux || !tmux[0])
        return CLIP_PASS_UNKNOWN;
    char answer[128];
    if (ask_tmux(pane ? pane : "", answer, sizeof answer) != 0)
        return CLIP_PASS_UNKNOWN;
    return clip_tmux_verdict(answer, why, cap);
}
