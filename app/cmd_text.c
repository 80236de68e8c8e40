/* cmd_text.c: the text subcommands: tokenize, detokenize, template.
 *
 *   glmchat tokenize -m MODEL [--special] [--ids]   stdin text -> token ids
 *   glmchat detokenize -m MODEL                     stdin ids  -> text (raw bytes)
 *   glmchat template --preset NAME                  stdin JSON -> rendered prompt
 *
 * detokenize and template write exact bytes into a pipe or a file, and the
 * inert form of text_safe.h on a terminal.
 *
 * The tokenizer needs only the vocabulary: the GGUF is opened, tok_load()
 * copies what it needs, and the file is closed again. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_setup.h"
#include "chat_template.h"
#include "commands.h"
#include "gguf.h"
#include "text_safe.h"
#include "tokenizer.h"

/* ---- shared helpers ------------------------------------------------------- */

/* Reads all of stdin into a malloc'd buffer (NUL-terminated). */
static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, stdin);
        n += got;
        if (got == 0) {
            if (ferror(stdin)) {
                free(buf);
                return NULL;
            }
            break;
        }
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static tokenizer *open_tokenizer(const char *path)
{
    err_t err;
    gguf_ctx *ctx = gguf_open(path, &err);
    if (!ctx) {
        fprintf(stderr, "glmchat: %s\n", err.msg);
        return NULL;
    }
    tokenizer *t = tok_load(ctx, &err);
    gguf_close(ctx);
    if (!t)
        fprintf(stderr, "glmchat: %s\n", err.msg);
    return t;
}

typedef struct {
    const char *model;
    bool special, ids, help;
} tok_args;

/* Parses -m MODEL / --model MODEL and the flags the command allows;
 * returns 0, or 2 after printing a usage error. */
static int parse_tok_args(int argc, char **argv, tok_args *a, bool allow_flags, const char *usage)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if ((strcmp(s, "-m") == 0 || strcmp(s, "--model") == 0) && i + 1 < argc) {
            a->model = argv[++i];
        } else if (strncmp(s, "--model=", 8) == 0) {
            a->model = s + 8;
        } else if (allow_flags && strcmp(s, "--special") == 0) {
            a->special = true;
        } else if (allow_flags && strcmp(s, "--ids") == 0) {
            a->ids = true;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            a->help = true;
        } else {
            fprintf(stderr, "glmchat: %s: unexpected argument '%s'\n%s", argv[0], s, usage);
            return 2;
        }
    }
    if (!a->help && !a->model) {
        fprintf(stderr, "glmchat: %s: -m MODEL is required\n%s", argv[0], usage);
        return 2;
    }
    return 0;
}

/* ---- tokenize --------------------------------------------------------------- */

static const char tokenize_usage[] =
    "usage: glmchat tokenize -m MODEL [--special] [--ids] < text\n"
    "  Prints one 'id<TAB>piece' line per token (non-printable bytes escaped),\n"
    "  or with --ids the ids on one line separated by spaces.\n"
    "  --special  match special-token text (e.g. <|user|>) as those tokens;\n"
    "             without it such text is tokenized as plain text.\n";

/* Writes a piece readably: backslash, \n, \t and \r as escapes, every byte
 * of what text_safe.h shows inert (control characters, C1 and bidi
 * controls) and of invalid UTF-8 as \xNN, the rest as it is. */
static void print_piece(const char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        uint32_t cp;
        size_t len = tsafe_decode(p + i, n - i, &cp);
        if (c == '\\')
            fputs("\\\\", stdout);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (tsafe_is_control(cp) || (cp == 0xfffd && len == 1 && c >= 0x80))
            for (size_t j = 0; j < len; j++)
                printf("\\x%02x", (unsigned char)p[i + j]);
        else
            fwrite(p + i, 1, len, stdout);
        i += len;
    }
}

/* Text for stdout: exact bytes into a pipe or a file (that is the
 * command's job: `detokenize | cmp`), the inert form of text_safe.h on a
 * terminal, where a vocabulary entry or a template's text could otherwise
 * drive it.  False when the write failed. */
static bool write_out(const char *s, size_t n)
{
    if (!isatty(STDOUT_FILENO))
        return fwrite(s, 1, n, stdout) == n;
    sbuf b = {0};
    tsafe_sanitize(&b, s, n, false);
    bool ok = fwrite(b.s ? b.s : "", 1, b.len, stdout) == b.len;
    sbuf_free(&b);
    return ok;
}

int cmd_tokenize(int argc, char **argv)
{
    tok_args a;
    int rc = parse_tok_args(argc, argv, &a, true, tokenize_usage);
    if (rc)
        return rc;
    if (a.help) {
        fputs(tokenize_usage, stdout);
        return 0;
    }
    tokenizer *t = open_tokenizer(a.model);
    if (!t)
        return 1;
    size_t len;
    char *text = read_stdin(&len);
    if (!text) {
        fprintf(stderr, "glmchat: stdin: cannot read: %s\n", strerror(errno));
        tok_free(t);
        return 1;
    }
    err_t err;
    int64_t n = tok_encode(t, text, len, a.special, NULL, 0, &err);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (n < 0 || (n > 0 && !ids) ||
        (n > 0 && tok_encode(t, text, len, a.special, ids, (size_t)n, &err) != n)) {
        fprintf(stderr, "glmchat: stdin: %s\n", n < 0 ? err.msg : "out of memory");
        free(ids);
        free(text);
        tok_free(t);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) {
        if (a.ids) {
            printf(i ? " %d" : "%d", ids[i]);
        } else {
            size_t plen;
            const char *p = tok_piece(t, ids[i], &plen);
            printf("%d\t", ids[i]);
            print_piece(p, plen);
            putchar('\n');
        }
    }
    if (a.ids)
        putchar('\n');
    free(ids);
    free(text);
    tok_free(t);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "glmchat: stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* ---- detokenize ------------------------------------------------------------------ */

static const char detokenize_usage[] =
    "usage: glmchat detokenize -m MODEL < ids\n"
    "  Reads token ids separated by spaces, commas or newlines (brackets are\n"
    "  ignored) and writes their text, byte for byte, to stdout (on a terminal,\n"
    "  control characters are shown inert, e.g. ESC as ^[).\n";

static bool is_separator(char c)
{
    return c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r' || c == '[' || c == ']';
}

/* Parses the ids; on a bad one prints the error and returns -1. */
static int64_t parse_ids(const char *s, size_t len, int32_t **out)
{
    size_t cap = 256, n = 0, line = 1;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return -1;
    for (size_t i = 0; i < len;) {
        if (is_separator(s[i])) {
            line += s[i] == '\n';
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && !is_separator(s[j]))
            j++;
        char word[32];
        size_t wl = j - i < sizeof word - 1 ? j - i : sizeof word - 1;
        memcpy(word, s + i, wl);
        word[wl] = 0;
        char *end;
        errno = 0;
        long v = strtol(word, &end, 10);
        if (j - i >= sizeof word || *end || end == word || errno || v < 0 || v > INT32_MAX) {
            chat_error("stdin: line %zu: '%.*s' is not a token id", line, (int)(j - i < 40 ? j - i : 40), s + i);
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *b = realloc(ids, cap * 2 * sizeof *ids);
            if (!b) {
                free(ids);
                return -1;
            }
            ids = b;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        i = j;
    }
    *out = ids;
    return (int64_t)n;
}

int cmd_detokenize(int argc, char **argv)
{
    tok_args a;
    int rc = parse_tok_args(argc, argv, &a, false, detokenize_usage);
    if (rc)
        return rc;
    if (a.help) {
        fputs(detokenize_usage, stdout);
        return 0;
    }
    tokenizer *t = open_tokenizer(a.model);
    if (!t)
        return 1;
    size_t len;
    char *in = read_stdin(&len);
    int32_t *ids = NULL;
    int64_t n = in ? parse_ids(in, len, &ids) : -1;
    free(in);
    if (n < 0) {
        tok_free(t);
        return 1;
    }
    err_t err;
    size_t out_len;
    char *text = tok_decode(t, ids, (size_t)n, &out_len, &err);
    free(ids);
    tok_free(t);
    if (!text) {
        fprintf(stderr, "glmchat: stdin: %s\n", err.msg);
        return 1;
    }
    bool wrote = write_out(text, out_len);
    free(text);
    if (!wrote || fflush(stdout) != 0) {
        fprintf(stderr, "glmchat: stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* ---- template ---------------------------------------------------------------------- */

static const char template_usage[] =
    "usage: glmchat template --preset NAME < inputs.json\n"
    "  Renders a chat prompt from one JSON object on stdin:\n"
    "  {\"messages\": [...], \"add_generation_prompt\": bool, \"enable_thinking\"?: bool,\n"
    "   \"clear_thinking\"?: bool, \"tools\"?: [...]} and writes it to stdout as is.\n";

int cmd_template(int argc, char **argv)
{
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--preset") == 0 || strcmp(argv[i], "--template") == 0) && i + 1 < argc) {
            name = argv[++i];
        } else if (strncmp(argv[i], "--preset=", 9) == 0) {
            name = argv[i] + 9;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(template_usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "glmchat: template: unexpected argument '%s'\n%s", argv[i], template_usage);
            return 2;
        }
    }
    if (!name) {
        fprintf(stderr, "glmchat: template: --preset NAME is required (one of: %s)\n", tmpl_names());
        return 2;
    }
    const tmpl_preset *p = tmpl_find(name);
    if (!p) {
        fprintf(stderr, "glmchat: template: unknown preset '%s' (available: %s)\n", name, tmpl_names());
        return 2;
    }
    json_error_t jerr;
    json_t *in = json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr);
    if (!in) {
        chat_error("stdin: line %d, column %d: %s", jerr.line, jerr.column, jerr.text); /* it may quote the input */
        return 1;
    }
    err_t err;
    char *out = tmpl_render(p, in, &err);
    json_decref(in);
    if (!out) {
        fprintf(stderr, "glmchat: stdin: %s\n", err.msg);
        return 1;
    }
    bool wrote = write_out(out, strlen(out));
    free(out);
    if (!wrote || fflush(stdout) != 0) {
        fprintf(stderr, "glmchat: stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
