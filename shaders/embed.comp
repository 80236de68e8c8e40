#version 450
// embed: x[z] = dequantized row tok[z] of the token embedding table.
// Grid: x = groups of 4 elements / WGS, y = token of the batch.

#define PC_USE_EMBED
#include "pc_token.h"
layout(local_size_x_id = PC_S_WGS) in;
WEIGHT_TYPE(EMBED_S_TYPE, TYPE);
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#define IQ_T1 TYPE
#include "quant_iq.glsl"
#include "dep_flag.glsl"

layout(set = 0, binding = EMBED_B_TOKENS) readonly buffer TokBuf { int tok[]; } T;
layout(set = 0, binding = EMBED_B_X) writeonly buffer XBuf { float x[]; } X;

void main()
{
    iq_init();
    uint z = gl_WorkGroupID.y;
    if (pc.check_batch != 0u && z >= uint(T.tok[1]))
        return;
    uint g4 = gl_WorkGroupID.x * WGS + gl_LocalInvocationIndex;
    if (4u * g4 >= pc.K)
        return;
    uint id = min(uint(T.tok[pc.tok_off + z]), pc.n_vocab - 1u);   // ids are checked on the host
    uint blk = blk_of(TYPE), bpr = pc.Kp / blk;
    uint e = 4u * g4;
    vec4 v = deq4(TYPE, 0u, id * bpr + e / blk, (e % blk) / 4u, pc.hbase);
    uint o = pc.x_off + z * pc.x_z + e;
    X.x[o] = v.x;
    if (e + 1u < pc.K) X.x[o + 1u] = v.y;
    if (e + 2u < pc.K) X.x[o + 2u] = v.z;
    if (e + 3u < pc.K) X.x[o + 3u] = v.w;
}
