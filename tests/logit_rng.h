/* logit_rng.h: the seeded random numbers the sampler tests draw their
 * logits from (test_sampler.c, test_vk_sampler.c): splitmix64, a uniform in
 * (0, 1) and a cheap near-normal value (the sum of four 16-bit uniforms,
 * scaled to unit variance) -- fast enough for vocabularies of 150k. */
#ifndef GLM_TEST_LOGIT_RNG_H
#define GLM_TEST_LOGIT_RNG_H

#include <stdint.h>

static inline uint64_t rs_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double rs_unit(uint64_t *x) /* (0, 1) */
{
    return ((double)(rs_next(x) >> 11) + 0.5) * 0x1.0p-53;
}

static inline float rs_gauss(uint64_t *x)
{
    uint64_t r = rs_next(x);
    uint32_t s = (uint32_t)(r & 0xFFFF) + (uint32_t)(r >> 16 & 0xFFFF) + (uint32_t)(r >> 32 & 0xFFFF) + (uint32_t)(r >> 48);
    return ((float)s * (1.0f / 65536) - 2.0f) * 1.7320508f;
}

#endif
