// sample_common.glsl: the arithmetic of the sampling definition
// (core/sample/sampler.h), operation for operation as core/sample/sampler_kernels.h
// writes it, and the 64-bit integer sums the weights need.
//
// Why exact: the CPU reference and these kernels must pick the same token
// for the same logits and uniform.  Vulkan rounds float add, subtract and
// multiply correctly; `precise` keeps the compiler from fusing them into
// FMAs or reassociating; the constants are given as bits (a compiler's
// folding of 1.0 / 6.0 might round differently from the C compiler's);
// NaN, zeros and subnormals are decided on the bits (sk_canon), since a
// GPU may flush subnormals.  The weights are integers, so their sums --
// in whatever order the workgroups add them -- are exact.  No 64-bit
// integer type is needed (shaderInt64 is not required): sums are uvec2
// (low, high) with carries.

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_ballot : enable
#extension GL_KHR_shader_subgroup_vote : enable
#extension GL_KHR_shader_subgroup_shuffle : enable

const uint KEY_NONE = 0xffffffffu;     // "no bound": after every key
const float NEG_INF = -1.0 / 0.0;

float sk_canon(float x)
{
    uint u = floatBitsToUint(x), a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return NEG_INF;
    if (a < 0x00800000u)
        return 0.0;
    return x;
}

uint sk_key(float canon)
{
    uint u = floatBitsToUint(canon);
    uint ord = (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
    return ~ord;
}

float sk_key_value(uint key)
{
    uint ord = ~key;
    return uintBitsToFloat((ord & 0x80000000u) != 0u ? (ord & 0x7fffffffu) : ~ord);
}

float sk_fast_exp(float xin)
{
    precise float x = xin > -87.0 ? xin : -87.0;
    precise float y = x * uintBitsToFloat(0x3fb8aa3bu);          // 1.44269504f
    precise float ym = y + 12582912.0;
    precise float n = ym - 12582912.0;
    precise float t = (y - n) * uintBitsToFloat(0x3f317218u);    // 0.693147181f
    precise float p = uintBitsToFloat(0x3ab60b61u);              // 1.0f / 720
    p = uintBitsToFloat(0x3c088889u) + t * p;                    // 1.0f / 120
    p = uintBitsToFloat(0x3d2aaaabu) + t * p;                    // 1.0f / 24
    p = uintBitsToFloat(0x3e2aaaabu) + t * p;                    // 1.0f / 6
    p = 0.5 + t * p;
    p = 1.0 + t * p;
    p = 1.0 + t * p;
    return uintBitsToFloat(floatBitsToUint(p) + (floatBitsToUint(ym) << 23u));
}

uint sk_q31(float w)
{
    precise float s = w * 2147483648.0;
    return uint(s);
}

// m (inv_t = 1) or r of a canonical logit l <= mx
uint sk_weight(float l, float mx, float inv_t)
{
    precise float d = (l - mx) * inv_t;
    return sk_q31(sk_fast_exp(d));
}

// "a comes before b in the order": higher value, lower id on ties
bool better(float av, uint ai, float bv, uint bi)
{
    return av > bv || (av == bv && ai < bi);
}

// (key, id) <= (bk, bid) in the order
bool within(uint key, uint id, uint bk, uint bid)
{
    return key < bk || (key == bk && id <= bid);
}

// ---- 64-bit sums as uvec2 (low, high) ----------------------------------------

uvec2 add64(uvec2 a, uvec2 b)
{
    uint c;
    uint lo = uaddCarry(a.x, b.x, c);
    return uvec2(lo, a.y + b.y + c);
}

uvec2 sub64(uvec2 a, uvec2 b)
{
    uint br;
    uint lo = usubBorrow(a.x, b.x, br);
    return uvec2(lo, a.y - b.y - br);
}

bool ge64(uvec2 a, uvec2 b)
{
    return a.y > b.y || (a.y == b.y && a.x >= b.x);
}

// floor(z * p / 2^32)
uvec2 mulhi64(uvec2 z, uint p)
{
    uint hl, ll, hh, lh;
    umulExtended(z.x, p, hl, ll);
    umulExtended(z.y, p, hh, lh);
    return add64(uvec2(lh, hh), uvec2(hl, 0u));
}

// ceil(d / w) - 1 for 1 <= d, 1 <= w, the quotient below 2^32 (bit by bit)
uint rank_of(uvec2 d, uint w)
{
    uvec2 r = uvec2(0u);
    uint q = 0u;
    for (int b = 63; b >= 0; b--) {
        uint bit = b >= 32 ? (d.y >> uint(b - 32)) & 1u : (d.x >> uint(b)) & 1u;
        r = uvec2((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
        if (ge64(r, uvec2(w, 0u))) {
            r = sub64(r, uvec2(w, 0u));
            if (b < 32)
                q |= 1u << uint(b);
        }
    }
    return q + ((r.x | r.y) != 0u ? 1u : 0u) - 1u;
}

// The running sum, over the subgroup's lanes in order, of one 32-bit weight
// each (16-bit halves, whose sums cannot overflow), as 64 bits.
uvec2 sg_inclusive64(uint w)
{
    uint lo = subgroupInclusiveAdd(w & 0xffffu), hi = subgroupInclusiveAdd(w >> 16u);
    return add64(uvec2(lo, 0u), uvec2(hi << 16u, hi >> 16u));
}

// A 64-bit value (lo, hi halves summed separately, < 2^32 each: at most
// 65536 addends) as uvec2
uvec2 from_halves(uint lo16sum, uint hi16sum)
{
    return add64(uvec2(lo16sum, 0u), uvec2(hi16sum << 16u, hi16sum >> 16u));
}
