/* ui_statusline.c: the status line's state, messages and drawing. */
#include "ui_statusline.h"

#include <stdio.h>
#include <string.h>

#include "text_safe.h"
#include "ui_term.h"
#include "ui_text.h"

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

static void statusline_draw(void *self, WINDOW *w)
{
    ui_statusline *sl = self;
    int wd = getmaxx(w);
    wbkgdset(w, (chtype)theme_attr(TH_STATUS));
    werase(w);
    static const char *const keys[][2] = {{"F1", "help"}, {"F2", "pane"}, {"F3", "think"},
                                          {"PgUp", "scroll"}, {"^C^C", "quit"}};
    int kw = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        kw += (int)(strlen(keys[i][0]) + strlen(keys[i][1]) + 2);
    char buf[512];
    bool transient = sl->msg_until > 0 && ui_term_now() < sl->msg_until;
    const char *msg = transient ? sl->msg : sl->state;
    if (transient && sl->busy) {
        /* While answering, how to stop it stays in view. */
        snprintf(buf, sizeof buf, "%s | %s", sl->state, sl->msg);
        msg = buf;
    }
    int room = wd - 1 - (kw + 1 < wd / 2 ? kw + 1 : 0);
    sbuf s = {0};
    tsafe_sanitize(&s, msg, strlen(msg), false);
    wattrset(w, theme_attr(transient ? sl->msg_el : TH_STATUS));
    /* Clip by cells. */
    size_t i = 0;
    int cells = 0;
    while (i < s.len) {
        uint32_t cp;
        size_t l = tsafe_decode(s.s + i, s.len - i, &cp);
        int cw = ui_cp_width(cp);
        if (cells + cw > room)
            break;
        cells += cw;
        i += l;
    }
    mvwaddstr(w, 0, 0, " ");
    waddnstr(w, s.s ? s.s : "", (int)i);
    waddstr(w, " ");
    sbuf_free(&s);
    if (kw + 1 < wd / 2) {
        int x = wd - kw;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            wattrset(w, theme_attr(TH_STATUS_KEY));
            mvwaddstr(w, 0, x, keys[k][0]);
            x += (int)strlen(keys[k][0]);
            wattrset(w, theme_attr(TH_STATUS));
            mvwprintw(w, 0, x, " %s ", keys[k][1]);
            x += (int)strlen(keys[k][1]) + 2;
        }
    }
}

const ui_panel ui_statusline_panel = {"status", statusline_draw, NULL};
