/* cpu_q8.c: activation rows in the forms the fast CPU kernels read
 * (cpu_q8.h), the portable way.  The vectorized preparers in the x86
 * kernel files compute the same expressions in the same order. */
#include "cpu_q8.h"

#include <math.h>
#include <string.h>

#include "quant.h"

uint32_t cpu_act_block(cpu_act_kind k)
{
    return k == CPU_ACT_Q8_32 ? 32 : k == CPU_ACT_Q8_K ? 256 : 1;
}

uint64_t cpu_act_row_bytes(cpu_act_kind k, uint64_t n)
{
    uint64_t b = k == CPU_ACT_Q8_32 ? n + 12 * (n / 32) : k == CPU_ACT_Q8_K ? n + 4 * (n / 256) + 2 * (n / 16) : 4 * n;
    return (b + 63) / 64 * 64;
}

void cpu_act_prepare_f32(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row)
{
    (void)n;
    memcpy((float *)row + from, x + from, (to - from) * sizeof(float));
}

/* |v| <= 127 for finite v scaled by 127 / amax; NaN (and what overflowed)
 * becomes 0 so the integer conversion is always defined. */
static int clamp_round(float v)
{
    if (!(v >= -127.f && v <= 127.f))
        return v > 127.f ? 127 : v < -127.f ? -127 : 0;
    return cpu_round_even(v);
}

void cpu_act_prepare_q8_32(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row)
{
    int8_t *q = (int8_t *)row + from;
    float *d = (float *)((char *)row + n), *s = d + n / 32;
    int32_t *qsum = (int32_t *)(s + n / 32);
    x += from;
    for (uint64_t b = from / 32; b < to / 32; b++, x += 32, q += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float dr = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            q[j] = (int8_t)clamp_round(x[j] * id);
            sum += q[j];
        }
        d[b] = quant_f16_to_f32(quant_f32_to_f16(dr));
        s[b] = quant_f16_to_f32(quant_f32_to_f16(dr * (float)sum));
        qsum[b] = sum;
    }
}

void cpu_act_prepare_q8_K(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row)
{
    int8_t *q = (int8_t *)row + from;
    float *d = (float *)((char *)row + n);
    int16_t *bsum = (int16_t *)(d + n / 256);
    x += from;
    for (uint64_t b = from / 256; b < to / 256; b++, x += 256, q += 256) {
        float amax = 0;
        for (int j = 0; j < 256; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float iscale = amax != 0 ? 127.f / amax : 0.f;
        for (int j = 0; j < 256; j++)
            q[j] = (int8_t)clamp_round(x[j] * iscale);
        d[b] = amax != 0 ? 1.f / iscale : 0.f;
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += q[16 * g + j];
            bsum[16 * b + g] = (int16_t)sum;
        }
    }
}
