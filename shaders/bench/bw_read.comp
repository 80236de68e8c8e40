#version 450
// bw_read: reads a buffer with 16-byte loads and writes one sum per
// workgroup: the device's streaming-read bandwidth, for `bench`-style
// comparisons with the matvec kernels (tests/tools/vk_microbench).

#define PC_USE_BW_READ
#include "pc_bench.h"
layout(local_size_x_id = PC_S_WGS) in;
const uint WGS = gl_WorkGroupSize.x;

layout(set = 0, binding = BW_B_IN) readonly buffer ABuf { uvec4 a[]; } A;
layout(set = 0, binding = BW_B_OUT) writeonly buffer OBuf { uint o[]; } O;

void main()
{
    uint stride = gl_NumWorkGroups.x * WGS;
    uint i = gl_GlobalInvocationID.x;
    uvec4 s = uvec4(0u);
    for (uint k = 0u; k < pc.per; k++, i += stride)
        if (i < pc.n)
            s ^= A.a[i];
    if ((s.x ^ s.y ^ s.z ^ s.w) == 0x12345678u)
        O.o[gl_WorkGroupID.x] = s.x;
}
