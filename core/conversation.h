/* conversation.h: chat conversations and their JSON files.
 *
 * The file (format version 1) is one JSON object:
 *   {"format": "glmchat-conversation", "version": 1, "created": ISO-8601,
 *    "model": {"path", "name", "size", "fingerprint"},
 *    "template": NAME, "thinking": bool,
 *    "sampling": {"temperature", "top_k", "top_p", "min_p", "seed", "n_predict"},
 *                 (seed: a number below 2^63, else its unsigned decimal as a string)
 *    "messages": [{"role", "content", "reasoning_content"?}, ...],   (OpenAI style)
 *    "turns": [{"message": INDEX, "time": ISO-8601, "tokens", "tokens_per_second",
 *               "prefill_tokens_per_second", "stopped"}, ...]}
 * A file holding only {"messages": [...]} (as other tools write) loads too;
 * content may also be null or an array of {"type": "text", "text"} parts.
 *
 * Promises: conv_load() treats the file as untrusted and fails with one line
 * naming the file and what is wrong (JSON line/column, the field, the
 * version); conv_save() is atomic (temporary file, fsync, rename, fsync of
 * the directory), so a crash leaves the old or the new file, never a mix,
 * and it refuses to replace an existing file that is not a conversation. */
#ifndef GLM_CONVERSATION_H
#define GLM_CONVERSATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "sbuf.h"

#define CONV_FORMAT_VERSION 1

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
} conv_msg;

typedef struct {
    bool set;
    double temp, top_p, min_p;
    int top_k;
    uint64_t seed;
    int n_predict;
} conv_sampling;

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
} conversation;

void conv_init(conversation *c);
void conv_free(conversation *c);
/* Removes every message (metadata stays). */
void conv_clear(conversation *c);
/* Appends a message (copies the strings; invalid UTF-8 becomes U+FFFD) and
 * returns it. reasoning may be NULL. */
conv_msg *conv_add(conversation *c, const char *role, const char *content, const char *reasoning);
/* Drops messages n.. (n <= c->n). */
void conv_truncate(conversation *c, size_t n);
/* Replaces the system prompt (the first message when it is a system one);
 * an empty text removes it. */
void conv_set_system(conversation *c, const char *text);
/* Sets a string metadata field (frees the old value; NULL clears). */
void conv_set_str(char **field, const char *value);
/* Index of the last message with `role`, -1 if none. */
long conv_last(const conversation *c, const char *role);

/* Loads path into c (which is initialised here).  On failure c is empty. */
int conv_load(conversation *c, const char *path, err_t *err);
/* Parses JSON text (name is used in errors). */
int conv_parse(conversation *c, const char *json, size_t len, const char *name, err_t *err);
/* The JSON text of c (malloc'd). */
char *conv_to_json(const conversation *c);
/* Writes c to path atomically.  When the file exists it must parse as a
 * conversation (else an error and the file is left alone). */
int conv_save(const conversation *c, const char *path, err_t *err);

/* Atomic write of any bytes (temporary file in the same directory, fsync,
 * rename, fsync the directory).  mode for a new file; an existing file keeps
 * its mode. */
int conv_write_atomic(const char *path, const void *data, size_t len, unsigned mode, err_t *err);
/* Removes temporary files left in dir by writers that died (kill -9). */
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
