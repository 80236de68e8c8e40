/* ui_screen.c: the layout, the panels' windows, keys and frames. */
#include "ui_screen.h"

#include <stdio.h>
#include <string.h>

#include "base/text_safe.h"
#include "theme.h"
#include "ui_input.h"
#include "ui_term.h"
#include "common/ui_text.h"

/* ---- the frame: rules between the panels ------------------------------------------- */

/* Draws only its own cells (the rule row and the separator column): it
 * lives on stdscr, under the other windows, which it must not blank. */
static void frame_draw(void *self, WINDOW *w)
{
    ui_frame *f = self;
    const ui_layout *l = f->lay;
    wattrset(w, theme_attr(TH_BORDER));
    if (l->rule_y >= 0) {
        mvwhline(w, l->rule_y, 0, ACS_HLINE, l->chat.w);
        /* The rule names the template and the file the conversation goes to. */
        sbuf s = {0};
        tsafe_sanitize(&s, f->label, strlen(f->label), false);
        int lw = ui_text_width(s.s, s.len);
        if (s.len && lw + 4 < l->chat.w)
            mvwaddstr(w, l->rule_y, l->chat.w - lw - 2, s.s);
        sbuf_free(&s);
    }
    if (l->sep_x >= 0)
        mvwvline(w, 0, l->sep_x, ACS_VLINE, LINES - 1);
}

static const ui_panel frame_panel = {"frame", frame_draw, NULL};

/* ---- set-up ----------------------------------------------------------------------------- */

void ui_screen_init(ui_screen *scr, const conversation *conv, int want_pane, int side_width)
{
    memset(scr, 0, sizeof *scr);
    scr->side_width = side_width;
    scr->relayout = true;
    scr->frame.lay = &scr->lay;
    ui_chatview_init(&scr->view, conv);
    ui_sidepane_init(&scr->pane, want_pane);
    scr->slot[UI_SLOT_FRAME] = (ui_slot){&frame_panel, &scr->frame, NULL, true};
    scr->slot[UI_SLOT_CHAT] = (ui_slot){&ui_chatview_panel, &scr->view, NULL, true};
    scr->slot[UI_SLOT_PANE] = (ui_slot){&ui_sidepane_panel, &scr->pane, NULL, true};
    scr->slot[UI_SLOT_STATUS] = (ui_slot){&ui_statusline_panel, &scr->status, NULL, true};
    scr->slot[UI_SLOT_INPUT] = (ui_slot){&ui_input_panel, NULL, NULL, true};
}

void ui_screen_free(ui_screen *scr)
{
    for (int i = 0; i < UI_SLOT_COUNT; i++)
        if (scr->slot[i].win && scr->slot[i].win != stdscr)
            delwin(scr->slot[i].win);
    ui_chatview_free(&scr->view);
    memset(scr, 0, sizeof *scr);
}

void ui_screen_dirty(ui_screen *scr, ui_slot_id id)
{
    scr->slot[id].dirty = true;
}

void ui_screen_dirty_all(ui_screen *scr)
{
    for (int i = 0; i < UI_SLOT_COUNT; i++)
        scr->slot[i].dirty = true;
}

void ui_screen_relayout(ui_screen *scr)
{
    scr->relayout = true;
}

void ui_screen_set_label(ui_screen *scr, const char *label)
{
    if (!strcmp(scr->frame.label, label))
        return;
    snprintf(scr->frame.label, sizeof scr->frame.label, "%s", label);
    scr->slot[UI_SLOT_FRAME].dirty = true;
}

WINDOW *ui_screen_input_window(const ui_screen *scr)
{
    return scr->slot[UI_SLOT_INPUT].win;
}

/* ---- layout ------------------------------------------------------------------------------- */

static void make_window(ui_slot *slot, ui_rect r)
{
    if (slot->win)
        delwin(slot->win);
    slot->win = r.h > 0 && r.w > 0 ? newwin(r.h, r.w, r.y, r.x) : NULL;
}

/* Lays the screen out when its size, the side pane's wish or the input's
 * height changed; then every window is new and every panel is drawn. */
static void lay_out(ui_screen *scr)
{
    int left = !scr->relayout && scr->lay.chat.w > 0 ? scr->lay.chat.w : COLS;
    int want = scr->pane.want;
    ui_layout nl;
    ui_layout_compute(&nl, LINES, COLS, want, scr->side_width, ui_input_rows(left));
    if (nl.chat.w != left)
        ui_layout_compute(&nl, LINES, COLS, want, scr->side_width, ui_input_rows(nl.chat.w));
    if (!scr->relayout && scr->slot[UI_SLOT_CHAT].win && !memcmp(&nl, &scr->lay, sizeof nl))
        return;
    scr->relayout = false;
    scr->lay = nl;
    scr->pane.shown = nl.pane_shown;
    scr->slot[UI_SLOT_FRAME].win = stdscr;
    make_window(&scr->slot[UI_SLOT_CHAT], nl.chat);
    make_window(&scr->slot[UI_SLOT_PANE], nl.pane);
    make_window(&scr->slot[UI_SLOT_STATUS], nl.status);
    make_window(&scr->slot[UI_SLOT_INPUT], nl.input);
    WINDOW *in = scr->slot[UI_SLOT_INPUT].win;
    if (in) {
        keypad(in, TRUE);
        nodelay(in, TRUE);
    }
    ui_input_resize(nl.input.h, nl.input.w);
    wbkgdset(stdscr, (chtype)theme_attr(TH_NORMAL));
    werase(stdscr);
    clearok(curscr, TRUE);
    ui_screen_dirty_all(scr);
}

/* ---- keys and frames ------------------------------------------------------------------------ */

bool ui_screen_key(ui_screen *scr, int key)
{
    for (int i = 0; i < UI_SLOT_COUNT; i++) {
        ui_slot *slot = &scr->slot[i];
        int r = slot->panel->key ? slot->panel->key(slot->self, key) : 0;
        if (!(r & UI_HANDLED))
            continue;
        if (r & UI_REDRAW)
            slot->dirty = true;
        if (r & UI_LAYOUT)
            scr->relayout = true;
        return true;
    }
    return false;
}

bool ui_screen_pending(const ui_screen *scr)
{
    if (scr->relayout || ui_input_changed())
        return true;
    for (int i = 0; i < UI_SLOT_COUNT; i++)
        if (scr->slot[i].dirty)
            return true;
    return false;
}

void ui_screen_draw(ui_screen *scr)
{
    lay_out(scr);
    if (ui_input_changed())
        scr->slot[UI_SLOT_INPUT].dirty = true;
    for (int i = 0; i < UI_SLOT_COUNT; i++) {
        ui_slot *slot = &scr->slot[i];
        if (slot->dirty && slot->win)
            slot->panel->draw(slot->self, slot->win);
        /* The input is composed every frame, last: curses leaves the
         * cursor where the last composed window has it. */
        if (slot->win && (slot->dirty || i == UI_SLOT_INPUT))
            wnoutrefresh(slot->win);
        slot->dirty = false;
    }
    doupdate();
    scr->last_draw = ui_term_now();
}
