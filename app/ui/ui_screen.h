/* ui_screen.h: the chat's screen: the layout, one curses window per panel,
 * keys offered to the panels in turn, and frames that draw only the panels
 * that changed (htop's ScreenManager).
 *
 * Promises:
 *  - a frame draws each panel marked dirty (by ui_screen_dirty or by its
 *    own key handler's UI_REDRAW) into its window, composes the windows
 *    with wnoutrefresh and flushes them with one doupdate; the input is
 *    always composed last, so the cursor stays in it;
 *  - a new layout (a resize, F2, the input growing a row) makes the
 *    windows anew and draws every panel;
 *  - the screen knows nothing of the chat session: the app feeds the
 *    panels (app/ui/ui_app.c). */
#ifndef GLM_UI_SCREEN_H
#define GLM_UI_SCREEN_H

#include <curses.h>
#include <limits.h>
#include <stdbool.h>

#include "chat/conversation.h"
#include "ui_chatview.h"
#include "ui_layout.h"
#include "ui_panel.h"
#include "ui_sidepane.h"
#include "ui_statusline.h"

/* In drawing order: the frame first (it is stdscr, under the others), the
 * input last. */
typedef enum { UI_SLOT_FRAME, UI_SLOT_CHAT, UI_SLOT_PANE, UI_SLOT_STATUS, UI_SLOT_INPUT, UI_SLOT_COUNT } ui_slot_id;

typedef struct {
    const ui_panel *panel;
    void *self;
    WINDOW *win;
    bool dirty;
} ui_slot;

/* The rules between the panels, and the label on the chat's rule. */
typedef struct {
    const ui_layout *lay;
    char label[PATH_MAX + 64];
} ui_frame;

typedef struct {
    ui_layout lay;
    bool relayout;          /* the next frame lays the screen out anew */
    int side_width;         /* the side pane's columns, 0: adapt */
    ui_slot slot[UI_SLOT_COUNT];
    ui_frame frame;
    ui_chatview view;
    ui_sidepane pane;
    ui_statusline status;
    double last_draw;       /* ui_term_now() of the last frame */
} ui_screen;

/* want_pane: 1, 0, -1 when wide enough; side_width 0: adapt.  The chat
 * view shows conv (which must outlive the screen). */
void ui_screen_init(ui_screen *scr, const conversation *conv, int want_pane, int side_width);
void ui_screen_free(ui_screen *scr);

void ui_screen_dirty(ui_screen *scr, ui_slot_id id);
void ui_screen_dirty_all(ui_screen *scr);
/* The terminal's size or the panels' wishes changed: lay out anew. */
void ui_screen_relayout(ui_screen *scr);
/* The rule's label (template, file); drawn again only when it changed. */
void ui_screen_set_label(ui_screen *scr, const char *label);

/* Offers a key to each panel in turn until one takes it; true when one did. */
bool ui_screen_key(ui_screen *scr, int key);
/* Something waits to be drawn. */
bool ui_screen_pending(const ui_screen *scr);
/* One frame. */
void ui_screen_draw(ui_screen *scr);
/* The window keys are read from (NULL while the terminal is too small). */
WINDOW *ui_screen_input_window(const ui_screen *scr);

#endif
