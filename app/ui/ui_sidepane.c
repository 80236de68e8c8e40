/* ui_sidepane.c: meters and the kernel table. */
#include "ui_sidepane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "theme.h"
#include "ui_chatview.h"
#include "common/ui_text.h"

void ui_sidepane_init(ui_sidepane *p, int want)
{
    memset(p, 0, sizeof *p);
    p->want = want;
    p->sort = SORT_TIME;
    snprintf(p->backend, sizeof p->backend, "starting...");
}

void ui_sidepane_set_model(ui_sidepane *p, const char *const *lines, int n, const char *file)
{
    snprintf(p->model_file, sizeof p->model_file, "%s", file ? file : "");
    p->n_model_lines = n < 4 ? n : 4;
    for (int i = 0; i < p->n_model_lines; i++)
        snprintf(p->model_lines[i], sizeof p->model_lines[i], "%s", lines[i]);
}

void ui_sidepane_set_backend(ui_sidepane *p, const char *desc)
{
    snprintf(p->backend, sizeof p->backend, "%s", desc);
}

void ui_sidepane_update(ui_sidepane *p, const dec_stats *st, bool sample)
{
    p->st = *st;
    p->have_stats = true;
    if (sample && st->decode_tps > 0)
        ui_ring_add(&p->decode, st->decode_tps);
}

void ui_ring_add(ui_ring *r, double v)
{
    r->v[r->head] = (float)v;
    r->head = (r->head + 1) % UI_SPARK_MAX;
    if (r->n < UI_SPARK_MAX)
        r->n++;
    if (v > r->peak)
        r->peak = v;
}

void ui_sidepane_add_prefill(ui_sidepane *p, double tps)
{
    if (tps > 0)
        ui_ring_add(&p->prefill, tps);
}

void ui_sidepane_set_loading(ui_sidepane *p, bool loading, const char *stage, double frac)
{
    p->loading = loading;
    snprintf(p->load_stage, sizeof p->load_stage, "%s", stage ? stage : "");
    p->load_frac = frac;
}

bool ui_sidepane_set_context(ui_sidepane *p, uint32_t n_ctx, size_t dropped)
{
    if (p->ctx_n == n_ctx && p->ctx_dropped == dropped)
        return false;
    if (n_ctx != p->ctx_n)
        p->st.n_past = 0; /* a new engine: the old cache is gone */
    p->ctx_n = n_ctx;
    p->ctx_dropped = dropped;
    return true;
}

const char *ui_sidepane_sort_name(ui_kernel_sort s)
{
    static const char *const names[SORT_COUNT] = {"time", "GB/s", "calls", "name"};
    return names[s];
}

/* ---- drawing helpers ------------------------------------------------------------ */

#define BACKEND_LINES 3 /* the backend's description at most (/stats shows it whole) */

typedef struct {
    WINDOW *w;
    int y, h, wd;
} pen;

static void text_at(pen *p, int x, theme_el el, const char *s)
{
    if (p->y >= p->h || x >= p->wd)
        return;
    /* Untrusted strings (model names, kernel names) are shown inert. */
    sbuf b = {0};
    tsafe_sanitize(&b, s, strlen(s), false);
    wattrset(p->w, theme_attr(el));
    int room = p->wd - x;
    const char *t = sbuf_str(&b);
    int cells = 0;
    size_t i = 0;
    while (i < b.len) {
        uint32_t cp;
        size_t len = tsafe_decode(t + i, b.len - i, &cp);
        int cw = ui_cp_width(cp);
        if (cells + cw > room)
            break;
        cells += cw;
        i += len;
    }
    mvwaddnstr(p->w, p->y, x, t, (int)i);
    sbuf_free(&b);
}

static void title(pen *p, const char *s)
{
    if (p->y > 0)
        p->y++;
    text_at(p, 1, TH_PANE_TITLE, s);
    p->y++;
}

static void kv(pen *p, const char *key, const char *value)
{
    text_at(p, 1, TH_PANE, key);
    text_at(p, 11, TH_PANE_VALUE, value);
    p->y++;
}

static void bar(pen *p, double frac, int width)
{
    if (frac < 0)
        frac = 0;
    if (frac > 1)
        frac = 1;
    int full = (int)(frac * width + 0.5);
    const char *on = ui_utf8_locale() ? "\xe2\x96\x88" : "#";  /* █ */
    const char *off = ui_utf8_locale() ? "\xe2\x96\x91" : "."; /* ░ */
    wmove(p->w, p->y, 1);
    wattrset(p->w, theme_attr(TH_BAR));
    for (int i = 0; i < full; i++)
        waddstr(p->w, on);
    wattrset(p->w, theme_attr(TH_BAR_EMPTY));
    for (int i = full; i < width; i++)
        waddstr(p->w, off);
}

/* The latest `width` samples of a ring, as block heights from its peak. */
static void sparkline(pen *p, int x, const ui_ring *r, int width)
{
    static const char *const blocks[8] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
                                          "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"};
    static const char ascii[] = "_.-:=+*#";
    if (width <= 0 || p->y >= p->h)
        return;
    int n = r->n < width ? r->n : width;
    double peak = r->peak > 0 ? r->peak : 1;
    wmove(p->w, p->y, x);
    wattrset(p->w, theme_attr(TH_SPARK));
    for (int i = 0; i < n; i++) {
        int idx = (r->head - n + i + UI_SPARK_MAX) % UI_SPARK_MAX;
        int level = (int)(r->v[idx] / peak * 7.0 + 0.5);
        level = level < 0 ? 0 : level > 7 ? 7 : level;
        if (ui_utf8_locale())
            waddstr(p->w, blocks[level]);
        else
            waddch(p->w, (chtype)ascii[level]);
    }
}

/* A long value under its key, wrapped at words over at most max_lines
 * lines; what does not fit ends in an ellipsis (/stats has it whole). */
typedef struct {
    ui_span spans[16];
    int n;
} spans;

static void keep_span(void *user, ui_span sp)
{
    spans *s = user;
    if (s->n < 16)
        s->spans[s->n++] = sp;
}

static void kv_wrapped(pen *p, const char *key, const char *value, int max_lines)
{
    text_at(p, 1, TH_PANE, key);
    int x = 11, room = p->wd - x - 1;
    if (room < 8) {
        text_at(p, x, TH_PANE_VALUE, value);
        p->y++;
        return;
    }
    sbuf b = {0};
    tsafe_sanitize(&b, value, strlen(value), false);
    spans s = {.n = 0};
    ui_wrap(sbuf_str(&b), b.len, room, UI_WRAP_WORDS, keep_span, &s);
    for (int i = 0; i < s.n && i < max_lines && p->y < p->h; i++) {
        char line[512];
        const ui_span *sp = &s.spans[i];
        bool cut = i == max_lines - 1 && s.n > max_lines;
        size_t len = sp->len;
        if (cut && sp->width + 2 > room) {
            /* Room for the ellipsis: the last word gives way. */
            while (len > 0 && b.s[sp->off + len - 1] != ' ')
                len--;
            while (len > 0 && b.s[sp->off + len - 1] == ' ')
                len--;
        }
        snprintf(line, sizeof line, "%.*s%s", (int)len, b.s + sp->off, cut ? (ui_utf8_locale() ? " \xe2\x80\xa6" : " ...") : "");
        text_at(p, x, TH_PANE_VALUE, line);
        p->y++;
    }
    sbuf_free(&b);
}

/* A value and its sparkline on one line: now, and over the session (one
 * sample per prompt for prefill, about ten a second while decoding). */
static void kv_spark(pen *p, const char *key, const char *value, const ui_ring *r)
{
    text_at(p, 1, TH_PANE, key);
    text_at(p, 11, TH_PANE_VALUE, value);
    sparkline(p, 26, r, p->wd - 27);
    p->y++;
}

/* ---- the kernel table ----------------------------------------------------------------- */

static ui_kernel_sort sort_key;

static int cmp_kernel(const void *a, const void *b)
{
    const engine_kernel_stat *x = a, *y = b;
    double dx, dy;
    switch (sort_key) {
    case SORT_GBPS:
        dx = x->gbps, dy = y->gbps;
        break;
    case SORT_CALLS:
        dx = x->calls_per_token, dy = y->calls_per_token;
        break;
    case SORT_NAME:
        return strcmp(x->name, y->name);
    default:
        dx = x->us_per_token, dy = y->us_per_token;
    }
    return dx < dy ? 1 : dx > dy ? -1 : strcmp(x->name, y->name);
}

/* A number in at most `width` cells: fewer decimals first, then k, M, G
 * (a first lavapipe token's microseconds must not push the row out of the
 * pane, issue 28.12). */
static void fit_number(char *buf, size_t cap, int width, double v, int decimals)
{
    for (int d = decimals; d >= 0; d--)
        if (snprintf(buf, cap, "%.*f", d, v) <= width)
            return;
    static const char *const suffix[] = {"k", "M", "G"};
    double x = v;
    for (int i = 0; i < 3; i++) {
        x /= 1000;
        for (int d = 1; d >= 0; d--)
            if (snprintf(buf, cap, "%.*f%s", d, x, suffix[i]) <= width)
                return;
    }
    snprintf(buf, cap, "%.*s", width, "##########");
}

#define NAME_MIN 8 /* kernel name cells the table keeps */

/* The table's columns after the name, left to right; a column is shown only
 * when the backend gives it (the CPU reference measures time alone). */
typedef enum { COL_CALLS, COL_US, COL_PCT, COL_GBPS, COL_COUNT } kernel_col;
static const struct {
    const char *head;
    int width, decimals;
    ui_kernel_sort sort; /* the sort it shows (SORT_COUNT: none) */
} cols[COL_COUNT] = {
    [COL_CALLS] = {"c/t", 4, 0, SORT_CALLS},
    [COL_US] = {"us/t", 7, 1, SORT_TIME},
    [COL_PCT] = {"%", 5, 1, SORT_COUNT},
    [COL_GBPS] = {"GB/s", 5, 0, SORT_GBPS},
};

void ui_sidepane_columns(const engine_stats *es, bool *calls, bool *gbps)
{
    *calls = *gbps = false;
    uint32_t n = es->n_kernels < ENGINE_MAX_KERNEL_STATS ? es->n_kernels : ENGINE_MAX_KERNEL_STATS;
    for (uint32_t i = 0; i < n; i++) {
        *calls |= es->kernels[i].calls_per_token > 0;
        *gbps |= es->kernels[i].gbps > 0;
    }
}

static void kernel_table(pen *p, const ui_sidepane *sp)
{
    const engine_stats *es = &sp->st.engine;
    char head[64];
    snprintf(head, sizeof head, "Kernels (F4 sorts: %s)", ui_sidepane_sort_name(sp->sort));
    title(p, head);
    if (es->n_kernels == 0) {
        text_at(p, 1, TH_PANE, sp->have_stats ? "no per-kernel timings yet" : "");
        p->y++;
        return;
    }
    bool shown[COL_COUNT] = {true, true, true, true};
    ui_sidepane_columns(es, &shown[COL_CALLS], &shown[COL_GBPS]);
    /* kernel | calls per token | us per token | % of the token | GB/s; on a
     * narrow pane the least telling columns give way to the names. */
    static const kernel_col give_way[] = {COL_CALLS, COL_GBPS, COL_PCT};
    int name_w = 0;
    for (size_t g = 0;; g++) {
        int cols_w = 0;
        for (int c = 0; c < COL_COUNT; c++)
            cols_w += shown[c] ? cols[c].width + 1 : 0;
        name_w = p->wd - 2 - cols_w;
        if (name_w >= NAME_MIN || g == sizeof give_way / sizeof give_way[0])
            break;
        shown[give_way[g]] = false;
    }
    if (name_w < NAME_MIN)
        name_w = NAME_MIN;
    char line[256], num[32];
    wattrset(p->w, theme_attr(TH_TABLE_HEAD));
    wmove(p->w, p->y, 0);
    for (int i = 0; i < p->wd; i++)
        waddch(p->w, ' ');
    int at = snprintf(line, sizeof line, "%-*.*s", name_w, name_w, "kernel");
    int sx = 1, sw = 6; /* the sorted column: the name's unless another is */
    for (int c = 0; c < COL_COUNT; c++) {
        if (!shown[c])
            continue;
        if (cols[c].sort == sp->sort) {
            sx = 1 + at + 1;
            sw = cols[c].width;
        }
        at += snprintf(line + at, sizeof line - (size_t)at, " %*s", cols[c].width, cols[c].head);
    }
    text_at(p, 1, TH_TABLE_HEAD, line);
    if (sx + sw <= p->wd)
        mvwchgat(p->w, p->y, sx, sw, (attr_t)theme_attr(TH_TABLE_SORT) & ~A_COLOR,
                 (short)PAIR_NUMBER(theme_attr(TH_TABLE_SORT)), NULL);
    p->y++;
    engine_kernel_stat ks[ENGINE_MAX_KERNEL_STATS];
    uint32_t n = es->n_kernels < ENGINE_MAX_KERNEL_STATS ? es->n_kernels : ENGINE_MAX_KERNEL_STATS;
    memcpy(ks, es->kernels, n * sizeof *ks);
    sort_key = sp->sort;
    qsort(ks, n, sizeof *ks, cmp_kernel);
    double total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += ks[i].us_per_token;
    for (uint32_t i = 0; i < n && p->y < p->h; i++) {
        char name[49];
        snprintf(name, sizeof name, "%.48s", ks[i].name);
        at = snprintf(line, sizeof line, "%-*.*s", name_w, name_w, name);
        double v[COL_COUNT] = {ks[i].calls_per_token, ks[i].us_per_token,
                               total > 0 ? 100.0 * ks[i].us_per_token / total : 0.0, ks[i].gbps};
        for (int c = 0; c < COL_COUNT; c++) {
            if (!shown[c])
                continue;
            fit_number(num, sizeof num, cols[c].width, v[c], cols[c].decimals);
            at += snprintf(line + at, sizeof line - (size_t)at, " %*s", cols[c].width, num);
        }
        text_at(p, 1, TH_PANE, line);
        p->y++;
    }
}

/* ---- the pane ------------------------------------------------------------------------------ */

static void sidepane_draw(void *self, WINDOW *w)
{
    ui_sidepane *sp = self;
    pen p = {w, 0, 0, 0};
    getmaxyx(w, p.h, p.wd);
    wbkgdset(w, (chtype)theme_attr(TH_PANE));
    werase(w);
    char buf[160];
    snprintf(buf, sizeof buf, "Model%s%s", sp->model_file[0] ? ": " : "", sp->model_file);
    title(&p, buf);
    for (int i = 0; i < sp->n_model_lines; i++) {
        text_at(&p, 1, TH_PANE_VALUE, sp->model_lines[i]);
        p.y++;
    }
    kv_wrapped(&p, "Backend", sp->backend, BACKEND_LINES);
    if (sp->loading) {
        snprintf(buf, sizeof buf, "%s %.0f%%", sp->load_stage, sp->load_frac * 100);
        kv(&p, "Loading", buf);
        bar(&p, sp->load_frac, p.wd - 2);
        p.y++;
    }
    const dec_stats *st = &sp->st;
    title(&p, "Context");
    uint32_t n_ctx = sp->ctx_n ? sp->ctx_n : st->n_ctx;
    if (n_ctx) {
        uint32_t used = st->n_past < n_ctx ? st->n_past : n_ctx;
        snprintf(buf, sizeof buf, "%u / %u tokens (%.0f%%)", used, n_ctx, 100.0 * used / n_ctx);
        text_at(&p, 1, TH_PANE_VALUE, buf);
        p.y++;
        bar(&p, (double)used / n_ctx, p.wd - 2);
        p.y++;
        if (sp->ctx_dropped) {
            snprintf(buf, sizeof buf, "oldest %zu exchange%s left out", sp->ctx_dropped,
                     sp->ctx_dropped == 1 ? "" : "s");
            text_at(&p, 1, TH_PANE, buf);
            p.y++;
        }
    }
    /* Now, and a sparkline over the session (one sample per prompt for
     * prefill, about ten a second while decoding). */
    title(&p, "Speed (tokens/s)");
    snprintf(buf, sizeof buf, "%.1f", st->prefill_tps);
    kv_spark(&p, "prefill", buf, &sp->prefill);
    if (st->prompt_total) { /* a prompt on its way: how far, how fast */
        snprintf(buf, sizeof buf, "%u / %u tokens, %.1f tok/s", st->prompt_done, st->prompt_total, st->prefill_tps);
        kv(&p, "prompt", buf);
    }
    snprintf(buf, sizeof buf, "%.1f%s", st->decode_tps, st->busy ? "" : " (last)");
    kv_spark(&p, "decode", buf, &sp->decode);
    if (st->draft_on && st->spec_drafted) { /* NextN drafting: decode above is the effective rate */
        snprintf(buf, sizeof buf, "k=%u, %.0f%% kept, %.2f tok/step", st->draft_k,
                 100.0 * st->spec_accepted / st->spec_drafted,
                 (double)(st->spec_accepted + st->spec_steps) / st->spec_steps);
        kv(&p, "drafts", buf);
    }
    if (st->engine.us_per_token_measured > 0) {
        bool cpu = st->engine.cpu_steps;
        snprintf(buf, sizeof buf, "%.0f us %s, %u %s", st->engine.us_per_token_measured, cpu ? "CPU" : "GPU",
                 st->engine.dispatches_per_token, cpu ? "steps" : "dispatches");
        kv(&p, "token", buf);
    }
    if (st->engine.sync_gave_up_at) { /* barriers since (engine_stats): the speed's drop explained */
        if (st->engine.sync_retry_at)
            snprintf(buf, sizeof buf, "barriers since token %llu, counters at %llu",
                     (unsigned long long)st->engine.sync_gave_up_at, (unsigned long long)st->engine.sync_retry_at);
        else
            snprintf(buf, sizeof buf, "barriers for good (%u gave up)", st->engine.sync_give_ups);
        kv(&p, "sync", buf);
    } else if (st->engine.sync_give_ups) {
        snprintf(buf, sizeof buf, "counters again (%u gave up)", st->engine.sync_give_ups);
        kv(&p, "sync", buf);
    }
    const engine_split_stat *hs = &st->engine.split;
    if (hs->layers && hs->tokens) { /* experts in host memory, per host layer: its GPU part, the CPU's
                                       experts, the hand-over (engine_split_stat) */
        double L = hs->layers;
        snprintf(buf, sizeof buf, "GPU %.0f CPU %.0f over %.0f us", hs->gpu_us / L, hs->cpu_us / L,
                 (hs->idle_us - hs->turn_us) / L);
        kv(&p, "host MoE", buf);
    }
    /* The decoder's counts, as the answers count them (an answer's header
     * says its share of "generated"). */
    snprintf(buf, sizeof buf, "%llu prompt, %llu generated", (unsigned long long)st->n_prompt_tokens,
             (unsigned long long)st->n_gen_tokens);
    kv(&p, "session", buf);
    kernel_table(&p, sp);
}

static int sidepane_key(void *self, int key)
{
    ui_sidepane *sp = self;
    if (key == KEY_F(2)) {
        /* Also when hidden: F2 is how it comes back. */
        sp->want = sp->shown ? 0 : 1;
        return UI_HANDLED | UI_LAYOUT;
    }
    if (key == KEY_F(4)) {
        /* Only by columns that are shown. */
        bool calls, gbps;
        ui_sidepane_columns(&sp->st.engine, &calls, &gbps);
        do
            sp->sort = (ui_kernel_sort)((sp->sort + 1) % SORT_COUNT);
        while ((sp->sort == SORT_CALLS && !calls && sp->st.engine.n_kernels) ||
               (sp->sort == SORT_GBPS && !gbps && sp->st.engine.n_kernels));
        return UI_HANDLED | UI_REDRAW;
    }
    return 0;
}

const ui_panel ui_sidepane_panel = {"side", sidepane_draw, sidepane_key};
