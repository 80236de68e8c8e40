/* ui_layout.c: screen geometry. */
#include "ui_layout.h"

static int clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void ui_layout_compute(ui_layout *l, int lines, int cols, int want_pane, int pane_width, int input_rows)
{
    if (lines < 4)
        lines = 4;
    if (cols < 10)
        cols = 10;
    bool pane = want_pane > 0 ? cols >= 60 : want_pane < 0 && cols >= UI_PANE_MIN_COLS;
    int pw = 0;
    if (pane) {
        pw = pane_width > 0 ? pane_width : clamp(cols * 34 / 100, 38, 56);
        pw = clamp(pw, 24, cols - 30);
    }
    int left = pane ? cols - pw - 1 : cols;
    int body = lines - 1; /* all but the status line */
    /* The input may grow to a third of the screen; the chat keeps the rest. */
    int in = clamp(input_rows, 1, body / 3 > 1 ? body / 3 : 1);
    l->status = (ui_rect){lines - 1, 0, 1, cols};
    l->input = (ui_rect){body - in, 0, in, left};
    l->rule_y = body - in - 1;
    l->chat = (ui_rect){0, 0, body - in - 1, left};
    if (l->chat.h < 1) {
        l->chat.h = 1;
        l->rule_y = -1;
    }
    l->pane_shown = pane;
    l->sep_x = pane ? left : -1;
    l->pane = pane ? (ui_rect){0, left + 1, body, pw} : (ui_rect){0, 0, 0, 0};
}
