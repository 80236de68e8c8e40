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
 * is a one-time change; the bytes read per token stay those of the file. */
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
} layout_row;

static const layout_row table[] = {
    {QT_Q4_0, {32, 16, 2, 32}, 18, {{2, 16, 0, 0}, {0, 2, 1, 0}}, 2},
    {QT_Q4_1, {32, 16, 4, 32}, 20, {{4, 16, 0, 0}, {0, 4, 1, 0}}, 2},
    {QT_Q5_0, {32, 16, 8, 32}, 22, {{6, 16, 0, 0}, {0, 2, 1, 0}}, 2},
    {QT_Q5_1, {32, 16, 8, 32}, 24, {{8, 16, 0, 0}, {0, 4, 1, 0}}, 2},
    {QT_Q8_0, {32, 32, 2, 32}, 34, {{2, 32, 0, 0}, {0, 2, 1, 0}}, 2},
    {QT_Q4_K, {256, 128, 16, 64}, 144, {{16, 128, 0, 0}, {0, 16, 1, 0}}, 2},
    {QT_Q5_K, {256, 160, 16, 64}, 176, {{48, 128, 0, 0}, {0, 16, 1, 0}}, 2},
    {QT_Q6_K, {256, 208, 2, 32}, 210, {{0, 208, 0, 0}, {208, 2, 1, 0}}, 2},
    {QT_F32, {8, 32, 0, 8}, 32, {{0, 32, 0, 0}}, 1},
    {QT_F16, {8, 16, 0, 8}, 16, {{0, 16, 0, 0}}, 1},
    {QT_BF16, {8, 16, 0, 8}, 16, {{0, 16, 0, 0}}, 1},
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
