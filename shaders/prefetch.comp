#version 450
// prefetch: reads weights a later step of the token will need, so that
// step finds them in L2 instead of device memory.  It runs beside a step
// that leaves the memory system idle (latency-bound small kernels, or the
// tail of a large one), with no barrier of its own.  Up to four weight
// slots; slot s covers nz[s] matrices -- matrices ids[ids_off + z] when
// ids_off is set (the experts the router chose), else matrices 0..nz-1 --
// each its quant bodies and its scales.  The loads' XOR goes to the sink
// only when `write` is set (the kernel test's check of what was read; the
// decode graph passes 0, which the compiler cannot know, so the loads stay).
// Grid: x = workgroups per matrix, y = (slot, matrix) pairs in slot order.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 4u;   // loads in flight per thread
const uint WGS = gl_WorkGroupSize.x;

#extension GL_EXT_control_flow_attributes : enable

layout(set = 0, binding = 0) readonly buffer WBuf4 { uvec4 w[]; } W4[4];
layout(set = 0, binding = 1) readonly buffer IdBuf { int ids[]; } ID;
layout(set = 0, binding = 2) coherent buffer Sink { uint v[]; } S;

struct Slot {
    uint nz;          // matrices
    uint ids_off;     // 0xffffffff: matrices 0..nz-1
    uint body16;      // 16-byte words of one matrix's bodies
    uint head_base;   // bytes from the tensor start to the scales array
    uint head_m;      // bytes of one matrix's scales
    uint total16;     // 16-byte words of the whole tensor
};

layout(push_constant) uniform PC {
    Slot s[4];
    uint nslot;
    uint write;
} pc;

uvec4 acc = uvec4(0u);

void stream(uint slot, uint lo, uint hi)
{
    uint stride = gl_NumWorkGroups.x * WGS;
    uint i = lo + gl_WorkGroupID.x * WGS + gl_LocalInvocationIndex;
    for (; i + (UNROLL - 1u) * stride < hi; i += UNROLL * stride) {
        uvec4 t[UNROLL];
        [[unroll]] for (uint u = 0u; u < UNROLL; u++)
            t[u] = W4[slot].w[i + u * stride];
        [[unroll]] for (uint u = 0u; u < UNROLL; u++)
            acc ^= t[u];
    }
    for (; i < hi; i += stride)
        acc ^= W4[slot].w[i];
}

void main()
{
    // (slot, matrix) of this row of workgroups
    uint y = gl_WorkGroupID.y, slot = 0u;
    while (slot + 1u < pc.nslot && y >= pc.s[slot].nz) {
        y -= pc.s[slot].nz;
        slot++;
    }
    if (slot >= pc.nslot || y >= pc.s[slot].nz)
        return;
    Slot d = pc.s[slot];
    uint m = d.ids_off == 0xffffffffu ? y : uint(ID.ids[d.ids_off + y]);
    uint b0 = min(m * d.body16, d.total16), b1 = min(b0 + d.body16, d.total16);
    uint h0 = min((d.head_base + m * d.head_m) / 16u, d.total16);
    uint h1 = min((d.head_base + (m + 1u) * d.head_m + 15u) / 16u, d.total16);
    // the four slots are distinct bindings: a constant index each
    if (slot == 0u) { stream(0u, b0, b1); stream(0u, h0, h1); }
    else if (slot == 1u) { stream(1u, b0, b1); stream(1u, h0, h1); }
    else if (slot == 2u) { stream(2u, b0, b1); stream(2u, h0, h1); }
    else { stream(3u, b0, b1); stream(3u, h0, h1); }
    if (pc.write != 0u) {
        uint r = acc.x ^ acc.y ^ acc.z ^ acc.w;
        atomicXor(S.v[gl_WorkGroupID.y], r);
    }
}
