/* test_ui.c: the UI's pure parts: wrapping by display cells (wide and
 * combining characters, control forms), the layout, themes and settings
 * files (good and broken), colour fallbacks, XDG paths, command hints and
 * /help, the screen offering keys to its panels and what they mark for
 * drawing, the status line's state and expiring messages. */
#include <locale.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat_commands.h"
#include "paths.h"
#include "settings.h"
#include "testlib.h"
#include "theme.h"
#include "ui_layout.h"
#include "ui_screen.h"
#include "ui_statusline.h"
#include "ui_text.h"

static char tmpdir[256];

/* ---- wrapping ---------------------------------------------------------------- */

typedef struct {
    char lines[64][256];
    int widths[64];
    int n;
} wrapped;

static void collect(void *user, ui_span sp)
{
    wrapped *w = user;
    if (w->n < 64) {
        snprintf(w->lines[w->n], sizeof w->lines[0], "%.*s", (int)sp.len, (const char *)w->lines[63] + sp.off);
        w->widths[w->n] = sp.width;
        w->n++;
    }
}

/* Wraps s (kept in lines[63] as the source) at width. */
static wrapped *wrap(const char *s, int width, ui_wrap_mode mode)
{
    static wrapped w;
    memset(&w, 0, sizeof w);
    static char src[256];
    snprintf(src, sizeof src, "%.100s", s);
    /* collect() reads the source through lines[63]; keep the real output below it. */
    wrapped tmp;
    memset(&tmp, 0, sizeof tmp);
    snprintf(tmp.lines[63], sizeof tmp.lines[63], "%.100s", src);
    ui_wrap(src, strlen(src), width, mode, collect, &tmp);
    return memcpy(&w, &tmp, sizeof w);
}

static void test_wrap_words(void)
{
    wrapped *w = wrap("the quick brown fox jumps", 10, UI_WRAP_WORDS);
    CHECK(w->n == 3, "%d lines", w->n);
    CHECK(!strcmp(w->lines[0], "the quick") && !strcmp(w->lines[1], "brown fox") && !strcmp(w->lines[2], "jumps"),
          "'%.60s' '%.60s' '%.60s'", w->lines[0], w->lines[1], w->lines[2]);
    w = wrap("abcdefghijklmnop", 5, UI_WRAP_WORDS);
    CHECK(w->n == 4 && !strcmp(w->lines[3], "p"), "a long word is split: %d lines", w->n);
    w = wrap("", 10, UI_WRAP_WORDS);
    CHECK(w->n == 1 && w->lines[0][0] == 0, "an empty line still makes one line");
    w = wrap("  indented code line", 8, UI_WRAP_CHARS);
    CHECK(w->n == 3 && !strcmp(w->lines[0], "  indent") && !strcmp(w->lines[1], "ed code "), "verbatim: '%.60s' '%.60s'",
          w->lines[0], w->lines[1]);
}

static void test_wrap_wide_and_combining(void)
{
    /* 漢字 are two cells each: 4 of them need 8 cells. */
    wrapped *w = wrap("漢字漢字", 5, UI_WRAP_WORDS);
    CHECK(w->n == 2 && !strcmp(w->lines[0], "漢字") && w->widths[0] == 4, "wide: %d lines, '%.100s' (%d cells)", w->n,
          w->lines[0], w->widths[0]);
    /* e + combining acute is one cell and is never split from its base. */
    w = wrap("ae\xcc\x81" "bcd", 2, UI_WRAP_CHARS);
    CHECK(w->n == 3 && !strcmp(w->lines[0], "ae\xcc\x81") && w->widths[0] == 2, "combining: '%.100s' (%d)", w->lines[0],
          w->widths[0]);
    CHECK(ui_text_width("e\xcc\x81", 3) == 1, "width of e + U+0301");
    CHECK(ui_text_width("a\tb", 3) == UI_TAB_WIDTH + 1, "tab width");
    /* A marked control form is one unit: never split, drawn 2 cells wide. */
    sbuf s = {0};
    tsafe_sanitize(&s, "abc\x1b[2J", 7, true);
    CHECK(ui_text_width(s.s, s.len) == 8, "width of abc^[[2J is %d", ui_text_width(s.s, s.len));
    w = wrap(s.s, 4, UI_WRAP_CHARS);
    CHECK(w->n == 3 && !strcmp(w->lines[0], "abc") && !strcmp(w->lines[1], "\x01^[\x02[2"), "control form split: '%.100s'",
          w->lines[1]);
    sbuf_free(&s);
}

static void test_wrap_random(void)
{
    /* Random mixes: every line fits, and the lines put back together give
     * the text (less the spaces word wrapping drops at breaks). */
    static const char *const parts[] = {"a", "bb", " ", "漢", "e\xcc\x81", "\x01^[\x02", "xyz", "  "};
    unsigned seed = 12345;
    for (int t = 0; t < 300; t++) {
        char src[200] = "";
        int k = 3 + (int)((seed = seed * 1103515245 + 12345) >> 16) % 20;
        for (int i = 0; i < k; i++)
            strcat(src, parts[((seed = seed * 1103515245 + 12345) >> 16) % 8]);
        int width = 2 + (int)((seed = seed * 1103515245 + 12345) >> 16) % 9;
        for (int mode = 0; mode < 2; mode++) {
            wrapped *w = wrap(src, width, mode ? UI_WRAP_CHARS : UI_WRAP_WORDS);
            char joined[400] = "", nospace[400] = "", srcns[400] = "";
            for (int i = 0; i < w->n; i++) {
                CHECK(w->widths[i] <= width && ui_text_width(w->lines[i], strlen(w->lines[i])) == w->widths[i],
                      "line %d of '%.100s' at %d: %d cells", i, src, width, w->widths[i]);
                strcat(joined, w->lines[i]);
            }
            if (mode) {
                CHECK(!strcmp(joined, src), "verbatim wrap lost text of '%.100s'", src);
            } else {
                for (char *p = joined, *q = nospace; *p; p++)
                    if (*p != ' ')
                        *q++ = *p;
                for (char *p = src, *q = srcns; *p; p++)
                    if (*p != ' ')
                        *q++ = *p;
                CHECK(!strcmp(nospace, srcns), "word wrap lost text of '%.100s'", src);
            }
        }
    }
}

/* ---- layout --------------------------------------------------------------------- */

static void test_layout(void)
{
    ui_layout l;
    ui_layout_compute(&l, 40, 120, -1, 0, 1);
    CHECK(l.pane_shown && l.pane.w >= 38 && l.chat.w + 1 + l.pane.w == 120, "wide: pane %d chat %d", l.pane.w, l.chat.w);
    CHECK(l.chat.h + 1 + l.input.h + 1 == 40 && l.status.y == 39, "rows: chat %d input %d", l.chat.h, l.input.h);
    ui_layout_compute(&l, 24, 80, -1, 0, 1);
    CHECK(!l.pane_shown && l.chat.w == 80, "narrow terminals hide the pane (auto)");
    ui_layout_compute(&l, 24, 80, 1, 0, 1);
    CHECK(l.pane_shown && l.chat.w >= 30, "F2 shows it anyway: chat %d", l.chat.w);
    ui_layout_compute(&l, 24, 80, -1, 0, 50);
    CHECK(l.input.h == 23 / 3 && l.chat.h >= 1, "input capped at a third: %d", l.input.h);
    for (int rows = 1; rows < 60; rows += 7)
        for (int cols = 1; cols < 300; cols += 13) {
            ui_layout_compute(&l, rows, cols, rows % 3 - 1, 0, cols % 5);
            CHECK(l.chat.h >= 1 && l.chat.w >= 1 && l.input.h >= 1, "%dx%d: empty chat or input", rows, cols);
        }
}

/* ---- themes ---------------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_themes_parse(void)
{
    static const char *const names[] = {"default", "light", "high-contrast", "mono"};
    for (int i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof path, "themes/%s.theme", names[i]);
        theme t;
        err_t err = {{0}};
        CHECK(theme_load_file(&t, path, &err) == 0, "%.100s: %.300s", path, err.msg);
        int given = 0;
        for (int e = 0; e < TH_COUNT; e++)
            given += t.el[e].set;
        CHECK(given == TH_COUNT, "%.100s sets %d of %d elements", path, given, TH_COUNT);
        if (!strcmp(names[i], "mono"))
            for (int e = 0; e < TH_COUNT; e++)
                CHECK(t.el[e].fg == THEME_DEFAULT && t.el[e].bg == THEME_DEFAULT, "mono has a colour");
    }
    /* The built-in default is the file's copy. */
    theme a, b;
    err_t err;
    const char *bi = theme_builtin_default();
    CHECK(theme_parse(&a, bi, strlen(bi), "builtin", &err) == 0 && theme_load_file(&b, "themes/default.theme", &err) == 0,
          "default themes");
    CHECK(!memcmp(a.el, b.el, sizeof a.el), "the built-in default differs from themes/default.theme");
    /* Inheritance, #rrggbb, comments. */
    const char *t = "# c\nnormal = red default # trailing\nuser = #ff8000 0 bold underline\n";
    CHECK(theme_parse(&a, t, strlen(t), "t", &err) == 0, "%.200s", err.msg);
    CHECK(a.el[TH_USER].fg == THEME_RGB(255, 128, 0) && a.el[TH_USER].bg == 0 &&
              a.el[TH_USER].attrs == (THEME_BOLD | THEME_UNDERLINE),
          "user element");
    CHECK(a.el[TH_USER_LABEL].fg == a.el[TH_USER].fg && !a.el[TH_USER_LABEL].set, "user-label inherits from user");
    CHECK(a.el[TH_ERROR].fg == 1, "error inherits normal's red");
}

static void test_themes_bad(void)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"normal = red\n", "t.theme:1: normal: expected a foreground and a background colour"},
        {"normal = default default\nusr = red red\n", "t.theme:2: unknown element 'usr'"},
        {"normal = pruple default\n", "t.theme:1: normal: unknown colour 'pruple'"},
        {"normal = 256 default\n", "unknown colour '256'"},
        {"normal = #12345 default\n", "unknown colour '#12345'"},
        {"normal = red red blinky\n", "unknown attribute 'blinky'"},
        {"normal red red\n", "t.theme:1: expected 'ELEMENT = FOREGROUND BACKGROUND"},
        {"user = red red\n", "no 'normal' element"},
        {"normal = red red\nnormal = red red\n", "t.theme:2: element 'normal' is given twice"},
        {"normal = red red\n\x1b]0;x\n", "t.theme:2: expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[300];
        snprintf(path, sizeof path, "%.100s/t.theme", tmpdir);
        write_file(path, bad[i].text);
        theme t;
        err_t err = {{0}};
        CHECK(theme_load_file(&t, path, &err) != 0, "case %zu accepted", i);
        CHECK(strstr(err.msg, bad[i].want) != NULL && strstr(err.msg, path) == err.msg, "case %zu: '%.200s'", i, err.msg);
    }
    theme t;
    err_t err = {{0}};
    CHECK(theme_load(&t, "no-such-theme", &err) != 0 && strstr(err.msg, "available:") && strstr(err.msg, "default"),
          "unknown name: %.200s", err.msg);
    CHECK(theme_load(&t, "../etc", &err) != 0, "a name with a path separator");
    CHECK(theme_load(&t, "default", &err) == 0, "default always loads");
    /* Themes of the user's own come first. */
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%.100s/config/glmchat/themes", tmpdir);
    CHECK(paths_mkdir_p(dir, &err) == 0, "mkdir");
    snprintf(path, sizeof path, "%.200s/mine.theme", dir);
    write_file(path, "normal = green default\n");
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%.100s/config", tmpdir);
    setenv("XDG_CONFIG_HOME", cfg, 1);
    CHECK(theme_load(&t, "mine", &err) == 0 && t.el[TH_NORMAL].fg == 2 && !strcmp(t.name, "mine"), "user theme: %.100s",
          err.msg);
    char list[512];
    theme_list(list, sizeof list);
    CHECK(strstr(list, "mine") && strstr(list, "default"), "list: %.100s", list);
    unsetenv("XDG_CONFIG_HOME");
}

static void test_color_fallbacks(void)
{
    bool bold = false;
    CHECK(theme_reduce_color(196, 256, &bold) == 196, "256 stays");
    CHECK(theme_reduce_color(THEME_RGB(255, 0, 0), 256, &bold) == 196, "rgb red -> 196");
    CHECK(theme_reduce_color(196, 16, &bold) == 9, "196 -> bright red on 16 colours: %d", theme_reduce_color(196, 16, &bold));
    CHECK(theme_reduce_color(236, 16, &bold) == 0, "dark grey -> black");
    CHECK(theme_reduce_color(252, 16, &bold) == 7, "light grey -> white: %d", theme_reduce_color(252, 16, &bold));
    bold = false;
    CHECK(theme_reduce_color(196, 8, &bold) == 1 && bold, "bright red -> red + bold on 8 colours");
    CHECK(theme_reduce_color(THEME_DEFAULT, 8, &bold) == THEME_DEFAULT, "default stays");
    CHECK(theme_reduce_color(4, 2, &bold) == THEME_DEFAULT, "no colours: default");
}

/* ---- settings --------------------------------------------------------------------- */

static void test_settings(void)
{
    char path[300];
    snprintf(path, sizeof path, "%.100s/settings", tmpdir);
    write_file(path, "# mine\ntemp = 0.7\ntop-k=40\nseed = 42 # fixed\ntheme = mono\nside-pane = off\nmodel = ~/m.gguf\n");
    settings s;
    settings_defaults(&s);
    err_t err = {{0}};
    CHECK(settings_load(&s, path, false, &err) == 0, "%.200s", err.msg);
    CHECK(s.has_temp && fabsf(s.temp - 0.7f) < 1e-6f && s.has_top_k && s.top_k == 40 && s.has_seed && s.seed == 42,
          "sampling values");
    CHECK(!strcmp(s.theme, "mono") && s.side_pane == SETTINGS_PANE_OFF && !strcmp(s.model, "~/m.gguf"), "other values");
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"temp = hot\n", ":1: temp: 'hot' is not a number"},
        {"\n\ntop-p = 1.5\n", ":3: top-p: 1.5 is out of range"},
        {"colour = red\n", ":1: unknown setting 'colour'"},
        {"temp\n", ":1: expected 'key = value'"},
        {"temp =\n", ":1: temp: missing value"},
        {"seed = -3\n", "seed: '-3' is not"},
        {"side-pane = maybe\n", "side-pane: 'maybe' is not on, off or auto"},
        {"ctx = 3\n", "ctx: 3 is too small"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i].text);
        settings_defaults(&s);
        CHECK(settings_load(&s, path, false, &err) != 0 && strstr(err.msg, bad[i].want) && strstr(err.msg, path) == err.msg,
              "case %zu: '%.200s'", i, err.msg);
    }
    char missing[320];
    snprintf(missing, sizeof missing, "%.100s/none", tmpdir);
    CHECK(settings_load(&s, missing, true, &err) == 0, "a missing file is fine");
    CHECK(settings_load(&s, missing, false, &err) != 0, "unless required");
    CHECK(settings_is_sampling_key("top-p") && !settings_is_sampling_key("model"), "sampling keys");
}

static void test_paths(void)
{
    char buf[512];
    setenv("XDG_DATA_HOME", "/tmp/xdg-data", 1);
    CHECK(paths_dir(PATHS_DATA, "conversations", buf, sizeof buf, NULL) == 0 &&
              !strcmp(buf, "/tmp/xdg-data/glmchat/conversations"),
          "%.200s", buf);
    /* A relative XDG value is ignored (the spec says so). */
    setenv("XDG_STATE_HOME", "relative/dir", 1);
    setenv("HOME", "/home/u", 1);
    CHECK(paths_dir(PATHS_STATE, NULL, buf, sizeof buf, NULL) == 0 && !strcmp(buf, "/home/u/.local/state/glmchat"),
          "%.200s", buf);
    unsetenv("XDG_CONFIG_HOME");
    CHECK(paths_dir(PATHS_CONFIG, "settings", buf, sizeof buf, NULL) == 0 &&
              !strcmp(buf, "/home/u/.config/glmchat/settings"),
          "%.200s", buf);
    char deep[400];
    snprintf(deep, sizeof deep, "%.100s/a/b/c", tmpdir);
    err_t err;
    struct stat st;
    CHECK(paths_mkdir_p(deep, &err) == 0 && stat(deep, &st) == 0 && (st.st_mode & 0777) == 0700, "mkdir -p");
    CHECK(paths_expand_user("~/x", buf, sizeof buf, &err) == 0 && !strcmp(buf, "/home/u/x"), "~ expansion");
}

static void test_command_hints(void)
{
    CHECK(chatcmd_closest("sav") && !strcmp(chatcmd_closest("sav"), "save"), "/sav");
    CHECK(chatcmd_closest("retyr") && !strcmp(chatcmd_closest("retyr"), "retry"), "/retyr");
    CHECK(chatcmd_closest("quti") && !strcmp(chatcmd_closest("quti"), "quit"), "/quti");
    CHECK(chatcmd_closest("them") && !strcmp(chatcmd_closest("them"), "theme"), "/them");
    CHECK(chatcmd_closest("xyzzy") == NULL, "/xyzzy has no near command");
    CHECK(chatcmd_edit_distance("kitten", "sitting") == 3, "edit distance");
    const char *help = chatcmd_help();
    static const char *const cmds[] = {"/help", "/quit", "/clear", "/system", "/retry", "/edit", "/set", "/template",
                                       "/think", "/theme", "/save", "/load", "/replay", "/export", "/stats"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        CHECK(strstr(help, cmds[i]) || !strcmp(cmds[i], "/help"), "help lacks %.100s", cmds[i]);
}

/* /help lists every command of the table that has a help line, by topic. */
static void test_help_from_table(void)
{
    const char *help = chatcmd_help();
    const char *chatting = strstr(help, "Chatting\n"), *sampling = strstr(help, "Model and sampling\n");
    const char *files = strstr(help, "Conversations (saved after every turn)\n"), *screen = strstr(help, "Screen\n");
    CHECK(chatting == help && sampling > chatting && files > sampling && screen > files, "topics out of order");
    const char *retry = strstr(help, "  /retry             regenerate the last answer (a new seed unless you set one)\n");
    CHECK(retry && retry > chatting && retry < sampling, "/retry's line");
    const char *exp = strstr(help, "  /export[!] FILE.md write it as Markdown (! to replace a file glmchat did not write)\n");
    CHECK(exp && exp > files && exp < screen, "/export's line");
    /* Issue 28: the ways out llama-cli and ollama users type, the model
     * list, the penalties among /set's keys, the line Ctrl-C clears. */
    CHECK(strstr(help, "/quit (or /exit, /bye) leaves"), "/exit and /bye");
    const char *model_line = strstr(help, "  /model [N|FILE]    ");
    CHECK(model_line && model_line > sampling && model_line < files, "/model's line");
    CHECK(strstr(help, "repeat-penalty presence-penalty frequency-penalty"), "/set's penalties");
    CHECK(strstr(help, "Ctrl-Y right after brings it back"), "Ctrl-C's line");
    size_t n = strlen(help);
    CHECK(n > 0 && help[n - 1] != '\n', "a trailing newline");
    CHECK(chatcmd_help() == help, "built once");
}

/* The screen offers a key to its panels in order; the one that takes it
 * says what to draw again (no curses needed: no window is made). */
static void test_screen_key_loop(void)
{
    conversation conv;
    conv_init(&conv);
    ui_screen scr;
    ui_screen_init(&scr, &conv, -1, 0);
    CHECK(scr.relayout && ui_screen_pending(&scr), "a new screen is laid out and drawn");
    for (int i = 0; i < UI_SLOT_COUNT; i++)
        scr.slot[i].dirty = false;
    scr.relayout = false;
    /* F2 belongs to the side pane (also when hidden) and moves the layout. */
    scr.pane.shown = false;
    CHECK(ui_screen_key(&scr, KEY_F(2)) && scr.pane.want == 1 && scr.relayout, "F2 shows the pane");
    scr.relayout = false;
    scr.pane.shown = true;
    CHECK(ui_screen_key(&scr, KEY_F(2)) && scr.pane.want == 0 && scr.relayout, "F2 hides the pane");
    scr.relayout = false;
    /* F4 redraws the pane only. */
    ui_kernel_sort sort = scr.pane.sort;
    CHECK(ui_screen_key(&scr, KEY_F(4)) && scr.pane.sort != sort, "F4 sorts");
    CHECK(scr.slot[UI_SLOT_PANE].dirty && !scr.slot[UI_SLOT_CHAT].dirty && !scr.relayout, "F4 redraws the pane only");
    scr.slot[UI_SLOT_PANE].dirty = false;
    /* PgUp scrolls the chat and redraws it only. */
    scr.view.height = 20;
    CHECK(ui_screen_key(&scr, KEY_PPAGE) && scr.view.scroll == 18, "PgUp: scroll %d", scr.view.scroll);
    CHECK(scr.slot[UI_SLOT_CHAT].dirty && !scr.slot[UI_SLOT_PANE].dirty, "PgUp redraws the chat only");
    scr.slot[UI_SLOT_CHAT].dirty = false;
    /* A key no panel takes. */
    CHECK(!ui_screen_key(&scr, KEY_F(9)), "F9 taken");
    int dirty = 0;
    for (int i = 0; i < UI_SLOT_COUNT; i++)
        dirty += scr.slot[i].dirty;
    CHECK(dirty == 0 && !scr.relayout, "F9 marked %d panels", dirty);
    /* Only a changed label draws the frame again. */
    ui_screen_set_label(&scr, " chatml ");
    CHECK(scr.slot[UI_SLOT_FRAME].dirty, "a new label");
    scr.slot[UI_SLOT_FRAME].dirty = false;
    ui_screen_set_label(&scr, " chatml ");
    CHECK(!scr.slot[UI_SLOT_FRAME].dirty, "the same label drawn again");
    ui_screen_free(&scr);
    conv_free(&conv);
}

/* Issue 17.11: at 110 columns the message was cut before its way out
 * ("...or qui"); the keys give way first, the way to quit always shows. */
static void test_statusline_layout(void)
{
    unsigned shown;
    int room;
    ui_statusline_layout(110, 92, &shown, &room);
    CHECK((shown & 1) && room >= 92, "110 columns, a 92-cell message: keys %#x, room %d", shown, room);
    ui_statusline_layout(120, 5, &shown, &room);
    CHECK(shown == 0x1f && room >= 5, "all keys beside 'Ready': %#x", shown);
    ui_statusline_layout(60, 20, &shown, &room);
    CHECK((shown & 1) && (shown & 2) && room >= 20, "60 columns: %#x, room %d", shown, room);
    /* A message longer than the line: only the way out beside it, the rest cut. */
    ui_statusline_layout(40, 100, &shown, &room);
    CHECK(shown == 1 && room == 40 - 2 - 10, "40 columns, too long a message: %#x, room %d", shown, room);
    /* The keys that show are the most important ones, in order. */
    for (int w = 10; w < 200; w++)
        for (int m = 0; m < 120; m += 7) {
            ui_statusline_layout(w, m, &shown, &room);
            CHECK((shown & (shown + 1)) == 0, "width %d, message %d: keys %#x not a prefix", w, m, shown);
            CHECK(w < 12 || (shown & 1), "width %d: no way out shown", w);
            CHECK(room >= 0 && room <= w - 2, "width %d: room %d", w, room);
        }
}

static void test_statusline(void)
{
    ui_statusline sl;
    memset(&sl, 0, sizeof sl);
    CHECK(ui_statusline_set_state(&sl, "Ready", false), "a first state");
    CHECK(!ui_statusline_set_state(&sl, "Ready", false), "the same state is no change");
    CHECK(ui_statusline_set_state(&sl, "Ready", true), "busy is a change");
    ui_statusline_message(&sl, TH_ERROR, "oops", 100.0);
    CHECK(ui_statusline_until(&sl) == 100.0 && sl.msg_el == TH_ERROR, "a message until 100 s");
    CHECK(!ui_statusline_expire(&sl, 99.0), "expired early");
    CHECK(ui_statusline_expire(&sl, 100.0) && ui_statusline_until(&sl) == 0, "not expired at 100 s");
    CHECK(!ui_statusline_expire(&sl, 101.0), "expired twice");
    ui_statusline_message(&sl, TH_STATUS_MSG, "x", 50.0);
    ui_statusline_message(&sl, TH_STATUS_MSG, "", 60.0);
    CHECK(ui_statusline_until(&sl) == 0, "\"\" takes the message away");
}

int main(void)
{
    setlocale(LC_ALL, "C.UTF-8");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glmchat-test-ui-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    RUN(test_wrap_words);
    RUN(test_wrap_wide_and_combining);
    RUN(test_wrap_random);
    RUN(test_layout);
    RUN(test_themes_parse);
    RUN(test_themes_bad);
    RUN(test_color_fallbacks);
    RUN(test_settings);
    RUN(test_paths);
    RUN(test_command_hints);
    RUN(test_help_from_table);
    RUN(test_screen_key_loop);
    RUN(test_statusline_layout);
    RUN(test_statusline);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%.100s'", tmpdir);
    if (system(cmd) != 0)
        return 1;
    TESTS_DONE();
}
