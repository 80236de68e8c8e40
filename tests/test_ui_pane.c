/* test_ui_pane.c: the side pane drawn by its real panel code into a curses
 * terminal whose output goes to /dev/null, read back cell by cell (issue
 * 28.12): the kernel table keeps every column inside the pane whatever the
 * numbers (a first lavapipe token's microseconds pushed rows out of it),
 * shows only the columns the backend fills (the CPU reference gives time
 * alone: no calls per token, no GB/s), the backend's description wraps
 * at words instead of being cut at every width, and the token line names
 * whose clock it reads. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "ui/ui_sidepane.h"

/* The text of row y of w (cells read back; trailing blanks cut). */
static void row_text(WINDOW *w, int y, char *out, size_t cap)
{
    int wd = getmaxx(w);
    size_t o = 0;
    for (int x = 0; x < wd && o + 8 < cap; x++) {
        cchar_t c;
        if (mvwin_wch(w, y, x, &c) == ERR)
            break;
        wchar_t wc[CCHARW_MAX + 1];
        attr_t a;
        short pair;
        if (getcchar(&c, wc, &a, &pair, NULL) == ERR || !wc[0])
            wc[0] = L' ';
        char mb[8];
        int n = wctomb(mb, wc[0]);
        if (n > 0) {
            memcpy(out + o, mb, (size_t)n);
            o += (size_t)n;
        }
    }
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = 0;
}

/* The row whose text starts with `start` (after the pane's margin), -1 if none. */
static int find_row(WINDOW *w, const char *start)
{
    char t[1024];
    for (int y = 0; y < getmaxy(w); y++) {
        row_text(w, y, t, sizeof t);
        if (!strncmp(t + (t[0] == ' '), start, strlen(start)))
            return y;
    }
    return -1;
}

/* The row of w whose text starts with `start` into t ("" where there is
 * none); its y, -1 if none. */
static int read_row(WINDOW *w, const char *start, char *t, size_t cap)
{
    int y = find_row(w, start);
    t[0] = 0;
    if (y >= 0)
        row_text(w, y, t, cap);
    return y;
}

static int count_fields(const char *s)
{
    int n = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        n++;
        while (*p && *p != ' ')
            p++;
    }
    return n;
}

static void add_kernel(dec_stats *st, const char *name, double calls, double us, double gbps)
{
    engine_kernel_stat *k = &st->engine.kernels[st->engine.n_kernels++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->calls_per_token = calls;
    k->us_per_token = us;
    k->gbps = gbps;
}

static void draw(ui_sidepane *p, WINDOW *w)
{
    ui_sidepane_panel.draw(p, w);
}

/* A pane fed `st` once, drawn into a new window of `lines` x `width`. */
static WINDOW *pane_of(const dec_stats *st, int lines, int width)
{
    ui_sidepane p;
    ui_sidepane_init(&p, 1);
    ui_sidepane_update(&p, st, false);
    WINDOW *w = newwin(lines, width, 0, 0);
    draw(&p, w);
    return w;
}

/* Vulkan-like rows with a first token's huge times: every row keeps its
 * five fields (name, c/t, us/t, %, GB/s) inside the pane, at every width. */
static void test_kernel_rows_fit(void)
{
    static const int widths[] = {28, 32, 40, 51, 60};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        dec_stats st;
        memset(&st, 0, sizeof st);
        add_kernel(&st, "attn_k_b", 4, 123456.7, 0.4);
        add_kernel(&st, "sample_select", 10, 98765.4, 12345.6);
        add_kernel(&st, "moe_gate_up", 3, 8.5, 950.2);
        add_kernel(&st, "embed", 1, 0.2, 3.1);
        WINDOW *w = pane_of(&st, 60, widths[wi]);
        int head = find_row(w, "kernel ");
        CHECK(head >= 0, "width %d: no table header", widths[wi]);
        if (head < 0) {
            delwin(w);
            continue;
        }
        char t[1024];
        row_text(w, head, t, sizeof t);
        /* From 40 columns every column; narrower, the names keep room and
         * calls, then GB/s give way -- but a row never loses a field. */
        int cols = count_fields(t);
        CHECK(strstr(t, "us/t") && (widths[wi] < 40 || cols == 5), "width %d: header '%.200s'", widths[wi], t);
        for (int r = 1; r <= 4; r++) {
            row_text(w, head + r, t, sizeof t);
            CHECK(count_fields(t) == cols, "width %d: row %d '%.200s' has %d fields, the header %d", widths[wi], r, t,
                  count_fields(t), cols);
            CHECK((int)strlen(t) <= widths[wi], "width %d: row '%.200s' longer than the pane", widths[wi], t);
        }
        delwin(w);
    }
}

/* The CPU reference's rows give time alone: neither c/t nor GB/s shows,
 * and the rows have three fields (name, us/t, %). */
static void test_cpu_columns_hidden(void)
{
    ui_sidepane p;
    ui_sidepane_init(&p, 1);
    dec_stats st;
    memset(&st, 0, sizeof st);
    add_kernel(&st, "moe experts", 0, 522.1, 0);
    add_kernel(&st, "attn q/kv proj", 0, 302.8, 0);
    ui_sidepane_update(&p, &st, false);
    WINDOW *w = newwin(40, 44, 0, 0);
    draw(&p, w);
    char t[1024];
    int head = read_row(w, "kernel ", t, sizeof t);
    CHECK(head >= 0 && strstr(t, "us/t") && !strstr(t, "c/t") && !strstr(t, "GB/s"), "header '%.200s'", t);
    if (head >= 0) {
        row_text(w, head + 1, t, sizeof t);
        CHECK(strstr(t, "moe experts") && count_fields(t) == 4 /* "moe", "experts", us, % */, "row '%.200s'", t);
    }
    /* F4 sorts only by what is shown: time, then name, then time. */
    CHECK(p.sort == SORT_TIME, "sort %d", p.sort);
    ui_sidepane_panel.key(&p, KEY_F(4));
    CHECK(p.sort == SORT_NAME, "F4 went to sort %d, a hidden column's", p.sort);
    ui_sidepane_panel.key(&p, KEY_F(4));
    CHECK(p.sort == SORT_TIME, "F4 went to sort %d", p.sort);
    delwin(w);
}

/* The backend's description: wrapped at words under its key at every
 * width; every word shown is whole, and what does not fit ends in an
 * ellipsis. */
static void test_backend_wrapped(void)
{
    const char *desc = "Vulkan: llvmpipe (LLVM 15.0.6, 256 bits) (cpu, 2.0 GiB, subgroup 8), weights 0.00 GiB, "
                       "39 dependent dispatches per token (23 joined by counters or tagged words: qkv q, not barriers)";
    static const int widths[] = {24, 30, 40, 51, 60, 120};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        ui_sidepane p;
        ui_sidepane_init(&p, 1);
        ui_sidepane_set_backend(&p, desc);
        WINDOW *w = newwin(40, widths[wi], 0, 0);
        draw(&p, w);
        int y = find_row(w, "Backend");
        CHECK(y >= 0, "width %d: no Backend row", widths[wi]);
        if (y < 0) {
            delwin(w);
            continue;
        }
        /* The value's rows: from column 11 on, until a row without one. */
        char shown[2048] = "", t[1024];
        bool ellipsis = false;
        for (int r = y; r < y + 10; r++) {
            row_text(w, r, t, sizeof t);
            if (r > y && (strlen(t) <= 11 || strncmp(t, "           ", 11) != 0))
                break;
            const char *v = strlen(t) > 11 ? t + 11 : "";
            size_t len = strlen(v);
            if (len >= 3 && !strcmp(v + len - 3, "\xe2\x80\xa6")) {
                ellipsis = true;
                len -= 3;
            }
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "%s%.*s", shown[0] ? " " : "", (int)len, v);
        }
        /* Collapse the spaces the rows end with. */
        char norm[2048];
        size_t o = 0;
        for (const char *s = shown; *s && o + 1 < sizeof norm; s++)
            if (*s != ' ' || (o > 0 && norm[o - 1] != ' '))
                norm[o++] = *s;
        while (o > 0 && norm[o - 1] == ' ')
            o--;
        norm[o] = 0;
        bool whole_words = !strncmp(desc, norm, o) && (desc[o] == ' ' || desc[o] == 0);
        CHECK(o > 0 && whole_words, "width %d: shown '%.200s' is not the start of the description in whole words",
              widths[wi], norm);
        CHECK(desc[o] == 0 || ellipsis, "width %d: cut after '%.200s' without an ellipsis", widths[wi], norm);
        delwin(w);
    }
}

/* The token line says whose time and steps it shows: the Vulkan core's
 * GPU time and dispatches, or the CPU backend's own clock and its steps
 * (a token's barriers) -- not "GPU" on a machine that has none (seen in the
 * chat on --backend cpu: "40005 us GPU, 706 dispatches"). */
static void test_token_line_names_its_clock(void)
{
    for (int cpu = 0; cpu <= 1; cpu++) {
        dec_stats st;
        memset(&st, 0, sizeof st);
        add_kernel(&st, "exp gate/up", 46, 13070.1, 62);
        st.engine.us_per_token_measured = 40005;
        st.engine.dispatches_per_token = 706;
        st.engine.cpu_steps = cpu;
        WINDOW *w = pane_of(&st, 60, 51);
        char t[1024];
        int y = read_row(w, "token ", t, sizeof t);
        const char *want = cpu ? "40005 us CPU, 706 steps" : "40005 us GPU, 706 dispatches";
        CHECK(y >= 0 && strstr(t, want), "%s backend: token line '%.200s', want '%s'", cpu ? "CPU" : "GPU", t, want);
        delwin(w);
    }
}

/* The sync row: on barriers after a give-up, when the counters come back;
 * for good; back on counters (and how many gave up); no row when none did. */
static void test_sync_row_says_barriers_or_counters(void)
{
    struct {
        uint64_t at, retry;
        uint32_t n;
        const char *want;
    } cases[] = {
        {7, 263, 1, "barriers since token 7, counters at 263"},
        {300, 0, 5, "barriers for good (5 gave up)"},
        {0, 0, 2, "counters again (2 gave up)"},
        {0, 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dec_stats st;
        memset(&st, 0, sizeof st);
        add_kernel(&st, "exp gate/up", 46, 13070.1, 62);
        st.engine.sync_gave_up_at = cases[i].at;
        st.engine.sync_retry_at = cases[i].retry;
        st.engine.sync_give_ups = cases[i].n;
        WINDOW *w = pane_of(&st, 60, 51); /* the chat's pane width */
        char t[1024];
        int y = read_row(w, "sync ", t, sizeof t);
        if (cases[i].want)
            CHECK(y >= 0 && strstr(t, cases[i].want), "case %zu: sync row '%.200s', want '%s'", i, y >= 0 ? t : "",
                  cases[i].want);
        else
            CHECK(y < 0, "no give-up, yet a sync row '%.200s'", t);
        delwin(w);
    }
}

int main(void)
{
    setlocale(LC_ALL, "C.UTF-8");
    FILE *out = fopen("/dev/null", "w");
    SCREEN *scr = out ? newterm("xterm-256color", out, stdin) : NULL;
    if (!scr) {
        printf("FAIL - curses: no terminal description for xterm-256color\n");
        return 1;
    }
    RUN(test_kernel_rows_fit);
    RUN(test_cpu_columns_hidden);
    RUN(test_backend_wrapped);
    RUN(test_token_line_names_its_clock);
    RUN(test_sync_row_says_barriers_or_counters);
    endwin();
    delscreen(scr);
    fclose(out);
    TESTS_DONE();
}
