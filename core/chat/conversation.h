/* conversation.h: chat conversations and their JSON files.
 *
 * The file (format version 1) is one JSON object:
 *   {"format": "glmchat-conversation", "version": 1, "created": ISO-8601,
 *    "model": {"path", "name", "size", "fingerprint"},
 *    "template": NAME, "thinking": bool,
 *    "sampling": {"temperature", "top_k", "top_p", "min_p", "repeat_penalty",
 *                 "presence_penalty", "frequency_penalty", "seed", "n_predict"},
 *                 (seed: a number below 2^63, else its unsigned decimal as a string;
 *                  a field left out or null was not recorded: see CONV_S_*)
 *    "messages": [{"role", "content", "reasoning_content"?}, ...],   (OpenAI style)
 *    "turns": [{"message": INDEX, "time": ISO-8601, "tokens", "tokens_per_second",
 *               "prefill_tokens_per_second", "stopped", "error"?, "seed"?}, ...]}
 *   ("error": an answer that failed -- a device error, a sampling failure --
 *    keeps what it said before, is "stopped", and says why here.
 *    "seed": the one its answer was sampled with, as sampling.seed;
 *    sampling.seed is the latest answer's)
 * A file holding only {"messages": [...]} (as other tools write) loads too;
 * content may also be null or an array of {"type": "text", "text"} parts.
 *
 * Promises: conv_load() treats the file as untrusted and fails with one line
 * naming the file and what is wrong (JSON line/column, the field, the
 * version); conv_save() is atomic (temporary file, fsync, rename, fsync of
 * the directory), so a crash leaves the old or the new file, never a mix,
 * and it refuses to replace an existing file that is not a conversation.
 * Concurrent writers (several glmchat processes on one file) never lose a
 * turn silently: saves over a file hold its writers' lock, and a save over a
 * file this conversation was read from or saved to refuses when the file
 * changed on disk since; new autosave files are created exclusively.
 * Files holding conversation text are created 0600. */
#ifndef GLM_CONVERSATION_H
#define GLM_CONVERSATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "sample/sampler.h"
#include "base/sbuf.h"

#define CONV_FORMAT_VERSION 1
/* The first bytes of every file conv_to_json() makes (the temporary files
 * of a save hold them too): what tells the clean-up a temporary is ours. */
#define CONV_FILE_HEAD "{\n  \"format\": \"glmchat-conversation\""

typedef struct {
    char *role;        /* system | user | assistant | tool */
    char *content;     /* never NULL */
    char *reasoning;   /* reasoning_content, NULL when none */
    /* Per-turn metadata (0 / false when unknown). */
    double time;       /* unix time the message was complete */
    uint32_t n_tokens; /* user: prompt tokens evaluated for the turn; assistant: generated */
    double tps;        /* assistant: decode tokens/s */
    double prefill_tps;/* assistant: prefill tokens/s of its prompt */
    bool stopped;      /* assistant: generation was stopped by the user */
    char *error;       /* assistant: why the answer failed (its text is what came
                          before the failure), NULL when it did not */
    bool has_seed;     /* assistant: the seed it was sampled with is known */
    uint64_t seed;     /* ... (each answer may have its own: /retry draws a new one) */
    char draw[16];     /* assistant: the sampler's draw it was sampled with (SAMPLER_DRAW), "" when the
                          file does not say (answers recorded before it did: SAMPLER_DRAW_BEFORE) */
} conv_msg;

/* Bits of conversation.sampling_missing: fields a file left out (or null).
 * Such a field holds its default (the penalties: 1, 0, 0, i.e. off; files
 * written before glmchat recorded them have none), and a replay or a -C
 * continuation takes the current setting for it instead. */
enum {
    CONV_S_TEMP = 1,
    CONV_S_TOP_K = 2,
    CONV_S_TOP_P = 4,
    CONV_S_MIN_P = 8,
    CONV_S_SEED = 16,
    CONV_S_N_PREDICT = 32,
    CONV_S_REPEAT_PENALTY = 64,
    CONV_S_PRESENCE_PENALTY = 128,
    CONV_S_FREQUENCY_PENALTY = 256,
};

/* The sampler settings a conversation was made with (sampler.h's, less the
 * penalty window, which is no setting: always the sampler's default). */
typedef struct {
    bool set;
    double temp, top_p, min_p;
    int top_k;
    double repeat_penalty;   /* 1: off */
    double presence_penalty; /* 0: off */
    double frequency_penalty;/* 0: off */
    uint64_t seed;
    int n_predict;
} conv_sampling;

/* The record of an answer's sampler settings (set = true). */
conv_sampling conv_sampling_of(const sampler_params *sp, int n_predict);

/* A file a conversation was read from or saved to, as it was then. */
typedef struct {
    char *path;
    bool exists;
    uint64_t dev, ino, size;
    int64_t mtime_ns;
} conv_file_state;

typedef struct {
    conv_msg *msgs;
    size_t n, cap;
    double created;     /* unix time */
    char *model_path;   /* metadata; NULL when unknown */
    char *model_name;
    char *model_fingerprint;
    uint64_t model_size;
    char *tmpl;
    int thinking;       /* 1, 0, or -1 unknown */
    conv_sampling sampling;
    unsigned sampling_missing; /* CONV_S_* the file did not record (set by conv_parse, for replays) */
    conv_file_state *files; /* what conv_load / the saves saw on disk (conv_store.c) */
    size_t n_files;
} conversation;

void conv_init(conversation *c);
void conv_free(conversation *c);
/* Removes every message (metadata stays). */
void conv_clear(conversation *c);
/* Appends a message (copies the strings; invalid UTF-8 becomes U+FFFD) and
 * returns it. reasoning may be NULL. */
conv_msg *conv_add(conversation *c, const char *role, const char *content, const char *reasoning);
/* Records that the answer m failed, and why (copied; NULL clears): the
 * answer is then stopped too. */
void conv_set_error(conv_msg *m, const char *why);
/* Records the seed the answer m was sampled with, and this glmchat's draw
 * (SAMPLER_DRAW) beside it: the two together say what a replay reproduces. */
void conv_set_seed(conv_msg *m, uint64_t seed);
/* The draw the answer m was sampled with: its record, or
 * SAMPLER_DRAW_BEFORE for answers recorded before glmchat recorded it. */
const char *conv_msg_draw(const conv_msg *m);
/* Drops messages n.. (n <= c->n). */
void conv_truncate(conversation *c, size_t n);
/* Replaces the system prompt (the first message when it is a system one);
 * an empty text removes it. */
void conv_set_system(conversation *c, const char *text);
/* Sets a string metadata field (frees the old value; NULL clears). */
void conv_set_str(char **field, const char *value);
/* Index of the last message with `role`, -1 if none. */
long conv_last(const conversation *c, const char *role);

/* Parses JSON text (name is used in errors). */
int conv_parse(conversation *c, const char *json, size_t len, const char *name, err_t *err);
/* The JSON text of c (malloc'd). */
char *conv_to_json(const conversation *c);

/* ---- files on disk (conv_store.c) ---- */

/* Loads path (a regular file of at most 256 MiB) into c, which is
 * initialised here, and remembers the file as it was.  On failure c is empty. */
int conv_load(conversation *c, const char *path, err_t *err);
/* Saving through a symbolic link (a conversation file linked from
 * elsewhere) writes the file the link leads to, as editors do: the lock,
 * the temporary file and the rename are the target's, in the target's
 * directory, and the link stays a link.  So writers through the link and
 * through the target take the same lock.  This holds for every writer
 * below (conv_save*, conv_lock_acquire, conv_write_*).
 *
 * Writes c to path atomically under the file's writers' lock (waiting a few
 * seconds at most for another writer).  When the file exists it must parse
 * as a conversation, and when c was read from or saved to path before, the
 * file must be as it was then (else an error and the file is left alone:
 * another glmchat or program wrote it meanwhile).  Temporary files of
 * earlier writers of path that died are removed. */
int conv_save(conversation *c, const char *path, err_t *err);
/* conv_save for a caller that holds path's lock (conv_lock_acquire). */
int conv_save_locked(conversation *c, const char *path, err_t *err);
/* Saves c as a new file in dir named after the local time
 * (2025-01-31_120000.json, else -2, -3 ...), created exclusively so two
 * writers in the same second never share a name; the name goes to path. */
int conv_save_new(conversation *c, const char *dir, char *path, size_t cap, err_t *err);
/* Forgets the files c was read from or saved to (a later save treats them
 * like any other file).  Only memory: defined in conversation.c, which
 * conv_free needs it in. */
void conv_forget_files(conversation *c);

/* The writers' lock of a conversation file: a hidden ".NAME.lock" beside
 * it (flock), removed again on release.  A writer holding it may run
 * load-modify-save without another glmchat writing the file in between.
 * The lock file holds "glmchat-lock", a newline, the holder's pid and a
 * newline: the clean-up removes no other file of that name. */
typedef struct {
    int fd;
    char *path;
} conv_lock;
/* wait_ms: 0 tries once, -1 waits as long as it takes (a signal ends the
 * wait with an error), else at most that long.  Returns 0 when locked, 1
 * when another process holds it (err names it, with its pid), -1 on error. */
int conv_lock_acquire(conv_lock *l, const char *path, int wait_ms, err_t *err);
void conv_lock_release(conv_lock *l);

/* Atomic write of any bytes (temporary file in the same directory, fsync,
 * rename, fsync the directory).  mode for a new file; an existing file keeps
 * its mode. */
int conv_write_atomic(const char *path, const void *data, size_t len, unsigned mode, err_t *err);
/* conv_write_atomic of user content under the file's lock, 0600 whether
 * the file is new or replaces one of another mode (for exports of a
 * conversation). */
int conv_write_private(const char *path, const void *data, size_t len, err_t *err);
/* Removes temporary and lock files left in dir by writers that died (kill -9):
 * only files glmchat made, known by their names and their first bytes (a
 * lock file's "glmchat-lock" line, a temporary's CONV_FILE_HEAD), never a
 * symlink, whatever else the directory (or the directory a symlinked dir
 * leads to) holds. */
void conv_cleanup_tmp(const char *dir);

/* The conversation as Markdown (for /export). */
void conv_to_markdown(const conversation *c, sbuf *out);

/* A cheap, strong fingerprint of a model file: "sha256:" + the SHA-256 of
 * (file size as 8 little-endian bytes, the first MiB, the last MiB). */
int conv_fingerprint(const char *path, char out[72], uint64_t *size, err_t *err);
/* Same over bytes in memory (the built-in demo model). */
void conv_fingerprint_mem(const void *data, uint64_t size, char out[72]);

/* ISO-8601 UTC with milliseconds ("2025-01-31T12:00:00.250Z"). */
void conv_format_time(double t, char *buf, size_t cap);
/* Parses conv_format_time's form (fraction optional); -1 if malformed. */
int conv_parse_time(const char *s, double *t);
/* Current unix time with sub-second precision. */
double conv_now(void);

#endif
