/* oneshot.h: `glmchat -p TEXT`: one answer, as plain text on stdout.
 *
 * Promises: the prompt is TEXT, or standard input for `-p -`; piped (not a
 * terminal) standard input with `-p TEXT` is appended after TEXT and a blank
 * line.  With -C FILE the run holds FILE's writers' lock from reading it to
 * saving the new turn, so parallel runs on one file queue up and every turn
 * is kept, and the answer follows FILE's recorded sampling settings (seed,
 * penalties, ...) except those the command line gives.  A conversation
 * longer than the context is answered from a prompt without its oldest
 * exchanges (a note on stderr), or refused with --context-overflow stop.
 * SIGINT, SIGTERM, SIGHUP and SIGPIPE stop the answer; what was generated
 * is saved (with -C) and the exit status is 128 + the signal; before the
 * answer starts (the lock, the model's load) they end the run at once,
 * removing the lock file.  A
 * failed write to stdout (a full disk, a closed pipe) stops the answer with a
 * one-line error and status 1 (141 for SIGPIPE). */
#ifndef GLM_ONESHOT_H
#define GLM_ONESHOT_H

#include "chat_setup.h"

/* Runs -p with the parsed options; returns the exit status. */
int oneshot_run(const chat_args *a);
/* The answer part of -p: conv (moved in, left empty) plus the prompt,
 * answered by cm's backend and saved to a->conversation when given (the
 * caller holds its lock).  The prompt is cut to the context as the
 * context-overflow setting says; a failure mid-answer keeps what was said,
 * marked with why (conv_set_error), so the file stays consistent.  Returns
 * the exit status.  (oneshot_run's second half; tests call it with a
 * backend of their own.) */
int oneshot_answer(const chat_args *a, chat_model *cm, conversation *conv, const char *prompt);

#endif
