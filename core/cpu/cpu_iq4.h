/* cpu_iq4.h: the IQ4_XS block as ggml lays it out (ggml-common.h), and
 * MXFP4's table and scale, for the fast CPU backend's integer kernels
 * (cpu_iq4_, cpu_mxfp4_).
 *
 * 256 elements in 8 sub-blocks of 32: an f16 scale d, a 6-bit scale per
 * sub-block (low 4 bits in scales_l, two per byte; high 2 bits in
 * scales_h, two per sub-block), and 4-bit indices into a fixed table of 16
 * non-uniform levels (16 bytes per sub-block: low nibbles elements 0-15,
 * high nibbles 16-31).  Element j of sub-block ib is
 *   d * (ls(ib) - 32) * cpu_iq4_levels[index(j)].
 * MXFP4 (block_mxfp4 in quant.h: 32 elements, the same nibble order) is
 * the same kind of format: a 16-level table (ggml's kvalues_mxfp4, the
 * e2m1 values doubled) under a power-of-two scale, its E8M0 byte halved
 * (cpu_mxfp4_scale).
 * Promises: nothing but the layouts, the tables and the scale (bit for bit
 * core/format's quant_e8m0_half); the decoders of record are quant.c's. */
#ifndef GLM_CPU_IQ4_H
#define GLM_CPU_IQ4_H

#include <stdint.h>
#include <string.h>

typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
} cpu_iq4_xs_block; /* 136 bytes */

_Static_assert(sizeof(cpu_iq4_xs_block) == 136, "IQ4_XS block layout");

/* ggml's kvalues_iq4nl */
static const int8_t cpu_iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ggml's kvalues_mxfp4 */
static const int8_t cpu_mxfp4_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128) as a float: the subnormals 2^-128, 2^-127 for e = 0, 1. */
static inline float cpu_mxfp4_scale(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The 6-bit scale of sub-block ib (0..7), before the offset of 32. */
static inline int cpu_iq4_xs_scale(const cpu_iq4_xs_block *b, int ib)
{
    return ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b->scales_h >> 2 * ib) & 3) << 4);
}

#endif
