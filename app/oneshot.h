/* oneshot.h: `glmchat -p TEXT`: one answer, as plain text on stdout.
 *
 * Promises: the prompt is TEXT, or standard input for `-p -`; piped (not a
 * terminal) standard input with `-p TEXT` is appended after TEXT and a blank
 * line.  With -C FILE the run holds FILE's writers' lock from reading it to
 * saving the new turn, so parallel runs on one file queue up and every turn
 * is kept, and the answer follows FILE's recorded sampling settings (seed,
 * penalties, ...) except those the command line gives.  SIGINT, SIGTERM, SIGHUP and SIGPIPE stop the answer; what was
 * generated is saved (with -C) and the exit status is 128 + the signal.  A
 * failed write to stdout (a full disk, a closed pipe) stops the answer with a
 * one-line error and status 1 (141 for SIGPIPE). */
#ifndef GLM_ONESHOT_H
#define GLM_ONESHOT_H

#include "chat_setup.h"

/* Runs -p with the parsed options; returns the exit status. */
int oneshot_run(const chat_args *a);

#endif
