/* ui_input.c: readline in callback mode, drawn into a curses window. */
#include "ui_input.h"

#include <readline/history.h>
#include <readline/readline.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "theme.h"
#include "ui_history.h"
#include "ui_text.h"

/* readline has no user pointer: one input area per process. */
static struct {
    ui_input_line_fn on_line;
    ui_input_matches_fn on_matches;
    void *user;
    char history_path[4096];
    unsigned char queue[256]; /* bytes waiting for readline */
    size_t q_head, q_len;
    bool changed;
    char prompt[64];
    FILE *devnull;
    bool in_handler;
    bool history_failed;    /* appending failed once: not tried again */
    char *pending_line; /* set from the line handler; applied once readline has reset */
} in;

/* ---- readline hooks --------------------------------------------------------------- */

static int rl_getc_hook(FILE *f)
{
    (void)f;
    if (in.q_len == 0)
        return 0; /* never asked for more than was fed; NUL is harmless */
    unsigned char c = in.queue[in.q_head];
    in.q_head = (in.q_head + 1) % sizeof in.queue;
    in.q_len--;
    return c;
}

/* Readline asks this to tell a lone ESC from the start of a key sequence:
 * a whole sequence is queued before readline is run. */
static int rl_input_available(void)
{
    return in.q_len > 0;
}

static void rl_redisplay_hook(void)
{
    in.changed = true;
}

static void rl_noop_prep(int meta)
{
    (void)meta;
}

static void rl_noop_deprep(void)
{
}

static void on_line_cb(char *line)
{
    if (line && *line) {
        HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
        if (!last || strcmp(last->line, line) != 0) {
            add_history(line);
            /* Appended at once (0600: what you type is nobody else's
             * business), so a crash loses no history.  A failure is not
             * worth interrupting the chat for: the line is sent all the same. */
            err_t err;
            if (in.history_path[0] && !in.history_failed && ui_history_append(in.history_path, line, &err) != 0)
                in.history_failed = true;
        }
    }
    in.changed = true;
    in.in_handler = true;
    in.on_line(in.user, line);
    in.in_handler = false;
}

static void apply_pending(void)
{
    if (!in.pending_line)
        return;
    rl_replace_line(in.pending_line, 0);
    rl_point = rl_end;
    free(in.pending_line);
    in.pending_line = NULL;
    in.changed = true;
}

static void display_matches(char **matches, int n, int max_len)
{
    if (in.on_matches)
        in.on_matches(in.user, matches, n, max_len);
}

static int insert_newline(int count, int key)
{
    (void)count;
    (void)key;
    rl_insert_text("\n");
    return 0;
}

/* ---- set-up --------------------------------------------------------------------------- */

void ui_input_init(const char *history_path, ui_input_line_fn on_line, ui_input_matches_fn on_matches, void *user)
{
    in.on_line = on_line;
    in.on_matches = on_matches;
    in.user = user;
    snprintf(in.history_path, sizeof in.history_path, "%s", history_path ? history_path : "");
    snprintf(in.prompt, sizeof in.prompt, "> ");
    /* Readline must never write to or reconfigure the terminal curses owns. */
    in.devnull = fopen("/dev/null", "w");
    rl_outstream = in.devnull;
    rl_readline_name = "glmchat";
    rl_getc_function = rl_getc_hook;
    rl_input_available_hook = rl_input_available;
    rl_redisplay_function = rl_redisplay_hook;
    rl_prep_term_function = rl_noop_prep;
    rl_deprep_term_function = rl_noop_deprep;
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_change_environment = 0;
    rl_completion_display_matches_hook = display_matches;
    rl_variable_bind("bell-style", "none");
    rl_variable_bind("enable-bracketed-paste", "off"); /* curses decodes pastes for us */
    rl_bind_keyseq("\\e\\r", insert_newline);
    rl_bind_keyseq("\\e\\n", insert_newline);
    using_history();
    /* The file is ours to read and write (app/ui_history.h): readline's own
     * writer left out the timestamps that mark where an entry starts. */
    if (in.history_path[0]) {
        ui_history h;
        err_t err;
        if (ui_history_load(&h, in.history_path, UI_HISTORY_MAX_ENTRIES, &err) == 0)
            for (size_t i = 0; i < h.n; i++)
                add_history(h.v[i]);
        ui_history_free(&h);
    }
    rl_callback_handler_install(in.prompt, on_line_cb);
    in.changed = true;
}

void ui_input_shutdown(void)
{
    free(in.pending_line);
    in.pending_line = NULL;
    rl_callback_handler_remove();
    clear_history();
    rl_outstream = NULL;
    if (in.devnull)
        fclose(in.devnull);
    in.devnull = NULL;
}

void ui_input_set_prompt(const char *prompt)
{
    snprintf(in.prompt, sizeof in.prompt, "%s", prompt);
    rl_set_prompt(in.prompt);
    in.changed = true;
}

void ui_input_resize(int rows, int cols)
{
    rl_set_screen_size(rows, cols);
}

/* ---- feeding ---------------------------------------------------------------------------- */

void ui_input_feed(const char *bytes, size_t n)
{
    for (size_t i = 0; i < n && in.q_len < sizeof in.queue; i++) {
        in.queue[(in.q_head + in.q_len) % sizeof in.queue] = (unsigned char)bytes[i];
        in.q_len++;
    }
    while (in.q_len > 0) {
        rl_callback_read_char();
        apply_pending();
    }
}

void ui_input_insert(const char *text)
{
    rl_insert_text(text);
    in.changed = true;
}

void ui_input_set_line(const char *text)
{
    free(in.pending_line);
    in.pending_line = strdup(text);
    /* Inside the line handler readline clears the line right after: wait. */
    if (!in.in_handler)
        apply_pending();
}

void ui_input_restore(const char *text)
{
    sbuf b = {0};
    sbuf_adds(&b, text);
    if (rl_end > 0 && rl_line_buffer) {
        /* What was typed meanwhile stays, after it. */
        sbuf_addc(&b, '\n');
        sbuf_add(&b, rl_line_buffer, (size_t)rl_end);
    }
    ui_input_set_line(sbuf_str(&b));
    sbuf_free(&b);
}

void ui_input_clear(void)
{
    rl_replace_line("", 0);
    rl_point = 0;
    in.changed = true;
}

const char *ui_input_text(void)
{
    return rl_line_buffer ? rl_line_buffer : "";
}

bool ui_input_vi_mode(void)
{
    return rl_editing_mode == 0; /* readline's vi_mode (emacs_mode is 1; the names are in no public header) */
}

bool ui_input_empty(void)
{
    return rl_end == 0;
}

bool ui_input_changed(void)
{
    return in.changed;
}

/* ---- drawing ------------------------------------------------------------------------------ */

/* Lays out prompt + line cell by cell; calls put() for every cell group
 * (NULL window: only counts).  Returns rows used; cy, cx get the cursor. */
typedef struct {
    WINDOW *w;
    int width, row, col, first_row, rows;
    int cy, cx;
    int attr_text, attr_control;
} layout;

static void put_cells(layout *l, const char *s, size_t n, int cells, int attr)
{
    if (l->col + cells > l->width && l->col > 0) {
        l->row++;
        l->col = 0;
    }
    int r = l->row - l->first_row;
    if (l->w && r >= 0 && r < l->rows) {
        wattrset(l->w, attr);
        mvwaddnstr(l->w, r, l->col, s, (int)n);
    }
    l->col += cells;
}

/* True when the chat view's sanitizer leaves this one character as it is
 * (so the input line and the chat view always agree on what is inert). */
static bool shown_as_is(uint32_t cp, const char *s, size_t len)
{
    if (cp >= 0x20 && cp < 0x7f)
        return true; /* printable ASCII: the common case, without asking */
    sbuf b = {0};
    tsafe_sanitize(&b, s, len, false);
    bool same = b.len == len && !memcmp(b.s, s, len);
    sbuf_free(&b);
    return same;
}

static void lay_text(layout *l, const char *text, size_t n, size_t point, bool is_line, int attr)
{
    size_t i = 0;
    while (i <= n) {
        if (is_line && i == point) {
            if (l->col >= l->width) {
                l->row++;
                l->col = 0;
            }
            l->cy = l->row;
            l->cx = l->col;
        }
        if (i == n)
            break;
        uint32_t cp;
        size_t len = tsafe_decode(text + i, n - i, &cp);
        if (cp == '\n') {
            l->row++;
            l->col = 2; /* continuation lines are indented under the prompt */
        } else if (cp == '\t') {
            int sp = UI_TAB_WIDTH - l->col % UI_TAB_WIDTH;
            put_cells(l, "        ", (size_t)sp, sp, attr);
        } else if (cp == 0xfffd && len == 1) {
            put_cells(l, "\xef\xbf\xbd", 3, 1, attr); /* an invalid byte */
        } else if (!shown_as_is(cp, text + i, len)) {
            /* The user's own typing (Ctrl-V Esc, a pasted U+202E) is shown
             * inert, in the form the chat view will show it in. */
            sbuf b = {0};
            tsafe_sanitize(&b, text + i, len, false);
            put_cells(l, b.s, b.len, (int)b.len, l->attr_control);
            sbuf_free(&b);
        } else {
            put_cells(l, text + i, len, ui_cp_width(cp), attr);
        }
        i += len;
    }
}

static int lay_out(layout *l)
{
    const char *prompt = rl_display_prompt ? rl_display_prompt : in.prompt;
    l->row = l->col = 0;
    l->cy = l->cx = 0;
    lay_text(l, prompt, strlen(prompt), 0, false, l->attr_text);
    lay_text(l, rl_line_buffer ? rl_line_buffer : "", (size_t)rl_end, (size_t)rl_point, true, l->attr_text);
    return l->row + 1;
}

int ui_input_rows(int width)
{
    layout l = {.w = NULL, .width = width > 2 ? width : 2};
    return lay_out(&l);
}

void ui_input_draw(WINDOW *w, int attr_text, int attr_prompt, int attr_control)
{
    int rows, cols;
    getmaxyx(w, rows, cols);
    layout l = {.w = NULL, .width = cols > 2 ? cols : 2, .attr_text = attr_text, .attr_control = attr_control};
    int need = lay_out(&l);
    /* Show the rows around the cursor when the line is taller than the window. */
    int first = 0;
    if (need > rows)
        first = l.cy - rows + 1 > 0 ? l.cy - rows + 1 : 0;
    werase(w);
    wbkgdset(w, (chtype)attr_text);
    l = (layout){.w = w, .width = cols > 2 ? cols : 2, .first_row = first, .rows = rows,
                 .attr_text = attr_text, .attr_control = attr_control};
    /* The prompt in its own colour, then the line. */
    const char *prompt = rl_display_prompt ? rl_display_prompt : in.prompt;
    lay_text(&l, prompt, strlen(prompt), 0, false, attr_prompt);
    lay_text(&l, rl_line_buffer ? rl_line_buffer : "", (size_t)rl_end, (size_t)rl_point, true, attr_text);
    wattrset(w, attr_text);
    int cy = l.cy - first, cx = l.cx < cols ? l.cx : cols - 1;
    if (cy >= 0 && cy < rows)
        wmove(w, cy, cx);
    in.changed = false;
}

/* ---- the panel ------------------------------------------------------------------------------ */

static void input_panel_draw(void *self, WINDOW *w)
{
    (void)self;
    ui_input_draw(w, theme_attr(TH_INPUT), theme_attr(TH_PROMPT), theme_attr(TH_CONTROL));
}

/* Keys readline knows by their escape sequences. */
static const char *key_sequence(int key)
{
    switch (key) {
    case KEY_LEFT: return "\033[D";
    case KEY_RIGHT: return "\033[C";
    case KEY_UP: return "\033[A";
    case KEY_DOWN: return "\033[B";
    case KEY_HOME: return "\033[H";
    case KEY_END: return "\033[F";
    case KEY_DC: return "\033[3~";
    case KEY_BACKSPACE: return "\177";
    case KEY_ENTER: return "\r";
    case KEY_IC: return "\033[2~";
    default: return NULL;
    }
}

static int input_panel_key(void *self, int key)
{
    (void)self;
    const char *seq = key_sequence(key);
    if (!seq)
        return 0;
    ui_input_feed(seq, strlen(seq));
    return UI_HANDLED | UI_REDRAW;
}

const ui_panel ui_input_panel = {"input", input_panel_draw, input_panel_key};
