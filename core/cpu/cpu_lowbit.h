/* cpu_lowbit.h: what the integer kernels of the 2- and 3-bit K-quants
 * (Q2_K, Q3_K) share across instruction sets (cpu_q3_K_).
 *
 * Q3_K keeps sixteen 6-bit scales in 12 bytes: the low nibble of scale j in
 * byte j (j < 8, low nibble) or j - 8 (high nibble), the top two bits in
 * byte 8 + j%4 at bit 2*(j/4) -- quant_kquant.c's q3_K_scale, one 32-bit
 * word of four scales at a time here (the masks drop what a neighbour byte
 * shifted in).
 *
 * Promises: cpu_q3_K_scales' sc[j] equals quant_kquant.c's scale j (offset
 * 32 taken off: -32..31) for every j, and cpu_q3_K_scale_words holds the
 * same plus 32; pure. */
#ifndef GLM_CPU_LOWBIT_H
#define GLM_CPU_LOWBIT_H

#include <stdint.h>
#include <string.h>

/* The sixteen scales before the offset (0..63), four per word: scale j is
 * byte j % 4 of o[j / 4] (little-endian, as the block). */
static inline void cpu_q3_K_scale_words(const uint8_t *s, uint32_t o[4])
{
    uint32_t u[3];
    memcpy(u, s, 12);
    o[0] = (u[0] & 0x0f0f0f0f) | (((u[2] >> 0) & 0x03030303) << 4);
    o[1] = (u[1] & 0x0f0f0f0f) | (((u[2] >> 2) & 0x03030303) << 4);
    o[2] = ((u[0] >> 4) & 0x0f0f0f0f) | (((u[2] >> 4) & 0x03030303) << 4);
    o[3] = ((u[1] >> 4) & 0x0f0f0f0f) | (((u[2] >> 6) & 0x03030303) << 4);
}

/* The sixteen scales, offset taken off (-32..31). */
static inline void cpu_q3_K_scales(const uint8_t *s, int8_t *sc)
{
    uint32_t o[4];
    uint8_t raw[16];
    cpu_q3_K_scale_words(s, o);
    memcpy(raw, o, 16);
    for (int j = 0; j < 16; j++)
        sc[j] = (int8_t)(raw[j] - 32);
}

#endif
