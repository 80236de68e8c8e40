/* file_read.c: whole-file reads of regular files only, with a size cap. */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sizes in errors: "64 KiB", "256 MiB", or bytes. */
static void size_text(size_t n, char *buf, size_t cap)
{
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(buf, cap, "%zu MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, cap, "%zu KiB", n >> 10);
    else
        snprintf(buf, cap, "%zu bytes", n);
}

static int too_large(const char *path, size_t cap, const char *what, err_t *err)
{
    char lim[32];
    size_text(cap, lim, sizeof lim);
    return err_set(err, "%s: too large for a %s (%s at most)", path, what, lim);
}

/* The file at path opened for reading if it is a regular file (its stat in
 * *st), else -1 with err set and *open_errno the open(2) error (0 when the
 * open succeeded but the file is not a regular one). */
static int open_regular(const char *path, struct stat *st, int *open_errno, err_t *err)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        *open_errno = errno;
        err_set(err, "%s: %s", path, strerror(*open_errno));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        err_set(err, "%s: %s", path, strerror(e));
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        err_set(err, "%s: not a regular file (%s)", path,
                S_ISDIR(st->st_mode) ? "a directory" : S_ISFIFO(st->st_mode) ? "a FIFO"
                : S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device" : "a special file");
        return -1;
    }
    return fd;
}

/* read(2) at the file offset (at < 0) or pread(2) at at, retried on EINTR. */
static ssize_t read_retry(int fd, char *p, size_t n, off_t at)
{
    for (;;) {
        ssize_t r = at < 0 ? read(fd, p, n) : pread(fd, p, n, at);
        if (r >= 0 || errno != EINTR)
            return r;
    }
}

/* A failed read: buf freed, fd closed, err set from errno. */
static int read_failed(const char *path, int fd, char *buf, err_t *err)
{
    int e = errno;
    free(buf);
    close(fd);
    return err_set(err, "%s: read error: %s", path, strerror(e));
}

static int read_regular(const char *path, size_t cap, const char *what, char **data, size_t *len, int *open_errno,
                        err_t *err)
{
    struct stat st;
    int fd = open_regular(path, &st, open_errno, err);
    if (fd < 0)
        return -1;
    if ((uint64_t)st.st_size > cap) {
        close(fd);
        return too_large(path, cap, what, err);
    }
    /* Read to the end rather than trusting st_size: the file may change
     * under us, and some regular files (/proc) report 0. */
    size_t size = (size_t)st.st_size + 1, got = 0;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return err_set(err, "%s: out of memory for %zu bytes", path, size);
    }
    for (;;) {
        if (got == size) {
            if (size > cap) {
                free(buf);
                close(fd);
                return too_large(path, cap, what, err);
            }
            size_t bigger = size * 2 > cap + 1 ? cap + 1 : size * 2;
            char *nb = realloc(buf, bigger + 1);
            if (!nb) {
                free(buf);
                close(fd);
                return err_set(err, "%s: out of memory for %zu bytes", path, bigger);
            }
            buf = nb;
            size = bigger;
        }
        ssize_t r = read_retry(fd, buf + got, size - got, -1);
        if (r < 0)
            return read_failed(path, fd, buf, err);
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got > cap) {
        free(buf);
        return too_large(path, cap, what, err);
    }
    buf[got] = 0;
    *data = buf;
    *len = got;
    return 0;
}

int file_read_regular(const char *path, size_t cap, const char *what, char **data, size_t *len, err_t *err)
{
    *data = NULL;
    *len = 0;
    int open_errno = 0;
    int rc = read_regular(path, cap, what, data, len, &open_errno, err);
    /* errno says whether the open failed (and why); 0 for every other error. */
    if (rc != 0)
        errno = open_errno;
    return rc;
}

int file_read_tail(const char *path, size_t max, char **data, size_t *len, uint64_t *start, err_t *err)
{
    *data = NULL;
    *len = 0;
    *start = 0;
    int open_errno = 0;
    struct stat st;
    int fd = open_regular(path, &st, &open_errno, err);
    if (fd < 0) {
        errno = open_errno;
        return -1;
    }
    off_t from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
    size_t want = (size_t)(st.st_size - from), got = 0;
    char *buf = malloc(want + 1);
    if (!buf) {
        close(fd);
        errno = 0;
        return err_set(err, "%s: out of memory for %zu bytes", path, want);
    }
    while (got < want) {
        ssize_t r = read_retry(fd, buf + got, want - got, from + (off_t)got);
        if (r < 0) {
            read_failed(path, fd, buf, err);
            errno = 0;
            return -1;
        }
        if (r == 0) /* shorter than when it was stat'ed */
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    *data = buf;
    *len = got;
    *start = (uint64_t)from;
    return 0;
}

size_t file_bom_len(const char *text, size_t len)
{
    return len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0;
}
