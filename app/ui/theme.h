/* theme.h: colour themes for the UI (themes/NAME.theme, format in themes/README).
 *
 * A theme maps each screen element to a foreground, a background and
 * attributes.  Colours may be names, 256-colour indexes or #rrggbb; on
 * terminals with 16 or 8 colours they fall back to the nearest colour the
 * terminal has, and NO_COLOR (https://no-color.org) keeps only attributes.
 * Theme files are untrusted: any problem is one error naming FILE:LINE. */
#ifndef GLM_THEME_H
#define GLM_THEME_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef enum {
    TH_NORMAL,
    TH_USER,
    TH_USER_LABEL,
    TH_ASSISTANT,
    TH_ASSISTANT_LABEL,
    TH_SYSTEM,
    TH_THINK,
    TH_THINK_LABEL,
    TH_CODE,
    TH_NOTICE,
    TH_ERROR,
    TH_CONTROL,
    TH_INPUT,
    TH_PROMPT,
    TH_STATUS,
    TH_STATUS_KEY,
    TH_STATUS_MSG,
    TH_BORDER,
    TH_PANE,
    TH_PANE_TITLE,
    TH_PANE_VALUE,
    TH_BAR,
    TH_BAR_EMPTY,
    TH_SPARK,
    TH_TABLE_HEAD,
    TH_TABLE_SORT,
    TH_REPLAY_OLD,
    TH_REPLAY_NEW,
    /* Markdown in answers (app/md/md_render.h) */
    TH_MD_HEADING,
    TH_MD_BOLD,
    TH_MD_ITALIC,
    TH_MD_STRIKE,
    TH_MD_CODE,      /* `inline code` */
    TH_MD_CODE_LANG, /* a code block's header: its number and language */
    TH_MD_BULLET,
    TH_MD_QUOTE,
    TH_MD_LINK,
    TH_MD_URL,
    TH_MD_TABLE,     /* table borders */
    TH_MD_RULE,
    TH_COUNT
} theme_el;

enum {
    THEME_BOLD = 1,
    THEME_DIM = 2,
    THEME_ITALIC = 4,
    THEME_UNDERLINE = 8,
    THEME_REVERSE = 16,
    THEME_STANDOUT = 32,
};

/* A colour: THEME_DEFAULT, 0..255 (xterm palette index) or THEME_RGB(r,g,b). */
#define THEME_DEFAULT (-1)
#define THEME_RGB_FLAG (1 << 24)
#define THEME_RGB(r, g, b) (THEME_RGB_FLAG | ((r) << 16) | ((g) << 8) | (b))

typedef struct {
    int fg, bg;
    unsigned attrs;
    bool set; /* given in the file (others inherit from a parent element) */
} theme_style;

typedef struct {
    char name[64];
    theme_style el[TH_COUNT];
} theme;

const char *theme_el_name(theme_el e);
/* Parses theme text; `name` (a file name) prefixes errors as NAME:LINE. */
int theme_parse(theme *t, const char *text, size_t len, const char *name, err_t *err);
int theme_load_file(theme *t, const char *path, err_t *err);
/* NAME (searched in the user's, the installed and the source tree's theme
 * directories; "default" is also built in) or a path containing '/'. */
int theme_load(theme *t, const char *name_or_path, err_t *err);
/* Names of the themes found in the search directories, space-separated. */
void theme_list(char *buf, size_t cap);
/* The built-in copy of themes/default.theme. */
const char *theme_builtin_default(void);

/* Colour reduction used by theme_apply: a colour as the terminal with
 * n_colors colours shows it (n_colors 256, 16 or 8); *bold set when an 8-colour
 * terminal needs bold to show a bright foreground. */
int theme_reduce_color(int color, int n_colors, bool *bold);

/* Installs the theme into curses (init_pair per element).  Call after
 * start_color(); honours NO_COLOR and the terminal's colour count. */
void theme_apply(const theme *t);
/* The curses attributes (pair + attrs) of an element of the applied theme. */
int theme_attr(theme_el e);

#endif
