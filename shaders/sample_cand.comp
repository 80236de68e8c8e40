#version 450
// sample_cand: the penalties, then the K best tokens of the order
// (core/sample/sampler.h: canonical logit descending, lower id first), the first
// step of sampling on the GPU.  Grid: one workgroup per slice of the
// vocabulary (at most SMP_MAX_SLICES); the last workgroup to finish
// (atomic counter) merges the slices' lists.  Output: the merged list at
// [SMP_MAX_SLICES][...] of the candidate buffers (sample_pick reads it),
// and, with SMP_F_HOST_TOPK, the list and the logsumexp in host memory.
//
// Why this shape: K rounds of a workgroup-wide argmax cost a few barriers
// each.  Here each lane sorts its PER tokens in registers once; a round is
// then a subgroup max over the lanes' heads (and a second reduction only on
// a tie), and only the winning lane shifts its array -- no barrier.  Each
// subgroup ranks its own tokens so; the subgroups' lists, and in the last
// workgroup the slices' lists (staged in shared memory), are merged by a
// tree of pairwise merges in which every item finds its place by one binary
// search (merge): a cost that does not grow with how flat the logits are.
// (Two earlier merges -- by rounds over list heads; by ranks after a
// threshold, which keeps most items of flat logits -- were measured on the
// H200, gpu/PERF.md run 21; this one is predicted faster than both and
// not measured there yet.)
// The penalties touch only window tokens: each workgroup rewrites those in
// its own slice before reading it, so no other workgroup reads them.

#extension GL_EXT_control_flow_attributes : enable

#define PC_USE_SAMPLE_CAND
#include "pc_sample.h"
#include "sample_common.glsl"
#include "sg_best.glsl"

layout(local_size_x_id = PC_S_WGS) in;
layout(constant_id = SCAND_S_PER) const uint PER = 8u;
const uint WGS = gl_WorkGroupSize.x;

layout(set = 0, binding = SCAND_B_LOGITS) coherent buffer LBuf { float l[]; } LG;
layout(set = 0, binding = SCAND_B_CAND_V) coherent buffer CandV { float v[]; } CV;
layout(set = 0, binding = SCAND_B_CAND_I) coherent buffer CandI { uint i[]; } CI;
layout(set = 0, binding = SCAND_B_MS) coherent buffer MsBuf { vec2 ms[]; } MS;
layout(set = 0, binding = SCAND_B_COUNT) coherent buffer CBuf { uint count[]; } CNT;
layout(set = 0, binding = SCAND_B_OUT_IDS) writeonly buffer OutI { int ids[]; } OI;
layout(set = 0, binding = SCAND_B_OUT_VALS) writeonly buffer OutV { float v[]; } OV;
layout(set = 0, binding = SCAND_B_SMP) readonly buffer Smp { uint w[]; } SMP;
layout(set = 0, binding = SCAND_B_STATE) writeonly buffer State { uint st[]; } ST;

shared float sh_v[SMP_MAX_SLICES * SMP_KMAX];   // lists to merge, SMP_KMAX apart
shared uint sh_i[SMP_MAX_SLICES * SMP_KMAX];
shared float red[64];
shared bool s_last;

// pen(canon(x)) of core/sample/sampler.h
float penalized(float xin, uint c)
{
    float x = sk_canon(xin);
    float rp = uintBitsToFloat(SMP.w[SMP_RP]), inv_rp = uintBitsToFloat(SMP.w[SMP_INV_RP]);
    float freq = uintBitsToFloat(SMP.w[SMP_FREQ]), pres = uintBitsToFloat(SMP.w[SMP_PRES]);
    precise float y = x > 0.0 ? x * inv_rp : x * rp;
    precise float cf = float(c) * freq;
    precise float r = (y - cf) - pres;
    return r;
}

float wg_max(float v)
{
    v = subgroupMax(v);
    barrier();
    if (subgroupElect())
        red[gl_SubgroupID] = v;
    barrier();
    float s = NEG_INF;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        s = max(s, red[i]);
    barrier();
    return s;
}

float wg_sum(float v)
{
    v = subgroupAdd(v);
    barrier();
    if (subgroupElect())
        red[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        s += red[i];
    barrier();
    return s;
}

// The K best of nl sorted lists of K (sh_v / sh_i, SMP_KMAX apart; short
// lists end in sentinels: -inf, KEY_NONE), left as list 0, by the whole
// workgroup: a tree of pairwise merges.  At each level lists 2p and 2p + 1
// become list p: an item's place in the pair is its place in its own list
// plus how many items of the other list come before it (a binary search);
// those placed below K are written once every thread has read (a barrier).
// Ranks are distinct (ids are), except among sentinels, which are alike.
// Cost: at most 8 items a thread at the first level, half as many at each
// next, a search of log2(K) loads each -- whatever the logits.
const uint MERGE_ITEMS = SMP_MAX_SLICES * SMP_KMAX / 256u; // items a thread holds at the first level (WGS 256)

void merge(uint nl, uint K)
{
    uint tid = gl_LocalInvocationIndex;
    while (nl > 1u) {
        uint pairs = nl / 2u, next = (nl + 1u) / 2u; // an odd last list moves alone
        float mv[MERGE_ITEMS];
        uint mi[MERGE_ITEMS], mr[MERGE_ITEMS], md[MERGE_ITEMS];
        uint n = 0u;
        for (uint q = tid; q < nl * K && n < MERGE_ITEMS; q += WGS, n++) {
            uint a = q / K, pos = q - a * K, other = a ^ 1u;
            float v = sh_v[a * SMP_KMAX + pos];
            uint id = sh_i[a * SMP_KMAX + pos];
            uint rank = pos;
            if (a / 2u < pairs) { // the items of the other list before (v, id): a prefix
                uint lo = 0u, hi = K;
                while (lo < hi) {
                    uint mid = (lo + hi) / 2u;
                    if (better(sh_v[other * SMP_KMAX + mid], sh_i[other * SMP_KMAX + mid], v, id))
                        lo = mid + 1u;
                    else
                        hi = mid;
                }
                rank += lo;
            }
            mv[n] = v;
            mi[n] = id;
            mr[n] = rank;
            md[n] = a / 2u;
        }
        barrier();
        for (uint j = 0u; j < n; j++)
            if (mr[j] < K) {
                sh_v[md[j] * SMP_KMAX + mr[j]] = mv[j];
                sh_i[md[j] * SMP_KMAX + mr[j]] = mi[j];
            }
        barrier();
        nl = next;
    }
}

// The subgroup's best token left (ties to the lower id): its value and id.
void subgroup_head(float v0, uint id0, out float m, out uint w)
{
    uint lane;
    sg_best(v0, id0, m, w, lane);
}

// The subgroup's best token left, (m, w), to item k of its list, and off
// its lane's array.
void put(uint list, uint k, float m, uint w, inout float v[PER], inout uint id[PER])
{
    if (gl_SubgroupInvocationID == 0u) {
        sh_v[list * SMP_KMAX + k] = m;
        sh_i[list * SMP_KMAX + k] = w;
    }
    if (v[0] == m && id[0] == w && w != KEY_NONE) {
        [[unroll]] for (uint j = 0u; j + 1u < PER; j++) {
            v[j] = v[j + 1u];
            id[j] = id[j + 1u];
        }
        v[PER - 1u] = NEG_INF;
        id[PER - 1u] = KEY_NONE;
    }
}

// One round: the subgroup's best token left to item k of its list.
void take(uint list, uint k, inout float v[PER], inout uint id[PER])
{
    float m;
    uint w;
    subgroup_head(v[0], id[0], m, w);
    put(list, k, m, w, v, id);
}

void main()
{
    uint s = gl_WorkGroupID.x, tid = gl_LocalInvocationIndex;
    uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    uint flags = SMP.w[SMP_FLAGS], K = min(SMP.w[SMP_K], SMP_KMAX);
    uint a = s * pc.slice, b = min(a + pc.slice, pc.n);

    // no selection after sample_pick unless it asks for one (a program
    // whose sample_pick does not run must not find the last token's grids)
    if (s == 0u && tid < 6u)
        ST.st[SST_IND + tid] = tid % 3u == 0u ? 0u : 1u;

    // penalties of this slice's window tokens
    if ((flags & SMP_F_PEN) != 0u) {
        uint np = min(SMP.w[SMP_NPEN], SMP_PEN_MAX);
        for (uint j = tid; j < np; j += WGS) {
            uint t = SMP.w[SMP_PEN + 2u * j], c = SMP.w[SMP_PEN + 2u * j + 1u];
            if (t >= a && t < b)
                LG.l[pc.l_off + t] = penalized(LG.l[pc.l_off + t], c);
        }
        memoryBarrierBuffer();
        barrier();
    }

    // this lane's PER tokens, sorted best first.  Every loop over them is
    // unrolled so that the arrays can stay in registers (run 45, H200,
    // every dispatch timed: 81.3 -> 72.6 us a token with 64 candidates,
    // 36.2 -> 30.4 with one; the K rounds themselves are the rest)
    float v[PER];
    uint id[PER];
    [[unroll]] for (uint j = 0u; j < PER; j++) {
        uint i = a + j * WGS + tid;
        v[j] = i < b ? sk_canon(LG.l[pc.l_off + i]) : NEG_INF;
        id[j] = i < b ? i : KEY_NONE;
    }
    if ((flags & SMP_F_HOST_TOPK) != 0u) { // the slice's (max, sum of exp) for the logsumexp
        float m = NEG_INF;
        [[unroll]] for (uint j = 0u; j < PER; j++)
            m = max(m, v[j]);
        m = wg_max(m);
        float sum = 0.0;
        if (m > NEG_INF)
            [[unroll]] for (uint j = 0u; j < PER; j++)
                sum += exp(v[j] - m);
        sum = wg_sum(sum);
        if (tid == 0u)
            MS.ms[s] = vec2(m, sum);
    }
    [[unroll]] for (uint j = 1u; j < PER; j++)
        [[unroll]] for (uint q = j; q > 0u; q--)
            if (better(v[q], id[q], v[q - 1u], id[q - 1u])) {
                float tv = v[q];
                v[q] = v[q - 1u];
                v[q - 1u] = tv;
                uint ti = id[q];
                id[q] = id[q - 1u];
                id[q - 1u] = ti;
            }

    // each subgroup: its best tokens, one per round, into a list of its
    // own (K long, sentinels after the last).  Shared memory holds
    // SMP_MAX_SLICES lists: where a workgroup has more subgroups (subgroups
    // of 4 lanes: 64), they take turns -- a turn's lists join list 0, the
    // turns before them merged, and are merged again.  (One turn wherever
    // subgroups have 8 lanes or more.)
    //
    // Rounds in two phases, since a subgroup's K-th best is rarely among the
    // turn's K best: every subgroup of the turn first takes KA = K / turn
    // rounds (rounded up); the worst of those lists' last items, T, has at
    // least K tokens of the turn at or above it, so the turn's K best all
    // are, and a subgroup goes on only while its next token comes before T.
    // A subgroup whose tokens run out stops too (only sentinels are left).
    // 64 candidates from 8 subgroups of 608 tokens (GLM's vocabulary on
    // 32 lanes): ~12 rounds a subgroup instead of 64 (a model of this loop
    // on random logits; any logits: the rounds follow ranks, not values).
    // H200, every dispatch timed: 74.8 -> 55.3 us (gpu/PERF.md run 62).
    // (A first form, both phases one loop with the barrier inside, gave
    // wrong lists on the H200 and right ones on lavapipe.)
    uint listed = 0u, kept = 0u; // subgroups done; lists already held (0 or the merged 1)
    while (listed < gl_NumSubgroups) {
        uint turn = min(gl_NumSubgroups - listed, SMP_MAX_SLICES - kept);
        bool mine = sg >= listed && sg < listed + turn;
        uint list = kept + sg - listed, ka = min(K, (K + turn - 1u) / turn), k = 0u;
        if (mine)
            for (; k < ka; k++)
                take(list, k, v, id);
        if (ka < K) { // (uniform) else every round is taken: one candidate, or one subgroup
            barrier();
            // T from the lists whose KA-th item is a token; no bound
            // unless those alone hold K tokens at or above it
            float tv = NEG_INF;
            uint ti = KEY_NONE, with = 0u;
            for (uint q = kept; q < kept + turn; q++) {
                float qv = sh_v[q * SMP_KMAX + ka - 1u];
                uint qi = sh_i[q * SMP_KMAX + ka - 1u];
                if (qi == KEY_NONE)
                    continue;
                if (with == 0u || better(tv, ti, qv, qi)) {
                    tv = qv;
                    ti = qi;
                }
                with++;
            }
            if (with * ka < K) {
                tv = NEG_INF;
                ti = KEY_NONE;
            }
            if (mine) {
                for (; k < K; k++) {
                    float m;
                    uint w;
                    subgroup_head(v[0], id[0], m, w);
                    if (!better(m, w, tv, ti))
                        break;  // (uniform) at or past T, or only sentinels left
                    put(list, k, m, w, v, id);
                }
                for (uint j = k + lane; j < K; j += gl_SubgroupSize) { // the rest of the list: sentinels
                    sh_v[list * SMP_KMAX + j] = NEG_INF;
                    sh_i[list * SMP_KMAX + j] = KEY_NONE;
                }
            }
        }
        barrier();
        merge(kept + turn, K);
        listed += turn;
        kept = 1u;
    }
    for (uint k = tid; k < K; k += WGS) {
        CV.v[s * SMP_KMAX + k] = sh_v[k];
        CI.i[s * SMP_KMAX + k] = sh_i[k];
    }

    memoryBarrierBuffer();
    barrier();
    if (tid == 0u)
        s_last = atomicAdd(CNT.count[0], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (!s_last)
        return;
    memoryBarrierBuffer();

    // the last workgroup: merge the slices' lists
    uint ns = gl_NumWorkGroups.x;
    for (uint q = tid; q < ns * K; q += WGS) {
        uint list = q / K, k = q - list * K;
        sh_v[list * SMP_KMAX + k] = CV.v[list * SMP_KMAX + k];
        sh_i[list * SMP_KMAX + k] = CI.i[list * SMP_KMAX + k];
    }
    barrier();
    merge(ns, K);
    bool host = (flags & SMP_F_HOST_TOPK) != 0u;
    for (uint k = tid; k < K; k += WGS) {
        CV.v[SMP_MAX_SLICES * SMP_KMAX + k] = sh_v[k];
        CI.i[SMP_MAX_SLICES * SMP_KMAX + k] = sh_i[k];
        if (host) {
            OI.ids[k] = int(sh_i[k]);
            OV.v[k] = sh_v[k];
        }
    }
    if (host) {
        float m = NEG_INF;
        for (uint i = tid; i < ns; i += WGS)
            m = max(m, MS.ms[i].x);
        m = wg_max(m);
        float sum = 0.0;
        if (m > NEG_INF)
            for (uint i = tid; i < ns; i += WGS)
                sum += MS.ms[i].y * exp(MS.ms[i].x - m);
        sum = wg_sum(sum);
        if (tid == 0u)
            OV.v[K] = m + log(sum);
    }
    if (tid == 0u)
        CNT.count[0] = 0u;
}
