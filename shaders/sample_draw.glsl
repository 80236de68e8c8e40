// sample_draw.glsl: the draw over the whole vocabulary (core/sample/sampler.h
// step 9: the first kept token, in id order, whose running weight r reaches
// the target), and the workgroup sums it needs.  Included by sample_pick
// (which draws there when min-p binds first) and sample_select (the draw
// after a top-p cut or a top-k bound) after their logits buffer LG and push
// constants pc (n, slice, l_off); every function is called by the whole
// 256-thread workgroup, in uniform control flow.
//
// Why id order: any fixed order draws from the same distribution, and the
// ids' is the one a workgroup can walk without sorting.  Slice s holds ids
// [s * slice, (s + 1) * slice), and thread t of a workgroup a run of
// slice / 256 of them in turn, so running sums over slices, then over
// threads, then along a thread's run follow the ids.  The weights are
// integers (sample_common.glsl), so every sum is exact in any grouping.

shared uint sd_red[4][64];
shared uvec2 sd_scan[256];
shared uint sd_at;
shared uvec2 sd_before;

// The workgroup's sum of one value < 2^64 per thread, by 16-bit limbs.
uvec2 sd_wg_sum64(uvec2 x)
{
    uint l0 = subgroupAdd(x.x & 0xffffu), l1 = subgroupAdd(x.x >> 16u);
    uint l2 = subgroupAdd(x.y & 0xffffu), l3 = subgroupAdd(x.y >> 16u);
    if (subgroupElect()) {
        sd_red[0][gl_SubgroupID] = l0;
        sd_red[1][gl_SubgroupID] = l1;
        sd_red[2][gl_SubgroupID] = l2;
        sd_red[3][gl_SubgroupID] = l3;
    }
    barrier();
    uint s0 = 0u, s1 = 0u, s2 = 0u, s3 = 0u;
    for (uint i = 0u; i < gl_NumSubgroups; i++) {
        s0 += sd_red[0][i];
        s1 += sd_red[1][i];
        s2 += sd_red[2][i];
        s3 += sd_red[3][i];
    }
    barrier();
    // the high word is below 2^32, so it is exact modulo 2^32
    uvec2 lo = add64(uvec2(s0, 0u), uvec2(s1 << 16u, s1 >> 16u));
    return uvec2(lo.x, lo.y + s2 + (s3 << 16u));
}

// Thread t's value x into sd_scan as running sums in thread order
// (inclusive); returns the total.
uvec2 sd_running(uvec2 x)
{
    uint tid = gl_LocalInvocationIndex;
    sd_scan[tid] = x;
    barrier();
    for (uint off = 1u; off < 256u; off <<= 1u) {
        uvec2 v = sd_scan[tid];
        if (tid >= off)
            v = add64(v, sd_scan[tid - off]);
        barrier();
        sd_scan[tid] = v;
        barrier();
    }
    return sd_scan[255];
}

// After sd_running(x): the thread whose running sum first reaches target
// (1 <= target <= the total), and in `before` the sum of the threads
// before it.
uint sd_reaching(uvec2 x, uvec2 target, out uvec2 before)
{
    uint tid = gl_LocalInvocationIndex;
    uvec2 incl = sd_scan[tid], excl = sub64(incl, x);
    if (!ge64(excl, target) && ge64(incl, target)) {
        sd_at = tid;
        sd_before = excl;
    }
    barrier();
    uint at = sd_at;
    before = sd_before;
    barrier();
    return at;
}

// The drawn token in slice s: the first token in id order within the bound
// (bk, bid) whose running weight r in the slice reaches rest (1 <= rest <=
// the slice's weight within the bound).
uint sd_token(uint s, uvec2 rest, float mx, float inv_t, uint bk, uint bid)
{
    uint tid = gl_LocalInvocationIndex, per = pc.slice / 256u;
    uint lo = s * pc.slice + tid * per, hi = min(lo + per, pc.n);
    uvec2 mine = uvec2(0u);
    for (uint i = lo; i < hi; i++) {
        float l = sk_canon(LG.l[pc.l_off + i]);
        if (within(sk_key(l), i, bk, bid))
            mine = add64(mine, uvec2(sk_weight(l, mx, inv_t), 0u));
    }
    sd_running(mine);
    uvec2 cum;
    uint t = sd_reaching(mine, rest, cum);
    if (tid == t)
        for (uint i = lo; i < hi; i++) {
            float l = sk_canon(LG.l[pc.l_off + i]);
            if (within(sk_key(l), i, bk, bid)) {
                cum = add64(cum, uvec2(sk_weight(l, mx, inv_t), 0u));
                if (ge64(cum, rest)) {
                    sd_at = i;
                    break;
                }
            }
        }
    barrier();
    return sd_at;
}

// The draw from the slices' weights part (thread s < the number of slices
// holds slice s's, the others 0): the token whose running weight over the
// vocabulary in id order reaches mulhi(total, u) + 1, and in `total` the
// weight of every kept token.
uint sd_draw(uvec2 part, uint u, float mx, float inv_t, uint bk, uint bid, out uvec2 total)
{
    total = sd_running(part);
    uvec2 target = add64(mulhi64(total, u), uvec2(1u, 0u)), before;
    uint s = sd_reaching(part, target, before);
    return sd_token(s, sub64(target, before), mx, inv_t, bk, bid);
}
