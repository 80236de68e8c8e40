/* clipboard.h: copying to the clipboard through the terminal (OSC 52), for
 * /copy and /copy code [N].
 *
 * The terminal owns the clipboard: "ESC ] 52 ; c ; BASE64 BEL" asks it to
 * set it, which also works over ssh.  Inside tmux the sequence travels in
 * tmux's passthrough ("ESC P tmux; ..." with every ESC doubled, which tmux
 * 3.3+ forwards when `allow-passthrough` is on; with `set-clipboard on` tmux
 * takes the plain sequence itself); inside GNU screen it travels in screen's
 * DCS strings, cut into chunks screen accepts.  No terminal answers whether
 * it obeyed, so the caller can only report that it asked (clip_note() names
 * terminals known to ignore the request).
 *
 * Promises:
 *  - Pure: these functions build bytes and read nothing but their
 *    arguments; the caller writes the sequence to the terminal in one write.
 *  - A sequence longer than CLIP_MAX_SEQ bytes (many terminals drop larger
 *    ones silently) is refused with "too large to copy", before anything is
 *    built; so is an empty text.
 *  - Code blocks are the chat view's own: md_code_blocks() finds them, so
 *    block N is the block the view numbers N. */
#ifndef GLM_CLIPBOARD_H
#define GLM_CLIPBOARD_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/sbuf.h"

/* Bytes of the whole escape sequence; about 74 KB of text. */
#define CLIP_MAX_SEQ 100000

typedef enum {
    CLIP_WRAP_NONE,   /* straight to the terminal */
    CLIP_WRAP_TMUX,   /* inside tmux: DCS passthrough */
    CLIP_WRAP_SCREEN, /* inside GNU screen: chunked DCS */
} clip_wrap;

/* What the environment says about the terminal (NULL: unset). */
typedef struct {
    const char *term, *tmux, *sty, *term_program, *vte_version;
} clip_env;

/* The environment of this process (getenv). */
clip_env clip_env_get(void);
/* The wrapping the terminal multiplexer (if any) needs. */
clip_wrap clip_wrap_for(const clip_env *env);
/* NULL, or one line on why the terminal will probably ignore OSC 52. */
const char *clip_note(const clip_env *env);

/* Bytes of the sequence for n bytes of text. */
size_t clip_osc52_size(size_t n, clip_wrap wrap);
/* Appends the sequence that puts text[0..n) on the clipboard to out;
 * -1 + err when it is empty or too large. */
int clip_osc52(const char *text, size_t n, clip_wrap wrap, sbuf *out, err_t *err);

/* Standard base64 (RFC 4648, padded) of s[0..n), appended to out. */
void clip_base64(const char *s, size_t n, sbuf *out);

/* ---- code blocks of an answer ---------------------------------------------------- */

typedef struct {
    unsigned index;   /* the block chosen, 1-based */
    unsigned count;   /* blocks in the answer */
    char lang[48];    /* its language tag as written, "" when none (untrusted: sanitize to show) */
    size_t n_lines;
    bool closed;      /* false: the answer ended inside it */
} clip_block_info;

/* Appends code block `index` (1..N; 0: the last one) of the answer's text
 * to out, exactly as written between its fences; -1 + err when the answer
 * has none or no such block ("the answer has 2 code blocks: /copy code 1-2"). */
int clip_code_block(const char *answer, size_t n, unsigned index, sbuf *out, clip_block_info *info, err_t *err);

#endif
