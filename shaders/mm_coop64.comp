#version 450
// mm_coop64: the first tensor-core mat-mat (run 3; GLMCHAT_COOPMAT=2 selects it for A/B runs):
// (GL_NV_cooperative_matrix, fp16 x fp16 -> fp32).  Same contract as mm.comp
// (modes, expert work lists, batched heads); a workgroup of four subgroups
// computes BM = 64 tokens x BN = 64 rows, each subgroup a 32 x 32 quarter as
// 2 x 2 fragments of 16 x 16, walking K in steps of 32 through shared
// memory.  Activations and dequantized weights are rounded to fp16 on their
// way into shared memory; products accumulate in fp32.  Used for quantized
// weights only (F32 models keep the fp32 kernel: their 1e-4 criterion).

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x_id = 0) in;                 // 128: four subgroups of 32
layout(constant_id = 1) const uint TYPE = 2u;
layout(constant_id = 2) const uint TYPE2 = 2u;
layout(constant_id = 5) const uint MODE = 0u;   // 0 store, 1 add, 2 silu(W.X) * (W2.X)
layout(constant_id = 6) const uint LIST = 0u;
const uint WGS = gl_WorkGroupSize.x;
const uint BM = 64u, BN = 64u, BK = 32u;
const uint LDA = BK + 8u;                       // padded rows (bank spread, 16-byte aligned)

#include "quant.glsl"

layout(set = 0, binding = 1) readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = 2) buffer YBuf { float y[]; } Y;
layout(set = 0, binding = 3) readonly buffer ListBuf { uint pair[]; } L;
layout(set = 0, binding = 4) readonly buffer TileBuf { uvec4 t[]; } TL;
layout(set = 0, binding = 5) readonly buffer Params { uint p[]; } P;

layout(push_constant) uniform PC {
    uint K, Kp, N;
    uint hbase, hbase2;
    uint mblk, mblk2;
    uint x_off, x_stride, x_z, x_div;
    uint y_off, y_stride, y_z;
} pc;

shared float16_t As[BM * LDA];     // [token][k]
shared float16_t Bs[BN * LDA];     // [row][k]
shared float16_t Bs2[MODE == 2u ? BN * LDA : 8u];
shared float Cs[BM * BN];          // epilogue staging [token][row]
shared uint xrow[BM], yrow[BM];

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
        uint T = P.p[1];
        mat = z;
        start = gl_WorkGroupID.y * BM;
        if (start >= T)
            return;
        cnt = min(BM, T - start);
    }
    for (uint i = tid; i < BM; i += WGS) {
        uint r = LIST == 1u ? (i < cnt ? L.pair[start + i] : 0u) : start + i;
        xrow[i] = LIST == 1u ? r / pc.x_div : r;
        yrow[i] = r;
    }
    barrier();

    uint sg = gl_SubgroupID, sm = sg >> 1, sn = sg & 1u;
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c[2][2], c2[2][2];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) {
            c[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
            c2[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
        }
    uint bpr = pc.Kp / blk_of(TYPE), bpr2 = pc.Kp / blk_of(TYPE2);

    for (uint k0 = 0u; k0 < pc.Kp; k0 += BK) {
        for (uint idx = tid; idx < BM * BK / 4u; idx += WGS) {
            uint i = idx / (BK / 4u), kk = 4u * (idx % (BK / 4u)), k = k0 + kk;
            vec4 v = vec4(0.0);
            if (i < cnt) {
                uint b = pc.x_off + xrow[i] * pc.x_stride + z * pc.x_z + k;
                v = vec4(k < pc.K ? X.x[b] : 0.0, k + 1u < pc.K ? X.x[b + 1u] : 0.0,
                         k + 2u < pc.K ? X.x[b + 2u] : 0.0, k + 3u < pc.K ? X.x[b + 3u] : 0.0);
            }
            uint o = i * LDA + kk;
            As[o] = float16_t(v.x);
            As[o + 1u] = float16_t(v.y);
            As[o + 2u] = float16_t(v.z);
            As[o + 3u] = float16_t(v.w);
        }
        for (uint idx = tid; idx < BN * BK / 4u; idx += WGS) {
            uint n = idx / (BK / 4u), kk = 4u * (idx % (BK / 4u)), k = k0 + kk, row = n0 + n;
            bool in_ = row < pc.N && k < pc.Kp;
            uint blk = blk_of(TYPE);
            vec4 w = in_ ? deq4(TYPE, 0u, mat * pc.mblk + row * bpr + k / blk, (k % blk) / 4u, pc.hbase) : vec4(0.0);
            uint o = n * LDA + kk;
            Bs[o] = float16_t(w.x);
            Bs[o + 1u] = float16_t(w.y);
            Bs[o + 2u] = float16_t(w.z);
            Bs[o + 3u] = float16_t(w.w);
            if (MODE == 2u) {
                uint blk2 = blk_of(TYPE2);
                vec4 u = in_ ? deq4(TYPE2, 1u, mat * pc.mblk2 + row * bpr2 + k / blk2, (k % blk2) / 4u, pc.hbase2)
                             : vec4(0.0);
                Bs2[o] = float16_t(u.x);
                Bs2[o + 1u] = float16_t(u.y);
                Bs2[o + 2u] = float16_t(u.z);
                Bs2[o + 3u] = float16_t(u.w);
            }
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2], b[2], b2[2];
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                coopMatLoadNV(a[i], As, (sm * 32u + 16u * i) * LDA + kk, LDA, false);
            [[unroll]] for (uint j = 0u; j < 2u; j++) {
                // B(k, n) = W[n][k]: column-major over the rows' k
                coopMatLoadNV(b[j], Bs, (sn * 32u + 16u * j) * LDA + kk, LDA, true);
                if (MODE == 2u)
                    coopMatLoadNV(b2[j], Bs2, (sn * 32u + 16u * j) * LDA + kk, LDA, true);
            }
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++) {
                    c[i][j] = coopMatMulAddNV(a[i], b[j], c[i][j]);
                    if (MODE == 2u)
                        c2[i][j] = coopMatMulAddNV(a[i], b2[j], c2[i][j]);
                }
        }
        barrier();
    }

    // Epilogue through shared memory: rows of this tile go to their tokens.
    float g[BM * BN / 128u];
    if (MODE == 2u) {
        [[unroll]] for (uint i = 0u; i < 2u; i++)
            [[unroll]] for (uint j = 0u; j < 2u; j++)
                coopMatStoreNV(c[i][j], Cs, (sm * 32u + 16u * i) * BN + sn * 32u + 16u * j, BN, false);
        barrier();
        for (uint e = 0u; e < BM * BN / WGS; e++)
            g[e] = Cs[e * WGS + tid];
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++)
            coopMatStoreNV(MODE == 2u ? c2[i][j] : c[i][j], Cs, (sm * 32u + 16u * i) * BN + sn * 32u + 16u * j, BN,
                           false);
    barrier();
    for (uint e = 0u; e < BM * BN / WGS; e++) {
        uint idx = e * WGS + tid, m = idx / BN, n = n0 + idx % BN;
        if (m >= cnt || n >= pc.N)
            continue;
        uint o = pc.y_off + yrow[m] * pc.y_stride + z * pc.y_z + n;
        float v = Cs[idx];
        if (MODE == 2u)
            v = g[e] / (1.0 + exp(-g[e])) * v;
        Y.y[o] = MODE == 1u ? Y.y[o] + v : v;
    }
}
