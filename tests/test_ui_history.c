/* test_ui_history.c: the input history file (app/ui/ui_history.h): entries
 * written and read back whole (multi-line ones, ones that look like
 * timestamps), files of earlier versions read one entry per line, a file
 * mixing both, trimming to the newest entries, a FIFO refused. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "ui/ui_history.h"

static char tmpdir[256];

static void test_entries_round_trip(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/rt", tmpdir);
    const char *entries[] = {"x1", "x2", "first line\nsecond line", "a\n\nblank line kept inside",
                             "#12345", "\\backslash", "line\n#999\nlooks like a stamp"};
    size_t n = sizeof entries / sizeof entries[0];
    err_t err;
    for (size_t i = 0; i < n; i++)
        CHECK(ui_history_append(path, entries[i], &err) == 0, "append: %.200s", err.msg);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);
    ui_history h;
    CHECK(ui_history_load(&h, path, 100, &err) == 0, "load: %.200s", err.msg);
    CHECK(h.n == n, "%zu entries, expected %zu", h.n, n);
    for (size_t i = 0; i < n && i < h.n; i++)
        CHECK(!strcmp(h.v[i], entries[i]), "entry %zu: '%s', expected '%s'", i, h.v[i], entries[i]);
    ui_history_free(&h);
}

/* Earlier versions wrote the lines without timestamps: each line is an
 * entry (readline joined them all into one). */
static void test_old_files_load_line_by_line(void)
{
    const char old[] = "x1\nx2\n\nthird\r\n";
    ui_history h;
    ui_history_parse(&h, old, strlen(old));
    CHECK(h.n == 3, "%zu entries", h.n);
    CHECK(h.n == 3 && !strcmp(h.v[0], "x1") && !strcmp(h.v[1], "x2") && !strcmp(h.v[2], "third"),
          "'%s' '%s' '%s'", h.n > 0 ? h.v[0] : "", h.n > 1 ? h.v[1] : "", h.n > 2 ? h.v[2] : "");
    ui_history_free(&h);
    /* An old file this version appended to: old lines, then whole entries. */
    const char mixed[] = "old one\nold two\n#1700000000\nnew\nmulti\n#1700000001\n\nlast\n\n";
    ui_history_parse(&h, mixed, strlen(mixed));
    CHECK(h.n == 4, "%zu entries", h.n);
    CHECK(h.n == 4 && !strcmp(h.v[0], "old one") && !strcmp(h.v[1], "old two") && !strcmp(h.v[2], "new\nmulti") &&
              !strcmp(h.v[3], "last"),
          "mixed: '%s' '%s'", h.n > 2 ? h.v[2] : "", h.n > 3 ? h.v[3] : "");
    ui_history_free(&h);
    /* Nothing, or only stamps: no entries. */
    ui_history_parse(&h, "#1\n#2\n\n", 6);
    CHECK(h.n == 0, "%zu entries from stamps alone", h.n);
    ui_history_free(&h);
}

static void test_trimmed_to_the_newest(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/trim", tmpdir);
    err_t err;
    char e[32];
    for (int i = 0; i < 30; i++) {
        snprintf(e, sizeof e, "entry %d\nline two", i);
        CHECK(ui_history_append(path, e, &err) == 0, "append: %.200s", err.msg);
    }
    ui_history h;
    CHECK(ui_history_load(&h, path, 10, &err) == 0 && h.n == 10, "%zu entries kept", h.n);
    CHECK(h.n == 10 && !strcmp(h.v[0], "entry 20\nline two") && !strcmp(h.v[9], "entry 29\nline two"),
          "kept '%s' .. '%s'", h.n ? h.v[0] : "", h.n ? h.v[h.n - 1] : "");
    ui_history_free(&h);
    /* The file itself was cut down. */
    CHECK(ui_history_load(&h, path, 0, &err) == 0 && h.n == 10, "%zu entries in the file", h.n);
    ui_history_free(&h);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode after rewriting %o", st.st_mode & 0777);
}

static void test_missing_and_strange_files(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/none", tmpdir);
    ui_history h;
    err_t err;
    CHECK(ui_history_load(&h, path, 10, &err) == 0 && h.n == 0, "a missing file is an empty history");
    ui_history_free(&h);
    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    CHECK(ui_history_load(&h, path, 10, &err) != 0 && strstr(err.msg, "not a regular file"), "fifo: %.200s", err.msg);
    ui_history_free(&h);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-history-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    RUN(test_entries_round_trip);
    RUN(test_old_files_load_line_by_line);
    RUN(test_trimmed_to_the_newest);
    RUN(test_missing_and_strange_files);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%.100s'", tmpdir);
    if (system(cmd) != 0)
        return 1;
    TESTS_DONE();
}
