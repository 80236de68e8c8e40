/* pretokenizer.c: the regex word splitter in front of BPE.
 *
 * How llama.cpp splits, and so how we must: each pre-tokenizer is a list of
 * regexes applied in turn; every regex splits every piece left by the one
 * before, and the text between matches stays a piece of its own.  A regex
 * that uses Unicode categories (\p{L}, \p{N}, ...) does not run on the text
 * itself but on a "class string" with one byte per code point: ASCII stays
 * as it is, every other code point becomes a byte naming its class (white
 * space -> \v, number -> 0xD1, letter -> 0xD2, punctuation -> 0xD3, mark ->
 * 0xD4, symbol -> 0xD5, other -> 0xD0), and \p{X} in the pattern becomes a
 * class of that byte plus X's ASCII members.  llama.cpp's hand-written
 * splitters for the GPT-2 and Llama-3 patterns give the same boundaries as
 * the plain regex over these classes, so one mechanism covers all of them.
 * A regex without categories (the CJK ranges of the DeepSeek pre-tokenizers)
 * runs on the code points themselves, with non-ASCII white space turned
 * into \v as llama.cpp does.  Both kinds run on PCRE2, JIT-compiled. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretokenizer.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/unicode_data.h"
#include "base/utf8.h"

/* ---- the pre-tokenizers, as data ---------------------------------------- */

#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_LLAMA3                                                                             \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                          \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* CJK and kana ranges as the DeepSeek tokenizers define them. */
#define RX_CJK_DS_LLM "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"

static const char *const rx_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+",
                                         "[0-9][0-9][0-9]", NULL};
static const char *const rx_gpt2[] = {RX_GPT2, NULL};
static const char *const rx_llama3[] = {RX_LLAMA3, NULL};
static const char *const rx_qwen2[] = {RX_QWEN2, NULL};
static const char *const rx_starcoder[] = {"\\p{N}", RX_GPT2, NULL};
static const char *const rx_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]",
                                        NULL};
/* DeepSeek-LLM's letter class, code point for code point as its tokenizer
 * defines it (several members are compatibility characters such as U+1F7D,
 * U+2126 and U+212A: they must not be normalised away). */
static const char *const rx_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295"
    "-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-"
    "\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5"
    "\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-"
    "\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-"
    "\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-"
    "\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-"
    "\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e"
    "\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-"
    "\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17"
    "\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-"
    "\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-"
    "\U0001e943]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    RX_CJK_DS_LLM,
    "\\p{N}+",
    NULL};
static const char *const rx_deepseek_coder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                                RX_CJK_DS_LLM, "\\p{N}", NULL};
static const char *const rx_deepseek_v3[] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL};

typedef struct {
    const char *name;
    const char *const *regexes;
    bool ignore_merges;
    bool clean_spaces;
} pretok_def;

static const pretok_def pretok_defs[] = {
    {"default", rx_default, false, true},
    {"glm4", rx_llama3, false, true},
    {"chatglm-bpe", rx_llama3, false, true},
    {"llama-bpe", rx_llama3, true, true},
    {"llama3", rx_llama3, true, true},
    {"llama-v3", rx_llama3, true, true},
    {"falcon3", rx_llama3, true, true},
    {"pixtral", rx_llama3, true, true},
    {"dbrx", rx_llama3, false, true},
    {"smaug-bpe", rx_llama3, false, true},
    {"qwen2", rx_qwen2, false, false},
    {"deepseek-r1-qwen", rx_qwen2, false, false},
    {"stablelm2", rx_qwen2, false, true},
    {"megrez", rx_qwen2, false, true},
    {"deepseek-v3", rx_deepseek_v3, false, false},
    {"deepseek-llm", rx_deepseek_llm, false, false},
    {"deepseek-coder", rx_deepseek_coder, false, false},
    {"gpt-2", rx_gpt2, false, true},
    {"gpt2", rx_gpt2, false, true},
    {"phi-2", rx_gpt2, false, true},
    {"mpt", rx_gpt2, false, true},
    {"olmo", rx_gpt2, false, true},
    {"jina-es", rx_gpt2, false, true},
    {"jina-de", rx_gpt2, false, true},
    {"starcoder", rx_starcoder, false, true},
    {"refact", rx_starcoder, false, true},
    {"smollm", rx_starcoder, false, false},
    {"command-r", rx_starcoder, false, false},
    {"falcon", rx_falcon, false, true},
};
#define N_DEFS (sizeof pretok_defs / sizeof pretok_defs[0])

/* ---- compiled form ----------------------------------------------------------- */

#define MAX_REGEXES 8

typedef struct {
    pcre2_code *code;
    bool on_classes; /* runs on the class string (pattern used \p{..}) */
} pretok_rx;

struct pretok {
    const pretok_def *def;
    pretok_rx rx[MAX_REGEXES];
    int n_rx;
    bool need_classes, need_wide;
};

const char *pretok_names(void)
{
    static char names[1024];
    if (!names[0]) {
        size_t at = 0;
        for (size_t i = 0; i < N_DEFS && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                                   pretok_defs[i].name);
    }
    return names;
}

/* Class byte of a code point >= 128 in the class string. */
static unsigned char class_byte(uint32_t cp)
{
    static const unsigned char bytes[] = {[UNI_OTHER] = 0xD0, [UNI_N] = 0xD1, [UNI_L] = 0xD2,
                                          [UNI_P] = 0xD3,     [UNI_M] = 0xD4, [UNI_S] = 0xD5,
                                          [UNI_WS] = 0x0B};
    return bytes[uni_class_of(cp)];
}

/* The members a \p{X} stands for in the class string: its class byte and
 * its ASCII members (llama.cpp's choice of which ASCII characters are
 * punctuation and which are symbols). */
static const char *category_members(const char *name, size_t len)
{
    static const struct {
        const char *name;
        const char *members;
    } cats[] = {
        {"N", "\\xD1\\x30-\\x39"},
        {"L", "\\xD2\\x41-\\x5A\\x61-\\x7A"},
        {"Lu", "\\xD2\\x41-\\x5A\\x61-\\x7A"},
        {"Ll", "\\xD2\\x41-\\x5A\\x61-\\x7A"},
        {"Lt", "\\xD2\\x41-\\x5A\\x61-\\x7A"},
        {"Lm", "\\xD2\\x41-\\x5A\\x61-\\x7A"},
        {"Lo", "\\xD2\\x41-\\x5A\\x61-\\x7A"},
        {"P", "\\xD3\\x21-\\x23\\x25-\\x2A\\x2C-\\x2F\\x3A-\\x3B\\x3F-\\x40\\x5B-\\x5D\\x5F\\x7B\\x7D"},
        {"M", "\\xD4"},
        {"S", "\\xD5\\x24\\x2B\\x3C-\\x3E\\x5E\\x60\\x7C"},
    };
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
        if (strlen(cats[i].name) == len && memcmp(cats[i].name, name, len) == 0)
            return cats[i].members;
    return NULL;
}

static bool uses_categories(const char *rx)
{
    return strstr(rx, "\\p{") != NULL;
}

/* Rewrites \p{X} into class-string terms ([..] outside a class, bare
 * members inside one).  Returns a malloc'd pattern or NULL. */
static char *rewrite_categories(const char *rx, err_t *err)
{
    size_t n = strlen(rx);
    char *out = malloc(n * 16 + 1);
    if (!out) {
        err_set(err, "out of memory");
        return NULL;
    }
    size_t o = 0;
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        char c = rx[i];
        if (c == '\\' && i + 1 < n && rx[i + 1] == 'p' && i + 2 < n && rx[i + 2] == '{') {
            const char *close = strchr(rx + i + 3, '}');
            const char *members = close ? category_members(rx + i + 3, (size_t)(close - (rx + i + 3))) : NULL;
            if (!members) {
                free(out);
                err_set(err, "pre-tokenizer regex uses an unsupported category at '%.12s'", rx + i);
                return NULL;
            }
            o += (size_t)sprintf(out + o, inside ? "%s" : "[%s]", members);
            i = (size_t)(close - rx);
            continue;
        }
        if (c == '\\' && i + 1 < n) { /* copy escapes whole: \[ \] \\ are not brackets */
            out[o++] = c;
            out[o++] = rx[++i];
            continue;
        }
        if (c == '[')
            inside = true;
        else if (c == ']' && inside)
            inside = false;
        out[o++] = c;
    }
    out[o] = 0;
    return out;
}

static int compile_one(pretok_rx *r, const char *rx, err_t *err)
{
    char *pattern = NULL;
    uint32_t opts = PCRE2_DOLLAR_ENDONLY;
    r->on_classes = uses_categories(rx);
    if (r->on_classes) {
        pattern = rewrite_categories(rx, err);
        if (!pattern)
            return -1;
    } else {
        opts |= PCRE2_UTF;
    }
    int code;
    PCRE2_SIZE at;
    r->code = pcre2_compile((PCRE2_SPTR)(pattern ? pattern : rx), PCRE2_ZERO_TERMINATED, opts, &code,
                            &at, NULL);
    free(pattern);
    if (!r->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return err_set(err, "pre-tokenizer regex does not compile at offset %zu: %s", (size_t)at,
                       (const char *)msg);
    }
    /* JIT is an optimisation: when it is unavailable (no JIT support built
     * in, or executable memory refused) the interpreter gives the same
     * matches, only slower. */
    (void)pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);
    return 0;
}

pretok *pretok_new(const char *name, err_t *err)
{
    if (!name || !*name)
        name = "default";
    const pretok_def *def = NULL;
    for (size_t i = 0; i < N_DEFS; i++)
        if (strcmp(pretok_defs[i].name, name) == 0)
            def = &pretok_defs[i];
    if (!def) {
        err_set(err, "unknown pre-tokenizer '%s' (known: %s)", name, pretok_names());
        return NULL;
    }
    pretok *p = calloc(1, sizeof *p);
    if (!p) {
        err_set(err, "out of memory");
        return NULL;
    }
    p->def = def;
    for (int i = 0; def->regexes[i]; i++) {
        if (compile_one(&p->rx[i], def->regexes[i], err) != 0) {
            pretok_free(p);
            return NULL;
        }
        p->n_rx = i + 1;
        if (p->rx[i].on_classes)
            p->need_classes = true;
        else
            p->need_wide = true;
    }
    return p;
}

void pretok_free(pretok *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_rx; i++)
        pcre2_code_free(p->rx[i].code);
    free(p);
}

const char *pretok_name(const pretok *p)
{
    return p->def->name;
}

bool pretok_ignore_merges(const pretok *p)
{
    return p->def->ignore_merges;
}

bool pretok_clean_spaces(const pretok *p)
{
    return p->def->clean_spaces;
}

/* ---- splitting ----------------------------------------------------------- */

/* The text in the forms the regexes need, indexed by code point. */
typedef struct {
    size_t n_cp;
    char *clean;           /* UTF-8 of the code points as read */
    uint32_t *clean_off;   /* (n_cp + 1) byte offset of each code point in clean */
    unsigned char *klass;  /* (n_cp) class string, or NULL */
    char *wide;            /* UTF-8 for category-free regexes, or NULL */
    uint32_t *wide_off;    /* (n_cp + 1) */
    uint32_t *wide_cp;     /* byte offset in wide -> code point index */
} split_text;

static void split_text_free(split_text *s)
{
    free(s->clean);
    free(s->clean_off);
    free(s->klass);
    free(s->wide);
    free(s->wide_off);
    free(s->wide_cp);
}

static int split_text_build(split_text *s, const pretok *p, const char *text, size_t len, err_t *err)
{
    memset(s, 0, sizeof *s);
    if (len > (size_t)UINT32_MAX / 4)
        return err_set(err, "text of %zu bytes is too long to tokenize at once", len);
    /* Each input byte becomes at most one code point of at most 3 bytes
     * (an invalid byte turns into U+FFFD). */
    s->clean = malloc(len * 3 + 4);
    s->clean_off = malloc((len + 1) * sizeof *s->clean_off);
    if (p->need_classes)
        s->klass = malloc(len + 1);
    if (p->need_wide) {
        s->wide = malloc(len * 3 + 4);
        s->wide_off = malloc((len + 1) * sizeof *s->wide_off);
        s->wide_cp = malloc((len * 3 + 4) * sizeof *s->wide_cp);
    }
    if (!s->clean || !s->clean_off || (p->need_classes && !s->klass) ||
        (p->need_wide && (!s->wide || !s->wide_off || !s->wide_cp))) {
        split_text_free(s);
        return err_set(err, "out of memory for %zu bytes of text", len);
    }
    const unsigned char *u = (const unsigned char *)text;
    size_t at = 0, co = 0, wo = 0, n = 0;
    while (at < len) {
        size_t used;
        uint32_t cp = utf8_decode_lax(u + at, len - at, &used);
        if (cp > 0x10FFFF) /* llama.cpp cannot write these back either */
            cp = 0xFFFD;
        at += used;
        s->clean_off[n] = (uint32_t)co;
        co += utf8_encode(cp, s->clean + co);
        if (s->klass)
            s->klass[n] = cp < 0x80 ? (unsigned char)cp : class_byte(cp);
        if (s->wide) {
            uint32_t w = cp;
            if (cp >= 0x80 && uni_class_of(cp) == UNI_WS)
                w = 0x0B;
            else if (cp >= 0xD800 && cp <= 0xDFFF)
                w = 0xE000; /* PCRE2 needs valid UTF-8; no pattern matches either */
            s->wide_off[n] = (uint32_t)wo;
            size_t k = utf8_encode(w, s->wide + wo);
            for (size_t j = 0; j < k; j++)
                s->wide_cp[wo + j] = (uint32_t)n;
            wo += k;
        }
        n++;
    }
    s->clean_off[n] = (uint32_t)co;
    if (s->wide) {
        s->wide_off[n] = (uint32_t)wo;
        s->wide_cp[wo] = (uint32_t)n;
    }
    s->n_cp = n;
    return 0;
}

/* A growing list of piece ends (code point indices). */
typedef struct {
    uint32_t *v;
    size_t n, cap;
} ends_list;

static int ends_push(ends_list *l, uint32_t end, err_t *err)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        uint32_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = end;
    return 0;
}

/* Splits the piece [b, e) with one regex, appending the new piece ends. */
static int split_piece(const pretok_rx *r, const split_text *s, pcre2_match_data *md, uint32_t b,
                       uint32_t e, ends_list *out, err_t *err)
{
    const unsigned char *subj;
    size_t subj_len, base;
    if (r->on_classes) {
        subj = s->klass + b;
        subj_len = e - b;
        base = b;
    } else {
        subj = (const unsigned char *)s->wide + s->wide_off[b];
        subj_len = s->wide_off[e] - s->wide_off[b];
        base = s->wide_off[b];
    }
    uint32_t last = b;
    size_t start = 0;
    while (start < subj_len) {
        int rc = pcre2_match(r->code, subj, subj_len, start, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return err_set(err, "pre-tokenizer regex failed: %s", (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* none of our patterns match empty; never loop on one */
            start = me + 1;
            continue;
        }
        uint32_t cms = r->on_classes ? (uint32_t)(base + ms) : s->wide_cp[base + ms];
        uint32_t cme = r->on_classes ? (uint32_t)(base + me) : s->wide_cp[base + me];
        if (cms > last && ends_push(out, cms, err) != 0)
            return -1;
        if (ends_push(out, cme, err) != 0)
            return -1;
        last = cme;
        start = me;
    }
    if (last < e && ends_push(out, e, err) != 0)
        return -1;
    return 0;
}

int pretok_split(const pretok *p, const char *text, size_t len, pretok_word_fn word, void *ud,
                 err_t *err)
{
    if (len == 0)
        return 0;
    split_text s;
    if (split_text_build(&s, p, text, len, err) != 0)
        return -1;
    ends_list cur = {0}, next = {0};
    int rc = ends_push(&cur, (uint32_t)s.n_cp, err);
    pcre2_match_data *md = NULL;
    for (int i = 0; rc == 0 && i < p->n_rx; i++) {
        md = pcre2_match_data_create_from_pattern(p->rx[i].code, NULL);
        if (!md) {
            rc = err_set(err, "out of memory");
            break;
        }
        next.n = 0;
        uint32_t b = 0;
        for (size_t k = 0; rc == 0 && k < cur.n; k++) {
            rc = split_piece(&p->rx[i], &s, md, b, cur.v[k], &next, err);
            b = cur.v[k];
        }
        pcre2_match_data_free(md);
        md = NULL;
        ends_list t = cur;
        cur = next;
        next = t;
    }
    uint32_t b = 0;
    for (size_t k = 0; rc == 0 && k < cur.n; k++) {
        uint32_t e = cur.v[k];
        rc = word(ud, s.clean + s.clean_off[b], s.clean_off[e] - s.clean_off[b]);
        b = e;
    }
    free(cur.v);
    free(next.v);
    split_text_free(&s);
    return rc;
}
