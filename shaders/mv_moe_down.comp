#version 450
// mv_moe_down: y[r] += sum_z wt[z] * (D[ids[z]][r] . h[z]) + (S[r] . h_s):
// the down projections of the chosen experts and of the shared expert(s),
// their weighted sum and the residual add in one dispatch.  The teams of a
// workgroup split over (row group, slot), so every slot's loads are in
// flight at once; the slots of a row meet in shared memory.

#define PC_USE_MOE_DOWN
#include "pc_matvec.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = DOWN_S_HAS_SHARED) const uint HAS_SHARED = 1u;
WEIGHT_TYPE(DOWN_S_TYPE2, TYPE2);   // shared down
layout(constant_id = DOWN_S_KSH) const uint KSH = 4u;
layout(constant_id = DOWN_S_UPT) const uint UPT = 4u;
layout(constant_id = DOWN_S_NSLOT) const uint NSLOT = 5u;   // routed experts + shared
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#define IQ_T2 TYPE2
#include "mv_common.glsl"

const uint NTEAM = WGS / TEAM;
const uint RG = NTEAM / NSLOT;                   // row groups per workgroup

layout(set = 0, binding = DOWN_B_Y) buffer YBuf { float y[]; } Y;
layout(set = 0, binding = DOWN_B_IDS) readonly buffer IdBuf { int ids[]; } ID;
layout(set = 0, binding = DOWN_B_WTS) readonly buffer WtBuf { float wts[]; } WT;

shared float part[RG * NR * NSLOT];

void main()
{
    iq_init();
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint slot = team % NSLOT, rg = team / NSLOT;
    uint row0 = (gl_WorkGroupID.x * RG + min(rg, RG - 1u)) * NR;
    uint nv = row0 < pc.N ? min(NR, pc.N - row0) : 1u;
    uint r0 = min(row0, pc.N - 1u);
    float acc[NR];
    [[unroll]] for (uint r = 0u; r < NR; r++)
        acc[r] = 0.0;
    float xx = 0.0;
    if (rg < RG) {
        if (slot < pc.nz) {
            uint bpr = pc.Kp / blk_of(TYPE);
            uint m = uint(ID.ids[pc.ids_off + slot]);
            team_rows(TYPE, 0u, m * pc.mblk + r0 * bpr, bpr, nv, pc.hbase, lane, pc.Kp / unit_of(TYPE),
                      xsrc(true, pc.h_off + slot * pc.h_z, pc.K, false, 0u), acc, xx);
            float w = WT.wts[pc.wts_off + slot];
            [[unroll]] for (uint r = 0u; r < NR; r++)
                acc[r] *= w;
        } else if (HAS_SHARED == 1u) {
            uint bpr2 = pc.Kp2 / blk_of(TYPE2);
            team_rows(TYPE2, 1u, r0 * bpr2, bpr2, nv, pc.hbase2, lane, pc.Kp2 / unit_of(TYPE2),
                      xsrc(true, pc.h_off + pc.nz * pc.h_z, pc.K2, false, 0u), acc, xx);
        }
    }
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        float v = team_sum(acc[r]);
        if (lane == 0u && rg < RG)
            part[(rg * NR + r) * NSLOT + slot] = v;
    }
    barrier();
    uint tid = gl_LocalInvocationIndex;
    if (tid < RG * NR) {
        uint row = gl_WorkGroupID.x * RG * NR + tid;
        if (row < pc.N) {
            float s = 0.0;
            for (uint z = 0u; z < NSLOT; z++)
                s += part[tid * NSLOT + z];
            Y.y[pc.y_off + row] += s;
        }
    }
}
