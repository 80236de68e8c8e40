/* test_answer_failure.c: an answer that fails halfway (a device lost, a
 * sampler's internal error) leaves the -C file consistent (issue 28.6d: it
 * kept the user's message with no answer, and the next run added a second
 * user message after it).  The decision: the user's message stays, and the
 * answer is kept with what it said before the failure, marked with why
 * ("error" in its turn, stopped); a later run continues after it.
 *
 * The failure is real code failing: the CPU reference engine behind a
 * backend that makes its Nth single-token eval fail, as a device error
 * would (the fault is injected at the backend interface, not in the code
 * under test: -p's answer, oneshot_answer, runs as it does in the binary). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_setup.h"
#include "conversation.h"
#include "engine.h"
#include "oneshot.h"
#include "testlib.h"

#define MODEL "tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf"

static char tmpdir[256];

/* ---- a backend whose decode fails after a few tokens -------------------------------- */

static engine_backend failing;
static int evals_left; /* single-token evals before the failure; -1: the prompt's fails */

static int failing_eval(void *impl, const int32_t *tokens, uint32_t n_tokens, uint32_t pos, const engine_output *out,
                        err_t *err)
{
    if (evals_left < 0 || (n_tokens == 1 && evals_left-- <= 0))
        return err_set(err, "injected: the device was lost at position %u", pos);
    return ref_engine_backend.eval(impl, tokens, n_tokens, pos, out, err);
}

/* ---- -p with -C ------------------------------------------------------------------------ */

static int parse(chat_args *a, const char *conv_path)
{
    char *argv[] = {"glmchat", "-m", MODEL, "--backend", "cpu", "--temp", "0", "--think", "off", "-n", "12",
                    "--ignore-eos", "-C", (char *)conv_path, "-p", "hi", NULL};
    bool usage;
    err_t err = {{0}};
    int rc = chat_args_parse(a, (int)(sizeof argv / sizeof argv[0]) - 1, argv, false, &usage, &err);
    if (rc)
        printf("# %s\n", err.msg);
    return rc;
}

/* One -p run on the file with backend be; stdout (the answer) goes nowhere. */
static int answer_once(chat_model *cm, const chat_args *a, const engine_backend *be, const char *prompt)
{
    conversation conv;
    err_t err = {{0}};
    if (access(a->conversation, F_OK) == 0) {
        if (conv_load(&conv, a->conversation, &err) != 0) {
            printf("# %s\n", err.msg);
            return -1;
        }
    } else {
        conv_init(&conv);
    }
    cm->be = be;
    cm->fallback = NULL;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    int rc = oneshot_answer(a, cm, &conv, prompt);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(null);
    conv_free(&conv);
    return rc;
}

static void test_failed_answer_keeps_the_file_consistent(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/failed.json", tmpdir);
    chat_args a;
    CHECK(parse(&a, path) == 0, "options");
    chat_model cm;
    err_t err = {{0}};
    if (chat_model_open(&cm, &a, &err) != 0) {
        CHECK(0, "model: %.300s", err.msg);
        chat_args_free(&a);
        return;
    }
    evals_left = 4;
    CHECK(answer_once(&cm, &a, &failing, "hi") == 1, "a failed answer should exit 1");
    conversation c;
    CHECK(conv_load(&c, path, &err) == 0, "load: %.300s", err.msg);
    CHECK(c.n == 2 && !strcmp(c.msgs[0].role, "user") && !strcmp(c.msgs[0].content, "hi") &&
              !strcmp(c.msgs[1].role, "assistant"),
          "%zu messages, expected the user's and the failed answer", c.n);
    if (c.n == 2) {
        const conv_msg *m = &c.msgs[1];
        CHECK(m->error && strstr(m->error, "injected: the device was lost"), "the failure is not recorded: '%s'",
              m->error ? m->error : "(none)");
        CHECK(m->stopped, "a failed answer is stopped");
        CHECK(m->content[0], "what was said before the failure is lost");
    }
    conv_free(&c);
    /* The next run continues after it: the turns alternate. */
    CHECK(answer_once(&cm, &a, &ref_engine_backend, "again") == 0, "the next run failed");
    CHECK(conv_load(&c, path, &err) == 0 && c.n == 4, "%zu messages after the next run", c.n);
    for (size_t i = 0; i < c.n; i++)
        CHECK(!strcmp(c.msgs[i].role, i % 2 ? "assistant" : "user"), "message %zu is %s", i, c.msgs[i].role);
    CHECK(c.n == 4 && !c.msgs[3].error, "the good answer is marked failed");
    conv_free(&c);
    /* A failure before the first token (reading the prompt): the same, with
     * an empty answer. */
    snprintf(path, sizeof path, "%s/failed-at-once.json", tmpdir);
    a.conversation = path;
    evals_left = -1;
    CHECK(answer_once(&cm, &a, &failing, "hi") == 1, "a failed answer should exit 1");
    CHECK(conv_load(&c, path, &err) == 0 && c.n == 2 && c.msgs[1].error && !c.msgs[1].content[0],
          "the failure at once: %zu messages", c.n);
    conv_free(&c);
    chat_model_close(&cm);
    chat_args_free(&a);
}

/* The record survives a save and a load, and shows in an export. */
static void test_error_round_trip(void)
{
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "q", NULL);
    conv_msg *m = conv_add(&c, "assistant", "partial", NULL);
    conv_set_error(m, "the GPU sampler failed");
    char *json = conv_to_json(&c);
    conversation r;
    err_t err = {{0}};
    CHECK(json && conv_parse(&r, json, strlen(json), "mem", &err) == 0, "parse: %.300s", err.msg);
    CHECK(r.n == 2 && r.msgs[1].error && !strcmp(r.msgs[1].error, "the GPU sampler failed") && r.msgs[1].stopped,
          "the error did not survive");
    sbuf md = {0};
    conv_to_markdown(&r, &md);
    CHECK(strstr(sbuf_str(&md), "The answer failed: the GPU sampler failed"), "export: %.300s", sbuf_str(&md));
    sbuf_free(&md);
    free(json);
    conv_free(&r);
    conv_free(&c);
    static const char bad[] = "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\"}], "
                              "\"turns\": [{\"message\": 0, \"error\": 5}]}";
    CHECK(conv_parse(&r, bad, strlen(bad), "mem", &err) != 0 &&
              strstr(err.msg, "turns[0].error"),
          "a bad error field: %.300s", err.msg);
    conv_free(&r);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-failure-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("FAIL - setup: mkdtemp\n");
        return 1;
    }
    setenv("XDG_CONFIG_HOME", tmpdir, 1); /* no settings file of the user's */
    failing = ref_engine_backend;
    failing.name = "cpu-failing";
    failing.eval = failing_eval;
    RUN(test_failed_answer_keeps_the_file_consistent);
    RUN(test_error_round_trip);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    TESTS_DONE();
}
