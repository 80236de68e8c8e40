/* ui_statusline.c: the status line's state, messages and drawing. */
#include "ui_statusline.h"

#include <stdio.h>
#include <string.h>

#include "base/text_safe.h"
#include "ui_chatview.h"
#include "ui_term.h"
#include "common/ui_text.h"

bool ui_statusline_set_state(ui_statusline *sl, const char *state, bool busy)
{
    if (!strcmp(sl->state, state) && sl->busy == busy)
        return false;
    snprintf(sl->state, sizeof sl->state, "%s", state);
    sl->busy = busy;
    return true;
}

void ui_statusline_message(ui_statusline *sl, theme_el el, const char *text, double until)
{
    snprintf(sl->msg, sizeof sl->msg, "%s", text);
    sl->msg_el = el;
    sl->msg_until = text[0] ? until : 0;
}

bool ui_statusline_expire(ui_statusline *sl, double now)
{
    if (sl->msg_until <= 0 || now < sl->msg_until)
        return false;
    sl->msg_until = 0;
    return true;
}

double ui_statusline_until(const ui_statusline *sl)
{
    return sl->msg_until;
}

/* The keys to remember, most important first: the way out always shows;
 * the others give way, least important first, before the message is cut. */
static const char *const keys[][2] = {{"^C^C", "quit"}, {"F1", "help"}, {"F2", "pane"},
                                      {"F3", "think"},  {"PgUp", "scroll"}};
#define N_KEYS (int)(sizeof keys / sizeof keys[0])

static int key_cells(int k)
{
    return (int)(strlen(keys[k][0]) + strlen(keys[k][1]) + 2); /* "F1 help " */
}

void ui_statusline_layout(int width, int msg_cells, unsigned *shown, int *msg_room)
{
    /* " message " on the left, the keys on the right. */
    int room = width - 2;
    unsigned on = 0;
    if (room >= key_cells(0)) {
        on = 1;
        room -= key_cells(0);
    }
    for (int k = 1; on && k < N_KEYS && room - key_cells(k) >= msg_cells; k++) {
        on |= 1u << k;
        room -= key_cells(k);
    }
    *shown = on;
    *msg_room = room > 0 ? room : 0;
}

/* Text cut to `room` cells, ending in an ellipsis when cut. */
static void add_clipped(WINDOW *w, const char *s, size_t n, int room)
{
    size_t i = 0;
    int cells = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = tsafe_decode(s + i, n - i, &cp);
        int cw = ui_cp_width(cp);
        if (cells + cw > room)
            break;
        cells += cw;
        i += l;
    }
    if (i < n && room > 0) {
        /* Cut: one cell less for the mark that says so. */
        while (i > 0 && cells + 1 > room) {
            size_t back = i - 1;
            while (back > 0 && ((unsigned char)s[back] & 0xc0) == 0x80)
                back--;
            uint32_t cp;
            tsafe_decode(s + back, i - back, &cp);
            cells -= ui_cp_width(cp);
            i = back;
        }
        waddnstr(w, s, (int)i);
        waddstr(w, ui_utf8_locale() ? "\xe2\x80\xa6" : ">");
        return;
    }
    waddnstr(w, s ? s : "", (int)i);
}

static void statusline_draw(void *self, WINDOW *w)
{
    ui_statusline *sl = self;
    int wd = getmaxx(w);
    wbkgdset(w, (chtype)theme_attr(TH_STATUS));
    werase(w);
    char buf[512];
    bool transient = sl->msg_until > 0 && ui_term_now() < sl->msg_until;
    const char *msg = transient ? sl->msg : sl->state;
    if (transient && sl->busy) {
        /* While answering, how to stop it stays in view. */
        snprintf(buf, sizeof buf, "%s | %s", sl->state, sl->msg);
        msg = buf;
    }
    sbuf s = {0};
    tsafe_sanitize(&s, msg, strlen(msg), false);
    unsigned shown;
    int room;
    ui_statusline_layout(wd, ui_text_width(sbuf_str(&s), s.len), &shown, &room);
    wattrset(w, theme_attr(transient ? sl->msg_el : TH_STATUS));
    mvwaddstr(w, 0, 0, " ");
    add_clipped(w, sbuf_str(&s), s.len, room);
    waddstr(w, " ");
    sbuf_free(&s);
    /* The keys at the right edge, in reading order, the way out last. */
    int kw = 0;
    for (int k = 0; k < N_KEYS; k++)
        kw += shown & (1u << k) ? key_cells(k) : 0;
    int x = wd - kw;
    for (int i = 1; i <= N_KEYS; i++) {
        int k = i % N_KEYS;
        if (!(shown & (1u << k)))
            continue;
        wattrset(w, theme_attr(TH_STATUS_KEY));
        mvwaddstr(w, 0, x, keys[k][0]);
        x += (int)strlen(keys[k][0]);
        wattrset(w, theme_attr(TH_STATUS));
        mvwprintw(w, 0, x, " %s ", keys[k][1]);
        x += (int)strlen(keys[k][1]) + 2;
    }
}

const ui_panel ui_statusline_panel = {"status", statusline_draw, NULL};
