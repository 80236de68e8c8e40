/* vk_testutil.h: helpers for the Vulkan kernel tests: a device context,
 * random GGML blocks, a scalar float64 oracle, uploads and one-off runs;
 * then what the kernel tests of every family share.  Header-only (static
 * functions) so it needs no build rule of its own. */
#ifndef GLM_VK_TESTUTIL_H
#define GLM_VK_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "testlib.h"
#include "vk_kernels.h"

/* A header of helpers: not every program uses all of them. */
#pragma GCC diagnostic ignored "-Wunused-function"

static const char *tu_type_name(uint32_t t)
{
    switch (t) {
    case QT_F32: return "F32";
    case QT_F16: return "F16";
    case QT_BF16: return "BF16";
    case QT_Q4_0: return "Q4_0";
    case QT_Q4_1: return "Q4_1";
    case QT_Q5_0: return "Q5_0";
    case QT_Q5_1: return "Q5_1";
    case QT_Q8_0: return "Q8_0";
    case QT_Q4_K: return "Q4_K";
    case QT_Q5_K: return "Q5_K";
    case QT_Q6_K: return "Q6_K";
    default: return quant_type_name(t); /* the low-bit types (test_vk_types.c) */
    }
}

/* ---- randomness ------------------------------------------------------------ */

static uint64_t tu_rng = 0x9E3779B97F4A7C15ull;

static uint64_t tu_next(void)
{
    tu_rng ^= tu_rng << 13;
    tu_rng ^= tu_rng >> 7;
    tu_rng ^= tu_rng << 17;
    return tu_rng;
}

static float tu_unif(void) /* (-1, 1) */
{
    return (float)((double)(tu_next() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float tu_gauss(void)
{
    double u1 = ((double)(tu_next() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(tu_next() >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* f32 -> f16 bits, round to nearest even, for normal-range values. */
static uint16_t tu_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t m = x & 0x7fffff;
    if (e <= 0)
        return (uint16_t)sign; /* tiny: flush (the generators avoid this) */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    uint32_t h = sign | ((uint32_t)e << 10) | (m >> 13);
    uint32_t rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)h;
}

static float tu_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 0x3ff, x;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31)
        x = sign | 0x7f800000 | (m << 13);
    else
        x = sign | ((e - 15 + 127) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float tu_bf2f(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* A random half in +-[lo, hi) with a random sign (zero-mean scales). */
static uint16_t tu_rand_half(float lo, float hi)
{
    float v = lo + (hi - lo) * (tu_unif() * 0.5f + 0.5f);
    return tu_f2h(tu_next() & 1 ? -v : v);
}

static void tu_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t tu_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* GGML block bytes and elements of a type (own table: independent of quant.c). */
static void tu_block(uint32_t t, uint32_t *elems, uint32_t *bytes)
{
    switch (t) {
    case QT_F32: *elems = 1, *bytes = 4; break;
    case QT_F16: case QT_BF16: *elems = 1, *bytes = 2; break;
    case QT_Q4_0: *elems = 32, *bytes = 18; break;
    case QT_Q4_1: *elems = 32, *bytes = 20; break;
    case QT_Q5_0: *elems = 32, *bytes = 22; break;
    case QT_Q5_1: *elems = 32, *bytes = 24; break;
    case QT_Q8_0: *elems = 32, *bytes = 34; break;
    case QT_Q4_K: *elems = 256, *bytes = 144; break;
    case QT_Q5_K: *elems = 256, *bytes = 176; break;
    case QT_Q6_K: *elems = 256, *bytes = 210; break;
    default: {
        /* the low-bit types (test_vk_types.c): the core's table */
        const quant_traits *q = quant_traits_of(t);
        *elems = q && q->can_dequant ? q->block_elems : 0, *bytes = q && q->can_dequant ? q->block_bytes : 0;
    }
    }
}

static uint64_t tu_row_bytes(uint32_t t, uint64_t k)
{
    uint32_t e, b;
    tu_block(t, &e, &b);
    return k / e * b;
}

/* Random stored data for `n` elements of type t: any bit pattern for the
 * quants, random-sign finite scales (so every code path sees non-zero data). */
static void tu_fill_random(uint32_t t, uint8_t *dst, uint64_t n)
{
    uint32_t e, b;
    tu_block(t, &e, &b);
    uint64_t nb = n / e;
    for (uint64_t i = 0; i < nb; i++) {
        uint8_t *p = dst + i * b;
        for (uint32_t k = 0; k < b; k++)
            p[k] = (uint8_t)tu_next();
        switch (t) {
        case QT_F32: {
            float f = tu_gauss();
            memcpy(p, &f, 4);
            break;
        }
        case QT_F16: tu_put16(p, tu_f2h(tu_gauss())); break;
        case QT_BF16: {
            float f = tu_gauss();
            uint32_t x;
            memcpy(&x, &f, 4);
            tu_put16(p, (uint16_t)(x >> 16));
            break;
        }
        case QT_Q4_0: case QT_Q5_0: case QT_Q8_0: tu_put16(p, tu_rand_half(0.01f, 0.1f)); break;
        case QT_Q4_1: case QT_Q5_1:
            tu_put16(p, tu_rand_half(0.01f, 0.1f));
            tu_put16(p + 2, tu_rand_half(0.1f, 1.0f));
            break;
        case QT_Q4_K: case QT_Q5_K:
            tu_put16(p, tu_rand_half(0.001f, 0.01f));
            tu_put16(p + 2, tu_rand_half(0.001f, 0.01f));
            break;
        case QT_Q6_K: tu_put16(p + 208, tu_rand_half(0.001f, 0.01f)); break;
        /* the low-bit types (test_vk_types.c): every byte random (every
         * code, grid index, sign and sub-scale pattern), the block scales
         * random finite values of either sign */
        case QT_Q2_K:
            tu_put16(p + 80, tu_rand_half(0.001f, 0.01f));
            tu_put16(p + 82, tu_rand_half(0.001f, 0.01f));
            break;
        case QT_Q3_K: tu_put16(p + 108, tu_rand_half(0.001f, 0.01f)); break;
        case QT_MXFP4: p[0] = (uint8_t)(118 + tu_next() % 8); break; /* E8M0, halved as ggml does: 2^-10 .. 2^-3 */
        case QT_IQ1_M: {
            /* the f16 d lives in the top nibbles of the four scale words */
            uint16_t d = tu_rand_half(0.001f, 0.01f);
            for (int j = 0; j < 4; j++) {
                uint16_t sc = tu_get16(p + 48 + 2 * j);
                tu_put16(p + 48 + 2 * j, (uint16_t)((sc & 0x0fff) | ((d >> (4 * j)) & 0xf) << 12));
            }
            break;
        }
        case QT_IQ4_XS:
            /* its 6-bit sub-scales (ls - 32, up to 32) multiply d: a d 32x
             * smaller keeps its weights the size of the other types' (a
             * prompt batch's gate * up then stays inside fp16, which the
             * tensor-core kernels convert it to; gpu/perf/runs/36-lowbit.md) */
            tu_put16(p, tu_rand_half(0.00003f, 0.0003f));
            break;
        case QT_IQ4_NL: case QT_IQ2_XXS: case QT_IQ2_XS: case QT_IQ2_S: case QT_IQ3_XXS:
        case QT_IQ3_S: case QT_IQ1_S:
            tu_put16(p, tu_rand_half(0.001f, 0.01f)); /* the f16 d comes first */
            break;
        }
    }
}

/* ---- scalar oracle: ggml's reference dequantization ------------------------- */

static void tu_k_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void tu_dequant(uint32_t t, const uint8_t *src, float *y, uint64_t n)
{
    uint32_t e, b;
    tu_block(t, &e, &b);
    for (uint64_t i = 0; i < n / e; i++, src += b, y += e) {
        switch (t) {
        case QT_F32: memcpy(y, src, 4); break;
        case QT_F16: y[0] = tu_h2f(tu_get16(src)); break;
        case QT_BF16: y[0] = tu_bf2f(tu_get16(src)); break;
        case QT_Q4_0: {
            float d = tu_h2f(tu_get16(src));
            for (int j = 0; j < 16; j++) {
                y[j] = d * ((src[2 + j] & 0xF) - 8);
                y[j + 16] = d * ((src[2 + j] >> 4) - 8);
            }
            break;
        }
        case QT_Q4_1: {
            float d = tu_h2f(tu_get16(src)), m = tu_h2f(tu_get16(src + 2));
            for (int j = 0; j < 16; j++) {
                y[j] = d * (src[4 + j] & 0xF) + m;
                y[j + 16] = d * (src[4 + j] >> 4) + m;
            }
            break;
        }
        case QT_Q5_0: case QT_Q5_1: {
            bool one = t == QT_Q5_1;
            float d = tu_h2f(tu_get16(src)), m = one ? tu_h2f(tu_get16(src + 2)) : 0;
            const uint8_t *qhp = src + (one ? 4 : 2), *qs = src + (one ? 8 : 6);
            uint32_t qh = (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 | (uint32_t)qhp[3] << 24;
            for (int j = 0; j < 16; j++) {
                int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
                int q0 = (qs[j] & 0xF) | h0 << 4, q1 = (qs[j] >> 4) | h1 << 4;
                y[j] = one ? d * q0 + m : d * (q0 - 16);
                y[j + 16] = one ? d * q1 + m : d * (q1 - 16);
            }
            break;
        }
        case QT_Q8_0: {
            float d = tu_h2f(tu_get16(src));
            for (int j = 0; j < 32; j++)
                y[j] = d * (int8_t)src[2 + j];
            break;
        }
        case QT_Q4_K: case QT_Q5_K: {
            bool five = t == QT_Q5_K;
            float d = tu_h2f(tu_get16(src)), dmin = tu_h2f(tu_get16(src + 2));
            const uint8_t *sc = src + 4, *qh = src + 16, *ql = src + (five ? 48 : 16);
            float *o = y;
            for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32) {
                int s1, m1, s2, m2;
                tu_k_scale_min(is, sc, &s1, &m1);
                tu_k_scale_min(is + 1, sc, &s2, &m2);
                float d1 = d * s1, mm1 = dmin * m1, d2 = d * s2, mm2 = dmin * m2;
                for (int l = 0; l < 32; l++)
                    *o++ = d1 * ((ql[l] & 0xF) + (five && (qh[l] >> is & 1) ? 16 : 0)) - mm1;
                for (int l = 0; l < 32; l++)
                    *o++ = d2 * ((ql[l] >> 4) + (five && (qh[l] >> (is + 1) & 1) ? 16 : 0)) - mm2;
            }
            break;
        }
        case QT_Q6_K: {
            float d = tu_h2f(tu_get16(src + 208));
            const uint8_t *ql = src, *qh = src + 128;
            const int8_t *sc = (const int8_t *)(src + 192);
            float *o = y;
            for (int n2 = 0; n2 < 256; n2 += 128, ql += 64, qh += 32, sc += 8, o += 128)
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                    int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                    int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                    int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                    o[l] = d * sc[is] * q1;
                    o[l + 32] = d * sc[is + 2] * q2;
                    o[l + 64] = d * sc[is + 4] * q3;
                    o[l + 96] = d * sc[is + 6] * q4;
                }
            break;
        }
        default: /* the low-bit types: the core's decoders (bit-exact with gguf-py, tests/test_quant_*.c) */
            quant_traits_of(t)->decode_block(src, y);
        }
    }
}

/* The magnitude of what a kernel sums for each element: |w| for most types;
 * for the types with a minimum (Q4_1, Q5_1: d*q + m; Q4_K, Q5_K: d*sc*q -
 * dmin*m) |d*q| + |m| (|d*sc*q| + |dmin*m|): the decode kernels sum the two
 * terms apart (sum w*x = d*sc * sum q*x - dmin*m * sum x), so their rounding
 * is bounded by the terms' sizes, which can exceed |w| where they cancel. */
static void tu_dequant_terms(uint32_t t, const uint8_t *src, float *y, uint64_t n)
{
    uint32_t e, b;
    tu_block(t, &e, &b);
    tu_dequant(t, src, y, n);
    /* IQ1_S / IQ1_M: the kernels sum dl * g and dl * delta apart (g in
     * {-1, 0, 1}, delta +-1/8): where they differ in sign |w| = 7/8 dl
     * against terms of 9/8 dl, so 9/7 |w| bounds them */
    float f = t == QT_IQ1_S || t == QT_IQ1_M ? 9.0f / 7.0f : 1.0f;
    for (uint64_t i = 0; i < n; i++)
        y[i] = fabsf(y[i]) * f;
    if (t == QT_Q2_K) {
        /* d sc q and dmin m summed apart: |w| + 2 dmin m bounds their sizes */
        for (uint64_t i = 0; i < n / 256; i++, src += 84, y += 256) {
            float dmin = fabsf(tu_h2f(tu_get16(src + 82)));
            for (uint32_t j = 0; j < 256; j++)
                y[j] += 2 * dmin * (float)(src[j / 16] >> 4);
        }
        return;
    }
    if (t != QT_Q4_1 && t != QT_Q5_1 && t != QT_Q4_K && t != QT_Q5_K)
        return;
    for (uint64_t i = 0; i < n / e; i++, src += b, y += e) {
        if (t == QT_Q4_1 || t == QT_Q5_1) {
            float m = fabsf(tu_h2f(tu_get16(src + 2)));
            for (uint32_t j = 0; j < e; j++)
                y[j] += 2 * m; /* |d q + m| <= |d q| + |m|: |w| + 2|m| bounds |d q| + |m| */
            continue;
        }
        float dmin = fabsf(tu_h2f(tu_get16(src + 2)));
        for (int sb = 0; sb < 8; sb++) {
            int sc, m;
            tu_k_scale_min(sb, src + 4, &sc, &m);
            for (int j = 0; j < 32; j++)
                y[sb * 32 + j] += 2 * dmin * (float)m;
        }
    }
}

/* ---- device --------------------------------------------------------------------- */

typedef struct {
    vk_ctx c;
    vk_pipes pipes;
    vk_arena dev, host;
    vk_uploader *up;
    VkCommandBuffer cb;
    bool ok;
} tu_gpu;

static tu_gpu G;

/* pipe_stats: pipelines keep the compiler's statistics (vk_pipe_stats). */
static int tu_gpu_open(bool pipe_stats)
{
    err_t err;
    if (vk_ctx_create(&G.c, -1, pipe_stats, &err)) {
        printf("# no usable Vulkan device: %s\n", err.msg);
        return -1;
    }
    vk_arena_init(&G.c, &G.dev, VK_MEM_DEVICE, 256ull << 20, "test tensors");
    vk_arena_init(&G.c, &G.host, VK_MEM_HOST, 64ull << 20, "test io");
    if (vk_uploader_new(&G.c, 32ull << 20, &G.up, &err)) {
        printf("# %s\n", err.msg);
        return -1;
    }
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = G.c.cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    if (vkAllocateCommandBuffers(G.c.dev, &ai, &G.cb) != VK_SUCCESS)
        return -1;
    printf("# device: %s (subgroup %u)\n", G.c.info.name, G.c.subgroup);
    G.ok = true;
    return 0;
}

/* Whether the device is a CPU (lavapipe in CI), where llvmpipe compiles
 * every specialization on its first dispatch: the kernel programs leave out
 * there the variants that compile nothing of their own (lvp_vars). */
static bool tu_cpu_device(void)
{
    return G.c.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

/* Releases the per-case buffers (arenas are reset between cases). */
static void tu_reset_buffers(void)
{
    vk_arena_release(&G.c, &G.dev);
    vk_arena_release(&G.c, &G.host);
}

static void tu_gpu_close(void)
{
    if (!G.c.dev)
        return;
    vk_uploader_free(G.up);
    tu_reset_buffers();
    vk_pipes_free(&G.c, &G.pipes);
    vk_ctx_destroy(&G.c);
}

/* A host-visible buffer of n floats (or words), filled with NaN so that
 * unwritten outputs show. */
static vk_buf tu_host(uint64_t n_words)
{
    vk_buf b = {0};
    err_t err;
    if (vk_arena_alloc(&G.c, &G.host, n_words * 4, "test io", &b, &err))
        printf("# %s\n", err.msg);
    else
        for (uint64_t i = 0; i < n_words; i++)
            ((uint32_t *)b.map)[i] = 0x7fc00000u;
    return b;
}

/* Uploads n_mat matrices of N rows of K elements (GGML bytes) as a GPU tensor. */
static int tu_tensor(uint32_t type, uint32_t K, uint32_t N, uint32_t n_mat, const uint8_t *src, vk_tensor *t)
{
    err_t err;
    vk_qlayout l;
    memset(t, 0, sizeof *t);
    if (!vk_qlayout_of(type, &l))
        return -1;
    t->type = type;
    t->K = K;
    t->N = N;
    t->n_mat = n_mat;
    t->bpr = (K + l.blk - 1) / l.blk;
    t->Kp = t->bpr * l.blk;
    uint64_t blocks = (uint64_t)t->bpr * N * n_mat;
    t->head_off = (blocks * l.body + 255) / 256 * 256;
    t->bytes = vk_tensor_bytes(type, K, N, n_mat, 256);
    t->src_bytes = tu_row_bytes(type, K) * N * n_mat;
    if (vk_arena_alloc(&G.c, &G.dev, t->bytes, "test tensor", &t->buf, &err)) {
        printf("# %s\n", err.msg);
        return -1;
    }
    uint64_t rows = (uint64_t)N * n_mat, rb = tu_row_bytes(type, K);
    uint8_t *body = malloc(blocks * l.body + 1), *head = malloc(blocks * l.head + 1);
    vk_repack_rows(type, K, src, rb, rows, body, head);
    int rc = vk_upload_bytes(G.up, &t->buf, 0, body, blocks * l.body, &err);
    if (!rc && l.head)
        rc = vk_upload_bytes(G.up, &t->buf, t->head_off, head, blocks * l.head, &err);
    if (!rc)
        rc = vk_uploader_finish(G.up, &err);
    free(body);
    free(head);
    if (rc)
        printf("# %s\n", err.msg);
    return rc;
}

/* Records the calls into a fresh program, submits, waits. */
static int tu_run(const vk_call *calls, int n, const bool *barrier_after)
{
    err_t err;
    vk_prog prog = {0};
    vk_rec r;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (vkBeginCommandBuffer(G.cb, &bi) != VK_SUCCESS)
        return -1;
    vk_rec_begin(&r, &G.c, &prog, G.cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
    for (int i = 0; i < n; i++) {
        vk_rec_call(&r, &calls[i]);
        if (barrier_after == NULL || barrier_after[i])
            vk_rec_barrier(&r);
    }
    int rc = vk_rec_end(&r);
    if (vkEndCommandBuffer(G.cb) != VK_SUCCESS && !rc)
        rc = err_set(&err, "vkEndCommandBuffer failed");
    if (!rc)
        rc = vk_submit_wait(&G.c, G.cb, &err);
    vk_prog_free(&G.c, &prog);
    if (rc)
        printf("# %s\n", err.msg);
    return rc;
}

/* ---- the kernel tests' shared part -------------------------------------------------------
 * test_vk_matvec.c, test_vk_attn.c, test_vk_deps.c, test_vk_prefill.c and
 * test_vk_sampler.c: the builders (KB, with the tuning table TUNE and their
 * errors in KERR), random operands, the float64 references of a row and a
 * norm, the tolerances, and the geometry variants a case runs under. */

/* 2^-24: float32's unit roundoff. */
#define U24 5.9604644775390625e-08

/* The builders' tuning table: the defaults, or a variant's fields. */
static vk_tuning TUNE;
static err_t KERR;
static vk_kb KB;

/* The device (lavapipe in CI: no device is a failure, not a skip) and the
 * builders on it with the default tuning. */
/* A program whose references take the input in float (test_vk_types: the
 * low-bit types' float units) sets this before tu_kernels_open: every case's
 * knobs then start from idot=0, so a GPU with fast integer dot products runs
 * those units too (test_vk_matvec checks the integer ones). */
static bool TU_FLOAT_UNITS;

static void tu_tuning_default(vk_tuning *t)
{
    vk_tuning_default(t);
    if (TU_FLOAT_UNITS)
        t->idot = 0;
}

static int tu_kernels_open(void)
{
    if (tu_gpu_open(false)) {
        printf("FAIL - vulkan device: none usable\n");
        return -1;
    }
    tu_tuning_default(&TUNE);
    KB = (vk_kb){&G.c, &G.pipes, &TUNE, &KERR};
    return 0;
}

static float *random_vec(uint64_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    for (uint64_t i = 0; i < n; i++)
        v[i] = tu_gauss() * scale;
    return v;
}

/* Reference y = W[m] . x (double), plus the bound sum|w x| (for the types
 * with a minimum, the sum of its terms' sizes: tu_dequant_terms). */
static void ref_dot_rows(uint32_t type, const uint8_t *w, uint32_t K, uint32_t rows, const float *x, double *y,
                         double *mag)
{
    float *row = malloc(K * sizeof *row), *terms = malloc(K * sizeof *terms);
    uint64_t rb = tu_row_bytes(type, K);
    for (uint32_t r = 0; r < rows; r++) {
        tu_dequant(type, w + r * rb, row, K);
        tu_dequant_terms(type, w + r * rb, terms, K);
        double s = 0, m = 0;
        for (uint32_t k = 0; k < K; k++) {
            s += (double)row[k] * x[k];
            m += fabs((double)terms[k] * x[k]);
        }
        y[r] = s;
        mag[r] = m;
    }
    free(row), free(terms);
}

/* The input as the integer-dot kernels see it (vk_k_idot): quantized over
 * blocks of 32 elements (as llama.cpp's CUDA decode, q8_1), d = max|x| /
 * 127, q = roundEven(x * 127 / max|x|); xq[k] gets d q.  tie[k] gets d where x * 127 / max|x| lies within
 * 1e-4 of a rounding tie, else 0: there the GPU may round the other way
 * (Vulkan allows its division 2.5 ulp and x reaches it through other float
 * roundings -- the norm's scale applied before or after -- a few ulps of
 * values below 127, ~5e-5 at most), so a case allows such elements d |w|
 * more (ref_dot_rows' magnitude of tie).  Elsewhere both sides hold the same
 * integers, and the chain bound covers the float products and sums around
 * them. */
static void ref_q8_input(const float *x, uint32_t K, float *xq, float *tie)
{
    const uint32_t qb = 32;
    for (uint32_t b = 0; b < K; b += qb) {
        uint32_t n = K - b < qb ? K - b : qb;
        float amax = 0;
        for (uint32_t i = 0; i < n; i++)
            amax = fmaxf(amax, fabsf(x[b + i]));
        float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        for (uint32_t i = 0; i < n; i++) {
            float v = x[b + i] * id, q = nearbyintf(v); /* the default rounding: to nearest, ties to even */
            xq[b + i] = d * q;
            tie[b + i] = fabsf(fabsf(v - floorf(v)) - 0.5f) < 1e-4f ? d : 0.0f;
        }
    }
}

static double chain_bound(uint32_t type, uint32_t K)
{
    vk_qlayout l;
    vk_qlayout_of(type, &l);
    return 2.0 * (K / 4.0 + l.unit + 16) * U24;
}

static float W_SCALE = 1.0f; /* scales the random values of float tensors */

static uint8_t *rand_tensor(uint32_t type, uint32_t K, uint32_t N, uint32_t nmat, vk_tensor *t)
{
    uint64_t bytes = tu_row_bytes(type, K) * N * nmat, n = (uint64_t)K * N * nmat;
    uint8_t *w = malloc(bytes);
    tu_fill_random(type, w, n);
    for (uint64_t i = 0; W_SCALE != 1.0f && type == QT_F16 && i < n; i++)
        tu_put16(w + 2 * i, tu_f2h(tu_h2f(tu_get16(w + 2 * i)) * W_SCALE));
    for (uint64_t i = 0; W_SCALE != 1.0f && type == QT_F32 && i < n; i++)
        ((float *)w)[i] *= W_SCALE;
    for (uint64_t i = 0; W_SCALE != 1.0f && type == QT_BF16 && i < n; i++) {
        float f = tu_bf2f(tu_get16(w + 2 * i)) * W_SCALE; /* truncated back: any bf16 is valid data */
        uint32_t u;
        memcpy(&u, &f, 4);
        tu_put16(w + 2 * i, (uint16_t)(u >> 16));
    }
    /* Q8_0 / Q4_0: the block scale (first half of each 34 / 18-byte block) */
    for (uint64_t b = 0, bb = type == QT_Q8_0 ? 34 : 18;
         W_SCALE != 1.0f && (type == QT_Q8_0 || type == QT_Q4_0) && b < n / 32; b++)
        tu_put16(w + b * bb, tu_f2h(tu_h2f(tu_get16(w + b * bb)) * W_SCALE));
    if (tu_tensor(type, K, N, nmat, w, t))
        memset(t, 0, sizeof *t);
    return w;
}

static const uint8_t *mat_of(uint32_t type, const uint8_t *w, uint32_t K, uint32_t N, uint32_t m)
{
    return w + tu_row_bytes(type, K) * N * m;
}

static void rmsnorm_ref(const float *x, const float *nw, uint32_t n, float eps, float *out)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = (float)(x[i] * sc * nw[i]);
}

static float *norm_weights(uint32_t n)
{
    float *w = random_vec(n, 0.1f);
    for (uint32_t i = 0; i < n; i++)
        w[i] += 1.0f;
    return w;
}

static vk_buf host_copy(const void *src, uint64_t words)
{
    vk_buf b = tu_host(words + 4);
    memcpy(b.map, src, words * 4);
    return b;
}

static double silu_d(double g)
{
    return g / (1.0 + exp(-g));
}

/* ---- geometry variants ---------------------------------------------------------------------- */

/* Geometry variants of the decode matvecs, set in the tuning table: the
 * defaults; long rows on the x-stationary kernels too (lavapipe's 8-wide
 * subgroups need more units per lane than the default allows -- the paths
 * a 32-wide GPU takes); 8 rows per pass, 3 passes, 64-thread workgroups,
 * teams up to half padding (short rows only: fully unrolled long ones take
 * lavapipe minutes to compile); inputs read from shared memory instead of
 * registers, 2 rows per pass; the mv kernels. */
static void v_default(vk_tuning *t)
{
    (void)t;
}

static void v_long_rows(vk_tuning *t)
{
    t->xs_j = 32;
}

static void v_rows8(vk_tuning *t)
{
    t->xs_r = 8;
    t->xs_p = 3;
    t->xs_wgs = 64;
    t->xs_pad = 50;
}

static void v_shared_input(vk_tuning *t)
{
    t->xs_j = 32;
    t->xs_xreg = 0;
    t->xs_r = 2;
}

static void v_mv(vk_tuning *t)
{
    t->xs = 0;
}

/* The matvecs on 8-bit integer dot products wherever the device has them
 * (lavapipe too), not only where they are fast; run by the cases of the
 * types that have them (vk_idot_type). */
static void v_idot(vk_tuning *t)
{
    t->idot = 2;
}

typedef void (*variant_fn)(vk_tuning *t);
static const variant_fn VARIANTS[] = {v_default, v_long_rows, v_rows8, v_shared_input, v_mv};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

/* Runs `fn` as case `name` with the table set by `v`, the fields it
 * changed in the name; the defaults again afterwards. */
static void run_tuned(void (*fn)(void), const char *name, variant_fn v)
{
    char set[256], full[512];
    tu_tuning_default(&TUNE);
    v(&TUNE);
    vk_tuning_describe(&TUNE, set, sizeof set);
    snprintf(full, sizeof full, "%s%s%s%s", name, *set ? " [" : "", set, *set ? "]" : "");
    RUN_NAMED(fn, full);
    tu_tuning_default(&TUNE);
}

/* Variant sets: lavapipe compiles every specialization from scratch in CI,
 * and fully unrolled long rows with many rows per pass take it tens of
 * seconds each, so the large shapes skip the 8-rows variant. */
enum { V_ALL = 0x1f, V_LONG = 0x1b, V_GPU = 0x03 };

/* Runs `fn` as case `name` under the variants in mask `vars`. */
static void run_variants(void (*fn)(void), const char *name, int vars)
{
    for (int i = 0; i < N_VARIANTS; i++)
        if (vars >> i & 1)
            run_tuned(fn, name, VARIANTS[i]);
}

/* ---- the mat-mat kernels' tolerances ------------------------------------------------------- */

/* The mat-mat kernels: fp32 SIMT (chain bound as the matvec), or on devices
 * with cooperative matrices, fp16 operands for quantized weights (mm_coop):
 * each operand is rounded to fp16, 11 significant bits (unit roundoff
 * 2^-11), so each product w x is within (1 + 2^-11)^2 - 1 = 2^-10 + 2^-22 of
 * itself and the fp32-accumulated sum within (2^-10 + 2^-22) sum|w x| plus the
 * fp32 chain bound: 9.8e-4 covers 2^-10 + 2^-22 = 9.768e-4.  (Activations
 * below 2^-14 are fp16 subnormals with an absolute error of at most 2^-25 |w|
 * each: on data of unit size that is far inside the budget; values beyond
 * 65504 would overflow -- prefill activations are normalized or products of
 * normalized values.) */
static double mm_bound(uint32_t type, uint32_t K)
{
    bool coop = G.c.coopmat && type != QT_F32;
    return chain_bound(type, K) + (coop ? 9.8e-4 : 0);
}

/* The same with split activations (vk_mm_args.x_split, the prefill's k_b /
 * v_b): each activation goes in as hi (x to 11 significant bits, exact in
 * fp16) plus lo = fp16(2^11 (x - hi)) / 2^11, within 2^-11 * 2^-11 = 2^-22 of
 * x (we allow 2^-20 for a device whose fp16 conversion truncates), against
 * 2^-11 for one fp16.  The weights are still rounded to fp16 (2^-11), except
 * F16 weights, which fp16 holds exactly: there the whole budget is 2^-20 +
 * the fp32 chain (~1e-6 of sum|w x|), which a single fp16 rounding of the
 * activations (~2^-12 per product) would exceed many times over.  The lo
 * products' own accumulator, added in the epilogue, costs one more fp32
 * rounding (inside the chain bound's slack). */
static double mm_bound_split(uint32_t type, uint32_t K)
{
    bool coop = G.c.coopmat && type != QT_F32;
    double ew = type == QT_F16 ? 0 : 0x1p-11, ex = 0x1p-20;
    return chain_bound(type, K) + (coop ? ew + ex + ew * ex : 0);
}

/* Which kernel a case runs on, in its name: a device without cooperative
 * matrices says so and tests the fp32 kernel (never a silent pass). */
static const char *mm_path(const vk_tensor *w, const vk_tensor *up)
{
    const char *k = vk_mm_kernel(&KB, w, up);
    if (strcmp(k, "mm") != 0)
        return k;
    if (!G.c.coopmat)
        return "mm: device has no cooperative matrices";
    return w->type == QT_F32 ? "mm: F32 weights" : "mm: coopmat=0";
}

#endif
