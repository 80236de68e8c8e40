/* conv_list.c: a directory of saved conversations -> entries, most recent first. */
#include "conv_list.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat/conversation.h"
#include "base/text_safe.h"
#include "common/ui_text.h"

#define MAX_FILE (256u << 20) /* conv_load()'s limit too: larger is no conversation of ours */
#define TITLE_BYTES 4096      /* of the first user message looked at for its title */
#define MODEL_WIDTH 48        /* cells of a model name kept */

typedef struct {
    char *name;
    double mtime;
    uint64_t size;
} candidate;

static char *dup_str(const char *s)
{
    char *d = strdup(s);
    if (!d)
        abort(); /* as sbuf: out of memory is not recoverable here */
    return d;
}

/* ---- one line of safe text ---------------------------------------------------------- */

static bool is_white(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* s folded to one line (whitespace runs -> one space, trimmed), sanitized,
 * cut to `width` cells with an ellipsis; malloc'd. */
static char *one_line(const char *s, int width, bool ascii)
{
    size_t n = strlen(s);
    if (n > TITLE_BYTES) {
        n = TITLE_BYTES;
        while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* not inside a character */
    }
    sbuf folded = {0}, safe = {0};
    bool space = false;
    for (size_t i = 0; i < n; i++) {
        if (is_white(s[i])) {
            space = folded.len > 0;
            continue;
        }
        if (space)
            sbuf_addc(&folded, ' ');
        space = false;
        sbuf_addc(&folded, s[i]);
    }
    tsafe_sanitize(&safe, sbuf_str(&folded), folded.len, false);
    sbuf_free(&folded);
    if (ui_text_width(sbuf_str(&safe), safe.len) <= width)
        return sbuf_take(&safe);
    const char *ellipsis = ascii ? "..." : "\xe2\x80\xa6";
    int room = width - (ascii ? 3 : 1), used = 0;
    size_t keep = 0;
    for (size_t p = 0; p < safe.len;) {
        uint32_t cp;
        size_t l = tsafe_decode(safe.s + p, safe.len - p, &cp);
        int w = ui_cp_width(cp);
        if (used + w > room)
            break;
        used += w;
        p += l;
        keep = p;
    }
    while (keep && safe.s[keep - 1] == ' ')
        keep--;
    safe.len = keep;
    safe.s[keep] = 0;
    sbuf_adds(&safe, ellipsis);
    return sbuf_take(&safe);
}

/* ---- reading one file ----------------------------------------------------------------- */

/* The file's bytes; opened without blocking, so a FIFO cannot hang us.
 * Errors name the file by `name` (the list shows the directory once). */
static int read_file(const char *path, const char *name, char **data, size_t *len, err_t *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, "%s: %s", name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(err, "%s: %s", name, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, "%s: not a regular file", name);
    }
    if ((uint64_t)st.st_size > MAX_FILE) {
        close(fd);
        return err_set(err, "%s: %lld bytes is too large for a conversation", name, (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return err_set(err, "%s: out of memory", name);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = errno;
            free(buf);
            close(fd);
            return err_set(err, "%s: read error: %s", name, r < 0 ? strerror(e) : "the file shrank");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    *data = buf;
    *len = got;
    return 0;
}

static void describe(convlist_entry *e, const conversation *c, const convlist_opts *o)
{
    long first_user = -1;
    double last = 0;
    for (size_t i = 0; i < c->n; i++) {
        const conv_msg *m = &c->msgs[i];
        if (!strcmp(m->role, "user")) {
            e->n_turns++;
            if (first_user < 0)
                first_user = (long)i;
        }
        if (m->time > last)
            last = m->time;
    }
    e->n_messages = c->n;
    int width = o->title_width < 4 ? 4 : o->title_width;
    e->title = first_user >= 0 ? one_line(c->msgs[first_user].content, width, o->ascii) : NULL;
    if (!e->title || !e->title[0]) {
        free(e->title);
        e->title = dup_str("(no user message)");
    }
    const char *model = c->model_name;
    if ((!model || !model[0]) && c->model_path && c->model_path[0]) {
        const char *slash = strrchr(c->model_path, '/');
        model = slash && slash[1] ? slash + 1 : c->model_path;
    }
    e->model = model && model[0] ? one_line(model, MODEL_WIDTH, o->ascii) : NULL;
    if (last > 0)
        e->when = last;
}

/* Fills e from its file; false (with e->error) when it cannot be read. */
static bool read_entry(convlist_entry *e, const convlist_opts *o)
{
    err_t err = {{0}};
    char *data = NULL;
    size_t len = 0;
    conversation c;
    conv_init(&c);
    bool ok = read_file(e->path, e->name, &data, &len, &err) == 0;
    if (ok) {
        conv_free(&c);
        ok = conv_parse(&c, data, len, e->name, &err) == 0;
    }
    free(data);
    if (ok) {
        e->readable = true;
        describe(e, &c, o);
    } else {
        sbuf line = {0};
        tsafe_one_line(&line, err.msg, strlen(err.msg));
        e->error = sbuf_take(&line);
    }
    conv_free(&c);
    return ok;
}

/* ---- the directory ---------------------------------------------------------------------- */

static int by_mtime(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->mtime != y->mtime)
        return x->mtime < y->mtime ? 1 : -1;
    return strcmp(y->name, x->name);
}

static int by_when(const void *a, const void *b)
{
    const convlist_entry *x = a, *y = b;
    if (x->when != y->when)
        return x->when < y->when ? 1 : -1;
    return strcmp(y->name, x->name);
}

static bool listed_name(const char *name)
{
    size_t len = strlen(name);
    return name[0] != '.' && len > 5 && !strcmp(name + len - 5, ".json");
}

/* The *.json regular files of d (at most CONVLIST_MAX_SCAN entries looked at). */
static int gather(DIR *d, const char *dir, candidate **out, size_t *n_out, err_t *err)
{
    candidate *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t seen = 0; seen < CONVLIST_MAX_SCAN; seen++) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno) {
                int e = errno;
                for (size_t i = 0; i < n; i++)
                    free(v[i].name);
                free(v);
                return err_set(err, "%s: cannot list the directory: %s", dir, strerror(e));
            }
            break;
        }
        struct stat st;
        if (!listed_name(de->d_name) || fstatat(dirfd(d), de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            candidate *g = realloc(v, cap * sizeof *g);
            if (!g)
                abort();
            v = g;
        }
        v[n++] = (candidate){dup_str(de->d_name), (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9,
                             (uint64_t)st.st_size};
    }
    *out = v;
    *n_out = n;
    return 0;
}

int convlist_scan(const char *dir, const convlist_opts *opts, convlist *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    convlist_opts o = opts ? *opts : (convlist_opts){0};
    if (!o.max_files)
        o.max_files = CONVLIST_DEFAULT_FILES;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0; /* nothing saved yet */
        return err_set(err, "%s: cannot list the directory: %s", dir, strerror(errno));
    }
    candidate *cand = NULL;
    size_t n_cand = 0;
    int rc = gather(d, dir, &cand, &n_cand, err);
    closedir(d);
    if (rc != 0)
        return -1;
    qsort(cand, n_cand, sizeof *cand, by_mtime);
    size_t n_read = n_cand < o.max_files ? n_cand : o.max_files;
    out->n_unread = n_cand - n_read;
    out->v = n_read ? calloc(n_read, sizeof *out->v) : NULL;
    if (n_read && !out->v)
        abort();
    for (size_t i = 0; i < n_cand; i++) {
        if (i >= n_read) {
            free(cand[i].name);
            continue;
        }
        convlist_entry *e = &out->v[out->n];
        memset(e, 0, sizeof *e);
        e->name = cand[i].name;
        e->mtime = e->when = cand[i].mtime;
        e->size = cand[i].size;
        sbuf path = {0};
        sbuf_printf(&path, "%s/%s", dir, e->name);
        e->path = sbuf_take(&path);
        if (!read_entry(e, &o)) {
            out->n_unreadable++;
            if (!o.include_unreadable) {
                free(e->name);
                free(e->path);
                free(e->error);
                continue;
            }
        }
        out->n++;
    }
    free(cand);
    qsort(out->v, out->n, sizeof *out->v, by_when);
    return 0;
}

void convlist_free(convlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        convlist_entry *e = &l->v[i];
        free(e->path);
        free(e->name);
        free(e->error);
        free(e->title);
        free(e->model);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- for the user ----------------------------------------------------------------------------- */

const convlist_entry *convlist_pick(const convlist *l, const char *arg, err_t *err)
{
    if (!arg || !arg[0])
        return err_set(err, "say which conversation: its number in /list or its file name"), NULL;
    sbuf shown = {0};
    tsafe_one_line(&shown, arg, strlen(arg) < 200 ? strlen(arg) : 200);
    const convlist_entry *e = NULL;
    if (strspn(arg, "0123456789") == strlen(arg)) {
        errno = 0;
        unsigned long k = strtoul(arg, NULL, 10);
        if (errno == 0 && k >= 1 && k <= l->n)
            e = &l->v[k - 1];
        else if (l->n)
            err_set(err, "no conversation %s: the list has 1-%zu", sbuf_str(&shown), l->n);
        else
            err_set(err, "no conversation %s: there are no saved conversations", sbuf_str(&shown));
    } else {
        size_t len = strlen(arg);
        for (size_t i = 0; i < l->n && !e; i++) {
            const char *name = l->v[i].name;
            if (!strcmp(name, arg) || (strlen(name) == len + 5 && !strncmp(name, arg, len) && !strcmp(name + len, ".json")))
                e = &l->v[i];
        }
        if (!e)
            err_set(err, "no saved conversation named '%s'", sbuf_str(&shown));
    }
    sbuf_free(&shown);
    if (e && !e->readable) {
        err_set(err, "%s cannot be resumed: %s", e->name, e->error);
        return NULL;
    }
    return e;
}

void convlist_format(const convlist_entry *e, size_t number, sbuf *out)
{
    char date[32] = "(unknown date)";
    time_t t = (time_t)e->when;
    struct tm tm;
    if (localtime_r(&t, &tm))
        strftime(date, sizeof date, "%Y-%m-%d %H:%M", &tm);
    if (!e->readable) {
        sbuf_printf(out, "%2zu  %s  unreadable: %s", number, date, e->error);
        return;
    }
    sbuf_printf(out, "%2zu  %s  %s  %zu turn%s  %s", number, date, e->model ? e->model : "(model unknown)",
                e->n_turns, e->n_turns == 1 ? "" : "s", e->title);
}
