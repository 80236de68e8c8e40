/* vk_layout.c: how weights are laid out on the GPU (shaders/quant.glsl reads
 * this layout; the two must agree).
 *
 * A GGML block interleaves scales with quants at odd sizes (Q4_0: 18 bytes),
 * so a thread cannot issue aligned 16-byte loads over it.  At upload each
 * block is split once: its quant bytes ("body", a multiple of 16 bytes) go to
 * one dense array, its scales ("head") to a second array after all bodies:
 *
 *   type   block  body                      head
 *   Q4_0    32    qs[16]                    d
 *   Q4_1    32    qs[16]                    d m
 *   Q5_0    32    qs[16]                    d pad qh'
 *   Q5_1    32    qs[16]                    d m qh'
 *   Q8_0    32    qs[32]                    d
 *   Q4_K   256    qs[128]                   d dmin scales[12]
 *   Q5_K   256    qs[128] qh'[8 words]      d dmin scales[12]
 *   Q6_K   256    ql[128] qh[64] sc[16]     d
 *   F32      8    8 floats                  -
 *   F16/BF16 8    8 halves                  -
 *
 * Byte order inside each piece is GGML's, so the decoders follow ggml's
 * reference dequantization exactly -- except the 5-bit types' fifth bits
 * (qh'), which are reordered for the decode kernels: a 16-byte load of
 * nibbles holds in word k the low nibbles of elements 4k+i (i = 0..3, byte
 * i) and the high nibbles of a second run; the fifth bits of such a run of
 * four ("slot" s) sit at bits 8i + (s+4)%8 of a qh' word, so one shift and
 * one mask put all four at bit 4 of their bytes (shaders/mv_xs_common.glsl).
 * Q5_0/Q5_1: one word per block, slot s = element/4 (elements 0..15 are the
 * low nibbles of qs, slots 0..3; 16..31 the high nibbles, slots 4..7).
 * Q5_K: two words per 64-element chunk c (words 2c and 2c+1 after qs): those
 * of sub-blocks 2c (low nibbles of qs[32c..]) and 2c+1 (high nibbles), slot
 * = element of the sub-block / 4.  Same bits, same bytes per block.  Rows of
 * float types are padded to a multiple of 8 elements with zeros.  The layout
 * is a one-time change; the bytes read per token stay those of the file.
 *
 * The low-bit types (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4 and the grid types)
 * are read by 64-element units (32 for IQ4_NL / MXFP4, as Q4_0), so their
 * blocks are arranged for one 16-byte load of codes per unit plus one or two
 * words of a unit's own scales (see each repack function below):
 *
 *   type     block  body                                        head
 *   Q2_K      256   qs[64] sc'[16]                              d dmin
 *   Q3_K      256   qs[64] hm'[32] sc'[16]                      d
 *   IQ4_NL     32   qs[16]                                      d
 *   MXFP4      32   qs[16]                                      e (1 byte)
 *   IQ4_XS    256   qs[128]                                     d scales_h scales_l[4]
 *   IQ2_XXS   256   qs[64]                                      d
 *   IQ2_XS    256   qs[64]                                      d pad scales[8]
 *   IQ2_S     256   (idx[8] signs[8]) x 4, meta[16]             d
 *   IQ3_XXS   256   qs[96]                                      d
 *   IQ3_S     256   idx[64] signs[32] meta[16]                  d
 *   IQ1_S     256   qs[32] qh[16]                               d
 *   IQ1_M     256   qs[32] qh[16]                               scales[8] (d inside)
 *
 * "Unit u" of a 256-element block is elements 64u..64u+63 except for Q2_K
 * and Q3_K, whose 2-bit codes of four 32-element rows share a byte: their
 * unit u = (n, h) = (u/2, u%2) is the 64 elements 128n + 32j + 16h + l (j,
 * l < 4, 16) whose codes are the 16 bytes qs[32n + 16h ..], all four of
 * their 16-element sub-blocks' scales in sc' word u (byte j).  Q3_K's third
 * bits (hm') and scales (sc', decoded to signed bytes) are rearranged the
 * same way, so Q3_K's blocks grow by 4 bytes (114) and IQ2_XS's and IQ3_S's
 * by 2 and 4 (76, 114: their heads and sub-block data rounded to words);
 * the others keep their size. */
#include <string.h>

#include "format/quant.h"
#include "vk_core.h"

typedef struct {
    uint16_t src, len;   /* bytes of the GGML block */
    uint8_t to_head;     /* 0: body, 1: head */
    uint8_t dst;         /* offset in body/head */
} piece;

typedef struct {
    uint32_t type;
    vk_qlayout l;
    uint32_t src_bytes;  /* GGML block bytes */
    piece p[3];
    uint32_t np;
    /* the low-bit types: one GGML block -> its body and head (either may
     * be NULL: that part is skipped) */
    void (*repack)(const uint8_t *src, uint8_t *body, uint8_t *head);
} layout_row;

static void repack_q2_k(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_q3_k(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq4_xs(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq2_xs(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq2_s(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq3_s(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq1_m(const uint8_t *src, uint8_t *body, uint8_t *head);

static const layout_row table[] = {
    {QT_Q4_0, {32, 16, 2, 32}, 18, {{2, 16, 0, 0}, {0, 2, 1, 0}}, 2, NULL},
    {QT_Q4_1, {32, 16, 4, 32}, 20, {{4, 16, 0, 0}, {0, 4, 1, 0}}, 2, NULL},
    {QT_Q5_0, {32, 16, 8, 32}, 22, {{6, 16, 0, 0}, {0, 2, 1, 0}}, 2, NULL},
    {QT_Q5_1, {32, 16, 8, 32}, 24, {{8, 16, 0, 0}, {0, 4, 1, 0}}, 2, NULL},
    {QT_Q8_0, {32, 32, 2, 32}, 34, {{2, 32, 0, 0}, {0, 2, 1, 0}}, 2, NULL},
    {QT_Q4_K, {256, 128, 16, 64}, 144, {{16, 128, 0, 0}, {0, 16, 1, 0}}, 2, NULL},
    {QT_Q5_K, {256, 160, 16, 64}, 176, {{48, 128, 0, 0}, {0, 16, 1, 0}}, 2, NULL},
    {QT_Q6_K, {256, 208, 2, 32}, 210, {{0, 208, 0, 0}, {208, 2, 1, 0}}, 2, NULL},
    {QT_IQ4_NL, {32, 16, 2, 32}, 18, {{2, 16, 0, 0}, {0, 2, 1, 0}}, 2, NULL},
    {QT_MXFP4, {32, 16, 1, 32}, 17, {{1, 16, 0, 0}, {0, 1, 1, 0}}, 2, NULL},
    {QT_IQ2_XXS, {256, 64, 2, 64}, 66, {{2, 64, 0, 0}, {0, 2, 1, 0}}, 2, NULL},
    {QT_IQ3_XXS, {256, 96, 2, 64}, 98, {{2, 96, 0, 0}, {0, 2, 1, 0}}, 2, NULL},
    {QT_IQ1_S, {256, 48, 2, 64}, 50, {{2, 48, 0, 0}, {0, 2, 1, 0}}, 2, NULL},
    {QT_Q2_K, {256, 80, 4, 64}, 84, {{0}}, 0, repack_q2_k},
    {QT_Q3_K, {256, 112, 2, 64}, 110, {{0}}, 0, repack_q3_k},
    {QT_IQ4_XS, {256, 128, 8, 64}, 136, {{0}}, 0, repack_iq4_xs},
    {QT_IQ2_XS, {256, 64, 12, 64}, 74, {{0}}, 0, repack_iq2_xs},
    {QT_IQ2_S, {256, 80, 2, 64}, 82, {{0}}, 0, repack_iq2_s},
    {QT_IQ3_S, {256, 112, 2, 64}, 110, {{0}}, 0, repack_iq3_s},
    {QT_IQ1_M, {256, 48, 8, 64}, 56, {{0}}, 0, repack_iq1_m},
    {QT_F32, {8, 32, 0, 8}, 32, {{0, 32, 0, 0}}, 1, NULL},
    {QT_F16, {8, 16, 0, 8}, 16, {{0, 16, 0, 0}}, 1, NULL},
    {QT_BF16, {8, 16, 0, 8}, 16, {{0, 16, 0, 0}}, 1, NULL},
};

static const layout_row *row_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].type == type)
            return &table[i];
    return NULL;
}

bool vk_qlayout_of(uint32_t type, vk_qlayout *out)
{
    const layout_row *r = row_of(type);
    if (r && out)
        *out = r->l;
    return r != NULL;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

uint64_t vk_tensor_bytes(uint32_t type, uint64_t K, uint64_t N, uint64_t n_mat, uint64_t align)
{
    const layout_row *r = row_of(type);
    if (!r)
        return 0;
    uint64_t blocks = (K + r->l.blk - 1) / r->l.blk * N * n_mat;
    /* heads are read as whole words (and uvec4s): round the array up */
    return align_up(blocks * r->l.body, align) + align_up(blocks * r->l.head, 16);
}

/* Float rows are not blocked in GGML: element size and zero padding. */
static uint32_t float_elem_bytes(uint32_t type)
{
    return type == QT_F32 ? 4 : type == QT_F16 || type == QT_BF16 ? 2 : 0;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Where the fifth bit of element 4s+i of a run (slot s, i = 0..3) goes in a
 * qh' word (see the table above). */
static uint32_t qh_bit(uint32_t s, uint32_t i)
{
    return 8 * i + ((s + 4) & 7);
}

/* Q5_0/Q5_1: GGML's qh bit e (element e) -> qh'. */
static uint32_t qh_q5(uint32_t qh)
{
    uint32_t o = 0;
    for (uint32_t e = 0; e < 32; e++)
        o |= ((qh >> e) & 1u) << qh_bit(e / 4, e % 4);
    return o;
}

/* Q5_K: GGML's qh[32] (bit j of byte l: element l of sub-block j) -> the
 * eight qh' words, sub-block j's in word j. */
static void qh_q5_k(const uint8_t *qh, uint8_t *out)
{
    for (uint32_t j = 0; j < 8; j++) {
        uint32_t w = 0;
        for (uint32_t l = 0; l < 32; l++)
            w |= (uint32_t)((qh[l] >> j) & 1u) << qh_bit(l / 4, l % 4);
        put32(out + 4 * j, w);
    }
}

void vk_repack_rows(uint32_t type, uint64_t K, const uint8_t *src, uint64_t src_stride, uint64_t nrows,
                    uint8_t *body, uint8_t *head)
{
    const layout_row *r = row_of(type);
    uint64_t bpr = (K + r->l.blk - 1) / r->l.blk;
    uint32_t fe = float_elem_bytes(type);
    if (fe) {
        uint64_t row_out = bpr * r->l.body;
        for (uint64_t i = 0; body && i < nrows; i++) {
            uint8_t *d = body + i * row_out;
            memcpy(d, src + i * src_stride, K * fe);
            memset(d + K * fe, 0, row_out - K * fe);
        }
        return;
    }
    for (uint64_t i = 0; i < nrows; i++) {
        const uint8_t *s = src + i * src_stride;
        for (uint64_t b = 0; b < bpr; b++, s += r->src_bytes) {
            uint64_t bi = i * bpr + b;
            if (r->repack) {
                r->repack(s, body ? body + bi * r->l.body : NULL, head ? head + bi * r->l.head : NULL);
                continue;
            }
            for (uint32_t k = 0; k < r->np; k++) {
                const piece *p = &r->p[k];
                if (p->to_head ? !head : !body)
                    continue;
                uint8_t *d = p->to_head ? head + bi * r->l.head + p->dst : body + bi * r->l.body + p->dst;
                memcpy(d, s + p->src, p->len);
            }
            if (type == QT_Q5_0 && head) {
                memset(head + bi * r->l.head + 2, 0, 2); /* the pad between d and qh' */
                put32(head + bi * r->l.head + 4, qh_q5(get32(s + 2)));
            } else if (type == QT_Q5_1 && head) {
                put32(head + bi * r->l.head + 4, qh_q5(get32(s + 4)));
            } else if (type == QT_Q5_K && body) {
                qh_q5_k(s + 16, body + bi * r->l.body + 128);
            }
        }
    }
}

/* ---- the low-bit types' blocks ---------------------------------------------------- */

/* Q2_K (scales[16] qs[64] d dmin): qs as it is; sc' word u = (n, h) holds
 * the scale/min bytes of sub-blocks 8n + 2j + h (j = 0..3, byte j): the
 * four sub-blocks of unit u (see the table). */
static void repack_q2_k(const uint8_t *src, uint8_t *body, uint8_t *head)
{
    if (body) {
        memcpy(body, src + 16, 64);
        for (uint32_t u = 0; u < 4; u++)
            for (uint32_t j = 0; j < 4; j++)
                body[64 + 4 * u + j] = src[8 * (u >> 1) + 2 * j + (u & 1)];
    }
    if (head)
        memcpy(head, src + 80, 4);
}

/* Q3_K's 6-bit scale j, as ggml unpacks it, minus 32. */
static int8_t q3_k_scale(const uint8_t *s, uint32_t j)
{
    uint32_t lo = j < 8 ? s[j] & 15u : s[j - 8] >> 4;
    return (int8_t)((int)(lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3u) << 4) - 32);
}

/* Q3_K (hmask[32] qs[64] scales[12] d): qs as it is; hm' (8 bytes per
 * unit u = (n, h)): the third bit of element 128n + 32j + 16h + 4k + i
 * (hmask[16h + 4k + i] bit 4n + j) at bit 8i + 4(j%2) + k of word j/2, so
 * one shift puts the bits of a (j, k) run of four at bit 2 of their bytes;
 * sc' as Q2_K's, each scale unpacked to a signed byte (sc - 32). */
static void repack_q3_k(const uint8_t *src, uint8_t *body, uint8_t *head)
{
    const uint8_t *hm = src, *qs = src + 32, *sc = src + 96;
    if (body) {
        memcpy(body, qs, 64);
        for (uint32_t u = 0; u < 4; u++) {
            uint32_t n = u >> 1, h = u & 1, w[2] = {0, 0};
            for (uint32_t j = 0; j < 4; j++)
                for (uint32_t k = 0; k < 4; k++)
                    for (uint32_t i = 0; i < 4; i++)
                        w[j >> 1] |= (uint32_t)((hm[16 * h + 4 * k + i] >> (4 * n + j)) & 1u)
                                     << (8 * i + 4 * (j & 1) + k);
            put32(body + 64 + 8 * u, w[0]);
            put32(body + 68 + 8 * u, w[1]);
            for (uint32_t j = 0; j < 4; j++)
                body[96 + 4 * u + j] = (uint8_t)q3_k_scale(sc, 8 * n + 2 * j + h);
        }
    }
    if (head)
        memcpy(head, src + 108, 2);
}

/* IQ4_XS (d scales_h scales_l[4] qs[128]): the 8 scale bytes to the head. */
static void repack_iq4_xs(const uint8_t *src, uint8_t *body, uint8_t *head)
{
    if (body)
        memcpy(body, src + 8, 128);
    if (head)
        memcpy(head, src, 8);
}

/* IQ2_XS (d qs[32 x 16 bits] scales[8]): head d, 2 bytes of padding,
 * scales, so the scales are whole words. */
static void repack_iq2_xs(const uint8_t *src, uint8_t *body, uint8_t *head)
{
    if (body)
        memcpy(body, src + 2, 64);
    if (head) {
        memcpy(head, src, 2);
        memset(head + 2, 0, 2);
        memcpy(head + 4, src + 66, 8);
    }
}

/* IQ2_S (d qs[32] signs[32] qh[8] scales[8]): per unit u one 16-byte
 * piece, its 8 grid index bytes then its 8 sign bytes; meta word u (bytes
 * 64 + 4u ..): qh[2u], qh[2u+1], scales[2u], scales[2u+1]. */
static void repack_iq2_s(const uint8_t *src, uint8_t *body, uint8_t *head)
{
    const uint8_t *qs = src + 2, *signs = src + 34, *qh = src + 66, *sc = src + 74;
    if (body)
        for (uint32_t u = 0; u < 4; u++) {
            memcpy(body + 16 * u, qs + 8 * u, 8);
            memcpy(body + 16 * u + 8, signs + 8 * u, 8);
            uint8_t *m = body + 64 + 4 * u;
            m[0] = qh[2 * u], m[1] = qh[2 * u + 1], m[2] = sc[2 * u], m[3] = sc[2 * u + 1];
        }
    if (head)
        memcpy(head, src, 2);
}

/* IQ3_S (d qs[64] qh[8] signs[32] scales[4]): index bytes and signs as they
 * are (unit u: idx[16u ..], signs[8u ..]); meta word u: qh[2u], qh[2u+1],
 * scales[u], 0. */
static void repack_iq3_s(const uint8_t *src, uint8_t *body, uint8_t *head)
{
    const uint8_t *qs = src + 2, *qh = src + 66, *signs = src + 74, *sc = src + 106;
    if (body) {
        memcpy(body, qs, 64);
        memcpy(body + 64, signs, 32);
        for (uint32_t u = 0; u < 4; u++) {
            uint8_t *m = body + 96 + 4 * u;
            m[0] = qh[2 * u], m[1] = qh[2 * u + 1], m[2] = sc[u], m[3] = 0;
        }
    }
    if (head)
        memcpy(head, src, 2);
}

/* IQ1_M (qs[32] qh[16] scales[8]): its scale words (which hold d) to the
 * head. */
static void repack_iq1_m(const uint8_t *src, uint8_t *body, uint8_t *head)
{
    if (body)
        memcpy(body, src, 48);
    if (head)
        memcpy(head, src + 48, 8);
}
