#version 450
// mm: Y = W . X for a prefill batch, tiled: a workgroup computes BM tokens x
// BN output rows, walking K in steps of BK through shared memory (weights
// dequantized once per tile step, so each stored weight serves BM tokens).
//   MODE 0: store; 1: add into Y (the residual stream); 2: Y = silu(W.X) * (W2.X)
//   LIST 0: tokens tile y*BM.. of the batch (z: matrix / head, with column
//           offsets per z); LIST 1: tile y of the expert work list (moe_group):
//           rows are (token, slot) pairs, input row pair / x_div, output row pair.
// Accumulation is f32 from f32 activations and exactly dequantized weights.

#define PC_USE_MM
#include "pc_prefill.h"
layout(local_size_x_id = PC_S_WGS) in;
WEIGHT_TYPE(MM_S_TYPE, TYPE);
WEIGHT_TYPE(MM_S_TYPE2, TYPE2);
layout(constant_id = MM_S_BM) const uint BM = 64u;
layout(constant_id = MM_S_BN) const uint BN = 64u;
layout(constant_id = MM_S_MODE) const uint MODE = 0u;
layout(constant_id = MM_S_LIST) const uint LIST = 0u;
const uint WGS = gl_WorkGroupSize.x;
const uint BK = 32u;
const uint TNT = 4u;                        // output rows per thread
const uint TMT = BM * BN / (WGS * TNT);     // tokens per thread
const uint NTM = BM / TMT;                  // threads across the tokens

#include "quant.glsl"
#define IQ_T1 TYPE
#define IQ_T2 TYPE2
#include "quant_iq.glsl"
#include "mm_weights.glsl"

layout(set = 0, binding = MM_B_X) readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = MM_B_Y) buffer YBuf { float y[]; } Y;
layout(set = 0, binding = MM_B_LIST) readonly buffer ListBuf { uint pair[]; } L;
layout(set = 0, binding = MM_B_TILES) readonly buffer TileBuf { uvec4 t[]; } TL;
layout(set = 0, binding = MM_B_PARAMS) readonly buffer Params { uint p[]; } P;

shared float As[BK * BM];     // [k][token]
shared float Bs[BK * BN];     // [k][row]
shared float Bs2[MODE == 2u ? BK * BN : 1u];
shared uint xrow[BM], yrow[BM];

// Rows n0..n0+BN-1 of the weights in slot s at k0..k0+BK-1 into Bs (Bs2
// with second), transposed.
void put_w(bool second, uint kk, uint n, float v)
{
    if (second)
        Bs2[kk * BN + n] = v;
    else
        Bs[kk * BN + n] = v;
}

void stage_w(uint t, uint s, uint mblk, uint hbase, uint bpr, uint mat, uint n0, uint k0, bool second)
{
    uint tid = gl_LocalInvocationIndex;
    if (t == T_F32) {
        for (uint idx = tid; idx < BN * BK / 4u; idx += WGS) {
            uint n = idx / (BK / 4u), kk = 4u * (idx % (BK / 4u)), k = k0 + kk, row = n0 + n;
            vec4 w = row < pc.N && k < pc.Kp ? deq4(t, s, mat * mblk + row * bpr + k / 8u, (k % 8u) / 4u, hbase)
                                             : vec4(0.0);
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                put_w(second, kk + i, n, w[i]);
        }
        return;
    }
    for (uint idx = tid; idx < BN * 2u; idx += WGS) {
        uint n = idx >> 1, h = idx & 1u, row = n0 + n, rb = mat * mblk + row * bpr;
        WRaw r = w_fetch(t, s, rb, hbase, row < pc.N, k0, h);
        vec4 v[4];
        w_values(t, rb, k0, h, r, v);
        [[unroll]] for (uint k = 0u; k < 4u; k++)
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                put_w(second, 16u * h + 4u * k + i, n, v[k][i]);
    }
}

void main()
{
    uint tid = gl_LocalInvocationIndex;
    uint n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    uint mat, start, cnt;
    if (LIST == 1u) {
        uvec4 w = TL.t[gl_WorkGroupID.y];
        mat = w.x;
        start = w.y;
        cnt = w.z;
    } else {
        uint T = P.p[VKP_NTOK];
        mat = z;
        start = gl_WorkGroupID.y * BM;
        if (start >= T)
            return;  // past the batch
        cnt = min(BM, T - start);
    }
    for (uint i = tid; i < BM; i += WGS) {
        uint r = LIST == 1u ? (i < cnt ? L.pair[start + i] : 0u) : start + i;
        xrow[i] = LIST == 1u ? r / pc.x_div : r;
        yrow[i] = r;
    }
    iq_fill();
    barrier();

    uint bpr = pc.Kp / blk_of(TYPE), bpr2 = pc.Kp / blk_of(TYPE2);
    uint tm = tid % NTM, tn = tid / NTM;
    float acc[TMT][TNT], acc2[MODE == 2u ? TMT : 1u][TNT];
    [[unroll]] for (uint i = 0u; i < TMT; i++)
        [[unroll]] for (uint j = 0u; j < TNT; j++) {
            acc[i][j] = 0.0;
            if (MODE == 2u)
                acc2[i][j] = 0.0;
        }

    for (uint k0 = 0u; k0 < pc.Kp; k0 += BK) {
        // activations: BM tokens x BK, transposed into As
        for (uint idx = tid; idx < BM * BK / 4u; idx += WGS) {
            uint i = idx / (BK / 4u), kk = 4u * (idx % (BK / 4u)), k = k0 + kk;
            vec4 v = vec4(0.0);
            if (i < cnt) {
                uint b = pc.x_off + xrow[i] * pc.x_stride + z * pc.x_z + k;
                v = vec4(k < pc.K ? X.x[b] : 0.0, k + 1u < pc.K ? X.x[b + 1u] : 0.0,
                         k + 2u < pc.K ? X.x[b + 2u] : 0.0, k + 3u < pc.K ? X.x[b + 3u] : 0.0);
            }
            As[kk * BM + i] = v.x;
            As[(kk + 1u) * BM + i] = v.y;
            As[(kk + 2u) * BM + i] = v.z;
            As[(kk + 3u) * BM + i] = v.w;
        }
        // weights: BN rows x BK, dequantized (F32 four at a time; the others
        // by 16-element segments, mm_weights.glsl)
        stage_w(TYPE, 0u, pc.mblk, pc.hbase, bpr, mat, n0, k0, false);
        if (MODE == 2u)
            stage_w(TYPE2, 1u, pc.mblk2, pc.hbase2, bpr2, mat, n0, k0, true);
        barrier();
        for (uint k = 0u; k < BK; k++) {
            float a[TMT], b[TNT], b2[TNT];
            [[unroll]] for (uint i = 0u; i < TMT; i++)
                a[i] = As[k * BM + tm * TMT + i];
            [[unroll]] for (uint j = 0u; j < TNT; j++) {
                b[j] = Bs[k * BN + tn * TNT + j];
                if (MODE == 2u)
                    b2[j] = Bs2[k * BN + tn * TNT + j];
            }
            [[unroll]] for (uint i = 0u; i < TMT; i++)
                [[unroll]] for (uint j = 0u; j < TNT; j++) {
                    acc[i][j] += a[i] * b[j];
                    if (MODE == 2u)
                        acc2[i][j] += a[i] * b2[j];
                }
        }
        barrier();
    }

    [[unroll]] for (uint i = 0u; i < TMT; i++) {
        uint m = tm * TMT + i;
        if (m >= cnt)
            continue;
        [[unroll]] for (uint j = 0u; j < TNT; j++) {
            uint n = n0 + tn * TNT + j;
            if (n >= pc.N)
                continue;
            uint o = pc.y_off + yrow[m] * pc.y_stride + z * pc.y_z + n;
            float v = acc[i][j];
            if (MODE == 2u)
                v = v / (1.0 + exp(-v)) * acc2[i][j];
            Y.y[o] = MODE == 1u ? Y.y[o] + v : v;
        }
    }
}
