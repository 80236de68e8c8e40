/* ui_sidepane.h: the side pane (F2): model and backend, context use,
 * prefill/decode tokens per second with a sparkline over the session, and
 * the live per-kernel table from the engine, sortable (F4).
 *
 * Meters keep their data apart from how they are drawn; the UI feeds a
 * snapshot at most ~10 times a second, so drawing never slows decoding. */
#ifndef GLM_UI_SIDEPANE_H
#define GLM_UI_SIDEPANE_H

#include <stdbool.h>

#include "decoder.h"
#include "ui_panel.h"

#define UI_SPARK_MAX 128

typedef enum { SORT_TIME, SORT_GBPS, SORT_CALLS, SORT_NAME, SORT_COUNT } ui_kernel_sort;

/* A meter's data: a fixed ring of samples and its peak (the scale). */
typedef struct {
    float v[UI_SPARK_MAX];
    int head, n;
    double peak;
} ui_ring;

void ui_ring_add(ui_ring *r, double v);

typedef struct {
    char model_lines[4][96];   /* summary of the model file */
    int n_model_lines;
    char model_file[128];      /* its file name (the title says which file runs) */
    char backend[256];         /* the backend's description (decoder_describe: up to 255 bytes) */
    dec_stats st;              /* the latest snapshot */
    bool have_stats;
    ui_ring decode, prefill;   /* tokens/s over the session, for the sparklines */
    ui_kernel_sort sort;
    bool loading;
    char load_stage[64];
    double load_frac;
    uint32_t ctx_n;            /* the engine's context (0: not known yet) */
    size_t ctx_dropped;        /* exchanges the last prompt left out */
    int want;                  /* 1 shown, 0 hidden, -1 when the terminal is wide enough (F2 toggles) */
    bool shown;                /* what the layout made of it */
} ui_sidepane;

extern const ui_panel ui_sidepane_panel;

void ui_sidepane_init(ui_sidepane *p, int want);
void ui_sidepane_set_model(ui_sidepane *p, const char *const *lines, int n, const char *file);
void ui_sidepane_set_backend(ui_sidepane *p, const char *desc);
/* A new statistics snapshot; `sample` adds its decode rate to the sparkline. */
void ui_sidepane_add_prefill(ui_sidepane *p, double tps);
void ui_sidepane_update(ui_sidepane *p, const dec_stats *st, bool sample);
void ui_sidepane_set_loading(ui_sidepane *p, bool loading, const char *stage, double frac);
/* The context as the session sees it: its size, and how many of the
 * oldest exchanges the last prompt left out; false when nothing changed. */
bool ui_sidepane_set_context(ui_sidepane *p, uint32_t n_ctx, size_t dropped);
const char *ui_sidepane_sort_name(ui_kernel_sort s);
/* Which of the optional kernel columns the backend fills (calls per token,
 * GB/s): a column no kernel has a value for is not shown, nor sorted by. */
void ui_sidepane_columns(const engine_stats *es, bool *calls, bool *gbps);

#endif
