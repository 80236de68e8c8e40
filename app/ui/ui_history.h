/* ui_history.h: the input history file ($XDG_STATE_HOME/glmchat/history),
 * kept across sessions, multi-line entries included.
 *
 * The file is readline's history format with timestamps: each entry is a
 * "#SECONDS" line followed by the entry's lines, so an entry may span
 * lines.  (readline writes no timestamp lines unless history_comment_char
 * is set, which glmchat never did: files of earlier versions hold one line
 * per entry, and readline read them back as one entry of every line.)
 *
 * Promises:
 *  - Reading: a line that is '#' and digits only starts an entry; the lines
 *    before the first such line (a file of earlier versions, or the end of
 *    one that was cut) are one entry each, so an old file loads as its
 *    lines and never as one joined entry.  Blank lines inside an entry are
 *    kept, blank lines at its end and empty entries are not.
 *  - An entry line that would read as a timestamp (or starts with '\') is
 *    written with a '\' in front, which reading takes away again.
 *  - Appending is one write() with O_APPEND, so two sessions appending at
 *    once do not interleave entries; the file is created 0600.
 *  - Only a regular file is read (a FIFO cannot hang start-up), at most the
 *    last UI_HISTORY_MAX_BYTES of it. */
#ifndef GLM_UI_HISTORY_H
#define GLM_UI_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

#define UI_HISTORY_MAX_ENTRIES 2000
#define UI_HISTORY_MAX_BYTES (4u << 20)

typedef struct {
    char **v;   /* oldest first, malloc'd */
    size_t n, cap;
} ui_history;

/* Parses history file text into h (initialised here). */
void ui_history_parse(ui_history *h, const char *text, size_t n);
void ui_history_free(ui_history *h);

/* Reads path into h (initialised here); a missing file is an empty history.
 * When it holds more than `keep` entries, the file is rewritten with the
 * last `keep` (and h holds those).  -1 + err when it cannot be read. */
int ui_history_load(ui_history *h, const char *path, size_t keep, err_t *err);
/* Appends one entry (with the current time) to path. */
int ui_history_append(const char *path, const char *entry, err_t *err);
/* The file text of h's entries, for tests and rewriting (malloc'd). */
char *ui_history_format(const ui_history *h, size_t first);

#endif
