/* cpu_pack.c: Q4_0, IQ4_NL, MXFP4, Q5_0 and Q8_0 rows interleaved by groups of 16
 * (cpu_pack.h). */
#include "cpu_pack.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"

uint64_t cpu_pack_bytes(const mtensor *t)
{
    return cpu_pack_matrix_bytes(t) * (t->n_dims < 3 ? 1 : t->ne[2]);
}

bool cpu_pack_wanted(const cpu_kernels *k, const mtensor *t)
{
    return t->data && cpu_pack_type(t->type) && k->type[t->type].packed && t->ne[0] % 32 == 0 && t->ne[1] > 0;
}

_Static_assert(sizeof(block_iq4_nl) == sizeof(block_q4_0) && offsetof(block_iq4_nl, qs) == offsetof(block_q4_0, qs),
               "IQ4_NL's block is packed as Q4_0's");

/* One Q4_0 (or IQ4_NL) block of row r into the 16 rows' packed block. */
static void pack_q4_0_block(const uint8_t *row, uint64_t b, uint64_t r, uint8_t *out)
{
    const block_q4_0 *w = (const block_q4_0 *)row + b;
    memcpy(out + 2 * r, &w->d, 2);
    for (int c = 0; c < 4; c++)
        memcpy(out + 32 + 64 * c + 4 * r, w->qs + 4 * c, 4);
}

/* One MXFP4 block of row r: its exponent byte, then its codes as Q4_0's. */
static void pack_mxfp4_block(const uint8_t *row, uint64_t b, uint64_t r, uint8_t *out)
{
    const block_mxfp4 *w = (const block_mxfp4 *)row + b;
    out[r] = w->e;
    for (int c = 0; c < 4; c++)
        memcpy(out + 32 + 64 * c + 4 * r, w->qs + 4 * c, 4);
}

/* One Q8_0 block of row r, its levels biased to unsigned bytes (q + 128:
 * the sign bit flipped). */
static void pack_q8_0_block(const uint8_t *row, uint64_t b, uint64_t r, uint8_t *out)
{
    const block_q8_0 *w = (const block_q8_0 *)row + b;
    memcpy(out + 2 * r, &w->d, 2);
    for (int c = 0; c < 8; c++)
        for (int j = 0; j < 4; j++)
            out[32 + 64 * c + 4 * r + j] = (uint8_t)((uint8_t)w->qs[4 * c + j] ^ 0x80);
}

/* One Q5_0 block of row r: its qh word, then its nibbles as Q4_0's. */
static void pack_q5_0_block(const uint8_t *row, uint64_t b, uint64_t r, uint8_t *out)
{
    const block_q5_0 *w = (const block_q5_0 *)row + b;
    memcpy(out + 2 * r, &w->d, 2);
    memcpy(out + 32 + 4 * r, w->qh, 4);
    for (int c = 0; c < 4; c++)
        memcpy(out + 96 + 64 * c + 4 * r, w->qs + 4 * c, 4);
}

void cpu_pack_rows(const mtensor *t, uint8_t *dst, uint64_t g0, uint64_t g1)
{
    const bool q8 = t->type == QT_Q8_0, q5 = t->type == QT_Q5_0, mx = t->type == QT_MXFP4;
    const uint64_t per = cpu_pack_groups(t), nb = t->ne[0] / 32, gb = cpu_pack_group_bytes(t);
    const uint64_t bb = cpu_pack_block_bytes(t->type);
    for (uint64_t g = g0; g < g1; g++) {
        const uint64_t e = g / per, r0 = g % per * CPU_PACK_ROWS;
        const uint8_t *m = mtensor_matrix(t, (uint32_t)e);
        uint8_t *out = dst + g * gb;
        for (uint64_t b = 0; b < nb; b++, out += bb) {
            /* the padding rows: d = 0, and level 0 (Q8_0's biased 128; MXFP4's code 0
             * is level 0, under whatever scale its exponent 0 gives) */
            memset(out, 0, 32);
            memset(out + 32, q8 ? 0x80 : 0, bb - 32);
            for (uint64_t r = 0; r < CPU_PACK_ROWS && r0 + r < t->ne[1]; r++) {
                if (q8)
                    pack_q8_0_block(m + (r0 + r) * t->nb1, b, r, out);
                else if (q5)
                    pack_q5_0_block(m + (r0 + r) * t->nb1, b, r, out);
                else if (mx)
                    pack_mxfp4_block(m + (r0 + r) * t->nb1, b, r, out);
                else
                    pack_q4_0_block(m + (r0 + r) * t->nb1, b, r, out);
            }
        }
    }
}

/* ---- the set ---- */

typedef struct {
    const void *src; /* the tensor's data: the key */
    uint8_t *data;
    uint64_t bytes;
} pack_entry;

struct cpu_packs {
    pack_entry *e; /* sorted by src */
    uint32_t n, cap;
    uint64_t bytes;
};

cpu_packs *cpu_packs_new(err_t *err)
{
    cpu_packs *ps = calloc(1, sizeof *ps);
    if (!ps)
        err_set(err, "cpu_packs: out of memory");
    return ps;
}

void cpu_packs_free(cpu_packs *ps)
{
    if (!ps)
        return;
    for (uint32_t i = 0; i < ps->n; i++)
        free(ps->e[i].data);
    free(ps->e);
    free(ps);
}

/* The first entry whose src is not below key. */
static uint32_t lower_bound(const cpu_packs *ps, const void *key)
{
    uint32_t lo = 0, hi = ps->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)ps->e[mid].src < (uintptr_t)key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const uint8_t *cpu_packs_find(const cpu_packs *ps, const mtensor *t)
{
    if (!ps || !t->data || !cpu_pack_type(t->type))
        return NULL;
    uint32_t i = lower_bound(ps, t->data);
    return i < ps->n && ps->e[i].src == t->data ? ps->e[i].data : NULL;
}

uint64_t cpu_packs_bytes(const cpu_packs *ps)
{
    return ps ? ps->bytes : 0;
}

typedef struct {
    cpu_pool *pool;
    const mtensor *t;
    uint8_t *dst;
    uint64_t groups;
} pack_run;

static void pack_thread(void *ctx, int tid, int nth)
{
    (void)tid;
    (void)nth;
    pack_run *r = ctx;
    const uint64_t chunk = 64; /* ~64 x 18 KiB (Q8_0: 34 KiB) a take for 2048-wide rows */
    for (uint64_t g = cpu_pool_take(r->pool, chunk); g < r->groups; g = cpu_pool_take(r->pool, chunk))
        cpu_pack_rows(r->t, r->dst, g, g + chunk < r->groups ? g + chunk : r->groups);
}

int cpu_packs_add(cpu_packs *ps, cpu_pool *p, const cpu_kernels *k, const mtensor *t, err_t *err)
{
    if (!cpu_pack_wanted(k, t) || cpu_packs_find(ps, t))
        return 0;
    if (ps->n == ps->cap) {
        uint32_t cap = ps->cap ? 2 * ps->cap : 64;
        pack_entry *e = realloc(ps->e, cap * sizeof *e);
        if (!e)
            return err_set(err, "cpu_packs: out of memory");
        ps->e = e;
        ps->cap = cap;
    }
    const uint64_t bytes = cpu_pack_bytes(t);
    uint8_t *data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data)
        return err_set(err, "cpu_packs: out of memory for %.1f MiB of packed %s", (double)bytes / (1 << 20),
                       t->name ? t->name : "weights");
    pack_run r = {.pool = p, .t = t, .dst = data, .groups = cpu_pack_groups(t) * (t->n_dims < 3 ? 1 : t->ne[2])};
    cpu_pool_run(p, pack_thread, &r);
    uint32_t at = lower_bound(ps, t->data);
    memmove(ps->e + at + 1, ps->e + at, (ps->n - at) * sizeof *ps->e);
    ps->e[at] = (pack_entry){.src = t->data, .data = data, .bytes = bytes};
    ps->n++;
    ps->bytes += bytes;
    return 0;
}

bool cpu_pack_fits(uint64_t bytes)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return true;
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    return !found || (double)bytes <= 0.75 * (double)kib * 1024.0;
}

/* The layer's matrices a forward pass multiplies with (the embedding, a
 * table of rows, is not one). */
static int layer_matrices(const model_layer *L, const mtensor **out)
{
    const mtensor *all[] = {&L->q_a,        &L->q_b,       &L->q,         &L->kv_a_mqa,   &L->k_b,
                            &L->v_b,        &L->attn_out,  &L->ffn_gate,  &L->ffn_up,     &L->ffn_down,
                            &L->gate_inp,   &L->gate_exps, &L->up_exps,   &L->down_exps,  &L->gate_shexp,
                            &L->up_shexp,   &L->down_shexp, &L->nextn_eh_proj, &L->nextn_shared_head_head};
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(out, all, sizeof all);
    return n;
}

uint64_t cpu_pack_layer_bytes(const cpu_kernels *k, const model_layer *L)
{
    const mtensor *m[32];
    uint64_t bytes = 0;
    for (int i = 0, n = layer_matrices(L, m); i < n; i++)
        bytes += cpu_pack_wanted(k, m[i]) ? cpu_pack_bytes(m[i]) : 0;
    return bytes;
}

uint64_t cpu_pack_model_bytes(const cpu_kernels *k, const model *m)
{
    uint64_t bytes = cpu_pack_wanted(k, &m->output) ? cpu_pack_bytes(&m->output) : 0;
    for (uint32_t il = 0; il < m->cfg.n_layer; il++)
        bytes += cpu_pack_layer_bytes(k, &m->layers[il]);
    return bytes;
}

int cpu_packs_add_layer(cpu_packs *ps, cpu_pool *p, const cpu_kernels *k, const model_layer *L, err_t *err)
{
    const mtensor *m[32];
    for (int i = 0, n = layer_matrices(L, m); i < n; i++)
        if (cpu_pack_wanted(k, m[i]) && !cpu_packs_find(ps, m[i]) && cpu_pack_fits(cpu_pack_bytes(m[i])) &&
            cpu_packs_add(ps, p, k, m[i], err) < 0)
            return -1;
    return 0;
}
