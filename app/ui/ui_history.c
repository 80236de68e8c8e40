/* ui_history.c: reading, appending and trimming the input history file. */
#include "ui_history.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat/conversation.h"
#include "base/file_read.h"
#include "base/sbuf.h"

/* ---- parsing ------------------------------------------------------------------------ */

/* "#" and 1..20 digits: readline's timestamp line. */
static bool is_timestamp(const char *s, size_t n)
{
    if (n < 2 || n > 21 || s[0] != '#')
        return false;
    for (size_t i = 1; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static void push(ui_history *h, char *entry)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        char **v = realloc(h->v, cap * sizeof *v);
        if (!v) {
            fputs("glmchat: out of memory\n", stderr);
            abort();
        }
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = entry;
}

/* Ends the entry being gathered: trailing blank lines go, an empty one is dropped. */
static void finish(ui_history *h, sbuf *e)
{
    while (e->len && e->s[e->len - 1] == '\n')
        e->len--;
    if (e->len) {
        e->s[e->len] = 0;
        push(h, sbuf_take(e));
    }
    sbuf_clear(e);
}

void ui_history_parse(ui_history *h, const char *text, size_t n)
{
    memset(h, 0, sizeof *h);
    sbuf e = {0};
    bool stamped = false; /* inside an entry that began with a timestamp */
    size_t pos = 0;
    while (pos < n) {
        const char *nl = memchr(text + pos, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - (text + pos)) : n - pos;
        const char *line = text + pos;
        pos += len + (nl ? 1 : 0);
        if (len && line[len - 1] == '\r')
            len--;
        if (is_timestamp(line, len)) {
            finish(h, &e);
            stamped = true;
            continue;
        }
        if (!stamped) {
            /* Before any timestamp: a line is an entry (files of earlier versions). */
            sbuf_add(&e, line, len);
            finish(h, &e);
            continue;
        }
        if (len && line[0] == '\\')
            line++, len--; /* escaped on writing (see append) */
        if (e.len || len)
            sbuf_add(&e, line, len);
        sbuf_addc(&e, '\n');
        /* A blank first line is not kept: the entry starts at its text. */
        if (e.len == 1)
            e.len = 0;
    }
    finish(h, &e);
    sbuf_free(&e);
}

void ui_history_free(ui_history *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i]);
    free(h->v);
    memset(h, 0, sizeof *h);
}

/* ---- writing ------------------------------------------------------------------------------ */

/* One entry as it goes into the file: its timestamp line, then its lines. */
static void format_entry(sbuf *out, const char *entry, long long when)
{
    sbuf_printf(out, "#%lld\n", when);
    const char *p = entry;
    for (;;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if ((len && p[0] == '\\') || is_timestamp(p, len))
            sbuf_addc(out, '\\');
        sbuf_add(out, p, len);
        sbuf_addc(out, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
}

char *ui_history_format(const ui_history *h, size_t first)
{
    sbuf out = {0};
    long long now = (long long)time(NULL);
    for (size_t i = first; i < h->n; i++)
        format_entry(&out, h->v[i], now);
    return sbuf_take(&out);
}

int ui_history_append(const char *path, const char *entry, err_t *err)
{
    sbuf b = {0};
    format_entry(&b, entry, (long long)time(NULL));
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        sbuf_free(&b);
        return err_set(err, "%s: %s", path, strerror(errno));
    }
    /* One write: entries of two sessions appending at once stay whole. */
    ssize_t w = write(fd, b.s, b.len);
    int saved = errno;
    int rc = 0;
    if (w != (ssize_t)b.len)
        rc = err_set(err, "%s: %s", path, w < 0 ? strerror(saved) : "short write");
    if (close(fd) != 0 && rc == 0)
        rc = err_set(err, "%s: %s", path, strerror(errno));
    sbuf_free(&b);
    return rc;
}

/* ---- reading -------------------------------------------------------------------------------- */

/* The file's last UI_HISTORY_MAX_BYTES; *text NULL when there is no file. */
static int read_tail(const char *path, char **text, size_t *n, err_t *err)
{
    char *buf;
    size_t got;
    uint64_t start;
    if (file_read_tail(path, UI_HISTORY_MAX_BYTES, &buf, &got, &start, err) != 0) {
        *text = NULL;
        *n = 0;
        return errno == ENOENT ? 0 : -1;
    }
    size_t skip = 0;
    if (start > 0) {
        /* Cut in the middle of a line: start at the next one. */
        const char *nl = memchr(buf, '\n', got);
        skip = nl ? (size_t)(nl - buf) + 1 : got;
    }
    memmove(buf, buf + skip, got - skip);
    *n = got - skip;
    buf[*n] = 0;
    *text = buf;
    return 0;
}

int ui_history_load(ui_history *h, const char *path, size_t keep, err_t *err)
{
    memset(h, 0, sizeof *h);
    char *text;
    size_t n;
    if (read_tail(path, &text, &n, err) != 0)
        return -1;
    if (!text)
        return 0;
    ui_history_parse(h, text, n);
    free(text);
    if (keep && h->n > keep) {
        size_t first = h->n - keep;
        char *kept = ui_history_format(h, first);
        int rc = conv_write_atomic(path, kept, strlen(kept), 0600, err);
        free(kept);
        for (size_t i = 0; i < first; i++)
            free(h->v[i]);
        memmove(h->v, h->v + first, keep * sizeof *h->v);
        h->n = keep;
        if (rc != 0)
            return -1;
    }
    return 0;
}
