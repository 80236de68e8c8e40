#version 450
// sample_select: the kept tokens and the draw over the whole vocabulary,
// when sample_pick's candidates cannot hold them (a flat distribution).
// Two selections s, each "the first token of the order whose running
// weight, among the tokens within a bound, reaches a target":
//   s = 0  the top-k bound (unit weights, target top_k; over everything)
//   s = 1  the top-p cut (weight m, target max(1, Z * P / 2^32), Z the
//          total; within C)
// and the draw, s = 2 (weight r, target U + 1, U = S * u / 2^32, S the
// total, within the kept bound -- C, the cut, min-p, at least the first --
// over the kept tokens in id order: sample_draw.glsl).
// (Inactive selections -- answered by sample_pick from the candidates, or
// off -- return at once.)
// Each selection is a radix select on the order key, most significant byte
// first: passes 0-3 add the weights of the tokens that match the key bytes
// found so far into 256 bins of the next byte (per workgroup in shared
// memory, then 64-bit atomic adds into the global bins); each pass starts
// by finding, from the previous pass's bins, the bin the target falls in (a
// prefix sum over the 256 bins, redundantly in every workgroup).  After
// four bytes the key is exact; the tokens on it share one weight, so the
// crossing one is the ceil((target - weight before) / weight) - 1'th of
// them by id: pass 4 counts them per block of ids, and the last of its
// workgroups to finish (atomic counter) finds the block and the token.
// The draw is one pass: every workgroup sums its slice's kept weight, the
// last to finish finds the slice and the token in it.  Every program that
// samples goes on after sample_pick with the passes of selection 1 and the
// draw on grids sample_pick sets (empty unless it asked for them); where a
// top-k bound has to be found too, the host runs a program of all three on
// the whole grid instead.  The draw's last workgroup zeroes the bins for
// the next run (the engine zeroes them once at start).
// Integer weights make every sum exact in any order (sample_common.glsl).

#define PC_USE_SAMPLE_SELECT
#include "pc_sample.h"
#include "sample_common.glsl"

layout(local_size_x_id = PC_S_WGS) in; // 256: one thread per bin
const uint WGS = gl_WorkGroupSize.x;

layout(set = 0, binding = SSEL_B_LOGITS) readonly buffer LBuf { float l[]; } LG;
layout(set = 0, binding = SSEL_B_HIST) coherent buffer Hist { uint h[]; } H;
layout(set = 0, binding = SSEL_B_STATE) coherent buffer State { uint st[]; } ST;
layout(set = 0, binding = SSEL_B_RESULT) writeonly buffer Res { uint r[]; } RES;
layout(set = 0, binding = SSEL_B_SMP) readonly buffer Smp { uint w[]; } SMP;

#include "sample_draw.glsl"

shared uint sh_lo[256], sh_hi[256];
shared uint sh_cnt[256];
shared uint s_bin;
shared uvec2 s_before;
shared bool s_last;

uint sst(uint w)
{
    return SST_SEL + pc.sel * SST_SEL_WORDS + w;
}

uint hist_word(uint pass, uint bin)
{
    return ((pc.sel * 4u + pass) * 256u + bin) * 2u;
}

uvec2 st64(uint w)
{
    return uvec2(ST.st[w], ST.st[w + 1u]);
}

// The tokens this selection looks at: (key, id) <= (bk, bid).
void bound_of(out uint bk, out uint bid)
{
    bk = KEY_NONE;
    bid = KEY_NONE;
    if (pc.sel == 0u)
        return;
    bk = ST.st[SST_SEL + SSS_RES_KEY];
    bid = ST.st[SST_SEL + SSS_RES_ID];
    if (pc.sel == 1u)
        return;
    uint pk = ST.st[SST_SEL + SST_SEL_WORDS + SSS_RES_KEY], pid = ST.st[SST_SEL + SST_SEL_WORDS + SSS_RES_ID];
    if (within(pk, pid, bk, bid)) {
        bk = pk;
        bid = pid;
    }
    uint mk = ST.st[SST_MINP_KEY];
    if (within(mk, KEY_NONE, bk, bid)) {
        bk = mk;
        bid = KEY_NONE;
    }
    uint fk = ST.st[SST_FIRST_KEY], fid = ST.st[SST_FIRST_ID];
    if (!within(fk, fid, bk, bid)) {
        bk = fk;
        bid = fid;
    }
}

uint weight_of(float l, float mx)
{
    return pc.sel == 0u ? 1u : sk_weight(l, mx, 1.0);
}

uvec2 target_of(uvec2 total)
{
    if (pc.sel == 0u)
        return uvec2(SMP.w[SMP_TOPK], 0u);
    uvec2 t = mulhi64(total, SMP.w[SMP_TOPP]);
    return (t.x | t.y) == 0u ? uvec2(1u, 0u) : t;
}

// From pass p-1's bins: the key bits found so far (pfx) and the weight of
// the tokens before them (before); the target (computed at p = 1 from the
// total).  Every workgroup computes the same; workgroup 0 records them.
void resolve(uint p, out uint pfx, out uvec2 before, out uvec2 tgt)
{
    uint tid = gl_LocalInvocationIndex;
    uint hw = hist_word(p - 1u, tid);
    uvec2 h = uvec2(H.h[hw], H.h[hw + 1u]);
    uvec2 total = sd_running(h);
    uint pfx0 = p == 1u ? 0u : ST.st[sst(SSS_PFX + p - 1u)];
    uvec2 before0 = p == 1u ? uvec2(0u) : st64(sst(SSS_CUM + 2u * (p - 1u)));
    tgt = p == 1u ? target_of(total) : st64(sst(SSS_TGT));
    uvec2 in_bins;
    uint bin = sd_reaching(h, sub64(tgt, before0), in_bins);
    pfx = pfx0 | (bin << (32u - 8u * p));
    before = add64(before0, in_bins);
    if (gl_WorkGroupID.x == 0u && tid == 0u) {
        ST.st[sst(SSS_PFX + p)] = pfx;
        ST.st[sst(SSS_CUM + 2u * p)] = before.x;
        ST.st[sst(SSS_CUM + 2u * p + 1u)] = before.y;
        if (p == 1u) {
            ST.st[sst(SSS_TGT)] = tgt.x;
            ST.st[sst(SSS_TGT + 1u)] = tgt.y;
            ST.st[sst(SSS_TOTAL)] = total.x;
            ST.st[sst(SSS_TOTAL + 1u)] = total.y;
        }
    }
    barrier();
}

// Adds v to the 64-bit bin at word w of H (carry through the high word).
void atomic_add64(uint w, uvec2 v)
{
    uint old = atomicAdd(H.h[w], v.x);
    uint carry = old + v.x < old ? 1u : 0u;
    if (v.y + carry != 0u)
        atomicAdd(H.h[w + 1u], v.y + carry);
}

// Passes 0-3: the weights of the matching tokens by the next key byte.
void histogram(uint p)
{
    uint tid = gl_LocalInvocationIndex;
    uint pfx = 0u, mask = 0u;
    if (p > 0u) {
        uvec2 before, tgt;
        resolve(p, pfx, before, tgt);
        mask = 0xffffffffu << (32u - 8u * p);
    }
    uint bk, bid;
    bound_of(bk, bid);
    float mx = uintBitsToFloat(ST.st[SST_MAX]);
    sh_lo[tid] = 0u;
    sh_hi[tid] = 0u;
    barrier();
    uint a = gl_WorkGroupID.x * pc.slice, b = min(a + pc.slice, pc.n), shift = 24u - 8u * p;
    for (uint i = a + tid; i < b; i += WGS) {
        float l = sk_canon(LG.l[pc.l_off + i]);
        uint key = sk_key(l);
        if ((key & mask) == pfx && within(key, i, bk, bid)) {
            uint w = weight_of(l, mx), d = (key >> shift) & 0xffu;
            if (w != 0u) {
                atomicAdd(sh_lo[d], w & 0xffffu);
                atomicAdd(sh_hi[d], w >> 16u);
            }
        }
    }
    barrier();
    uvec2 v = from_halves(sh_lo[tid], sh_hi[tid]);
    if ((v.x | v.y) != 0u)
        atomic_add64(hist_word(p, tid), v);
}

// Pass 4: the tokens on the found key, counted per block of ids.
void ties()
{
    uint pfx;
    uvec2 before, tgt;
    resolve(4u, pfx, before, tgt);
    uint a = gl_WorkGroupID.x * pc.slice, b = min(a + pc.slice, pc.n);
    for (uint i = a + gl_LocalInvocationIndex; i < b; i += WGS)
        if (sk_key(sk_canon(LG.l[pc.l_off + i])) == pfx)
            atomicAdd(H.h[SMP_HIST_WORDS + pc.sel * SMP_TIE_BINS + i / pc.block], 1u);
}

// The last workgroup of pass 4: the crossing token among those on the key.
void finish()
{
    uint tid = gl_LocalInvocationIndex;
    uint key = ST.st[sst(SSS_PFX + 4u)];
    uvec2 before = st64(sst(SSS_CUM + 8u)), tgt = st64(sst(SSS_TGT));
    float mx = uintBitsToFloat(ST.st[SST_MAX]);
    uint w = weight_of(sk_key_value(key), mx);
    uint j = rank_of(sub64(tgt, before), w); // the j-th tie by id
    // the block of ids that holds it
    uint c = H.h[SMP_HIST_WORDS + pc.sel * SMP_TIE_BINS + tid];
    sh_cnt[tid] = c;
    barrier();
    for (uint off = 1u; off < 256u; off <<= 1u) {
        uint v = sh_cnt[tid] + (tid >= off ? sh_cnt[tid - off] : 0u);
        barrier();
        sh_cnt[tid] = v;
        barrier();
    }
    uint incl = sh_cnt[tid], excl = incl - c;
    if (excl <= j && j < incl) {
        s_bin = tid;
        s_before = uvec2(excl, 0u);
    }
    barrier();
    uint blk = s_bin, jj = j - s_before.x;
    barrier();
    // that block's tokens in id order: a run of ids per thread
    uint run = (pc.block + WGS - 1u) / WGS, lo = blk * pc.block + tid * run;
    uint hi = min(min(lo + run, (blk + 1u) * pc.block), pc.n);
    uint mine = 0u;
    for (uint i = lo; i < hi; i++)
        mine += sk_key(sk_canon(LG.l[pc.l_off + i])) == key ? 1u : 0u;
    sh_cnt[tid] = mine;
    barrier();
    for (uint off = 1u; off < 256u; off <<= 1u) {
        uint v = sh_cnt[tid] + (tid >= off ? sh_cnt[tid - off] : 0u);
        barrier();
        sh_cnt[tid] = v;
        barrier();
    }
    uint first = sh_cnt[tid] - mine;
    if (first <= jj && jj < first + mine) {
        uint left = jj - first, id = lo;
        for (uint i = lo; i < hi; i++)
            if (sk_key(sk_canon(LG.l[pc.l_off + i])) == key) {
                if (left == 0u) {
                    id = i;
                    break;
                }
                left--;
            }
        ST.st[sst(SSS_RES_KEY)] = key;
        ST.st[sst(SSS_RES_ID)] = id;
    }
}

// The draw (selection 2), one pass: every workgroup's weight r of its
// slice's kept tokens (into its bin of the draw's pass-0 histogram), then,
// in the last workgroup to finish, the slice and the token in it; the last
// pass of the program, so it puts every bin back to zero for the next run.
void draw()
{
    uint tid = gl_LocalInvocationIndex, s = gl_WorkGroupID.x;
    uint bk, bid;
    bound_of(bk, bid);
    float mx = uintBitsToFloat(ST.st[SST_MAX]), inv_t = uintBitsToFloat(SMP.w[SMP_INV_T]);
    uint a = s * pc.slice, b = min(a + pc.slice, pc.n);
    uvec2 acc = uvec2(0u);
    for (uint i = a + tid; i < b; i += WGS) {
        float l = sk_canon(LG.l[pc.l_off + i]);
        if (within(sk_key(l), i, bk, bid))
            acc = add64(acc, uvec2(sk_weight(l, mx, inv_t), 0u));
    }
    acc = sd_wg_sum64(acc);
    if (tid == 0u) {
        H.h[hist_word(0u, s)] = acc.x;
        H.h[hist_word(0u, s) + 1u] = acc.y;
    }
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u)
        s_last = atomicAdd(ST.st[SST_COUNT], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (!s_last)
        return;
    memoryBarrierBuffer();
    uint hw = hist_word(0u, tid);
    uvec2 part = tid < gl_NumWorkGroups.x ? uvec2(H.h[hw], H.h[hw + 1u]) : uvec2(0u), total;
    uint tok = sd_draw(part, SMP.w[SMP_UNIFORM], mx, inv_t, bk, bid, total);
    if (tid == 0u) {
        float w = float(sk_weight(sk_canon(LG.l[pc.l_off + tok]), mx, inv_t));
        RES.r[SMPR_TOKEN] = tok;
        RES.r[SMPR_PROB] = floatBitsToUint(w / (float(total.y) * 4294967296.0 + float(total.x)));
        RES.r[SMPR_STATUS] = SMP_STATUS_DONE;
        ST.st[SST_COUNT] = 0u;
    }
    barrier();
    for (uint i = tid; i < SMP_HIST_WORDS + 3u * SMP_TIE_BINS; i += WGS)
        H.h[i] = 0u;
}

void main()
{
    if (ST.st[sst(SSS_ACTIVE)] == 0u)
        return;
    if (pc.sel == 2u) {
        draw();
        return;
    }
    if (pc.pass < 4u) {
        histogram(pc.pass);
        return;
    }
    // pass 4: the ties; the last workgroup to finish them resolves
    ties();
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        s_last = atomicAdd(ST.st[SST_COUNT], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (!s_last)
        return;
    memoryBarrierBuffer();
    finish();
    if (gl_LocalInvocationIndex == 0u)
        ST.st[SST_COUNT] = 0u;
}
