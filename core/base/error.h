/* error.h: one error type for the whole project.
 *
 * Functions that can fail take an `err_t *` and return -1 (or NULL) after
 * filling it with one human-readable line that carries its context (file,
 * byte offset, tensor name, the value seen, what was expected).  The line
 * travels up to one place (main, or the UI) that prints it; nothing below
 * main calls exit(). */
#ifndef GLM_ERROR_H
#define GLM_ERROR_H

#include <stddef.h>

typedef struct {
    char msg[1024];
} err_t;

/* Formats the message into `e` (when e is non-NULL) and returns -1, so a
 * failure path reads `return err_set(err, "...", ...);`. */
int err_set(err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to an existing message (adds context on the way up). */
int err_prefix(err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
