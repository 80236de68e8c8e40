/* ui_layout.h: where each part of the screen goes, as plain numbers.
 *
 *   +----------------------------+--------------+
 *   | chat pane                  | side pane    |
 *   |                            | (F2; hidden  |
 *   |----------------------------|  on narrow   |
 *   | input (1.. rows)           |  terminals)  |
 *   +----------------------------+--------------+
 *   | status line                               |
 */
#ifndef GLM_UI_LAYOUT_H
#define GLM_UI_LAYOUT_H

#include <stdbool.h>

typedef struct {
    int y, x, h, w;
} ui_rect;

typedef struct {
    ui_rect chat, input, pane, status;
    int rule_y;       /* the rule between chat and input (row), width chat.w */
    int sep_x;        /* the pane's separator column, -1 when hidden */
    bool pane_shown;
} ui_layout;

#define UI_PANE_MIN_COLS 96 /* narrower terminals hide the side pane (auto mode) */

/* want_pane: 1 show, 0 hide, -1 auto (shown when the terminal is wide
 * enough); pane_width 0: adapt.  input_rows: rows the input wants. */
void ui_layout_compute(ui_layout *l, int lines, int cols, int want_pane, int pane_width, int input_rows);

#endif
