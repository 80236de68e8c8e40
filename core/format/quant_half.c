/* quant_half.c: half (IEEE binary16) and bfloat16 conversion (quant.h),
 * round-to-nearest-even as ggml's reference C, with NaN and infinity kept.
 *
 * Every block codec uses these (quant.c's legacy formats and the families in
 * quant_kquant.c, quant_iq4.c, quant_iq.c, quant_iq_quantize.c); kept apart
 * from quant.c's type table, which calls the families, so that no file
 * calls back into the one that called it. */
#include "quant.h"

#include <stdint.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        /* Zero or subnormal: man * 2^-24, exact in f32. */
        float mag = (float)man * 0x1p-24f;
        return sign ? -mag : mag;
    }
    if (exp == 31) /* inf, or NaN with its payload (quiet bit included) */
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

/* Rounds the integer m right by `shift` bits, to nearest with ties to even. */
static uint32_t shift_round_even(uint32_t m, unsigned shift)
{
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return q;
}

uint16_t quant_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) /* NaN: the quiet NaN ggml writes */
        return sign | 0x7e00;
    if (ax >= 0x477ff000) /* at or past 65520, the midpoint above 65504: inf */
        return sign | 0x7c00;
    if (ax >= 0x38800000) {
        /* Normal half.  A carry out of the mantissa bumps the exponent,
         * which is exactly the right result. */
        uint32_t rebased = ax - (112u << 23);
        return sign | (uint16_t)shift_round_even(rebased, 13);
    }
    if (ax <= 0x33000000) /* at most 2^-25, half the smallest subnormal: zero */
        return sign;
    /* Subnormal half: the value in units of 2^-24, rounded. */
    uint32_t mant = (ax & 0x7fffff) | 0x800000;
    unsigned shift = 126 - (ax >> 23);
    return sign | (uint16_t)shift_round_even(mant, shift);
}

float quant_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) /* NaN: keep sign and payload, force quiet */
        return (uint16_t)((x >> 16) | 0x40);
    /* Round to nearest even; overflow carries into inf, as it should. */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
