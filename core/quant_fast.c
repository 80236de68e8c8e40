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
 *    sum_i (d*q_i - m)*x_i = d*sum_i q_i*x_i - m*sum_i x_i.
 *
 * Both differ from the oracle only in summation order (and, for the avx2
 * path, in factoring the block scale out of the sum), i.e. within f32
 * rounding; tests/test_quant.c checks that bound on random data.
 */
#include <string.h>

#include "quant.h"
#include "quant_fast.h"

/* ======================================================================
 * Portable path
 * ====================================================================== */

/* 8 independent partial sums: the compiler may keep them in one vector
 * register, because no reassociation of a single sum is needed. */
static float dot_f32_8way(const float *w, const float *x, uint32_t n)
{
    float acc[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += w[i + k] * x[i + k];
    float tail = 0;
    for (; i < n; i++)
        tail += w[i] * x[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

/* F16/BF16 rows are decoded 256 elements at a time (their "block" is one). */
static float portable_dot_half(uint32_t type, const uint8_t *row, const float *x, uint64_t n)
{
    float w[256];
    float sum = 0;
    for (uint64_t i = 0; i < n; i += 256) {
        uint32_t m = n - i < 256 ? (uint32_t)(n - i) : 256;
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
    if (type == QT_F32) {
        float sum = 0;
        const float *w = row;
        for (uint64_t i = 0; i < n; i += 4096) {
            uint32_t m = n - i < 4096 ? (uint32_t)(n - i) : 4096;
            sum += dot_f32_8way(w + i, x + i, m);
        }
        return sum;
    }
    if (t->block_elems == 1)
        return portable_dot_half(type, row, x, n);
    const uint8_t *p = row;
    float w[QK_K];
    float sum = 0;
    for (uint64_t b = 0; b < n / t->block_elems; b++) {
        quant_decode_block(type, p + b * t->block_bytes, w);
        sum += dot_f32_8way(w, x + b * t->block_elems, t->block_elems);
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
#include <stdatomic.h>

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

/* The low 8 bytes of v as signed ints, converted to 8 floats. */
AVX2 static inline __m256 i8x8_to_ps(__m128i v)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

/* sum over 32 lanes of q[i] * x[i], q given as 32 signed bytes. */
AVX2 static inline __m256 dot32_i8(__m256i q, const float *x)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m256 s = _mm256_mul_ps(i8x8_to_ps(lo), _mm256_loadu_ps(x));
    s = _mm256_fmadd_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8), s);
    s = _mm256_fmadd_ps(i8x8_to_ps(hi), _mm256_loadu_ps(x + 16), s);
    s = _mm256_fmadd_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), s);
    return s;
}

/* sum over 16 lanes of q[i] * x[i], q given as 16 signed bytes. */
AVX2 static inline __m256 dot16_i8(__m128i q, const float *x)
{
    __m256 s = _mm256_mul_ps(i8x8_to_ps(q), _mm256_loadu_ps(x));
    return _mm256_fmadd_ps(i8x8_to_ps(_mm_srli_si128(q, 8)), _mm256_loadu_ps(x + 8), s);
}

/* Lane-wise sum of 32 x values (for the min terms of Q4_1/Q5_1/K-quants). */
AVX2 static inline __m256 sum32(const float *x)
{
    __m256 a = _mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8));
    __m256 b = _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24));
    return _mm256_add_ps(a, b);
}

/* 16 packed bytes -> 32 nibbles: low nibbles in lanes 0-15, high in 16-31
 * (the element order of the 32-element formats). */
AVX2 static inline __m256i nibbles32(const uint8_t *qs)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(q, m), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m);
    return _mm256_set_m128i(hi, lo);
}

/* The 32 fifth bits of a Q5 block as 0x10 in each byte where set. */
AVX2 static inline __m256i q5_high_bits(const uint8_t *qh_bytes)
{
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    /* byte k gets qh's byte k/8; then test bit k%8 with a per-byte mask */
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

AVX2 static float avx2_dot_q4_0(const block_q4_0 *b, const float *x, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    const __m256i eight = _mm256_set1_epi8(8);
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        __m256i q = _mm256_sub_epi8(nibbles32(b[i].qs), eight);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].d)), dot32_i8(q, x), acc);
    }
    return hsum8(acc);
}

AVX2 static float avx2_dot_q4_1(const block_q4_1 *b, const float *x, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        __m256 s = dot32_i8(nibbles32(b[i].qs), x);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].d)), s, acc);
        acc_m = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].m)), sum32(x), acc_m);
    }
    return hsum8(_mm256_add_ps(acc, acc_m));
}

AVX2 static float avx2_dot_q5_0(const block_q5_0 *b, const float *x, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    const __m256i sixteen = _mm256_set1_epi8(16);
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        __m256i q = _mm256_or_si256(nibbles32(b[i].qs), q5_high_bits(b[i].qh));
        q = _mm256_sub_epi8(q, sixteen);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].d)), dot32_i8(q, x), acc);
    }
    return hsum8(acc);
}

AVX2 static float avx2_dot_q5_1(const block_q5_1 *b, const float *x, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        __m256i q = _mm256_or_si256(nibbles32(b[i].qs), q5_high_bits(b[i].qh));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].d)), dot32_i8(q, x), acc);
        acc_m = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].m)), sum32(x), acc_m);
    }
    return hsum8(_mm256_add_ps(acc, acc_m));
}

AVX2 static float avx2_dot_q8_0(const block_q8_0 *b, const float *x, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (uint64_t i = 0; i < nb; i++, x += 32) {
        __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(b[i].d)), dot32_i8(q, x), acc);
    }
    return hsum8(acc);
}

/* Decoded 6-bit scales and mins of a Q4_K/Q5_K block (same packing as
 * quant.c's kquant_scale_min; duplicated here to keep that file standalone
 * and this loop free of calls). */
static inline void kquant_scales_mins(const uint8_t *s, uint8_t *sc, uint8_t *mn)
{
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0xF) | ((s[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

/* One Q4_K/Q5_K block: q holds, for sub-block pair p, the 32 low levels in
 * lanes of lo[p] and the 32 high ones in hi[p] (both as bytes 0..31). */
AVX2 static inline void kquant_accumulate(float d, float dmin, const uint8_t *scales,
                                          const __m256i *lo, const __m256i *hi, const float *x,
                                          __m256 *acc, __m256 *acc_m)
{
    uint8_t sc[8], mn[8];
    kquant_scales_mins(scales, sc, mn);
    for (int p = 0; p < 4; p++) {
        const float *x1 = x + 64 * p, *x2 = x1 + 32;
        *acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * p]), dot32_i8(lo[p], x1), *acc);
        *acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * p + 1]), dot32_i8(hi[p], x2), *acc);
        *acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin * mn[2 * p]), sum32(x1), *acc_m);
        *acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin * mn[2 * p + 1]), sum32(x2), *acc_m);
    }
}

AVX2 static float avx2_dot_q4_K(const block_q4_K *b, const float *x, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (uint64_t i = 0; i < nb; i++, x += QK_K) {
        __m256i lo[4], hi[4];
        for (int p = 0; p < 4; p++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * p));
            lo[p] = _mm256_and_si256(q, m4);
            hi[p] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
        kquant_accumulate(half_to_float(b[i].d), half_to_float(b[i].dmin), b[i].scales, lo, hi,
                          x, &acc, &acc_m);
    }
    return hsum8(_mm256_sub_ps(acc, acc_m));
}

AVX2 static float avx2_dot_q5_K(const block_q5_K *b, const float *x, uint64_t nb)
{
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (uint64_t i = 0; i < nb; i++, x += QK_K) {
        __m256i qh = _mm256_loadu_si256((const __m256i *)b[i].qh);
        __m256i lo[4], hi[4];
        for (int p = 0; p < 4; p++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * p));
            /* bit 2p of qh[l] -> 16 in lo lane l; bit 2p+1 -> 16 in hi lane l */
            __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one);
            __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one);
            lo[p] = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h1, 4));
            hi[p] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                    _mm256_slli_epi16(h2, 4));
        }
        kquant_accumulate(half_to_float(b[i].d), half_to_float(b[i].dmin), b[i].scales, lo, hi,
                          x, &acc, &acc_m);
    }
    return hsum8(_mm256_sub_ps(acc, acc_m));
}

/* Q6_K: per half, four 32-lane rows of levels (see quant.c's decoder), each
 * row covering two 16-element sub-blocks with their own int8 scale. */
AVX2 static float avx2_dot_q6_K(const block_q6_K *b, const float *x, uint64_t nb)
{
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
                const float *xr = xh + 32 * r;
                __m256 s0 = dot16_i8(_mm256_castsi256_si128(q), xr);
                __m256 s1 = dot16_i8(_mm256_extracti128_si256(q, 1), xr + 16);
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * r]), s0, acc);
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc[2 * r + 1]), s1, acc);
            }
        }
    }
    return hsum8(acc);
}

AVX2 static float avx2_dot_f32(const float *w, const float *x, uint64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float sum = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++)
        sum += w[i] * x[i];
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

static float avx2_dot_row(uint32_t type, const void *row, const float *x, uint64_t n)
{
    switch (type) {
    case QT_F32: return avx2_dot_f32(row, x, n);
    case QT_F16:
    case QT_BF16: return avx2_dot_half(type, row, x, n);
    case QT_Q4_0: return avx2_dot_q4_0(row, x, n / QK4_0);
    case QT_Q4_1: return avx2_dot_q4_1(row, x, n / QK4_1);
    case QT_Q5_0: return avx2_dot_q5_0(row, x, n / QK5_0);
    case QT_Q5_1: return avx2_dot_q5_1(row, x, n / QK5_1);
    case QT_Q8_0: return avx2_dot_q8_0(row, x, n / QK8_0);
    case QT_Q4_K: return avx2_dot_q4_K(row, x, n / QK_K);
    case QT_Q5_K: return avx2_dot_q5_K(row, x, n / QK_K);
    case QT_Q6_K: return avx2_dot_q6_K(row, x, n / QK_K);
    default: return portable_dot_row(type, row, x, n);
    }
}

static bool cpu_has_avx2(void)
{
    /* __builtin_cpu_supports reads a table the runtime fills at start-up
     * (it also checks that the OS saves the YMM registers).  clang 14 does
     * not know "f16c" there, so that bit comes from CPUID leaf 1 (ECX bit
     * 29) -- and CPUID traps to the hypervisor on virtual machines (13 us a
     * call on the dev VM, more than a whole row's dot product), so the
     * answer is kept: 0 not asked yet, 1 no, 2 yes.  Racing first callers
     * store the same value. */
    static atomic_int known;
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k)
        return k == 2;
    __builtin_cpu_init();
    unsigned eax, ebx, ecx, edx;
    bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
    atomic_store_explicit(&known, ok ? 2 : 1, memory_order_relaxed);
    return ok;
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

float quant_kernels_dot_row(quant_kernels k, uint32_t type, const void *row, const float *x,
                            uint64_t n)
{
    const quant_traits *t = quant_traits_of(type);
    if (!t || !t->can_dequant)
        return quant_dot_row(type, row, x, n); /* NaN, as documented */
#if HAVE_AVX2_KERNELS
    if (k == QUANT_KERNELS_AVX2 && cpu_has_avx2())
        return avx2_dot_row(type, row, x, n);
#endif
    (void)k;
    return portable_dot_row(type, row, x, n);
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
    const quant_kernels k = best_kernels();
    const uint8_t *p = w;
    for (uint64_t r = 0; r < n_rows; r++)
        y[r] = quant_kernels_dot_row(k, type, p + r * row_bytes, x, n);
}
