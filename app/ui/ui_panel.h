/* ui_panel.h: what a screen panel offers the screen (htop's Panel idea).
 * Key handlers report what they did instead of drawing themselves; the
 * screen (app/ui/ui_screen.h) draws a panel only when it asked to be drawn. */
#ifndef GLM_UI_PANEL_H
#define GLM_UI_PANEL_H

#include <curses.h>

enum {
    UI_HANDLED = 1, /* the key was for this panel */
    UI_REDRAW = 2,  /* the panel needs drawing */
    UI_LAYOUT = 4,  /* the screen layout changed */
};

typedef struct {
    const char *name;
    /* Draws the whole panel into w (erasing it first). */
    void (*draw)(void *self, WINDOW *w);
    /* A key the UI does not take for itself: 0 when not this panel's, else
     * UI_HANDLED and what the screen must do.  NULL: takes no keys. */
    int (*key)(void *self, int key);
} ui_panel;

#endif
