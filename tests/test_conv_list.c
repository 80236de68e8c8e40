/* test_conv_list.c: listing saved conversations (app/ui/conv_list.h) from a
 * temporary directory of real files written with conv_save(): order, titles,
 * models, turns, broken and foreign files, names that are not ours, the cap
 * on files read, picking by number or name, and the one-line format. */
#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ui/conv_list.h"
#include "chat/conversation.h"
#include "testlib.h"

static char dir[256];

static void path_of(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%.200s/%.50s", dir, name);
}

/* Saves a conversation: `turns` user/assistant pairs, the first user
 * message `first`, message times from t0 (0: none), then sets the file's
 * mtime. */
static void save(const char *name, const char *model, const char *first, int turns, double t0, time_t mtime)
{
    conversation c;
    conv_init(&c);
    conv_set_str(&c.model_name, model);
    conv_add(&c, "system", "Be brief.", NULL);
    for (int i = 0; i < turns; i++) {
        char q[64];
        snprintf(q, sizeof q, "question %d", i + 1);
        conv_msg *u = conv_add(&c, "user", i == 0 ? first : q, NULL);
        conv_msg *a = conv_add(&c, "assistant", "answer", NULL);
        u->time = t0 ? t0 + 60 * i : 0;
        a->time = t0 ? t0 + 60 * i + 30 : 0;
    }
    char path[300];
    path_of(path, sizeof path, name);
    err_t err = {{0}};
    CHECK(conv_save(&c, path, &err) == 0, "save %s: %.200s", name, err.msg);
    conv_free(&c);
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    CHECK(utimensat(AT_FDCWD, path, ts, 0) == 0, "utimensat %s", name);
}

static void write_raw(const char *name, const char *text, time_t mtime)
{
    char path[300];
    path_of(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", name);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    utimensat(AT_FDCWD, path, ts, 0);
}

static void empty_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char path[300];
        path_of(path, sizeof path, de->d_name);
        if (unlink(path) != 0)
            rmdir(path);
    }
    if (d)
        closedir(d);
}

static const convlist_entry *find(const convlist *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name))
            return &l->v[i];
    return NULL;
}

static void test_lists_most_recent_first(void)
{
    empty_dir();
    const time_t base = 1700000000;
    save("a.json", "glm-4.7-flash", "How do I reverse a list in Python?", 3, base, base + 10);
    save("b.json", "tiny", "Second one", 1, base + 5000, base + 20);
    /* No message times (an older format): its file time decides. */
    save("c.json", "tiny", "Third", 2, 0, base + 3000);
    convlist l;
    err_t err = {{0}};
    convlist_opts o = {0, 40, true, false};
    CHECK(convlist_scan(dir, &o, &l, &err) == 0, "%.200s", err.msg);
    CHECK(l.n == 3 && l.n_unread == 0 && l.n_unreadable == 0, "%zu entries", l.n);
    if (l.n == 3) {
        CHECK(!strcmp(l.v[0].name, "b.json") && !strcmp(l.v[1].name, "c.json") && !strcmp(l.v[2].name, "a.json"),
              "order %s %s %s", l.v[0].name, l.v[1].name, l.v[2].name);
        const convlist_entry *a = find(&l, "a.json");
        CHECK(a && a->readable && !strcmp(a->title, "How do I reverse a list in Python?"), "title '%s'",
              a ? a->title : "");
        CHECK(a && !strcmp(a->model, "glm-4.7-flash") && a->n_turns == 3 && a->n_messages == 7, "a's metadata");
        CHECK(a && a->when == base + 150, "a's time is its last message's: %.0f", a ? a->when : 0);
        const convlist_entry *c = find(&l, "c.json");
        CHECK(c && c->when == base + 3000 && c->mtime == base + 3000, "c's time is its mtime");
        CHECK(a && a->size > 0 && strstr(a->path, "/a.json"), "path and size");
    }
    convlist_free(&l);
}

static void test_titles_are_one_safe_line(void)
{
    empty_dir();
    save("x.json", NULL, "  Hello,\n\n\tworld \x1b[31mred  ", 1, 1700000000, 1700000000);
    save("y.json", NULL, "漢字漢字漢字 and more", 1, 1700000100, 1700000000);
    save("z.json", NULL, "   ", 1, 1700000200, 1700000000);
    convlist l;
    err_t err;
    convlist_opts o = {0, 12, false, false};
    CHECK(convlist_scan(dir, &o, &l, &err) == 0 && l.n == 3, "scan");
    const convlist_entry *x = find(&l, "x.json"), *y = find(&l, "y.json"), *z = find(&l, "z.json");
    CHECK(x && !strcmp(x->title, "Hello, worl\xe2\x80\xa6"), "folded and cut: '%s'", x ? x->title : "");
    CHECK(y && !strcmp(y->title, "漢字漢字漢\xe2\x80\xa6"), "wide characters count 2: '%s'", y ? y->title : "");
    CHECK(z && !strcmp(z->title, "(no user message)") && z->model == NULL, "blank title, no model");
    convlist_free(&l);
    o.title_width = 80;
    CHECK(convlist_scan(dir, &o, &l, &err) == 0, "scan");
    x = find(&l, "x.json");
    CHECK(x && !strcmp(x->title, "Hello, world ^[[31mred"), "escape shown inert: '%s'", x ? x->title : "");
    convlist_free(&l);
    o.title_width = 12;
    o.ascii = true;
    CHECK(convlist_scan(dir, &o, &l, &err) == 0, "scan");
    x = find(&l, "x.json");
    CHECK(x && !strcmp(x->title, "Hello, wo..."), "ascii ellipsis: '%s'", x ? x->title : "");
    convlist_free(&l);
}

static void test_broken_and_foreign_files(void)
{
    empty_dir();
    const time_t base = 1700000000;
    save("good.json", "m", "fine", 1, base, base);
    write_raw("broken.json", "{\"messages\": [", base + 1);
    write_raw("empty.json", "", base + 2);
    write_raw("notconv.json", "[1, 2, 3]", base + 3);
    write_raw("foreign.json", "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"from "
                              "another tool\"}]}]}",
              base + 4);
    /* Not ours to list: other names, hidden temporaries, a directory, a FIFO. */
    write_raw("notes.txt", "hello", base + 5);
    write_raw(".good.json.tmp.123.0", "{}", base + 6);
    write_raw("json", "{}", base + 7);
    char p[300];
    path_of(p, sizeof p, "adir.json");
    CHECK(mkdir(p, 0700) == 0, "mkdir");
    path_of(p, sizeof p, "fifo.json");
    CHECK(mkfifo(p, 0600) == 0, "mkfifo");
    convlist l;
    err_t err;
    convlist_opts o = {0, 40, true, false};
    CHECK(convlist_scan(dir, &o, &l, &err) == 0, "%.200s", err.msg);
    CHECK(l.n == 5 && l.n_unreadable == 3, "%zu entries, %zu unreadable", l.n, l.n_unreadable);
    const convlist_entry *b = find(&l, "broken.json"), *f = find(&l, "foreign.json"), *e = find(&l, "empty.json");
    CHECK(b && !b->readable && strstr(b->error, "broken.json") && strstr(b->error, "JSON"), "broken: '%s'",
          b ? b->error : "");
    CHECK(e && !e->readable && strstr(e->error, "empty"), "empty: '%s'", e ? e->error : "");
    CHECK(f && f->readable && !strcmp(f->title, "from another tool") && f->n_turns == 1 && !f->model, "foreign file");
    CHECK(find(&l, "notes.txt") == NULL && find(&l, "adir.json") == NULL && find(&l, "fifo.json") == NULL,
          "only regular *.json files");
    convlist_free(&l);
    o.include_unreadable = false;
    CHECK(convlist_scan(dir, &o, &l, &err) == 0 && l.n == 2 && l.n_unreadable == 3, "unreadable left out: %zu",
          l.n);
    convlist_free(&l);
}

static void test_cap_on_files_read(void)
{
    empty_dir();
    const time_t base = 1700000000;
    for (int i = 0; i < 7; i++) {
        char name[32];
        snprintf(name, sizeof name, "c%d.json", i);
        save(name, "m", name, 1, 0, base + i * 100);
    }
    convlist l;
    err_t err;
    convlist_opts o = {3, 40, true, false};
    CHECK(convlist_scan(dir, &o, &l, &err) == 0, "scan");
    CHECK(l.n == 3 && l.n_unread == 4, "%zu read, %zu not", l.n, l.n_unread);
    CHECK(l.n == 3 && !strcmp(l.v[0].name, "c6.json") && !strcmp(l.v[2].name, "c4.json"), "the most recent ones");
    convlist_free(&l);
}

static void test_missing_and_bad_directory(void)
{
    convlist l;
    err_t err = {{0}};
    char p[300];
    path_of(p, sizeof p, "does-not-exist");
    CHECK(convlist_scan(p, NULL, &l, &err) == 0 && l.n == 0, "a missing directory is an empty list");
    convlist_free(&l);
    empty_dir();
    write_raw("file", "x", 1700000000);
    path_of(p, sizeof p, "file");
    CHECK(convlist_scan(p, NULL, &l, &err) == -1 && strstr(err.msg, "file") && strstr(err.msg, "directory"),
          "a file as the directory: '%.200s'", err.msg);
}

static void test_pick_and_format(void)
{
    empty_dir();
    const time_t base = 1700000000;
    save("2025-01-31_120000.json", "glm-4.7-flash", "Summarize this", 2, base, base);
    save("other.json", NULL, "Hi", 1, base + 100, base);
    write_raw("bad.json", "nope", base + 120); /* between the two by time */
    convlist l;
    err_t err = {{0}};
    convlist_opts o = {0, 40, true, false};
    CHECK(convlist_scan(dir, &o, &l, &err) == 0 && l.n == 3, "scan");
    const convlist_entry *e = convlist_pick(&l, "1", &err);
    CHECK(e && !strcmp(e->name, "other.json"), "number 1 is the most recent");
    e = convlist_pick(&l, "2025-01-31_120000", &err);
    CHECK(e && e->n_turns == 2, "by name without .json");
    CHECK(convlist_pick(&l, "other.json", &err) != NULL, "by file name");
    CHECK(!convlist_pick(&l, "4", &err) && !strcmp(err.msg, "no conversation 4: the list has 1-3"), "'%.200s'", err.msg);
    CHECK(!convlist_pick(&l, "0", &err), "0 is no number in the list");
    CHECK(!convlist_pick(&l, "99999999999999999999999", &err), "a huge number");
    CHECK(!convlist_pick(&l, "x\x1b]0;t\x07", &err) && !strchr(err.msg, '\x1b'), "a name is echoed inert: '%.200s'",
          err.msg);
    CHECK(!convlist_pick(&l, "", &err) && strstr(err.msg, "which conversation"), "empty argument");
    CHECK(!convlist_pick(&l, "2", &err) && strstr(err.msg, "bad.json cannot be resumed"), "unreadable: '%.200s'",
          err.msg);
    /* The line: number, local date, model, turns, title. */
    sbuf line = {0};
    convlist_format(&l.v[2], 3, &line);
    char date[32];
    time_t t = (time_t)l.v[2].when;
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", &tm);
    char want[256];
    snprintf(want, sizeof want, " 3  %s  glm-4.7-flash  2 turns  Summarize this", date);
    CHECK(!strcmp(sbuf_str(&line), want), "'%s' != '%s'", sbuf_str(&line), want);
    sbuf_clear(&line);
    convlist_format(&l.v[0], 1, &line);
    CHECK(strstr(sbuf_str(&line), "(model unknown)  1 turn  Hi"), "'%s'", sbuf_str(&line));
    sbuf_clear(&line);
    convlist_format(&l.v[1], 2, &line);
    CHECK(strstr(sbuf_str(&line), "unreadable: ") && strstr(sbuf_str(&line), "bad.json"), "'%s'", sbuf_str(&line));
    sbuf_free(&line);
    convlist_free(&l);
    CHECK(l.v == NULL && l.n == 0, "freed list is empty");
}

int main(void)
{
    setlocale(LC_ALL, "C.UTF-8");
    snprintf(dir, sizeof dir, "/tmp/glmchat-convlist-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FAIL - tmpdir: cannot create %s\n", dir);
        return 1;
    }
    RUN(test_lists_most_recent_first);
    RUN(test_titles_are_one_safe_line);
    RUN(test_broken_and_foreign_files);
    RUN(test_cap_on_files_read);
    RUN(test_missing_and_bad_directory);
    RUN(test_pick_and_format);
    empty_dir();
    rmdir(dir);
    TESTS_DONE();
}
