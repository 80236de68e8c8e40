/* clipboard.c: OSC 52 sequences (plain, tmux, screen) and an answer's code blocks. */
#include "clipboard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md/md_render.h"

/* screen passes at most 768 bytes per DCS string; 76 is what the common
 * osc52 scripts use (hterm's osc52.sh), well inside it. */
#define SCREEN_CHUNK 76

/* ---- the environment ------------------------------------------------------------------- */

clip_env clip_env_get(void)
{
    return (clip_env){getenv("TERM"), getenv("TMUX"), getenv("STY"), getenv("TERM_PROGRAM"), getenv("VTE_VERSION")};
}

static bool set(const char *s)
{
    return s && s[0];
}

clip_wrap clip_wrap_for(const clip_env *env)
{
    if (set(env->tmux))
        return CLIP_WRAP_TMUX;
    if (set(env->sty) && env->term && !strncmp(env->term, "screen", 6))
        return CLIP_WRAP_SCREEN;
    return CLIP_WRAP_NONE;
}

const char *clip_note(const clip_env *env)
{
    if (!set(env->term) || !strcmp(env->term, "dumb"))
        return "this terminal (TERM unset or dumb) has no clipboard escape; nothing was copied";
    if (!strcmp(env->term, "linux"))
        return "the Linux console has no clipboard; nothing was copied";
    if (set(env->term_program) && !strcmp(env->term_program, "Apple_Terminal"))
        return "macOS Terminal ignores OSC 52 clipboard requests; iTerm2, kitty, WezTerm or Alacritty take them";
    if (set(env->vte_version))
        return "VTE terminals (GNOME Terminal, Tilix) ignore OSC 52 clipboard requests";
    return NULL;
}

/* ---- the sequence ------------------------------------------------------------------------- */

void clip_base64(const char *s, size_t n, sbuf *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)u[i] << 16 | (i + 1 < n ? (unsigned)u[i + 1] << 8 : 0) | (i + 2 < n ? u[i + 2] : 0);
        char q[4] = {abc[v >> 18 & 63], abc[v >> 12 & 63], i + 1 < n ? abc[v >> 6 & 63] : '=',
                     i + 2 < n ? abc[v & 63] : '='};
        sbuf_add(out, q, 4);
    }
}

static size_t b64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

static const char osc_head[] = "\x1b]52;c;";

size_t clip_osc52_size(size_t n, clip_wrap wrap)
{
    size_t b = b64_len(n), head = sizeof osc_head - 1;
    switch (wrap) {
    case CLIP_WRAP_TMUX: /* ESC P tmux; ESC + head + b64 + BEL + ESC \ */
        return 7 + 1 + head + b + 1 + 2;
    case CLIP_WRAP_SCREEN: { /* ESC P + head + chunks joined by ESC \ ESC P + BEL + ESC \ */
        size_t chunks = b ? (b + SCREEN_CHUNK - 1) / SCREEN_CHUNK : 1;
        return 2 + head + b + 4 * (chunks - 1) + 1 + 2;
    }
    case CLIP_WRAP_NONE:
    default:
        return head + b + 1;
    }
}

int clip_osc52(const char *text, size_t n, clip_wrap wrap, sbuf *out, err_t *err)
{
    if (n == 0)
        return err_set(err, "nothing to copy");
    size_t size = clip_osc52_size(n, wrap);
    if (size > CLIP_MAX_SEQ) {
        size_t most = CLIP_MAX_SEQ / 4 * 3 - 64;
        return err_set(err, "too large to copy: %zu KB of text; terminals take about %zu KB through OSC 52",
                       (n + 1023) / 1024, most / 1024);
    }
    sbuf b = {0};
    clip_base64(text, n, &b);
    switch (wrap) {
    case CLIP_WRAP_TMUX:
        /* The sequence's one ESC is doubled inside the passthrough. */
        sbuf_adds(out, "\x1bPtmux;\x1b");
        sbuf_adds(out, osc_head);
        sbuf_add(out, b.s, b.len);
        sbuf_adds(out, "\x07\x1b\\");
        break;
    case CLIP_WRAP_SCREEN:
        sbuf_adds(out, "\x1bP");
        sbuf_adds(out, osc_head);
        for (size_t i = 0; i < b.len; i += SCREEN_CHUNK) {
            if (i)
                sbuf_adds(out, "\x1b\\\x1bP");
            sbuf_add(out, b.s + i, b.len - i < SCREEN_CHUNK ? b.len - i : SCREEN_CHUNK);
        }
        sbuf_adds(out, "\x07\x1b\\");
        break;
    case CLIP_WRAP_NONE:
    default:
        sbuf_adds(out, osc_head);
        sbuf_add(out, b.s, b.len);
        sbuf_addc(out, '\x07');
        break;
    }
    sbuf_free(&b);
    return 0;
}

/* ---- code blocks --------------------------------------------------------------------------- */

int clip_code_block(const char *answer, size_t n, unsigned index, sbuf *out, clip_block_info *info, err_t *err)
{
    md_code_block *blocks = NULL;
    size_t count = md_code_blocks(answer, n, &blocks);
    if (count == 0)
        return err_set(err, "the answer has no code block");
    if (index > count) {
        md_code_blocks_free(blocks, count);
        if (count == 1)
            return err_set(err, "the answer has 1 code block: /copy code 1");
        return err_set(err, "the answer has %zu code blocks: /copy code 1-%zu", count, count);
    }
    unsigned pick = index ? index : (unsigned)count;
    const md_code_block *b = &blocks[pick - 1];
    sbuf_add(out, b->text, b->len);
    if (info) {
        memset(info, 0, sizeof *info);
        info->index = pick;
        info->count = (unsigned)count;
        snprintf(info->lang, sizeof info->lang, "%s", b->lang);
        info->n_lines = b->n_lines;
        info->closed = b->closed;
    }
    md_code_blocks_free(blocks, count);
    return 0;
}
