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
 *   Q5_0    32    qs[16]                    d pad qh[4]
 *   Q5_1    32    qs[16]                    d m qh[4]
 *   Q8_0    32    qs[32]                    d
 *   Q4_K   256    qs[128]                   d dmin scales[12]
 *   Q5_K   256    qh[32] qs[128]            d dmin scales[12]
 *   Q6_K   256    ql[128] qh[64] sc[16]     d
 *   F32      8    8 floats                  -
 *   F16/BF16 8    8 halves                  -
 *
 * Byte order inside each piece is GGML's, so the decoders follow ggml's
 * reference dequantization exactly.  Rows of float types are padded to a
 * multiple of 8 elements with zeros.  The layout is a one-time change; the
 * bytes read per token stay those of the file. */
#include <string.h>

#include "quant.h"
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
    {QT_Q5_0, {32, 16, 8, 32}, 22, {{6, 16, 0, 0}, {0, 2, 1, 0}, {2, 4, 1, 4}}, 3},
    {QT_Q5_1, {32, 16, 8, 32}, 24, {{8, 16, 0, 0}, {0, 8, 1, 0}}, 2},
    {QT_Q8_0, {32, 32, 2, 32}, 34, {{2, 32, 0, 0}, {0, 2, 1, 0}}, 2},
    {QT_Q4_K, {256, 128, 16, 64}, 144, {{16, 128, 0, 0}, {0, 16, 1, 0}}, 2},
    {QT_Q5_K, {256, 160, 16, 64}, 176, {{16, 160, 0, 0}, {0, 16, 1, 0}}, 2},
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
            if (type == QT_Q5_0 && head)
                memset(head + bi * r->l.head + 2, 0, 2); /* the pad between d and qh */
        }
    }
}
