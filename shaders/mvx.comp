#version 450
// mvx: y[z] (=|+=) W[m(z)] . x[z] for one token, x-stationary (see
// mvx_common.glsl): the workgroup stages x[z] (RMSNorm(x) * nw with NORM 1)
// once, then each team walks its rows R at a time, `passes` times.
//
// Grid: x = row groups (WGS/TEAM teams x R rows x passes), y = z (heads or
// expert slots; m(z) = z, or ids[z] when IDMODE = 1).  OMODE 1 adds into y
// (the residual stream; each row is written by one lane only).  Prefill
// uses it for the head over the batch's last token (last_row).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 2u;
layout(constant_id = 2) const uint TEAM = 32u;
layout(constant_id = 3) const uint J = 2u;
layout(constant_id = 4) const uint R = 4u;
layout(constant_id = 5) const uint SG = 32u;
layout(constant_id = 6) const uint NORM = 0u;
layout(constant_id = 7) const uint OMODE = 0u;
layout(constant_id = 8) const uint KSH = 2048u;
layout(constant_id = 9) const uint IDMODE = 0u;
layout(constant_id = 10) const uint XREG = 1u;
layout(constant_id = 11) const uint XRN = 16u;
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"
#include "mvx_common.glsl"
#include "dep_flag.glsl"

layout(set = 0, binding = 2) coherent buffer YBuf { float y[]; } Y;  // coherent: see X
layout(set = 0, binding = 4) coherent readonly buffer IdBuf { int ids[]; } ID;  // coherent: see dep_flag.glsl
layout(set = 0, binding = 5) readonly buffer Params { uint p[]; } P;

layout(push_constant) uniform PC {
    uint K, Kp, N;
    uint hbase;       // head byte offset of the weight tensor
    uint mat_blocks;  // blocks per matrix
    uint x_off, x_z;  // input: base and stride per z (floats)
    uint y_off, y_z;  // output
    uint nw_off;
    float eps;
    uint ids_off;
    uint last_row;    // non-zero: the input is the batch's last token, rows last_row floats apart
    uint passes;      // row passes per team
    uint dep_signal;  // SIGNAL: this dispatch's counter
    uint dep_wait, dep_n;  // WAIT: the producers' counter and workgroups
} pc;

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
        xb += (P.p[1] - 1u) * pc.last_row;

    const uint NT = WGS / TEAM;
    uint lid = lin_id(), team = lid / TEAM, lane = lid % TEAM;
    uint bpr = pc.Kp / blk_of(TYPE), nunits = pc.Kp / UNIT, mblk0 = mat * pc.mat_blocks;
    uint wrow0 = gl_WorkGroupID.x * NT * R * pc.passes;

    // the first rows' weights are in flight while the input is staged
    load_rows(0u, mblk0, bpr, pc.hbase, wrow0 + team * R, pc.N, lane, nunits, 0u);
    if (WAIT == 1u && IDMODE == 0u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));
    float sc = stage_x(xb, pc.K, pc.Kp, NORM == 1u, pc.nw_off, pc.eps);
    load_xr(lane);
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
