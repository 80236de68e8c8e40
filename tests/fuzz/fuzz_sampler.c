/* fuzz_sampler.c: bytes as sampler parameters and logits (any float bits:
 * NaN, infinities, huge and tiny values).  The sampler must pick the very
 * token the plain statement of its definition (tests/sampler_ref.h) picks,
 * on every vector level the CPU has, over a few steps with the penalty
 * window filling up.
 *
 *   byte 0      temperature: 0 (greedy) or one of a few values, the absurd
 *               ones included (1/temp overflowing, NaN, infinity)
 *   byte 1      top-k (0: off)
 *   bytes 2, 3  top-p, min-p (/ 255; 255 top-p is off)
 *   byte 4      penalties on (odd), and the seed
 *   the rest    logits, 4 bytes each (at most 20000) */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../sampler_ref.h"
#include "sampler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    static const float temps[] = {0.0f, 1.0f,    0.3f,   0.7f,     1.5f,      1e-6f,   100.0f, -1.0f,
                                  1e-39f, 1e-45f, NAN, INFINITY, FLT_MIN, FLT_MAX, 0.001f, 3e-39f};
    sampler_params p;
    sampler_params_default(&p);
    p.temp = temps[data[0] % 16];
    p.top_k = data[1] < 128 ? 0 : data[1] - 128;
    p.top_p = data[2] == 255 ? 1.0f : data[2] / 255.0f;
    p.min_p = data[3] / 255.0f;
    p.seed = data[4];
    if (data[4] & 1) {
        p.repeat_penalty = 1.3f;
        p.presence_penalty = 0.5f;
        p.frequency_penalty = 0.25f;
    }
    uint32_t n = (uint32_t)((size - 5) / 4);
    if (n > 20000)
        n = 20000;
    p.penalty_window = 8;
    float *base = malloc(n * sizeof *base), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    memcpy(base, data + 5, n * sizeof *base);
    {
        for (int level = 0; level <= sampler_set_simd(NULL, 99); level++) {
            sampler *s = sampler_new(&p, n);
            ref_sampler *r = ref_sampler_new(&p, n);
            sampler_set_simd(s, level);
            for (int step = 0; step < 3; step++) {
                memcpy(a, base, n * sizeof *a);
                memcpy(b, base, n * sizeof *b);
                int32_t ta = sampler_sample(s, a), tb = ref_sampler_sample(r, b);
                if (ta != tb)
                    abort(); /* a different token than the definition's */
                for (uint32_t i = 0; i < n; i++) { /* the penalised logits, as the definition sees them */
                    float ca = sk_canon(a[i]), cb = sk_canon(b[i]);
                    if (memcmp(&ca, &cb, sizeof ca) != 0)
                        abort();
                }
                sampler_accept(s, ta);
                ref_sampler_accept(r, tb);
            }
            sampler_free(s);
            ref_sampler_free(r);
        }
    }
    free(base);
    free(a);
    free(b);
    return 0;
}
