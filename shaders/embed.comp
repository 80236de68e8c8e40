#version 450
// embed: x[z] = dequantized row tok[z] of the token embedding table.
// Grid: x = groups of 4 elements / WGS, y = token of the batch.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 2u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"

layout(set = 0, binding = 1) readonly buffer TokBuf { int tok[]; } T;
layout(set = 0, binding = 2) writeonly buffer XBuf { float x[]; } X;

layout(push_constant) uniform PC {
    uint K, Kp, hbase;
    uint tok_off;
    uint x_off, x_z;
    uint n_vocab;
    uint check_batch;   // 1: the token buffer is the params buffer; tokens past params[1] are skipped
} pc;

void main()
{
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
