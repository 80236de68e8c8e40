/* cpu_steps.c: the fast CPU forward pass's shared steps (cpu_state.h):
 * the end of a step (a barrier, and its time and bytes in the profile), and
 * the building blocks both halves of a block use: RMSNorm, and preparing an
 * activation in the forms the weights' kernels read.
 *
 * Why a file of its own: cpu_forward.c (attention, head) and cpu_ffn.c
 * (dense and MoE FFN) both use these, and cpu_forward.c calls cpu_ffn.c;
 * kept here, the two halves call one way only (tests/t_layers.sh). */
#include "cpu_state.h"

#include <math.h>
#include <time.h>

/* ======================================================================
 * Steps and the profile
 * ====================================================================== */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cf_step_end(cf_state *s, int tid, cf_step st, double bytes, bool count)
{
    cpu_pool_barrier(s->pool);
    if (tid != 0)
        return;
    double t = now_seconds();
    cf_step_stat *ps = &s->cur->step[st];
    ps->seconds += t - s->t_step;
    ps->bytes += bytes;
    ps->calls += count;
    s->cur->steps++;
    s->t_step = t;
}

/* ======================================================================
 * Building blocks
 * ====================================================================== */

/* RMSNorm's scale: the mean of squares summed in double as ggml does, in
 * four partial sums (a single chain of dependent double adds would take
 * 4 cycles an element, a few microseconds a row on one thread while the
 * others wait). */
static float rms_scale(const float *x, uint64_t n, float eps)
{
    double p[4] = {0, 0, 0, 0};
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            p[k] += (double)(x[i + k] * x[i + k]);
    for (; i < n; i++)
        p[0] += (double)(x[i] * x[i]);
    double sum = (p[0] + p[1]) + (p[2] + p[3]);
    return 1.0f / sqrtf((float)(sum / (double)n) + eps);
}

void cf_rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps)
{
    float scale = rms_scale(x, n, eps);
    for (uint64_t i = 0; i < n; i++)
        out[i] = (x[i] * scale) * w[i];
}

void cf_norm_prepare(const cf_state *s, const cf_act *a, float *dst, const float *src, const float *w,
                     uint32_t first, uint32_t end, unsigned mask, int tid, int nth)
{
    const uint32_t rows = end - first;
    const uint64_t n = a->n;
    /* pieces of whole 256-element blocks when there are fewer rows than
     * threads (one token: each thread takes a piece of its row) */
    uint64_t per = n, segs = 1;
    if (rows < (uint32_t)nth && n % 256 == 0) {
        segs = ((uint64_t)nth + rows - 1) / rows;
        segs = segs < n / 256 ? segs : n / 256;
        per = (n / 256 + segs - 1) / segs * 256;
        segs = (n + per - 1) / per;
    }
    for (uint64_t it = (uint64_t)tid; it < rows * segs; it += (uint64_t)nth) {
        const uint64_t r = first + it / segs, from = it % segs * per, to = from + per < n ? from + per : n;
        const float *x = src + r * n;
        float *o = dst + r * n;
        const float scale = rms_scale(x, n, s->c->rms_eps);
        for (uint64_t i = from; i < to; i++)
            o[i] = (x[i] * scale) * w[i];
        cf_prepare(s, a, o, r, n, from, to, mask);
    }
}

unsigned cf_kinds(const cf_state *s, const mtensor *w0, const mtensor *w1, const mtensor *w2, const mtensor *w3)
{
    const mtensor *w[4] = {w0, w1, w2, w3};
    unsigned mask = 0;
    for (int i = 0; i < 4 && w[i]; i++)
        if (w[i]->data)
            mask |= 1u << cpu_kernels_act(s->k, w[i]->type);
    return mask;
}

void cf_prepare(const cf_state *s, const cf_act *a, const float *src_row, uint64_t r, uint64_t n, uint64_t from,
                uint64_t to, unsigned mask)
{
    for (int kind = CPU_ACT_Q8_32; kind < CPU_ACT_KINDS; kind++)
        if (mask & (1u << kind))
            s->k->prepare[kind](src_row, n, from, to, a->rows[kind] + r * a->stride[kind]);
}

void cf_job_input(const cf_state *s, cpu_mm *job, const cf_act *a, const mtensor *w)
{
    cpu_act_kind kind = cpu_kernels_act(s->k, w->type);
    job->x = a->rows[kind];
    job->xs = a->stride[kind];
    job->packed = cpu_packs_find(s->packs, w);
}
