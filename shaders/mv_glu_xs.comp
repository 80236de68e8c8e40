#version 450
// mv_glu_xs: h[z][r] = silu(G[m(z)][r] . n) * (U[m(z)][r] . n) with n =
// RMSNorm(x) * nw (NORM 1) or x, x-stationary (see mv_xs_common.glsl): the
// gate and up rows of a pass are loaded together against one staged input.
// z: the routed experts m(z) = ids[z] (IDMODE 1) or z, gate/up in weight
// slots 0/1 (the shared expert is a call of its own, beside the router).
// Grid: x = row groups, y = z.

#define PC_USE_GLU
#include "pc_matvec.h"
#define XS_SETS 2u
#define XS_STAGED_SUMS
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = GLU_XS_S_NORM) const uint NORM = 1u;
layout(constant_id = GLU_XS_S_IDMODE) const uint IDMODE = 0u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "dep_flag.glsl"
#include "mv_xs_common.glsl"

layout(set = 0, binding = GLU_B_H) writeonly buffer HBuf { float h[]; } H;
layout(set = 0, binding = GLU_B_IDS) coherent readonly buffer IdBuf { int ids[]; } ID;  // coherent: see dep_flag.glsl
layout(set = 0, binding = GLU_B_PARAMS) readonly buffer Params { uint p[]; } P;

void glu()
{
    // WAIT: the routed experts' ids come from the router (wait before
    // anything); the input only (IDMODE 0: wait with the first weights in flight)
    if (WAIT == 1u && IDMODE == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
    uint z = gl_WorkGroupID.y;
    uint mat = IDMODE == 1u ? uint(ID.ids[pc.ids_off + z]) : z;
    uint nrows = pc.N;

    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT;
    uint mg = mat * pc.mblk_g, mu = mat * pc.mblk_u;
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;

    float sc = 1.0;
    for (uint p = 0u; p < pc.passes; p++) {
        if (wrow0 + p * NT * R >= nrows)
            break;  // past the matrix (the last workgroup; uniform)
        uint row0 = wrow0 + (p * NT + team) * R;
        load_rows(0u, mg, bpr, pc.hbase_g, row0, nrows, lane, nunits, 0u);
        load_rows(1u, mu, bpr, pc.hbase_u, row0, nrows, lane, nunits, R * J);
        if (p == 0u) {
            // the first rows' weights are in flight while the input is
            // awaited and staged
            if (WAIT == 1u && IDMODE == 0u)
                dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
            sc = stage_x(pc.x_off, pc.K, pc.Kp, NORM == 1u, pc.nw_off, pc.eps, 0u);
            load_xr(lane);
        }
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float g = team_sum(row_dot(mg, bpr, row0 + r, nrows, lane, nunits, 0u, r)) * sc;
            float u = team_sum(row_dot(mu, bpr, row0 + r, nrows, lane, nunits, R * J, r)) * sc;
            if (lane == 0u && row0 + r < nrows) {
                H.h[pc.h_off + z * pc.h_z + row0 + r] = g / (1.0 + exp(-g)) * u;
            }
        }
    }
}

void main()
{
    glu();
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
