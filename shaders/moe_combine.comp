#version 450
// moe_combine: x[t] += sum_k wt[t][k] * y[t*K + k] -- the weighted sum of a
// prefill batch's expert outputs into the residual stream.
// Grid: x = element groups, y = token.

#define PC_USE_MOE_COMBINE
#include "pc_prefill.h"
layout(local_size_x_id = PC_S_WGS) in;
const uint WGS = gl_WorkGroupSize.x;

layout(set = 0, binding = MCOMB_B_Y) readonly buffer YBuf { float y[]; } Y;       // [T*K][H]
layout(set = 0, binding = MCOMB_B_X) buffer XBuf { float x[]; } X;                // [T][H]
layout(set = 0, binding = MCOMB_B_WTS) readonly buffer WtBuf { float w[]; } WT;     // [T][K]
layout(set = 0, binding = MCOMB_B_PARAMS) readonly buffer Params { uint p[]; } P;

void main()
{
    uint t = gl_WorkGroupID.y, i = gl_WorkGroupID.x * WGS + gl_LocalInvocationIndex;
    if (t >= P.p[VKP_NTOK] || i >= pc.H)
        return;
    float acc = 0.0;
    for (uint k = 0u; k < pc.K; k++)
        acc += WT.w[pc.w_off + t * pc.K + k] * Y.y[(t * pc.K + k) * pc.H + i];
    X.x[pc.x_off + t * pc.H + i] += acc;
}
