#version 450
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
// l2_warm: reads byte ranges that the next dependent step of the decode
// graph will read, while the current step runs beside it, so that step finds
// them in the L2 cache instead of waiting on HBM.  A decode step reads a few
// MB and is latency-bound (gpu/PERF.md run 16): its loads wait on HBM round
// trips that a kernel running earlier, with nothing depending on it, can
// take instead.
//
// Ranges (up to 6, push constants): a plain byte range of a bound buffer; a
// range per selected expert (offset + ids[i] * stride, i < n_ids: the rows
// the MoE kernels will read); or a range cut to params[VKP_POS0] rows (the
// attention cache rows before the one being written).  Byte ranges are read
// as whole 16-byte units (start rounded down, end up).
//
// Grid: y = range instances (a per-expert range counts n_ids times), x =
// spans of `span` units.  Each workgroup writes the wrapping sum of the
// 32-bit words it read to sink[y * groups_x + x]: the loads are used (the
// compiler cannot drop them) and the kernel test checks the sum.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 4u;
const uint WGS = gl_WorkGroupSize.x;

layout(set = 0, binding = 0) readonly buffer WBuf4 { uvec4 w[]; } W4[4];
layout(set = 0, binding = 1) coherent readonly buffer IdBuf { int ids[]; } ID;
layout(set = 0, binding = 2) readonly buffer Params { uint p[]; } P;
layout(set = 0, binding = 3) writeonly buffer SinkBuf { uint s[]; } S;

layout(push_constant) uniform PC {
    uint nseg;
    uint ids_off;
    uint n_ids;
    uint span;      // 16-byte units per workgroup
    uvec4 seg[6];   // (slot | mode << 4, byte offset, bytes, stride: bytes per expert or per row)
} pc;

const uint MODE_PLAIN = 0u, MODE_BY_ID = 1u, MODE_BY_POS = 2u;

shared uint wg_sum;

void main()
{
    uint inst = gl_WorkGroupID.y, s = 0u;
    for (; s + 1u < pc.nseg; s++) {
        uint n = (pc.seg[s].x >> 4) == MODE_BY_ID ? pc.n_ids : 1u;
        if (inst < n)
            break;
        inst -= n;
    }
    uvec4 g = pc.seg[s];
    uint slot = g.x & 15u, mode = g.x >> 4;
    uint start = g.y, bytes = g.z;
    if (mode == MODE_BY_ID)
        start += uint(ID.ids[pc.ids_off + inst]) * g.w;
    else if (mode == MODE_BY_POS)
        bytes = min(bytes, P.p[0] * g.w);
    uint first = start >> 4u;
    uint end = bytes == 0u ? first : (start + bytes + 15u) >> 4u;
    uint lo = first + gl_WorkGroupID.x * pc.span;
    uint hi = min(lo + pc.span, end);

    // UNROLL loads in flight per thread before any is used
    uint acc = 0u;
    for (uint i = lo + gl_LocalInvocationID.x; i < hi; i += WGS * UNROLL) {
        uvec4 v[UNROLL];
        for (uint u = 0u; u < UNROLL; u++) {
            uint j = i + u * WGS;
            v[u] = j < hi ? W4[slot].w[j] : uvec4(0u);
        }
        for (uint u = 0u; u < UNROLL; u++)
            acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }

    if (gl_LocalInvocationID.x == 0u)
        wg_sum = 0u;
    barrier();
    uint t = subgroupAdd(acc);
    if (subgroupElect())
        atomicAdd(wg_sum, t);
    barrier();
    if (gl_LocalInvocationID.x == 0u)
        S.s[gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x] = wg_sum;
}
