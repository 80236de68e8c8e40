/* quant_fast.c: the kernels behind quant_matvec.
 *
 * quant.c's dot product is the oracle: decode a block, sum in order.  It is
 * readable and slow.  The CPU reference backend runs a matrix-vector product
 * for every weight of every token, so this file provides two faster paths
 * over the same exactly decoded weights, both accumulating in f32:
 *
 *  - portable: decode a block (the oracle's decoder), then a dot product
 *    with 8 independent partial sums, which gcc -O2 turns into SIMD;
 *  - avx2 (x86-64, AVX2+FMA+F16C, chosen at run time): each block's levels
 *    are unpacked in registers and multiplied with x without a trip through
 *    memory; the block's scale is applied once per (sub-)block:
 *    sum_i (d*q_i - m)*x_i = d*sum_i q_i*x_i - m*sum_i x_i.  F32, F16, BF16,
 *    the legacy types and Q4_K-Q6_K have such kernels; the others (Q2_K,
 *    Q3_K, the IQ types, MXFP4) take the portable path here -- the fast CPU
 *    backend is where their integer kernels belong.
 *
 * Both differ from the oracle only in summation order (and, for the avx2
 * path, in factoring the block scale out of the sum), i.e. within f32
 * rounding; tests/test_quant_dot.c checks that bound on random data.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "quant.h"
#include "quant_fast.h"

/* ======================================================================
 * Portable path
 * ====================================================================== */

/* 8 independent partial sums: the compiler may keep them in one vector
 * register, because no reassociation of a single sum is needed. */
static float dot_f32_8way(const float *w, const float *x, size_t n)
{
    /* size_t indices and pointer steps: with 32-bit indices gcc cannot
     * prove the accesses contiguous and falls back to scalar gathers */
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float *wi = w + i, *xi = x + i;
        for (int k = 0; k < 8; k++)
            acc[k] += wi[k] * xi[k];
    }
    float tail = 0;
    for (; i < n; i++)
        tail += w[i] * x[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

/* F32/F16/BF16 rows are decoded 256 elements at a time (their "block" is
 * one element).  F32 is copied with memcpy: a row stride need not keep the
 * floats 4-byte aligned. */
static float portable_dot_elementwise(uint32_t type, const uint8_t *row, const float *x, uint64_t n)
{
    float w[256];
    float sum = 0;
    for (uint64_t i = 0; i < n; i += 256) {
        uint32_t m = n - i < 256 ? (uint32_t)(n - i) : 256;
        if (type == QT_F32)
            memcpy(w, row + 4 * i, 4 * (size_t)m);
        else
            for (uint32_t k = 0; k < m; k++)
                quant_decode_block(type, row + 2 * (i + k), &w[k]);
        sum += dot_f32_8way(w, x + i, m);
    }
    return sum;
}

static float portable_dot_row(uint32_t type, const void *row, const float *x, uint64_t n)
{
    const quant_traits *t = quant_traits_of(type);
    if (!t || !t->can_dequant)
        return quant_dot_row(type, row, x, n); /* NaN, as documented */
    if (t->block_elems == 1)
        return portable_dot_elementwise(type, row, x, n);
    /* decode 256 elements (one K-quant block, eight 32-element blocks) at
     * a time, then one vectorizable dot over them */
    const uint8_t *p = row;
    const uint64_t per = QK_K / t->block_elems, nb = n / t->block_elems;
    float w[QK_K];
    float sum = 0;
    for (uint64_t b = 0; b < nb; b += per) {
        uint64_t m = nb - b < per ? nb - b : per;
        for (uint64_t k = 0; k < m; k++)
            quant_decode_block(type, p + (b + k) * t->block_bytes, w + k * t->block_elems);
        sum += dot_f32_8way(w, x + b * t->block_elems, m * t->block_elems);
    }
    return sum;
}

/* ======================================================================
 * AVX2 path (x86-64 only; compiled with target attributes so the rest of
 * the build stays baseline x86-64 and runs on any CPU)
 * ====================================================================== */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_KERNELS 1
#include <cpuid.h>
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline float half_to_float(uint16_t h)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* The kernels below first unpack a block's levels into a small aligned
 * buffer, one byte per element, then widen them 8 at a time straight from
 * memory (vpmovzxbd/vpmovsxbd with a memory operand).  Widening from a
 * register would need extra cross-lane shuffles, and shuffles (one port on
 * most x86 cores) are what limits these loops: the store/reload costs only
 * load/store slots, which are idle here. */

/* sum over 32 lanes of lv[i] * x[i], lv unsigned (u8) or signed (i8) bytes. */
AVX2 static inline __m256 dot32_u8(const uint8_t *lv, const float *x)
{
#define WIDEN(o) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(lv + (o)))))
    __m256 s = _mm256_mul_ps(WIDEN(0), _mm256_loadu_ps(x));
    s = _mm256_fmadd_ps(WIDEN(8), _mm256_loadu_ps(x + 8), s);
    s = _mm256_fmadd_ps(WIDEN(16), _mm256_loadu_ps(x + 16), s);
    return _mm256_fmadd_ps(WIDEN(24), _mm256_loadu_ps(x + 24), s);
#undef WIDEN
}

AVX2 static inline __m256 dot16_i8(const int8_t *lv, const float *x)
{
#define WIDEN(o) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(lv + (o)))))
    __m256 s = _mm256_mul_ps(WIDEN(0), _mm256_loadu_ps(x));
    return _mm256_fmadd_ps(WIDEN(8), _mm256_loadu_ps(x + 8), s);
#undef WIDEN
}

AVX2 static inline __m256 dot32_i8(const int8_t *lv, const float *x)
{
    return _mm256_add_ps(dot16_i8(lv, x), dot16_i8(lv + 16, x + 16));
}

/* 8 packed bytes widened to 8 dwords straight from memory (one load-port
 * op plus one shuffle), nibbles still together. */
AVX2 static inline __m256i widen8_u8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* For 8 packed bytes w (widened) and the x of their low and high nibbles:
 * lo_acc += low nibbles * x_lo, hi_acc += high nibbles * x_hi.  Shifting
 * the dword by 4 leaves the high nibble alone (the byte's upper bits are
 * zero), so only the low half needs a mask. */
AVX2 static inline void nibble_fma(__m256i w, const float *x_lo, const float *x_hi, __m256 *lo_acc,
                                   __m256 *hi_acc)
{
    __m256i lo = _mm256_and_si256(w, _mm256_set1_epi32(15));
    *lo_acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_loadu_ps(x_lo), *lo_acc);
    *hi_acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 4)), _mm256_loadu_ps(x_hi),
                              *hi_acc);
}

/* sum of level*x over a 32-element block stored as 16 nibble bytes. */
AVX2 static inline __m256 dot32_nibbles(const uint8_t *qs, const float *x)
{
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    nibble_fma(widen8_u8(qs), x, x + 16, &a, &b);
    nibble_fma(widen8_u8(qs + 8), x + 8, x + 24, &a, &b);
    return _mm256_add_ps(a, b);
}

/* The block's f16 header (d, and m where present) converted straight from
 * memory: lane 0 = d, lane 1 = m. */
AVX2 static inline __m128 block_header(const void *b)
{
    return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)b));
}

/* 16 packed bytes -> 32 levels (low nibbles: elements 0-15, high: 16-31),
 * plus `high` (the Q5 fifth bits, already in place as 16s; zero for Q4). */
AVX2 static inline void unpack_nibbles32(const uint8_t *qs, __m128i high_lo, __m128i high_hi,
                                         uint8_t *lv)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0x0F);
    _mm_store_si128((__m128i *)lv, _mm_or_si128(_mm_and_si128(q, m), high_lo));
    _mm_store_si128((__m128i *)(lv + 16), _mm_or_si128(_mm_and_si128(_mm_srli_epi16(q, 4), m), high_hi));
}

/* A Q5 block's 32 fifth bits as 16s, bytes 0-15 and 16-31: byte k gets
 * qh's byte k/8, then a per-byte mask tests bit k%8. */
AVX2 static inline void q5_high_bits(const uint8_t *qh_bytes, __m128i *lo, __m128i *hi)
{
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    const __m128i v = _mm_cvtsi32_si128((int)qh);
    const __m128i bit = _mm_set1_epi64x((long long)0x8040201008040201ULL);
    const __m128i sixteen = _mm_set1_epi8(0x10);
    __m128i b0 = _mm_shuffle_epi8(v, _mm_set_epi64x(0x0101010101010101, 0));
    __m128i b1 = _mm_shuffle_epi8(v, _mm_set_epi64x(0x0303030303030303, 0x0202020202020202));
    *lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b0, bit), bit), sixteen);
    *hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b1, bit), bit), sixteen);
}

/* The 32-element formats, each as d*sum(q*x) (+ m*sum(x) for the ones with
 * a min, - offset*d*sum(x) for the symmetric ones), with sum(x) per block
 * from xs (computed once per matrix-vector product). */

AVX2 static float avx2_dot_q4_0(const block_q4_0 *b, const float *x, const float *xs, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    float off = 0;
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        const __m128 h = block_header(&b[i]);
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(h), dot32_nibbles(b[i].qs, x), acc);
        off += _mm_cvtss_f32(h) * xs[i];
    }
    return hsum8(acc) - 8 * off;
}

AVX2 static float avx2_dot_q4_1(const block_q4_1 *b, const float *x, const float *xs, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        const __m128 h = block_header(&b[i]);
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(h), dot32_nibbles(b[i].qs, x), acc);
        mins += _mm_cvtss_f32(_mm_movehdup_ps(h)) * xs[i];
    }
    return hsum8(acc) + mins;
}

AVX2 static float avx2_dot_q5_0(const block_q5_0 *b, const float *x, const float *xs, uint64_t nb)
{
    _Alignas(32) uint8_t lv[32];
    __m256 acc = _mm256_setzero_ps();
    float off = 0;
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        const float d = half_to_float(b[i].d);
        __m128i h0, h1;
        q5_high_bits(b[i].qh, &h0, &h1);
        unpack_nibbles32(b[i].qs, h0, h1, lv);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), dot32_u8(lv, x), acc);
        off += d * xs[i];
    }
    return hsum8(acc) - 16 * off;
}

AVX2 static float avx2_dot_q5_1(const block_q5_1 *b, const float *x, const float *xs, uint64_t nb)
{
    _Alignas(32) uint8_t lv[32];
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        __m128i h0, h1;
        q5_high_bits(b[i].qh, &h0, &h1);
        unpack_nibbles32(b[i].qs, h0, h1, lv);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].d)), dot32_u8(lv, x), acc);
        mins += half_to_float(b[i].m) * xs[i];
    }
    return hsum8(acc) + mins;
}

AVX2 static float avx2_dot_q8_0(const block_q8_0 *b, const float *x, const float *xs, uint64_t nb)
{
    (void)xs;
    __m256 acc = _mm256_setzero_ps();
    for (uint64_t i = 0; i < nb; i++, x += 32)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].d)), dot32_i8(b[i].qs, x), acc);
    return hsum8(acc);
}

/* Decoded 6-bit scales and mins of a Q4_K/Q5_K block (same packing as
 * quant.c's kquant_scale_min; repeated here so that this loop inlines). */
static inline void kquant_scales_mins(const uint8_t *s, uint8_t *sc, uint8_t *mn)
{
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0xF) | ((s[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

/* One Q4_K/Q5_K super-block whose 256 levels are in lv: the scale terms
 * into acc, the 8 min terms (dmin*min_j*sum(x of sub-block j)) as one
 * vector into acc_m. */
AVX2 static inline void kquant_accumulate(float d, float dmin, const uint8_t *scales,
                                          const uint8_t *lv, const float *x, const float *xs,
                                          __m256 *acc, __m256 *acc_m)
{
    uint8_t sc[8], mn[8];
    kquant_scales_mins(scales, sc, mn);
    for (int j = 0; j < 8; j++)
        *acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[j]), dot32_u8(lv + 32 * j, x + 32 * j), *acc);
    __m128i m8 = _mm_loadl_epi64((const __m128i *)mn);
    __m256 mins = _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m8)));
    *acc_m = _mm256_fmadd_ps(mins, _mm256_loadu_ps(xs), *acc_m);
}

AVX2 static float avx2_dot_q4_K(const block_q4_K *b, const float *x, const float *xs, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    for (uint64_t i = 0; i < nb; i++, x += QK_K, xs += 8) {
        const __m128 h = block_header(&b[i]);
        const float d = _mm_cvtss_f32(h), dmin = _mm_cvtss_f32(_mm_movehdup_ps(h));
        uint8_t sc[8], mn[8];
        kquant_scales_mins(b[i].scales, sc, mn);
        /* each 32 bytes of qs: sub-block 2p in the low nibbles, 2p+1 high */
        for (int p = 0; p < 4; p++) {
            const uint8_t *q = b[i].qs + 32 * p;
            const float *x1 = x + 64 * p, *x2 = x1 + 32;
            __m256 s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps();
            for (int g = 0; g < 4; g++)
                nibble_fma(widen8_u8(q + 8 * g), x1 + 8 * g, x2 + 8 * g, &s1, &s2);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * p]), s1, acc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * p + 1]), s2, acc);
        }
        __m128i m8 = _mm_loadl_epi64((const __m128i *)mn);
        __m256 mins = _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m8)));
        acc_m = _mm256_fmadd_ps(mins, _mm256_loadu_ps(xs), acc_m);
    }
    return hsum8(_mm256_sub_ps(acc, acc_m));
}

AVX2 static float avx2_dot_q5_K(const block_q5_K *b, const float *x, const float *xs, uint64_t nb)
{
    _Alignas(32) uint8_t lv[QK_K];
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (uint64_t i = 0; i < nb; i++, x += QK_K, xs += 8) {
        __m256i qh = _mm256_loadu_si256((const __m256i *)b[i].qh);
        for (int p = 0; p < 4; p++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * p));
            /* bit 2p of qh[l] -> +16 on element 64p+l; bit 2p+1 -> on 64p+32+l */
            __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one);
            __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one);
            _mm256_store_si256((__m256i *)(lv + 64 * p),
                               _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h1, 4)));
            _mm256_store_si256((__m256i *)(lv + 64 * p + 32),
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_slli_epi16(h2, 4)));
        }
        kquant_accumulate(half_to_float(b[i].d), half_to_float(b[i].dmin), b[i].scales, lv, x,
                          xs, &acc, &acc_m);
    }
    return hsum8(_mm256_sub_ps(acc, acc_m));
}

/* Q6_K: per half, four 32-element rows of levels (see quant.c's decoder),
 * each row covering two 16-element sub-blocks with their own int8 scale. */
AVX2 static float avx2_dot_q6_K(const block_q6_K *b, const float *x, const float *xs, uint64_t nb)
{
    (void)xs;
    _Alignas(32) int8_t lv[128];
    __m256 acc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    const __m256i bias = _mm256_set1_epi8(32);
    for (uint64_t i = 0; i < nb; i++, x += QK_K) {
        const float d = half_to_float(b[i].d);
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = b[i].ql + 64 * half;
            const int8_t *sc = b[i].scales + 8 * half;
            const float *xh = x + 128 * half;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b[i].qh + 32 * half));
            __m256i rows[4] = {
                _mm256_and_si256(l0, m4),
                _mm256_and_si256(l1, m4),
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
            };
            for (int r = 0; r < 4; r++) {
                __m256i h = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * r), m2);
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(rows[r], _mm256_slli_epi16(h, 4)), bias);
                _mm256_store_si256((__m256i *)(lv + 32 * r), q);
            }
            for (int k = 0; k < 8; k++)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[k]), dot16_i8(lv + 16 * k, xh + 16 * k), acc);
        }
    }
    return hsum8(acc);
}

/* w may be only 1-byte aligned (any row stride): unaligned loads, and a
 * memcpy for the scalar tail. */
AVX2 static float avx2_dot_f32(const float *w, const float *x, uint64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float sum = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) {
        float wi;
        memcpy(&wi, (const char *)(w + i), sizeof wi);
        sum += wi * x[i];
    }
    return sum;
}

/* 8 stored half/bfloat values -> 8 floats. */
AVX2 static inline __m256 load8_half(uint32_t type, const uint16_t *h)
{
    __m128i v = _mm_loadu_si128((const __m128i *)h);
    if (type == QT_F16)
        return _mm256_cvtph_ps(v);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

AVX2 static float avx2_dot_half(uint32_t type, const uint8_t *row, const float *x, uint64_t n)
{
    const uint16_t *h = (const uint16_t *)(const void *)row;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load8_half(type, h + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load8_half(type, h + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float sum = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) {
        float w;
        quant_decode_block(type, row + 2 * i, &w);
        sum += w * x[i];
    }
    return sum;
}

/* xs: sum(x) of every 32 elements of x (see chunk below). */
static float avx2_dot_row(uint32_t type, const void *row, const float *x, const float *xs,
                          uint64_t n)
{
    switch (type) {
    case QT_F32: return avx2_dot_f32(row, x, n);
    case QT_F16:
    case QT_BF16: return avx2_dot_half(type, row, x, n);
    case QT_Q4_0: return avx2_dot_q4_0(row, x, xs, n / QK4_0);
    case QT_Q4_1: return avx2_dot_q4_1(row, x, xs, n / QK4_1);
    case QT_Q5_0: return avx2_dot_q5_0(row, x, xs, n / QK5_0);
    case QT_Q5_1: return avx2_dot_q5_1(row, x, xs, n / QK5_1);
    case QT_Q8_0: return avx2_dot_q8_0(row, x, xs, n / QK8_0);
    case QT_Q4_K: return avx2_dot_q4_K(row, x, xs, n / QK_K);
    case QT_Q5_K: return avx2_dot_q5_K(row, x, xs, n / QK_K);
    case QT_Q6_K: return avx2_dot_q6_K(row, x, xs, n / QK_K);
    default: return portable_dot_row(type, row, x, n);
    }
}

/* CPUID is slow (and traps to the hypervisor in a VM), so the answer is
 * computed once and cached; the atomic makes concurrent first calls from
 * several threads well-defined (they all store the same value). */
static bool cpu_has_avx2(void)
{
    static _Atomic int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        /* __builtin_cpu_supports also checks that the OS saves the YMM
         * registers; clang 14 does not know "f16c" there, so that bit comes
         * from CPUID leaf 1 (ECX bit 29). */
        unsigned eax, ebx, ecx, edx;
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}
#else
#define HAVE_AVX2_KERNELS 0
#endif

/* ======================================================================
 * Dispatch
 * ====================================================================== */

bool quant_kernels_available(quant_kernels k)
{
    if (k == QUANT_KERNELS_PORTABLE)
        return true;
#if HAVE_AVX2_KERNELS
    if (k == QUANT_KERNELS_AVX2)
        return cpu_has_avx2();
#endif
    return false;
}

/* Rows are processed in column chunks of up to CHUNK elements: the x chunk
 * (32 KB) and its per-32 sums stay in L1/L2 while every row's slice of
 * the chunk streams past, and the sums live on the stack (no allocation
 * per call; 1 KB).  CHUNK is a multiple of every block size. */
#define CHUNK 8192

static void block_sums(const float *x, uint64_t n, float *xs)
{
    for (uint64_t b = 0; b < n / 32; b++) {
        float s = 0;
        for (int i = 0; i < 32; i++)
            s += x[32 * b + i];
        xs[b] = s;
    }
}

/* y[r] (+)= dot(row r's columns [c0, c0+m), x[c0..]) for all rows. */
static void matvec_chunk(quant_kernels k, uint32_t type, const uint8_t *w, uint64_t row_bytes,
                         uint64_t n_rows, const float *x, uint64_t c0, uint64_t m, float *y)
{
    const quant_traits *t = quant_traits_of(type);
    const uint64_t offset = c0 / t->block_elems * t->block_bytes;
    float xs[CHUNK / 32];
#if HAVE_AVX2_KERNELS
    if (k == QUANT_KERNELS_AVX2) {
        block_sums(x + c0, m, xs);
        for (uint64_t r = 0; r < n_rows; r++) {
            float part = avx2_dot_row(type, w + r * row_bytes + offset, x + c0, xs, m);
            y[r] = c0 ? y[r] + part : part;
        }
        return;
    }
#endif
    (void)k;
    (void)xs;
    for (uint64_t r = 0; r < n_rows; r++) {
        float part = portable_dot_row(type, w + r * row_bytes + offset, x + c0, m);
        y[r] = c0 ? y[r] + part : part;
    }
}

void quant_kernels_matvec(quant_kernels k, uint32_t type, const void *w, uint64_t row_bytes,
                          uint64_t n_rows, const float *x, uint64_t n, float *y)
{
    if (!quant_kernels_available(k))
        k = QUANT_KERNELS_PORTABLE;
    const quant_traits *t = quant_traits_of(type);
    if (!t || !t->can_dequant) {
        for (uint64_t r = 0; r < n_rows; r++)
            y[r] = NAN;
        return;
    }
    if (t->block_elems == 1) { /* F32/F16/BF16 need no sums: whole rows */
        for (uint64_t r = 0; r < n_rows; r++) {
            const uint8_t *row = (const uint8_t *)w + r * row_bytes;
#if HAVE_AVX2_KERNELS
            if (k == QUANT_KERNELS_AVX2) {
                y[r] = avx2_dot_row(type, row, x, NULL, n);
                continue;
            }
#endif
            y[r] = portable_dot_row(type, row, x, n);
        }
        return;
    }
    n -= n % t->block_elems; /* whole blocks only, as documented */
    for (uint64_t c0 = 0; c0 < n; c0 += CHUNK)
        matvec_chunk(k, type, w, row_bytes, n_rows, x, c0, n - c0 < CHUNK ? n - c0 : CHUNK, y);
    if (n == 0)
        for (uint64_t r = 0; r < n_rows; r++)
            y[r] = 0;
}

float quant_kernels_dot_row(quant_kernels k, uint32_t type, const void *row, const float *x,
                            uint64_t n)
{
    float y;
    quant_kernels_matvec(k, type, row, 0, 1, x, n, &y);
    return y;
}

static quant_kernels best_kernels(void)
{
    return quant_kernels_available(QUANT_KERNELS_AVX2) ? QUANT_KERNELS_AVX2
                                                       : QUANT_KERNELS_PORTABLE;
}

const char *quant_cpu_kernels(void)
{
    return best_kernels() == QUANT_KERNELS_AVX2 ? "avx2" : "portable";
}

void quant_matvec(uint32_t type, const void *w, uint64_t row_bytes, uint64_t n_rows,
                  const float *x, uint64_t n, float *y)
{
    quant_kernels_matvec(best_kernels(), type, w, row_bytes, n_rows, x, n, y);
}
