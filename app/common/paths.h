/* paths.h: the XDG base directories glmchat uses, and small file helpers.
 *
 *   config  $XDG_CONFIG_HOME/glmchat   (~/.config/glmchat)      settings, themes/
 *   data    $XDG_DATA_HOME/glmchat     (~/.local/share/glmchat) conversations/, models/
 *   state   $XDG_STATE_HOME/glmchat    (~/.local/state/glmchat) history
 *
 * A relative XDG_* value is ignored, as the XDG spec requires. */
#ifndef GLM_PATHS_H
#define GLM_PATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef enum { PATHS_CONFIG, PATHS_DATA, PATHS_STATE } paths_kind;

/* Writes the glmchat directory of `kind` (plus "/sub" when sub is non-NULL)
 * into buf.  -1 + err when HOME is unset too or the path is too long. */
int paths_dir(paths_kind kind, const char *sub, char *buf, size_t cap, err_t *err);
/* Creates a directory and its parents (mode 0700 for the ones it makes). */
int paths_mkdir_p(const char *dir, err_t *err);
/* paths_dir + paths_mkdir_p. */
int paths_ensure_dir(paths_kind kind, const char *sub, char *buf, size_t cap, err_t *err);
/* Directory of the running executable (for themes installed beside it). */
int paths_exe_dir(char *buf, size_t cap);
bool paths_is_file(const char *path);
/* "~/..." expanded with $HOME into buf; other paths copied. */
int paths_expand_user(const char *path, char *buf, size_t cap, err_t *err);

#endif
