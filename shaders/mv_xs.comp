#version 450
// mv_xs: y[z] (=|+=) W[m(z)] . x[z] for one token, x-stationary (see
// mv_xs_common.glsl): the workgroup stages x[z] (RMSNorm(x) * nw with NORM 1)
// once, then each team walks its rows R at a time, `passes` times.
//
// Grid: x = row groups (WGS/TEAM teams x R rows x passes), y = z (heads or
// expert slots; m(z) = z, or ids[z] when IDMODE = 1).  OMODE 1 adds into y
// (the residual stream; each row is written by one lane only).  Prefill
// uses it for the head over the batch's last token (last_row).

#define PC_USE_MV
#include "pc_matvec.h"
#define XS_STAGED_SUMS
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = MV_XS_S_NORM) const uint NORM = 0u;
layout(constant_id = MV_XS_S_OMODE) const uint OMODE = 0u;
layout(constant_id = MV_XS_S_IDMODE) const uint IDMODE = 0u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "dep_flag.glsl"
#include "mv_xs_common.glsl"

layout(set = 0, binding = MV_B_Y) coherent buffer YBuf { float y[]; } Y;  // coherent: see X
#ifdef LL
// LL_OUT: y as tagged words (dep_flag.glsl; never with OMODE 1)
layout(set = 0, binding = MV_B_Y) coherent volatile buffer YLL { uvec2 w[]; } YL;
#endif
layout(set = 0, binding = MV_B_IDS) coherent readonly buffer IdBuf { int ids[]; } ID;  // coherent: see dep_flag.glsl
layout(set = 0, binding = MV_B_PARAMS) readonly buffer Params { uint p[]; } P;

void mv()
{
    uint z = gl_WorkGroupID.y;
    // matrices chosen by ids: their producer before anything (uniform: no
    // early return precedes it)
    if (WAIT == 1u && IDMODE == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
    uint mat = IDMODE == 1u ? uint(ID.ids[pc.ids_off + z]) : z;
    uint xb = pc.x_off + z * pc.x_z;
    if (pc.last_row != 0u)
        xb += (P.p[VKP_NTOK] - 1u) * pc.last_row;

    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT, mblk0 = mat * pc.mat_blocks;
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;
#ifdef LL
    if (LL_IN != 0u && wrow0 >= pc.N)
        return;  // no rows (uniform): nothing to poll for (a tagged input may be newer already)
#endif

    // the first rows' weights are in flight while the input is staged
    load_rows(0u, mblk0, bpr, pc.hbase, wrow0 + team * R, pc.N, lane, nunits, 0u);
    if (WAIT == 1u && IDMODE == 0u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
    float sc = stage_x(xb, pc.K, pc.Kp, NORM == 1u, pc.nw_off, pc.eps, LL_IN != 0u ? LL_TAG(pc.ll_in) : 0u);
    load_xr(lane);
#ifdef LL
    uint tout = LL_OUT == 1u ? LL_TAG(pc.ll_out) : 0u;
#endif
    for (uint p = 0u; p < pc.passes; p++) {
        if (wrow0 + p * NT * R >= pc.N)
            break;  // past the matrix (the last workgroup; uniform)
        uint row0 = wrow0 + (p * NT + team) * R;
        if (p > 0u)
            load_rows(0u, mblk0, bpr, pc.hbase, row0, pc.N, lane, nunits, 0u);
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float v = team_sum(row_dot(mblk0, bpr, row0 + r, pc.N, lane, nunits, 0u, r)) * sc;
            if (lane == 0u && row0 + r < pc.N) {
                uint yi = pc.y_off + z * pc.y_z + row0 + r;
#ifdef LL
                if (LL_OUT == 1u) {
                    YL.w[yi] = uvec2(floatBitsToUint(v), tout);
                    continue;
                }
#endif
                Y.y[yi] = OMODE == 1u ? Y.y[yi] + v : v;
            }
        }
    }
}

void main()
{
    mv();
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
