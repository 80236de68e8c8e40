/* test_conv_files.c: conversation files behind symbolic links, and the
 * clean-up's respect for files that are not glmchat's (issue 28.4, 28.5).
 *
 *  - a save through a link writes the file it leads to (atomically, in the
 *    target's directory) and keeps the link a link; writers through the
 *    link and through the target take one lock; a dangling link creates its
 *    target; a loop is one clear error;
 *  - the clean-up (at start-up, and of a file's temporaries at its save)
 *    removes only what glmchat made -- a lock file beginning with its
 *    "glmchat-lock" line, a temporary beginning with CONV_FILE_HEAD -- never
 *    an empty or digits-only .X.lock or a foreign .X.tmp.PID.N, never
 *    through a symlink, also in a conversations directory that is a
 *    symlink (to a copy of /etc, the case). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conversation.h"
#include "testlib.h"

static char tmpdir[256];

static void in_tmp(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%.200s/%.200s", tmpdir, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static bool is_link(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Names in dir other than those listed (NULL-terminated), for litter checks. */
static int others_in(const char *dir, const char *const *expected)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        bool known = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        for (size_t i = 0; expected[i] && !known; i++)
            known = !strcmp(de->d_name, expected[i]);
        if (!known)
            printf("# unexpected in %s: %s\n", dir, de->d_name);
        n += !known;
    }
    if (d)
        closedir(d);
    return n;
}

static pid_t dead_pid(void)
{
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    return child;
}

/* ---- symbolic links -------------------------------------------------------------------- */

static void test_save_through_link(void)
{
    char real_dir[512], link_dir[512], real[600], link[600];
    in_tmp(real_dir, sizeof real_dir, "store");
    in_tmp(link_dir, sizeof link_dir, "elsewhere");
    mkdir(real_dir, 0700);
    mkdir(link_dir, 0700);
    snprintf(real, sizeof real, "%s/real.json", real_dir);
    snprintf(link, sizeof link, "%s/link.json", link_dir);
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "first", NULL);
    err_t err = {{0}};
    CHECK(conv_save(&c, real, &err) == 0, "first save: %.300s", err.msg);
    conv_free(&c);
    CHECK(symlink("../store/real.json", link) == 0, "symlink");
    /* -C link.json: load, add a turn, save */
    CHECK(conv_load(&c, link, &err) == 0, "load: %.300s", err.msg);
    conv_add(&c, "assistant", "second", NULL);
    CHECK(conv_save(&c, link, &err) == 0, "save through the link: %.300s", err.msg);
    conv_free(&c);
    CHECK(is_link(link), "the link was replaced by a regular file");
    conversation r;
    CHECK(conv_load(&r, real, &err) == 0 && r.n == 2 && !strcmp(r.msgs[1].content, "second"),
          "the target did not get the turn (%zu messages)", r.n);
    conv_free(&r);
    /* a second save through the link: the state it remembered still holds */
    CHECK(conv_load(&c, link, &err) == 0, "load again: %.300s", err.msg);
    conv_add(&c, "user", "third", NULL);
    CHECK(conv_save(&c, link, &err) == 0, "save again: %.300s", err.msg);
    conv_add(&c, "assistant", "fourth", NULL);
    CHECK(conv_save(&c, link, &err) == 0, "a save after a save: %.300s", err.msg);
    conv_free(&c);
    CHECK(is_link(link) && conv_load(&r, real, &err) == 0 && r.n == 4, "after two more saves");
    conv_free(&r);
    /* any bytes (a /save! over it, an export) too */
    CHECK(conv_write_atomic(link, "{\"messages\": []}\n", 17, 0600, &err) == 0, "write: %.300s", err.msg);
    CHECK(is_link(link), "conv_write_atomic replaced the link");
    static const char *const real_files[] = {"real.json", NULL}, *const link_files[] = {"link.json", NULL};
    CHECK(others_in(real_dir, real_files) == 0 && others_in(link_dir, link_files) == 0, "litter (see above)");
}

/* Writers through the link and through the file take the same lock. */
static void test_link_and_target_share_the_lock(void)
{
    char real[600], link[600], chain[600];
    in_tmp(real, sizeof real, "locked.json");
    in_tmp(link, sizeof link, "locked-link.json");
    in_tmp(chain, sizeof chain, "locked-chain.json");
    write_text(real, "{\"messages\": []}\n");
    CHECK(symlink(real, link) == 0 && symlink("locked-link.json", chain) == 0, "symlinks");
    conv_lock a, b;
    err_t err = {{0}};
    CHECK(conv_lock_acquire(&a, link, 0, &err) == 0, "lock through the link: %.300s", err.msg);
    CHECK(conv_lock_acquire(&b, real, 0, &err) == 1, "the target's lock was free while the link's was held");
    CHECK(conv_lock_acquire(&b, chain, 0, &err) == 1, "a chain of links took another lock");
    conv_lock_release(&a);
    CHECK(conv_lock_acquire(&b, real, 0, &err) == 0, "the lock after release: %.300s", err.msg);
    conv_lock_release(&b);
    char lockfile[600];
    in_tmp(lockfile, sizeof lockfile, ".locked-link.json.lock");
    CHECK(!exists(lockfile), "a lock beside the link");
}

static void test_dangling_link_and_loop(void)
{
    char link[600], target[600];
    in_tmp(link, sizeof link, "dangling.json");
    in_tmp(target, sizeof target, "made-by-save.json");
    CHECK(symlink("made-by-save.json", link) == 0, "symlink");
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "hi", NULL);
    err_t err = {{0}};
    CHECK(conv_save(&c, link, &err) == 0, "save through a dangling link: %.300s", err.msg);
    CHECK(is_link(link) && exists(target), "the target was not created (or the link replaced)");
    char a[600], b[600];
    in_tmp(a, sizeof a, "loop-a.json");
    in_tmp(b, sizeof b, "loop-b.json");
    CHECK(symlink("loop-b.json", a) == 0 && symlink("loop-a.json", b) == 0, "symlinks");
    err.msg[0] = 0;
    CHECK(conv_save(&c, a, &err) != 0 && strstr(err.msg, "too many levels of symbolic links") &&
              !strchr(err.msg, '\n'),
          "a loop: '%.300s'", err.msg);
    CHECK(is_link(a) && is_link(b), "the loop's links were replaced");
    conv_free(&c);
}

/* ---- the clean-up ------------------------------------------------------------------------ */

/* A directory holding what the copy of /etc held, plus a dead
 * writer's lock file and temporary of ours. */
static void plant(const char *dir, pid_t dead, char ours_lock[600], char ours_temp[600])
{
    char p[600];
    static const char *const foreign[][2] = {
        {".pwd.lock", ""},            /* empty: shadow-utils' lock */
        {".group.lock", "4242\n"},    /* digits only: an old-style pid lock */
        {".lock", "x"},               /* not even a name of ours */
        {".vimrc.lock", "12 34"},
    };
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, foreign[i][0]);
        write_text(p, foreign[i][1]);
    }
    snprintf(p, sizeof p, "%s/.passwd.tmp.%ld.0", dir, (long)dead); /* a foreign temp, dead pid */
    write_text(p, "root:x:0:0:root:/root:/bin/bash\n");
    snprintf(p, sizeof p, "%s/.shadow.tmp.%ld.l3", dir, (long)dead);
    write_text(p, "");
    snprintf(ours_lock, 600, "%s/.mine.json.lock", dir);
    char text[64];
    snprintf(text, sizeof text, "glmchat-lock\n%ld\n", (long)dead);
    write_text(ours_lock, text);
    snprintf(ours_temp, 600, "%s/.mine.json.tmp.%ld.0", dir, (long)dead);
    write_text(ours_temp, CONV_FILE_HEAD ",\n  \"version\": 1,\n");
}

static int count_planted(const char *dir)
{
    static const char *const names[] = {".pwd.lock", ".group.lock", ".lock", ".vimrc.lock"};
    char p[600];
    int n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        n += exists(p);
    }
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += !strncmp(de->d_name, ".passwd.tmp.", 12) || !strncmp(de->d_name, ".shadow.tmp.", 12);
    if (d)
        closedir(d);
    return n;
}

static void test_cleanup_removes_only_ours(void)
{
    char dir[512], lock[600], temp[600];
    in_tmp(dir, sizeof dir, "conversations");
    mkdir(dir, 0700);
    plant(dir, dead_pid(), lock, temp);
    conv_cleanup_tmp(dir);
    CHECK(count_planted(dir) == 6, "files that are not glmchat's were removed (%d of 6 left)", count_planted(dir));
    CHECK(!exists(lock), "a dead writer's lock file of ours was kept");
    CHECK(!exists(temp), "a dead writer's temporary of ours was kept");
    /* a symlink named like ours, to a file of ours: the link is left, and
     * what it points to too */
    char target[600], link[600];
    in_tmp(target, sizeof target, "elsewhere.json");
    write_text(target, CONV_FILE_HEAD ",\n");
    snprintf(link, sizeof link, "%s/.x.json.tmp.%ld.0", dir, (long)dead_pid());
    CHECK(symlink(target, link) == 0, "symlink");
    conv_cleanup_tmp(dir);
    CHECK(exists(link) && exists(target), "a symlink was followed or removed");
}

/* The case: the conversations directory is a symlink to a copy of
 * /etc.  The clean-up follows it, and removes only glmchat's own files. */
static void test_cleanup_through_symlinked_dir(void)
{
    char etc[512], dir[512], lock[600], temp[600];
    in_tmp(etc, sizeof etc, "etc-copy");
    in_tmp(dir, sizeof dir, "conversations-link");
    mkdir(etc, 0700);
    CHECK(symlink(etc, dir) == 0, "symlink");
    plant(etc, dead_pid(), lock, temp);
    conv_cleanup_tmp(dir);
    CHECK(count_planted(etc) == 6, "files that are not glmchat's were removed (%d of 6 left)", count_planted(etc));
    CHECK(!exists(lock) && !exists(temp), "glmchat's own stale files were kept");
}

/* A save removes its file's stale temporaries: its own only. */
static void test_save_removes_only_its_temporaries(void)
{
    char dir[512], path[600], foreign[600], ours[600];
    in_tmp(dir, sizeof dir, "saves");
    mkdir(dir, 0700);
    pid_t dead = dead_pid();
    snprintf(path, sizeof path, "%s/x.json", dir);
    snprintf(foreign, sizeof foreign, "%s/.x.json.tmp.%ld.0", dir, (long)dead);
    snprintf(ours, sizeof ours, "%s/.x.json.tmp.%ld.1", dir, (long)dead);
    write_text(foreign, "not a conversation\n");
    write_text(ours, CONV_FILE_HEAD ",\n");
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "hi", NULL);
    err_t err = {{0}};
    CHECK(conv_save(&c, path, &err) == 0, "save: %.300s", err.msg);
    CHECK(exists(foreign), "a foreign file named like a temporary was removed");
    CHECK(!exists(ours), "a stale temporary of ours was kept");
    conv_free(&c);
}

/* What a lock file and a saved file begin with (the clean-up relies on it). */
static void test_markers(void)
{
    char path[600], lockfile[600];
    in_tmp(path, sizeof path, "marked.json");
    in_tmp(lockfile, sizeof lockfile, ".marked.json.lock");
    conv_lock l;
    err_t err = {{0}};
    CHECK(conv_lock_acquire(&l, path, 0, &err) == 0, "lock: %.300s", err.msg);
    char b[64] = {0}, want[64];
    FILE *f = fopen(lockfile, "rb");
    size_t n = f ? fread(b, 1, sizeof b - 1, f) : 0;
    if (f)
        fclose(f);
    snprintf(want, sizeof want, "glmchat-lock\n%ld\n", (long)getpid());
    CHECK(n == strlen(want) && !strcmp(b, want), "the lock file holds '%s'", b);
    conv_lock_release(&l);
    conversation c;
    conv_init(&c);
    char *json = conv_to_json(&c);
    CHECK(json && !strncmp(json, CONV_FILE_HEAD, strlen(CONV_FILE_HEAD)), "a conversation begins '%.40s'", json);
    free(json);
    conv_free(&c);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-convfiles-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("FAIL - setup: mkdtemp\n");
        return 1;
    }
    RUN(test_save_through_link);
    RUN(test_link_and_target_share_the_lock);
    RUN(test_dangling_link_and_loop);
    RUN(test_cleanup_removes_only_ours);
    RUN(test_cleanup_through_symlinked_dir);
    RUN(test_save_removes_only_its_temporaries);
    RUN(test_markers);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    TESTS_DONE();
}
