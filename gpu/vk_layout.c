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

/* One row's nb GGML blocks from src into the body and head arrays (either
 * may be NULL: that part is skipped). */
typedef void (*blocks_fn)(const uint8_t *src, uint64_t nb, uint8_t *body, uint8_t *head);

typedef struct {
    uint32_t type;
    vk_qlayout l;
    uint32_t src_bytes;  /* GGML block bytes */
    blocks_fn blocks;    /* NULL: float rows (a copy, padded) */
} layout_row;

/* The layout runs for every prompt batch that streams a host layer's
 * experts to the GPU (vk_hostmoe_stream.c), ~300 MB a layer: each type has
 * its own loop over a row's blocks, the copies' sizes constants (a few
 * moves, not a call each), the bit rearrangements done a word at a time. */

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Blocks whose body and head are two pieces of the GGML block, copied:
 * SB block bytes; the body's BL bytes from BS (body blocks BB bytes apart),
 * the head's HL from HS (head blocks HB apart). */
#define COPY_BLOCKS(fn, SB, BS, BL, BB, HS, HL, HB)                                                                    \
    static void fn(const uint8_t *src, uint64_t nb, uint8_t *body, uint8_t *head)                                       \
    {                                                                                                                  \
        for (uint64_t b = 0; b < nb; b++, src += (SB)) {                                                               \
            if (body)                                                                                                  \
                memcpy(body + b * (BB), src + (BS), (BL));                                                             \
            if (head)                                                                                                  \
                memcpy(head + b * (HB), src + (HS), (HL));                                                             \
        }                                                                                                              \
    }
COPY_BLOCKS(blocks_q4_0, 18, 2, 16, 16, 0, 2, 2)
COPY_BLOCKS(blocks_q4_1, 20, 4, 16, 16, 0, 4, 4)
COPY_BLOCKS(blocks_q8_0, 34, 2, 32, 32, 0, 2, 2)
COPY_BLOCKS(blocks_q4_k, 144, 16, 128, 128, 0, 16, 16)
COPY_BLOCKS(blocks_q6_k, 210, 0, 208, 208, 208, 2, 2)
COPY_BLOCKS(blocks_mxfp4, 17, 1, 16, 16, 0, 1, 1)
COPY_BLOCKS(blocks_iq2_xxs, 66, 2, 64, 64, 0, 2, 2)
COPY_BLOCKS(blocks_iq3_xxs, 98, 2, 96, 96, 0, 2, 2)
COPY_BLOCKS(blocks_iq1_s, 50, 2, 48, 48, 0, 2, 2)
COPY_BLOCKS(blocks_iq4_xs, 136, 8, 128, 128, 0, 8, 8) /* d scales_h scales_l[4] qs[128]: the 8 scale bytes to the head */

/* The fifth bits' slots (see the table above): the fifth bit of element
 * 4s + i of a run (slot s, i = 0..3) goes to bit 8i + (s + 4) % 8 of a qh'
 * word.  A run's four bits, at bits 0..3 of `nib`, to bit 0 of bytes 0..3:
 * the multiply puts bit i at 7i + i (its four shifted copies do not
 * overlap, so nothing carries). */
static uint32_t spread4(uint32_t nib)
{
    return (nib & 15u) * 0x00204081u & 0x01010101u;
}

/* Q5_0/Q5_1: GGML's qh (bit e: element e) -> qh'. */
static uint32_t qh_q5(uint32_t qh)
{
    uint32_t o = 0;
    for (uint32_t s = 0; s < 8; s++)
        o |= spread4(qh >> (4 * s)) << ((s + 4) & 7);
    return o;
}

/* Q5_0 (d qh qs[16]) and Q5_1 (d m qh qs[16]): qs to the body, the scales,
 * then qh' to the head (Q5_0: d, 2 bytes of padding, qh'). */
static void blocks_q5_0(const uint8_t *src, uint64_t nb, uint8_t *body, uint8_t *head)
{
    for (uint64_t b = 0; b < nb; b++, src += 22) {
        if (body)
            memcpy(body + 16 * b, src + 6, 16);
        if (head) {
            uint8_t *h = head + 8 * b;
            memcpy(h, src, 2);
            memset(h + 2, 0, 2);
            put32(h + 4, qh_q5(get32(src + 2)));
        }
    }
}

static void blocks_q5_1(const uint8_t *src, uint64_t nb, uint8_t *body, uint8_t *head)
{
    for (uint64_t b = 0; b < nb; b++, src += 24) {
        if (body)
            memcpy(body + 16 * b, src + 8, 16);
        if (head) {
            uint8_t *h = head + 8 * b;
            memcpy(h, src, 4);
            put32(h + 4, qh_q5(get32(src + 4)));
        }
    }
}

/* Q5_K (d dmin scales[12] qh[32] qs[128]): qs and the eight qh' words to the
 * body (GGML's qh: bit j of byte l is element l of sub-block j; sub-block
 * j's qh' word j, slot l / 4), d dmin scales to the head.  Bytes 4s..4s+3
 * of qh read as one word hold bit j of a run's four elements at bits
 * 8i + j: one shift and mask per run and word. */
static void blocks_q5_k(const uint8_t *src, uint64_t nb, uint8_t *body, uint8_t *head)
{
    for (uint64_t b = 0; b < nb; b++, src += 176) {
        if (body) {
            uint8_t *o = body + 160 * b;
            memcpy(o, src + 48, 128);
            uint32_t run[8];
            for (uint32_t s = 0; s < 8; s++)
                run[s] = get32(src + 16 + 4 * s);
            for (uint32_t j = 0; j < 8; j++) {
                uint32_t w = 0;
                for (uint32_t s = 0; s < 8; s++)
                    w |= ((run[s] >> j) & 0x01010101u) << ((s + 4) & 7);
                put32(o + 128 + 4 * j, w);
            }
        }
        if (head)
            memcpy(head + 16 * b, src, 16);
    }
}

/* The low-bit types whose blocks are rearranged one at a time. */
static void repack_q2_k(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_q3_k(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq2_xs(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq2_s(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq3_s(const uint8_t *src, uint8_t *body, uint8_t *head);
static void repack_iq1_m(const uint8_t *src, uint8_t *body, uint8_t *head);

#define EACH_BLOCK(fn, SB, BB, HB, repack)                                                                             \
    static void fn(const uint8_t *src, uint64_t nb, uint8_t *body, uint8_t *head)                                       \
    {                                                                                                                  \
        for (uint64_t b = 0; b < nb; b++, src += (SB))                                                                 \
            repack(src, body ? body + b * (BB) : NULL, head ? head + b * (HB) : NULL);                                 \
    }
EACH_BLOCK(blocks_q2_k, 84, 80, 4, repack_q2_k)
EACH_BLOCK(blocks_q3_k, 110, 112, 2, repack_q3_k)
EACH_BLOCK(blocks_iq2_xs, 74, 64, 12, repack_iq2_xs)
EACH_BLOCK(blocks_iq2_s, 82, 80, 2, repack_iq2_s)
EACH_BLOCK(blocks_iq3_s, 110, 112, 2, repack_iq3_s)
EACH_BLOCK(blocks_iq1_m, 56, 48, 8, repack_iq1_m)

static const layout_row table[] = {
    {QT_Q4_0, {32, 16, 2, 32}, 18, blocks_q4_0},
    {QT_Q4_1, {32, 16, 4, 32}, 20, blocks_q4_1},
    {QT_Q5_0, {32, 16, 8, 32}, 22, blocks_q5_0},
    {QT_Q5_1, {32, 16, 8, 32}, 24, blocks_q5_1},
    {QT_Q8_0, {32, 32, 2, 32}, 34, blocks_q8_0},
    {QT_Q4_K, {256, 128, 16, 64}, 144, blocks_q4_k},
    {QT_Q5_K, {256, 160, 16, 64}, 176, blocks_q5_k},
    {QT_Q6_K, {256, 208, 2, 32}, 210, blocks_q6_k},
    {QT_IQ4_NL, {32, 16, 2, 32}, 18, blocks_q4_0}, /* the same block: d qs[16] */
    {QT_MXFP4, {32, 16, 1, 32}, 17, blocks_mxfp4},
    {QT_IQ2_XXS, {256, 64, 2, 64}, 66, blocks_iq2_xxs},
    {QT_IQ3_XXS, {256, 96, 2, 64}, 98, blocks_iq3_xxs},
    {QT_IQ1_S, {256, 48, 2, 64}, 50, blocks_iq1_s},
    {QT_Q2_K, {256, 80, 4, 64}, 84, blocks_q2_k},
    {QT_Q3_K, {256, 112, 2, 64}, 110, blocks_q3_k},
    {QT_IQ4_XS, {256, 128, 8, 64}, 136, blocks_iq4_xs},
    {QT_IQ2_XS, {256, 64, 12, 64}, 74, blocks_iq2_xs},
    {QT_IQ2_S, {256, 80, 2, 64}, 82, blocks_iq2_s},
    {QT_IQ3_S, {256, 112, 2, 64}, 110, blocks_iq3_s},
    {QT_IQ1_M, {256, 48, 8, 64}, 56, blocks_iq1_m},
    {QT_F32, {8, 32, 0, 8}, 32, NULL},
    {QT_F16, {8, 16, 0, 8}, 16, NULL},
    {QT_BF16, {8, 16, 0, 8}, 16, NULL},
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
    for (uint64_t i = 0; i < nrows; i++)
        r->blocks(src + i * src_stride, bpr, body ? body + i * bpr * r->l.body : NULL,
                  head ? head + i * bpr * r->l.head : NULL);
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

/* Q3_K's 16 6-bit scales, as ggml unpacks them, minus 32, four to a word:
 * scales 4q..4q+3 in bytes 0..3 of out[q] (scale j's low nibble: byte j
 * of the first 8, the low half for j < 8, the high half after; its top
 * two bits: bits 2(j / 4) of byte 8 + j % 4).  The minus 32 bytewise with
 * no borrow between bytes: each byte's top bit set first (it is 0..63),
 * then cleared. */
static void q3_k_scales(const uint8_t *s, uint32_t out[4])
{
    uint32_t l0 = get32(s), l1 = get32(s + 4), hi = get32(s + 8);
    uint32_t lo[4] = {l0 & 0x0F0F0F0Fu, l1 & 0x0F0F0F0Fu, (l0 >> 4) & 0x0F0F0F0Fu, (l1 >> 4) & 0x0F0F0F0Fu};
    for (uint32_t q = 0; q < 4; q++) {
        uint32_t v = lo[q] | ((hi >> (2 * q)) & 0x03030303u) << 4;
        out[q] = ((v | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
    }
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
        /* bytes hmask[16h + 4k ..] as one word, h = 0 and 1 side by side
         * in 64 bits: bit 4n + j of byte i is element (j, k, i)'s of unit
         * (n, h), moved to bit 4(j%2) + k of byte i (a shift of at most 7
         * keeps each byte's bit 0 its own) */
        uint64_t x[4];
        for (uint32_t k = 0; k < 4; k++)
            x[k] = get32(hm + 4 * k) | (uint64_t)get32(hm + 16 + 4 * k) << 32;
        for (uint32_t n = 0; n < 2; n++) {
            uint64_t w[2] = {0, 0};
            for (uint32_t k = 0; k < 4; k++)
                for (uint32_t j = 0; j < 4; j++)
                    w[j >> 1] |= ((x[k] >> (4 * n + j)) & 0x0101010101010101ull) << (4 * (j & 1) + k);
            for (uint32_t h = 0; h < 2; h++) { /* unit u = 2n + h */
                put32(body + 64 + 8 * (2 * n + h), (uint32_t)(w[0] >> (32 * h)));
                put32(body + 68 + 8 * (2 * n + h), (uint32_t)(w[1] >> (32 * h)));
            }
        }
        /* unit u = (n, h) takes scales 8n + 2j + h, j = 0..3 */
        uint32_t v[4];
        q3_k_scales(sc, v);
        for (uint32_t j = 0; j < 16; j++)
            body[96 + 8 * (j >> 3) + 4 * (j & 1) + ((j & 7) >> 1)] = (uint8_t)(v[j >> 2] >> (8 * (j & 3)));
    }
    if (head)
        memcpy(head, src + 108, 2);
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
