/* ui_frame.c: one frame: the layout, the windows, the rules, the status
 * line; composed with wnoutrefresh per window and flushed with one doupdate. */
#include "ui_frame.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "text_safe.h"
#include "ui_input.h"
#include "ui_text.h"

static void make_window(WINDOW **w, ui_rect r)
{
    if (*w)
        delwin(*w);
    *w = NULL;
    if (r.h > 0 && r.w > 0)
        *w = newwin(r.h, r.w, r.y, r.x);
}

static void relayout(ui_app *a)
{
    int left = a->lay.chat.w > 0 ? a->lay.chat.w : COLS;
    ui_layout nl;
    ui_layout_compute(&nl, LINES, COLS, a->want_pane, a->cfg.side_width, ui_input_rows(left));
    if (nl.chat.w != left)
        ui_layout_compute(&nl, LINES, COLS, a->want_pane, a->cfg.side_width, ui_input_rows(nl.chat.w));
    if (a->w_chat && !memcmp(&nl, &a->lay, sizeof nl))
        return;
    a->lay = nl;
    make_window(&a->w_chat, nl.chat);
    make_window(&a->w_input, nl.input);
    make_window(&a->w_pane, nl.pane);
    make_window(&a->w_status, nl.status);
    if (a->w_input) {
        keypad(a->w_input, TRUE);
        nodelay(a->w_input, TRUE);
    }
    ui_input_resize(nl.input.h, nl.input.w);
    wbkgdset(stdscr, (chtype)theme_attr(TH_NORMAL));
    werase(stdscr);
    clearok(curscr, TRUE);
}

static void draw_rules(ui_app *a)
{
    wattrset(stdscr, theme_attr(TH_BORDER));
    if (a->lay.rule_y >= 0) {
        mvwhline(stdscr, a->lay.rule_y, 0, ACS_HLINE, a->lay.chat.w);
        /* The rule names the template and the file the conversation goes to. */
        char label[PATH_MAX + 64];
        const char *file = a->autosave_path[0] ? strrchr(a->autosave_path, '/') : NULL;
        int n = snprintf(label, sizeof label, " %s%s", tmpl_name(a->chat.tmpl), a->chat.thinking ? ", thinking" : "");
        if (n > 0 && (size_t)n < sizeof label)
            snprintf(label + n, sizeof label - (size_t)n, "%s%s ", file ? " | " : "", file ? file + 1 : "");
        sbuf s = {0};
        tsafe_sanitize(&s, label, strlen(label), false);
        int lw = ui_text_width(s.s, s.len);
        if (lw + 4 < a->lay.chat.w)
            mvwaddstr(stdscr, a->lay.rule_y, a->lay.chat.w - lw - 2, s.s);
        sbuf_free(&s);
    }
    if (a->lay.sep_x >= 0)
        mvwvline(stdscr, 0, a->lay.sep_x, ACS_VLINE, LINES - 1);
}

static const char *state_text(ui_app *a, char *buf, size_t cap)
{
    if (a->load_failed)
        snprintf(buf, cap, "The model is not available; /quit leaves");
    else if (!a->ready)
        snprintf(buf, cap, "Loading the model...");
    else if (a->gen == GEN_REPLAY)
        snprintf(buf, cap, "Replaying turn %d of %d | Esc stops", a->replay_turn, a->replay_turns);
    else if (a->job)
        snprintf(buf, cap, "Answering | %.1f tok/s | Esc stops", a->pane.st.decode_tps);
    else if (a->edit_index >= 0)
        snprintf(buf, cap, "Editing your last message: Enter regenerates, Esc cancels");
    else
        snprintf(buf, cap, "Ready");
    return buf;
}

static void draw_status(ui_app *a)
{
    WINDOW *w = a->w_status;
    if (!w)
        return;
    int wd = getmaxx(w);
    wbkgdset(w, (chtype)theme_attr(TH_STATUS));
    werase(w);
    static const char *const keys[][2] = {{"F1", "help"}, {"F2", "pane"}, {"F3", "think"},
                                          {"PgUp", "scroll"}, {"^C^C", "quit"}};
    int kw = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        kw += (int)(strlen(keys[i][0]) + strlen(keys[i][1]) + 2);
    char buf[512];
    bool transient = ui_app_now() < a->status_until;
    const char *msg = transient ? a->status : state_text(a, buf, sizeof buf);
    if (transient && a->job) {
        /* While answering, how to stop it stays in view. */
        char state[160];
        snprintf(buf, sizeof buf, "%s | %s", state_text(a, state, sizeof state), a->status);
        msg = buf;
    }
    int room = wd - 1 - (kw + 1 < wd / 2 ? kw + 1 : 0);
    sbuf s = {0};
    tsafe_sanitize(&s, msg, strlen(msg), false);
    wattrset(w, theme_attr(transient ? a->status_el : TH_STATUS));
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
    waddnstr(w, s.s, (int)i);
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

void ui_frame_draw(ui_app *a)
{
    relayout(a);
    if (a->job && a->gen == GEN_CHAT) {
        /* Refresh the live header with the rate so far. */
        if (a->pane.st.busy && a->pane.st.decode_tps > 0) {
            snprintf(a->live_meta, sizeof a->live_meta, "%.1f tok/s", a->pane.st.decode_tps);
            ui_chatview_live_changed(&a->view);
        }
    }
    draw_rules(a);
    wnoutrefresh(stdscr);
    if (a->w_chat) {
        ui_chatview_panel.draw(&a->view, a->w_chat);
        wnoutrefresh(a->w_chat);
    }
    if (a->w_pane) {
        ui_sidepane_panel.draw(&a->pane, a->w_pane);
        wnoutrefresh(a->w_pane);
    }
    draw_status(a);
    if (a->w_status)
        wnoutrefresh(a->w_status);
    if (a->w_input) {
        ui_input_draw(a->w_input, theme_attr(TH_INPUT), theme_attr(TH_PROMPT), theme_attr(TH_CONTROL));
        wnoutrefresh(a->w_input); /* last: the cursor stays in the input */
    }
    doupdate();
    a->dirty = false;
    a->last_draw = ui_app_now();
}

