/* rope.c: RoPE's (cos, sin) table rows (rope.h). */
#include "rope.h"

#include <math.h>

/* ggml's correction dimension: the pair index where n_rot full rotations
 * happen over the original context. */
static float yarn_corr_dim(float n_dims, float n_ctx_orig, float n_rot, float base)
{
    return n_dims * logf(n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* ggml's rope_yarn: the frequency of pair i0/2 blends interpolation and
 * extrapolation with a ramp between the correction dims. */
void rope_cos_sin(const model_config *c, float pos, float *cs)
{
    uint32_t n_dims = c->qk_rope;
    float theta_scale = powf(c->rope_base, -2.0f / (float)n_dims);
    float lo = floorf(yarn_corr_dim((float)n_dims, (float)c->n_ctx_orig, c->yarn_beta_fast, c->rope_base));
    float hi = ceilf(yarn_corr_dim((float)n_dims, (float)c->n_ctx_orig, c->yarn_beta_slow, c->rope_base));
    lo = lo > 0.0f ? lo : 0.0f;
    hi = hi < (float)(n_dims - 1) ? hi : (float)(n_dims - 1);
    float theta_extrap = pos; /* ggml steps theta by repeated multiplication */
    for (uint32_t i0 = 0; i0 < n_dims; i0 += 2) {
        float theta_interp = c->rope_freq_scale * theta_extrap;
        float theta = theta_interp;
        if (c->yarn_ext_factor != 0.0f) {
            float y = ((float)(i0 / 2) - lo) / fmaxf(0.001f, hi - lo);
            float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
            float mix = ramp * c->yarn_ext_factor;
            theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
        }
        cs[i0] = cosf(theta) * c->yarn_attn_factor;
        cs[i0 + 1] = sinf(theta) * c->yarn_attn_factor;
        theta_extrap *= theta_scale;
    }
}
