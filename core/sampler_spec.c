/* sampler_spec.c: the acceptance rule of speculative sampling, as
 * sampler_spec.h defines it (the CPU reference of it). */
#include "sampler_spec.h"

#include "sampler.h"

bool sampler_spec_accept(uint32_t p_d, uint32_t q_d, uint32_t u)
{
    /* both sides < 2^64: u < 2^32 and P, Q <= 2^31 */
    return (uint64_t)u * q_d < ((uint64_t)p_d << 32);
}

static uint32_t residual_weight(const uint32_t *P, const uint32_t *Q, int32_t d, uint32_t i)
{
    uint32_t q = Q ? Q[i] : (int32_t)i == d ? SAMPLER_PROB_ONE : 0;
    return P[i] > q ? P[i] - q : 0;
}

int32_t sampler_spec_residual(const uint32_t *P, const uint32_t *Q, int32_t d, uint32_t n, uint32_t u)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += residual_weight(P, Q, d, i);
    bool from_p = total == 0;
    if (from_p)
        for (uint32_t i = 0; i < n; i++)
            total += P[i];
    /* floor(total * u / 2^32) without overflow (as sk_mulhi) */
    uint64_t target = (total >> 32) * u + (((total & 0xFFFFFFFFu) * u) >> 32), run = 0;
    int32_t last = -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t w = from_p ? P[i] : residual_weight(P, Q, d, i);
        if (w == 0)
            continue;
        last = (int32_t)i;
        run += w;
        if (run > target)
            return (int32_t)i;
    }
    return last; /* not reached while total > 0 */
}
