#version 450
// mv_glu: h[z][r] = silu(G[m(z)][r] . n) * (U[m(z)][r] . n), n = RMSNorm(x) * nw
// (NORM 1) or x: the gate and up projections of the FFN and of the experts,
// fused with SiLU * mul.  m(z) = ids[z] (IDMODE 1: the routed experts the
// router chose, read from the GPU buffer) or z.

#define PC_USE_GLU
#include "pc_matvec.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = GLU_S_NORM) const uint NORM = 1u;
WEIGHT_TYPE(GLU_S_TYPE2, TYPE2);   // up
layout(constant_id = GLU_S_KSH) const uint KSH = 4u;
layout(constant_id = GLU_S_IDMODE) const uint IDMODE = 0u;
layout(constant_id = GLU_S_UPT) const uint UPT = 4u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#define IQ_T2 TYPE2
#include "mv_common.glsl"

layout(set = 0, binding = GLU_B_H) writeonly buffer HBuf { float h[]; } H;
layout(set = 0, binding = GLU_B_IDS) readonly buffer IdBuf { int ids[]; } ID;

void main()
{
    iq_init();
    uint z = gl_WorkGroupID.y;
    uint mat = IDMODE == 1u ? uint(ID.ids[pc.ids_off + z]) : z;
    xsrc a = xsrc(true, pc.x_off, pc.K, NORM == 1u, pc.nw_off);

    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr_g = pc.Kp / blk_of(TYPE), bpr_u = pc.Kp / blk_of(TYPE2);
    uint row0 = (gl_WorkGroupID.x * (WGS / TEAM) + team) * NR;
    uint nv = row0 < pc.N ? min(NR, pc.N - row0) : 1u;
    uint r0 = min(row0, pc.N - 1u);
    float g[NR], u[NR];
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        g[r] = 0.0;
        u[r] = 0.0;
    }
    float xx = 0.0, xx2 = 0.0;
    team_rows(TYPE, 0u, mat * pc.mblk_g + r0 * bpr_g, bpr_g, nv, pc.hbase_g, lane, pc.Kp / unit_of(TYPE), a, g, xx);
    team_rows(TYPE2, 1u, mat * pc.mblk_u + r0 * bpr_u, bpr_u, nv, pc.hbase_u, lane, pc.Kp / unit_of(TYPE2), a, u,
              xx2);
    float sc = NORM == 1u ? rms_scale(xx, pc.K, pc.eps) : 1.0;
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        float gv = team_sum(g[r]) * sc, uv = team_sum(u[r]) * sc;
        if (lane == 0u && row0 + r < pc.N)
            H.h[pc.h_off + z * pc.h_z + row0 + r] = gv / (1.0 + exp(-gv)) * uv;
    }
}
