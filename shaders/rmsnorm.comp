#version 450
// rmsnorm: y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w for the tokens of a
// prefill batch (one workgroup per token; tokens past the batch do nothing).
// With pc.y_at_pos / pc.x_prev_pos the rows are cache positions instead
// (pc_prefill.h): the NextN block's kept hidden states.
// Y16 1: y also as fp16 -- clamped to +-65504 and rounded to nearest, as
// mm_coop packs its fp32 inputs (x_pack), so a mat-mat reading this twin
// computes bit for bit what it would from y, without every workgroup
// loading and packing the fp32 rows again (gpu/PERF.md run 48: ~10 % of a
// prompt batch).  Needs even offsets and an even n (the host: multiples of 8).

#define PC_USE_RMSNORM
#include "pc_prefill.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = RMSNORM_S_SG) const uint SG = 32u;
layout(constant_id = RMSNORM_S_Y16) const uint Y16 = 0u;
const uint WGS = gl_WorkGroupSize.x;

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(set = 0, binding = RMSNORM_B_X) readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = RMSNORM_B_Y) writeonly buffer YBuf { float y[]; } Y;
layout(set = 0, binding = RMSNORM_B_W) readonly buffer NWBuf { float w[]; } NW;
layout(set = 0, binding = RMSNORM_B_PARAMS) readonly buffer Params { uint p[]; } P;
layout(set = 0, binding = RMSNORM_B_Y16) writeonly buffer Y16Buf { uint h[]; } YH;

shared float red[64];

void main()
{
    uint t = gl_WorkGroupID.x, tid = gl_LocalInvocationIndex;
    if (t >= P.p[VKP_NTOK])
        return;
    uint pos = P.p[VKP_POS0] + t;
    uint xr = pc.x_prev_pos != 0u ? pos - 1u : t, yr = pc.y_at_pos != 0u ? pos : t;
    uint xb = pc.x_off + xr * pc.x_z, yb = pc.y_off + yr * pc.y_z;
    bool zero = pc.x_prev_pos != 0u && pos == 0u; /* no state before the first position: h = 0 */
    float ss = 0.0;
    for (uint i = tid; i < pc.n && !zero; i += WGS)
        ss += X.x[xb + i] * X.x[xb + i];
    ss = subgroupAdd(ss);
    if (subgroupElect())
        red[gl_SubgroupID] = ss;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        s += red[i];
    float sc = inversesqrt(s / float(pc.n) + pc.eps);
    if (Y16 == 1u) {
        for (uint i = 2u * tid; i < pc.n; i += 2u * WGS) {
            vec2 v = zero ? vec2(0.0)
                          : vec2(X.x[xb + i] * sc * NW.w[pc.w_off + i], X.x[xb + i + 1u] * sc * NW.w[pc.w_off + i + 1u]);
            Y.y[yb + i] = v.x;
            Y.y[yb + i + 1u] = v.y;
            YH.h[(yb + i) >> 1] = packHalf2x16(clamp(v, vec2(-65504.0), vec2(65504.0)));
        }
        return;
    }
    for (uint i = tid; i < pc.n; i += WGS)
        Y.y[yb + i] = zero ? 0.0 : X.x[xb + i] * sc * NW.w[pc.w_off + i];
}
