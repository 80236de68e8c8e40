/* test_file_read.c: core/base/file_read.h's tail read on random bytes -- the last
 * `max` bytes exactly and the offset they start at, a small file whole, a
 * missing file (errno ENOENT), a FIFO and a directory refused with their
 * one-line errors and without blocking. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file_read.h"
#include "testlib.h"

static char tmpdir[256];

/* path filled with n random bytes (NUL bytes among them) */
static unsigned char *write_random(const char *path, size_t n, unsigned seed)
{
    unsigned char *b = malloc(n ? n : 1);
    if (!b)
        return NULL;
    srand(seed);
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(rand() & 0xff);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

static void test_tail_of_random_bytes(void)
{
    static const struct {
        size_t size, max;
    } cases[] = {{100000, 4096}, {4097, 4096}, {4096, 4096}, {17, 4096}, {1, 1}, {65537, 65536}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[300];
        snprintf(path, sizeof path, "%s/r%zu", tmpdir, c);
        unsigned char *want = write_random(path, cases[c].size, 7u + (unsigned)c);
        CHECK(want != NULL, "cannot write %s", path);
        if (!want)
            continue;
        char *got;
        size_t n;
        uint64_t start;
        err_t err;
        int rc = file_read_tail(path, cases[c].max, &got, &n, &start, &err);
        size_t from = cases[c].size > cases[c].max ? cases[c].size - cases[c].max : 0;
        CHECK(rc == 0, "size %zu max %zu: %.200s", cases[c].size, cases[c].max, err.msg);
        if (rc == 0) {
            CHECK(start == from && n == cases[c].size - from, "size %zu max %zu: %zu bytes from %llu", cases[c].size,
                  cases[c].max, n, (unsigned long long)start);
            CHECK(n == cases[c].size - from && memcmp(got, want + from, n) == 0 && got[n] == 0,
                  "size %zu max %zu: other bytes", cases[c].size, cases[c].max);
            free(got);
        }
        free(want);
    }
}

static void test_tail_refusals(void)
{
    char path[300];
    char *got;
    size_t n;
    uint64_t start;
    err_t err;
    snprintf(path, sizeof path, "%s/missing", tmpdir);
    errno = 0;
    CHECK(file_read_tail(path, 10, &got, &n, &start, &err) != 0 && errno == ENOENT && got == NULL,
          "missing: errno %d", errno);
    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo: %s", strerror(errno));
    errno = -1;
    CHECK(file_read_tail(path, 10, &got, &n, &start, &err) != 0 && errno == 0 &&
              strstr(err.msg, "not a regular file (a FIFO)"),
          "fifo: errno %d, %.200s", errno, err.msg);
    CHECK(file_read_tail(tmpdir, 10, &got, &n, &start, &err) != 0 && strstr(err.msg, "not a regular file (a directory)"),
          "directory: %.200s", err.msg);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-file-read-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_tail_of_random_bytes);
    RUN(test_tail_refusals);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%.100s'", tmpdir);
    if (system(cmd) != 0)
        return 1;
    TESTS_DONE();
}
