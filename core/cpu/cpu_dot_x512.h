/* cpu_dot_x512.h: the 512-bit x86 kernels, written once and compiled twice:
 * by cpu_dot_avx512.c (AVX-512 F/BW/VL/DQ: u8 x s8 through vpmaddubsw +
 * vpmaddwd) and by cpu_dot_avx512vnni.c (CPU_X86_VNNI: vpdpbusd, vpdpwssd).
 * The includer defines CPU_X86_TARGET and CPU_X86_FILL; the fill replaces
 * the block formats' kernels of the 256-bit set it starts from (float rows,
 * attention and the preparers stay 256-bit: they are not where the time
 * goes).
 *
 * 32-element formats take two blocks per 64-byte vector.  The levels of a
 * pair of blocks are unpacked once.  Unsigned ones (Q4_0, Q5_0 before their
 * offset, Q4_1, Q5_1) are vpdpbusd's (vpmaddubsw's) unsigned operand
 * directly; Q4_0 / Q5_0's levels less their offset are signed, against
 * activations biased by 128 (offset_pair).  Signed ones (Q8_0 as stored,
 * IQ4_NL and MXFP4 through their tables), per token:
 *  - VNNI: vpdpbusd wants its first operand unsigned, so the activations are
 *    biased by 128 (one xor): (q + 128) . lv = q . lv + 128 sum(lv), and
 *    128 sum(lv) -- the same for every token -- comes off once per pair;
 *  - without VNNI: |lv| . sign(q, lv) through vpmaddubsw, as ggml does.
 * Then one conversion and one FMA with the two blocks' d_w d_x spread over
 * their halves (a permute of the two products).
 *
 * Q6_K takes 64 elements (four sub-blocks of 16) per vector: vpmaddubsw
 * into 16-bit pairs, vpmaddwd with the sub-blocks' scales, one conversion
 * per super-block, as the 256-bit kernel (Q3_K and Q2_K the same, with
 * their 2-bit codes); IQ4_XS, Q4_K and Q5_K the same way, 64 elements (two
 * sub-blocks of 32) per vector.  (An earlier 512-bit
 * Q4_K / Q5_K, commit dd277a1, measured slower than the 256-bit one on a
 * Zen 4; the present one decodes a whole 64-byte load of codes per step --
 * four sub-blocks -- and unpacks the scales in vector registers, and
 * measured 1.65x the 256-bit kernel's GB/s from the L2 cache on the same
 * Zen 4: cpu_kernel_bench -m 0.5.) */
#include <immintrin.h>
#include <string.h>

#include "cpu_iq4.h"
#include "cpu_kernels.h"
#include "cpu_lowbit.h"
#include "format/quant_grids.h"

#define TGT __attribute__((target(CPU_X86_TARGET)))
#define INL static inline __attribute__((always_inline, target(CPU_X86_TARGET)))

/* ======================================================================
 * Helpers
 * ====================================================================== */

INL float half(const void *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

INL __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

INL __m512i load512(const void *p)
{
    return _mm512_loadu_si512(p);
}

INL __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* acc (16 int32 lanes) += 16-bit pairs p times 16-bit scales s. */
INL __m512i add_scaled(__m512i acc, __m512i p, __m512i s)
{
#ifdef CPU_X86_VNNI
    return _mm512_dpwssd_epi32(acc, p, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, s));
#endif
}

/* The signed dot products of a pair of blocks, 8 lanes each.  `pre` is
 * what the weights contribute once per pair (VNNI: 128 sum(lv) per lane;
 * else |lv|). */
typedef struct {
    __m512i lv, pre;
} lv_pair;

INL lv_pair pair_of(__m512i lv)
{
    lv_pair p = {lv, lv};
#ifdef CPU_X86_VNNI
    p.pre = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), lv), 7);
#else
    p.pre = _mm512_abs_epi8(lv);
#endif
    return p;
}

INL __m512i pair_dot(const lv_pair *p, __m512i y)
{
#ifdef CPU_X86_VNNI
    const __m512i yu = _mm512_xor_si512(y, _mm512_set1_epi8((char)0x80));
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), yu, p->lv), p->pre);
#else
    const __m512i sy = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(p->lv), _mm512_setzero_si512(), y);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(p->pre, sy), _mm512_set1_epi16(1));
#endif
}

INL float hsum16(__m512 v)
{
    return _mm512_reduce_add_ps(v);
}

/* [x0 x 8, x1 x 8] from the two floats in the low lanes of v. */
INL __m512 spread2(__m128 v)
{
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

/* Two floats at p (4-byte aligned only: through the unaligned 64-bit load). */
INL __m128 load2f(const float *p)
{
    return _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)p));
}

/* The f16 scales at p0 and p1 as floats in lanes 0 and 1. */
INL __m128 half2(const void *p0, const void *p1)
{
    uint16_t a, b;
    memcpy(&a, p0, 2);
    memcpy(&b, p1, 2);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)a | (uint32_t)b << 16)));
}

/* ======================================================================
 * 32-element formats, two blocks at a time
 * ====================================================================== */

typedef struct {
    const int8_t *q[CPU_TILE_TOK];
    const float *d[CPU_TILE_TOK], *s[CPU_TILE_TOK];
    const int32_t *sum[CPU_TILE_TOK];
} act32;

/* The tile's activations (the packed kernels'; dot32_nt takes what it needs). */
INL void act32_init(act32 *a, const void *const *x, int nt, uint64_t n)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        a->q[t] = cpu_act_q(x[t]);
        a->d[t] = cpu_act_d(x[t], n);
        a->s[t] = cpu_act_s(x[t], n);
        a->sum[t] = cpu_act_sum(x[t], n);
    }
}

/* The dot products of a pair of blocks of unsigned levels (Q4_0 / Q5_0
 * before their offset, Q4_1, Q5_1): no sign trick, the levels are the
 * unsigned operand. */
INL __m512i pair_dot_unsigned(__m512i lv, __m512i y)
{
#ifdef CPU_X86_VNNI
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), lv, y);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(lv, y), _mm512_set1_epi16(1));
#endif
}

/* Q4_0 / Q5_0: the levels less their offset (signed) against activations
 * made unsigned by a bias of 128 (one xor a token):
 *   (q + 128) . (lv - off) = q . (lv - off) + 128 sum(lv - off),
 * the last term the weights' alone -- once a pair for every token, where
 * the offset through sum(q) cost each token a cross-lane permute and a
 * subtraction.  Each block's integer dot product stays exact (and the same
 * as before).  `keep` masks the bytes of the blocks present (the odd last
 * block: its upper half zero in both terms). */
typedef struct {
    __m512i lvs, base; /* base: VNNI -128 sum(lv - off) per lane (the dot's start); else +128 sum */
} off_pair;

INL off_pair offset_pair(__m512i lv, int off, __mmask64 keep)
{
    off_pair p;
    p.lvs = _mm512_maskz_sub_epi8(keep, lv, _mm512_set1_epi8((char)off));
#ifdef CPU_X86_VNNI
    if (keep == ~(__mmask64)0) /* -128 (sum(lv) - 4 off) straight from lv */
        p.base = _mm512_dpbusd_epi32(_mm512_set1_epi32(512 * off), lv, _mm512_set1_epi8(-128));
    else
        p.base = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80),
                                     _mm512_sub_epi8(_mm512_setzero_si512(), p.lvs));
#else
    p.base = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_set1_epi8((char)0x80), p.lvs), _mm512_set1_epi16(1));
#endif
    return p;
}

INL __m512i offset_dot(const off_pair *p, __m512i y)
{
    const __m512i yu = _mm512_xor_si512(y, _mm512_set1_epi8((char)0x80));
#ifdef CPU_X86_VNNI
    return _mm512_dpbusd_epi32(p->base, yu, p->lvs);
#else
    return _mm512_sub_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(yu, p->lvs), _mm512_set1_epi16(1)), p->base);
#endif
}

/* 16 packed bytes of two blocks -> their 64 levels (lo nibbles, hi
 * nibbles, per block). */
INL __m512i nibbles64(const uint8_t *qs0, const uint8_t *qs1)
{
    const __m128i a = _mm_loadu_si128((const __m128i *)qs0), b = _mm_loadu_si128((const __m128i *)qs1);
    const __m256i x = _mm256_set_m128i(_mm_srli_epi16(a, 4), a), y = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm512_and_si512(join256(x, y), _mm512_set1_epi8(0x0F));
}

/* Two 18-byte blocks (f16 d, 16 bytes of nibbles: Q4_0, IQ4_NL) from one
 * masked load (36 bytes; nothing past them is touched): their 64 levels by
 * one word permute (each block's nibble bytes twice) and a shift of the
 * second copy, and their scales spread over the pair's lanes by another --
 * where two 16-byte loads and three inserts, two scalar loads of d and a
 * permute of the floats took the pair's share of the time.  Only in tiles
 * of 2+ tokens: alone, with the weights streaming from memory, a token ran
 * ~10 % slower this way than through nibbles64 (kb, 28 MB of rows), though
 * faster from the cache.  The same levels and scales either way. */
INL __m512i nibbles_pair18(const void *blocks, __m512 *dws)
{
    const __m512i raw = _mm512_maskz_loadu_epi16(0x3FFFF, blocks);
    const __m512i take = _mm512_set_epi16(17, 16, 15, 14, 13, 12, 11, 10, 17, 16, 15, 14, 13, 12, 11, 10, /* b+1 */
                                          8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 6, 5, 4, 3, 2, 1);        /* b */
    const __m512i shift = _mm512_set_epi16(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, /* high nibbles */
                                           4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i lv = _mm512_srlv_epi16(_mm512_permutexvar_epi16(take, raw), shift);
    const __m512i dsel = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* unused */
                                          9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0);
    *dws = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(dsel, raw)));
    return _mm512_and_si512(lv, _mm512_set1_epi8(0x0F));
}

/* A Q5 block's 32 fifth bits as 0 or 16 in byte j (bit j of qh). */
INL __m256i fifth_bits(const uint8_t *qh_bytes)
{
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Per format: the signed levels of blocks b, b+1, their d_w pair and (Q4_1,
 * Q5_1) their mins. */
enum { F_Q4_0, F_Q4_1, F_Q5_0, F_Q5_1, F_Q8_0, F_IQ4_NL, F_MXFP4 };

/* IQ4_NL's 16 levels in each 128-bit lane, for a byte shuffle of nibbles. */
INL __m512i iq4_table(void)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)cpu_iq4_levels));
}

/* MXFP4's 16 levels the same way. */
INL __m512i mxfp4_table(void)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)cpu_mxfp4_levels));
}

INL __m512i levels2(int f, const void *row, uint64_t b, __m128 *dw, __m128 *mw)
{
    switch (f) {
    case F_Q4_0: {
        const block_q4_0 *w = (const block_q4_0 *)row + b;
        *dw = half2(&w[0].d, &w[1].d);
        return nibbles64(w[0].qs, w[1].qs);
    }
    case F_Q4_1: {
        const block_q4_1 *w = (const block_q4_1 *)row + b;
        *dw = half2(&w[0].d, &w[1].d);
        *mw = half2(&w[0].m, &w[1].m);
        return nibbles64(w[0].qs, w[1].qs);
    }
    case F_Q5_0: {
        const block_q5_0 *w = (const block_q5_0 *)row + b;
        *dw = half2(&w[0].d, &w[1].d);
        const __m512i hb = join256(fifth_bits(w[0].qh), fifth_bits(w[1].qh));
        return _mm512_or_si512(nibbles64(w[0].qs, w[1].qs), hb);
    }
    case F_Q5_1: {
        const block_q5_1 *w = (const block_q5_1 *)row + b;
        *dw = half2(&w[0].d, &w[1].d);
        *mw = half2(&w[0].m, &w[1].m);
        const __m512i hb = join256(fifth_bits(w[0].qh), fifth_bits(w[1].qh));
        return _mm512_or_si512(nibbles64(w[0].qs, w[1].qs), hb);
    }
    case F_IQ4_NL: {
        const block_iq4_nl *w = (const block_iq4_nl *)row + b;
        *dw = half2(&w[0].d, &w[1].d);
        return _mm512_shuffle_epi8(iq4_table(), nibbles64(w[0].qs, w[1].qs));
    }
    case F_MXFP4: {
        const block_mxfp4 *w = (const block_mxfp4 *)row + b;
        *dw = _mm_setr_ps(cpu_mxfp4_scale(w[0].e), cpu_mxfp4_scale(w[1].e), 0, 0);
        return _mm512_shuffle_epi8(mxfp4_table(), nibbles64(w[0].qs, w[1].qs));
    }
    default: {
        const block_q8_0 *w = (const block_q8_0 *)row + b;
        *dw = half2(&w[0].d, &w[1].d);
        return join256(load256(w[0].qs), load256(w[1].qs));
    }
    }
}

/* One block (the odd last one) as the low half of a pair, the high half
 * zero. */
INL __m512i levels1(int f, const void *row, uint64_t b, __m128 *dw, __m128 *mw)
{
    __m512i lv;
    switch (f) {
    case F_Q4_0: {
        const block_q4_0 *w = (const block_q4_0 *)row + b;
        *dw = _mm_setr_ps(half(&w->d), 0, 0, 0);
        lv = nibbles64(w->qs, w->qs);
        break;
    }
    case F_Q4_1: {
        const block_q4_1 *w = (const block_q4_1 *)row + b;
        *dw = _mm_setr_ps(half(&w->d), 0, 0, 0);
        *mw = _mm_setr_ps(half(&w->m), 0, 0, 0);
        lv = nibbles64(w->qs, w->qs);
        break;
    }
    case F_Q5_0: {
        const block_q5_0 *w = (const block_q5_0 *)row + b;
        *dw = _mm_setr_ps(half(&w->d), 0, 0, 0);
        const __m256i hb = fifth_bits(w->qh);
        lv = _mm512_or_si512(nibbles64(w->qs, w->qs), join256(hb, hb));
        break;
    }
    case F_Q5_1: {
        const block_q5_1 *w = (const block_q5_1 *)row + b;
        *dw = _mm_setr_ps(half(&w->d), 0, 0, 0);
        *mw = _mm_setr_ps(half(&w->m), 0, 0, 0);
        const __m256i hb = fifth_bits(w->qh);
        lv = _mm512_or_si512(nibbles64(w->qs, w->qs), join256(hb, hb));
        break;
    }
    case F_IQ4_NL: {
        const block_iq4_nl *w = (const block_iq4_nl *)row + b;
        *dw = _mm_setr_ps(half(&w->d), 0, 0, 0);
        lv = _mm512_shuffle_epi8(iq4_table(), nibbles64(w->qs, w->qs));
        break;
    }
    case F_MXFP4: {
        const block_mxfp4 *w = (const block_mxfp4 *)row + b;
        *dw = _mm_setr_ps(cpu_mxfp4_scale(w->e), 0, 0, 0);
        lv = _mm512_shuffle_epi8(mxfp4_table(), nibbles64(w->qs, w->qs));
        break;
    }
    default: {
        const block_q8_0 *w = (const block_q8_0 *)row + b;
        *dw = _mm_setr_ps(half(&w->d), 0, 0, 0);
        lv = _mm512_castsi256_si512(load256(w->qs));
        break;
    }
    }
    return _mm512_maskz_mov_epi64(0x0F, lv); /* the upper block's lanes zero */
}

/* Tokens of the tile against the 32-element format f: pairs of blocks into
 * a 16-lane sum per token; mins (Q4_1, Q5_1) as m_w * s per block.  Q4_0 /
 * Q5_0's offset of 8 / 16 stays in the integer sums (offset_pair), so each
 * block's integer dot product is exact, as llama.cpp's (an f32 correction
 * instead moved a fixture's greedy tokens). */
INL void dot32_nt(int f, const void *row, const void *const *x, int nt, uint64_t n, float *out,
                  const float *const *dxs)
{
    const bool mins = f == F_Q4_1 || f == F_Q5_1;
    const int off = f == F_Q4_0 ? 8 : f == F_Q5_0 ? 16 : 0;
    const bool is_unsigned = mins || off;
    const uint64_t nb = n / 32;
    act32 a;
    __m512 acc[CPU_TILE_TOK];
    __m128 accm[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        a.q[t] = cpu_act_q(x[t]);
        a.d[t] = cpu_act_d(x[t], n);
        a.s[t] = cpu_act_s(x[t], n);
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm_setzero_ps();
    }
    uint64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m128 dw = _mm_setzero_ps(), mw = _mm_setzero_ps();
        __m512 dws;
        __m512i lv;
        if ((f == F_Q4_0 || f == F_IQ4_NL) && nt >= 2) {
            lv = nibbles_pair18((const block_q4_0 *)row + b, &dws);
            if (f == F_IQ4_NL)
                lv = _mm512_shuffle_epi8(iq4_table(), lv);
        } else {
            lv = levels2(f, row, b, &dw, &mw);
            dws = spread2(dw);
        }
        const lv_pair lp = pair_of(is_unsigned ? _mm512_setzero_si512() : lv);
        const off_pair op = offset_pair(off ? lv : _mm512_setzero_si512(), off, ~(__mmask64)0);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512i y = load512(a.q[t] + 32 * b);
            const __m512i p = off ? offset_dot(&op, y) : is_unsigned ? pair_dot_unsigned(lv, y) : pair_dot(&lp, y);
            const __m512 dd = dxs ? _mm512_mul_ps(dws, _mm512_load_ps(dxs[t] + 8 * b))
                                  : _mm512_mul_ps(dws, spread2(load2f(a.d[t] + b)));
            acc[t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(p), acc[t]);
            if (mins)
                accm[t] = _mm_fmadd_ps(mw, load2f(a.s[t] + b), accm[t]);
        }
    }
    if (b < nb) {
        __m128 dw, mw = _mm_setzero_ps();
        const __m512i lv = levels1(f, row, b, &dw, &mw);
        const lv_pair lp = pair_of(is_unsigned ? _mm512_setzero_si512() : lv);
        const off_pair op = offset_pair(off ? lv : _mm512_setzero_si512(), off, (__mmask64)0xFFFFFFFFu);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512i y = _mm512_zextsi256_si512(load256(a.q[t] + 32 * b));
            const __m512i p = off ? offset_dot(&op, y) : is_unsigned ? pair_dot_unsigned(lv, y) : pair_dot(&lp, y);
            const __m128 dd = _mm_mul_ps(dw, _mm_load_ss(a.d[t] + b));
            acc[t] = _mm512_fmadd_ps(spread2(dd), _mm512_cvtepi32_ps(p), acc[t]);
            if (mins)
                accm[t] = _mm_fmadd_ps(mw, _mm_load_ss(a.s[t] + b), accm[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        float m = 0;
        if (mins) {
            __m128 s = _mm_add_ps(accm[t], _mm_movehdup_ps(accm[t]));
            m = _mm_cvtss_f32(s);
        }
        out[t] = hsum16(acc[t]) + m;
    }
}

/* A cpu_rows_fn over body(row, x, NT, n, out) with a constant NT. */
#define ROWS_NT(body, NT)                                                                    \
    for (uint64_t r = 0; r < n_rows; r++) {                                                  \
        float o_[CPU_TILE_TOK];                                                              \
        body((const char *)w + r * row_bytes, x, NT, n, o_);                                 \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)                                                         \
            y[t][r] = accumulate ? y[t][r] + o_[t] : o_[t];                                  \
    }
#define TILE_DISPATCH(name, body)                                                                         \
    TGT static void name(const void *w, uint64_t row_bytes, uint64_t n_rows, const void *const *x, int nt, \
                         uint64_t n, float *const *y, bool accumulate)                                     \
    {                                                                                                     \
        switch (nt) {                                                                                     \
        case 1: ROWS_NT(body, 1) break;                                                                   \
        case 2: ROWS_NT(body, 2) break;                                                                   \
        case 3: ROWS_NT(body, 3) break;                                                                   \
        case 4: ROWS_NT(body, 4) break;                                                                   \
        case 5: ROWS_NT(body, 5) break;                                                                   \
        case 6: ROWS_NT(body, 6) break;                                                                   \
        case 7: ROWS_NT(body, 7) break;                                                                   \
        default: ROWS_NT(body, 8) break;                                                                  \
        }                                                                                                 \
    }

/* Each token's d_x spread over its block's 8 lanes, once a call for all
 * its rows: the pair's scales then come from one aligned load, where
 * spreading them per row took a cross-lane permute per token and pair.
 * Up to SPREAD_MAX_N elements (8 KiB a token on the stack; GLM's gate, up
 * and down are 2048 / 1536), else per row as before; in tiles of 2+ tokens
 * (a token alone, streaming its rows from memory, measured slower with
 * it).  The products d_w d_x are the same floats either way. */
enum { SPREAD_MAX_N = 2048 };

INL void spread_dx(const void *const *x, int nt, uint64_t n, float (*buf)[SPREAD_MAX_N / 4], const float **dxs)
{
    for (int t = 0; t < nt; t++) {
        const float *d = cpu_act_d(x[t], n);
        for (uint64_t b = 0; b < n / 32; b++)
            _mm256_store_ps(buf[t] + 8 * b, _mm256_set1_ps(d[b]));
        dxs[t] = buf[t];
    }
}

#define ROWS32_NT(fmt, NT, dxs)                                                              \
    for (uint64_t r = 0; r < n_rows; r++) {                                                  \
        float o_[CPU_TILE_TOK];                                                              \
        dot32_nt(fmt, (const char *)w + r * row_bytes, x, NT, n, o_, dxs);                   \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)                                 \
            y[t][r] = accumulate ? y[t][r] + o_[t] : o_[t];                                  \
    }
#define ROWS32(fmt, dxs)                                                                     \
    switch (nt) {                                                                            \
    case 1: ROWS32_NT(fmt, 1, dxs) break;                                                    \
    case 2: ROWS32_NT(fmt, 2, dxs) break;                                                    \
    case 3: ROWS32_NT(fmt, 3, dxs) break;                                                    \
    case 4: ROWS32_NT(fmt, 4, dxs) break;                                                    \
    case 5: ROWS32_NT(fmt, 5, dxs) break;                                                    \
    case 6: ROWS32_NT(fmt, 6, dxs) break;                                                    \
    case 7: ROWS32_NT(fmt, 7, dxs) break;                                                    \
    default: ROWS32_NT(fmt, 8, dxs) break;                                                   \
    }
#define FORMAT32(fmt, suffix)                                                                              \
    TGT static void z_dot_##suffix(const void *w, uint64_t row_bytes, uint64_t n_rows, const void *const *x, \
                                   int nt, uint64_t n, float *const *y, bool accumulate)                     \
    {                                                                                                      \
        if (nt >= 2 && n_rows >= 4 && n <= SPREAD_MAX_N) {                                                 \
            float buf_[CPU_TILE_TOK][SPREAD_MAX_N / 4] __attribute__((aligned(64)));                       \
            const float *dxs_[CPU_TILE_TOK];                                                               \
            spread_dx(x, nt, n, buf_, dxs_);                                                               \
            ROWS32(fmt, dxs_)                                                                              \
        } else {                                                                                           \
            ROWS32(fmt, NULL)                                                                              \
        }                                                                                                  \
    }

/* ======================================================================
 * Q4_0 (and with VNNI IQ4_NL) packed by 16 rows (cpu_pack.h): one row per
 * 32-bit lane.  Per block, the 4 chunks' 8 vectors of levels are unpacked
 * once for the tile (IQ4_NL's through a vpshufb of its table plus 128);
 * per token, 8 vpdpbusd (without VNNI: 8 vpmaddubsw added in 16 bits, then
 * one vpmaddwd) against the token's 4-byte groups broadcast give the 16
 * rows' exact integer dot products; the offset of 8 (IQ4_NL: the bias of
 * 128) comes off through the token's block sum.  Then acc += (d_w d_x) s, multiply then add as the
 * portable kernel (no FMA): the portable set's bits.
 * ====================================================================== */

INL __m512i packed_block16(const __m512i *lo, const __m512i *hi, const int8_t *q, int32_t qsum, int32_t bias)
{
#ifdef CPU_X86_VNNI
    __m512i s = _mm512_set1_epi32(-bias * qsum);
    for (int c = 0; c < 4; c++) {
        int32_t a, b;
        memcpy(&a, q + 4 * c, 4);
        memcpy(&b, q + 16 + 4 * c, 4);
        s = _mm512_dpbusd_epi32(s, lo[c], _mm512_set1_epi32(a));
        s = _mm512_dpbusd_epi32(s, hi[c], _mm512_set1_epi32(b));
    }
    return s;
#else
    /* each 16-bit lane: 16 products of at most 15 x 128, no saturation */
    __m512i p = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        int32_t a, b;
        memcpy(&a, q + 4 * c, 4);
        memcpy(&b, q + 16 + 4 * c, 4);
        p = _mm512_add_epi16(p, _mm512_maddubs_epi16(lo[c], _mm512_set1_epi32(a)));
        p = _mm512_add_epi16(p, _mm512_maddubs_epi16(hi[c], _mm512_set1_epi32(b)));
    }
    return _mm512_sub_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), _mm512_set1_epi32(bias * qsum));
#endif
}

/* IQ4_NL's table, each level plus 128 (an unsigned byte, for vpdpbusd),
 * in all four 128-bit lanes for vpshufb. */
INL __m512i iq4_biased_table(void)
{
    int8_t t[16];
    for (int i = 0; i < 16; i++)
        t[i] = (int8_t)(cpu_iq4_levels[i] ^ (int8_t)0x80);
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
}

/* Q5_0's fifth bits, 16 rows' qh words (one per 32-bit lane), into the
 * levels of chunk c: byte j of a lane takes bit 4c + j (lo) or 16 + 4c + j
 * (hi) of its row's word -- a vpshufb puts the word's byte holding them in
 * all four bytes, a test against (1, 2, 4, 8) << 4 (c odd) picks each one. */
INL void q5_high_bits(__m512i qh, int c, __m512i *lo, __m512i *hi)
{
    const __m512i base = _mm512_broadcast_i32x4(_mm_set_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0));
    const __m512i pat = _mm512_set1_epi32(c % 2 ? (int)0x80402010u : 0x08040201);
    const __m512i bl = _mm512_shuffle_epi8(qh, _mm512_add_epi8(base, _mm512_set1_epi8((char)(c / 2))));
    const __m512i bh = _mm512_shuffle_epi8(qh, _mm512_add_epi8(base, _mm512_set1_epi8((char)(2 + c / 2))));
    const __m512i sixteen = _mm512_set1_epi8(16);
    *lo = _mm512_mask_add_epi8(*lo, _mm512_test_epi8_mask(bl, pat), *lo, sixteen);
    *hi = _mm512_mask_add_epi8(*hi, _mm512_test_epi8_mask(bh, pat), *hi, sixteen);
}

/* MXFP4's table the same way. */
INL __m512i mxfp4_biased_table(void)
{
    int8_t t[16];
    for (int i = 0; i < 16; i++)
        t[i] = (int8_t)(cpu_mxfp4_levels[i] ^ (int8_t)0x80);
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
}

/* 16 rows' MXFP4 scales from their exponent bytes, as cpu_mxfp4_scale:
 * e < 2 the subnormals 0x00200000 << e, else (e - 1) << 23. */
INL __m512 mxfp4_scales16(const uint8_t *e)
{
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    const __mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
}

enum { NIB_Q4_0, NIB_IQ4_NL, NIB_Q5_0, NIB_MXFP4 };

/* A group of 16 rows of 4-bit codes: Q4_0's levels are the nibbles less 8;
 * IQ4_NL's and MXFP4's their tables', looked up biased by 128 through
 * vpshufb (MXFP4's scales made from the rows' exponent bytes); Q5_0's the
 * nibbles and their fifth bits less 16.  IQ4_NL, MXFP4 and Q5_0 with VNNI
 * only: vpmaddubsw's 16-bit sums of their levels could saturate. */
INL void packed_nibble_group(const uint8_t *group, const void *const *x, int nt, uint64_t n, float *const *y,
                             uint64_t r0, bool accumulate, int kind)
{
    const __m512i tab = kind == NIB_IQ4_NL ? iq4_biased_table()
                        : kind == NIB_MXFP4 ? mxfp4_biased_table()
                                            : _mm512_setzero_si512();
    const int32_t bias = kind == NIB_IQ4_NL || kind == NIB_MXFP4 ? 128 : kind == NIB_Q5_0 ? 16 : 8;
    const uint64_t stride = kind == NIB_Q5_0 ? 352 : 288, qs_at = kind == NIB_Q5_0 ? 96 : 32;
    act32 a;
    act32_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    const uint8_t *blk = group;
    for (uint64_t b = 0; b < n / 32; b++, blk += stride) {
        const __m512 dw = kind == NIB_MXFP4 ? mxfp4_scales16(blk) : _mm512_cvtph_ps(load256(blk));
        __m512i lo[4], hi[4];
        for (int c = 0; c < 4; c++) {
            const __m512i v = load512(blk + qs_at + 64 * c);
            lo[c] = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
            hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
            if (kind == NIB_IQ4_NL || kind == NIB_MXFP4) {
                lo[c] = _mm512_shuffle_epi8(tab, lo[c]);
                hi[c] = _mm512_shuffle_epi8(tab, hi[c]);
            }
            if (kind == NIB_Q5_0)
                q5_high_bits(load512(blk + 32), c, &lo[c], &hi[c]);
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512i s = packed_block16(lo, hi, a.q[t] + 32 * b, a.sum[t][b], bias);
            const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(a.d[t][b]));
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(s)));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        float *o = y[t] + r0;
        _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(_mm512_loadu_ps(o), acc[t]) : acc[t]);
    }
}

#define PACKED_NT(NT, IQ4)                                                                     \
    for (uint64_t g = 0; g < n_groups; g++)                                                    \
        packed_nibble_group((const uint8_t *)groups + g * group_bytes, x, NT, n, y, 16 * g, accumulate, IQ4);
#define PACKED_NIBBLES(IQ4)                                                                    \
    switch (nt) {                                                                              \
    case 1: PACKED_NT(1, IQ4) break;                                                           \
    case 2: PACKED_NT(2, IQ4) break;                                                           \
    case 3: PACKED_NT(3, IQ4) break;                                                           \
    case 4: PACKED_NT(4, IQ4) break;                                                           \
    case 5: PACKED_NT(5, IQ4) break;                                                           \
    case 6: PACKED_NT(6, IQ4) break;                                                           \
    case 7: PACKED_NT(7, IQ4) break;                                                           \
    default: PACKED_NT(8, IQ4) break;                                                          \
    }
TGT static void z_packed_q4_0(const void *groups, uint64_t group_bytes, uint64_t n_groups, const void *const *x,
                              int nt, uint64_t n, float *const *y, bool accumulate)
{
    PACKED_NIBBLES(NIB_Q4_0)
}
#ifdef CPU_X86_VNNI
TGT static void z_packed_iq4_nl(const void *groups, uint64_t group_bytes, uint64_t n_groups, const void *const *x,
                                int nt, uint64_t n, float *const *y, bool accumulate)
{
    PACKED_NIBBLES(NIB_IQ4_NL)
}
TGT static void z_packed_q5_0(const void *groups, uint64_t group_bytes, uint64_t n_groups, const void *const *x,
                              int nt, uint64_t n, float *const *y, bool accumulate)
{
    PACKED_NIBBLES(NIB_Q5_0)
}
TGT static void z_packed_mxfp4(const void *groups, uint64_t group_bytes, uint64_t n_groups, const void *const *x,
                               int nt, uint64_t n, float *const *y, bool accumulate)
{
    PACKED_NIBBLES(NIB_MXFP4)
}
#endif
#undef PACKED_NIBBLES
#undef PACKED_NT

#ifdef CPU_X86_VNNI
/* ======================================================================
 * Q8_0 packed by 16 rows (cpu_pack.h), VNNI only: the levels are stored
 * plus 128 so that they are vpdpbusd's unsigned operand, the token's bytes
 * broadcast the signed one; 8 vpdpbusd per block and token from
 * -128 sum(x) give the 16 rows' exact integer dot products (|sum| of 32
 * products of at most 255 x 128: far inside int32), then acc += (d_w d_x) s
 * as the portable kernel (no FMA): the portable set's bits.  Without VNNI,
 * vpmaddubsw's 16-bit pairs of biased levels would saturate (2 x 255 x 127),
 * so those sets keep the plain-row kernel.
 * ====================================================================== */

INL void packed_q8_0_group(const uint8_t *group, const void *const *x, int nt, uint64_t n, float *const *y,
                           uint64_t r0, bool accumulate)
{
    act32 a;
    act32_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    const uint8_t *blk = group;
    for (uint64_t b = 0; b < n / 32; b++, blk += 544) {
        const __m512 dw = _mm512_cvtph_ps(load256(blk));
        __m512i lv[8];
        for (int c = 0; c < 8; c++)
            lv[c] = load512(blk + 32 + 64 * c);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = a.q[t] + 32 * b;
            /* two chains of 4 (the latency of one chain of 8 measured slower) */
            __m512i s0 = _mm512_set1_epi32(-128 * a.sum[t][b]), s1 = _mm512_setzero_si512();
            for (int c = 0; c < 8; c += 2) {
                int32_t a0, a1;
                memcpy(&a0, xq + 4 * c, 4);
                memcpy(&a1, xq + 4 * c + 4, 4);
                s0 = _mm512_dpbusd_epi32(s0, lv[c], _mm512_set1_epi32(a0));
                s1 = _mm512_dpbusd_epi32(s1, lv[c + 1], _mm512_set1_epi32(a1));
            }
            const __m512i s = _mm512_add_epi32(s0, s1);
            const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(a.d[t][b]));
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(s)));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        float *o = y[t] + r0;
        _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(_mm512_loadu_ps(o), acc[t]) : acc[t]);
    }
}

#define PACKED_NT(NT)                                                                          \
    for (uint64_t g = 0; g < n_groups; g++)                                                    \
        packed_q8_0_group((const uint8_t *)groups + g * group_bytes, x, NT, n, y, 16 * g, accumulate);
TGT static void z_packed_q8_0(const void *groups, uint64_t group_bytes, uint64_t n_groups, const void *const *x,
                              int nt, uint64_t n, float *const *y, bool accumulate)
{
    switch (nt) {
    case 1: PACKED_NT(1) break;
    case 2: PACKED_NT(2) break;
    case 3: PACKED_NT(3) break;
    case 4: PACKED_NT(4) break;
    case 5: PACKED_NT(5) break;
    case 6: PACKED_NT(6) break;
    case 7: PACKED_NT(7) break;
    default: PACKED_NT(8) break;
    }
}
#undef PACKED_NT
#endif

FORMAT32(F_Q4_0, q4_0)
FORMAT32(F_Q4_1, q4_1)
FORMAT32(F_Q5_0, q5_0)
FORMAT32(F_Q5_1, q5_1)
FORMAT32(F_Q8_0, q8_0)
FORMAT32(F_IQ4_NL, iq4_nl)
FORMAT32(F_MXFP4, mxfp4)

/* ======================================================================
 * K-quants against q8_K, 64 elements at a time
 * ====================================================================== */

typedef struct {
    const int8_t *q[CPU_TILE_TOK];
    const float *d[CPU_TILE_TOK];
    const int16_t *bs[CPU_TILE_TOK];
} actK;

INL void actK_init(actK *a, const void *const *x, int nt, uint64_t n)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        a->q[t] = cpu_act_q(x[t]);
        a->d[t] = cpu_act_d(x[t], n);
        a->bs[t] = cpu_act_bsum(x[t], n);
    }
}

/* The steps most of the per-256 kernels below share.  signed_pairs: each
 * token's products with 64 weights of magnitudes mag (unsigned bytes, as
 * vpmaddubsw wants one side) whose signs (the bits of neg) are put on the
 * activations instead, times the 16-bit scales ls, into its integer sum;
 * off: where in the token's q8_K row the 64 activations start. */
INL void signed_pairs(const actK *a, int nt, uint64_t off, __m512i mag, __mmask64 neg, __m512i ls, __m512i *isum)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m512i y = load512(a->q[t] + off);
        const __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
        isum[t] = add_scaled(isum[t], _mm512_maddubs_epi16(mag, sy), ls);
    }
}

/* A block's integer sums into the float accumulators: acc[t] += scale *
 * d_x(t, block b) * isum[t], scale being the weights' (times whatever the
 * levels left out), in that order of products. */
INL void block_to_acc(const actK *a, int nt, uint64_t b, float scale, const __m512i *isum, __m512 *acc)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(scale * a->d[t][b]), _mm512_cvtepi32_ps(isum[t]), acc[t]);
}

INL void tile_sums(int nt, const __m512 *acc, float *out)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum16(acc[t]);
}

/* The K-quants' unsigned levels (the offset taken from q8_K's sums):
 * each token's products with 128 weights, lv0 against activations
 * off..off+63 and lv1 against the next 64, times their 16-bit scales s0 /
 * s1, into its integer sum. */
INL void unsigned_pairs(const actK *a, int nt, uint64_t off, __m512i lv0, __m512i lv1, __m512i s0, __m512i s1,
                        __m512i *isum)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const int8_t *q = a->q[t] + off;
        isum[t] = add_scaled(isum[t], _mm512_maddubs_epi16(lv0, load512(q)), s0);
        isum[t] = add_scaled(isum[t], _mm512_maddubs_epi16(lv1, load512(q + 64)), s1);
    }
}

/* Which 16-element sub-block (0-3) each 16-bit lane of 64 elements is in:
 * the index that spreads 4 sub-blocks' scales over the lanes. */
INL __m512i sub16_lanes(void)
{
    return _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0,
                            0);
}

/* The 8 six-bit scales (bytes 0-7) and mins (8-15) of a Q4_K/Q5_K block:
 * the first four of each in the low 6 bits of bytes 0-3 and 4-7, the last
 * four with their low 4 bits in bytes 8-11 and their high 2 bits in the top
 * bits of bytes 0-7 (four bytes at a time; the masks drop what a neighbour
 * byte shifted in). */
INL __m128i kq_scales_mins(const uint8_t *s)
{
    uint32_t u[3];
    memcpy(u, s, 12);
    return _mm_setr_epi32((int)(u[0] & 0x3f3f3f3f), (int)((u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4),
                          (int)(u[1] & 0x3f3f3f3f),
                          (int)(((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4));
}

INL float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Q4_K (five 0) and Q5_K (five 1): d * sum_j sc_j (lv_j . q_j) - dmin *
 * sum_j mn_j sum(q_j) over the 8 sub-blocks of 32 of each super-block, 128
 * elements per 64-byte load of the 4-bit codes: its low nibbles are
 * sub-blocks 4h and 4h+2, its high ones 4h+1 and 4h+3, regrouped by two
 * 256-bit lane shuffles into [4h 4h+1] and [4h+2 4h+3] (the activations'
 * order); Q5_K's fifth bits by a byte bit-test and a masked add of 16.  Unsigned
 * levels (<= 31) need no sign trick: vpmaddubsw into 16-bit pairs, the
 * scales by vpmaddwd / vpdpwssd, one conversion per super-block; the mins
 * against q8_K's sums per 16 (each min twice), as ggml. */
INL void kq_nt(const void *row, int five, const void *const *x, int nt, uint64_t n, float *out)
{
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    __m256 accm[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm256_setzero_ps();
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F), b16 = _mm512_set1_epi8(0x10);
    /* the 16-bit scale lanes of two sub-blocks: 16 pairs each */
    const __m512i sel = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0);
    for (uint64_t b = 0; b < n / 256; b++) {
        const block_q4_K *w4 = (const block_q4_K *)row + b;
        const block_q5_K *w5 = (const block_q5_K *)row + b;
        const __m128i sm = kq_scales_mins(five ? w5->scales : w4->scales);
        const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
        const __m128i m8 = _mm_srli_si128(sm, 8);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* min j at 2j, 2j+1 */
        const float dw = half(five ? &w5->d : &w4->d), dmw = half(five ? &w5->dmin : &w4->dmin);
        const uint8_t *qs = five ? w5->qs : w4->qs;
        __m512i qh2 = _mm512_setzero_si512();
        if (five) { /* bit 2p / 2p+1 of qh[l]: element l of sub-blocks 2p, 2p+1; lanes 2-3 one pair on */
            const __m256i qh = load256(w5->qh);
            qh2 = join256(qh, _mm256_srli_epi16(qh, 2));
        }
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_setzero_si512();
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i raw = load512(qs + 64 * h);
            __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            if (five) {
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh2, _mm512_set1_epi8((char)(1 << 4 * h))), lo, b16);
                hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh2, _mm512_set1_epi8((char)(2 << 4 * h))), hi, b16);
            }
            const __m512i lv0 = _mm512_shuffle_i64x2(lo, hi, 0x44), lv1 = _mm512_shuffle_i64x2(lo, hi, 0xEE);
            const __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(4 * h))), sc);
            const __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(4 * h + 2))), sc);
            unsigned_pairs(&a, nt, 256 * b + 128 * h, lv0, lv1, s0, s1, isum);
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const float dx = a.d[t][b];
            const __m256i pm = _mm256_madd_epi16(mins, load256(a.bs[t] + 16 * b));
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(dx * dw), _mm512_cvtepi32_ps(isum[t]), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dmw), _mm256_cvtepi32_ps(pm), accm[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum16(acc[t]) - hsum8(accm[t]);
}

INL void q4_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    kq_nt(row, 0, x, nt, n, out);
}
TILE_DISPATCH(z_dot_q4_K, q4_K_nt)

INL void q5_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    kq_nt(row, 1, x, nt, n, out);
}
TILE_DISPATCH(z_dot_q5_K, q5_K_nt)

/* Q6_K: levels 0..63 of 16-element sub-blocks with int8 scales; the offset
 * of 32 from the activation's sums per 16. */
INL void q6_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q6_K *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
    const __m512i sel = sub16_lanes();
    for (uint64_t b = 0; b < n / 256; b++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[b].scales));
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) /* - 32 * sum_j sc_j bsum_j: the levels' offset */
            isum[t] = _mm512_zextsi256_si512(
                _mm256_sub_epi32(_mm256_setzero_si256(),
                                 _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a.bs[t] + 16 * b)), 5)));
        const __m512i sc512 = _mm512_zextsi256_si512(sc16);
        for (int hf = 0; hf < 2; hf++) {
            const __m512i ql = load512(w[b].ql + 64 * hf);
            const __m256i qh = load256(w[b].qh + 32 * hf);
            const __m512i hq = join256(qh, _mm256_srli_epi16(qh, 2));
            /* elements 0-63 and 64-127 of this half */
            const __m512i lv0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(hq, m2), 4));
            const __m512i lv1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hq, 4), m2), 4));
            const __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(8 * hf))), sc512);
            const __m512i s1 =
                _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(8 * hf + 4))), sc512);
            unsigned_pairs(&a, nt, 256 * b + 128 * hf, lv0, lv1, s0, s1, isum);
        }
        const float dw = half(&w[b].d);
        block_to_acc(&a, nt, b, dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(z_dot_q6_K, q6_K_nt)

/* Q3_K: levels as lv + 4 = code | hbit << 2 (0..7, unsigned), 64 elements
 * (four sub-blocks of 16: rows 2g, 2g + 1 of a half) per vector -- the
 * half's 32 bytes of codes twice, the second copy shifted by one bit pair,
 * so one shift and mask give two rows; the third bits by a byte bit-test
 * of hmask (and hmask >> 1 for the second row) and a masked add of 4.
 * Then as Q6_K: vpmaddubsw, the sub-blocks' scales by vpmaddwd /
 * vpdpwssd, the offset of 4 from q8_K's sums per 16. */
INL void q3_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q3_K *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    const __m512i m3 = _mm512_set1_epi8(0x03), four = _mm512_set1_epi8(4);
    const __m512i sel = sub16_lanes();
    for (uint64_t b = 0; b < n / 256; b++) {
        uint32_t sw[4]; /* in registers: a store and a 16-byte reload would stall */
        cpu_q3_K_scale_words(w[b].scales, sw);
        const __m128i sc8 = _mm_sub_epi8(_mm_setr_epi32((int)sw[0], (int)sw[1], (int)sw[2], (int)sw[3]), _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) /* - 4 * sum_j sc_j bsum_j: the levels' offset */
            isum[t] = _mm512_zextsi256_si512(
                _mm256_sub_epi32(_mm256_setzero_si256(),
                                 _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a.bs[t] + 16 * b)), 2)));
        const __m512i sc512 = _mm512_zextsi256_si512(sc16);
        const __m256i hm = load256(w[b].hmask);
        const __m512i hm2 = join256(hm, _mm256_srli_epi16(hm, 1)); /* row r + 1's bit where row r's is */
        for (int h = 0; h < 2; h++) {
            const __m256i qs = load256(w[b].qs + 32 * h);
            const __m512i q2 = join256(qs, _mm256_srli_epi16(qs, 2)); /* rows 0, 1 at shift 0; 2, 3 at 4 */
            __m512i lv0 = _mm512_and_si512(q2, m3), lv1 = _mm512_and_si512(_mm512_srli_epi16(q2, 4), m3);
            lv0 = _mm512_mask_add_epi8(lv0, _mm512_test_epi8_mask(hm2, _mm512_set1_epi8((char)(1 << 4 * h))), lv0, four);
            lv1 = _mm512_mask_add_epi8(lv1, _mm512_test_epi8_mask(hm2, _mm512_set1_epi8((char)(4 << 4 * h))), lv1, four);
            const __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(8 * h))), sc512);
            const __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(8 * h + 4))), sc512);
            unsigned_pairs(&a, nt, 256 * b + 128 * h, lv0, lv1, s0, s1, isum);
        }
        const float dw = half(&w[b].d);
        block_to_acc(&a, nt, b, dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(z_dot_q3_K, q3_K_nt)

/* Q2_K: levels 0..3 with 4-bit scales and mins per 16, 64 elements per
 * vector as Q3_K's (no third bit); the mins against q8_K's sums per 16 in
 * a second f32 sum. */
INL void q2_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q2_K *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    __m256 accm[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm256_setzero_ps();
    }
    const __m512i m3 = _mm512_set1_epi8(0x03);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m512i sel = sub16_lanes();
    for (uint64_t b = 0; b < n / 256; b++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)w[b].scales);
        const __m512i sc512 = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(raw, m4)));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m256i qs = load256(w[b].qs + 32 * h);
            const __m512i q2 = join256(qs, _mm256_srli_epi16(qs, 2)); /* rows 0, 1 at shift 0; 2, 3 at 4 */
            const __m512i lv0 = _mm512_and_si512(q2, m3), lv1 = _mm512_and_si512(_mm512_srli_epi16(q2, 4), m3);
            const __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(8 * h))), sc512);
            const __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)(8 * h + 4))), sc512);
            unsigned_pairs(&a, nt, 256 * b + 128 * h, lv0, lv1, s0, s1, isum);
        }
        const float dw = half(&w[b].d), dmw = half(&w[b].dmin);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const float dx = a.d[t][b];
            const __m256i pm = _mm256_madd_epi16(mins, load256(a.bs[t] + 16 * b));
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(dx * dw), _mm512_cvtepi32_ps(isum[t]), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dmw), _mm256_cvtepi32_ps(pm), accm[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum16(acc[t]) - hsum8(accm[t]);
}
TILE_DISPATCH(z_dot_q2_K, q2_K_nt)

/* IQ4_XS: 128 elements (four sub-blocks of 32) per pair of 512-bit levels
 * vectors.  One 64-byte load holds the indices of four sub-blocks; their
 * low and high nibbles are regrouped by two two-source permutes into
 * sub-block order (lo, hi of one sub-block, then the next), looked up in the
 * table by one byte shuffle, then per token |lv| . sign(q, lv) into 16-bit
 * pairs (|lv| <= 127: no saturation) and the sub-blocks' scales (ls - 32)
 * by vpmaddwd / vpdpwssd: one conversion per super-block, as ggml's
 * expression.  The 8 scales are unpacked together (a variable shift of the
 * high bits), not one by one. */
INL __m512i iq4_xs_scales(const cpu_iq4_xs_block *w)
{
    uint32_t sl;
    memcpy(&sl, w->scales_l, sizeof sl);
    const __m128i v = _mm_cvtsi32_si128((int)sl), m4 = _mm_set1_epi8(0x0F);
    /* byte i of scales_l: sub-block 2i in the low nibble, 2i+1 in the high */
    const __m128i lo = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4)));
    const __m128i hb = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)w->scales_h), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                                     _mm_set1_epi16(3));
    const __m128i sc = _mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hb, 4)), _mm_set1_epi16(32));
    return _mm512_castsi128_si512(sc);
}

INL void iq4_xs_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const cpu_iq4_xs_block *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    const __m512i table = iq4_table(), m4 = _mm512_set1_epi8(0x0F);
    /* 64-bit lanes: [lo0 hi0 lo1 hi1] and [lo2 hi2 lo3 hi3] of sub-blocks 0-3
     * from lo = [lo0 lo1 lo2 lo3], hi = [hi0 hi1 hi2 hi3] (128 bits each) */
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    /* the 16-bit scale lanes of two sub-blocks: 16 pairs each */
    const __m512i sel = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0);
    for (uint64_t b = 0; b < n / 256; b++) {
        const __m512i sc = iq4_xs_scales(&w[b]);
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m512i raw = load512(w[b].qs + 64 * h);
            const __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            const __m512i lv[2] = {_mm512_shuffle_epi8(table, _mm512_permutex2var_epi64(lo, first, hi)),
                                   _mm512_shuffle_epi8(table, _mm512_permutex2var_epi64(lo, second, hi))};
            #pragma GCC unroll 2
            for (int g = 0; g < 2; g++) {
                const int sb = 4 * h + 2 * g; /* the vector's first sub-block */
                const __m512i s = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16((short)sb)), sc);
                const __m512i au = _mm512_abs_epi8(lv[g]);
                const __mmask64 neg = _mm512_movepi8_mask(lv[g]);
                signed_pairs(&a, nt, 256 * b + 32 * sb, au, neg, s, isum);
            }
        }
        const float dw = half(&w[b].d);
        block_to_acc(&a, nt, b, dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(z_dot_iq4_xs, iq4_xs_nt)

/* The 32 magnitudes of sub-block ib of an IQ2_XXS block (four grid rows
 * of 8) or an IQ3_XXS block (eight rows of 4, its index bytes before the
 * sign / scale words), its sign mask (sign_mask) and its odd scale
 * 2 ls + 1 (grid_sub, after sign_mask). */
/* The sign mask of 32 elements from four 7-bit sign indices (bits 0-27 of
 * aux): their ksigns bytes in one word, which already is the mask (bit
 * j%8 of byte j/8 is bit j). */
INL uint32_t sign_mask(uint32_t aux)
{
    return (uint32_t)quant_ksigns_iq2xs[aux & 127] | (uint32_t)quant_ksigns_iq2xs[(aux >> 7) & 127] << 8 |
           (uint32_t)quant_ksigns_iq2xs[(aux >> 14) & 127] << 16 | (uint32_t)quant_ksigns_iq2xs[(aux >> 21) & 127] << 24;
}

INL __m256i grid_sub(bool three, const uint8_t *blk, int ib, uint32_t *neg, int *ls)
{
    const uint8_t *qs = blk + 2, *q = qs + 8 * ib; /* after the f16 d */
    uint32_t aux;
    memcpy(&aux, three ? qs + QK_K / 4 + 4 * ib : q + 4, sizeof aux);
    *neg = sign_mask(aux);
    *ls = 2 * (int)(aux >> 28) + 1;
    /* IQ3_XXS: the eight index bytes widened in a vector and the rows
     * gathered (eight scalar loads put together: 10 % slower at 1 token,
     * kb; the AVX2 set's 256-bit kernel measured the gather 7 % slower) */
    if (three)
        return _mm256_i32gather_epi32((const int *)quant_iq3xxs_grid, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)q)),
                                      4);
    /* 64-bit loads paired in registers: four stores to a stack array read
     * back as one 256-bit load stall store forwarding (3x slower, kb) */
    const __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[0]]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[1]]));
    const __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[2]]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[3]]));
    return _mm256_set_m128i(hi, lo);
}

/* IQ2_XXS (three false) / IQ3_XXS: two sub-blocks per 512-bit vector; the
 * magnitudes (<= 62, unsigned) against the activations negated where the
 * weights are, by vpmaddubsw into 16-bit pairs, times the odd scale
 * 2 ls + 1 by vpmaddwd / vpdpwssd; the block scaled once by d d_x / 8 or
 * / 4 (cpu_dot_portable.c says why). */
INL void grid_xxs_nt(bool three, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const uint64_t block_bytes = three ? sizeof(block_iq3_xxs) : sizeof(block_iq2_xxs);
    const float unit = three ? 0.25f : 0.125f;
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = (const uint8_t *)row + b * block_bytes;
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            uint32_t neg0, neg1;
            int ls0, ls1;
            const __m256i m0 = grid_sub(three, blk, ib, &neg0, &ls0), m1 = grid_sub(three, blk, ib + 1, &neg1, &ls1);
            const __m512i mag = join256(m0, m1);
            const __mmask64 neg = (__mmask64)neg0 | (__mmask64)neg1 << 32;
            const __m512i ls = join256(_mm256_set1_epi16((short)ls0), _mm256_set1_epi16((short)ls1));
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, neg, ls, isum);
        }
        const float dw = half(blk);
        block_to_acc(&a, nt, b, unit * dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
INL void iq2_xxs_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    grid_xxs_nt(false, row, x, nt, n, out);
}
INL void iq3_xxs_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    grid_xxs_nt(true, row, x, nt, n, out);
}
TILE_DISPATCH(z_dot_iq2_xxs, iq2_xxs_nt)
TILE_DISPATCH(z_dot_iq3_xxs, iq3_xxs_nt)

/* IQ2_XS: a sub-block's 32 magnitudes (9-bit grid indices), its sign mask
 * (7-bit sign indices, one per 16-bit word) and its two scales per 16 as
 * the 16-bit pairs' multipliers (low 128 bits: the low nibble). */
INL __m256i iq2_xs_sub(const block_iq2_xs *w, int ib, uint32_t *neg, __m256i *ls)
{
    uint16_t q[4];
    memcpy(q, &w->qs[4 * ib], sizeof q);
    const __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[0] & 511]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[1] & 511]));
    const __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[2] & 511]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[3] & 511]));
    *neg = sign_mask((uint32_t)(q[0] >> 9) | (uint32_t)(q[1] >> 9) << 7 | (uint32_t)(q[2] >> 9) << 14 |
                     (uint32_t)(q[3] >> 9) << 21);
    const int sc = w->scales[ib];
    *ls = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (sc >> 4) + 1)), _mm_set1_epi16((short)(2 * (sc & 0xf) + 1)));
    return _mm256_set_m128i(hi, lo);
}

/* IQ2_XS: grid_xxs_nt's loop with iq2_xs_sub's parts. */
INL void iq2_xs_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_iq2_xs *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    for (uint64_t b = 0; b < n / 256; b++) {
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            uint32_t neg0, neg1;
            __m256i ls0, ls1;
            const __m256i m0 = iq2_xs_sub(&w[b], ib, &neg0, &ls0), m1 = iq2_xs_sub(&w[b], ib + 1, &neg1, &ls1);
            const __m512i mag = join256(m0, m1), ls = join256(ls0, ls1);
            const __mmask64 neg = (__mmask64)neg0 | (__mmask64)neg1 << 32;
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, neg, ls, isum);
        }
        const float dw = half(&w[b].d);
        block_to_acc(&a, nt, b, 0.125f * dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(z_dot_iq2_xs, iq2_xs_nt)

#include "cpu_dot_iqs_x512.h" /* IQ3_S, IQ2_S, IQ1_S, IQ1_M */

/* ======================================================================
 * The table
 * ====================================================================== */

void CPU_X86_FILL(cpu_kernels *k)
{
    k->type[QT_Q4_0] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_q4_0, z_packed_q4_0};
    k->type[QT_Q4_1] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_q4_1, NULL};
#ifdef CPU_X86_VNNI
    k->type[QT_Q5_0] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_q5_0, z_packed_q5_0};
#else
    k->type[QT_Q5_0] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_q5_0, NULL};
#endif
    k->type[QT_Q5_1] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_q5_1, NULL};
#ifdef CPU_X86_VNNI
    k->type[QT_Q8_0] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_q8_0, z_packed_q8_0};
#else
    k->type[QT_Q8_0] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_q8_0, NULL};
#endif
#ifdef CPU_X86_VNNI
    k->type[QT_IQ4_NL] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_iq4_nl, z_packed_iq4_nl};
#else
    k->type[QT_IQ4_NL] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_iq4_nl, NULL};
#endif
#ifdef CPU_X86_VNNI
    k->type[QT_MXFP4] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_mxfp4, z_packed_mxfp4};
#else
    k->type[QT_MXFP4] = (cpu_type_kernel){CPU_ACT_Q8_32, z_dot_mxfp4, NULL};
#endif
    k->type[QT_Q4_K] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_q4_K, NULL};
    k->type[QT_Q5_K] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_q5_K, NULL};
    k->type[QT_Q6_K] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_q6_K, NULL};
    k->type[QT_Q3_K] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_q3_K, NULL};
    k->type[QT_Q2_K] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_q2_K, NULL};
    k->type[QT_IQ4_XS] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq4_xs, NULL};
    k->type[QT_IQ2_XXS] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq2_xxs, NULL};
    k->type[QT_IQ3_XXS] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq3_xxs, NULL};
    k->type[QT_IQ2_XS] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq2_xs, NULL};
    k->type[QT_IQ3_S] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq3_s, NULL};
    k->type[QT_IQ2_S] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq2_s, NULL};
    k->type[QT_IQ1_S] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq1_s, NULL};
    k->type[QT_IQ1_M] = (cpu_type_kernel){CPU_ACT_Q8_K, z_dot_iq1_m, NULL};
}
