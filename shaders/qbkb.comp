#version 450
// qbkb: the absorbed query of one decode token in one step (q_b and k_b
// fused).  Per head h, with n = RMSNorm(q_a) * q_a_norm:
//   q[h]               = W_qb[h*(nope+rope) ..+nope+rope) . n
//   qa[h][0..kv_lora)  = k_b[h] . q[h][0..nope)          (the absorbed query)
//   qa[h][kv_lora..)   = RoPE(q[h][nope..]), zero up to RS
// Why: today these are two dependent dispatches (q_b, then k_b per head)
// with a barrier between them; here workgroup (h, g) of G per head
// recomputes the head's nope rows of q_b (the G workgroups of a head read
// the same rows: L2 hits after the first), its 1/G share of the rope rows,
// and then its 1/G share of k_b[h]'s rows -- no step between the two.
// RoPE is ggml's NORM mode with kv_store's table: adjacent pairs (2i, 2i+1)
// rotated by (cos, sin) of the token's position (params word 0).
//
// Both matvecs: a team of TEAM* lanes per row; lane l owns the input's
// vec4s l, l+TEAM, ... (J* of them, held in registers for every row; zero
// past the row) and walks R* rows at a time, every load of the R rows
// issued before the team sums.  Q4_0 and Q8_0 convert their fields
// without conversion instructions (mvx_common.glsl explains the trick);
// the staged input carries the powers of two.  Other types use deq4.
// With PRE (Q4_0 / Q8_0), the words of both matvecs' first pass are loaded
// before anything else, so their memory latency overlaps the staging and
// the q_b rows instead of following them.
// Grid: x = n_head * G, one token (decode).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TQ = 2u;      // q_b type
layout(constant_id = 2) const uint TK = 2u;      // k_b type
layout(constant_id = 3) const uint SG = 32u;
layout(constant_id = 4) const uint TEAMQ = 32u;
layout(constant_id = 5) const uint JQ = 6u;
layout(constant_id = 6) const uint TEAMK = 16u;
layout(constant_id = 7) const uint JK = 3u;
layout(constant_id = 8) const uint RQ = 2u;
layout(constant_id = 9) const uint RK = 2u;
layout(constant_id = 10) const uint XSH = 192u;  // vec4s of the staged q_a (>= JQ*TEAMQ)
layout(constant_id = 11) const uint NSH = 192u;  // floats of q_nope (>= 4*JK*TEAMK)
layout(constant_id = 12) const uint RSH = 64u;   // floats of this workgroup's rope rows
layout(constant_id = 13) const uint PRE = 1u;    // first passes' Q4_0 / Q8_0 words loaded up front
const uint WGS = gl_WorkGroupSize.x;

#include "quant.glsl"

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(set = 0, binding = 1) readonly buffer XBuf { float x[]; } X;
layout(set = 0, binding = 2) readonly buffer NWBuf { float nw[]; } NW;
layout(set = 0, binding = 3) readonly buffer RopeBuf { vec2 cs[]; } RT;
layout(set = 0, binding = 4) writeonly buffer QaBuf { float qa[]; } QA;
layout(set = 0, binding = 5) readonly buffer Params { uint p[]; } P;

layout(push_constant) uniform PC {
    uint Kq, Kqp;        // q_lora and its padded row length (q_b)
    uint hq;             // head byte offset of q_b
    uint nope, rope, kv_lora, RS;
    uint Kkp;            // nope padded (k_b's row length)
    uint hk;             // head byte offset of k_b
    uint kmat;           // blocks per k_b matrix (one per head)
    uint x_off, nw_off;
    float eps;
    uint qa_off;         // head h at qa_off + h*RS
    uint G;              // workgroups per head
} pc;

shared vec4 xs[XSH];
shared float qn[NSH];
shared float qr[RSH];
shared float red[64];

// The powers of two the staged input carries (see wdot).
vec4 x_pre(uint t)
{
    if (t == T_Q4_0)
        return vec4(1.0, 1.0 / 256.0, 1.0 / 65536.0, 1.0 / 4096.0);
    if (t == T_Q8_0)
        return vec4(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0);
    return vec4(1.0);
}

// The field (w & mask) at bits b.. as the float 2^23 + q*2^b, minus
// 2^23 + off*2^b: (q - off) * 2^b, exact below bit 23.
float fld(uint w, uint mask, uint offb) { return uintBitsToFloat((w & mask) | 0x4B000000u) - uintBitsToFloat(0x4B000000u | offb); }

bool fast(uint t) { return t == T_Q4_0 || t == T_Q8_0; }

// Q4_0 / Q8_0: the body word holding row elements 4v..4v+3 (row starting
// at block rb of weight slot s) and the word holding their block's scale.
uint body_word(uint t, uint s, uint rb, uint v)
{
    uint blk = rb + (v >> 3);
    return t == T_Q4_0 ? W[s].w[4u * blk + (v & 3u)] : W[s].w[8u * blk + (v & 7u)];
}
uint head_word(uint s, uint rb, uint v, uint hbase) { return W[s].w[(hbase + 2u * (rb + (v >> 3))) >> 2]; }

// Their dot with x (pre-scaled by x_pre(t)).
float fast_dot(uint t, uint bw, uint hw, uint rb, uint v, uint hbase, vec4 x)
{
    float d = unpackHalf2x16(((hbase + 2u * (rb + (v >> 3))) & 2u) != 0u ? hw >> 16 : hw).x;
    vec4 f;
    if (t == T_Q4_0) {
        // word v&3 of the 4-word body: elements 4v.. are the low nibbles
        // (bits 0, 8, 16, 24) for v&7 < 4, the high ones (4, 12, 20, 28)
        // else: shifted down by v&4 the same four fields either way
        uint a = bw >> (v & 4u), b = a >> 12;
        f = vec4(fld(a, 0xFu, 8u), fld(a, 0xF00u, 8u << 8), fld(a, 0xF0000u, 8u << 16), fld(b, 0xF000u, 8u << 12));
    } else {
        // signed bytes XOR 0x80 = q + 128: bytes 0, 1 in place, 2, 3 after >> 16
        uint a = bw ^ 0x80808080u, b = a >> 16;
        f = vec4(fld(a, 0xFFu, 128u), fld(a, 0xFF00u, 128u << 8), fld(b, 0xFFu, 128u), fld(b, 0xFF00u, 128u << 8));
    }
    return d * dot(f, x);
}

// Row elements 4v..4v+3 (row starting at block rb of weight slot s) dotted
// with x (pre-scaled by x_pre(t)).
float wdot(uint t, uint s, uint rb, uint v, uint hbase, vec4 x)
{
    if (fast(t))
        return fast_dot(t, body_word(t, s, rb, v), head_word(s, rb, v, hbase), rb, v, hbase, x);
    uint vpb = blk_of(t) / 4u;
    return dot(deq4(t, s, rb + v / vpb, v % vpb, hbase), x);
}

// The first passes' words (PRE with Q4_0 / Q8_0): q_b's R rows x J units, k_b's.
bool preq() { return PRE == 1u && fast(TQ); }
bool prek() { return PRE == 1u && fast(TK); }
uint qpw[PRE * (RQ * JQ - 1u) + 1u], qph[PRE * (RQ * JQ - 1u) + 1u];
uint kpw[PRE * (RK * JK - 1u) + 1u], kph[PRE * (RK * JK - 1u) + 1u];

float team_sum(float v, uint team)
{
    for (uint o = team >> 1; o > 0u; o >>= 1)
        v += subgroupShuffleXor(v, o);
    return v;
}

uint lin_id() { return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID; }

// Stages n = q_a * q_a_norm (vec4s past Kq zero) times x_pre(TQ); returns
// 1/rms of q_a, applied to the q rows.
float stage_q_a()
{
    float ss = 0.0;
    for (uint v = gl_LocalInvocationIndex; v < XSH; v += WGS) {
        vec4 a = vec4(0.0);
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint e = 4u * v + i;
            float xv = e < pc.Kq ? X.x[pc.x_off + e] : 0.0;
            ss += xv * xv;
            a[i] = e < pc.Kq ? xv * NW.nw[pc.nw_off + e] : 0.0;
        }
        xs[v] = a * x_pre(TQ);
    }
    ss = subgroupAdd(ss);
    if (subgroupElect())
        red[gl_SubgroupID] = ss;
    barrier();
    float t = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        t += red[i];
    return inversesqrt(t / float(pc.Kq) + pc.eps);
}

// Block of row i (< nrows: the nope rows, then the rope rows r0..) of head h in q_b.
uint q_rb(uint h, uint r0, uint nrows, uint i)
{
    i = min(i, nrows - 1u);
    uint hr = i < pc.nope ? i : r0 + i;  // row within the head
    return (h * (pc.nope + pc.rope) + hr) * (pc.Kqp / blk_of(TQ));
}

// Block of row `row` (clamped to k1) of k_b[h].
uint k_rb(uint h, uint k1, uint row) { return h * pc.kmat + min(row, k1 - 1u) * (pc.Kkp / blk_of(TK)); }

// PRE: the words of both first passes (as q_pass and k_pass walk them).
void preload(uint h, uint r0, uint nrows, uint k0, uint k1)
{
    uint lid = lin_id();
    if (preq()) {
        uint team = lid / TEAMQ, lane = lid % TEAMQ, nv = pc.Kqp / 4u;
        [[unroll]] for (uint r = 0u; r < RQ; r++) {
            uint rb = q_rb(h, r0, nrows, team * RQ + r);
            [[unroll]] for (uint j = 0u; j < JQ; j++) {
                uint v = min(lane + j * TEAMQ, nv - 1u);
                qpw[r * JQ + j] = body_word(TQ, 0u, rb, v);
                qph[r * JQ + j] = head_word(0u, rb, v, pc.hq);
            }
        }
    }
    if (prek() && k0 < k1) {
        uint team = lid / TEAMK, lane = lid % TEAMK, nv = pc.Kkp / 4u;
        [[unroll]] for (uint r = 0u; r < RK; r++) {
            uint rb = k_rb(h, k1, k0 + team * RK + r);
            [[unroll]] for (uint j = 0u; j < JK; j++) {
                uint v = min(lane + j * TEAMK, nv - 1u);
                kpw[r * JK + j] = body_word(TK, 1u, rb, v);
                kph[r * JK + j] = head_word(1u, rb, v, pc.hk);
            }
        }
    }
}

// One pass of the q_b rows of head h: rows i < nope are the nope rows
// (into qn), rows nope.. the rope rows r0.. (into qr); nrows = nope + rope
// rows here.  pre: the words are those preload() fetched (pass 0).
void q_pass(uint h, uint r0, uint nrows, uint i0, float sc, bool pre, vec4 xr[JQ])
{
    uint lid = lin_id(), team = lid / TEAMQ, lane = lid % TEAMQ, nv = pc.Kqp / 4u;
    float acc[RQ];
    [[unroll]] for (uint r = 0u; r < RQ; r++) {
        uint i = i0 + team * RQ + r, rb = q_rb(h, r0, nrows, i);
        acc[r] = 0.0;
        if (i < nrows)  // uniform in the team; the team sums below stay outside
            [[unroll]] for (uint j = 0u; j < JQ; j++) {
                uint v = min(lane + j * TEAMQ, nv - 1u);
                acc[r] += pre ? fast_dot(TQ, qpw[r * JQ + j], qph[r * JQ + j], rb, v, pc.hq, xr[j])
                              : wdot(TQ, 0u, rb, v, pc.hq, xr[j]);
            }
    }
    [[unroll]] for (uint r = 0u; r < RQ; r++) {
        uint i = i0 + team * RQ + r;
        float v = team_sum(acc[r], TEAMQ) * sc;
        if (lane == 0u && i < nrows) {
            if (i < pc.nope)
                qn[i] = v;
            else
                qr[i - pc.nope] = v;
        }
    }
}

void q_rows(uint h, uint r0, uint nrows, float sc)
{
    const uint NT = WGS / TEAMQ;
    uint lane = lin_id() % TEAMQ;
    vec4 xr[JQ];
    [[unroll]] for (uint j = 0u; j < JQ; j++)
        xr[j] = xs[lane + j * TEAMQ];
    q_pass(h, r0, nrows, 0u, sc, preq(), xr);
    for (uint i0 = NT * RQ; i0 < nrows; i0 += NT * RQ)  // uniform trip count
        q_pass(h, r0, nrows, i0, sc, false, xr);
}

// One pass of k_b[h]'s rows [k0, k1) into qa[h][k0..k1), from qn (zero past nope).
void k_pass(uint h, uint k1, uint i0, bool pre, vec4 xr[JK])
{
    uint lid = lin_id(), team = lid / TEAMK, lane = lid % TEAMK, nv = pc.Kkp / 4u;
    float acc[RK];
    [[unroll]] for (uint r = 0u; r < RK; r++) {
        uint row = i0 + team * RK + r, rb = k_rb(h, k1, row);
        acc[r] = 0.0;
        if (row < k1)  // uniform in the team
            [[unroll]] for (uint j = 0u; j < JK; j++) {
                uint v = min(lane + j * TEAMK, nv - 1u);
                acc[r] += pre ? fast_dot(TK, kpw[r * JK + j], kph[r * JK + j], rb, v, pc.hk, xr[j])
                              : wdot(TK, 1u, rb, v, pc.hk, xr[j]);
            }
    }
    [[unroll]] for (uint r = 0u; r < RK; r++) {
        uint row = i0 + team * RK + r;
        float v = team_sum(acc[r], TEAMK);
        if (lane == 0u && row < k1)
            QA.qa[pc.qa_off + h * pc.RS + row] = v;
    }
}

void k_rows(uint h, uint k0, uint k1)
{
    const uint NT = WGS / TEAMK;
    uint lane = lin_id() % TEAMK;
    vec4 xr[JK];
    [[unroll]] for (uint j = 0u; j < JK; j++) {
        uint e = 4u * (lane + j * TEAMK);
        xr[j] = vec4(qn[e], qn[e + 1u], qn[e + 2u], qn[e + 3u]) * x_pre(TK);
    }
    k_pass(h, k1, k0, prek(), xr);
    for (uint i0 = k0 + NT * RK; i0 < k1; i0 += NT * RK)  // uniform trip count
        k_pass(h, k1, i0, false, xr);
}

void main()
{
    uint h = gl_WorkGroupID.x / pc.G, g = gl_WorkGroupID.x % pc.G, tid = gl_LocalInvocationIndex;
    uint pos = P.p[0];
    // this workgroup's rope rows (whole pairs) and k_b rows
    uint rp = (pc.rope / 2u + pc.G - 1u) / pc.G * 2u;
    uint r0 = min(g * rp, pc.rope), r1 = min(r0 + rp, pc.rope);
    uint kr = (pc.kv_lora + pc.G - 1u) / pc.G;
    uint k0 = min(g * kr, pc.kv_lora), k1 = min(k0 + kr, pc.kv_lora);

    preload(h, r0, pc.nope + (r1 - r0), k0, k1);
    for (uint i = pc.nope + tid; i < NSH; i += WGS)
        qn[i] = 0.0;  // k_b's padding
    float sc = stage_q_a();  // its barrier also orders qn's zeros
    q_rows(h, r0, pc.nope + (r1 - r0), sc);
    barrier();

    // the rotated rope rows, and (workgroup 0 of the head) the row's padding
    uint ob = pc.qa_off + h * pc.RS + pc.kv_lora;
    for (uint j = tid; j < r1 - r0; j += WGS) {
        vec2 c = RT.cs[pos * (pc.rope / 2u) + (r0 + j) / 2u];
        float x0 = qr[j & ~1u], x1 = qr[j | 1u];
        QA.qa[ob + r0 + j] = (j & 1u) == 0u ? x0 * c.x - x1 * c.y : x0 * c.y + x1 * c.x;
    }
    if (g == 0u)
        for (uint j = pc.rope + tid; j < pc.RS - pc.kv_lora; j += WGS)
            QA.qa[ob + j] = 0.0;
    if (k0 < k1)
        k_rows(h, k0, k1);
}
