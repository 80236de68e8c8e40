#version 450
// mv_moe_down_xs: y[r] += sum_z wt[z] * (D[ids[z]][r] . h[z]) + (S[r] . h_s): the
// down projections of the chosen experts and of the shared expert, their
// weighted sum and the residual add, x-stationary (see mv_xs_common.glsl).
// The workgroup stages the concatenation [wt[0]*h[0] | ... | wt[nz-1]*h[nz-1]
// | h_s] once; a row of the product is then one long row across nz+1
// matrices (routed: weight slot 0, matrix ids[z]; shared: slot 1), and each
// lane precomputes where each of its units lives.
// HAS_SHARED 2: the shared expert's down is of another type than the routed
// experts' (a file's mix; one kernel reads one type), so a matvec of its own
// computed it beforehand into ysh, which is added here instead.
// Grid: x = row groups.

#define PC_USE_MOE_DOWN
#include "pc_matvec.h"
#define XS_STAGED_SUMS
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = DOWN_XS_S_HAS_SHARED) const uint HAS_SHARED = 1u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "dep_flag.glsl"
#include "mv_xs_common.glsl"

layout(set = 0, binding = DOWN_B_Y) coherent buffer YBuf { float y[]; } Y;  // coherent: see X
layout(set = 0, binding = DOWN_B_IDS) coherent readonly buffer IdBuf { int ids[]; } ID;  // coherent: see dep_flag.glsl
layout(set = 0, binding = DOWN_B_WTS) coherent readonly buffer WtBuf { float wts[]; } WT;  // coherent: see dep_flag.glsl
layout(set = 0, binding = DOWN_B_YSH) coherent readonly buffer YsBuf { float ys[]; } YS;  // coherent: see X
layout(set = 0, binding = DOWN_B_PARAMS) readonly buffer Params { uint p[]; } P;

// Where each of this lane's units lives: weight slot, first block of its
// matrix, row stride in blocks, unit index within the row.
uint us[J], ub[J], ust[J], uu[J];

void load_pass(uint row0)
{
    [[unroll]] for (uint r = 0u; r < R; r++) {
        uint row = min(row0 + r, pc.N - 1u);
        [[unroll]] for (uint j = 0u; j < J; j++) {
            uint blk = ub[j] + row * ust[j] + uu[j] / UPB, sub = uu[j] % UPB;
            if (us[j] == 0u)
                load_unit(0u, blk, sub, pc.hbase, r * J + j);
            else
                load_unit(1u, blk, sub, pc.hbase2, r * J + j);
        }
    }
}

void down()
{
    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint upr = pc.Kp / UNIT, upr2 = pc.Kp2 / UNIT;
    // the expert ids decide which weights to load: their producer first
    if (WAIT == 1u && pc.ids_n != 0u)
        dep_wait(pc.ids_wait, DEP_WANT(pc.ids_n));
    uint bpr = pc.Kp / blk_of(TYPE), bpr2 = pc.Kp2 / blk_of(TYPE);
    [[unroll]] for (uint j = 0u; j < J; j++) {
        uint u = lane + j * TEAM;
        if (u < pc.nz * upr || HAS_SHARED != 1u) {
            uint z = min(u / upr, pc.nz - 1u);
            us[j] = 0u;
            ub[j] = uint(ID.ids[pc.ids_off + z]) * pc.mblk;
            ust[j] = bpr;
            uu[j] = min(u - z * upr, upr - 1u);
        } else {
            us[j] = 1u;
            ub[j] = 0u;
            ust[j] = bpr2;
            uu[j] = min(u - pc.nz * upr, upr2 - 1u);
        }
    }
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;
    load_pass(wrow0 + team * R);
    // the first rows' weights are in flight while h is awaited
    if (WAIT == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));

    // stage [wt[z] * h[z] ...| h_s] (zeros past the end)
    uint nr = pc.nz * pc.Kp;
    iq_fill();
    for (uint v = x_first(); v < XEND; v += WGS) {
        uint e = 4u * v;
        vec4 a = vec4(0.0);
        if (e < nr) {
            uint z = e / pc.Kp;
            a = x_get4(pc.h_off + z * pc.h_z, e - z * pc.Kp, pc.K) * WT.wts[pc.wts_off + z];
        } else if (HAS_SHARED == 1u && e < nr + pc.Kp2) {
            a = x_get4(pc.h_off + pc.nz * pc.h_z, e - nr, pc.K2);
        }
        x_stage(v, a);
    }
    barrier();
    load_xr(lane);

    for (uint p = 0u; p < pc.passes; p++) {
        if (wrow0 + p * NT * R >= pc.N)
            break;  // past the matrix (the last workgroup; uniform)
        uint row0 = wrow0 + (p * NT + team) * R;
        if (p > 0u)
            load_pass(row0);
        [[unroll]] for (uint r = 0u; r < R; r++) {
            uint row = min(row0 + r, pc.N - 1u);
            float acc = 0.0;
            [[unroll]] for (uint j = 0u; j < J; j++)
                acc += unit_dot(r * J + j, ub[j] + row * ust[j] + uu[j] / UPB, uu[j] % UPB, j, lane + j * TEAM);
            float v = team_sum(acc);
            if (lane == 0u && row0 + r < pc.N) {
                Y.y[pc.y_off + row0 + r] += HAS_SHARED == 2u ? v + YS.ys[pc.ysh_off + row0 + r] : v;
            }
        }
    }
}

void main()
{
    down();
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
