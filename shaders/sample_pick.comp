#version 450
// sample_pick: the token, from sample_cand's K candidates (core/sample/sampler.h,
// steps 3-9).  With SMP_F_MASS every workgroup first sums the top-p weight
// m over its slice of the vocabulary (the top-p total Z when top-k is off);
// the last workgroup to finish (atomic counter) decides.  Without it the
// host launches one workgroup (indirect grid, SMP_PICK_IND).
//
// The candidates are the first K tokens of the order, so the kept tokens
// -- a prefix of the order -- are known from them when some limit ends
// inside them: top-k <= K, the top-p cut found among them, or a candidate
// below the min-p floor.  Then the draw needs only their weights (taken in
// id order: cand_drawn).  When no limit ends inside (a flat distribution),
// the result says so and sets up the state of sample_select, which finds
// the kept tokens and the draw over the whole vocabulary: never an
// approximation from the candidates.
// Where the program goes on with sample_select's passes (pc.tail), it also
// sets their grids (SST_IND; sample_cand zeroed them), so that the token
// comes back in one submit.
// The decision runs on one subgroup: each lane weighs one candidate of a
// chunk, running sums are subgroup scans of 16-bit halves.
// With min-p on too, the mass pass also sums m over the tokens at or above
// the min-p floor (a prefix of the order).  When that sum F is below the
// top-p target, the top-p cut comes after every token min-p keeps, so the
// kept tokens are min-p's and selection 1 is left out: on a flat
// distribution min-p usually binds first (the synthetic files' logits,
// std ~1: min-p keeps 56-86 % of the mass, top-p asks for 95 %), and its five
// passes were spent on a bound the draw then did not use.  Then the draw
// needs no sample_select either: the pass also sums the draw's weights r
// over those tokens (m itself at temperature 1), and the last workgroup
// draws over the whole vocabulary in id order (sample_draw.glsl) -- the
// token in the same program step as the candidates'.  Exact: the sums are
// integers, the floor is decide()'s own.

#define PC_USE_SAMPLE_PICK
#include "pc_sample.h"
#include "sample_common.glsl"

layout(local_size_x_id = PC_S_WGS) in;
const uint WGS = gl_WorkGroupSize.x;

layout(set = 0, binding = SPICK_B_LOGITS) readonly buffer LBuf { float l[]; } LG;
layout(set = 0, binding = SPICK_B_CAND_V) readonly buffer CandV { float v[]; } CV;
layout(set = 0, binding = SPICK_B_CAND_I) readonly buffer CandI { uint i[]; } CI;
layout(set = 0, binding = SPICK_B_PART) coherent buffer Part { uvec2 p[]; } PART;
layout(set = 0, binding = SPICK_B_COUNT) coherent buffer CBuf { uint count[]; } CNT;
layout(set = 0, binding = SPICK_B_RESULT) writeonly buffer Res { uint r[]; } RES;
layout(set = 0, binding = SPICK_B_SMP) readonly buffer Smp { uint w[]; } SMP;
layout(set = 0, binding = SPICK_B_STATE) writeonly buffer State { uint st[]; } ST;

#include "sample_draw.glsl"

shared bool s_last;
shared bool s_whole;   // decide(): the draw over min-p's tokens of the whole vocabulary, here
shared uint s_minp_key;

const uint CAND = SMP_MAX_SLICES * SMP_KMAX; // the merged list

// The min-p floor: tokens whose canonical logit is at least this are kept.
float minp_floor(float mx)
{
    precise float fl = mx + uintBitsToFloat(SMP.w[SMP_LOG_MINP]);
    return sk_canon(fl);
}

uint cand_weight(uint j, uint lim, float mx, float inv_t)
{
    return j < lim ? sk_weight(CV.v[CAND + j], mx, inv_t) : 0u;
}

// The weight of the first lim candidates (one subgroup).
uvec2 cand_total(uint lim, float mx, float inv_t)
{
    uvec2 tot = uvec2(0u);
    for (uint c = 0u; c < lim; c += gl_SubgroupSize) {
        uint w = cand_weight(c + gl_SubgroupInvocationID, lim, mx, inv_t);
        tot = add64(tot, from_halves(subgroupAdd(w & 0xffffu), subgroupAdd(w >> 16u)));
    }
    return tot;
}

shared uint s_cw[SMP_KMAX], s_cid[SMP_KMAX];

// The draw among the first `kept` candidates (one subgroup): the one whose
// running weight, over those candidates in id order, reaches target.  Each
// lane sums the weights of the candidates with lower ids than its own.
uint cand_drawn(uint kept, float mx, float inv_t, uvec2 target)
{
    for (uint j = gl_SubgroupInvocationID; j < kept; j += gl_SubgroupSize) {
        s_cw[j] = sk_weight(CV.v[CAND + j], mx, inv_t);
        s_cid[j] = CI.i[CAND + j];
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    uint found = 0u;
    for (uint c = 0u; c < kept; c += gl_SubgroupSize) {
        uint j = c + gl_SubgroupInvocationID;
        bool hit = false;
        if (j < kept) {
            uint id = s_cid[j], w = s_cw[j];
            uvec2 before = uvec2(0u);
            for (uint i = 0u; i < kept; i++)
                if (s_cid[i] < id)
                    before = add64(before, uvec2(s_cw[i], 0u));
            hit = w != 0u && !ge64(before, target) && ge64(add64(before, uvec2(w, 0u)), target);
        }
        uvec4 ballot = subgroupBallot(hit);
        if (subgroupAny(hit)) {
            found = c + subgroupBallotFindLSB(ballot);
            break;
        }
    }
    subgroupBarrier(); // s_cw, s_cid read by every lane before a next use
    return found;
}

// The first candidate j < lim whose running weight reaches target; lim
// when none does.
uint cand_reaching(uint lim, float mx, float inv_t, uvec2 target)
{
    uvec2 before = uvec2(0u);
    for (uint c = 0u; c < lim; c += gl_SubgroupSize) {
        uint j = c + gl_SubgroupInvocationID;
        uint w = cand_weight(j, lim, mx, inv_t);
        bool hit = j < lim && ge64(add64(before, sg_inclusive64(w)), target);
        uvec4 ballot = subgroupBallot(hit);
        if (subgroupAny(hit))
            return c + subgroupBallotFindLSB(ballot);
        before = add64(before, from_halves(subgroupAdd(w & 0xffffu), subgroupAdd(w >> 16u)));
    }
    return lim;
}

void result(uint token, float prob, uint status, uint kept, uint way)
{
    if (gl_SubgroupInvocationID == 0u) {
        RES.r[SMPR_TOKEN] = token;
        RES.r[SMPR_PROB] = floatBitsToUint(prob);
        RES.r[SMPR_STATUS] = status;
        RES.r[SMPR_KEPT] = kept;
        RES.r[SMPR_WAY] = way;
    }
}

uint sst(uint s, uint w)
{
    return SST_SEL + s * SST_SEL_WORDS + w;
}

// The decision, on one subgroup of the last workgroup.
void decide(uint ns)
{
    uint flags = SMP.w[SMP_FLAGS], K = min(SMP.w[SMP_K], SMP_KMAX), n = pc.n;
    float mx = CV.v[CAND];
    uint first = CI.i[CAND];
    bool finite = (floatBitsToUint(mx) & 0x7f800000u) != 0x7f800000u;
    if ((flags & SMP_F_GREEDY) != 0u || !finite) {
        result(first, 1.0, SMP_STATUS_DONE, 1u, SMP_WAY_CAND);
        return;
    }
    float inv_t = uintBitsToFloat(SMP.w[SMP_INV_T]);
    uint topk = SMP.w[SMP_TOPK];
    uint nc = topk > 0u && topk < n ? topk : n;  // |C|
    uint kept = n;                               // a bound on the kept tokens
    bool known = n <= K;                         // ... that ends inside the candidates
    bool blocked = false;                        // a limit not known to end after them
    bool topp_select = (flags & SMP_F_TOPP) != 0u; // selection 1 needed in a flat case
    if (nc <= K) {
        kept = min(kept, nc);
        known = true;
    }
    if ((flags & SMP_F_TOPP) != 0u) {
        bool have_z = nc <= K || ((flags & SMP_F_MASS) != 0u && nc == n);
        if (have_z) {
            uvec2 z = uvec2(0u);
            if (nc <= K)
                z = cand_total(nc, mx, 1.0);
            else
                for (uint i = 0u; i < ns; i++)
                    z = add64(z, PART.p[i]);
            uvec2 t = mulhi64(z, SMP.w[SMP_TOPP]);
            if ((t.x | t.y) == 0u)
                t = uvec2(1u, 0u);
            uint lim = min(nc, K), j = cand_reaching(lim, mx, 1.0, t);
            if (j < lim) {
                kept = min(kept, j + 1u);
                known = true;
            }
            if ((flags & SMP_F_MINP) != 0u && (flags & SMP_F_MASS) != 0u && nc == n) {
                uvec2 f = uvec2(0u); // m over min-p's kept tokens (the mass pass)
                for (uint i = 0u; i < ns; i++)
                    f = add64(f, PART.p[SMP_MAX_SLICES + i]);
                topp_select = ge64(f, t);
            }
        } else {
            blocked = true; /* Z is over an unknown C: the cut may come anywhere */
        }
    }
    uint minp_key = KEY_NONE;
    if ((flags & SMP_F_MINP) != 0u) {
        float floor_l = minp_floor(mx);
        minp_key = sk_key(floor_l);
        uint nm = 0u;
        for (uint c = 0u; c < K; c += gl_SubgroupSize) {
            uint j = c + gl_SubgroupInvocationID;
            nm += subgroupBallotBitCount(subgroupBallot(j < K && CV.v[CAND + j] >= floor_l));
        }
        if (nm < K || K >= n) {
            kept = min(kept, max(nm, 1u));
            known = true;
        }
    }
    if (known && !blocked) { // the draw over the first `kept` candidates
        uvec2 total = cand_total(kept, mx, inv_t);
        uvec2 target = add64(mulhi64(total, SMP.w[SMP_UNIFORM]), uvec2(1u, 0u));
        uint j = cand_drawn(kept, mx, inv_t, target);
        float w = float(sk_weight(CV.v[CAND + j], mx, inv_t));
        result(CI.i[CAND + j], w / (float(total.y) * 4294967296.0 + float(total.x)), SMP_STATUS_DONE, kept,
               SMP_WAY_CAND);
        return;
    }
    // a flat distribution where min-p binds first (top-p's cut after its
    // tokens, C everything): the mass pass summed their weights per slice,
    // so the whole workgroup draws here (main)
    if ((flags & SMP_F_MASS) != 0u && (flags & SMP_F_MINP) != 0u && nc == n && !topp_select) {
        if (gl_SubgroupInvocationID == 0u) {
            s_whole = true;
            s_minp_key = minp_key;
        }
        return;
    }
    // else sample_select takes the whole vocabulary
    bool tail = false;
    if (gl_SubgroupInvocationID == 0u) {
        ST.st[SST_MAX] = floatBitsToUint(mx);
        ST.st[SST_FIRST_KEY] = sk_key(mx);
        ST.st[SST_FIRST_ID] = first;
        ST.st[SST_MINP_KEY] = minp_key;
        bool c_known = nc < n && nc <= K, find_k = nc < n && !c_known;
        tail = pc.tail != 0u && !find_k;
        ST.st[sst(0u, SSS_ACTIVE)] = find_k ? 1u : 0u;
        ST.st[sst(0u, SSS_RES_KEY)] = c_known ? sk_key(CV.v[CAND + nc - 1u]) : KEY_NONE;
        ST.st[sst(0u, SSS_RES_ID)] = c_known ? CI.i[CAND + nc - 1u] : KEY_NONE;
        ST.st[sst(1u, SSS_ACTIVE)] = topp_select ? 1u : 0u;
        ST.st[sst(1u, SSS_RES_KEY)] = KEY_NONE;
        ST.st[sst(1u, SSS_RES_ID)] = KEY_NONE;
        ST.st[sst(2u, SSS_ACTIVE)] = 1u;
        // the program's own selections 1 and 2 (pc.tail), unless the top-k
        // bound is to be found too: then the host runs its program of all three
        if (tail) {
            uint grid = (n + pc.slice - 1u) / pc.slice;
            ST.st[SST_IND] = topp_select ? grid : 0u;
            ST.st[SST_IND + 3u] = grid;
            ST.st[SST_IND + 1u] = ST.st[SST_IND + 2u] = ST.st[SST_IND + 4u] = ST.st[SST_IND + 5u] = 1u;
        }
    }
    result(first, 0.0, SMP_STATUS_SELECT, 0u, tail ? SMP_WAY_TAIL : SMP_WAY_CAND);
}

void main()
{
    uint s = gl_WorkGroupID.x, tid = gl_LocalInvocationIndex;
    uint flags = SMP.w[SMP_FLAGS];
    float mx = CV.v[CAND];
    if ((flags & SMP_F_MASS) != 0u && (floatBitsToUint(mx) & 0x7f800000u) != 0x7f800000u) {
        // this slice's part of Z, and of F (m over the tokens min-p keeps)
        // and with a temperature, of R (r over those tokens: the draw's
        // weights where min-p binds first; at temperature 1 r is m)
        bool minp = (flags & SMP_F_MINP) != 0u;
        float floor_l = minp ? minp_floor(mx) : 0.0, inv_t = uintBitsToFloat(SMP.w[SMP_INV_T]);
        bool with_r = minp && inv_t != 1.0;
        uint a = s * pc.slice, b = min(a + pc.slice, pc.n);
        uvec2 acc = uvec2(0u), acc_f = uvec2(0u), acc_r = uvec2(0u);
        for (uint i = a + tid; i < b; i += WGS) {
            float l = sk_canon(LG.l[pc.l_off + i]);
            uint w = sk_weight(l, mx, 1.0);
            acc = add64(acc, uvec2(w, 0u));
            if (minp && l >= floor_l) {
                acc_f = add64(acc_f, uvec2(w, 0u));
                if (with_r)
                    acc_r = add64(acc_r, uvec2(sk_weight(l, mx, inv_t), 0u));
            }
        }
        acc = sd_wg_sum64(acc);
        if (minp) // (flags and the temperature are uniform: every invocation or none)
            acc_f = sd_wg_sum64(acc_f);
        if (with_r)
            acc_r = sd_wg_sum64(acc_r);
        if (tid == 0u) {
            PART.p[s] = acc;
            PART.p[SMP_MAX_SLICES + s] = acc_f;
            PART.p[2u * SMP_MAX_SLICES + s] = acc_r;
        }
    }
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) {
        s_last = atomicAdd(CNT.count[1], 1u) == gl_NumWorkGroups.x - 1u;
        s_whole = false;
    }
    barrier();
    if (!s_last)
        return;
    memoryBarrierBuffer();
    if (gl_SubgroupID == 0u)
        decide(gl_NumWorkGroups.x);
    barrier();
    if (s_whole) { // (shared: uniform) the draw over min-p's tokens, in id order, from the slices' parts
        float inv_t = uintBitsToFloat(SMP.w[SMP_INV_T]);
        uint row = inv_t == 1.0 ? 1u : 2u, ns = gl_NumWorkGroups.x;
        uvec2 part = tid < ns ? PART.p[row * SMP_MAX_SLICES + tid] : uvec2(0u), total;
        uint tok = sd_draw(part, SMP.w[SMP_UNIFORM], mx, inv_t, s_minp_key, KEY_NONE, total);
        if (tid == 0u) {
            float w = float(sk_weight(sk_canon(LG.l[pc.l_off + tok]), mx, inv_t));
            RES.r[SMPR_TOKEN] = tok;
            RES.r[SMPR_PROB] = floatBitsToUint(w / (float(total.y) * 4294967296.0 + float(total.x)));
            RES.r[SMPR_STATUS] = SMP_STATUS_DONE;
            RES.r[SMPR_KEPT] = 0u;
            RES.r[SMPR_WAY] = SMP_WAY_WHOLE;
        }
    }
    if (tid == 0u)
        CNT.count[1] = 0u;
}
