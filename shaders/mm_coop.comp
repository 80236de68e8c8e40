#version 450
// mm_coop: the prefill matrix-matrix product on tensor cores
// (GL_NV_cooperative_matrix, fp16 x fp16 -> fp32), same contract as mm.comp
// (modes, expert work lists, batched heads, token / row strides).
//
// A workgroup of 8 subgroups computes BN = 128 weight rows x BM tokens
// (64, or 32 for the routed experts' work lists, whose tiles hold ~32
// pairs).  Subgroup s covers tokens (s / 4) * BM/2 .. and rows (s % 4) * 32 ..
// as FM x 2 fragments of 16 x 16 (FM = BM / 32).  K advances BK (32 or 64)
// at a time (vk_k_mm: 64 for a batch's tiles, 32 for the expert work
// lists, gpu/PERF.md run 23), two barriers a step (operands stored | MMAs done):
//   - each thread owns SEGS 16-element segments of one weight row per step
//     (one or two 16-byte loads of the block body and its scale words each,
//     w_fetch) and SEGS x 8 activations of one token; it converts them to
//     fp16 (w_convert) and stores them packed, 8 halves per 16-byte store;
//   - the next step's global loads go into registers before this step's
//     MMAs, so their latency hides behind the tensor-core work;
//   - the epilogue goes from the accumulators through a 16 x 16 staging
//     area per subgroup (in Bs, dead after the K loop) to the output rows
//     (store / add / silu(gate) * up).
// Why a step of 64 for a batch: a step's time is mostly the latency of its
// global loads (issued one step ahead) and its two barriers, not its MMAs;
// a step of 64 pays that once per 64 elements of K, with twice the bytes in
// flight per thread.  (Two shared stages of 32 would save a barrier a step
// but keep a load latency per 32 elements.)  Its tiles are twice as large
// (46 KiB for gate/up with 64 tokens, which is why the staging area lives in
// Bs), so an SM holds fewer workgroups: the expert lists, whose grids are
// far larger than what an SM holds, keep steps of 32.
// Operands are rounded to fp16 (11 significant bits); products accumulate
// in fp32.  Used for quantized weights only (F32 models keep the fp32
// kernel for their 1e-4 criterion).
// XSPLIT 1 (the prefill's batched-head k_b / v_b, whose fp16-rounded
// activations tip a near tie in a fixture, gpu/PERF.md run 12): each
// activation goes in as an fp16 pair, hi = x to 11 bits and lo = fp16(2^11 (x - hi)),
// multiplied by the same weight fragment into two accumulators, the second
// scaled back by 2^-11 in the epilogue: the activation is then within
// ~2^-22 of itself (not 2^-11), and the 2^11 scale keeps lo out of fp16's
// subnormals (which a device may flush) for |x| >= 2^-25.  Twice the
// activation MMAs and shared stores; weights stay rounded to fp16.

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle_relative : require

#define PC_USE_MM
#include "pc_prefill.h"
layout(local_size_x_id = PC_S_WGS) in;                 // 256: eight subgroups of 32
WEIGHT_TYPE(MM_S_TYPE, TYPE);
WEIGHT_TYPE(MM_S_TYPE2, TYPE2);
layout(constant_id = MM_S_BM) const uint BM = 64u;    // tokens per tile: 64 or 32
layout(constant_id = MM_S_MODE) const uint MODE = 0u;   // 0 store, 1 add, 2 silu(W.X) * (W2.X)
layout(constant_id = MM_S_LIST) const uint LIST = 0u;
layout(constant_id = MM_S_XSPLIT) const uint XSPLIT = 0u; // 1: activations as hi + lo fp16 pairs
layout(constant_id = MM_S_BK) const uint BK = 32u;    // K per step: 32 or 64
layout(constant_id = MM_S_XF16) const uint XF16 = 0u; // 1: X is x's fp16 twin (below)
layout(constant_id = MM_S_YF16) const uint YF16 = 0u; // 1: y's fp16 twin too (the epilogue)
const uint WGS = 256u;
const uint BN = MM_COOP_BN;
const uint LDV = MM_COOP_LDV(BK);               // a tile row in uvec4 (8 halves), padded (pc_prefill.h)
const uint FM = BM / 32u;                       // token fragments per subgroup
const uint SEGS = BK / 32u;                     // a thread's weight segments (16) and activation groups (8) a step

#include "quant.glsl"
#define IQ_T1 TYPE
#define IQ_T2 TYPE2
#include "quant_iq.glsl"

layout(set = 0, binding = MM_B_X) readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = MM_B_X) readonly buffer XBuf4 { vec4 x[]; } X4;
// XF16: x already in fp16, as x_pack would make it (written by its producer
// beside the fp32 rows, the same element layout): loaded and stored as is
layout(set = 0, binding = MM_B_X) readonly buffer XBufH { uint x[]; } XH;
layout(set = 0, binding = MM_B_X) readonly buffer XBufH4 { uvec4 x[]; } XH4;
layout(set = 0, binding = MM_B_Y) buffer YBuf { float y[]; } Y;
layout(set = 0, binding = MM_B_LIST) readonly buffer ListBuf { uint pair[]; } L;
layout(set = 0, binding = MM_B_TILES) readonly buffer TileBuf { uvec4 t[]; } TL;
layout(set = 0, binding = MM_B_PARAMS) readonly buffer Params { uint p[]; } P;
// YF16 (stores and gate/up): y also as the next mat-mat's x_pack would make
// it (clamped to +-65504, to nearest), a pair of neighbours a word
layout(set = 0, binding = MM_B_Y16) writeonly buffer Y16Buf { uint h[]; } YH;

shared uvec4 As[MM_COOP_A_VECS(BM, BK)];        // [token][k] fp16
shared uvec4 As2[XSPLIT == 1u ? MM_COOP_A_VECS(BM, BK) : 1u]; // XSPLIT: the lo halves, x 2^11
shared uvec4 Bs[MM_COOP_B_VECS(BK)];            // [row][k] fp16; after the K loop, the epilogue's staging
shared uvec4 Bs2[MODE == 2u ? MM_COOP_B_VECS(BK) : 1u];
shared uint xrow[BM], yrow[BM];

// ---- weights: thread -> row tid / 2 (mm_weights.glsl); BK 32: segment tid & 1
// of the step's 32 elements; BK 64: both segments of its 32-element group tid & 1 ----
// Registers hold a step's raw words between its global loads and its shared
// stores (w_fetch); w_convert turns them into 16 fp16 values after the MMAs
// that hide the loads, exact up to one final rounding to fp16: Q4_0, Q5_0
// and Q8_0 in fp16 ((code - off) is exact, times the fp16 scale one
// rounding), F16 as it is, the others through w_values (fp32) and packed
// (their decoding in fp16 -- three roundings -- was 3-4 % faster and tipped
// a fixture's near tie: gpu/PERF.md run 20, Removed experiments).
#include "mm_weights.glsl"

// Bytes of n (each < 256) -> two words of two fp16 d * (q - base): 0x6400 | q
// is the fp16 1024 + q, exactly.
uvec2 q_pairs(uint n, float16_t d, float16_t base)
{
    uint a = (n & 0xffu) | ((n & 0xff00u) << 8), b = ((n >> 16) & 0xffu) | ((n >> 8) & 0xff0000u);
    f16vec2 fa = (unpackFloat2x16(a | 0x64006400u) - f16vec2(base)) * d;
    f16vec2 fb = (unpackFloat2x16(b | 0x64006400u) - f16vec2(base)) * d;
    return uvec2(packFloat2x16(fa), packFloat2x16(fb));
}

// The 16 fp16 values of segment h of a row's 32-element group (rb: the
// row's first block, k0: the group's first element), as two 16-byte words.
void w_convert(uint t, uint rb, uint k0, uint h, inout WRaw r)
{
    if (t == T_F16)
        return;
    if (t == T_Q4_0 || t == T_Q5_0 || t == T_Q8_0) {
        uvec4 n = w_codes(t, k0, h, r);
        float16_t d = float16_t(w_affine(t, rb, k0, h, r).x);
        float16_t base = float16_t(t == T_Q4_0 ? 1032.0 : t == T_Q5_0 ? 1040.0 : 1152.0);
        r.lo = uvec4(q_pairs(n.x, d, base), q_pairs(n.y, d, base));
        r.hi = uvec4(q_pairs(n.z, d, base), q_pairs(n.w, d, base));
        return;
    }
    vec4 v[4];
    w_values(t, rb, k0, h, r, v);
    r.lo = uvec4(packHalf2x16(v[0].xy), packHalf2x16(v[0].zw), packHalf2x16(v[1].xy), packHalf2x16(v[1].zw));
    r.hi = uvec4(packHalf2x16(v[2].xy), packHalf2x16(v[2].zw), packHalf2x16(v[3].xy), packHalf2x16(v[3].zw));
}

// ---- activations: thread -> token tid / 4, elements k0 + 8 SEGS (tid % 4) + 0.. 8 SEGS - 1 ----
struct XRaw {
    vec4 a, b, c, d;    // c, d: BK 64's second group of 8
    uvec4 h0, h1;       // XF16: the groups of 8 as packed halves
};

XRaw x_fetch(uint cnt, uint z, uint k0)
{
    XRaw r;
    r.a = r.b = r.c = r.d = vec4(0.0);
    r.h0 = r.h1 = uvec4(0u);
    uint tid = gl_LocalInvocationIndex, i = tid / 4u, k = k0 + 8u * SEGS * (tid % 4u);
    if (i >= cnt)
        return r;
    uint o = pc.x_off + xrow[i] * pc.x_stride + z * pc.x_z + k;
    if (XF16 == 1u) {
        if ((o & 7u) == 0u && k + 8u * SEGS <= pc.K) {
            r.h0 = XH4.x[o >> 3];
            if (SEGS == 2u)
                r.h1 = XH4.x[(o >> 3) + 1u];
            return r;
        }
        uint hv[16];  // the row's tail: halves one by one, zeros past K
        [[unroll]] for (uint e = 0u; e < 16u; e++)
            hv[e] = e < 8u * SEGS && k + e < pc.K ? (XH.x[(o + e) >> 1] >> (16u * ((o + e) & 1u))) & 0xffffu : 0u;
        r.h0 = uvec4(hv[0] | (hv[1] << 16), hv[2] | (hv[3] << 16), hv[4] | (hv[5] << 16), hv[6] | (hv[7] << 16));
        r.h1 = uvec4(hv[8] | (hv[9] << 16), hv[10] | (hv[11] << 16), hv[12] | (hv[13] << 16), hv[14] | (hv[15] << 16));
        return r;
    }
    if ((o & 3u) == 0u && k + 8u * SEGS <= pc.K) {
        r.a = X4.x[o >> 2];     // the model's strides: 16-byte loads
        r.b = X4.x[(o >> 2) + 1u];
        if (SEGS == 2u) {
            r.c = X4.x[(o >> 2) + 2u];
            r.d = X4.x[(o >> 2) + 3u];
        }
        return r;
    }
    // any stride, the row's tail: scalar loads
    float v[16];
    [[unroll]] for (uint e = 0u; e < 16u; e++)
        v[e] = e < 8u * SEGS && k + e < pc.K ? X.x[o + e] : 0.0;
    r.a = vec4(v[0], v[1], v[2], v[3]);
    r.b = vec4(v[4], v[5], v[6], v[7]);
    r.c = vec4(v[8], v[9], v[10], v[11]);
    r.d = vec4(v[12], v[13], v[14], v[15]);
    return r;
}

// Activations beyond fp16's range saturate at +-65504 instead of becoming
// inf (one inf turns its whole output row into inf / NaN, and the NaN then
// spreads through the model); exact values need --tune coopmat=0.
const float FMAX = 65504.0;

// 8 activations as 8 packed halves
uvec4 x_pack(vec4 a, vec4 b)
{
    a = clamp(a, vec4(-FMAX), vec4(FMAX));
    b = clamp(b, vec4(-FMAX), vec4(FMAX));
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

// XSPLIT: hi is x rounded to 11 significant bits by integer operations on
// its fp32 bits (ties away from zero), so fp16 holds it exactly and it is
// exactly the value stored; 0 below fp16's normal range (lo then carries
// x).  lo = 2^11 (x - hi) is exact in fp32 and about as large as x; only
// its fp16 rounding is left.  (Deriving hi from the packed fp16 through
// unpackHalf2x16 instead gave lo = 0 on the H200, as if the round trip
// were folded away: gpu/PERF.md run 12.)
void x_split(vec4 v, out uvec2 hi, out uvec2 lo)
{
    v = clamp(v, vec4(-FMAX), vec4(FMAX));
    vec4 h = uintBitsToFloat((floatBitsToUint(v) + 0x1000u) & 0xffffe000u);
    h = mix(h, vec4(0.0), lessThan(abs(v), vec4(6.103515625e-05)));   // 2^-14
    vec4 l = (v - h) * 2048.0;
    hi = uvec2(packHalf2x16(h.xy), packHalf2x16(h.zw));
    lo = uvec2(packHalf2x16(l.xy), packHalf2x16(l.zw));
}

// Whether the group at k0 of a row starting at block rb needs its scale
// words loaded, or has them from this thread's previous step: the
// K-quants' head (Q6_K: its d word) serves a block of 256, 8 steps of 32
// (4 of 64); Q4_0 / Q8_0's head word two blocks of 32 -- with steps of
// 32, the odd block of a pair follows the even one in the same thread.
// The words are in registers across the step either way; what this saves
// is load instructions and L1 requests (a K-quant step's weight loads a
// thread: Q4_K 2 -> ~1.1, Q5_K 3 -> ~2.1), which a step's time depends on
// (gpu/PERF.md run 25: pp512 +3 % on Q5_K_M, +0.9 % on Q8_0).
bool head_fresh(uint t, uint rb, uint k0)
{
    if (k0 < BK)
        return true;
    if (is_k_type(t))
        return k0 % 256u < BK;
    if (t == T_Q4_0 || t == T_Q8_0)
        return BK != 32u || ((rb + k0 / 32u) & 1u) == 0u;
    return true;
}

// This step's weights of this thread into registers: segment wh of the
// group at k0 + wk (BK 64: both segments, r0 and r1; the second shares the
// first's scale words, w_fetch_second).
void w_fetch_step(uint t, uint s, uint rb, uint hbase, bool row_in, uint k, uint wh, inout WRaw r0, inout WRaw r1)
{
    r0 = w_fetch(t, s, rb, hbase, row_in, k, wh, r0.hd, head_fresh(t, rb, k));
    if (SEGS == 2u)
        r1 = w_fetch_second(t, s, rb, hbase, row_in, k, r0);
}

// 8 activations into As (and As2) at uvec4 o
void x_store(uint o, vec4 a, vec4 b)
{
    if (XSPLIT == 1u) {
        uvec2 ha, la, hb, lb;
        x_split(a, ha, la);
        x_split(b, hb, lb);
        As[o] = uvec4(ha, hb);
        As2[o] = uvec4(la, lb);
    } else {
        As[o] = x_pack(a, b);
    }
}

// Element i of this subgroup's 16 x 16 fp32 staging area at uvec4 cs of Bs
float staged(uint cs, uint i)
{
    return uintBitsToFloat(Bs[cs + i / 4u][i % 4u]);
}

void main()
{
    uint tid = gl_LocalInvocationIndex;
    uint n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    if (n0 >= pc.N)
        return;  // an indirect grid cut for narrower tiles
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

    // this thread's loads: weight row wn, its group at k0 + wk, segment wh
    // (BK 64: 0 and 1); activations of token tid / 4
    uint wn = tid >> 1, row = n0 + wn;
    bool row_in = row < pc.N;
    uint rb = mat * pc.mblk + row * (pc.Kp / blk_of(TYPE));
    uint rb2 = mat * pc.mblk2 + row * (pc.Kp / blk_of(TYPE2));
    uint wk = SEGS == 2u ? 32u * (tid & 1u) : 0u, wh = SEGS == 2u ? 0u : tid & 1u;
    bool x_thr = tid < BM * 4u;
    uint wo = wn * LDV + wk / 8u + 2u * wh, xo = (tid / 4u) * LDV + SEGS * (tid % 4u);

    // this subgroup's fragments
    uint sg = gl_SubgroupID, tm0 = (sg >> 2) * (BM / 2u), tn0 = (sg & 3u) * 32u;
    // c2: MODE 2's up products, or XSPLIT's lo products (x 2^11)
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c[FM][2], c2[FM][2];
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) {
            c[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
            if (MODE == 2u || XSPLIT == 1u)
                c2[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
        }

    WRaw zero = WRaw(uvec4(0u), uvec4(0u), uvec4(0u)), wr0 = zero, wr1 = zero, ur0 = zero, ur1 = zero;
    w_fetch_step(TYPE, 0u, rb, pc.hbase, row_in, wk, wh, wr0, wr1);
    if (MODE == 2u)
        w_fetch_step(TYPE2, 1u, rb2, pc.hbase2, row_in, wk, wh, ur0, ur1);
    XRaw xr;
    if (x_thr)
        xr = x_fetch(cnt, z, 0u);

    for (uint k0 = 0u; k0 < pc.Kp; k0 += BK) {
        // this step's operands into shared memory, packed
        w_convert(TYPE, rb, k0 + wk, wh, wr0);
        Bs[wo] = wr0.lo;
        Bs[wo + 1u] = wr0.hi;
        if (SEGS == 2u) {
            w_convert(TYPE, rb, k0 + wk, 1u, wr1);
            Bs[wo + 2u] = wr1.lo;
            Bs[wo + 3u] = wr1.hi;
        }
        if (MODE == 2u) {
            w_convert(TYPE2, rb2, k0 + wk, wh, ur0);
            Bs2[wo] = ur0.lo;
            Bs2[wo + 1u] = ur0.hi;
            if (SEGS == 2u) {
                w_convert(TYPE2, rb2, k0 + wk, 1u, ur1);
                Bs2[wo + 2u] = ur1.lo;
                Bs2[wo + 3u] = ur1.hi;
            }
        }
        if (x_thr && XF16 == 1u) {
            As[xo] = xr.h0;
            if (SEGS == 2u)
                As[xo + 1u] = xr.h1;
        } else if (x_thr) {
            x_store(xo, xr.a, xr.b);
            if (SEGS == 2u)
                x_store(xo + 1u, xr.c, xr.d);
        }
        barrier();
        // the next step's loads, in flight during this step's MMAs
        uint k1 = k0 + BK;
        if (k1 < pc.Kp) {
            w_fetch_step(TYPE, 0u, rb, pc.hbase, row_in, k1 + wk, wh, wr0, wr1);
            if (MODE == 2u)
                w_fetch_step(TYPE2, 1u, rb2, pc.hbase2, row_in, k1 + wk, wh, ur0, ur1);
            if (x_thr)
                xr = x_fetch(cnt, z, k1);
        }
        [[unroll]] for (uint kk = 0u; kk < BK / 8u; kk += 2u) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[FM], a2[FM], b[2], b2[2];
            [[unroll]] for (uint i = 0u; i < FM; i++) {
                coopMatLoadNV(a[i], As, (tm0 + 16u * i) * LDV + kk, LDV, false);
                if (XSPLIT == 1u)
                    coopMatLoadNV(a2[i], As2, (tm0 + 16u * i) * LDV + kk, LDV, false);
            }
            [[unroll]] for (uint j = 0u; j < 2u; j++) {
                // B(k, n) = W[n][k]: column-major over the rows' k
                coopMatLoadNV(b[j], Bs, (tn0 + 16u * j) * LDV + kk, LDV, true);
                if (MODE == 2u)
                    coopMatLoadNV(b2[j], Bs2, (tn0 + 16u * j) * LDV + kk, LDV, true);
            }
            [[unroll]] for (uint i = 0u; i < FM; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++) {
                    c[i][j] = coopMatMulAddNV(a[i], b[j], c[i][j]);
                    if (MODE == 2u)
                        c2[i][j] = coopMatMulAddNV(a[i], b2[j], c2[i][j]);
                    if (XSPLIT == 1u)
                        c2[i][j] = coopMatMulAddNV(a2[i], b[j], c2[i][j]);
                }
        }
        barrier();
    }

    // Epilogue: each 16 x 16 fragment through this subgroup's staging area
    // (64 uvec4 of Bs: every subgroup is past the K loop's last barrier, so
    // the tiles are dead), then 8 values per lane to their (token, row) places.
    uint lane = gl_SubgroupInvocationID, cs = sg * (MM_COOP_STAGE_VECS / 8u);
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) {
            // g: MODE 2's gate products, or XSPLIT's lo products (added
            // here: glslc's optimizer crashes on a matrix sum before the store)
            float g[8];
            if (MODE == 2u || XSPLIT == 1u) {
                coopMatStoreNV(MODE == 2u ? c[i][j] : c2[i][j], Bs, cs, 4u, false);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                [[unroll]] for (uint e = 0u; e < 8u; e++)
                    g[e] = staged(cs, lane + 32u * e);
                subgroupBarrier();
            }
            coopMatStoreNV(MODE == 2u ? c2[i][j] : c[i][j], Bs, cs, 4u, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                uint idx = lane + 32u * e, m = tm0 + 16u * i + idx / 16u, n = n0 + tn0 + 16u * j + idx % 16u;
                float v = staged(cs, idx);
                if (MODE == 2u)
                    v = g[e] / (1.0 + exp(-g[e])) * v;
                if (XSPLIT == 1u)
                    v += g[e] * (1.0 / 2048.0);
                bool inr = m < cnt && n < pc.N;
                uint o = pc.y_off + yrow[m] * pc.y_stride + z * pc.y_z + n;
                if (inr)
                    Y.y[o] = MODE == 1u ? Y.y[o] + v : v;
                if (YF16 == 1u) {
                    // lane + 1 holds row n + 1 of the same token (n even here:
                    // the host keeps offsets, strides and N multiples of 8)
                    float vn = subgroupShuffleDown(v, 1u);
                    if (inr && (lane & 1u) == 0u)
                        YH.h[o >> 1] = packHalf2x16(clamp(vec2(v, vn), vec2(-65504.0), vec2(65504.0)));
                }
            }
            subgroupBarrier();
        }
}
