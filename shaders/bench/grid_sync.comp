#version 450
// grid_sync: `rounds` grid-wide barriers inside one dispatch (workgroups
// that are all resident at once spin on a counter in memory), for
// tests/tools/vk_microbench (MB_GRIDSYNC=1): what a dependent step would
// cost in a persistent kernel, against a dispatch + pipeline barrier.  Not
// used by the engine.  A spin gives up after a bound (and counts the failure)
// so a grid that is not all resident cannot hang the device.
//
// Counter words: [0] arrivals, [1] workgroups done, [2] failed spins.  The
// last workgroup to finish resets [0] and [1] for the next dispatch: by then
// every workgroup has left its last spin.

#define PC_USE_GRID_SYNC
#include "pc_bench.h"
layout(local_size_x_id = PC_S_WGS) in;

layout(set = 0, binding = GRID_B_COUNTERS) buffer CtrBuf { uint c[]; } C;

const uint SPIN_LIMIT = 1u << 22;

void main()
{
    uint g = gl_NumWorkGroups.x;
    for (uint r = 0u; r < pc.rounds; r++) {
        barrier();
        if (gl_LocalInvocationIndex == 0u) {
            memoryBarrierBuffer();
            atomicAdd(C.c[0], 1u);
            uint target = (r + 1u) * g, spins = 0u;
            while (atomicAdd(C.c[0], 0u) < target && spins < SPIN_LIMIT)
                spins++;
            if (spins >= SPIN_LIMIT)
                atomicAdd(C.c[2], 1u);
            memoryBarrierBuffer();
        }
        barrier();
    }
    if (gl_LocalInvocationIndex == 0u && atomicAdd(C.c[1], 1u) == g - 1u) {
        atomicExchange(C.c[0], 0u);
        atomicExchange(C.c[1], 0u);
    }
}
