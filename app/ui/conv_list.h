/* conv_list.h: the saved conversations of a directory (the autosave
 * directory, paths_dir(PATHS_DATA, "conversations")), most recent first,
 * for /list, /resume N and `glmchat --resume`.
 *
 * It lives in app/ and not core/ because a title is cut to a width in
 * terminal cells, which only app/ui_text knows how to count.
 *
 * Promises:
 *  - Read-only and untrusting: each file is parsed with conv_parse() (the
 *    conversation module's own parser); one that fails is listed as
 *    unreadable with the reason (or left out, as asked), never a crash.
 *    Files are opened without blocking (a FIFO named x.json cannot hang the
 *    listing) and must be regular files.
 *  - Bounded: at most CONVLIST_MAX_SCAN directory entries are looked at and
 *    at most max_files files (the most recently modified) are read; the
 *    count of those left unread is reported.
 *  - Only "*.json" names not starting with '.' count (conv_save's temporary
 *    files are hidden ones).
 *  - Text fields are safe to print: titles and model names are sanitized,
 *    one line, with whitespace runs folded to one space; a title is at most
 *    title_width cells, ending in "…" ("..." with ascii) when cut. */
#ifndef GLM_CONV_LIST_H
#define GLM_CONV_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/sbuf.h"

#define CONVLIST_MAX_SCAN 10000
#define CONVLIST_DEFAULT_FILES 100

typedef struct {
    char *path;         /* dir/name */
    char *name;         /* the file name */
    bool readable;
    char *error;        /* !readable: why, one line */
    char *title;        /* the first user message, or "(no user message)" */
    char *model;        /* the model's name (or its file's base name); NULL when not saved */
    double when;        /* unix time of its last message, else the file's mtime */
    double mtime;
    size_t n_turns;     /* user messages */
    size_t n_messages;
    uint64_t size;      /* file bytes */
} convlist_entry;

typedef struct {
    convlist_entry *v;  /* most recent first */
    size_t n;
    size_t n_unread;    /* *.json files beyond max_files, not read */
    size_t n_unreadable;/* files that failed (listed or not, see include_unreadable) */
} convlist;

typedef struct {
    size_t max_files;       /* 0: CONVLIST_DEFAULT_FILES */
    int title_width;        /* cells; < 4 counts as 4 */
    bool include_unreadable;
    bool ascii;             /* "..." instead of "…" */
} convlist_opts;

/* Lists dir into *out (initialised here).  A directory that does not exist
 * is an empty list; -1 + err only when dir cannot be read as a directory. */
int convlist_scan(const char *dir, const convlist_opts *opts, convlist *out, err_t *err);
void convlist_free(convlist *l);

/* The entry the user means by arg: its number in the list (1-based) or its
 * file name (with or without ".json"); NULL + err when there is none or it
 * cannot be read. */
const convlist_entry *convlist_pick(const convlist *l, const char *arg, err_t *err);

/* One line for entry number `number`:
 *   " 3  2025-01-31 14:02  glm-4.7-flash  5 turns  How do I ..."
 *   " 4  2025-01-30 09:12  unreadable: x.json: not valid JSON: ..."
 * (local time), appended to out. */
void convlist_format(const convlist_entry *e, size_t number, sbuf *out);

#endif
