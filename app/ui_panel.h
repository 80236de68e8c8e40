/* ui_panel.h: what a screen panel offers the UI loop (htop's Panel idea).
 * Key handlers report what they did instead of drawing themselves. */
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
    void (*draw)(void *self, WINDOW *w);
    int (*key)(void *self, int key);
} ui_panel;

#endif
