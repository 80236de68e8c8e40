#version 450
// moe_group: a prefill batch's routing turned into work for the expert
// matrix-matrix kernels: the (token, slot) pairs of each expert in one list,
// that list cut into tiles of at most BM pairs (expert, start, count), and
// the indirect dispatch sizes of the gate/up and down passes.  One workgroup.

#define PC_USE_MOE_GROUP
#include "pc_prefill.h"
layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = GROUP_S_BM) const uint BM = 32u;
const uint WGS = gl_WorkGroupSize.x;
const uint EMAX = 512u;

layout(set = 0, binding = GROUP_B_IDS) readonly buffer IdBuf { int ids[]; } ID;       // [T][K]
layout(set = 0, binding = GROUP_B_LIST) writeonly buffer ListBuf { uint pair[]; } L;   // [T*K]
layout(set = 0, binding = GROUP_B_TILES) writeonly buffer TileBuf { uvec4 t[]; } TL;    // (expert, start, count, 0)
layout(set = 0, binding = GROUP_B_IND) writeonly buffer IndBuf { uint v[]; } IND;     // 2 x VkDispatchIndirectCommand
layout(set = 0, binding = GROUP_B_PARAMS) readonly buffer Params { uint p[]; } P;

shared uint cnt[EMAX], off[EMAX], toff[EMAX], cur[EMAX];

void main()
{
    uint tid = gl_LocalInvocationIndex;
    uint np = P.p[VKP_NTOK] * pc.K;
    for (uint e = tid; e < pc.n_expert; e += WGS) {
        cnt[e] = 0u;
        cur[e] = 0u;
    }
    barrier();
    for (uint p = tid; p < np; p += WGS)
        atomicAdd(cnt[uint(ID.ids[pc.ids_off + p])], 1u);
    barrier();
    if (tid == 0u) {
        uint o = 0u, to = 0u;
        for (uint e = 0u; e < pc.n_expert; e++) {
            off[e] = o;
            toff[e] = to;
            o += cnt[e];
            to += (cnt[e] + BM - 1u) / BM;
        }
        IND.v[0] = pc.x_gu;
        IND.v[1] = to;
        IND.v[2] = 1u;
        IND.v[3] = pc.x_dn;
        IND.v[4] = to;
        IND.v[5] = 1u;
    }
    barrier();
    for (uint p = tid; p < np; p += WGS) {
        uint e = uint(ID.ids[pc.ids_off + p]);
        L.pair[off[e] + atomicAdd(cur[e], 1u)] = p;
    }
    for (uint e = tid; e < pc.n_expert; e += WGS)
        for (uint i = 0u; i * BM < cnt[e]; i++)
            TL.t[toff[e] + i] = uvec4(e, off[e] + i * BM, min(BM, cnt[e] - i * BM), 0u);
}
