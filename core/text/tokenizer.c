/* tokenizer.c: byte-level BPE (GPT-2 style) with llama.cpp's exact rules.
 *
 * Encoding, in pipeline order:
 *   1. special tokens (only when asked): every occurrence of a CONTROL /
 *      USER_DEFINED / UNKNOWN token's text is cut out, longest tokens first,
 *      as llama.cpp partitions its fragments;
 *   2. each remaining stretch of text is split into words by the
 *      pre-tokenizer (pretokenizer.c);
 *   3. each word's bytes become GPT-2 byte symbols and are merged by rank:
 *      always the lowest-ranked adjacent pair, the leftmost on a tie (a
 *      binary heap of candidate pairs over a linked list of symbols).
 * Merges are keyed by the symbol ids of their two sides (a hash map of id
 * pairs -> rank and result), so the hot loop never touches strings. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pretokenizer.h"
#include "base/utf8.h"

/* ---- token attributes (llama.cpp's, so overrides combine the same way) ---- */

enum {
    ATTR_UNDEFINED = 0,
    ATTR_UNKNOWN = 1 << 0,
    ATTR_UNUSED = 1 << 1,
    ATTR_NORMAL = 1 << 2,
    ATTR_CONTROL = 1 << 3,
    ATTR_USER_DEFINED = 1 << 4,
    ATTR_BYTE = 1 << 5,
};
#define ATTR_SPECIAL (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)

/* ---- string interning: text -> symbol id ------------------------------------ */

typedef struct {
    char *bytes;
    size_t used, cap;
} arena;

typedef struct {
    uint32_t off, len; /* into the arena */
    int32_t id;        /* -1: empty slot */
} str_slot;

typedef struct {
    str_slot *slots;
    size_t mask, count;
    arena text;
} str_map;

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static int arena_add(arena *a, const char *s, size_t n, uint32_t *off)
{
    if (a->used + n > a->cap) {
        size_t cap = a->cap ? a->cap : 1 << 16;
        while (cap < a->used + n)
            cap *= 2;
        if (cap > UINT32_MAX)
            return -1;
        char *b = realloc(a->bytes, cap);
        if (!b)
            return -1;
        a->bytes = b;
        a->cap = cap;
    }
    memcpy(a->bytes + a->used, s, n);
    *off = (uint32_t)a->used;
    a->used += n;
    return 0;
}

static int str_map_init(str_map *m, size_t expect)
{
    size_t cap = 64;
    while (cap < expect * 2)
        cap *= 2;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots)
        return -1;
    for (size_t i = 0; i < cap; i++)
        m->slots[i].id = -1;
    m->mask = cap - 1;
    m->count = 0;
    return 0;
}

static str_slot *str_map_slot(const str_map *m, const char *s, size_t n)
{
    size_t i = (size_t)hash_bytes(s, n) & m->mask;
    for (;;) {
        str_slot *sl = &m->slots[i];
        if (sl->id < 0 || (sl->len == n && memcmp(m->text.bytes + sl->off, s, n) == 0))
            return sl;
        i = (i + 1) & m->mask;
    }
}

static int32_t str_map_get(const str_map *m, const char *s, size_t n)
{
    return str_map_slot(m, s, n)->id;
}

static int str_map_grow(str_map *m)
{
    str_map bigger = {0};
    if (str_map_init(&bigger, (m->mask + 1)) != 0)
        return -1;
    bigger.text = m->text;
    for (size_t i = 0; i <= m->mask; i++) {
        str_slot *old = &m->slots[i];
        if (old->id >= 0)
            *str_map_slot(&bigger, m->text.bytes + old->off, old->len) = *old;
    }
    bigger.count = m->count;
    free(m->slots);
    *m = bigger;
    return 0;
}

/* Inserts s with id `id` (must be absent). */
static int str_map_put(str_map *m, const char *s, size_t n, int32_t id)
{
    if ((m->count + 1) * 2 > m->mask + 1 && str_map_grow(m) != 0)
        return -1;
    str_slot *sl = str_map_slot(m, s, n);
    if (arena_add(&m->text, s, n, &sl->off) != 0)
        return -1;
    sl->len = (uint32_t)n;
    sl->id = id;
    m->count++;
    return 0;
}

/* ---- merges: (left id, right id) -> (rank, result id) ------------------- */

typedef struct {
    uint64_t key; /* UINT64_MAX: empty */
    int32_t rank, result;
} pair_slot;

typedef struct {
    pair_slot *slots;
    size_t mask;
} pair_map;

static inline uint64_t pair_key(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static inline size_t pair_hash(uint64_t k, size_t mask)
{
    k ^= k >> 31;
    k *= 0x9E3779B97F4A7C15ull;
    return (size_t)(k >> 29) & mask;
}

static const pair_slot *pair_map_get(const pair_map *m, int32_t a, int32_t b)
{
    uint64_t k = pair_key(a, b);
    size_t i = pair_hash(k, m->mask);
    for (;;) {
        const pair_slot *s = &m->slots[i];
        if (s->key == k)
            return s;
        if (s->key == UINT64_MAX)
            return NULL;
        i = (i + 1) & m->mask;
    }
}

/* ---- the tokenizer ---------------------------------------------------------- */

struct tokenizer {
    uint32_t n_vocab;
    str_map syms;           /* vocabulary texts (ids < n_vocab) and merge-only texts */
    uint32_t *text_off;     /* (n_vocab) token text in syms.text */
    uint32_t *text_len;
    uint16_t *attr;
    arena pieces;           /* decoded bytes of every token */
    uint32_t *piece_off, *piece_len;
    size_t max_piece;
    pair_map merges;
    int32_t byte_sym[256];  /* symbol of each raw byte (its GPT-2 character) */
    int32_t byte_fallback[256][2]; /* tokens for a byte whose symbol ends up unknown */
    int32_t *special;       /* ids matched in text with parse_special, longest first */
    uint32_t n_special;
    uint32_t special_first[257]; /* special[] index range per first byte (sorted copy) */
    int32_t *special_by_byte;
    uint32_t *special_prio;  /* (n_special) rank in special[] of each special_by_byte entry */
    pretok *pre;
    int32_t bos, eos, eot, eom;
};

/* GPT-2's byte -> code point table: printable Latin-1 maps to itself, the
 * rest to 256 + n in byte order. */
static uint32_t gpt2_cp_of_byte(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
            n++;
    return 256 + n;
}

static int gpt2_byte_of_cp(uint32_t cp)
{
    if (cp < 256)
        return ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE)) ? (int)cp : -1;
    if (cp >= 256 + 68)
        return -1; /* 68 bytes are remapped */
    uint32_t n = 0;
    for (unsigned c = 0; c < 256; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
            if (n++ == cp - 256)
                return (int)c;
    return -1;
}

uint32_t tok_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tok_bos(const tokenizer *t) { return t->bos; }
int32_t tok_eos(const tokenizer *t) { return t->eos; }
int32_t tok_eot(const tokenizer *t) { return t->eot; }
int32_t tok_eom(const tokenizer *t) { return t->eom; }
size_t tok_max_piece(const tokenizer *t) { return t->max_piece; }
const char *tok_pre_name(const tokenizer *t) { return pretok_name(t->pre); }

int32_t tok_find(const tokenizer *t, const char *text)
{
    int32_t id = str_map_get(&t->syms, text, strlen(text));
    return id >= 0 && (uint32_t)id < t->n_vocab ? id : -1;
}

bool tok_is_control(const tokenizer *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_vocab && (t->attr[id] & ATTR_CONTROL);
}

const char *tok_piece(const tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->n_vocab) {
        *len = 0;
        return "";
    }
    *len = t->piece_len[id];
    return t->pieces.bytes + t->piece_off[id];
}

void tok_free(tokenizer *t)
{
    if (!t)
        return;
    free(t->syms.slots);
    free(t->syms.text.bytes);
    free(t->text_off);
    free(t->text_len);
    free(t->attr);
    free(t->pieces.bytes);
    free(t->piece_off);
    free(t->piece_len);
    free(t->merges.slots);
    free(t->special);
    free(t->special_by_byte);
    free(t->special_prio);
    pretok_free(t->pre);
    free(t);
}

/* ---- loading ---------------------------------------------------------------- */

static uint16_t attr_of_type(int32_t type)
{
    switch (type) {
    case TOK_TYPE_NORMAL: return ATTR_NORMAL;
    case TOK_TYPE_UNKNOWN: return ATTR_UNKNOWN;
    case TOK_TYPE_CONTROL: return ATTR_CONTROL;
    case TOK_TYPE_USER_DEFINED: return ATTR_USER_DEFINED;
    case TOK_TYPE_UNUSED: return ATTR_UNUSED;
    case TOK_TYPE_BYTE: return ATTR_BYTE;
    default: return ATTR_UNDEFINED;
    }
}

/* llama.cpp marks tokens by their text when the converter left them
 * NORMAL: end-of-generation and fill-in-the-middle tokens become CONTROL
 * (so they are matched as special tokens and printed as text), a few
 * gpt-oss tokens become USER_DEFINED.  Matching that keeps ids equal. */
static void apply_attr_overrides(tokenizer *t)
{
    static const char *const control_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[",
        /* fill-in-the-middle */
        "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>",
        "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",
        "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>",
        "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", "<|fim_pad|>",
        "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
        "<REPO>", "<reponame>", "<|file_sep|>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    };
    static const char *const user_texts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < sizeof control_texts / sizeof control_texts[0]; i++) {
        int32_t id = tok_find(t, control_texts[i]);
        if (id >= 0)
            t->attr[id] |= ATTR_CONTROL;
    }
    for (size_t i = 0; i < sizeof user_texts / sizeof user_texts[0]; i++) {
        int32_t id = tok_find(t, user_texts[i]);
        if (id >= 0)
            t->attr[id] = ATTR_USER_DEFINED;
    }
    /* Harmony-style vocabularies: <|end|> ends a message, not generation. */
    int32_t end = tok_find(t, "<|end|>");
    bool call = tok_find(t, "<|call|>") >= 0 || tok_find(t, "<|calls|>") >= 0;
    if (end >= 0 && call && (tok_find(t, "<|return|>") >= 0 || tok_find(t, "<|flush|>") >= 0))
        t->attr[end] = ATTR_USER_DEFINED;
    int32_t s_end = tok_find(t, "</s>");
    if (s_end >= 0 && tok_find(t, "<|tool_response>") >= 0)
        t->attr[s_end] = ATTR_NORMAL;
}

/* The bytes a token stands for: special tokens their text, normal tokens
 * their GPT-2 characters turned back into bytes, byte tokens (<0xAB>) their
 * byte, anything else nothing. */
static int build_piece(tokenizer *t, int32_t id)
{
    const char *text = t->syms.text.bytes + t->text_off[id];
    size_t n = t->text_len[id];
    uint16_t a = t->attr[id];
    char local[64];
    char *buf = local;
    size_t cap = sizeof local, len = 0;
    if (a & ATTR_SPECIAL) {
        buf = (char *)text;
        len = n;
    } else if (a & ATTR_NORMAL) {
        size_t need = n * 2 + 64 + n; /* room for an [UNK_BYTE_..] marker */
        if (need > cap) {
            buf = malloc(need);
            if (!buf)
                return -1;
            cap = need;
        }
        for (size_t i = 0; i < n;) {
            size_t used;
            uint32_t cp = utf8_decode_lax((const unsigned char *)text + i, n - i, &used);
            int b = gpt2_byte_of_cp(cp);
            if (b >= 0) {
                buf[len++] = (char)b;
            } else { /* llama.cpp writes a visible marker for a character outside the byte map */
                char u[4];
                size_t k = utf8_encode(cp, u);
                if (len + 16 + 2 * k + n + 1 > cap) {
                    size_t ncap = (len + 16 + 2 * k + n + 1) * 2;
                    char *nb = buf == local ? malloc(ncap) : realloc(buf, ncap);
                    if (!nb) {
                        if (buf != local)
                            free(buf);
                        return -1;
                    }
                    if (buf == local)
                        memcpy(nb, local, len);
                    buf = nb;
                    cap = ncap;
                }
                len += (size_t)sprintf(buf + len, "[UNK_BYTE_0x");
                for (size_t j = 0; j < k; j++)
                    len += (size_t)sprintf(buf + len, "%02x", (unsigned char)u[j]);
                memcpy(buf + len, text, n);
                len += n;
                buf[len++] = ']';
            }
            i += used;
        }
    } else if ((a & ATTR_BYTE) && n >= 5) {
        char hex[3] = {text[3], text[4], 0};
        local[0] = (char)strtol(hex, NULL, 16);
        len = 1;
    }
    uint32_t off = 0;
    int rc = len ? arena_add(&t->pieces, buf, len, &off) : 0;
    if (buf != local && buf != text)
        free(buf);
    t->piece_off[id] = off;
    t->piece_len[id] = (uint32_t)len;
    if (len > t->max_piece)
        t->max_piece = len;
    return rc;
}

/* Interns a text that a merge mentions; ids past the vocabulary name texts
 * that are not tokens (a merge whose result is not in the vocabulary still
 * merges, as in llama.cpp, and its bytes fall back to byte tokens). */
static int32_t intern(tokenizer *t, const char *s, size_t n, int32_t *next_id)
{
    int32_t id = str_map_get(&t->syms, s, n);
    if (id >= 0)
        return id;
    id = (*next_id)++;
    return str_map_put(&t->syms, s, n, id) == 0 ? id : -2;
}

static int load_merges(tokenizer *t, const tok_vocab *v, err_t *err)
{
    size_t cap = 64;
    while (cap < v->n_merges * 2 + 2)
        cap *= 2;
    t->merges.slots = malloc(cap * sizeof *t->merges.slots);
    if (!t->merges.slots)
        return err_set(err, "out of memory for %llu merges", (unsigned long long)v->n_merges);
    for (size_t i = 0; i < cap; i++)
        t->merges.slots[i].key = UINT64_MAX;
    t->merges.mask = cap - 1;
    int32_t next_id = (int32_t)t->n_vocab;
    char *joined = NULL;
    size_t joined_cap = 0;
    for (uint64_t r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r].ptr;
        size_t n = (size_t)v->merges[r].len;
        const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL; /* split at the first space after byte 0 */
        if (!sp)
            continue;
        size_t na = (size_t)(sp - m), nb = n - na - 1;
        if (n > joined_cap) {
            free(joined);
            joined_cap = n * 2;
            joined = malloc(joined_cap);
            if (!joined)
                return err_set(err, "out of memory");
        }
        memcpy(joined, m, na);
        memcpy(joined + na, sp + 1, nb);
        int32_t a = intern(t, m, na, &next_id);
        int32_t b = intern(t, sp + 1, nb, &next_id);
        int32_t c = intern(t, joined, na + nb, &next_id);
        if (a < 0 || b < 0 || c < 0) {
            free(joined);
            return err_set(err, "out of memory");
        }
        uint64_t k = pair_key(a, b);
        size_t i = pair_hash(k, t->merges.mask);
        while (t->merges.slots[i].key != UINT64_MAX && t->merges.slots[i].key != k)
            i = (i + 1) & t->merges.mask;
        if (t->merges.slots[i].key == UINT64_MAX) /* a repeated merge keeps its first rank */
            t->merges.slots[i] = (pair_slot){k, (int32_t)r, c};
    }
    free(joined);
    return 0;
}

static int cmp_special(const void *pa, const void *pb, void *ctx)
{
    const tokenizer *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (t->text_len[a] != t->text_len[b])
        return t->text_len[a] > t->text_len[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int cmp_special_byte(const void *pa, const void *pb, void *ctx)
{
    const tokenizer *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    unsigned char fa = (unsigned char)t->syms.text.bytes[t->text_off[a]];
    unsigned char fb = (unsigned char)t->syms.text.bytes[t->text_off[b]];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    return cmp_special(pa, pb, ctx);
}

/* The special-token table: ids by descending length (llama.cpp's order of
 * partitioning), and a copy grouped by first byte for scanning text. */
static int build_specials(tokenizer *t, err_t *err)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & ATTR_SPECIAL) && t->text_len[i] > 0)
            n++;
    t->special = malloc((n + 1) * sizeof *t->special);
    t->special_by_byte = malloc((n + 1) * sizeof *t->special_by_byte);
    t->special_prio = malloc((n + 1) * sizeof *t->special_prio);
    if (!t->special || !t->special_by_byte || !t->special_prio)
        return err_set(err, "out of memory");
    n = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & ATTR_SPECIAL) && t->text_len[i] > 0)
            t->special[n++] = (int32_t)i;
    t->n_special = n;
    qsort_r(t->special, n, sizeof *t->special, cmp_special, t);
    memcpy(t->special_by_byte, t->special, n * sizeof *t->special);
    qsort_r(t->special_by_byte, n, sizeof *t->special, cmp_special_byte, t);
    uint32_t k = 0;
    for (unsigned b = 0; b < 256; b++) {
        t->special_first[b] = k;
        while (k < n && (unsigned char)t->syms.text.bytes[t->text_off[t->special_by_byte[k]]] == b)
            k++;
    }
    t->special_first[256] = n;
    /* rank of each entry in the longest-first order (both lists are sorted
     * by the same key within a first byte, so a merge walk would do; a
     * lookup through a temporary table is simpler) */
    uint32_t *rank = malloc((size_t)t->n_vocab * sizeof *rank);
    if (!rank)
        return err_set(err, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        rank[t->special[i]] = i;
    for (uint32_t i = 0; i < n; i++)
        t->special_prio[i] = rank[t->special_by_byte[i]];
    free(rank);
    return 0;
}

static void build_byte_tables(tokenizer *t)
{
    for (unsigned b = 0; b < 256; b++) {
        char u[4];
        size_t k = utf8_encode(gpt2_cp_of_byte(b), u);
        t->byte_sym[b] = str_map_get(&t->syms, u, k);
        /* llama.cpp's fallback looks up each byte of the GPT-2 character
         * as a one-byte token (only ASCII ones can exist). */
        for (size_t j = 0; j < 2; j++) {
            int32_t id = j < k ? str_map_get(&t->syms, u + j, 1) : -1;
            t->byte_fallback[b][j] = id >= 0 && (uint32_t)id < t->n_vocab ? id : -1;
        }
    }
}

static int32_t valid_id(const tokenizer *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_vocab ? id : -1;
}

tokenizer *tok_new(const tok_vocab *v, err_t *err)
{
    if (v->n_tokens == 0 || v->n_tokens > (1u << 30)) {
        err_set(err, "vocabulary has %u tokens", v->n_tokens);
        return NULL;
    }
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(err, "out of memory");
        return NULL;
    }
    t->n_vocab = v->n_tokens;
    t->pre = pretok_new(v->pre, err);
    if (!t->pre)
        goto fail;
    t->text_off = malloc(v->n_tokens * sizeof *t->text_off);
    t->text_len = malloc(v->n_tokens * sizeof *t->text_len);
    t->attr = malloc(v->n_tokens * sizeof *t->attr);
    t->piece_off = malloc(v->n_tokens * sizeof *t->piece_off);
    t->piece_len = malloc(v->n_tokens * sizeof *t->piece_len);
    if (!t->text_off || !t->text_len || !t->attr || !t->piece_off || !t->piece_len ||
        str_map_init(&t->syms, v->n_tokens + v->n_merges / 8 + 16) != 0) {
        err_set(err, "out of memory for %u tokens", v->n_tokens);
        goto fail;
    }
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        const char *s = v->tokens[i].ptr;
        size_t n = (size_t)v->tokens[i].len;
        char empty[32];
        if (n == 0) { /* llama.cpp names empty tokens so they stay unique */
            n = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", i);
            s = empty;
        }
        if (n > UINT32_MAX / 4) {
            err_set(err, "token %u is %zu bytes long", i, n);
            goto fail;
        }
        str_slot *sl = str_map_slot(&t->syms, s, n);
        if (sl->id >= 0) {
            err_set(err, "duplicate token in vocabulary: '%.*s' has ids %d and %u", (int)(n < 64 ? n : 64),
                    s, sl->id, i);
            goto fail;
        }
        if (str_map_put(&t->syms, s, n, (int32_t)i) != 0) {
            err_set(err, "out of memory");
            goto fail;
        }
        t->text_off[i] = str_map_slot(&t->syms, s, n)->off;
        t->text_len[i] = (uint32_t)n;
        t->attr[i] = v->types ? attr_of_type(v->types[i]) : ATTR_NORMAL;
    }
    apply_attr_overrides(t);
    for (uint32_t i = 0; i < v->n_tokens; i++)
        if (build_piece(t, (int32_t)i) != 0) {
            err_set(err, "out of memory");
            goto fail;
        }
    if (load_merges(t, v, err) != 0 || build_specials(t, err) != 0)
        goto fail;
    build_byte_tables(t);
    t->bos = valid_id(t, v->bos);
    t->eos = valid_id(t, v->eos);
    t->eot = valid_id(t, v->eot);
    t->eom = valid_id(t, v->eom);
    if (t->eot < 0) { /* as llama.cpp: find the end-of-turn token by its text */
        static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                                "<|endoftext|>", "<|end_of_text|>", "<EOT>"};
        for (size_t i = 0; i < sizeof eot_texts / sizeof eot_texts[0] && t->eot < 0; i++)
            t->eot = tok_find(t, eot_texts[i]);
    }
    if (t->eom < 0)
        t->eom = tok_find(t, "<|eom_id|>");
    return t;
fail:
    tok_free(t);
    return NULL;
}

/* Reads an optional token id key; -1 when absent. */
static int get_id(const gguf_ctx *ctx, const char *key, int32_t *out, err_t *err)
{
    *out = -1;
    if (!gguf_has_key(ctx, key))
        return 0;
    uint32_t v;
    if (gguf_get_u32(ctx, key, &v, err) != 0)
        return -1;
    *out = v > INT32_MAX ? -1 : (int32_t)v;
    return 0;
}

static int get_str_array(const gguf_ctx *ctx, const char *key, gguf_str **out, uint64_t *n,
                         err_t *err)
{
    gguf_arr arr;
    if (gguf_get_arr(ctx, key, &arr, err) != 0)
        return -1;
    if (arr.elem_type != GGUF_TYPE_STRING)
        return err_set(err, "%s: key '%s' holds %s, expected an array of strings", gguf_path(ctx),
                       key, gguf_type_name(arr.elem_type));
    *out = malloc((arr.n ? arr.n : 1) * sizeof **out);
    if (!*out)
        return err_set(err, "out of memory for %llu strings", (unsigned long long)arr.n);
    for (uint64_t i = 0; i < arr.n; i++)
        if (gguf_get_arr_str(ctx, &arr, i, &(*out)[i], err) != 0) {
            free(*out);
            *out = NULL;
            return -1;
        }
    *n = arr.n;
    return 0;
}

tokenizer *tok_load(const gguf_ctx *ctx, err_t *err)
{
    gguf_str model;
    if (gguf_get_str(ctx, "tokenizer.ggml.model", &model, err) != 0)
        return NULL;
    if (!(model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0)) {
        err_set(err, "%s: tokenizer model '%.*s' is not supported (only gpt2 byte-level BPE)",
                gguf_path(ctx), (int)(model.len < 64 ? model.len : 64), model.ptr);
        return NULL;
    }
    char pre[128] = "";
    if (gguf_has_key(ctx, "tokenizer.ggml.pre")) {
        gguf_str s;
        if (gguf_get_str(ctx, "tokenizer.ggml.pre", &s, err) != 0)
            return NULL;
        snprintf(pre, sizeof pre, "%.*s", (int)(s.len < 127 ? s.len : 127), s.ptr);
    }
    tok_vocab v = {0};
    gguf_str *tokens = NULL, *merges = NULL;
    int32_t *types = NULL;
    uint64_t n_tokens = 0;
    tokenizer *t = NULL;
    if (get_str_array(ctx, "tokenizer.ggml.tokens", &tokens, &n_tokens, err) != 0)
        goto done;
    if (n_tokens == 0 || n_tokens > (1u << 30)) {
        err_set(err, "%s: tokenizer.ggml.tokens has %llu entries", gguf_path(ctx),
                (unsigned long long)n_tokens);
        goto done;
    }
    if (get_str_array(ctx, "tokenizer.ggml.merges", &merges, &v.n_merges, err) != 0)
        goto done;
    if (gguf_has_key(ctx, "tokenizer.ggml.token_type")) {
        gguf_arr arr;
        if (gguf_get_arr(ctx, "tokenizer.ggml.token_type", &arr, err) != 0)
            goto done;
        if ((arr.elem_type != GGUF_TYPE_INT32 && arr.elem_type != GGUF_TYPE_UINT32) || arr.n < n_tokens) {
            err_set(err, "%s: tokenizer.ggml.token_type must be %llu int32 values (has %llu of %s)",
                    gguf_path(ctx), (unsigned long long)n_tokens, (unsigned long long)arr.n,
                    gguf_type_name(arr.elem_type));
            goto done;
        }
        types = malloc(n_tokens * sizeof *types);
        if (!types) {
            err_set(err, "out of memory");
            goto done;
        }
        memcpy(types, arr.data, n_tokens * sizeof *types);
    }
    if (get_id(ctx, "tokenizer.ggml.bos_token_id", &v.bos, err) != 0 ||
        get_id(ctx, "tokenizer.ggml.eos_token_id", &v.eos, err) != 0 ||
        get_id(ctx, "tokenizer.ggml.eot_token_id", &v.eot, err) != 0 ||
        get_id(ctx, "tokenizer.ggml.eom_token_id", &v.eom, err) != 0)
        goto done;
    v.n_tokens = (uint32_t)n_tokens;
    v.tokens = tokens;
    v.types = types;
    v.merges = merges;
    v.pre = pre[0] ? pre : NULL;
    t = tok_new(&v, err);
    if (!t)
        err_prefix(err, "%s", gguf_path(ctx));
done:
    free(tokens);
    free(merges);
    free(types);
    return t;
}

/* ---- encoding ------------------------------------------------------------------ */

typedef struct {
    int32_t rank;
    uint32_t left, right;
} bigram;

/* Scratch for one encode call, grown to the longest word seen. */
typedef struct {
    const tokenizer *t;
    int32_t *ids;
    size_t cap, n; /* ids written / needed */
    int32_t *sym;
    uint32_t *len, *prev, *next;
    bigram *heap;
    size_t word_cap, heap_cap, heap_n;
    char *enc; /* GPT-2 encoded word (ignore_merges lookups) */
    size_t enc_cap;
    err_t *err;
} encoder;

static void emit(encoder *e, int32_t id)
{
    if (e->n < e->cap)
        e->ids[e->n] = id;
    e->n++;
}

static bool bigram_less(const bigram *a, const bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int heap_push(encoder *e, bigram b)
{
    if (e->heap_n == e->heap_cap) {
        size_t cap = e->heap_cap ? e->heap_cap * 2 : 256;
        bigram *h = realloc(e->heap, cap * sizeof *h);
        if (!h)
            return err_set(e->err, "out of memory");
        e->heap = h;
        e->heap_cap = cap;
    }
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_less(&b, &e->heap[p]))
            break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = b;
    return 0;
}

static bigram heap_pop(encoder *e)
{
    bigram top = e->heap[0], last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && bigram_less(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!bigram_less(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n)
        e->heap[i] = last;
    return top;
}

static int try_pair(encoder *e, uint32_t left, uint32_t right)
{
    if (e->sym[left] < 0 || e->sym[right] < 0)
        return 0;
    const pair_slot *m = pair_map_get(&e->t->merges, e->sym[left], e->sym[right]);
    if (!m)
        return 0;
    return heap_push(e, (bigram){m->rank, left, right});
}

static int grow_word(encoder *e, size_t n)
{
    if (n <= e->word_cap)
        return 0;
    size_t cap = n * 2;
    int32_t *sym = realloc(e->sym, cap * sizeof *sym);
    if (sym)
        e->sym = sym;
    uint32_t *len = realloc(e->len, cap * sizeof *len);
    if (len)
        e->len = len;
    uint32_t *prev = realloc(e->prev, cap * sizeof *prev);
    if (prev)
        e->prev = prev;
    uint32_t *next = realloc(e->next, cap * sizeof *next);
    if (next)
        e->next = next;
    if (!sym || !len || !prev || !next)
        return err_set(e->err, "out of memory for a word of %zu bytes", n);
    e->word_cap = cap;
    return 0;
}

/* With ignore_merges, a word that is itself a token is taken whole. */
static int32_t whole_word_token(encoder *e, const unsigned char *w, size_t n)
{
    if (n * 2 > e->enc_cap) {
        char *b = realloc(e->enc, n * 2 + 16);
        if (!b)
            return -1;
        e->enc = b;
        e->enc_cap = n * 2 + 16;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += utf8_encode(gpt2_cp_of_byte(w[i]), e->enc + k);
    int32_t id = str_map_get(&e->t->syms, e->enc, k);
    return id >= 0 && (uint32_t)id < e->t->n_vocab ? id : -1;
}

static int bpe_word(void *ud, const char *word, size_t n)
{
    encoder *e = ud;
    const tokenizer *t = e->t;
    const unsigned char *w = (const unsigned char *)word;
    if (n == 0)
        return 0;
    if (pretok_ignore_merges(t->pre)) {
        int32_t id = whole_word_token(e, w, n);
        if (id >= 0) {
            emit(e, id);
            return 0;
        }
    }
    if (grow_word(e, n) != 0)
        return -1;
    const uint32_t NONE = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        e->sym[i] = t->byte_sym[w[i]];
        e->len[i] = 1;
        e->prev[i] = i ? (uint32_t)i - 1 : NONE;
        e->next[i] = i + 1 < n ? (uint32_t)i + 1 : NONE;
    }
    e->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (try_pair(e, (uint32_t)i, (uint32_t)i + 1) != 0)
            return -1;
    while (e->heap_n) {
        bigram b = heap_pop(e);
        /* Stale when either side has been merged away or has grown since. */
        if (e->len[b.left] == 0 || e->len[b.right] == 0 || e->next[b.left] != b.right)
            continue;
        const pair_slot *m = pair_map_get(&t->merges, e->sym[b.left], e->sym[b.right]);
        if (!m || m->rank != b.rank)
            continue;
        e->sym[b.left] = m->result;
        e->len[b.left] += e->len[b.right];
        e->len[b.right] = 0;
        e->next[b.left] = e->next[b.right];
        if (e->next[b.right] != NONE)
            e->prev[e->next[b.right]] = b.left;
        if (e->prev[b.left] != NONE && try_pair(e, e->prev[b.left], b.left) != 0)
            return -1;
        if (e->next[b.left] != NONE && try_pair(e, b.left, e->next[b.left]) != 0)
            return -1;
    }
    for (uint32_t i = 0; i != NONE; i = e->next[i]) {
        int32_t s = e->sym[i];
        if (s >= 0 && (uint32_t)s < t->n_vocab) {
            emit(e, s);
            continue;
        }
        for (uint32_t j = i; j < i + e->len[i]; j++) /* not a token: byte fallback */
            for (int k = 0; k < 2; k++)
                if (t->byte_fallback[w[j]][k] >= 0)
                    emit(e, t->byte_fallback[w[j]][k]);
    }
    return 0;
}

static int encode_plain(encoder *e, const char *text, size_t len)
{
    return pretok_split(e->t->pre, text, len, bpe_word, e, e->err);
}

typedef struct {
    size_t pos;
    int32_t id;
    uint32_t prio;
} special_match;

static int cmp_match_prio(const void *pa, const void *pb)
{
    const special_match *a = pa, *b = pb;
    if (a->prio != b->prio)
        return a->prio < b->prio ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static int cmp_match_pos(const void *pa, const void *pb)
{
    const special_match *a = pa, *b = pb;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* Finds every occurrence of every special token, then keeps them the way
 * llama.cpp's partition does: tokens in order of priority (longest first),
 * each one's occurrences left to right, an occurrence kept only if none of
 * its bytes is already taken. */
static int find_specials(const tokenizer *t, const char *text, size_t len, special_match **out,
                         size_t *n_out, err_t *err)
{
    *out = NULL;
    *n_out = 0;
    if (t->n_special == 0)
        return 0;
    special_match *m = NULL;
    size_t n = 0, cap = 0;
    for (size_t p = 0; p < len; p++) {
        unsigned char c = (unsigned char)text[p];
        for (uint32_t k = t->special_first[c]; k < t->special_first[c + 1]; k++) {
            int32_t id = t->special_by_byte[k];
            size_t l = t->text_len[id];
            if (l > len - p || memcmp(text + p, t->syms.text.bytes + t->text_off[id], l) != 0)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                special_match *nm = realloc(m, cap * sizeof *nm);
                if (!nm) {
                    free(m);
                    return err_set(err, "out of memory");
                }
                m = nm;
            }
            m[n++] = (special_match){p, id, t->special_prio[k]};
        }
    }
    if (n == 0) {
        free(m);
        return 0;
    }
    unsigned char *taken = calloc(len, 1);
    if (!taken) {
        free(m);
        return err_set(err, "out of memory");
    }
    qsort(m, n, sizeof *m, cmp_match_prio);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = t->text_len[m[i].id];
        bool free_range = memchr(taken + m[i].pos, 1, l) == NULL;
        if (!free_range)
            continue;
        memset(taken + m[i].pos, 1, l);
        m[kept++] = m[i];
    }
    free(taken);
    qsort(m, kept, sizeof *m, cmp_match_pos);
    *out = m;
    *n_out = kept;
    return 0;
}

int64_t tok_encode(const tokenizer *t, const char *text, size_t len, bool parse_special,
                   int32_t *ids, size_t cap, err_t *err)
{
    encoder e = {.t = t, .ids = ids, .cap = ids ? cap : 0, .err = err};
    int rc = 0;
    if (parse_special) {
        special_match *m;
        size_t n;
        if (find_specials(t, text, len, &m, &n, err) != 0)
            return -1;
        size_t at = 0;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            rc = encode_plain(&e, text + at, m[i].pos - at);
            emit(&e, m[i].id);
            at = m[i].pos + t->text_len[m[i].id];
        }
        if (rc == 0)
            rc = encode_plain(&e, text + at, len - at);
        free(m);
    } else {
        rc = encode_plain(&e, text, len);
    }
    free(e.sym);
    free(e.len);
    free(e.prev);
    free(e.next);
    free(e.heap);
    free(e.enc);
    return rc == 0 ? (int64_t)e.n : -1;
}

/* ---- decoding ------------------------------------------------------------------ */

/* llama.cpp's clean_up_tokenization_spaces, three passes over the text:
 * " ?", " !", " .", " ," lose the space; a lone "'" between spaces loses
 * both; " 's", " 'm", " 're", " 've" lose the space. */
static size_t clean_spaces(char *s, size_t n)
{
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        s[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
            total--;
            s[++i] = '\0';
        }
        s[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = s[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--;
            else if (i + 2 < n && ((x1 == 'r' && s[i + 2] == 'e') || (x1 == 'v' && s[i + 2] == 'e')))
                total--;
        }
        s[total++] = x;
    }
    return total;
}

char *tok_decode(const tokenizer *t, const int32_t *ids, size_t n, size_t *len, err_t *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_vocab) {
            err_set(err, "token id %d is outside the vocabulary (0..%u)", ids[i], t->n_vocab - 1);
            return NULL;
        }
        total += t->piece_len[ids[i]];
    }
    char *out = malloc(total + 1);
    if (!out) {
        err_set(err, "out of memory for %zu bytes", total);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + at, t->pieces.bytes + t->piece_off[ids[i]], t->piece_len[ids[i]]);
        at += t->piece_len[ids[i]];
    }
    if (pretok_clean_spaces(t->pre))
        at = clean_spaces(out, at);
    out[at] = 0;
    *len = at;
    return out;
}

/* ---- streaming decoder ----------------------------------------------------------- */

void tok_stream_init(tok_stream *s, const tokenizer *t)
{
    s->t = t;
    s->n_pending = 0;
}

typedef struct {
    char *out;
    size_t cap, n; /* cap excludes the NUL */
} sink;

static void put(sink *k, const void *p, size_t n)
{
    if (k->n + n > k->cap)
        return; /* the caller gave too little room: drop rather than split */
    memcpy(k->out + k->n, p, n);
    k->n += n;
}

/* Moves every complete or invalid sequence out of pending. */
static void drain(tok_stream *s, sink *k, bool final)
{
    while (s->n_pending) {
        int r = utf8_check(s->pending, s->n_pending);
        size_t used;
        if (r > 0) {
            put(k, s->pending, (size_t)r);
            used = (size_t)r;
        } else if (r < 0 || final) {
            put(k, "\xEF\xBF\xBD", 3);
            used = r < 0 ? (size_t)-r : s->n_pending;
        } else {
            return; /* a valid start: wait for the rest */
        }
        memmove(s->pending, s->pending + used, s->n_pending - used);
        s->n_pending -= used;
    }
}

size_t tok_stream_feed(tok_stream *s, int32_t id, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    sink k = {out, cap - 1, 0};
    size_t n;
    const char *p = tok_piece(s->t, id, &n);
    for (size_t i = 0; i < n; i++) {
        s->pending[s->n_pending++] = (unsigned char)p[i];
        drain(s, &k, false);
    }
    out[k.n] = 0;
    return k.n;
}

size_t tok_stream_flush(tok_stream *s, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    sink k = {out, cap - 1, 0};
    drain(s, &k, true);
    out[k.n] = 0;
    return k.n;
}
