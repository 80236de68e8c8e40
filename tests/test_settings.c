/* test_settings.c: the settings keys as options and files.
 *
 *  - every key of the settings table is a command-line option, as the man
 *    page says (issue 28.6f: --context-overflow was refused): the test
 *    walks settings_keys() and gives each one through chat_args_parse, so
 *    a key added to the table without its option fails here, as does a key
 *    this test has no value for;
 *  - a UTF-8 byte order mark at the start of a settings file, a theme or a
 *    conversation is skipped (issue 28.6e: it made them unreadable). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/chat_setup.h"
#include "chat/conversation.h"
#include "common/settings.h"
#include "testlib.h"
#include "ui/theme.h"

static char tmpdir[256];

/* A value each key accepts (not its default, so that setting it shows). */
static const char *value_for(const char *key)
{
    static const struct {
        const char *key, *value;
    } values[] = {
        {"model", "some.gguf"},       {"backend", "cpu"},          {"device", "1"},
        {"template", "chatml"},       {"think", "off"},            {"temp", "0.5"},
        {"top-k", "40"},              {"top-p", "0.9"},            {"min-p", "0.05"},
        {"repeat-penalty", "1.1"},    {"presence-penalty", "0.5"}, {"frequency-penalty", "0.25"},
        {"seed", "42"},               {"n-predict", "64"},         {"ctx", "2048"},
        {"context-overflow", "stop"}, {"theme", "mono"},           {"side-pane", "off"},
        {"side-width", "30"},         {"mouse", "off"},            {"ignore-eos", "on"},
        {"draft", "2"},               {"gpu-mem", "6G"},           {"n-cpu-moe", "2"},
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (!strcmp(values[i].key, key))
            return values[i].value;
    return NULL;
}

static void test_every_key_is_an_option(void)
{
    char keys[1024];
    snprintf(keys, sizeof keys, "%s", settings_keys());
    int n = 0;
    for (char *save = NULL, *key = strtok_r(keys, " ", &save); key; key = strtok_r(NULL, " ", &save), n++) {
        const char *value = value_for(key);
        CHECK(value, "the test has no value for the key '%s': add one", key);
        if (!value)
            continue;
        char opt[64];
        snprintf(opt, sizeof opt, "--%s", key);
        /* model is -m/--model and ignore-eos a flag: the commands parse them */
        bool flag = !strcmp(key, "ignore-eos"), is_model = !strcmp(key, "model");
        if (!flag && !is_model)
            CHECK(settings_option_key(opt) && !strcmp(settings_option_key(opt), key), "%s is not an option", opt);
        char *argv[] = {"glmchat", opt, (char *)value, NULL};
        chat_args a;
        bool usage;
        err_t err = {{0}};
        int rc = chat_args_parse(&a, flag ? 2 : 3, argv, false, &usage, &err);
        CHECK(rc == 0, "%s %s: %.300s", opt, flag ? "" : value, err.msg);
        if (rc == 0 && is_model)
            CHECK(a.model && !strcmp(a.model, value), "--model did not set the model");
        else if (rc == 0 && flag)
            CHECK(a.s.ignore_eos, "--ignore-eos did not set it");
        else if (rc == 0)
            CHECK(settings_given(&a.s, key), "%s %s: the key is not marked as given", opt, value);
        chat_args_free(&a);
    }
    CHECK(n >= 21, "only %d keys", n);
    /* the one the issue found refused */
    char *argv[] = {"glmchat", "--context-overflow", "stop", NULL};
    chat_args a;
    bool usage;
    err_t err = {{0}};
    CHECK(chat_args_parse(&a, 3, argv, false, &usage, &err) == 0 && a.s.ctx_overflow == CHAT_CTX_STOP,
          "--context-overflow stop: %.300s", err.msg);
    chat_args_free(&a);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Sizes in binary units, exactly; "auto" and 0 are no cap; the rest are
 * refused naming the key. */
static void test_sizes(void)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"6G", 6ull << 30},       {"512M", 512ull << 20}, {"1.5G", 3ull << 29},  {"512MiB", 512ull << 20},
        {"4096k", 4ull << 20},    {"2t", 2ull << 40},     {"0.5GB", 1ull << 29}, {"auto", 0},
        {"0", 0},                 {"1K", 1024},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 12345;
        err_t err = {{0}};
        CHECK(settings_parse_size("gpu-mem", good[i].text, &v, &err) == 0 && v == good[i].bytes,
              "'%s': %llu (%.200s)", good[i].text, (unsigned long long)v, err.msg);
    }
    static const char *const bad[] = {"6", "", "G", "-1G", "1.5.5G", "6X", "6GG", "6 G", "0.0001K", "2000T", "1e3M"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        err_t err = {{0}};
        CHECK(settings_parse_size("gpu-mem", bad[i], &v, &err) != 0 && v == 7 && !strncmp(err.msg, "gpu-mem: ", 9),
              "'%s' taken as %llu (%.200s)", bad[i], (unsigned long long)v, err.msg);
    }
    settings s;
    settings_defaults(&s);
    err_t err = {{0}};
    CHECK(s.gpu_mem == 0, "the default is no cap");
    CHECK(settings_set(&s, "gpu-mem", "3G", &err) == 0 && s.gpu_mem == 3ull << 30 && settings_given(&s, "gpu-mem"),
          "settings_set gpu-mem 3G: %.200s", err.msg);
}

static void test_bom_skipped(void)
{
    char path[512];
    err_t err = {{0}};
    /* the settings file */
    snprintf(path, sizeof path, "%s/settings", tmpdir);
    write_file(path, "\xef\xbb\xbftemp = 0.5\nctx = 1024\n");
    settings s;
    settings_defaults(&s);
    CHECK(settings_load(&s, path, false, &err) == 0 && s.has_temp && s.temp == 0.5f && s.n_ctx == 1024,
          "settings with a BOM: %.300s", err.msg);
    /* only at the start: elsewhere it is part of a line (an unknown key) */
    write_file(path, "ctx = 1024\n\xef\xbb\xbftemp = 0.5\n");
    settings_defaults(&s);
    CHECK(settings_load(&s, path, false, &err) != 0, "a BOM inside the file was skipped");
    /* a theme */
    snprintf(path, sizeof path, "%s/bom.theme", tmpdir);
    write_file(path, "\xef\xbb\xbfnormal = white black\n");
    theme t;
    CHECK(theme_load_file(&t, path, &err) == 0, "theme with a BOM: %.300s", err.msg);
    /* a conversation */
    snprintf(path, sizeof path, "%s/bom.json", tmpdir);
    write_file(path, "\xef\xbb\xbf{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
    conversation c;
    CHECK(conv_load(&c, path, &err) == 0 && c.n == 1 && !strcmp(c.msgs[0].content, "hi"), "conversation with a BOM: %.300s",
          err.msg);
    conv_free(&c);
    /* a BOM alone is an empty file, as before */
    write_file(path, "\xef\xbb\xbf");
    CHECK(conv_load(&c, path, &err) != 0 && strstr(err.msg, "empty"), "'%.300s'", err.msg);
    conv_free(&c);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-settings-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("FAIL - setup: mkdtemp\n");
        return 1;
    }
    /* no settings file of the user's: an empty config directory */
    setenv("XDG_CONFIG_HOME", tmpdir, 1);
    RUN(test_every_key_is_an_option);
    RUN(test_bom_skipped);
    RUN(test_sizes);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    TESTS_DONE();
}
