/* conv_store.c: conversation files on disk: loading, atomic and exclusive
 * saves, the writers' lock, and the clean-up after writers that died.
 *
 * A save writes the new text to a temporary file in the target's directory,
 * syncs it and renames it over the target (then syncs the directory), so a
 * crash leaves the old or the new file.  Where the kernel and /proc allow
 * it the temporary is an unnamed O_TMPFILE inode that gets a name only just
 * before the rename: a writer killed while writing (the long part, for a
 * big conversation) leaves nothing behind.  Named temporaries are
 * ".NAME.tmp.PID.N" so a later writer knows whose they are, and begin with
 * CONV_FILE_HEAD, as lock files begin with LOCK_HEAD: the clean-up removes
 * a file only when both its name and its first bytes say glmchat made it.
 *
 * A path that is a symbolic link is followed to the file it names
 * (target_of): that file is locked, written and renamed over, in its own
 * directory, and the link stays a link. */
#include "conversation.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file_read.h"

#define CONV_MAX_FILE (256u << 20) /* larger files are refused, not read */
/* How long conv_save waits for another writer: saves take milliseconds, so
 * a longer hold is a one-shot run keeping the file for its whole answer. */
#define SAVE_LOCK_WAIT_MS 5000
/* The first line of every lock file (then the holder's pid). */
#define LOCK_HEAD "glmchat-lock\n"
/* Links followed before giving up (as the kernel's 40 for a path). */
#define MAX_LINK_HOPS 40

/* ---- paths -------------------------------------------------------------------------- */

static void split_path(const char *path, char *dir, size_t dcap, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, dcap, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, dcap, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dcap, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* "DIR/.BASE" + suffix into buf; -1 + err when it does not fit. */
static int hidden_sibling(const char *path, const char *suffix, char *buf, size_t cap, err_t *err)
{
    char dir[PATH_MAX];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    if (!base[0])
        return err_set(err, "%s: not a file name", path);
    int n = snprintf(buf, cap, "%s/.%s%s", dir, base, suffix);
    if (n < 0 || (size_t)n >= cap)
        return err_set(err, "%s: path too long", path);
    return 0;
}

/* The file a write to path goes to: path itself when it is no symbolic
 * link (or does not exist), else the end of its chain of links, a relative
 * target taken from the link's directory.  A dangling link leads to the
 * file it names, which the write creates (as editors do). */
static int target_of(const char *path, char *out, size_t cap, err_t *err)
{
    char cur[PATH_MAX];
    if ((size_t)snprintf(cur, sizeof cur, "%s", path) >= sizeof cur)
        return err_set(err, "%s: path too long", path);
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            break;
        if (hops == MAX_LINK_HOPS)
            return err_set(err, "%s: too many levels of symbolic links", path);
        char to[PATH_MAX];
        ssize_t n = readlink(cur, to, sizeof to - 1);
        if (n < 0)
            return err_set(err, "%s: cannot read the link %s: %s", path, cur, strerror(errno));
        to[n] = 0;
        const char *slash = strrchr(cur, '/');
        char next[PATH_MAX];
        int k = to[0] == '/' || !slash ? snprintf(next, sizeof next, "%s", to)
                                       : snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, to);
        if (k < 0 || (size_t)k >= sizeof next)
            return err_set(err, "%s: path too long", path);
        memcpy(cur, next, (size_t)k + 1);
    }
    if ((size_t)snprintf(out, cap, "%s", cur) >= cap)
        return err_set(err, "%s: path too long", path);
    return 0;
}

static int sync_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = fsync(dfd);
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

/* ---- what a conversation knows of its files ---------------------------------------- */

static void state_from_stat(conv_file_state *f, const struct stat *st)
{
    f->exists = st != NULL;
    f->dev = st ? (uint64_t)st->st_dev : 0;
    f->ino = st ? (uint64_t)st->st_ino : 0;
    f->size = st ? (uint64_t)st->st_size : 0;
    f->mtime_ns = st ? (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec : 0;
}

static bool state_same(const conv_file_state *a, const conv_file_state *b)
{
    /* Not ctime: a chmod is no change of content.  Other glmchat writers
     * rename a new inode in; editors change the size or mtime. */
    return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns;
}

static conv_file_state *known_file(conversation *c, const char *path)
{
    for (size_t i = 0; i < c->n_files; i++)
        if (!strcmp(c->files[i].path, path))
            return &c->files[i];
    return NULL;
}

/* Records path as it is now (st NULL: absent).  Memory failures only lose
 * the record, which makes a later save less careful, never wrong. */
static void remember_file(conversation *c, const char *path, const struct stat *st)
{
    conv_file_state *f = known_file(c, path);
    if (!f) {
        conv_file_state *grown = realloc(c->files, (c->n_files + 1) * sizeof *grown);
        char *copy = strdup(path);
        if (!grown || !copy) {
            free(copy);
            if (grown)
                c->files = grown;
            return;
        }
        c->files = grown;
        f = &c->files[c->n_files++];
        f->path = copy;
    }
    state_from_stat(f, st);
}

void conv_forget_files(conversation *c)
{
    for (size_t i = 0; i < c->n_files; i++)
        free(c->files[i].path);
    free(c->files);
    c->files = NULL;
    c->n_files = 0;
}

int conv_load(conversation *c, const char *path, err_t *err)
{
    char *data = NULL;
    size_t len = 0;
    conv_init(c);
    struct stat st;
    /* The state before the read: a change during it then shows at the save. */
    bool have_st = stat(path, &st) == 0;
    if (file_read_regular(path, CONV_MAX_FILE, "conversation", &data, &len, err) != 0)
        return -1;
    int rc = conv_parse(c, data, len, path, err);
    free(data);
    if (rc == 0 && have_st)
        remember_file(c, path, &st);
    return rc;
}

/* ---- the writers' lock --------------------------------------------------------------- */

static long lock_holder(int fd)
{
    char b[64];
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n <= 0)
        return 0;
    b[n] = 0;
    size_t head = strlen(LOCK_HEAD);
    return strncmp(b, LOCK_HEAD, head) ? strtol(b, NULL, 10) : strtol(b + head, NULL, 10);
}

static int busy(const char *path, int fd, err_t *err)
{
    long pid = lock_holder(fd);
    close(fd);
    if (pid > 0)
        err_set(err, "%s is being written by another glmchat (pid %ld)", path, pid);
    else
        err_set(err, "%s is being written by another glmchat", path);
    return 1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Locking the lock file that is at lock_path right now: a holder removes it
 * on release, so a lock taken on a file that was removed (or replaced)
 * meanwhile protects nothing and is taken again. */
int conv_lock_acquire(conv_lock *l, const char *path, int wait_ms, err_t *err)
{
    char lp[PATH_MAX + 16], target[PATH_MAX];
    l->fd = -1;
    l->path = NULL;
    /* the target's lock: writers through a link and through the file meet */
    if (target_of(path, target, sizeof target, err) != 0 || hidden_sibling(target, ".lock", lp, sizeof lp, err) != 0)
        return -1;
    double deadline = now_ms() + (wait_ms > 0 ? wait_ms : 0);
    for (;;) {
        int fd = open(lp, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return err_set(err, "%s: cannot take the writers' lock %s: %s", path, lp, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK) {
                int e = errno;
                close(fd);
                return err_set(err, "%s: cannot lock %s: %s", path, lp, strerror(e));
            }
            if (wait_ms == 0 || (wait_ms > 0 && now_ms() >= deadline))
                return busy(path, fd, err);
            if (wait_ms < 0) {
                if (flock(fd, LOCK_EX) != 0) {
                    int e = errno;
                    close(fd);
                    return err_set(err, "%s: %s while waiting for another glmchat to finish with it", path,
                                   e == EINTR ? "interrupted" : strerror(e));
                }
            } else {
                close(fd);
                struct timespec pause = {0, 20 * 1000 * 1000};
                nanosleep(&pause, NULL);
                continue;
            }
        }
        struct stat held, now;
        if (fstat(fd, &held) != 0 || lstat(lp, &now) != 0 || held.st_ino != now.st_ino || held.st_dev != now.st_dev) {
            close(fd); /* released and removed meanwhile: take the current one */
            continue;
        }
        /* What says the file is ours (for the clean-up), and the holder's
         * pid, for the message another writer shows. */
        char b[64];
        int n = snprintf(b, sizeof b, LOCK_HEAD "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, b, (size_t)n, 0) != n) {
            /* Only the message of a waiting writer loses the pid. */
        }
        l->fd = fd;
        l->path = strdup(lp);
        if (!l->path) {
            close(fd);
            l->fd = -1;
            return err_set(err, "out of memory");
        }
        return 0;
    }
}

void conv_lock_release(conv_lock *l)
{
    if (l->fd >= 0) {
        /* Removed while still held, so nobody takes a lock on a file that is
         * about to disappear (see conv_lock_acquire). */
        unlink(l->path);
        close(l->fd);
    }
    free(l->path);
    l->fd = -1;
    l->path = NULL;
}

/* ---- temporary files ----------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The new content, written and synced, not yet visible under its name. */
typedef struct {
    char dir[PATH_MAX];
    const char *base;
    int fd;          /* open while anonymous */
    bool anonymous;  /* an O_TMPFILE inode; else `name` exists */
    bool live;       /* there is something to discard */
    char name[PATH_MAX + 64];
} temp_file;

static int temp_named(temp_file *t, const char *path, const void *data, size_t len, unsigned mode, err_t *err)
{
    static unsigned counter;
    int n = snprintf(t->name, sizeof t->name, "%s/.%s.tmp.%ld.%u", t->dir, t->base, (long)getpid(), counter++);
    if (n < 0 || (size_t)n >= sizeof t->name)
        return err_set(err, "%s: path too long", path);
    int fd = open(t->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return err_set(err, "%s: cannot create a temporary file: %s", path, strerror(errno));
    const char *step = "write";
    if (write_all(fd, data, len) == 0) {
        step = "fsync";
        if (fsync(fd) == 0) {
            step = "close";
            if (close(fd) == 0) {
                t->anonymous = false;
                t->fd = -1;
                t->live = true;
                return 0;
            }
            fd = -1;
        }
    }
    int e = errno;
    if (fd >= 0)
        close(fd);
    unlink(t->name);
    return err_set(err, "%s: %s failed: %s (the previous file, if any, is unchanged)", path, step, strerror(e));
}

static int temp_write(temp_file *t, const char *path, const void *data, size_t len, unsigned mode, err_t *err)
{
    split_path(path, t->dir, sizeof t->dir, &t->base);
    t->fd = -1;
    t->anonymous = false;
    t->live = false;
    if (!t->base[0])
        return err_set(err, "%s: not a file name", path);
    int fd = open(t->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
    if (fd >= 0) {
        if (write_all(fd, data, len) == 0 && fsync(fd) == 0) {
            t->fd = fd;
            t->anonymous = true;
            t->live = true;
            return 0;
        }
        int e = errno;
        close(fd);
        return err_set(err, "%s: write failed: %s (the previous file, if any, is unchanged)", path, strerror(e));
    }
    return temp_named(t, path, data, len, mode, err); /* no O_TMPFILE on this file system */
}

/* Gives the anonymous inode the name `to` (fails with EEXIST when taken). */
static int temp_link(temp_file *t, const char *to)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", t->fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW);
}

/* Turns an anonymous temporary into a named one (when linking it fails,
 * e.g. without /proc), writing the data again if it must. */
static int temp_name_it(temp_file *t, const char *path, const void *data, size_t len, unsigned mode, err_t *err)
{
    static unsigned counter;
    snprintf(t->name, sizeof t->name, "%s/.%s.tmp.%ld.l%u", t->dir, t->base, (long)getpid(), counter++);
    if (temp_link(t, t->name) == 0) {
        close(t->fd);
        t->fd = -1;
        t->anonymous = false;
        return 0;
    }
    close(t->fd);
    t->fd = -1;
    t->live = false;
    return temp_named(t, path, data, len, mode, err);
}

static void temp_discard(temp_file *t)
{
    if (t->live && t->anonymous)
        close(t->fd);
    else if (t->live)
        unlink(t->name);
    t->fd = -1;
    t->live = false;
}

/* ".BASE.tmp.PID.N" (N may start with 'l'), for the given base or any:
 * true, with the pid.  Parsed from the end: BASE may hold ".tmp." too. */
static bool is_temp_name(const char *name, const char *base, long *pid)
{
    if (name[0] != '.')
        return false;
    const char *t = NULL;
    for (const char *p = strstr(name, ".tmp."); p; p = strstr(p + 1, ".tmp."))
        t = p;
    if (!t || t == name)
        return false;
    if (base && ((size_t)(t - name - 1) != strlen(base) || strncmp(name + 1, base, strlen(base)) != 0))
        return false;
    char *end;
    *pid = strtol(t + 5, &end, 10);
    if (*pid <= 0 || *end != '.')
        return false;
    end += end[1] == 'l' ? 2 : 1;
    if (!*end)
        return false;
    while (*end >= '0' && *end <= '9')
        end++;
    return *end == 0;
}

/* The directory, for readdir and for the *at calls on its entries (which
 * then act on the directory listed, whatever becomes of its path). */
static DIR *open_dir(const char *dir, int *dfd)
{
    *dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = *dfd >= 0 ? fdopendir(*dfd) : NULL;
    if (!d && *dfd >= 0)
        close(*dfd);
    return d;
}

/* Opens name in the directory dfd: a regular file (never through a
 * symlink, never blocking on a FIFO) whose first bytes are head.  -1 when
 * it is anything else: not ours. */
static int open_ours(int dfd, const char *name, const char *head, int flags)
{
    int fd = openat(dfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    char b[64];
    size_t n = strlen(head);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || n > sizeof b || pread(fd, b, n, 0) != (ssize_t)n ||
        memcmp(b, head, n) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Removes name from dfd when it still is the file fd has open. */
static void unlink_same(int dfd, const char *name, int fd)
{
    struct stat held, now;
    if (fstat(fd, &held) == 0 && fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
        unlinkat(dfd, name, 0);
}

/* A temporary of ours (name and first bytes) that its writer left: removed. */
static void remove_temp(int dfd, const char *name)
{
    int fd = open_ours(dfd, name, CONV_FILE_HEAD, O_RDONLY);
    if (fd < 0)
        return;
    unlink_same(dfd, name, fd);
    close(fd);
}

/* Under the file's lock every temporary of it is a dead writer's: writers
 * create them only while holding the lock. */
static void remove_stale_temps(const char *dir, const char *base)
{
    int dfd;
    DIR *d = open_dir(dir, &dfd);
    if (!d)
        return;
    struct dirent *de;
    long pid;
    while ((de = readdir(d)))
        if (is_temp_name(de->d_name, base, &pid) && pid != (long)getpid())
            remove_temp(dfd, de->d_name);
    closedir(d);
}

/* ---- writing --------------------------------------------------------------------------- */

/* keep_mode: an existing file keeps its mode; else the result has `mode`. */
static int write_atomic(const char *path, const void *data, size_t len, unsigned mode, bool keep_mode, err_t *err)
{
    char target[PATH_MAX];
    if (target_of(path, target, sizeof target, err) != 0)
        return -1;
    struct stat st;
    if (keep_mode && stat(target, &st) == 0)
        mode = st.st_mode & 07777;
    temp_file t;
    if (temp_write(&t, target, data, len, mode, err) != 0)
        return -1;
    if (t.anonymous && temp_name_it(&t, target, data, len, mode, err) != 0)
        return -1;
    if (rename(t.name, target) != 0) {
        int e = errno;
        temp_discard(&t);
        return err_set(err, "%s: rename failed: %s (the previous file, if any, is unchanged)", path, strerror(e));
    }
    /* The rename is durable only once the directory itself is synced. */
    if (sync_dir(t.dir) != 0)
        return err_set(err, "%s: saved, but syncing the directory failed: %s", path, strerror(errno));
    return 0;
}

int conv_write_atomic(const char *path, const void *data, size_t len, unsigned mode, err_t *err)
{
    return write_atomic(path, data, len, mode, true, err);
}

int conv_write_private(const char *path, const void *data, size_t len, err_t *err)
{
    conv_lock l;
    if (conv_lock_acquire(&l, path, SAVE_LOCK_WAIT_MS, err) != 0)
        return -1;
    /* 0600 also where it replaces a file: what a conversation says does not
     * become readable by others because an older file at its path was. */
    int rc = write_atomic(path, data, len, 0600, false, err);
    conv_lock_release(&l);
    return rc;
}

static char *json_line(const conversation *c, size_t *len)
{
    char *text = conv_to_json(c);
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (!line) {
        fputs("glmchat: out of memory\n", stderr);
        abort();
    }
    line[n] = '\n';
    line[n + 1] = 0;
    *len = n + 1;
    return line;
}

int conv_save_locked(conversation *c, const char *path, err_t *err)
{
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT)
        return err_set(err, "%s: %s", path, strerror(errno));
    conv_file_state *known = known_file(c, path), now;
    state_from_stat(&now, exists ? &st : NULL);
    if (known && !state_same(known, &now))
        return err_set(err,
                       "%s changed on disk since glmchat read or saved it (another glmchat or program wrote it); "
                       "not overwriting it",
                       path);
    if (exists && !known) {
        conversation old;
        err_t e2;
        if (conv_load(&old, path, &e2) != 0)
            return err_set(err, "%s exists and is not a conversation glmchat can read; not overwriting it (%s)",
                           path, e2.msg);
        conv_free(&old);
    }
    char target[PATH_MAX], dir[PATH_MAX];
    const char *base;
    if (target_of(path, target, sizeof target, err) != 0)
        return -1;
    split_path(target, dir, sizeof dir, &base);
    remove_stale_temps(dir, base);
    size_t len;
    char *text = json_line(c, &len);
    int rc = conv_write_atomic(path, text, len, 0600, err);
    free(text);
    if (rc == 0)
        remember_file(c, path, stat(path, &st) == 0 ? &st : NULL);
    return rc;
}

int conv_save(conversation *c, const char *path, err_t *err)
{
    conv_lock l;
    if (conv_lock_acquire(&l, path, SAVE_LOCK_WAIT_MS, err) != 0)
        return err_prefix(err, "not saved");
    int rc = conv_save_locked(c, path, err);
    conv_lock_release(&l);
    return rc;
}

/* Links the written temporary to `to`; EEXIST when the name is taken. */
static int link_new(temp_file *t, const char *to)
{
    if (t->anonymous)
        return temp_link(t, to);
    if (link(t->name, to) == 0)
        return 0;
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP && errno != ENOSYS)
        return -1;
    /* No hard links here (e.g. FAT): claim the name, then rename onto it. */
    int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return rename(t->name, to);
}

int conv_save_new(conversation *c, const char *dir, char *path, size_t cap, err_t *err)
{
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32] = "conversation";
    if (localtime_r(&now, &tm))
        strftime(stamp, sizeof stamp, "%Y-%m-%d_%H%M%S", &tm);
    int n = snprintf(path, cap, "%s/%s.json", dir, stamp);
    if (n < 0 || (size_t)n >= cap)
        return err_set(err, "%s: path too long", dir);
    size_t len;
    char *text = json_line(c, &len);
    temp_file t;
    int rc = temp_write(&t, path, text, len, 0600, err);
    for (int i = 1; rc == 0; i++) {
        n = i == 1 ? snprintf(path, cap, "%s/%s.json", dir, stamp)
                   : snprintf(path, cap, "%s/%s-%d.json", dir, stamp, i);
        if (n < 0 || (size_t)n >= cap || i > 9999) {
            rc = err_set(err, "%s: no free name for a new conversation", dir);
            break;
        }
        if (link_new(&t, path) == 0)
            break;
        if (errno == EEXIST)
            continue;
        if (t.anonymous) { /* linking the inode failed (no /proc?): use a named temporary */
            rc = temp_name_it(&t, path, text, len, 0600, err);
            i--;
            continue;
        }
        rc = err_set(err, "%s: cannot create: %s", path, strerror(errno));
    }
    free(text);
    if (rc != 0) {
        temp_discard(&t);
        path[0] = 0;
        return -1;
    }
    temp_discard(&t); /* the named temporary's extra link, or the anonymous fd */
    if (sync_dir(dir) != 0)
        return err_set(err, "%s: saved, but syncing the directory failed: %s", path, strerror(errno));
    struct stat st;
    remember_file(c, path, stat(path, &st) == 0 ? &st : NULL);
    return 0;
}

/* ---- clean-up ---------------------------------------------------------------------------- */

/* A lock file of ours that nobody holds was left by a writer that died:
 * removed, as a release would (see conv_lock_acquire). */
static void remove_stale_lock(int dfd, const char *name)
{
    size_t n = strlen(name);
    if (name[0] != '.' || n <= 6 || strcmp(name + n - 5, ".lock") != 0)
        return;
    int fd = open_ours(dfd, name, LOCK_HEAD, O_RDWR);
    if (fd < 0)
        return;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        unlink_same(dfd, name, fd);
    close(fd);
}

void conv_cleanup_tmp(const char *dir)
{
    /* A symlinked directory is followed: what is removed there is ours too. */
    int dfd;
    DIR *d = open_dir(dir, &dfd);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid;
        if (!is_temp_name(de->d_name, NULL, &pid))
            remove_stale_lock(dfd, de->d_name);
        else if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) /* else its writer may still be running */
            remove_temp(dfd, de->d_name);
    }
    closedir(d);
}
