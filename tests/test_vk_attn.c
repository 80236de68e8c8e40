/* test_vk_attn.c: decode and prompt-batch attention against a float64
 * reference on random data: the cache row (kv_store), the chunked absorbed
 * attention (attn, or attn_fd on tensor cores), the combine with v_b
 * (attn_vb; or attn_combine / attn_fd's own latents and v_b as a mat-mat
 * for a prompt batch), over GLM-4.7-Flash's shapes and odd ones, every
 * scoring path and chunking (the tuning variants), and the combine waiting
 * on the attention's counter. */
#include "vk_testutil.h"

/* ---- attention: cache write, chunked absorbed attention, combine + v_b --------------- */

typedef struct {
    uint32_t n_head, kv_lora, rope, nope, v_head, vtype;
    bool f16;
    uint32_t n_kv, n_q; /* cache filled with n_kv tokens; the last n_q are queries */
    bool indirect;
    const char *what;
    float qscale; /* absorbed queries' scale (0: 1): x8 spreads the scores over ~+-20 */
} attn_case;
static attn_case AC;
/* The prefill path: chunking from the prefill words (at most PF_CAP
 * chunks a token: 1 as the engine, or more), then attn_combine into latents (rows of RS, as in the
 * engine's q_abs buffer) and v_b as a batched-head mat-mat, instead of attn_vb. */
static bool AC_SPLIT;
/* Where the attention writes the latents itself (vk_attn_writes_latents:
 * attn_fd's flat rows, one chunk a token): over the query rows it reads,
 * as the engine's prompt graph does, instead of into a separate buffer. */
static bool AC_INPLACE;
/* The decode graph's counter between the attention and the combine + v_b
 * (where the kernels can): no barrier between them; the running total of
 * attention workgroups starts just below 2^32 so the wait wraps. */
static bool AC_DEP;
static uint32_t PF_CAP = 1;
/* Which row of the case table AC is: its variants share one set of inputs. */
static size_t AC_ID;

/* The inputs of case AC_ID and their float64 reference, made once for all
 * of its variants (the tuning variants, the counters, the prefill path and
 * its chunkings): the variants differ in the kernels they run, never in
 * what those compute, so each is still held to the reference of its own
 * inputs -- the same random inputs for every variant of a case -- and of
 * its own cache rows: the reference is reused only where the GPU's cache
 * contents (lat) are bit for bit those it was computed on, and made afresh
 * otherwise.  Before, each variant drew new inputs and computed the
 * reference again: the normal run's 40 CPU seconds (warm shader cache)
 * were ~half random numbers and float64 sums, the same for every variant. */
typedef struct {
    size_t id;
    bool have, have_ref;
    float *kv, *q, *qabs, *nw, *cs;
    uint8_t *wvb;
    float *lat;     /* the cache contents the reference was computed on */
    double *qmag;   /* per (query, head) */
    float *olf, *amax; /* per (query, head) x kv_lora */
    double *ref, *mag, *spread; /* per (query, head) x v_head: v_b on the float latents */
} attn_inputs;
static attn_inputs AI;

static void attn_inputs_free(void)
{
    free(AI.kv), free(AI.q), free(AI.qabs), free(AI.nw), free(AI.cs), free(AI.wvb);
    free(AI.lat), free(AI.qmag), free(AI.olf), free(AI.amax), free(AI.ref), free(AI.mag), free(AI.spread);
    memset(&AI, 0, sizeof AI);
}

/* One case's inputs, geometry and buffers. */
typedef struct {
    const attn_case *c;
    vk_attn_geom g;
    uint32_t D, QW, n, RS, pairs, q0, n_chunks, clen, cap;
    float kq;
    float *kv, *q, *qabs, *nw, *cs; /* the inputs: kv_a rows, q rows, absorbed queries, norm, rope (cos, sin) */
    vk_tensor vb;
    uint8_t *wvb;
    vk_buf bkv, bq, bqa, bcache, bout, bp_q, blat;
    vk_buf ind;                     /* the attention's grid (in bp_q) */
    vk_kv_store_args ka;
    vk_attn_args aa;
    vk_attn_vb_args va;
    vk_attn_combine_args ca;
    vk_mm_args vm;
    const float *lat_out;           /* where the latents are read back (split path) */
    bool direct;                    /* the attention writes the latents itself */
} attn_fx;

/* Random inputs for every position, the chunking, the params words and
 * every kernel's operands. */
static void attn_setup(attn_fx *f, const attn_case *c)
{
    err_t err;
    memset(f, 0, sizeof *f);
    f->c = c;
    vk_attn_geom *g = &f->g;
    CHECK(vk_attn_geom_init(&KB, g, c->n_head, c->kv_lora, c->rope, c->nope, c->v_head, c->f16, c->n_kv, &err) == 0,
          "geom: %.200s", err.msg);
    f->D = c->kv_lora + c->rope, f->QW = c->nope + c->rope, f->n = c->n_kv, f->RS = g->RS, f->pairs = c->rope / 2;
    uint32_t D = f->D, QW = f->QW, n = f->n, RS = f->RS, pairs = f->pairs;
    if (!AI.have || AI.id != AC_ID) {
        attn_inputs_free();
        AI.id = AC_ID, AI.have = true;
        AI.kv = random_vec((uint64_t)n * D, 1.0f), AI.q = random_vec((uint64_t)n * c->n_head * QW, 1.0f);
        AI.qabs = random_vec((uint64_t)n * c->n_head * RS, c->qscale > 0 ? c->qscale : 1.0f);
        AI.nw = norm_weights(c->kv_lora);
        AI.cs = malloc((uint64_t)n * pairs * 2 * sizeof *AI.cs);
        for (uint32_t p = 0; p < n; p++)
            for (uint32_t i = 0; i < pairs; i++) {
                double th = p * pow(10000.0, -2.0 * i / c->rope);
                AI.cs[(p * pairs + i) * 2] = (float)cos(th);
                AI.cs[(p * pairs + i) * 2 + 1] = (float)sin(th);
            }
        AI.wvb = rand_tensor(c->vtype, c->kv_lora, c->v_head, c->n_head, &f->vb);
    } else if (tu_tensor(c->vtype, c->kv_lora, c->v_head, c->n_head, AI.wvb, &f->vb)) {
        memset(&f->vb, 0, sizeof f->vb);
    }
    f->kv = AI.kv, f->q = AI.q, f->qabs = AI.qabs, f->nw = AI.nw, f->cs = AI.cs, f->wvb = AI.wvb;

    vk_attn_chunks(g, n, &f->n_chunks, &f->clen);
    f->cap = g->max_chunks;
    if (AC_SPLIT) {
        f->cap = PF_CAP;
        vk_attn_chunks_prefill(n, f->cap, &f->n_chunks, &f->clen);
    }
    uint32_t params[64] = {0};
    f->bkv = host_copy(f->kv, (uint64_t)n * D), f->bq = host_copy(f->q, (uint64_t)n * c->n_head * QW);
    f->bqa = host_copy(f->qabs, (uint64_t)n * c->n_head * RS);
    vk_buf bnw = host_copy(f->nw, c->kv_lora), bcs = host_copy(f->cs, (uint64_t)n * pairs * 2);
    /* rows past the end (zeroed, as the engine's): attn_fd reads whole tiles */
    f->bcache = tu_host((uint64_t)(n + VK_CACHE_PAD_ROWS) * RS);
    memset(f->bcache.map, 0, (uint64_t)(n + VK_CACHE_PAD_ROWS) * RS * sizeof(float));
    vk_buf bpart = tu_host((uint64_t)c->n_q * vk_attn_part_heads(g) * f->cap * (c->kv_lora + VK_PART_HDR));
    f->bout = tu_host((uint64_t)c->n_q * c->n_head * c->v_head);
    vk_buf bp_fill = tu_host(64);
    f->bp_q = tu_host(64);
    params[VKP_POS0] = 0;
    params[VKP_NTOK] = n;
    memcpy(bp_fill.map, params, sizeof params);
    params[VKP_POS0] = n - c->n_q;
    params[VKP_NTOK] = c->n_q;
    params[VKP_NKV] = n;
    params[VKP_NCHUNK] = f->n_chunks;
    params[VKP_CHUNK] = f->clen;
    params[VKP_ATTN_IND] = f->n_chunks;
    params[VKP_ATTN_IND + 1] = g->dec_groups_y;
    params[VKP_ATTN_IND + 2] = c->n_q;
    params[VKP_NCHUNK_PF] = f->n_chunks;
    params[VKP_CHUNK_PF] = f->clen;
    params[VKP_ATTN_IND_PF] = f->n_chunks;
    vk_attn_prefill_grid(g, c->n_q, &params[VKP_ATTN_IND_PF + 1], &params[VKP_ATTN_IND_PF + 2]);
    memcpy(f->bp_q.map, params, sizeof params);
    f->ind = f->bp_q;
    f->ind.off += (AC_SPLIT ? VKP_ATTN_IND_PF : VKP_ATTN_IND) * 4;
    f->ind.size = 12;

    f->kq = 1.0f / sqrtf((float)(c->nope + c->rope));
    f->ka = (vk_kv_store_args){.g = g, .kv = {f->bkv, 0}, .kv_z = D, .norm = {bnw, 0}, .eps = 1e-6f,
                               .cache = {f->bcache, 0}, .rope_cs = bcs, .q = {f->bq, 0}, .q_z = c->n_head * QW,
                               .q_abs = {f->bqa, 0}, .q_abs_z = c->n_head * RS, .params = bp_fill, .nz = n};
    f->q0 = n - c->n_q;
    f->aa = (vk_attn_args){.g = g, .q_abs = {f->bqa, f->q0 * c->n_head * RS}, .q_abs_z = c->n_head * RS,
                           .cache = {f->bcache, 0}, .part = {bpart, 0}, .chunk_cap = f->cap, .kq_scale = f->kq,
                           .params = f->bp_q, .indirect = c->indirect ? &f->ind : NULL, .n_chunks = f->n_chunks,
                           .nz = c->n_q, .prefill = AC_SPLIT};
    f->va = (vk_attn_vb_args){.g = g, .v_b = &f->vb, .part = {bpart, 0}, .chunk_cap = f->cap, .params = f->bp_q,
                              .o = {f->bout, 0}, .o_z = c->n_head * c->v_head, .nz = c->n_q};
    /* latents at an offset, rows of RS: the row tails must stay untouched */
    f->blat = tu_host((uint64_t)c->n_q * c->n_head * RS + 8);
    for (uint64_t i = 0; i < (uint64_t)c->n_q * c->n_head * RS + 8; i++)
        ((float *)f->blat.map)[i] = -7.0f;
    f->ca = (vk_attn_combine_args){.g = g, .part = {bpart, 0}, .chunk_cap = f->cap, .params = f->bp_q,
                                   .o = {f->blat, 8}, .o_z = c->n_head * RS, .o_h = RS, .nz = c->n_q};
    f->vm = (vk_mm_args){.name = "attn_vb", .w = &f->vb, .x = {f->blat, 8}, .x_stride = c->n_head * RS, .x_z = RS,
                         .y = {f->bout, 0}, .y_stride = c->n_head * c->v_head, .y_z = c->v_head, .nz = c->n_head,
                         .max_tokens = c->n_q, .x_split = true, .params = f->bp_q};
    /* the attention writing the latents (no partials, no combine): into
     * blat as the combine would, or over its own query rows */
    f->direct = AC_SPLIT && vk_attn_writes_latents(g, f->cap);
    CHECK(!AC_INPLACE || f->direct, "the latents over the queries need vk_attn_writes_latents");
    f->lat_out = (const float *)f->blat.map + 8;
    if (f->direct) {
        f->aa.o = f->ca.o;
        f->aa.o_z = f->ca.o_z;
        f->aa.o_h = f->ca.o_h;
        if (AC_INPLACE) {
            f->aa.o = f->aa.q_abs;
            f->vm.x = f->aa.q_abs;
            f->lat_out = (const float *)f->bqa.map + f->aa.q_abs.off;
        }
    }
}

/* As the decode graph: the rows of earlier tokens stored before (a
 * barrier), then the queries' kv_store, the attention and the combine +
 * v_b joined by counters -- the attention waiting on kv_store's (the first
 * tile's loads issued before the wait), the combine on the attention's
 * running total.  Counters start where the waits' targets wrap past 2^32. */
static void attn_run_counters(attn_fx *f)
{
    const attn_case *c = f->c;
    vk_buf bdep = tu_host(8), bp_last = tu_host(64);
    vk_vec w_store = {bdep, 4}, w_attn = {bdep, 3};
    uint32_t pl[64];
    memcpy(pl, f->bp_q.map, sizeof pl);
    pl[VKP_POS0] = f->q0;
    pl[VKP_NTOK] = c->n_q;
    memcpy(bp_last.map, pl, sizeof pl);
    vk_kv_store_args ka = f->ka, kl = f->ka;
    ka.nz = f->q0;
    kl.params = bp_last;
    kl.nz = c->n_q;
    kl.kv.off = f->q0 * f->D;
    kl.q.off = f->q0 * c->n_head * f->QW;
    kl.q_abs.off = f->q0 * c->n_head * f->RS;
    vk_call dc[4];
    CHECK(vk_k_kv_store(&KB, &ka, &dc[0]) == 0, "build kv_store (earlier rows): %.200s", KERR.msg);
    kl.dep.signal = &w_store;
    CHECK(vk_k_kv_store(&KB, &kl, &dc[1]) == 0, "build kv_store (signal): %.200s", KERR.msg);
    uint32_t n_store = dc[1].groups[0] * dc[1].groups[1] * dc[1].groups[2];
    uint32_t epoch = 0xFFFFFFFFu / n_store + 1, groups = f->n_chunks * f->g.dec_groups_y * c->n_q;
    memset(bdep.map, 0, 32);
    ((uint32_t *)bdep.map)[4] = (epoch - 1) * n_store;
    ((uint32_t *)bdep.map)[3] = 0xFFFFFFFFu - groups / 2;
    ((uint32_t *)f->bp_q.map)[VKP_EPOCH] = epoch;
    ((uint32_t *)f->bp_q.map)[VKP_ATTN_TOTAL] = 0xFFFFFFFFu - groups / 2 + groups;
    vk_attn_args aa = f->aa;
    vk_attn_vb_args va = f->va;
    aa.dep = (vk_dep){.signal = &w_attn, .wait = &w_store, .wait_n = n_store, .params = f->bp_q};
    va.dep = (vk_dep){.wait = &w_attn, .wait_n = 0, .params = f->bp_q};
    CHECK(vk_k_attn(&KB, &aa, &dc[2]) == 0, "build attn (wait, signal): %.200s", KERR.msg);
    CHECK(vk_k_attn_vb(&KB, &va, &dc[3]) == 0, "build attn_vb (wait): %.200s", KERR.msg);
    bool bar[4] = {true, false, false, true};
    CHECK(tu_run(dc, 4, bar) == 0, "run");
    CHECK(((uint32_t *)bdep.map)[0] == 0, "%u waits gave up", ((uint32_t *)bdep.map)[0]);
}

/* kv_store, the attention and what follows it: attn_vb (decode), or the
 * combine (or attn_fd's own latents) and v_b as a mat-mat (prefill). */
static void attn_run(attn_fx *f)
{
    vk_call calls[4];
    CHECK(vk_k_kv_store(&KB, &f->ka, &calls[0]) == 0, "build kv_store: %.200s", KERR.msg);
    CHECK(vk_k_attn(&KB, &f->aa, &calls[1]) == 0, "build attn: %.200s", KERR.msg);
    if (f->direct) {
        CHECK(vk_k_mm(&KB, &f->vm, &calls[2]) == 0, "build v_b mat-mat: %.200s", KERR.msg);
    } else if (AC_SPLIT) {
        CHECK(vk_k_attn_combine(&KB, &f->ca, &calls[2]) == 0, "build attn_combine: %.200s", KERR.msg);
        CHECK(vk_k_mm(&KB, &f->vm, &calls[3]) == 0, "build v_b mat-mat: %.200s", KERR.msg);
    } else {
        CHECK(vk_k_attn_vb(&KB, &f->va, &calls[2]) == 0, "build attn_vb: %.200s", KERR.msg);
    }
    bool dep = AC_DEP && !AC_SPLIT && f->c->indirect && f->c->n_q < f->n && vk_attn_deps(&f->aa) &&
               vk_attn_vb_deps(&KB, &f->va);
    if (AC_DEP && !dep)
        printf("# this device runs other kernels for this case: no counter to wait on\n");
    if (dep)
        attn_run_counters(f);
    else
        CHECK(tu_run(calls, AC_SPLIT && !f->direct ? 4 : 3, NULL) == 0, "run");
}

/* The cache rows: the GPU's must match the reference row to one rounding
 * of the cache type (f16: 2^-11 relative; f32: a few ulps of the norm);
 * the attention is then judged on the GPU's own cache contents (into lat),
 * so a latent that rounded the other way in f16 does not count against it. */
static void check_cache(const attn_fx *f, float *lat)
{
    const attn_case *c = f->c;
    uint32_t D = f->D, RS = f->RS, pairs = f->pairs;
    float *want = malloc(D * sizeof *want), *row = malloc(c->kv_lora * sizeof *row);
    uint32_t cache_bad = 0;
    for (uint32_t p = 0; p < f->n; p++) {
        rmsnorm_ref(f->kv + (uint64_t)p * D, f->nw, c->kv_lora, 1e-6f, row);
        memcpy(want, row, c->kv_lora * sizeof *row);
        for (uint32_t i = 0; i < pairs; i++) {
            const float *x = f->kv + (uint64_t)p * D + c->kv_lora + 2 * i, *t = f->cs + (p * pairs + i) * 2;
            want[c->kv_lora + 2 * i] = x[0] * t[0] - x[1] * t[1];
            want[c->kv_lora + 2 * i + 1] = x[0] * t[1] + x[1] * t[0];
        }
        for (uint32_t d = 0; d < RS; d++) {
            float got = c->f16 ? tu_h2f(((const uint16_t *)f->bcache.map)[(uint64_t)p * RS + d])
                               : ((const float *)f->bcache.map)[(uint64_t)p * RS + d];
            float w = d < D ? want[d] : 0.0f;
            float tol = (c->f16 ? 4.9e-4f : 16 * (float)U24) * fabsf(w) + 1e-7f;
            if (!(fabsf(got - w) <= tol) && cache_bad++ < 3)
                printf("#   cache row %u elem %u: gpu %.9g ref %.9g\n", p, d, got, w);
            if (d < D)
                lat[(uint64_t)p * D + d] = got;
        }
    }
    CHECK(cache_bad == 0, "%u cache elements differ", cache_bad);
    free(want), free(row);
}

/* The reference attention of query z's head h over the cache contents lat:
 * the averaged latents (olf), the largest |latent| averaged per dimension
 * (amax), and the largest score magnitude (returned). */
static double ref_head(const attn_fx *f, const float *lat, uint32_t z, uint32_t h, float *olf, float *amax)
{
    const attn_case *c = f->c;
    uint32_t D = f->D, QW = f->QW, RS = f->RS, pairs = f->pairs, pos = f->q0 + z;
    const float *qa = f->qabs + ((uint64_t)(f->q0 + z) * c->n_head + h) * RS;
    const float *qr = f->q + ((uint64_t)(f->q0 + z) * c->n_head + h) * QW + c->nope;
    double *sc = malloc((pos + 1) * sizeof *sc), *olat = malloc(c->kv_lora * sizeof *olat);
    double qmag = 0, mx = -INFINITY, l = 0;
    for (uint32_t p = 0; p <= pos; p++) {
        double s = 0, sm = 0;
        const float *k = lat + (uint64_t)p * D;
        for (uint32_t d = 0; d < c->kv_lora; d++) {
            s += (double)qa[d] * k[d];
            sm += fabs((double)qa[d] * k[d]);
        }
        for (uint32_t i = 0; i < pairs; i++) {
            const float *t = f->cs + (pos * pairs + i) * 2;
            double r0 = (double)qr[2 * i] * t[0] - (double)qr[2 * i + 1] * t[1];
            double r1 = (double)qr[2 * i] * t[1] + (double)qr[2 * i + 1] * t[0];
            s += r0 * k[c->kv_lora + 2 * i] + r1 * k[c->kv_lora + 2 * i + 1];
            sm += fabs(r0 * k[c->kv_lora + 2 * i]) + fabs(r1 * k[c->kv_lora + 2 * i + 1]);
        }
        sc[p] = s * f->kq;
        qmag = fmax(qmag, sm * f->kq);
        mx = fmax(mx, sc[p]);
    }
    for (uint32_t d = 0; d < c->kv_lora; d++) {
        olat[d] = 0;
        amax[d] = 0;
    }
    for (uint32_t p = 0; p <= pos; p++) {
        double e = exp(sc[p] - mx);
        l += e;
        for (uint32_t d = 0; d < c->kv_lora; d++) {
            olat[d] += e * lat[(uint64_t)p * D + d];
            amax[d] = fmaxf(amax[d], fabsf(lat[(uint64_t)p * D + d]));
        }
    }
    for (uint32_t d = 0; d < c->kv_lora; d++)
        olf[d] = (float)(olat[d] / l);
    free(sc), free(olat);
    return qmag;
}

/* The outputs (and, on the prefill path, the latents) against the
 * reference attention over the GPU's cache rows. */
/* attn_vb on integer dot products (vk_k_idot: the x-stationary kernel's
 * -DIDOT build) quantizes the combined latents o per 32 (ref_q8_input).
 * The GPU's o is off by up to err[d] (the combine's error), which moves
 * o 127 / max|o| by up to that much over the block's max -- and the max
 * itself by its own error: within that of a rounding tie (plus
 * ref_q8_input's 1e-4) the GPU may round the other way, d |w| more for
 * the element (tie[d] = d there).  Elsewhere both sides hold the same
 * integers; the scale d = max / 127 is off by the max's error, at most
 * err_max / max of each product (the caller's block term). */
static void ref_q8_latents(const float *o, const float *err, uint32_t K, float *xq, float *tie, float *err_blk)
{
    ref_q8_input(o, K, xq, tie);
    for (uint32_t b = 0; b < K; b += 32) {
        uint32_t n = K - b < 32 ? K - b : 32;
        float m = 0, em = 0;
        for (uint32_t i = 0; i < n; i++)
            if (fabsf(o[b + i]) >= m)
                m = fabsf(o[b + i]), em = err[b + i];
        for (uint32_t i = 0; i < n; i++) {
            err_blk[b + i] = em;
            if (m == 0)
                continue;
            float v = o[b + i] * 127.0f / m, w = 127.0f / m * (err[b + i] + fabsf(o[b + i]) / m * em);
            if (fabsf(fabsf(v - floorf(v)) - 0.5f) < w + 1e-4f)
                tie[b + i] = m / 127.0f;
        }
    }
}

static bool vb_takes_idot(const attn_fx *f)
{
    return !AC_SPLIT && vk_attn_vb_deps(&KB, &f->va) && vk_k_idot(&KB, f->c->vtype);
}

/* The float64 reference of every query and head (AI's), on the cache
 * contents lat: kept from an earlier variant of the case where lat is the
 * same, bit for bit. */
static void reference(const attn_fx *f, const float *lat)
{
    const attn_case *c = f->c;
    uint64_t lat_bytes = (uint64_t)f->n * f->D * sizeof *lat, zh = (uint64_t)c->n_q * c->n_head;
    if (AI.have_ref && memcmp(AI.lat, lat, lat_bytes) == 0)
        return;
    free(AI.lat), free(AI.qmag), free(AI.olf), free(AI.amax), free(AI.ref), free(AI.mag), free(AI.spread);
    AI.lat = malloc(lat_bytes);
    memcpy(AI.lat, lat, lat_bytes);
    AI.qmag = malloc(zh * sizeof *AI.qmag);
    AI.olf = malloc(zh * c->kv_lora * sizeof *AI.olf), AI.amax = malloc(zh * c->kv_lora * sizeof *AI.amax);
    AI.ref = malloc(zh * c->v_head * sizeof *AI.ref), AI.mag = malloc(zh * c->v_head * sizeof *AI.mag);
    AI.spread = malloc(zh * c->v_head * sizeof *AI.spread);
    float *absrow = malloc(c->kv_lora * sizeof *absrow);
    for (uint32_t z = 0; z < c->n_q; z++)
        for (uint32_t h = 0; h < c->n_head; h++) {
            uint64_t i = (uint64_t)z * c->n_head + h;
            float *olf = AI.olf + i * c->kv_lora, *amax = AI.amax + i * c->kv_lora;
            AI.qmag[i] = ref_head(f, lat, z, h, olf, amax);
            const uint8_t *vbh = mat_of(c->vtype, f->wvb, c->kv_lora, c->v_head, h);
            ref_dot_rows(c->vtype, vbh, c->kv_lora, c->v_head, olf, AI.ref + i * c->v_head, AI.mag + i * c->v_head);
            for (uint32_t r = 0; r < c->v_head; r++) {
                tu_dequant(c->vtype, vbh + tu_row_bytes(c->vtype, c->kv_lora) * r, absrow, c->kv_lora);
                double spread = 0;
                for (uint32_t d = 0; d < c->kv_lora; d++)
                    spread += fabs(absrow[d]) * amax[d];
                AI.spread[i * c->v_head + r] = spread;
            }
        }
    AI.have_ref = true;
    free(absrow);
}

static void check_outputs(const attn_fx *f, const float *lat)
{
    const attn_case *c = f->c;
    uint32_t RS = f->RS;
    bool idot = vb_takes_idot(f);
    reference(f, lat);
    float *oq = malloc(c->kv_lora * sizeof *oq), *tie = malloc(c->kv_lora * sizeof *tie);
    float *oerr = malloc(c->kv_lora * sizeof *oerr), *eblk = malloc(c->kv_lora * sizeof *eblk);
    float *absrow = malloc(c->kv_lora * sizeof *absrow);
    double *ref_i = malloc(c->v_head * sizeof *ref_i), *mag_i = malloc(c->v_head * sizeof *mag_i);
    uint32_t bad = 0;
    double worst = 0;
    const float *go = (const float *)f->bout.map;
    for (uint32_t z = 0; z < c->n_q; z++)
        for (uint32_t h = 0; h < c->n_head; h++) {
            uint64_t zh = (uint64_t)z * c->n_head + h;
            double qmag = AI.qmag[zh];
            const float *olf = AI.olf + zh * c->kv_lora, *amax = AI.amax + zh * c->kv_lora;
            const double *ref = AI.ref + zh * c->v_head, *mag = AI.mag + zh * c->v_head;
            /* score error: float sums of RS products (a chain of RS/8 + 16
             * additions) and the rotated query's few ulps; the weights then
             * move by about twice the score error, plus exp's and the
             * combine's roundings (64 ulps) */
            double ds = qmag * (RS / 8.0 + 16) * U24 * 2;
            double dl = 2 * ds + 64 * U24;
            if (f->g.fd) {
                /* attn_fd rounds the query to fp16 (each product off by
                 * <= 2^-11 of itself: at most qmag * 2^-11 on a score) and
                 * the probabilities to fp16 (2^-11 each, in O and in l) */
                ds += qmag * 0x1p-11;
                dl = 2 * ds + 2 * 0x1p-11 + 64 * U24;
            }
            /* the first position alone: its weight is e^0 = 1 and l = 1
             * exactly, so o is the cache row itself (what makes the first
             * token's case a tight check of v_b, the integer path's too) */
            if (f->q0 + z == 0)
                dl = 0;
            if (AC_SPLIT) {
                /* the combined latents themselves (the combine's or
                 * attn_fd's own O / l, the same division): each within the
                 * weights' error of the largest value it averages; the row
                 * tail (RS - kv_lora) keeps what was there (over the
                 * queries: the rotated query kv_store wrote, not checked) */
                const float *gl = f->lat_out + ((uint64_t)z * c->n_head + h) * RS;
                for (uint32_t d = 0; d < (AC_INPLACE ? c->kv_lora : RS); d++) {
                    double wl = d < c->kv_lora ? olf[d] : -7.0, tol = d < c->kv_lora ? dl * amax[d] + 1e-30 : 0;
                    if (!(fabs(gl[d] - wl) <= tol) && bad++ < 3)
                        printf("#   token %u head %u latent %u: gpu %.9g ref %.9g tol %.3g\n", z, h, d, gl[d], wl,
                               tol);
                }
            }
            if (idot) {
                for (uint32_t d = 0; d < c->kv_lora; d++)
                    oerr[d] = dl * amax[d];
                ref_q8_latents(olf, oerr, c->kv_lora, oq, tie, eblk);
                ref_dot_rows(c->vtype, mat_of(c->vtype, f->wvb, c->kv_lora, c->v_head, h), c->kv_lora, c->v_head,
                             oq, ref_i, mag_i);
                ref = ref_i, mag = mag_i;
            }
            /* v_b: the matvec's fp32 chain, or the mat-mat's with split
             * activations as the prefill runs it (mm_bound_split) */
            double vbound = AC_SPLIT ? mm_bound_split(c->vtype, c->kv_lora) : chain_bound(c->vtype, c->kv_lora);
            const uint8_t *vbh = mat_of(c->vtype, f->wvb, c->kv_lora, c->v_head, h);
            for (uint32_t r = 0; r < c->v_head; r++) {
                double spread = AI.spread[zh * c->v_head + r], ties = 0;
                /* the integer path: a tie rounded the other way, and the
                 * block scale off by its max's error */
                if (idot) {
                    tu_dequant(c->vtype, vbh + tu_row_bytes(c->vtype, c->kv_lora) * r, absrow, c->kv_lora);
                    for (uint32_t d = 0; d < c->kv_lora; d++)
                        ties += fabs(absrow[d]) * (tie[d] + eblk[d]);
                }
                double tol = dl * spread + ties + vbound * mag[r] + 1e-30;
                double got = go[((uint64_t)z * c->n_head + h) * c->v_head + r];
                double e = fabs(got - ref[r]) / tol;
                if (!(e <= 1) && bad++ < 3)
                    printf("#   token %u head %u row %u: gpu %.9g ref %.9g tol %.3g\n", z, h, r, got, ref[r], tol);
                if (e > worst || isnan(e))
                    worst = e;
            }
        }
    CHECK(bad == 0, "%u outputs outside tolerance (worst %.3g x tol; %u chunks of %u)", bad, worst, f->n_chunks,
          f->clen);
    free(absrow), free(ref_i), free(mag_i), free(oq), free(tie), free(oerr), free(eblk);
}

static void test_attn(void)
{
    attn_fx f;
    attn_setup(&f, &AC);
    attn_run(&f);
    float *lat = malloc((uint64_t)f.n * f.D * sizeof *lat);
    check_cache(&f, lat);
    check_outputs(&f, lat);
    free(lat); /* (the inputs are AI's, for the case's next variant) */
    tu_reset_buffers();
}

/* Attention variants (the tuning fields they set, in the case names). */
static void av_subgroups(vk_tuning *t)
{
    t->attn_sg = 1000000;
    t->attn_pu = 3;
    t->attn_fd = 0;
}

static void av_threads(vk_tuning *t)
{
    t->attn_sg = 0;
    t->attn_fd = 0;
}

static void av_chunk1(vk_tuning *t)
{
    t->attn_minchunk = 1;
    t->attn_fd = 0;
}

static void av_chunk32(vk_tuning *t)
{
    t->attn_minchunk = 32;
    t->attn_fd = 0;
}

static void av_fd_tiles(vk_tuning *t)
{
    t->fd_minchunk = 16;
    t->fd_chunks = 3;
}

static void av_fd_one(vk_tuning *t)
{
    t->fd_chunks = 1;
}

static void av_fd_128(vk_tuning *t)
{
    t->fd_chunks = 128;
}

static void attn_cases(void)
{
    static const attn_case cases[] = {
        {20, 512, 64, 192, 256, QT_Q4_0, true, 1, 1, true, "GLM-4.7-Flash, first token", 0},
        {20, 512, 64, 192, 256, QT_Q4_0, true, 300, 1, true, "GLM-4.7-Flash, 300 positions", 0},
        {20, 512, 64, 192, 256, QT_Q4_0, false, 1000, 1, true, "GLM-4.7-Flash, f32 cache, 1000 positions", 0},
        {4, 512, 64, 192, 256, QT_Q4_0, true, 4100, 1, true, "GLM-4.7-Flash rows, 4 heads, 4100 positions", 0},
        {4, 64, 16, 32, 40, QT_F32, false, 25, 25, false, "tiny GLM prompt, causal, f32", 0},
        {4, 32, 16, 32, 24, QT_F32, true, 65, 9, false, "tiny Lite, 9 queries after 56, f16", 0},
        {3, 36, 10, 8, 12, QT_F16, false, 130, 3, true, "odd sizes: row padded to 48", 0},
        {20, 512, 64, 192, 256, QT_Q8_0, true, 200, 70, true, "GLM-4.7-Flash prompt batch, 70 queries after 130", 0},
        {20, 64, 16, 32, 40, QT_F16, true, 77, 1, true, "20 heads, short latent (tensor cores: idle subgroups)", 0},
        {17, 512, 64, 192, 128, QT_Q8_0, true, 150, 1, true, "17 heads (a head tile of one row)", 0},
        /* a running max that jumps by several units between tiles: O's rows
         * rescaled by very different factors (attn_fd's online softmax) */
        {20, 512, 64, 192, 256, QT_Q4_0, true, 700, 1, true, "GLM-4.7-Flash, 700 positions, wide scores", 8},
        {20, 512, 64, 192, 256, QT_Q4_K, true, 300, 1, true, "GLM-4.7-Flash, Q4_K v_b", 0},
        {20, 512, 64, 192, 256, QT_Q5_K, true, 90, 30, true, "GLM-4.7-Flash prompt batch, Q5_K v_b", 0},
        /* a prompt batch whose rows' running max jumps between tiles, the
         * last workgroup's 32 rows part past the batch (97 * 20 rows) */
        {20, 512, 64, 192, 256, QT_Q8_0, true, 400, 97, true, "GLM-4.7-Flash prompt batch, wide scores", 8},
        /* depth: 64 chunks of several tiles, 20 heads (two head groups),
         * scores spread wide (each chunk's running max far from the others') */
        {20, 512, 64, 192, 256, QT_Q4_0, true, 2100, 1, true, "GLM-4.7-Flash at depth, wide scores", 8},
    };
    const size_t depth_case = sizeof cases / sizeof cases[0] - 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AC = cases[i];
        AC_ID = i;
        char name[200];
        snprintf(name, sizeof name, "attention %s (%u heads, kv_lora %u, %s cache, %u queries over %u)", AC.what,
                 AC.n_head, AC.kv_lora, AC.f16 ? "f16" : "f32", AC.n_q, AC.n_kv);
        RUN_NAMED(test_attn, name);
        /* both ways of scoring on every chunk length (the default picks by
         * length), a position count per subgroup that does not divide the
         * chunk, the combine + v_b of the mv family (attn_vb), and the
         * shortest chunks at 1 and 32 positions; then (where the device has
         * cooperative matrices: elsewhere they would repeat the default)
         * attn_fd's chunks of several tiles and a single chunk */
        static const variant_fn av[] = {av_subgroups, av_threads, v_mv, av_chunk1, av_chunk32, av_fd_tiles,
                                        av_fd_one, av_fd_128};
        /* (the depth case runs only attn_fd's variants: 128 chunks is
         * attn_fd's decode at depth with twice the default's partials) */
        bool listed = i == 0 || i == 1 || i == 3 || i == 6 || i == 9 || i == 10 || i == depth_case;
        for (int v = 0; v < 8 && listed && (v < 5 || G.c.coopmat); v++)
            if ((v >= 5 || i != depth_case) && (v < 7 || i == depth_case))
                run_tuned(test_attn, name, av[v]);
        /* v_b on integer dot products where the device has them (the
         * default only where they are fast) */
        if ((i == 0 || i == 11) && vk_idot_type(AC.vtype))
            run_tuned(test_attn, name, v_idot);
        /* the combine + v_b waiting on the attention's counter */
        if (i == 1 || i == 3 || (i == depth_case && G.c.coopmat)) {
            char dn[260];
            snprintf(dn, sizeof dn, "%s [attention -> v_b by a counter]", name);
            AC_DEP = true;
            RUN_NAMED(test_attn, dn);
            AC_DEP = false;
        }
        /* the prefill path: prefill chunking, attn_combine, v_b per head
         * as a mat-mat (its kernel named) */
        vk_tensor vt = {.type = AC.vtype};
        char pn[300];
        vk_attn_geom pg;
        err_t gerr;
        bool direct = vk_attn_geom_init(&KB, &pg, AC.n_head, AC.kv_lora, AC.rope, AC.nope, AC.v_head, AC.f16,
                                        AC.n_kv, &gerr) == 0 &&
                      vk_attn_writes_latents(&pg, 1);
        snprintf(pn, sizeof pn, "%s [prefill: %s + v_b on %s]", name,
                 direct ? "attn_fd writes the latents" : "attn_combine", mm_path(&vt, NULL));
        AC_SPLIT = true;
        RUN_NAMED(test_attn, pn);
        /* the engine's way: the latents over the query rows the
         * attention's workgroups read (each row read and written by one) */
        if (direct && AC.n_q > 1) {
            char ipn[340];
            snprintf(ipn, sizeof ipn, "%s [latents over the queries]", pn);
            AC_INPLACE = true;
            RUN_NAMED(test_attn, ipn);
            AC_INPLACE = false;
        }
        /* several chunks a token (the kernels take any; the engine cuts
         * one): on attn_fd's flat rows, rows whose token ends before a
         * chunk's start leave an empty partial beside rows that do not */
        if (AC.n_q > 1)
            for (PF_CAP = 2; PF_CAP <= 8; PF_CAP *= 4) {
                char cn[340];
                snprintf(cn, sizeof cn, "%s [%u chunks a token]", pn, PF_CAP);
                RUN_NAMED(test_attn, cn);
            }
        PF_CAP = 1;
        AC_SPLIT = false;
    }
}

int main(void)
{
    if (tu_kernels_open())
        return 1;
    attn_cases();
    attn_inputs_free();
    tu_gpu_close();
    TESTS_DONE();
}
