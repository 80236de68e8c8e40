/* test_template.c: chat-template rendering, byte for byte.
 *
 * Oracles: tests/data/chat_template/glm47_flash_cases.json (the project's
 * fixture) and tests/template_cases/glm47_extra.json (further cases rendered
 * by Jinja2 with Hugging Face's settings, tests/tools/glm47_oracle.py:
 * multi-part content, runs of tool responses, enable_thinking, system with
 * tools, null and non-string content, JSON escapes and floats, ...). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_template.h"
#include "format/gguf.h"
#include "text/json_dump.h"
#include "testlib.h"

static void check_file(const char *path, int min_cases)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    CHECK(root != NULL, "%s: %s", path, jerr.text);
    if (!root)
        return;
    const tmpl_preset *p = tmpl_find("glm47");
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        err_t err;
        char *out = tmpl_render(p, json_object_get(c, "inputs"), &err);
        const char *want = json_string_value(json_object_get(c, "expected"));
        const char *name = json_string_value(json_object_get(c, "name"));
        CHECK(out && strcmp(out, want) == 0, "%s: case %s renders differently", path, name);
        free(out);
        n++;
    }
    CHECK(n >= min_cases, "%s: only %d cases", path, n);
    json_decref(root);
}

static void test_glm47_fixture_cases(void) { check_file("tests/data/chat_template/glm47_flash_cases.json", 5); }
static void test_glm47_extra_cases(void) { check_file("tests/template_cases/glm47_extra.json", 25); }

static char *render_str(const char *preset, const char *json, err_t *err)
{
    json_error_t jerr;
    json_t *in = json_loads(json, 0, &jerr);
    if (!in) {
        err_set(err, "test JSON: %s", jerr.text);
        return NULL;
    }
    char *out = tmpl_render(tmpl_find(preset), in, err);
    json_decref(in);
    return out;
}

static void expect(const char *preset, const char *json, const char *want)
{
    err_t err;
    char *out = render_str(preset, json, &err);
    CHECK(out && strcmp(out, want) == 0, "%s: got '%.300s'", preset, out ? out : err.msg);
    free(out);
}

static void test_other_presets(void)
{
    const char *conv = "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\" Hi \"},"
                       "{\"role\":\"assistant\",\"content\":\"Yo\"},{\"role\":\"user\",\"content\":\"Q\"}],"
                       "\"add_generation_prompt\":true}";
    expect("chatml", conv,
           "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"
           "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
    expect("llama3", conv,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nYo<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect("deepseek2", conv,
           "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>S\n\nUser:  Hi \n\nAssistant: Yo"
           "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>User: Q\n\nAssistant:");
    expect("chatml", "{\"messages\":[{\"role\":\"user\",\"content\":\"Q\"}],\"add_generation_prompt\":true,\"enable_thinking\":false}",
           "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

static void test_bad_inputs_fail_cleanly(void)
{
    const char *bad[] = {
        "[1,2]",
        "{\"messages\": {\"role\": \"user\"}}",
        "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"arguments\": {}}}]}]}",
        "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"name\": \"f\", \"arguments\": 5}]}]}",
        "{\"messages\": [{\"role\": \"tool\", \"content\": 5}]}",
        "{\"messages\": [], \"tools\": {\"a\": 1}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_t err = {{0}};
        char *out = render_str("glm47", bad[i], &err);
        CHECK(out == NULL && err.msg[0] && !strchr(err.msg, '\n'), "bad input %zu was accepted", i);
        free(out);
    }
    err_t err = {{0}};
    char *out = render_str("llama3", "{\"messages\": [], \"tools\": [{\"a\": 1}]}", &err);
    CHECK(out == NULL && strstr(err.msg, "llama3"), "tools on a preset without tool support");
    free(out);
}

static void test_lookup_and_detect(void)
{
    CHECK(tmpl_find("nope") == NULL, "unknown preset");
    const char *names = tmpl_names();
    CHECK(strstr(names, "glm47") && strstr(names, "deepseek2") && strstr(names, "chatml") && strstr(names, "llama3"),
          "names: %s", names);
    const char *const *stop = tmpl_stop_texts(tmpl_find("glm47"));
    CHECK(stop[0] && !strcmp(stop[0], "<|user|>") && stop[1] && !strcmp(stop[1], "<|observation|>") && stop[2] &&
              !strcmp(stop[2], "<|endoftext|>") && !stop[3],
          "glm47 stop texts");
    float t, tp, mp;
    int tk;
    tmpl_sampling_defaults(tmpl_find("glm47"), &t, &tp, &mp, &tk);
    CHECK(t == 1.0f && tp == 0.95f && mp == 0.01f && tk == 0, "glm47 sampling defaults");
    struct {
        const char *path, *want;
    } models[] = {
        {"tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf", "glm47"},
        {"tests/data/models/tiny-lite-a/tiny-lite-a.f32.gguf", "glm47"},
        {"tests/data/tokenizer/qwen3.vocab.gguf", "chatml"},
        {"tests/data/tokenizer/llama3.vocab.gguf", "llama3"},
    };
    for (size_t i = 0; i < 4; i++) {
        err_t err;
        gguf_ctx *ctx = gguf_open(models[i].path, &err);
        CHECK(ctx != NULL, "open %s", models[i].path);
        if (!ctx)
            continue;
        const char *got = tmpl_name(tmpl_detect(ctx));
        CHECK(strcmp(got, models[i].want) == 0, "%s: detected %s, expected %s", models[i].path, got, models[i].want);
        gguf_close(ctx);
    }
}

static void test_python_number_text(void)
{
    const double v[] = {0.1, 1.0, 1e16, 1234567890123456.0, 1e-5, 0.0001, -2.5e-300, 123.456, 1e22};
    const char *want[] = {"0.1", "1.0", "1e+16", "1234567890123456.0", "1e-05", "0.0001", "-2.5e-300", "123.456", "1e+22"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        jbuf b = {0};
        py_float(&b, v[i]);
        char *s = jbuf_finish(&b);
        CHECK(s && strcmp(s, want[i]) == 0, "repr(%g) = %s, expected %s", v[i], s, want[i]);
        free(s);
    }
    json_t *obj = json_loads("{\"b\": [1, 2.5, null, true], \"a\": \"it's \\\"q\\\"\\n\"}", 0, NULL);
    jbuf b = {0};
    py_repr(&b, obj);
    jbuf_puts(&b, " | ");
    py_json(&b, obj);
    char *s = jbuf_finish(&b);
    CHECK(s && strcmp(s, "{'b': [1, 2.5, None, True], 'a': 'it\\'s \"q\"\\n'} | "
                         "{\"b\": [1, 2.5, null, true], \"a\": \"it's \\\"q\\\"\\n\"}") == 0,
          "repr/json: %s", s);
    free(s);
    json_decref(obj);
}

int main(void)
{
    RUN(test_glm47_fixture_cases);
    RUN(test_glm47_extra_cases);
    RUN(test_other_presets);
    RUN(test_bad_inputs_fail_cleanly);
    RUN(test_lookup_and_detect);
    RUN(test_python_number_text);
    TESTS_DONE();
}
