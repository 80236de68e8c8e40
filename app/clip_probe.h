/* clip_probe.h: whether a clipboard request (OSC 52) from a program gets
 * through the terminal multiplexer it runs in.  A request tmux drops is
 * silent: without asking, /copy would report a copy that never happened.
 *
 * Promises:
 *  - outside tmux ($TMUX unset) nothing runs and the answer is "unknown";
 *  - inside tmux one `tmux display-message -p` runs (the tmux in $PATH, on
 *    the server $TMUX names), its stdin and stderr on /dev/null, its output
 *    read through a pipe for at most a second (then it is killed): it
 *    never touches the terminal and never hangs the UI;
 *  - the reasons are one line, with the command that lets requests through. */
#ifndef GLM_CLIP_PROBE_H
#define GLM_CLIP_PROBE_H

#include <stddef.h>

typedef enum {
    CLIP_PASS_UNKNOWN, /* not in tmux, or tmux could not be asked */
    CLIP_PASS_YES,     /* set-clipboard on, or passthrough allowed */
    CLIP_PASS_NO,      /* tmux drops the request: nothing is copied */
} clip_pass;

/* What tmux's settings say, from its answer to
 * "#{set-clipboard} #{allow-passthrough}" ("external 0", "on 1", ...);
 * why (when not NULL) gets the reason for CLIP_PASS_NO. */
clip_pass clip_tmux_verdict(const char *answer, char *why, size_t cap);
/* Asks the tmux this process runs in (see the promises). */
clip_pass clip_probe_tmux(char *why, size_t cap);

#endif
