#version 450
// mv: y[z] (=|+=) W[m(z)] . x[z] for one token (decode), any weight type.
//
// Grid: x = row groups (NR rows per team, WGS/TEAM teams), y = z (heads or
// expert slots; m(z) = z, or ids[z] when IDMODE = 1).  NORM 1: the input is
// RMSNorm(x) * nw, folded in per team (see mv_common.glsl).  OMODE 1 adds
// into y (the residual stream), which is safe: each row is written by one
// team only.  Prefill uses it for the head over the batch's last token
// (params buffer).

#define PC_USE_MV
#include "pc_matvec.h"
#include "params.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = MV_S_NORM) const uint NORM = 0u;
layout(constant_id = MV_S_OMODE) const uint OMODE = 0u;
layout(constant_id = MV_S_KSH) const uint KSH = 4u;
layout(constant_id = MV_S_IDMODE) const uint IDMODE = 0u;
layout(constant_id = MV_S_UPT) const uint UPT = 4u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "mv_common.glsl"

layout(set = 0, binding = MV_B_Y) buffer YBuf { float y[]; } Y;
layout(set = 0, binding = MV_B_IDS) readonly buffer IdBuf { int ids[]; } ID;
layout(set = 0, binding = MV_B_PARAMS) readonly buffer Params { uint p[]; } P;

void main()
{
    iq_init();
    uint z = gl_WorkGroupID.y;
    uint mat = IDMODE == 1u ? uint(ID.ids[pc.ids_off + z]) : z;
    uint xb = pc.x_off + z * pc.x_z;
    if (pc.last_row != 0u)
        xb += (P.p[VKP_NTOK] - 1u) * pc.last_row;
    xsrc a = xsrc(true, xb, pc.K, NORM == 1u, pc.nw_off);

    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE);
    uint row0 = (gl_WorkGroupID.x * (WGS / TEAM) + team) * NR;
    uint nv = row0 < pc.N ? min(NR, pc.N - row0) : 1u;
    uint r0 = min(row0, pc.N - 1u);
    float acc[NR];
    [[unroll]] for (uint r = 0u; r < NR; r++)
        acc[r] = 0.0;
    float xx = 0.0;
    team_rows(TYPE, 0u, mat * pc.mat_blocks + r0 * bpr, bpr, nv, pc.hbase, lane, pc.Kp / unit_of(TYPE), a, acc, xx);
    float sc = NORM == 1u ? rms_scale(xx, pc.K, pc.eps) : 1.0;
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        float v = team_sum(acc[r]) * sc;
        if (lane == 0u && row0 + r < pc.N) {
            uint yi = pc.y_off + z * pc.y_z + row0 + r;
            Y.y[yi] = OMODE == 1u ? Y.y[yi] + v : v;
        }
    }
}
