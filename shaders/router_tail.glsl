// router_tail.glsl: the end of the router kernels (router, router_xs).  Once
// a workgroup has written its logits, it counts itself in
// (router_count_in); the last one to finish turns the logits into
// probabilities (sigmoid or softmax), picks the top n_used of prob + bias
// (the bias only selects; ties to the lower expert id), normalizes and
// scales the chosen probabilities, and writes expert ids and weights for the
// expert kernels -- in its first subgroup alone (router_pick: no barriers;
// lane l holds experts l, l + SG, ...).  The counter is reset for the next
// use.  The including shader declares pc (N, n_used, gating, has_bias,
// bias_off, norm_w, scale, out_off) and the spec constant EPL (experts per
// lane, N / subgroup size rounded up); SG, the subgroup size, comes from the
// including shader's family.

#extension GL_KHR_shader_subgroup_ballot : enable
#include "sg_best.glsl"

// Chosen weights a lane keeps until their sum is known: weight k lives in
// lane k % SG, slot k / SG (n_used <= 32, so one slot at subgroup 32 and
// eight at subgroup 4, where n_used may pass the subgroup size).
const uint KPL = (32u + SG - 1u) / SG;

layout(set = 0, binding = ROUTER_B_LOGITS) coherent buffer LBuf { float logit[]; } L;
layout(set = 0, binding = ROUTER_B_IDS) writeonly buffer IdBuf { int ids[]; } ID;
layout(set = 0, binding = ROUTER_B_WTS) writeonly buffer WtBuf { float wts[]; } WT;
layout(set = 0, binding = ROUTER_B_BIAS) readonly buffer BBuf { float bias[]; } B;
layout(set = 0, binding = ROUTER_B_COUNT) coherent buffer CBuf { uint count[]; } CNT;

shared bool s_last;

// Publishes this workgroup's writes to L, then counts it in; true in every
// invocation of the workgroup that finished last (of gl_NumWorkGroups.x for
// token z), after its acquire of the others' writes.  Call from uniform
// control flow.
bool router_count_in(uint z)
{
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        s_last = atomicAdd(CNT.count[z], 1u) == gl_NumWorkGroups.x - 1u;
    barrier();
    if (s_last)
        memoryBarrierBuffer();
    return s_last;
}

// The choice of token z from its logits (lane l holds experts l, l + SG,
// ...; -inf past N) and the selection bias (0 without one), in the first
// subgroup of the last workgroup.  The tail is on the layer's critical path
// (router -> routed gate/up -> down; H200, every dispatch timed: 4.3 of the
// router's 13.9 us, gpu/PERF.md run 62), so a round is one subgroup max, a
// ballot and two shuffles from the one lane holding it (the id and the
// probability), with a second reduction only on a tie.
void router_pick(uint z, float prob[EPL], float bias[EPL])
{
    uint sl = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    float score[EPL];
    if (pc.gating != 2u) { // softmax; sigmoid needs neither the max nor the sum
        float mx = -1.0 / 0.0;
        for (uint i = 0u; i < EPL; i++)
            mx = max(mx, prob[i]);
        mx = subgroupMax(mx);
        float se = 0.0;
        for (uint i = 0u; i < EPL; i++) {
            prob[i] = sl + i * ss >= pc.N ? 0.0 : exp(prob[i] - mx);
            se += prob[i];
        }
        se = subgroupAdd(se);
        for (uint i = 0u; i < EPL; i++)
            prob[i] /= se;
    } else {
        for (uint i = 0u; i < EPL; i++)
            prob[i] = sl + i * ss >= pc.N ? 0.0 : 1.0 / (1.0 + exp(-prob[i]));
    }
    for (uint i = 0u; i < EPL; i++)
        score[i] = sl + i * ss < pc.N ? prob[i] + bias[i] : -1.0 / 0.0;
    float wsum = 0.0;
    float wsel[KPL];
    for (uint i = 0u; i < KPL; i++)
        wsel[i] = 0.0;
    uint ob = pc.out_off + z * pc.n_used;
    for (uint k = 0u; k < pc.n_used; k++) {
        // this lane's best (its lower id on ties) and its probability
        float best = -1.0 / 0.0, pbest = 0.0;
        uint bi = 0xffffffffu;
        for (uint i = 0u; i < EPL; i++)
            if (score[i] > best) {
                best = score[i];
                pbest = prob[i];
                bi = sl + i * ss;
            }
        // the subgroup's (lower id on ties)
        float m;
        uint w, owner;
        sg_best(best, bi, m, w, owner);
        float pw = subgroupShuffle(pbest, owner); // the chosen probability, from its lane
        if (sl == owner)
            for (uint i = 0u; i < EPL; i++)
                if (sl + i * ss == w)
                    score[i] = -1.0 / 0.0;
        wsum += pw;
        for (uint i = 0u; i < KPL; i++)
            if (sl + i * ss == k)
                wsel[i] = pw;
        if (sl == 0u)
            ID.ids[ob + k] = int(w);
    }
    float inv = pc.norm_w != 0u ? 1.0 / max(wsum, 6.103515625e-5) : 1.0;
    for (uint i = 0u; i < KPL; i++) {
        uint k = sl + i * ss;
        if (k < pc.n_used) {
            float wv = wsel[i] * inv;
            if (pc.scale != 0.0)
                wv *= pc.scale;
            WT.wts[ob + k] = wv;
        }
    }
    if (sl == 0u)
        CNT.count[z] = 0u;
}

// z: the token; lb: its logits' offset in L.  Call from uniform control flow.
void router_tail(uint z, uint lb)
{
    // the bias is a weight: every workgroup's first subgroup loads it before
    // counting itself in, so that the last one does not wait for it after
    uint sl = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    float bias[EPL];
    for (uint i = 0u; i < EPL; i++)
        bias[i] = pc.has_bias != 0u && gl_SubgroupID == 0u && sl + i * ss < pc.N ? B.bias[pc.bias_off + sl + i * ss] : 0.0;
    if (!router_count_in(z) || gl_SubgroupID != 0u)
        return;
    float prob[EPL];
    for (uint i = 0u; i < EPL; i++) {
        uint e = sl + i * ss;
        prob[i] = e < pc.N ? L.logit[lb + e] : -1.0 / 0.0;
    }
    router_pick(z, prob, bias);
}
