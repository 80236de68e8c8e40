/* test_tokenizer.c: ids and text against llama.cpp's, on real vocabularies.
 *
 * Oracles: tests/data/tokenizer/<vocab>.cases.json (llama_cpp_ids from
 * llama-tokenize with special tokens parsed, llama_cpp_detokenized from
 * llama_detokenize) for the Qwen3 and Llama-3 vocabularies, and the GLM
 * prompt ids of tests/data/FIXTURES.md for the tiny GLM vocabulary. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/pretokenizer.h"
#include "testlib.h"
#include "text/tokenizer.h"

static tokenizer *load(const char *path)
{
    err_t err;
    gguf_ctx *ctx = gguf_open(path, &err);
    if (!ctx) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    tokenizer *t = tok_load(ctx, &err);
    if (!t)
        fprintf(stderr, "%s\n", err.msg);
    gguf_close(ctx);
    return t;
}

static int64_t encode(const tokenizer *t, const char *s, size_t n, bool special, int32_t *ids, size_t cap)
{
    err_t err;
    return tok_encode(t, s, n, special, ids, cap, &err);
}

static void check_cases(const char *vocab)
{
    char path[256];
    snprintf(path, sizeof path, "tests/data/tokenizer/%s.vocab.gguf", vocab);
    tokenizer *t = load(path);
    CHECK(t != NULL, "cannot load %s", path);
    snprintf(path, sizeof path, "tests/data/tokenizer/%s.cases.json", vocab);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    CHECK(root != NULL, "%s: %s", path, jerr.text);
    if (!t || !root)
        return;
    json_t *cases = json_object_get(root, "cases");
    size_t i;
    json_t *c;
    int n_checked = 0;
    json_array_foreach(cases, i, c) {
        json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "llama_cpp_ids");
        int32_t ids[512];
        int64_t n = encode(t, json_string_value(text), json_string_length(text), true, ids, 512);
        bool same = n == (int64_t)json_array_size(want);
        for (int64_t k = 0; same && k < n; k++)
            same = ids[k] == json_integer_value(json_array_get(want, (size_t)k));
        CHECK(same, "%s case %zu ('%.40s'): ids differ from llama.cpp's", vocab, i, json_string_value(text));
        /* detokenizing llama.cpp's ids gives llama.cpp's text */
        int32_t wid[512];
        size_t nw = json_array_size(want);
        for (size_t k = 0; k < nw && k < 512; k++)
            wid[k] = (int32_t)json_integer_value(json_array_get(want, k));
        size_t len;
        err_t err;
        char *back = tok_decode(t, wid, nw, &len, &err);
        json_t *want_text = json_object_get(c, "llama_cpp_detokenized");
        CHECK(back && len == json_string_length(want_text) && memcmp(back, json_string_value(want_text), len) == 0,
              "%s case %zu: detokenized text differs", vocab, i);
        free(back);
        n_checked++;
    }
    CHECK(n_checked == 57, "%s: %d cases, expected 57", vocab, n_checked);
    json_decref(root);
    tok_free(t);
}

static void test_qwen3_cases(void) { check_cases("qwen3"); }
static void test_llama3_cases(void) { check_cases("llama3"); }

static void test_glm_prompt_ids(void)
{
    tokenizer *t = load("tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf");
    CHECK(t != NULL, "cannot load the tiny GLM vocabulary");
    if (!t)
        return;
    const char *prompt = "[gMASK]<sop><|system|>Be brief.<|user|>hello, the world is 12<|assistant|><think>";
    const int32_t want[] = {304, 306, 308, 66, 101, 274, 114, 105, 101, 102, 46, 309, 257,
                            299, 44, 262, 268, 267, 108, 100, 291, 32, 296, 310, 314};
    int32_t ids[64];
    int64_t n = encode(t, prompt, strlen(prompt), true, ids, 64);
    CHECK(n == 25 && memcmp(ids, want, sizeof want) == 0, "GLM prompt ids differ (n=%lld)", (long long)n);
    CHECK(strcmp(tok_pre_name(t), "glm4") == 0, "pre-tokenizer %s", tok_pre_name(t));
    CHECK(tok_bos(t) == 304 && tok_eos(t) == 302 && tok_eot(t) == 309 && tok_eom(t) == 311,
          "special ids %d %d %d %d", tok_bos(t), tok_eos(t), tok_eot(t), tok_eom(t));
    CHECK(tok_find(t, "<|observation|>") == 311 && tok_is_control(t, 311) && !tok_is_control(t, 66),
          "token lookup / control flags");
    tok_free(t);
}

/* Without parse_special, special-token text is ordinary text: a user
 * cannot type a turn marker into the prompt. */
static void test_special_text_not_parsed_by_default(void)
{
    tokenizer *t = load("tests/data/tokenizer/qwen3.vocab.gguf");
    CHECK(t != NULL, "load");
    if (!t)
        return;
    const char *s = "<|im_start|>user";
    int32_t ids[32];
    int64_t n = encode(t, s, strlen(s), false, ids, 32);
    bool has_special = false;
    for (int64_t i = 0; i < n; i++)
        has_special |= tok_is_control(t, ids[i]);
    CHECK(n > 2 && !has_special, "plain encoding produced a control token");
    n = encode(t, s, strlen(s), true, ids, 32);
    CHECK(n == 2 && ids[0] == 151644, "special encoding should give <|im_start|> first");
    /* the count is returned even when the buffer is too small */
    CHECK(encode(t, "Hello world", 11, false, ids, 1) == 2 && ids[0] == 9707, "cap semantics");
    CHECK(encode(t, "", 0, true, ids, 32) == 0, "empty text gives no ids");
    tok_free(t);
}

/* Invalid UTF-8 reads as U+FFFD, as llama.cpp reads it, and never crashes. */
static void test_invalid_utf8_reads_as_replacement(void)
{
    tokenizer *t = load("tests/data/tokenizer/llama3.vocab.gguf");
    CHECK(t != NULL, "load");
    if (!t)
        return;
    int32_t a[64], b[64];
    int64_t na = encode(t, "a\xff" "b\xe4\xbd", 5, false, a, 64);
    int64_t nb = encode(t, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd", 11, false, b, 64);
    CHECK(na > 0 && na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0,
          "invalid bytes should tokenize like U+FFFD");
    tok_free(t);
}

/* A tiny vocabulary built in memory: the 256 byte symbols, two merges and
 * two overlapping special tokens, to pin down the rules directly. */
static tokenizer *tiny_vocab(void)
{
    static char bytes[256][4];
    gguf_str toks[262];
    int32_t types[262];
    int n = 0;
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp = b;
        if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))) {
            unsigned k = 0;
            for (unsigned c = 0; c < b; c++)
                k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE));
            cp = 256 + k;
        }
        size_t len = cp < 0x80 ? 1 : 2;
        if (len == 1)
            bytes[b][0] = (char)cp;
        else {
            bytes[b][0] = (char)(0xC0 | (cp >> 6));
            bytes[b][1] = (char)(0x80 | (cp & 0x3F));
        }
        toks[n] = (gguf_str){bytes[b], len};
        types[n++] = TOK_TYPE_NORMAL;
    }
    const char *extra[] = {"ab", "abc", "<x>", "x>yz", "bc"};
    const int32_t extra_types[] = {TOK_TYPE_NORMAL, TOK_TYPE_NORMAL, TOK_TYPE_CONTROL, TOK_TYPE_CONTROL,
                                   TOK_TYPE_NORMAL};
    for (int i = 0; i < 5; i++) {
        toks[n] = (gguf_str){extra[i], strlen(extra[i])};
        types[n++] = extra_types[i];
    }
    /* "b c" outranks "a b": "abc" must become a + bc, never ab + c */
    gguf_str merges[3] = {{"b c", 3}, {"a b", 3}, {"ab c", 4}};
    tok_vocab v = {.n_tokens = (uint32_t)n, .tokens = toks, .types = types, .n_merges = 3,
                   .merges = merges, .pre = "gpt2", .bos = -1, .eos = -1, .eot = -1, .eom = -1};
    err_t err;
    tokenizer *t = tok_new(&v, &err);
    if (!t)
        fprintf(stderr, "%s\n", err.msg);
    return t;
}

static void test_merge_rank_order_and_special_priority(void)
{
    tokenizer *t = tiny_vocab();
    CHECK(t != NULL, "tiny vocabulary");
    if (!t)
        return;
    int32_t ids[16];
    int64_t n = encode(t, "abc", 3, false, ids, 16);
    CHECK(n == 2 && ids[0] == 'a' && ids[1] == 260, "abc -> a + bc by rank (got n=%lld)", (long long)n);
    /* "<x>yz": the longer special "x>yz" is cut out first, as llama.cpp
     * partitions, so "<" stays text */
    n = encode(t, "<x>yz", 5, true, ids, 16);
    CHECK(n == 2 && ids[0] == '<' && ids[1] == 259, "longest special first (n=%lld)", (long long)n);
    n = encode(t, "<x><x>", 6, true, ids, 16);
    CHECK(n == 2 && ids[0] == 258 && ids[1] == 258, "repeated special");
    size_t len;
    const char *p = tok_piece(t, 258, &len);
    CHECK(len == 3 && memcmp(p, "<x>", 3) == 0, "control piece is its text");
    p = tok_piece(t, ' ', &len); /* the byte symbol of 0x20 is U+0120 */
    CHECK(len == 1, "byte piece length %zu", len);
    tok_free(t);
}

/* Every pre-tokenizer compiles, and a few splits are pinned by hand from
 * the rules (the DeepSeek ones use category-free regexes too). */
typedef struct {
    char words[16][32];
    int n;
} word_list;

static int collect(void *ud, const char *w, size_t n)
{
    word_list *l = ud;
    if (l->n < 16 && n < 32) {
        memcpy(l->words[l->n], w, n);
        l->words[l->n][n] = 0;
    }
    l->n++;
    return 0;
}

static void check_split(const char *pre, const char *text, const char *const *want, int n_want)
{
    err_t err;
    pretok *p = pretok_new(pre, &err);
    CHECK(p != NULL, "%s: %.200s", pre, err.msg);
    if (!p)
        return;
    word_list l = {.n = 0};
    CHECK(pretok_split(p, text, strlen(text), collect, &l, &err) == 0, "%s split failed", pre);
    bool same = l.n == n_want;
    for (int i = 0; same && i < n_want; i++)
        same = strcmp(l.words[i], want[i]) == 0;
    CHECK(same, "%s: '%s' split into %d words, expected %d", pre, text, l.n, n_want);
    pretok_free(p);
}

static void test_pretokenizer_splits(void)
{
    const char *v3[] = {"Hello", "123", "456", " ", "\xe4\xb8\x96\xe7\x95\x8c", "abc"};
    check_split("deepseek-v3", "Hello123456 \xe4\xb8\x96\xe7\x95\x8c" "abc", v3, 6);
    const char *llm[] = {"Hi", " ", "\xe4\xbd\xa0\xe5\xa5\xbd", "\n", "2024"};
    check_split("deepseek-llm", "Hi \xe4\xbd\xa0\xe5\xa5\xbd\n2024", llm, 5);
    const char *l3[] = {"Hello", ",", " world", "  ", " ", "123", "4", "'s", "\n\n"};
    check_split("glm4", "Hello, world   1234's\n\n", l3, 9);
    const char *q2[] = {"a", "1", "2", " !!\n"};
    check_split("qwen2", "a12 !!\n", q2, 4);
    /* every named pre-tokenizer compiles */
    char names[1024];
    snprintf(names, sizeof names, "%s", pretok_names());
    for (char *save, *tok = strtok_r(names, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        err_t err;
        pretok *p = pretok_new(tok, &err);
        CHECK(p != NULL, "pre-tokenizer %s does not compile: %.200s", tok, err.msg);
        pretok_free(p);
    }
    err_t err;
    CHECK(pretok_new("no-such-pre", &err) == NULL && strstr(err.msg, "unknown pre-tokenizer"),
          "unknown names are refused");
}

int main(void)
{
    RUN(test_qwen3_cases);
    RUN(test_llama3_cases);
    RUN(test_glm_prompt_ids);
    RUN(test_special_text_not_parsed_by_default);
    RUN(test_invalid_utf8_reads_as_replacement);
    RUN(test_merge_rank_order_and_special_priority);
    RUN(test_pretokenizer_splits);
    TESTS_DONE();
}
