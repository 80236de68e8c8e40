/* rope.h: RoPE's (cos, sin) per pair of dimensions, as ggml computes them.
 *
 * Promises:
 *  - rope_cos_sin() is the one definition the CPU reference (ref_forward.c)
 *    and the Vulkan core's table (gpu/vk_engine.c) both use, so the two
 *    rotate by bit-identical angles.
 *  - ggml's rope_yarn in float: YaRN's ramp between the correction dims,
 *    theta stepped by repeated multiplication (not powf per pair), the
 *    attention factor folded into cos and sin.
 */
#ifndef GLM_ROPE_H
#define GLM_ROPE_H

#include "model.h"

/* cs[2i], cs[2i+1] = cos, sin of pair i (< qk_rope / 2) at position pos. */
void rope_cos_sin(const model_config *c, float pos, float *cs);

#endif
