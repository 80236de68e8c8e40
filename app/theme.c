/* theme.c: theme files, colour fallbacks, and curses colour pairs. */
#include "theme.h"

#include <ctype.h>
#include <curses.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"
#include "paths.h"

#define THEME_MAX_FILE (64u << 10)

/* ---- element names and inheritance ---------------------------------------- */

static const char *const el_names[TH_COUNT] = {
    "normal", "user", "user-label", "assistant", "assistant-label", "system", "think",
    "think-label", "code", "notice", "error", "control", "input", "prompt", "status",
    "status-key", "status-msg", "border", "pane", "pane-title", "pane-value", "bar", "bar-empty",
    "spark", "table-head", "table-sort", "replay-old", "replay-new",
    "md-heading", "md-bold", "md-italic", "md-strike", "md-code", "md-code-lang", "md-bullet", "md-quote",
    "md-link", "md-url", "md-table", "md-rule",
};

/* An element a theme leaves out looks like its parent (parents come first). */
static const theme_el el_parent[TH_COUNT] = {
    [TH_USER_LABEL] = TH_USER,         [TH_ASSISTANT_LABEL] = TH_ASSISTANT,
    [TH_THINK_LABEL] = TH_THINK,       [TH_PROMPT] = TH_INPUT,
    [TH_STATUS_KEY] = TH_STATUS,       [TH_STATUS_MSG] = TH_STATUS,
    [TH_PANE_TITLE] = TH_PANE,         [TH_PANE_VALUE] = TH_PANE,
    [TH_TABLE_HEAD] = TH_PANE,         [TH_TABLE_SORT] = TH_TABLE_HEAD,
    [TH_MD_HEADING] = TH_ASSISTANT_LABEL, [TH_MD_BOLD] = TH_ASSISTANT, [TH_MD_ITALIC] = TH_ASSISTANT,
    [TH_MD_STRIKE] = TH_THINK,         [TH_MD_CODE] = TH_CODE,        [TH_MD_CODE_LANG] = TH_CODE,
    [TH_MD_BULLET] = TH_ASSISTANT_LABEL, [TH_MD_QUOTE] = TH_THINK,    [TH_MD_LINK] = TH_USER,
    [TH_MD_URL] = TH_NOTICE,           [TH_MD_TABLE] = TH_BORDER,     [TH_MD_RULE] = TH_BORDER,
};

const char *theme_el_name(theme_el e)
{
    return (unsigned)e < TH_COUNT ? el_names[e] : "?";
}

static const char builtin_default[] =
    "# glmchat theme \"default\": the terminal's own background, soft accents.\n"
    "# Format: see themes/README.  ELEMENT = FOREGROUND BACKGROUND [ATTRIBUTES...]\n"
    "normal          = default  default\n"
    "user            = 117      default\n"
    "user-label      = 117      default  bold\n"
    "assistant       = default  default\n"
    "assistant-label = 150      default  bold\n"
    "system          = 180      default  italic\n"
    "think           = 245      default  italic\n"
    "think-label     = 245      default  bold\n"
    "code            = 222      236\n"
    "notice          = 109      default\n"
    "error           = 203      default  bold\n"
    "control         = 16       209\n"
    "input           = default  default\n"
    "prompt          = 117      default  bold\n"
    "status          = 252      237\n"
    "status-key      = 229      237      bold\n"
    "status-msg      = 16       180\n"
    "border          = 240      default\n"
    "pane            = 250      default\n"
    "pane-title      = 117      default  bold\n"
    "pane-value      = 229      default\n"
    "bar             = 114      default\n"
    "bar-empty       = 238      default\n"
    "spark           = 114      default\n"
    "table-head      = 250      237      bold\n"
    "table-sort      = 229      237      bold underline\n"
    "replay-old      = 180      default\n"
    "replay-new      = 150      default\n"
    "md-heading      = 150      default  bold\n"
    "md-bold         = default  default  bold\n"
    "md-italic       = default  default  italic\n"
    "md-strike       = 245      default\n"
    "md-code         = 222      236\n"
    "md-code-lang    = 245      236      italic\n"
    "md-bullet       = 150      default  bold\n"
    "md-quote        = 248      default  italic\n"
    "md-link         = 117      default  underline\n"
    "md-url          = 243      default\n"
    "md-table        = 240      default\n"
    "md-rule         = 240      default\n";

const char *theme_builtin_default(void)
{
    return builtin_default;
}

/* ---- colours ---------------------------------------------------------------- */

static const char *const basic_names[8] = {"black", "red", "green", "yellow",
                                           "blue", "magenta", "cyan", "white"};

/* xterm's default palette for 0..15. */
static const int basic_rgb[16] = {
    0x000000, 0xcd0000, 0x00cd00, 0xcdcd00, 0x0000ee, 0xcd00cd, 0x00cdcd, 0xe5e5e5,
    0x7f7f7f, 0xff0000, 0x00ff00, 0xffff00, 0x5c5cff, 0xff00ff, 0x00ffff, 0xffffff,
};

static const int cube_level[6] = {0, 95, 135, 175, 215, 255};

static int palette_rgb(int i)
{
    if (i < 16)
        return basic_rgb[i];
    if (i < 232) {
        i -= 16;
        return cube_level[i / 36] << 16 | cube_level[i / 6 % 6] << 8 | cube_level[i % 6];
    }
    int g = 8 + 10 * (i - 232);
    return g << 16 | g << 8 | g;
}

static long rgb_dist(int a, int b)
{
    long dr = (a >> 16 & 255) - (b >> 16 & 255), dg = (a >> 8 & 255) - (b >> 8 & 255),
         db = (a & 255) - (b & 255);
    /* Weighted as the eye sees it (green counts most), good enough for picking a palette entry. */
    return 3 * dr * dr + 4 * dg * dg + 2 * db * db;
}

static int nearest(int rgb, int lo, int hi)
{
    int best = lo;
    long best_d = -1;
    for (int i = lo; i < hi; i++) {
        long d = rgb_dist(rgb, palette_rgb(i));
        if (best_d < 0 || d < best_d) {
            best_d = d;
            best = i;
        }
    }
    return best;
}

int theme_reduce_color(int c, int n_colors, bool *bold)
{
    if (c == THEME_DEFAULT)
        return c;
    if (n_colors < 8)
        return THEME_DEFAULT;
    if (c & THEME_RGB_FLAG)
        c = nearest(c & 0xffffff, 16, 256);
    if (n_colors >= 256)
        return c;
    if (c >= 16)
        c = nearest(palette_rgb(c), 0, 16);
    if (n_colors >= 16)
        return c;
    if (c >= 8) {
        if (bold)
            *bold = true;
        c -= 8;
    }
    return c;
}

static int parse_color(const char *w, int *out)
{
    if (!strcmp(w, "default")) {
        *out = THEME_DEFAULT;
        return 0;
    }
    if (!strcmp(w, "grey") || !strcmp(w, "gray")) {
        *out = 8;
        return 0;
    }
    const char *base = w;
    int bright = 0;
    if (!strncmp(w, "bright-", 7)) {
        base = w + 7;
        bright = 8;
    }
    for (int i = 0; i < 8; i++)
        if (!strcmp(base, basic_names[i])) {
            *out = i + bright;
            return 0;
        }
    if (w[0] == '#') {
        if (strlen(w) != 7)
            return -1;
        int v = 0;
        for (int i = 1; i < 7; i++) {
            if (!isxdigit((unsigned char)w[i]))
                return -1;
            v = v * 16 + (isdigit((unsigned char)w[i]) ? w[i] - '0' : (tolower((unsigned char)w[i]) - 'a' + 10));
        }
        *out = THEME_RGB_FLAG | v;
        return 0;
    }
    if (isdigit((unsigned char)w[0]) && strlen(w) <= 3) {
        int v = 0;
        for (const char *p = w; *p; p++) {
            if (!isdigit((unsigned char)*p))
                return -1;
            v = v * 10 + (*p - '0');
        }
        if (v > 255)
            return -1;
        *out = v;
        return 0;
    }
    return -1;
}

static int parse_attr(const char *w, unsigned *attrs)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"bold", THEME_BOLD},           {"dim", THEME_DIM},
                 {"italic", THEME_ITALIC},       {"underline", THEME_UNDERLINE},
                 {"reverse", THEME_REVERSE},     {"standout", THEME_STANDOUT},
                 {"none", 0}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(w, names[i].name)) {
            *attrs |= names[i].bit;
            return 0;
        }
    return -1;
}

/* ---- parsing ------------------------------------------------------------------ */

static int find_el(const char *w)
{
    for (int i = 0; i < TH_COUNT; i++)
        if (!strcmp(w, el_names[i]))
            return i;
    return -1;
}

/* Splits a line into words, '=' being a word of its own; a word starting
 * with '#' begins a comment unless it is all hex digits after the '#' (a
 * colour, checked later, so "#12345" is a bad colour, not a comment). */
static int split_words(char *s, char **words, int max)
{
    static char eq[] = "=";
    int n = 0;
    for (char *p = s; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (n == max)
            return max + 1;
        if (*p == '=') {
            words[n++] = eq;
            p++;
            continue;
        }
        char *w = p;
        while (*p && !isspace((unsigned char)*p) && *p != '=')
            p++;
        char c = *p;
        *p = 0;
        if (w[0] == '#' && (w[1] == 0 || strspn(w + 1, "0123456789abcdefABCDEF") != strlen(w + 1)))
            break;
        words[n++] = w;
        if (c == '=') {
            *p = '=';
        } else if (c) {
            p++;
        }
    }
    return n;
}

static int parse_line(theme *t, char *line, bool *seen, err_t *err)
{
    char *w[12];
    int n = split_words(line, w, 11);
    if (n == 0)
        return 0;
    if (n > 11)
        return err_set(err, "too many words");
    if (n < 2 || strcmp(w[1], "="))
        return err_set(err, "expected 'ELEMENT = FOREGROUND BACKGROUND [ATTRIBUTES]'");
    int el = find_el(w[0]);
    if (el < 0)
        return err_set(err, "unknown element '%.40s' (see themes/README for the list)", w[0]);
    if (seen[el])
        return err_set(err, "element '%s' is given twice", w[0]);
    if (n < 4)
        return err_set(err, "%s: expected a foreground and a background colour", w[0]);
    theme_style st = {.set = true};
    if (parse_color(w[2], &st.fg) != 0)
        return err_set(err, "%s: unknown colour '%.40s'", w[0], w[2]);
    if (parse_color(w[3], &st.bg) != 0)
        return err_set(err, "%s: unknown colour '%.40s'", w[0], w[3]);
    for (int i = 4; i < n; i++)
        if (parse_attr(w[i], &st.attrs) != 0)
            return err_set(err, "%s: unknown attribute '%.40s' (bold dim italic underline reverse standout none)",
                           w[0], w[i]);
    t->el[el] = st;
    seen[el] = true;
    return 0;
}

int theme_parse(theme *t, const char *text, size_t len, const char *name, err_t *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    bool seen[TH_COUNT] = {0};
    size_t pos = file_bom_len(text, len);
    int lineno = 0;
    while (pos < len) {
        lineno++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        char line[512];
        if (n >= sizeof line)
            return err_set(err, "%s:%d: line too long", name, lineno);
        memcpy(line, text + pos, n);
        line[n] = 0;
        if (strlen(line) != n)
            return err_set(err, "%s:%d: NUL byte in a theme file", name, lineno);
        if (parse_line(t, line, seen, err) != 0)
            return err_prefix(err, "%s:%d", name, lineno);
        pos += n + (nl ? 1 : 0);
    }
    if (!seen[TH_NORMAL])
        return err_set(err, "%s: no 'normal' element (every theme needs one)", name);
    for (int i = 1; i < TH_COUNT; i++)
        if (!t->el[i].set) {
            t->el[i] = t->el[el_parent[i]];
            t->el[i].set = false;
        }
    return 0;
}

int theme_load_file(theme *t, const char *path, err_t *err)
{
    char *buf;
    size_t n;
    /* Only a regular file of at most 64 KiB (a FIFO would block the start). */
    if (file_read_regular(path, THEME_MAX_FILE, "theme file", &buf, &n, err) != 0)
        return -1;
    const char *slash = strrchr(path, '/');
    char name[64];
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : path);
    char *dot = strstr(name, ".theme");
    if (dot && dot[6] == 0)
        *dot = 0;
    int rc = theme_parse(t, buf, n, path, err);
    free(buf);
    if (rc != 0)
        return -1;
    snprintf(t->name, sizeof t->name, "%s", name);
    return 0;
}

/* ---- search --------------------------------------------------------------------- */

static int theme_dirs(char dirs[][PATH_MAX], int max)
{
    int n = 0;
    char exe[PATH_MAX];
    if (n < max && paths_dir(PATHS_CONFIG, "themes", dirs[n], PATH_MAX, NULL) == 0)
        n++;
    if (paths_exe_dir(exe, sizeof exe) == 0) {
        static const char *const rel[] = {"../share/glmchat/themes", "themes", "../../themes"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0] && n < max; i++) {
            int k = snprintf(dirs[n], PATH_MAX, "%s/%s", exe, rel[i]);
            if (k > 0 && k < PATH_MAX)
                n++;
        }
    }
    return n;
}

static bool valid_name(const char *name)
{
    if (!name[0] || strlen(name) > 48)
        return false;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return false;
    return name[0] != '.';
}

int theme_load(theme *t, const char *name, err_t *err)
{
    if (strchr(name, '/')) {
        char path[PATH_MAX];
        if (paths_expand_user(name, path, sizeof path, err) != 0)
            return -1;
        return theme_load_file(t, path, err);
    }
    if (!valid_name(name))
        return err_set(err, "'%.60s' is not a theme name (letters, digits, - _ .)", name);
    char dirs[4][PATH_MAX];
    int n = theme_dirs(dirs, 4);
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 80];
        int k = snprintf(path, sizeof path, "%s/%s.theme", dirs[i], name);
        if (k > 0 && (size_t)k < sizeof path && paths_is_file(path))
            return theme_load_file(t, path, err);
    }
    if (!strcmp(name, "default"))
        return theme_parse(t, builtin_default, strlen(builtin_default), "default", err);
    char list[512];
    theme_list(list, sizeof list);
    return err_set(err, "no theme named '%s' (available: %s)", name, list);
}

void theme_list(char *buf, size_t cap)
{
    char dirs[4][PATH_MAX];
    int n = theme_dirs(dirs, 4);
    size_t len = 0;
    buf[0] = 0;
    char names[64][64];
    int n_names = 0;
    for (int i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d)) && n_names < 64) {
            size_t l = strlen(de->d_name);
            if (l <= 6 || l - 6 >= 64 || strcmp(de->d_name + l - 6, ".theme"))
                continue;
            char nm[64];
            memcpy(nm, de->d_name, l - 6);
            nm[l - 6] = 0;
            bool dup = false;
            for (int k = 0; k < n_names; k++)
                dup |= !strcmp(names[k], nm);
            if (!dup && valid_name(nm))
                memcpy(names[n_names++], nm, sizeof nm);
        }
        closedir(d);
    }
    bool has_default = false;
    for (int k = 0; k < n_names; k++)
        has_default |= !strcmp(names[k], "default");
    if (!has_default && n_names < 64)
        strcpy(names[n_names++], "default");
    /* Sorted, so the list reads the same everywhere. */
    qsort(names, (size_t)n_names, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int k = 0; k < n_names; k++) {
        int w = snprintf(buf + len, cap - len, "%s%s", k ? " " : "", names[k]);
        if (w < 0 || (size_t)w >= cap - len)
            break;
        len += (size_t)w;
    }
}

/* ---- curses --------------------------------------------------------------------- */

static int applied_attr[TH_COUNT];

static int curses_attrs(unsigned a)
{
    int r = 0;
    if (a & THEME_BOLD)
        r |= A_BOLD;
    if (a & THEME_DIM)
        r |= A_DIM;
    if (a & THEME_ITALIC)
        r |= A_ITALIC;
    if (a & THEME_UNDERLINE)
        r |= A_UNDERLINE;
    if (a & THEME_REVERSE)
        r |= A_REVERSE;
    if (a & THEME_STANDOUT)
        r |= A_STANDOUT;
    return r;
}

void theme_apply(const theme *t)
{
    const char *no_color = getenv("NO_COLOR");
    bool colour = has_colors() && !(no_color && no_color[0]) && COLORS >= 8 && COLOR_PAIRS > TH_COUNT;
    for (int i = 0; i < TH_COUNT; i++) {
        const theme_style *s = &t->el[i];
        int attr = curses_attrs(s->attrs);
        if (colour) {
            bool bold = false;
            int fg = theme_reduce_color(s->fg, COLORS, &bold);
            int bg = theme_reduce_color(s->bg, COLORS, NULL);
            /* init_pair failing (an odd terminal) leaves the element uncoloured. */
            if (init_pair((short)(i + 1), (short)fg, (short)bg) == OK)
                attr |= COLOR_PAIR(i + 1);
            if (bold)
                attr |= A_BOLD;
        }
        applied_attr[i] = attr;
    }
}

int theme_attr(theme_el e)
{
    return (unsigned)e < TH_COUNT ? applied_attr[e] : 0;
}
