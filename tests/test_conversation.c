/* test_conversation.c: conversation files (round trips, foreign and broken
 * files, atomic saves), SHA-256, times, Markdown export. */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chat/conversation.h"
#include "base/sha256.h"
#include "testlib.h"
#include "base/text_safe.h"

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%.200s/%.200s", tmpdir, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    sbuf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sbuf_add(&b, buf, n);
    fclose(f);
    return sbuf_take(&b);
}

/* xorshift64*: random but reproducible test strings. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* A string mixing ASCII, quotes, backslashes, controls, newlines, CJK, emoji. */
static char *random_text(size_t n)
{
    static const char *const pieces[] = {"a", "Z", " ", "\"", "\\", "\n", "\t", "\x1b[2J", "\x07",
                                         "é", "漢字", "🙂", "{", "}", "<|user|>", "0"};
    sbuf b = {0};
    for (size_t i = 0; i < n; i++)
        sbuf_adds(&b, pieces[rnd() % (sizeof pieces / sizeof pieces[0])]);
    return sbuf_take(&b);
}

static int same_str(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static void test_round_trip(void)
{
    conversation c;
    conv_init(&c);
    conv_set_str(&c.model_path, "/models/x.gguf");
    conv_set_str(&c.model_name, "Tiny");
    conv_set_str(&c.model_fingerprint, "sha256:00ff");
    c.model_size = 123456789012ull;
    conv_set_str(&c.tmpl, "glm47");
    c.thinking = 1;
    c.sampling = (conv_sampling){.set = true, .temp = 0.8, .top_p = 0.95, .min_p = 0.05, .top_k = 40,
                                 .repeat_penalty = 1.3, .presence_penalty = 0.5, .frequency_penalty = -0.25,
                                 .seed = 1234567890123ull, .n_predict = 256};
    for (int i = 0; i < 24; i++) {
        char *t = random_text(1 + rnd() % 60), *r = random_text(rnd() % 20);
        conv_msg *m = conv_add(&c, i == 0 ? "system" : (i % 2 ? "user" : "assistant"), t,
                               i % 2 == 0 && i ? r : NULL);
        m->time = 1700000000.0 + i * 1.5 + 0.25;
        m->n_tokens = rnd() % 1000 + 1;
        if (i % 2 == 0 && i) {
            m->tps = 12.5 + i;
            m->prefill_tps = 300.25;
            m->stopped = i == 4;
        }
        free(t);
        free(r);
    }
    char path[512];
    path_in_tmp(path, sizeof path, "rt.json");
    err_t err = {{0}};
    CHECK(conv_save(&c, path, &err) == 0, "save: %.200s", err.msg);
    conversation d;
    CHECK(conv_load(&d, path, &err) == 0, "load: %.200s", err.msg);
    CHECK(d.n == c.n, "%zu messages, expected %zu", d.n, c.n);
    for (size_t i = 0; i < c.n && i < d.n; i++) {
        conv_msg *a = &c.msgs[i], *b = &d.msgs[i];
        CHECK(!strcmp(a->role, b->role) && !strcmp(a->content, b->content) && same_str(a->reasoning, b->reasoning),
              "message %zu differs", i);
        CHECK(fabs(a->time - b->time) < 0.002 && a->n_tokens == b->n_tokens && a->stopped == b->stopped,
              "metadata of message %zu differs", i);
        CHECK_NEAR(b->tps, a->tps, 1e-6);
        CHECK_NEAR(b->prefill_tps, a->prefill_tps, 1e-6);
    }
    CHECK(same_str(d.model_path, "/models/x.gguf") && same_str(d.model_name, "Tiny") &&
              same_str(d.model_fingerprint, "sha256:00ff") && d.model_size == 123456789012ull,
          "model metadata lost");
    CHECK(same_str(d.tmpl, "glm47") && d.thinking == 1, "template metadata lost");
    CHECK(d.sampling.set && d.sampling.top_k == 40 && d.sampling.seed == 1234567890123ull &&
              d.sampling.n_predict == 256,
          "sampling lost");
    CHECK_NEAR(d.sampling.temp, 0.8, 1e-9);
    CHECK_NEAR(d.sampling.top_p, 0.95, 1e-9);
    CHECK_NEAR(d.sampling.repeat_penalty, 1.3, 1e-9);
    CHECK_NEAR(d.sampling.presence_penalty, 0.5, 1e-9);
    CHECK_NEAR(d.sampling.frequency_penalty, -0.25, 1e-9);
    CHECK(d.sampling_missing == 0, "fields reported missing: %#x", d.sampling_missing);
    CHECK(fabs(d.created - c.created) < 0.002, "created time lost");
    /* The written text holds 0.8 as "0.8" (rounded from the float setting). */
    char *text = read_text(path);
    CHECK(text && strstr(text, "\"temperature\": 0.8,"), "temperature not written as 0.8");
    CHECK(text && strstr(text, "\"repeat_penalty\": 1.3,") && strstr(text, "\"presence_penalty\": 0.5,") &&
              strstr(text, "\"frequency_penalty\": -0.25,"),
          "penalties not written");
    CHECK(text && strstr(text, "\"version\": 1"), "no version in the file");
    free(text);
    conv_free(&c);
    conv_free(&d);
}

static void test_foreign_files(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "plain.json");
    write_text(path, "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be terse.\"},"
                     "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \"},"
                     "{\"type\": \"image_url\", \"image_url\": {\"url\": \"x\"}},{\"type\": \"text\", \"text\": \"there\"}]},"
                     "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": []},"
                     "{\"role\": \"assistant\", \"content\": \"Hello\", \"reasoning_content\": \"greet\"}],"
                     "\"model\": \"gpt-something\", \"extra\": 1}");
    conversation c;
    err_t err = {{0}};
    /* "model" as a string (other tools) is a type error only for our object form. */
    int rc = conv_load(&c, path, &err);
    CHECK(rc != 0 && strstr(err.msg, "model"), "a string 'model' should be rejected clearly: %.200s", err.msg);
    conv_free(&c);
    write_text(path, "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be terse.\"},"
                     "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \"},"
                     "{\"type\": \"image_url\", \"image_url\": {\"url\": \"x\"}},{\"type\": \"text\", \"text\": \"there\"}]},"
                     "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": []},"
                     "{\"role\": \"assistant\", \"content\": \"Hello\", \"reasoning_content\": \"greet\"}], \"extra\": 1}");
    CHECK(conv_load(&c, path, &err) == 0, "plain messages file: %.200s", err.msg);
    CHECK(c.n == 4, "%zu messages", c.n);
    if (c.n == 4) {
        CHECK(!strcmp(c.msgs[0].role, "system"), "developer role not mapped to system");
        CHECK(!strcmp(c.msgs[1].content, "Hi there"), "parts joined as '%.200s'", c.msgs[1].content);
        CHECK(!strcmp(c.msgs[2].content, ""), "null content");
        CHECK(c.msgs[3].reasoning && !strcmp(c.msgs[3].reasoning, "greet"), "reasoning_content");
    }
    CHECK(c.thinking == -1 && !c.sampling.set && !c.tmpl, "metadata should be unknown");
    conv_free(&c);
}

/* Seeds of 2^63 and above were written as 2^63-1 (issue 17): they are kept
 * exactly, as a string, and both forms read back. */
static void test_big_seeds(void)
{
    static const uint64_t seeds[] = {0, 1, INT64_MAX, (uint64_t)INT64_MAX + 1, 18446744073709551615ull,
                                     12345678901234567890ull};
    char path[512];
    path_in_tmp(path, sizeof path, "seeds.json");
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        conversation c;
        conv_init(&c);
        conv_add(&c, "user", "x", NULL);
        c.sampling = (conv_sampling){.set = true, .temp = 0.5, .top_p = 0.9, .top_k = 10, .repeat_penalty = 1.0,
                                     .seed = seeds[i], .n_predict = 8};
        err_t err = {{0}};
        unlink(path);
        CHECK(conv_save(&c, path, &err) == 0, "save: %.200s", err.msg);
        conversation d;
        CHECK(conv_load(&d, path, &err) == 0, "load: %.200s", err.msg);
        CHECK(d.sampling.seed == seeds[i], "seed %llu came back as %llu", (unsigned long long)seeds[i],
              (unsigned long long)d.sampling.seed);
        char *text = read_text(path);
        CHECK(text && (seeds[i] > INT64_MAX) == (strstr(text, "\"seed\": \"") != NULL), "seed form: %.300s",
              text ? strstr(text, "\"seed\"") : "");
        free(text);
        conv_free(&c);
        conv_free(&d);
    }
    static const struct {
        const char *json;
        uint64_t seed;
        bool ok;
    } forms[] = {
        {"7", 7, true},
        {"\"7\"", 7, true},
        {"9223372036854775807", 9223372036854775807ull, true},
        {"\"18446744073709551615\"", 18446744073709551615ull, true},
        {"\"18446744073709551616\"", 0, false},
        {"\"-1\"", 0, false},
        {"\" 5\"", 0, false},
        {"\"5x\"", 0, false},
        {"\"\"", 0, false},
        {"-1", 0, false},
        {"1.5", 0, false},
        {"true", 0, false},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"messages\": [], \"sampling\": {\"seed\": %s}}", forms[i].json);
        conversation c;
        err_t err = {{0}};
        int rc = conv_parse(&c, text, strlen(text), "s.json", &err);
        CHECK((rc == 0) == forms[i].ok, "seed %s: %.200s", forms[i].json, rc == 0 ? "loaded" : err.msg);
        CHECK(rc != 0 || c.sampling.seed == forms[i].seed, "seed %s read as %llu", forms[i].json,
              (unsigned long long)c.sampling.seed);
        CHECK(rc == 0 || strstr(err.msg, "sampling.seed"), "error: %.200s", err.msg);
        conv_free(&c);
    }
}

/* Each answer's own seed (issue 28.7: /retry draws a new one) goes into its
 * turn and comes back exactly; a turn without one has none. */
static void test_turn_seeds(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "turn_seeds.json");
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "q1", NULL)->time = 1.0;
    conv_msg *a = conv_add(&c, "assistant", "a1", NULL);
    a->has_seed = true;
    a->seed = 18446744073709551615ull;
    conv_add(&c, "user", "q2", NULL)->time = 2.0;
    a = conv_add(&c, "assistant", "a2", NULL);
    a->has_seed = true;
    a->seed = 42;
    snprintf(a->draw, sizeof a->draw, "%s", SAMPLER_DRAW); /* a1: recorded before the draw was (none) */
    conv_add(&c, "user", "q3", NULL);
    conv_add(&c, "assistant", "a3 (another tool's: no seed)", NULL);
    err_t err = {{0}};
    unlink(path);
    CHECK(conv_save(&c, path, &err) == 0, "save: %.200s", err.msg);
    conversation d;
    CHECK(conv_load(&d, path, &err) == 0 && d.n == 6, "load: %.200s", err.msg);
    if (d.n == 6) {
        CHECK(d.msgs[1].has_seed && d.msgs[1].seed == 18446744073709551615ull, "a1's seed: %llu",
              (unsigned long long)d.msgs[1].seed);
        CHECK(d.msgs[3].has_seed && d.msgs[3].seed == 42, "a2's seed: %llu", (unsigned long long)d.msgs[3].seed);
        CHECK(!d.msgs[5].has_seed && !d.msgs[0].has_seed, "a seed where none was");
        /* each answer keeps the draw it was made with through a save: a file
         * from before the draw was recorded, continued, must not claim the
         * new one for its old answers */
        CHECK(!strcmp(d.msgs[3].draw, SAMPLER_DRAW) && !d.msgs[1].draw[0] && !d.msgs[5].draw[0],
              "draws: '%s' '%s' '%s'", d.msgs[1].draw, d.msgs[3].draw, d.msgs[5].draw);
    }
    conv_free(&d);
    conv_free(&c);
    static const char *const bad_draws[] = {"\"\"", "7", "\"a-name-much-too-long\"", "\"id\\u001b[2J\"",
                                            "\"Id\""};
    for (size_t i = 0; i < sizeof bad_draws / sizeof bad_draws[0]; i++) {
        char text[300];
        snprintf(text, sizeof text,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
                 "{\"role\": \"assistant\", \"content\": \"a\"}], "
                 "\"turns\": [{\"message\": 1, \"seed\": 3, \"draw\": %s}]}",
                 bad_draws[i]);
        CHECK(conv_parse(&d, text, strlen(text), "t.json", &err) != 0 && strstr(err.msg, "turns[0].draw"),
              "draw %s: %.200s", bad_draws[i], err.msg);
    }
    const char *bad = "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
                      "{\"role\": \"assistant\", \"content\": \"a\"}], "
                      "\"turns\": [{\"message\": 1, \"seed\": -3}]}";
    CHECK(conv_parse(&d, bad, strlen(bad), "t.json", &err) != 0 && strstr(err.msg, "turns[0].seed"),
          "a negative turn seed: %.200s", err.msg);
}

/* Optional fields given as null mean "absent" and load; only the turn's
 * message index may not be null. */
static void test_nulls_are_absent(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "nulls.json");
    write_text(path, "{\"format\": \"glmchat-conversation\", \"version\": 1, \"created\": null,"
                     "\"model\": {\"path\": null, \"name\": null, \"size\": null, \"fingerprint\": null},"
                     "\"template\": null, \"thinking\": null,"
                     "\"sampling\": {\"temperature\": null, \"top_k\": null, \"top_p\": null, \"min_p\": null,"
                     "\"repeat_penalty\": null, \"presence_penalty\": null, \"frequency_penalty\": null,"
                     "\"seed\": null, \"n_predict\": null},"
                     "\"messages\": [{\"role\": \"user\", \"content\": null, \"reasoning_content\": null},"
                     "{\"role\": \"assistant\", \"content\": \"a\"}],"
                     "\"turns\": [{\"message\": 1, \"time\": null, \"tokens\": null, \"tokens_per_second\": null,"
                     "\"prefill_tokens_per_second\": null, \"stopped\": null}, {\"message\": 0, \"tokens\": 3}]}");
    conversation c;
    err_t err = {{0}};
    CHECK(conv_load(&c, path, &err) == 0, "nulls: %.200s", err.msg);
    CHECK(c.n == 2 && !c.msgs[0].content[0] && !c.msgs[0].reasoning && c.msgs[0].n_tokens == 3, "messages");
    CHECK(c.n == 2 && c.msgs[1].n_tokens == 0 && !c.msgs[1].stopped && c.msgs[1].tps == 0, "turn with nulls");
    CHECK(c.thinking == -1 && !c.tmpl && !c.model_name, "null metadata is unknown");
    CHECK(c.sampling.set && c.sampling_missing == 0x1ff, "null sampling fields are missing: %#x", c.sampling_missing);
    CHECK(c.sampling.repeat_penalty == 1.0 && c.sampling.presence_penalty == 0.0 &&
              c.sampling.frequency_penalty == 0.0,
          "null penalties are off");
    conv_free(&c);
}

/* Files written before the penalties were recorded have none: they load,
 * the penalties are off and reported missing (a replay then takes the
 * current settings); each one given is read and not reported. */
static void test_penalties_absent_mean_off(void)
{
    static const char old[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"sampling\": "
                              "{\"temperature\": 1.0, \"top_k\": 0, \"top_p\": 0.95, \"min_p\": 0.01, "
                              "\"seed\": 5, \"n_predict\": 8}}";
    conversation c;
    err_t err = {{0}};
    CHECK(conv_parse(&c, old, strlen(old), "old.json", &err) == 0, "old file: %.200s", err.msg);
    unsigned pen = CONV_S_REPEAT_PENALTY | CONV_S_PRESENCE_PENALTY | CONV_S_FREQUENCY_PENALTY;
    CHECK(c.sampling.set && c.sampling_missing == pen, "missing %#x, expected %#x", c.sampling_missing, pen);
    CHECK(c.sampling.repeat_penalty == 1.0 && c.sampling.presence_penalty == 0.0 &&
              c.sampling.frequency_penalty == 0.0,
          "absent penalties are not off: %g %g %g", c.sampling.repeat_penalty, c.sampling.presence_penalty,
          c.sampling.frequency_penalty);
    CHECK(c.sampling.seed == 5 && c.sampling.n_predict == 8, "the other fields");
    conv_free(&c);
    static const struct {
        const char *json;
        unsigned missing;
        double rp, pp, fp;
    } one[] = {
        {"{\"repeat_penalty\": 1.1}", CONV_S_PRESENCE_PENALTY | CONV_S_FREQUENCY_PENALTY, 1.1, 0, 0},
        {"{\"presence_penalty\": -2}", CONV_S_REPEAT_PENALTY | CONV_S_FREQUENCY_PENALTY, 1, -2, 0},
        {"{\"frequency_penalty\": 2}", CONV_S_REPEAT_PENALTY | CONV_S_PRESENCE_PENALTY, 1, 0, 2},
        {"{\"repeat_penalty\": 0.1, \"presence_penalty\": 0, \"frequency_penalty\": 0.75}", 0, 0.1, 0, 0.75},
        {"{\"repeat_penalty\": 10}", CONV_S_PRESENCE_PENALTY | CONV_S_FREQUENCY_PENALTY, 10, 0, 0},
    };
    unsigned others = CONV_S_TEMP | CONV_S_TOP_K | CONV_S_TOP_P | CONV_S_MIN_P | CONV_S_SEED | CONV_S_N_PREDICT;
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"messages\": [], \"sampling\": %s}", one[i].json);
        int rc = conv_parse(&c, text, strlen(text), "p.json", &err);
        CHECK(rc == 0, "%s: %.200s", one[i].json, err.msg);
        CHECK(rc != 0 || c.sampling_missing == (one[i].missing | others), "%s: missing %#x", one[i].json,
              c.sampling_missing);
        CHECK(rc != 0 || (c.sampling.repeat_penalty == one[i].rp && c.sampling.presence_penalty == one[i].pp &&
                          c.sampling.frequency_penalty == one[i].fp),
              "%s: read as %g %g %g", one[i].json, c.sampling.repeat_penalty, c.sampling.presence_penalty,
              c.sampling.frequency_penalty);
        conv_free(&c);
    }
}

typedef struct {
    const char *name, *text, *expect;
} bad_case;

static void test_bad_files(void)
{
    static const bad_case cases[] = {
        {"empty", "", "empty file"},
        {"truncated", "{\"version\": 1, \"messages\": [{\"role\": \"user\", \"content\": \"hel", "line 1"},
        {"not_json", "hello\n", "not valid JSON"},
        {"array_root", "[1,2]", "top level"},
        {"no_messages", "{\"version\": 1}", "no \"messages\""},
        {"messages_not_array", "{\"messages\": {}}", "messages: expected an array"},
        {"newer_version", "{\"version\": 2, \"messages\": []}", "version 2 is newer"},
        {"zero_version", "{\"version\": 0, \"messages\": []}", "unknown conversation format version 0"},
        {"string_version", "{\"version\": \"1\", \"messages\": []}", "version: expected an integer"},
        {"other_format", "{\"format\": \"x\", \"messages\": []}", "not a glmchat conversation"},
        {"role_missing", "{\"messages\": [{\"content\": \"x\"}]}", "messages\\[0\\].role: missing"},
        {"role_bad", "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", "unknown role 'wizard'"},
        {"content_number", "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages\\[0\\].content"},
        {"dup_key", "{\"messages\": [], \"messages\": []}", "duplicate"},
        {"turn_range", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 3}]}",
         "turns\\[0\\].message: 3 is not the index of a message (the file has 1)"},
        /* "message": null once left the index at -1 and wrote msgs[-1] (issue 17). */
        {"turn_null", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"turns\": [{\"message\": null}]}",
         "turns\\[0\\].message: expected the index of a message"},
        {"turn_null_no_msgs", "{\"messages\": [], \"turns\": [{\"message\": null, \"tokens\": 7}]}",
         "turns\\[0\\].message: expected the index of a message"},
        {"turn_no_msgs", "{\"messages\": [], \"turns\": [{\"message\": 0}]}",
         "turns\\[0\\].message: 0 is not the index of a message (the file has 0)"},
        {"turn_negative", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": -1}]}",
         "turns\\[0\\].message: -1 is not the index"},
        {"turn_string", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": \"0\"}]}",
         "turns\\[0\\].message: expected the index"},
        {"turn_real", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0.5}]}",
         "turns\\[0\\].message: expected the index"},
        {"turn_missing", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"tokens\": 1}]}",
         "turns\\[0\\].message: missing"},
        {"turn_not_object", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [0]}",
         "turns\\[0\\]: expected an object"},
        {"turns_object", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": {}}",
         "turns: expected an array"},
        {"turn_tokens_negative", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0, \"tokens\": -3}]}",
         "turns\\[0\\].tokens: value out of range"},
        {"turn_tokens_huge", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0, \"tokens\": 4294967296}]}",
         "turns\\[0\\].tokens: value out of range"},
        {"turn_tps_negative", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0, \"tokens_per_second\": -1}]}",
         "turns\\[0\\].tokens_per_second: expected a speed"},
        {"turn_prefill_string", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0, \"prefill_tokens_per_second\": \"fast\"}]}",
         "turns\\[0\\].prefill_tokens_per_second: expected a number"},
        {"turn_stopped_string", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0, \"stopped\": \"yes\"}]}",
         "turns\\[0\\].stopped: expected true or false"},
        {"turn_second_bad", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0}, {\"message\": 1}]}",
         "turns\\[1\\].message: 1 is not the index"},
        {"sampling_temp_negative", "{\"messages\": [], \"sampling\": {\"temperature\": -1}}",
         "sampling.temperature: -1 is out of range"},
        {"sampling_top_p_big", "{\"messages\": [], \"sampling\": {\"top_p\": 1.5}}", "sampling.top_p: 1.5 is out of range"},
        {"sampling_not_object", "{\"messages\": [], \"sampling\": 3}", "sampling: expected an object"},
        {"sampling_repeat_zero", "{\"messages\": [], \"sampling\": {\"repeat_penalty\": 0}}",
         "sampling.repeat_penalty: 0 is out of range [0.1, 10]"},
        {"sampling_repeat_big", "{\"messages\": [], \"sampling\": {\"repeat_penalty\": 11}}",
         "sampling.repeat_penalty: 11 is out of range [0.1, 10]"},
        {"sampling_repeat_string", "{\"messages\": [], \"sampling\": {\"repeat_penalty\": \"1.3\"}}",
         "sampling.repeat_penalty: expected a number"},
        {"sampling_presence_low", "{\"messages\": [], \"sampling\": {\"presence_penalty\": -2.5}}",
         "sampling.presence_penalty: -2.5 is out of range [-2, 2]"},
        {"sampling_presence_bool", "{\"messages\": [], \"sampling\": {\"presence_penalty\": true}}",
         "sampling.presence_penalty: expected a number"},
        {"sampling_frequency_high", "{\"messages\": [], \"sampling\": {\"frequency_penalty\": 2.01}}",
         "sampling.frequency_penalty: 2.01 is out of range [-2, 2]"},
        {"sampling_frequency_array", "{\"messages\": [], \"sampling\": {\"frequency_penalty\": [1]}}",
         "sampling.frequency_penalty: expected a number"},
        {"model_size_string", "{\"messages\": [], \"model\": {\"size\": \"big\"}}", "model.size: expected an integer"},
        {"thinking_string", "{\"messages\": [], \"thinking\": \"on\"}", "thinking: expected true or false"},
        {"created_number", "{\"messages\": [], \"created\": 5}", "created: expected a string"},
        {"reasoning_number", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"reasoning_content\": 1}]}",
         "messages\\[0\\].reasoning_content: expected a string"},
        {"part_text_null", "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": null}]}]}",
         "a text part needs a string"},
        {"turn_time", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"turns\": [{\"message\": 0, \"time\": \"yesterday\"}]}",
         "turns\\[0\\].time"},
        {"nul_in_string", "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000b\"}]}", "not valid JSON"},
        {"newline_near", "{\"messages\": [\"hello \\\n\"]}", "^J' (line 2, column 0)"},
        {"role_newline", "{\"messages\": [{\"role\": \"assist\\nant\\u001b\", \"content\": \"x\"}]}",
         "unknown role 'assist^Jant^['"},
        {"bad_utf8", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        path_in_tmp(path, sizeof path, cases[i].name);
        write_text(path, cases[i].text);
        conversation c;
        err_t err = {{0}};
        int rc = conv_load(&c, path, &err);
        CHECK(rc != 0, "%.200s: loaded", cases[i].name);
        CHECK(strstr(err.msg, path) == err.msg, "%.200s: error does not start with the file name: %.200s", cases[i].name,
              err.msg);
        /* The expectations are short regexes written as plain text with \\[ escapes. */
        char want[128];
        size_t k = 0;
        for (const char *p = cases[i].expect; *p && k < sizeof want - 1; p++)
            if (*p != '\\')
                want[k++] = *p;
        want[k] = 0;
        CHECK(strstr(err.msg, want) != NULL, "%.40s: error '%.200s' lacks '%.60s'", cases[i].name, err.msg, want);
        CHECK(strchr(err.msg, '\n') == NULL, "%.200s: error is not one line", cases[i].name);
        CHECK(c.n == 0, "%.200s: messages left after a failed load", cases[i].name);
        /* A broken file is never overwritten by a save. */
        conversation n;
        conv_init(&n);
        conv_add(&n, "user", "new", NULL);
        err_t e2 = {{0}};
        CHECK(conv_save(&n, path, &e2) != 0 && strstr(e2.msg, "not overwriting"), "%.200s: save over it: %.200s",
              cases[i].name, e2.msg);
        char *after = read_text(path);
        CHECK(after && !strcmp(after, cases[i].text), "%.200s: file changed", cases[i].name);
        free(after);
        conv_free(&n);
        conv_free(&c);
    }
}

static int count_tmp_files(void)
{
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void test_atomic_save(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "atomic.json");
    conversation c;
    conv_init(&c);
    err_t err = {{0}};
    for (int round = 0; round < 5; round++) {
        char text[32];
        snprintf(text, sizeof text, "round %d", round);
        conv_add(&c, "user", text, NULL);
        CHECK(conv_save(&c, path, &err) == 0, "save %d: %.200s", round, err.msg);
        if (round == 0)
            chmod(path, 0640);
    }
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640, "mode not kept: %o", st.st_mode & 0777);
    CHECK(count_tmp_files() == 0, "temporary files left behind");
    conversation d;
    CHECK(conv_load(&d, path, &err) == 0 && d.n == 5, "reload: %.200s", err.msg);
    conv_free(&d);
    /* Saving into a missing directory fails cleanly. */
    char bad[600];
    snprintf(bad, sizeof bad, "%.200s/no/such/dir/x.json", tmpdir);
    CHECK(conv_save(&c, bad, &err) != 0 && strstr(err.msg, bad), "save into a missing dir: %.200s", err.msg);
    conv_free(&c);
}

static void test_cleanup_tmp(void)
{
    /* A child that exits leaves a pid that is certainly dead now. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    char dead[600], live[600];
    snprintf(dead, sizeof dead, "%.200s/.x.json.tmp.%ld.0", tmpdir, (long)child);
    snprintf(live, sizeof live, "%.200s/.x.json.tmp.%ld.0", tmpdir, (long)getpid());
    /* what a save's temporary holds: the start of a conversation file */
    write_text(dead, CONV_FILE_HEAD ",\n");
    write_text(live, CONV_FILE_HEAD ",\n");
    conv_cleanup_tmp(tmpdir);
    CHECK(access(dead, F_OK) != 0, "a dead writer's temporary file was kept");
    CHECK(access(live, F_OK) == 0, "a live writer's temporary file was removed");
    unlink(live);
}

/* Eight processes continue one file at once, each holding the writers'
 * lock across load-modify-save (as `-C FILE -p` does): all eight turns are
 * kept (before the lock, 8 parallel runs kept 1). */
static void test_parallel_writers_keep_every_turn(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "shared.json");
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "start", NULL);
    err_t err = {{0}};
    CHECK(conv_save(&c, path, &err) == 0, "first save: %.200s", err.msg);
    conv_free(&c);
    int go[2];
    if (pipe(go) != 0)
        return;
    pid_t kids[8];
    for (int k = 0; k < 8; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            char b;
            close(go[1]);
            if (read(go[0], &b, 1) < 0)
                _exit(3);
            conv_lock l;
            conversation mine;
            err_t e;
            if (conv_lock_acquire(&l, path, -1, &e) != 0 || conv_load(&mine, path, &e) != 0)
                _exit(1);
            char text[32];
            snprintf(text, sizeof text, "turn %d", k);
            conv_add(&mine, "user", text, NULL);
            usleep(2000); /* widen the window the lock has to protect */
            conv_add(&mine, "assistant", "ok", NULL);
            int rc = conv_save_locked(&mine, path, &e);
            conv_lock_release(&l);
            _exit(rc == 0 ? 0 : 2);
        }
    }
    close(go[0]);
    close(go[1]); /* EOF releases all children at once */
    int failed = 0;
    for (int k = 0; k < 8; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    CHECK(failed == 0, "%d writers failed", failed);
    CHECK(conv_load(&c, path, &err) == 0, "reload: %.200s", err.msg);
    CHECK(c.n == 1 + 8 * 2, "%zu messages, expected 17", c.n);
    conv_free(&c);
    char lock[600];
    snprintf(lock, sizeof lock, "%.200s/.shared.json.lock", tmpdir);
    CHECK(access(lock, F_OK) != 0, "the lock file was left behind");
}

/* A file this conversation read, changed by someone else since, is not
 * overwritten: the other writer's turn would be lost silently. */
static void test_changed_on_disk_refused(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "changed.json");
    conversation c, a, b;
    conv_init(&c);
    conv_add(&c, "user", "one", NULL);
    err_t err = {{0}};
    CHECK(conv_save(&c, path, &err) == 0, "save: %.200s", err.msg);
    CHECK(conv_load(&a, path, &err) == 0 && conv_load(&b, path, &err) == 0, "load: %.200s", err.msg);
    conv_add(&b, "user", "from b", NULL);
    CHECK(conv_save(&b, path, &err) == 0, "b: %.200s", err.msg);
    conv_add(&a, "user", "from a", NULL);
    CHECK(conv_save(&a, path, &err) != 0 && strstr(err.msg, "changed on disk"), "a saved over b's turn: %.200s",
          err.msg);
    conversation d;
    CHECK(conv_load(&d, path, &err) == 0 && d.n == 2 && !strcmp(d.msgs[1].content, "from b"), "b's file changed");
    conv_free(&d);
    /* Its own saves do not count as changes: b saves again. */
    conv_add(&b, "assistant", "again", NULL);
    CHECK(conv_save(&b, path, &err) == 0, "b again: %.200s", err.msg);
    /* A file that appeared where none was when c saved elsewhere: c never knew it. */
    unlink(path);
    CHECK(conv_save(&b, path, &err) != 0 && strstr(err.msg, "changed on disk"), "a removed file: %.200s", err.msg);
    conv_forget_files(&b);
    CHECK(conv_save(&b, path, &err) == 0, "after forgetting: %.200s", err.msg);
    conv_free(&a);
    conv_free(&b);
    conv_free(&c);
}

static int count_named(const char *prefix, const char *suffix)
{
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name), ls = strlen(suffix);
        n += !strncmp(de->d_name, prefix, strlen(prefix)) && l >= ls && !strcmp(de->d_name + l - ls, suffix);
    }
    if (d)
        closedir(d);
    return n;
}

/* New autosave files: names from the time, created exclusively, so eight
 * writers in the same second get eight files (two UIs once shared one). */
static void test_save_new_is_exclusive(void)
{
    char dir[512];
    path_in_tmp(dir, sizeof dir, "auto");
    mkdir(dir, 0700);
    int go[2];
    if (pipe(go) != 0)
        return;
    pid_t kids[8];
    for (int k = 0; k < 8; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            char b;
            close(go[1]);
            if (read(go[0], &b, 1) < 0)
                _exit(3);
            conversation c;
            conv_init(&c);
            char text[32];
            snprintf(text, sizeof text, "writer %d", k);
            conv_add(&c, "user", text, NULL);
            char path[1024];
            err_t e;
            _exit(conv_save_new(&c, dir, path, sizeof path, &e) == 0 ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]);
    int failed = 0;
    for (int k = 0; k < 8; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    CHECK(failed == 0, "%d writers failed", failed);
    DIR *d = opendir(dir);
    int files = 0, seen = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        files++;
        char p[1100];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        conversation c;
        err_t e;
        struct stat st;
        if (conv_load(&c, p, &e) == 0 && c.n == 1 && !strncmp(c.msgs[0].content, "writer ", 7))
            seen |= 1 << (c.msgs[0].content[7] - '0');
        CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600, "%.100s: mode %o", de->d_name, st.st_mode & 0777);
        conv_free(&c);
    }
    if (d)
        closedir(d);
    CHECK(files == 8 && seen == 0xff, "%d files, writers seen %#x", files, seen);
}

/* Killed writers' temporaries of a file go at its next save (64 had piled
 * up beside a -C file); other files' are left to their own writers. */
static void test_save_removes_stale_temporaries(void)
{
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    char dead[600], other[600], path[512];
    snprintf(dead, sizeof dead, "%.200s/.temps.json.tmp.%ld.0", tmpdir, (long)child);
    snprintf(other, sizeof other, "%.200s/.other.json.tmp.%ld.0", tmpdir, (long)child);
    path_in_tmp(path, sizeof path, "temps.json");
    write_text(dead, CONV_FILE_HEAD ",\n");
    write_text(other, CONV_FILE_HEAD ",\n");
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "x", NULL);
    err_t err = {{0}};
    CHECK(conv_save(&c, path, &err) == 0, "save: %.200s", err.msg);
    CHECK(access(dead, F_OK) != 0, "the file's stale temporary was kept");
    CHECK(access(other, F_OK) == 0, "another file's temporary was removed");
    CHECK(count_named(".temps.json", ".lock") == 0, "a lock file was left");
    unlink(other);
    conv_free(&c);
}

/* Exports of a conversation are private like the conversation: 0600. */
static void test_private_writes(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "export.md");
    err_t err = {{0}};
    mode_t old = umask(022);
    CHECK(conv_write_private(path, "# hi\n", 5, &err) == 0, "write: %.200s", err.msg);
    umask(old);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);
    char *text = read_text(path);
    CHECK(text && !strcmp(text, "# hi\n"), "content");
    free(text);
}

/* The lock: a second taker is told who holds it; a lock file left by a
 * holder that died is taken over and removed by the clean-up. */
static void test_lock(void)
{
    char path[512], lockfile[600];
    path_in_tmp(path, sizeof path, "locked.json");
    snprintf(lockfile, sizeof lockfile, "%.200s/.locked.json.lock", tmpdir);
    int ready[2];
    if (pipe(ready) != 0)
        return;
    pid_t holder = fork();
    if (holder == 0) {
        conv_lock l;
        err_t e;
        close(ready[0]);
        if (conv_lock_acquire(&l, path, 0, &e) != 0)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        pause(); /* until killed: its lock file stays behind */
        _exit(0);
    }
    close(ready[1]);
    char b;
    CHECK(read(ready[0], &b, 1) == 1, "the holder did not lock");
    close(ready[0]);
    conv_lock l;
    err_t err = {{0}};
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld", (long)holder);
    CHECK(conv_lock_acquire(&l, path, 0, &err) == 1 && strstr(err.msg, pid), "busy: %.200s", err.msg);
    CHECK(conv_lock_acquire(&l, path, 100, &err) == 1, "a bounded wait should give up");
    conv_cleanup_tmp(tmpdir);
    CHECK(access(lockfile, F_OK) == 0, "a held lock file was removed");
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    CHECK(access(lockfile, F_OK) == 0, "setup: the dead holder's lock file should be there");
    conv_cleanup_tmp(tmpdir);
    CHECK(access(lockfile, F_OK) != 0, "a dead holder's lock file was kept");
    /* Another program's .lock file is not ours to remove. */
    char foreign[600];
    snprintf(foreign, sizeof foreign, "%.200s/.editor.lock", tmpdir);
    write_text(foreign, "not a pid");
    conv_cleanup_tmp(tmpdir);
    CHECK(access(foreign, F_OK) == 0, "a foreign .lock file was removed");
    unlink(foreign);
}

static void test_sha256(void)
{
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        sha256_ctx h;
        unsigned char d[32];
        char hex[65];
        sha256_init(&h);
        sha256_update(&h, v[i].in, strlen(v[i].in));
        sha256_final(&h, d);
        sha256_hex(d, hex);
        CHECK(!strcmp(hex, v[i].hex), "sha256('%.200s') = %.200s", v[i].in, hex);
    }
    /* A million 'a's fed in uneven pieces. */
    sha256_ctx h;
    sha256_init(&h);
    char a[1000];
    memset(a, 'a', sizeof a);
    size_t left = 1000000;
    while (left) {
        size_t n = 1 + rnd() % 999;
        if (n > left)
            n = left;
        sha256_update(&h, a, n);
        left -= n;
    }
    unsigned char d[32];
    char hex[65];
    sha256_final(&h, d);
    sha256_hex(d, hex);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "million a: %.200s", hex);
}

static void test_fingerprint(void)
{
    /* 3 MiB + 5 of random bytes: the fingerprint covers size, head and tail. */
    size_t size = (3u << 20) + 5;
    unsigned char *data = malloc(size);
    for (size_t i = 0; i < size; i++)
        data[i] = (unsigned char)rnd();
    char path[512];
    path_in_tmp(path, sizeof path, "model.bin");
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, size, f);
    fclose(f);
    char fp_file[72], fp_mem[72];
    uint64_t got = 0;
    err_t err = {{0}};
    CHECK(conv_fingerprint(path, fp_file, &got, &err) == 0, "%.200s", err.msg);
    conv_fingerprint_mem(data, size, fp_mem);
    CHECK(got == size, "size %llu", (unsigned long long)got);
    CHECK(!strcmp(fp_file, fp_mem), "file and memory fingerprints differ");
    CHECK(!strncmp(fp_file, "sha256:", 7) && strlen(fp_file) == 71, "form: %.200s", fp_file);
    /* A change in the middle is not seen (by design: cheap); at the end it is. */
    data[size - 1] ^= 1;
    conv_fingerprint_mem(data, size, fp_mem);
    CHECK(strcmp(fp_file, fp_mem) != 0, "tail change not detected");
    data[size - 1] ^= 1;
    data[size / 2] ^= 1;
    conv_fingerprint_mem(data, size, fp_mem);
    CHECK(!strcmp(fp_file, fp_mem), "a middle byte should not be read");
    /* Small files are hashed whole (head and tail overlap). */
    conv_fingerprint_mem(data, 10, fp_mem);
    CHECK(strlen(fp_mem) == 71, "small");
    free(data);
    CHECK(conv_fingerprint("/nonexistent/x.gguf", fp_file, NULL, &err) != 0 && strstr(err.msg, "/nonexistent"),
          "missing file: %.200s", err.msg);
}

static void test_times(void)
{
    char buf[40];
    conv_format_time(1700000000.25, buf, sizeof buf);
    CHECK(!strcmp(buf, "2023-11-14T22:13:20.250Z"), "%.200s", buf);
    double t = 0;
    CHECK(conv_parse_time(buf, &t) == 0 && fabs(t - 1700000000.25) < 1e-6, "parse %.200s -> %f", buf, t);
    CHECK(conv_parse_time("2023-11-14T22:13:20Z", &t) == 0 && t == 1700000000.0, "no fraction");
    /* Every form written reads back as itself (the fuzzer found years
     * below 1000 and milliseconds that lost one on the way). */
    static const char *const forms[] = {"0226-11-22T02:04:24.157Z", "1969-12-31T23:59:59.999Z",
                                        "9999-12-31T23:59:59.001Z", "2026-11-22T02:04:24.157Z"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char again[40];
        CHECK(conv_parse_time(forms[i], &t) == 0, "%.40s does not parse", forms[i]);
        conv_format_time(t, again, sizeof again);
        CHECK(!strcmp(again, forms[i]), "%.40s comes back as %.40s", forms[i], again);
    }
    CHECK(conv_parse_time("2023-13-14T22:13:20Z", &t) != 0, "month 13 accepted");
    CHECK(conv_parse_time("2023-11-14 22:13:20Z", &t) != 0, "space accepted");
    CHECK(conv_parse_time("2023-11-14T22:13:20", &t) != 0, "no Z accepted");
}

static void test_system_and_truncate(void)
{
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "u1", NULL);
    conv_add(&c, "assistant", "a1", NULL);
    conv_set_system(&c, "sys");
    CHECK(c.n == 3 && !strcmp(c.msgs[0].role, "system") && !strcmp(c.msgs[1].content, "u1"), "insert");
    conv_set_system(&c, "sys2");
    CHECK(c.n == 3 && !strcmp(c.msgs[0].content, "sys2"), "replace");
    CHECK(conv_last(&c, "user") == 1 && conv_last(&c, "tool") == -1, "conv_last");
    conv_set_system(&c, "");
    CHECK(c.n == 2 && !strcmp(c.msgs[0].role, "user"), "remove");
    conv_truncate(&c, 1);
    CHECK(c.n == 1, "truncate");
    /* Invalid UTF-8 from a terminal becomes U+FFFD, so the JSON stays valid. */
    conv_msg *m = conv_add(&c, "user", "a\xff" "b\xc3", NULL);
    CHECK(!strcmp(m->content, "a\xef\xbf\xbd" "b\xef\xbf\xbd"), "repair: %.200s", m->content);
    char *json = conv_to_json(&c);
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    CHECK(root != NULL, "output is not JSON: %.200s", je.text);
    json_decref(root);
    free(json);
    conv_free(&c);
}

static void test_markdown(void)
{
    conversation c;
    conv_init(&c);
    conv_add(&c, "user", "title \x1b]0;pwned\x07 and \x1b[2J", NULL);
    conv_msg *m = conv_add(&c, "assistant", "answer\n```\ncode\n```", "why");
    m->tps = 10, m->n_tokens = 5;
    sbuf md = {0};
    conv_to_markdown(&c, &md);
    const char *s = sbuf_str(&md);
    CHECK(strchr(s, 0x1b) == NULL && strchr(s, 0x07) == NULL, "raw control characters in the export");
    CHECK(strstr(s, "title ^[]0;pwned^G and ^[[2J") != NULL, "inert forms missing: %.200s", s);
    CHECK(strstr(s, "## Assistant") && strstr(s, "<summary>Reasoning</summary>") && strstr(s, "```\ncode\n```"),
          "structure: %.200s", s);
    sbuf_free(&md);
    conv_free(&c);
}

static void test_tsafe_sanitize(void)
{
    sbuf b = {0};
    const char in[] = "ok\x1b[31mred\x7f\xc2\x9b\xe2\x80\xae|\t\n\xff";
    tsafe_sanitize(&b, in, sizeof in - 1, true);
    const char want[] = "ok" "\x01^[\x02" "[31mred" "\x01^?\x02" "\x01<U+009B>\x02" "\x01<U+202E>\x02"
                        "|\t\n" "\xef\xbf\xbd";
    CHECK(!strcmp(sbuf_str(&b), want), "with markers: %.200s", sbuf_str(&b));
    sbuf_clear(&b);
    tsafe_sanitize(&b, in, sizeof in - 1, false);
    CHECK(!strcmp(sbuf_str(&b), "ok^[[31mred^?<U+009B><U+202E>|\t\n\xef\xbf\xbd"), "sanitized: %.200s", sbuf_str(&b));
    sbuf_clear(&b);
    tsafe_sanitize(&b, "\x1b", 1, true);
    CHECK(!strcmp(sbuf_str(&b), "\x01^[\x02"), "markers: %.200s", sbuf_str(&b));
    sbuf_free(&b);
    CHECK(tsafe_valid("abc\xe6\xbc\xa2", 6) && !tsafe_valid("\xc0\x80", 2) && !tsafe_valid("\xed\xa0\x80", 3),
          "tsafe_valid (overlong / surrogate)");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-conv-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_round_trip);
    RUN(test_foreign_files);
    RUN(test_nulls_are_absent);
    RUN(test_big_seeds);
    RUN(test_turn_seeds);
    RUN(test_penalties_absent_mean_off);
    RUN(test_bad_files);
    RUN(test_atomic_save);
    RUN(test_cleanup_tmp);
    RUN(test_parallel_writers_keep_every_turn);
    RUN(test_changed_on_disk_refused);
    RUN(test_save_new_is_exclusive);
    RUN(test_save_removes_stale_temporaries);
    RUN(test_private_writes);
    RUN(test_lock);
    RUN(test_sha256);
    RUN(test_fingerprint);
    RUN(test_times);
    RUN(test_system_and_truncate);
    RUN(test_markdown);
    RUN(test_tsafe_sanitize);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%.200s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %.200s\n", tmpdir);
    TESTS_DONE();
}
