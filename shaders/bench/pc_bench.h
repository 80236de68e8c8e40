/* pc_bench.h: the microbenchmark's own kernels (../pc_common.h; built into
 * tests/tools/vk_microbench only): bw_read and grid_sync. */
#ifndef PC_BENCH_H
#define PC_BENCH_H

#include "../pc_common.h"

/* ---- bw_read: the device's streaming-read bandwidth ---- */
#if PC_HOST || defined(PC_USE_BW_READ)
PC_BEGIN(pc_bw_read)
    PC_U32 n;               /* uvec4 elements */
    PC_U32 per;             /* elements per thread (interleaved by the grid) */
PC_END(pc_bw_read)
#endif
PC_ENUM_BEGIN(pc_bw_read_binding)
PC_ENUM(BW_B_IN, 1)
PC_ENUM(BW_B_OUT, 2)
PC_ENUM_END(pc_bw_read_binding)

/* ---- grid_sync: grid-wide barriers inside one dispatch ---- */
#if PC_HOST || defined(PC_USE_GRID_SYNC)
PC_BEGIN(pc_grid_sync)
    PC_U32 rounds;
PC_END(pc_grid_sync)
#endif
PC_ENUM_BEGIN(pc_grid_sync_binding)
PC_ENUM(GRID_B_COUNTERS, 1)     /* [0] arrivals, [1] workgroups done, [2] failed spins */
PC_ENUM_END(pc_grid_sync_binding)

#endif
