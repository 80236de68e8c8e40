#version 450
// attn_fd: decode attention on tensor cores (GL_NV_cooperative_matrix, fp16
// x fp16 -> fp32), MT head tiles of 16 heads in one workgroup, so each cache
// row of the chunk is read once for up to 16 * MT heads (attn.comp reads it
// once per head group of 4); with HG head groups the grid's y takes the
// rest (the engine runs GLM's 20 heads as two groups of one tile: half the
// chain per tile, the rows read twice, from L2 the second time).  Absorbed
// MLA is multi-query attention with one 576-wide key
// ([latent | k_rope]) whose first kv_lora values are also the value, so per
// 32-position tile:
//   S = Q . K^T        (16*MT head rows x 32 positions, K = RS)
//   P = exp(S - m)     (fp16, rows = heads)
//   O += P . V         (16*MT x kv_lora; V = the same rows' latents)
// A chunk of several tiles takes one pass (online softmax): each tile's
// probabilities are taken against the running max of their head row, and O
// is rescaled as that max grows.  A fragment's elements belong to rows the
// implementation chooses, so the row of each element is read off a fragment
// of the same type loaded from a matrix of row numbers (RowId).  It writes the same partials as attn.comp (m, l, o[kv_lora]
// per token, head and chunk; HR head rows per token), which attn_vb combines.
// Roundings: the query is rounded to fp16 (the f16 cache already rounds the
// keys the same way) and so are the probabilities (in [0, 1]); products
// accumulate in fp32.
// Subgroups: 8 of 32.  Scores: subgroup s computes fragment s / KS over its
// K range (KS subgroups per fragment; their planes are summed in the
// softmax; K steps strided over them).  Values: subgroup s owns latent
// columns s*16*NF ... (none where kv_lora is short).
// Rows past the chunk's end inside a tile are masked (p = 0); the cache has
// 32 zeroed rows past its end so those rows' loads stay in bounds and finite.
// Grid: x = chunk, y = head group (HG > 1: each workgroup takes HR of the
// heads and reads the chunk's rows for them; more, shorter workgroups),
// z = query token (causal: token z sees positions < pos0 + z + 1).
// FLAT 1 (a prompt batch, MT 2; gpu/PERF.md run 24): the rows are
// (token, head) pairs instead of one token's heads -- row r of the batch is
// token r / n_head, head r % n_head, workgroup y takes rows y * HR ..
// (grid z 1) -- so no row of a tile is idle (GLM's 20 heads filled two
// tiles of 16 to 62 %) and each cache row read serves HR query rows.  Each
// row has its own causal end; a row with no position in the chunk keeps
// m = -inf, l = 0, O = 0 (the empty partial).  The partials keep their
// layout (PROWS rows per token and chunk), so the combine is unchanged.
// DIRECT 1 (FLAT with one chunk a token, the engine's prompt batch; gpu/
// PERF.md run 29): no partials -- each row's O / l goes straight to its
// latent row at o_off + token * o_z + head * o_h, which v_b's mat-mat
// reads, so the prompt graph has no attn_combine.  The same division the
// combine makes for one chunk (its weight e^(m - m) = 1, so O * (1 / l)).
// The latents may overwrite the workgroup's own query rows (q_abs): each
// (token, head) row belongs to one workgroup, which has read its queries
// into shared memory before it writes.

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : enable
#define PC_USE_ATTN
#include "pc_attn.h"

layout(local_size_x_id = PC_S_WGS) in;                 // 256: eight subgroups of 32
layout(constant_id = FD_S_MT) const uint MT = 2u;     // 16-row head tiles (n_head <= 16 * MT)
layout(constant_id = FD_S_RS) const uint RS = 576u;   // cache row, multiple of 16
layout(constant_id = FD_S_DLAT) const uint DLAT = 512u; // kv_lora, multiple of 16
const uint WGS = 256u, NSG = 8u, TN = 32u;
layout(constant_id = FD_S_HG) const uint HG = 1u;     // head groups (grid y): HR head rows each
layout(constant_id = FD_S_FLAT) const uint FLAT = 0u; // 1: rows are a batch's (token, head) pairs
layout(constant_id = FD_S_PROWS) const uint PROWS = 32u; // FLAT: head rows per token and chunk in the partials
layout(constant_id = FD_S_DIRECT) const uint DIRECT = 0u; // FLAT, one chunk: O / l to the latents (binding O)
const uint HR = 16u * MT;                       // head rows of a workgroup
const uint HRP = FLAT == 1u ? PROWS : HR * HG;  // head rows per (token, chunk) in the partials
const uint KS = NSG / (MT * 2u);                // subgroups per score fragment
const uint RV = RS / 8u;                        // cache row in uvec4 (8 halves)
const uint QLD = RV + 1u;                       // query row stride: 16 bytes of padding spread the banks
const uint KT = RS / 16u;                       // 16-wide K steps of a row
const uint KSTEPS = (KT + KS - 1u) / KS;        // ... per subgroup (k = ks, ks + KS, ...)
const uint NF = (DLAT / 16u + NSG - 1u) / NSG;  // value fragments per subgroup and head tile
const uint PLD = TN / 8u + 1u;                  // probability row stride in uvec4
const uint TPR = WGS / HR;                      // softmax threads per head row
const uint PPT = TN / TPR;                      // positions per softmax thread (2 or 4)

layout(set = 0, binding = ATTN_B_Q_ABS) coherent readonly buffer QAbsBuf { vec4 q_abs[]; } QABS;
layout(set = 0, binding = ATTN_B_CACHE) coherent readonly buffer Cache4 { uvec4 w[]; } C4;
layout(set = 0, binding = ATTN_B_PART) writeonly buffer PartBuf { float part[]; } PT;
layout(set = 0, binding = ATTN_B_PART) writeonly buffer PartBuf4 { uvec4 part[]; } PT4;
layout(set = 0, binding = ATTN_B_PARAMS) readonly buffer Params { uint p[]; } P;
layout(set = 0, binding = ATTN_B_O) writeonly buffer Lat4 { vec4 o[]; } LAT4;
#include "dep_flag.glsl"

shared uvec4 Ks[(HR > TN ? HR : TN) * QLD]; // queries (fp16 [head][dim]) at the start, then the tile's cache rows
shared float Ss[KS * HR * TN];      // score planes [ks][head][pos]; at the end, O staging
shared uvec4 Ps[HR * PLD];          // probabilities, fp16 [head][pos]
shared float Fs[HR];                // per head row: O's rescale factor for this tile

// Max / sum over the TPR consecutive lanes of a head row (TPR is a
// specialization constant, which clustered operations do not take).
float row_max(float v)
{
    [[unroll]] for (uint d = 1u; d < TPR; d *= 2u)
        v = max(v, subgroupShuffleXor(v, d));
    return v;
}

float row_sum(float v)
{
    [[unroll]] for (uint d = 1u; d < TPR; d *= 2u)
        v += subgroupShuffleXor(v, d);
    return v;
}

// The K-split planes of one score, scaled; -inf past the chunk.
float score(uint row, uint j, uint t0, uint end)
{
    float s = 0.0;
    [[unroll]] for (uint k = 0u; k < KS; k++)
        s += Ss[(k * HR + row) * TN + j];
    return t0 + j < end ? s * pc.kq_scale : -1.0 / 0.0;
}

// The tile's cache rows: KN 16-byte loads per thread, all in flight
// (registers), then stored to Ks after the previous tile is done with it.
const uint KN = (TN * RV + WGS - 1u) / WGS;
uvec4 kr[KN];

void tile_fetch(uint cbase, uint t0)
{
    [[unroll]] for (uint u = 0u; u < KN; u++) {
        uint i = gl_LocalInvocationIndex + u * WGS;
        if (i < TN * RV)
            kr[u] = C4.w[cbase + (t0 + i / RV) * RV + i % RV];
    }
}

void tile_store()
{
    [[unroll]] for (uint u = 0u; u < KN; u++) {
        uint i = gl_LocalInvocationIndex + u * WGS;
        if (i < TN * RV)
            Ks[(i / RV) * QLD + i % RV] = kr[u];
    }
}

// S = Q . K^T for the tile in Ks, into the planes (the subgroup's query
// fragments in registers).
void scores(fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[KSTEPS])
{
    uint sg = gl_SubgroupID, f = sg / KS, ks = sg % KS, mt = f / 2u, nt = f % 2u;
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    [[unroll]] for (uint i = 0u; i < KSTEPS; i++) {
        uint k = ks + i * KS;
        if (k >= KT)
            break;  // uniform in the subgroup
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> b;
        coopMatLoadNV(b, Ks, nt * 16u * QLD + 2u * k, QLD, true);
        acc = coopMatMulAddNV(a[i], b, acc);
    }
    coopMatStoreNV(acc, Ss, (ks * HR + mt * 16u) * TN + nt * 16u, TN, false);
}

// Row i of the workgroup: its token and head; false past the heads or the
// batch.  FLAT: flat (token, head) pairs from r0; else token z, heads hg0 ..
bool row_at(uint i, uint z, uint hg0, uint r0, uint ntok, out uint tok, out uint head)
{
    if (FLAT == 1u) {
        uint r = r0 + i;
        tok = r / pc.n_head;
        head = r % pc.n_head;
        return tok < ntok;
    }
    tok = z;
    head = hg0 + i;
    return head < pc.n_head;
}

void attn()
{
    uint c = gl_WorkGroupID.x, z = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
    uint ntok = P.p[VKP_NTOK];
    uint hg0 = FLAT == 1u ? 0u : gl_WorkGroupID.y * HR;  // the group's first head
    uint r0 = FLAT == 1u ? gl_WorkGroupID.y * HR : 0u;   // FLAT: its first (token, head) row
    if (FLAT == 0u && z >= ntok)
        return;  // past the batch
    if (FLAT == 1u && r0 >= ntok * pc.n_head)
        return;
    // the workgroup's last token sees the most positions
    uint zl = FLAT == 1u ? min((r0 + HR - 1u) / pc.n_head, ntok - 1u) : z;
    uint n_kv = P.p[VKP_POS0] + zl + 1u, clen = P.p[pc.chunk_word];
    uint start = c * clen, end = min(start + clen, n_kv);
    uint pstride = pc.dlat + VK_PART_HDR;
    uint row = tid / TPR, j0 = (tid % TPR) * PPT;
    uint rtok, rhead;
    bool lead = row_at(row, z, hg0, r0, ntok, rtok, rhead) && tid % TPR == 0u;
    // this thread's row's causal end (FLAT: its own token's)
    uint rend = FLAT == 1u ? min(end, P.p[VKP_POS0] + rtok + 1u) : end;
    // partials of HRP head rows per token and chunk (vk_attn_part_heads)
    uint pb = pc.part_off + ((rtok * pc.cmax_chunks + c) * HRP + rhead) * pstride;

    // Decode waiting on k_b || kv_store (dep_flag.glsl): the first tile's
    // loads go out before the wait where it holds no row the step waited on
    // writes: this token's, and in a verify column the early_lag columns'
    // before it (their rows just below this position).
    uint cbase = pc.cache_off / 8u;
    bool early = WAIT == 1u && start + TN + pc.early_lag <= P.p[VKP_POS0];
    if (early)
        tile_fetch(cbase, start);
    if (WAIT == 1u)
        dep_wait(pc.dep_wait, DEP_WANT(pc.dep_n));

    if (start >= end) {
        // Past this token's causal limit: an empty partial (DIRECT has one
        // chunk, which every row reaches into: never here).
        if (DIRECT == 1u)
            return;
        for (uint h = 0u; h < HR; h++) {
            uint et, eh;
            if (!row_at(h, z, hg0, r0, ntok, et, eh))
                continue;
            uint eb = pc.part_off + ((et * pc.cmax_chunks + c) * HRP + eh) * pstride;
            for (uint i = tid; i < pstride; i += WGS)
                PT.part[eb + i] = i == 0u ? -1.0 / 0.0 : 0.0;
        }
        return;
    }

    // The queries in fp16 (saturated at fp16's range), rows past n_head
    // zero, into Ks; each subgroup keeps the fragments of its K range.
    const uint QN = (HR * RV + WGS - 1u) / WGS;
    [[unroll]] for (uint u = 0u; u < QN; u++) {
        uint i = tid + u * WGS;
        uint h = i / RV, v = i % RV, qt, qh;
        if (i < HR * RV) {
            uvec4 w = uvec4(0u);
            if (row_at(h, z, hg0, r0, ntok, qt, qh)) {
                uint b = (pc.q_abs_off + qt * pc.q_abs_z + qh * RS) / 4u + 2u * v;
                vec4 x0 = clamp(QABS.q_abs[b], -65504.0, 65504.0), x1 = clamp(QABS.q_abs[b + 1u], -65504.0, 65504.0);
                w = uvec4(packHalf2x16(x0.xy), packHalf2x16(x0.zw), packHalf2x16(x1.xy), packHalf2x16(x1.zw));
            }
            Ks[h * QLD + v] = w;
        }
    }
    if (!early)
        tile_fetch(cbase, start);
    // (a 16 x 16 matrix of row numbers for RowId, in Ss until the scores)
    Ss[tid] = float(tid / 16u);
    barrier();
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> qf[KSTEPS];
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> row_id;
    {
        uint sg = gl_SubgroupID, mt = (sg / KS) / 2u, ks = sg % KS;
        [[unroll]] for (uint i = 0u; i < KSTEPS; i++)
            if (ks + i * KS < KT)
                coopMatLoadNV(qf[i], Ks, mt * 16u * QLD + 2u * (ks + i * KS), QLD, false);
        coopMatLoadNV(row_id, Ss, 0u, 16u, false);
    }
    barrier();

    uint ntiles = (end - start + TN - 1u) / TN;
    float m = -1.0 / 0.0, l = 0.0;
    // Probabilities against the running max, O += P . V.
    uint sg = gl_SubgroupID, n0 = sg * NF * 16u;
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> o[MT][NF];
    [[unroll]] for (uint mt = 0u; mt < MT; mt++)
        [[unroll]] for (uint f = 0u; f < NF; f++)
            o[mt][f] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    for (uint t = 0u; t < ntiles; t++) {
        uint t0 = start + t * TN;
        barrier();  // every subgroup is done with the previous tile's rows
        tile_store();
        barrier();
        if (t + 1u < ntiles)
            tile_fetch(cbase, t0 + TN);
        scores(qf);
        barrier();
        float s[PPT];
        float mx = -1.0 / 0.0;
        [[unroll]] for (uint i = 0u; i < PPT; i++) {
            s[i] = score(row, j0 + i, t0, rend);
            mx = max(mx, s[i]);
        }
        // the running max of the row; O and l scaled down where it grew
        // (exp(-inf) = 0 on the first tile: O and l are still zero)
        float mn = max(m, row_max(mx));
        // FLAT: a row with no position yet (mn = -inf) takes p = 0 and
        // keeps O and l at 0 (exp(-inf - -inf) would be NaN)
        float ms = FLAT == 1u && isinf(mn) ? 0.0 : mn, fac = exp(m - ms);
        m = mn;
        if (tid % TPR == 0u)
            Fs[row] = fac;
        float ls = 0.0;
        uint pk[PPT / 2u];
        [[unroll]] for (uint i = 0u; i < PPT; i += 2u) {
            // rounded to fp16 before summing, so l weighs what O does
            vec2 e = unpackHalf2x16(packHalf2x16(vec2(exp(s[i] - ms), exp(s[i + 1u] - ms))));
            ls += e.x + e.y;
            pk[i / 2u] = packHalf2x16(e);
        }
        l = l * fac + row_sum(ls);
        uint pi = row * PLD + j0 / 8u, pc0 = (j0 % 8u) / 2u;
        [[unroll]] for (uint i = 0u; i < PPT / 2u; i++)
            Ps[pi][pc0 + i] = pk[i];
        barrier();
        if (t > 0u) {
            [[unroll]] for (uint mt = 0u; mt < MT; mt++)
                [[unroll]] for (uint f = 0u; f < NF; f++)
                    if (n0 + f * 16u < DLAT)
                        for (int i = 0; i < o[mt][f].length(); i++)
                            o[mt][f][i] *= Fs[mt * 16u + uint(row_id[i])];
        }
        [[unroll]] for (uint kk = 0u; kk < TN / 16u; kk++) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[MT], b[NF];
            [[unroll]] for (uint f = 0u; f < NF; f++)
                if (n0 + f * 16u < DLAT)
                    coopMatLoadNV(b[f], Ks, kk * 16u * QLD + (n0 + f * 16u) / 8u, QLD, false);
            [[unroll]] for (uint mt = 0u; mt < MT; mt++)
                coopMatLoadNV(a[mt], Ps, mt * 16u * PLD + 2u * kk, PLD, false);
            [[unroll]] for (uint mt = 0u; mt < MT; mt++)
                [[unroll]] for (uint f = 0u; f < NF; f++)
                    if (n0 + f * 16u < DLAT)
                        o[mt][f] = coopMatMulAddNV(a[mt], b[f], o[mt][f]);
        }
    }

    if (lead && DIRECT == 0u) {
        PT.part[pb] = m;
        PT.part[pb + 1u] = l;
    }
    if (DIRECT == 1u) {
        // each row's 1 / l for the stores below (Fs: every subgroup is
        // done with the last tile's rescale after this barrier)
        barrier();
        if (tid % TPR == 0u)
            Fs[row] = 1.0 / l;
    }
    // O to the partials through shared memory, a head tile at a time:
    // fragments into the free tile space, then 16-byte stores, a warp
    // writing whole 128-byte lines (rows are 128-byte aligned).  Fragments
    // stored straight to global memory write 32-byte pieces of 8 rows per
    // instruction, which was slower, and so were scalar stores from the
    // staging (gpu/PERF.md run 14).
    const uint RQ = DLAT / 4u;   // a latent row in 16-byte words
    [[unroll]] for (uint mt = 0u; mt < MT; mt++) {
        barrier();
        [[unroll]] for (uint f = 0u; f < NF; f++)
            if (n0 + f * 16u < DLAT)
                coopMatStoreNV(o[mt][f], Ks, (n0 + f * 16u) / 4u, RQ, false);
        barrier();
        const uint SN = (16u * RQ + WGS - 1u) / WGS;
        [[unroll]] for (uint u = 0u; u < SN; u++) {
            uint i = tid + u * WGS, h = mt * 16u + i / RQ, ot, oh;
            if (DIRECT == 1u) {
                if (i < 16u * RQ && row_at(h, z, hg0, r0, ntok, ot, oh))
                    LAT4.o[(pc.o_off + ot * pc.o_z + oh * pc.o_h) / 4u + i % RQ] = uintBitsToFloat(Ks[i]) * Fs[h];
            } else if (i < 16u * RQ && row_at(h, z, hg0, r0, ntok, ot, oh))
                PT4.part[(pc.part_off + ((ot * pc.cmax_chunks + c) * HRP + oh) * pstride + VK_PART_HDR) / 4u + i % RQ] = Ks[i];
        }
    }
}

void main()
{
    attn();
    if (SIGNAL == 1u)
        dep_signal(pc.dep_signal);
}
