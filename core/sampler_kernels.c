/* sampler_kernels.c: the sampler's whole-vocabulary passes, in portable C
 * and, on x86-64, with AVX2 and AVX-512 (compiled with target attributes so
 * the rest of the build stays baseline x86-64; picked at run time).
 *
 * Every vector version performs, per value, the same IEEE operations as
 * the portable one, so results are bit-identical; test_sampler checks each
 * level against the portable code and against the old implementation. */
#include "sampler_kernels.h"

#include <math.h>

/* ======================================================================
 * Portable C
 * ====================================================================== */

/* The vector kernels use these for their tails: inlined there, they are
 * compiled for the kernel's target (calling plain SSE code with the upper
 * vector halves in use costs a state transition, ~100 ns, per call). */
#define SCALAR static inline __attribute__((always_inline))

SCALAR uint32_t portable_argmax(const float *l, uint32_t n)
{
    if (l[0] != l[0]) /* nothing compares greater than NaN */
        return 0;
    /* four interleaved scans (first index of each one's maximum), so that
     * no single chain of dependent compares sets the pace */
    uint32_t best[4] = {0, 0, 0, 0}, i = 1;
    float bv[4] = {l[0], -INFINITY, -INFINITY, -INFINITY};
    for (; i + 4 <= n; i += 4)
        for (uint32_t a = 0; a < 4; a++)
            if (l[i + a] > bv[a]) {
                bv[a] = l[i + a];
                best[a] = i + a;
            }
    for (; i < n; i++)
        if (l[i] > bv[0]) {
            bv[0] = l[i];
            best[0] = i;
        }
    uint32_t r = best[0];
    for (int a = 1; a < 4; a++) /* '>' keeps the first of equal maxima */
        if (bv[a] > l[r] || (bv[a] == l[r] && best[a] < r))
            r = best[a];
    return r;
}

SCALAR float portable_scan(const float *l, uint32_t n, int mode, float thr, int32_t *idx, float *val,
                           uint32_t *m)
{
    /* four interleaved running maxima (no single chain of dependent
     * compares), each never above the result; appends store always and
     * advance when taken, without a branch on the data */
    float mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    uint32_t c = 0, i = 0;
    if (mode == SK_MAX_ONLY) {
        for (; i + 4 <= n; i += 4)
            for (int a = 0; a < 4; a++)
                mx[a] = l[i + a] > mx[a] ? l[i + a] : mx[a];
    } else {
        for (; i + 4 <= n; i += 4)
            for (int a = 0; a < 4; a++) {
                float x = l[i + a];
                mx[a] = x > mx[a] ? x : mx[a];
                idx[c] = (int32_t)(i + (uint32_t)a);
                val[c] = x;
                c += mode == SK_AT_LEAST ? x >= thr : x >= mx[a] + thr;
            }
    }
    float r = -INFINITY;
    for (int a = 0; a < 4; a++)
        r = mx[a] > r ? mx[a] : r;
    for (; i < n; i++) {
        float x = l[i];
        r = x > r ? x : r;
        if ((mode == SK_AT_LEAST && x >= thr) || (mode == SK_NEAR_MAX && x >= r + thr)) {
            idx[c] = (int32_t)i;
            val[c++] = x;
        }
    }
    if (m)
        *m = c;
    return r;
}

SCALAR double portable_mass(const float *v, uint32_t n, float max, float *pad)
{
    (void)pad;
    double total = 0;
    for (uint32_t b = 0; b < n; b += SK_MASS_BLOCK) {
        float part = 0;
        uint32_t e = n - b < SK_MASS_BLOCK ? n : b + SK_MASS_BLOCK;
        for (uint32_t i = b; i < e; i++)
            part += sk_fast_exp(v[i] - max);
        total += part;
    }
    return total;
}

SCALAR void portable_exps(const float *v, float *out, uint32_t n, float max, float inv_t, float *lo, float *hi)
{
    float a = INFINITY, b = -INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        float e = sk_fast_exp((v[i] - max) * inv_t);
        out[i] = e;
        a = e < a ? e : a;
        b = e > b ? e : b;
    }
    *lo = a;
    *hi = b;
}

SCALAR void portable_buckets(const float *v, uint8_t *out, uint32_t n, float max, float scale)
{
    for (uint32_t i = 0; i < n; i++)
        out[i] = (uint8_t)sk_bucket_of(v[i], max, scale);
}

SCALAR float portable_min(const float *v, uint32_t n, float start)
{
    float lo = start;
    for (uint32_t i = 0; i < n; i++)
        lo = v[i] < lo ? v[i] : lo;
    return lo;
}

SCALAR uint32_t portable_count_better(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv,
                                      int32_t pid)
{
    uint32_t c = 0; /* branch-free, so that compilers can vectorise it */
    if (ids)
        for (uint32_t i = from; i < to; i++)
            c += (uint32_t)((l[i] > pv) | ((l[i] == pv) & (ids[i] < pid)));
    else
        for (uint32_t i = from; i < to; i++)
            c += (uint32_t)((l[i] > pv) | ((l[i] == pv) & ((int32_t)i < pid)));
    return c;
}

SCALAR uint32_t portable_collect_better(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv,
                                        int32_t pid, int32_t *idx, float *val)
{
    uint32_t c = 0;
    for (uint32_t i = from; i < to; i++) { /* stores always, advances when taken */
        int32_t id = ids ? ids[i] : (int32_t)i;
        float v = l[i];
        idx[c] = id;
        val[c] = v;
        c += (uint32_t)((v > pv) | ((v == pv) & (id < pid)));
    }
    return c;
}

SCALAR uint32_t portable_split(int32_t *idx, float *val, const uint8_t *bucket, uint32_t n, int cross,
                               int32_t *cidx, float *cval, uint32_t *c)
{
    uint32_t kept = 0, nc = 0;
    for (uint32_t i = 0; i < n; i++) { /* stores always, advances when taken */
        int32_t id = idx[i];
        float v = val[i];
        idx[kept] = id;
        val[kept] = v;
        kept += bucket[i] < cross;
        cidx[nc] = id;
        cval[nc] = v;
        nc += bucket[i] == cross;
    }
    *c = nc;
    return kept;
}

static uint32_t p_argmax(const float *l, uint32_t n) { return portable_argmax(l, n); }
static float p_scan(const float *l, uint32_t n, int mode, float thr, int32_t *idx, float *val, uint32_t *m)
{
    return portable_scan(l, n, mode, thr, idx, val, m);
}
static double p_mass(const float *v, uint32_t n, float max, float *pad) { return portable_mass(v, n, max, pad); }
static void p_exps(const float *v, float *out, uint32_t n, float max, float inv_t, float *lo, float *hi)
{
    portable_exps(v, out, n, max, inv_t, lo, hi);
}
static void p_buckets(const float *v, uint8_t *out, uint32_t n, float max, float scale)
{
    portable_buckets(v, out, n, max, scale);
}
static float p_min(const float *v, uint32_t n, float start) { return portable_min(v, n, start); }
static uint32_t p_count_better(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv, int32_t pid)
{
    return portable_count_better(l, ids, from, to, pv, pid);
}
static uint32_t p_split(int32_t *idx, float *val, const uint8_t *bucket, uint32_t n, int cross, int32_t *cidx,
                        float *cval, uint32_t *c)
{
    return portable_split(idx, val, bucket, n, cross, cidx, cval, c);
}
static uint32_t p_collect_better(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv,
                                 int32_t pid, int32_t *idx, float *val)
{
    return portable_collect_better(l, ids, from, to, pv, pid, idx, val);
}

static const sk_kernels portable_kernels = {
    p_argmax, p_scan, p_mass, p_exps, p_buckets, p_min, p_count_better, p_split, p_collect_better,
};

/* ======================================================================
 * AVX2 and AVX-512 (x86-64 with GCC or clang)
 * ====================================================================== */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

/* No "fma" here: a fused multiply-add would round differently. */
#if defined(__clang__)
#define UNROLL _Pragma("clang loop unroll(full)")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif
#define AVX2 __attribute__((target("avx2,popcnt")))
#define AVX512 __attribute__((target("avx512f,avx2,popcnt")))

/* For each 8-bit mask, the positions of its set bits (a nibble each,
 * lowest first): the permutation that packs the selected lanes. */
static const uint32_t pack_lut[256] = {
    0x00000000, 0x00000000, 0x00000001, 0x00000010, 0x00000002, 0x00000020, 0x00000021, 0x00000210,
    0x00000003, 0x00000030, 0x00000031, 0x00000310, 0x00000032, 0x00000320, 0x00000321, 0x00003210,
    0x00000004, 0x00000040, 0x00000041, 0x00000410, 0x00000042, 0x00000420, 0x00000421, 0x00004210,
    0x00000043, 0x00000430, 0x00000431, 0x00004310, 0x00000432, 0x00004320, 0x00004321, 0x00043210,
    0x00000005, 0x00000050, 0x00000051, 0x00000510, 0x00000052, 0x00000520, 0x00000521, 0x00005210,
    0x00000053, 0x00000530, 0x00000531, 0x00005310, 0x00000532, 0x00005320, 0x00005321, 0x00053210,
    0x00000054, 0x00000540, 0x00000541, 0x00005410, 0x00000542, 0x00005420, 0x00005421, 0x00054210,
    0x00000543, 0x00005430, 0x00005431, 0x00054310, 0x00005432, 0x00054320, 0x00054321, 0x00543210,
    0x00000006, 0x00000060, 0x00000061, 0x00000610, 0x00000062, 0x00000620, 0x00000621, 0x00006210,
    0x00000063, 0x00000630, 0x00000631, 0x00006310, 0x00000632, 0x00006320, 0x00006321, 0x00063210,
    0x00000064, 0x00000640, 0x00000641, 0x00006410, 0x00000642, 0x00006420, 0x00006421, 0x00064210,
    0x00000643, 0x00006430, 0x00006431, 0x00064310, 0x00006432, 0x00064320, 0x00064321, 0x00643210,
    0x00000065, 0x00000650, 0x00000651, 0x00006510, 0x00000652, 0x00006520, 0x00006521, 0x00065210,
    0x00000653, 0x00006530, 0x00006531, 0x00065310, 0x00006532, 0x00065320, 0x00065321, 0x00653210,
    0x00000654, 0x00006540, 0x00006541, 0x00065410, 0x00006542, 0x00065420, 0x00065421, 0x00654210,
    0x00006543, 0x00065430, 0x00065431, 0x00654310, 0x00065432, 0x00654320, 0x00654321, 0x06543210,
    0x00000007, 0x00000070, 0x00000071, 0x00000710, 0x00000072, 0x00000720, 0x00000721, 0x00007210,
    0x00000073, 0x00000730, 0x00000731, 0x00007310, 0x00000732, 0x00007320, 0x00007321, 0x00073210,
    0x00000074, 0x00000740, 0x00000741, 0x00007410, 0x00000742, 0x00007420, 0x00007421, 0x00074210,
    0x00000743, 0x00007430, 0x00007431, 0x00074310, 0x00007432, 0x00074320, 0x00074321, 0x00743210,
    0x00000075, 0x00000750, 0x00000751, 0x00007510, 0x00000752, 0x00007520, 0x00007521, 0x00075210,
    0x00000753, 0x00007530, 0x00007531, 0x00075310, 0x00007532, 0x00075320, 0x00075321, 0x00753210,
    0x00000754, 0x00007540, 0x00007541, 0x00075410, 0x00007542, 0x00075420, 0x00075421, 0x00754210,
    0x00007543, 0x00075430, 0x00075431, 0x00754310, 0x00075432, 0x00754320, 0x00754321, 0x07543210,
    0x00000076, 0x00000760, 0x00000761, 0x00007610, 0x00000762, 0x00007620, 0x00007621, 0x00076210,
    0x00000763, 0x00007630, 0x00007631, 0x00076310, 0x00007632, 0x00076320, 0x00076321, 0x00763210,
    0x00000764, 0x00007640, 0x00007641, 0x00076410, 0x00007642, 0x00076420, 0x00076421, 0x00764210,
    0x00007643, 0x00076430, 0x00076431, 0x00764310, 0x00076432, 0x00764320, 0x00764321, 0x07643210,
    0x00000765, 0x00007650, 0x00007651, 0x00076510, 0x00007652, 0x00076520, 0x00076521, 0x00765210,
    0x00007653, 0x00076530, 0x00076531, 0x00765310, 0x00076532, 0x00765320, 0x00765321, 0x07653210,
    0x00007654, 0x00076540, 0x00076541, 0x00765410, 0x00076542, 0x00765420, 0x00765421, 0x07654210,
    0x00076543, 0x00765430, 0x00765431, 0x07654310, 0x00765432, 0x07654320, 0x07654321, 0x76543210,
};

AVX2 static inline __m256i pack_perm(unsigned mask)
{
    __m256i nib = _mm256_srlv_epi32(_mm256_set1_epi32((int)pack_lut[mask]), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_and_si256(nib, _mm256_set1_epi32(15));
}

/* sk_fast_exp on 8 lanes, operation for operation. */
AVX2 static inline __m256 exp8(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f)); /* x > -87 ? x : -87 */
    __m256 y = _mm256_mul_ps(x, _mm256_set1_ps(1.44269504f));
    __m256 ym = _mm256_add_ps(y, _mm256_set1_ps(12582912.0f));
    __m256 n = _mm256_sub_ps(ym, _mm256_set1_ps(12582912.0f));
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(y, n), _mm256_set1_ps(0.693147181f));
    __m256 q = _mm256_set1_ps(1.0f / 720);
    q = _mm256_add_ps(_mm256_set1_ps(1.0f / 120), _mm256_mul_ps(t, q));
    q = _mm256_add_ps(_mm256_set1_ps(1.0f / 24), _mm256_mul_ps(t, q));
    q = _mm256_add_ps(_mm256_set1_ps(1.0f / 6), _mm256_mul_ps(t, q));
    q = _mm256_add_ps(_mm256_set1_ps(0.5f), _mm256_mul_ps(t, q));
    q = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(t, q));
    q = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(t, q));
    __m256i e = _mm256_slli_epi32(_mm256_castps_si256(ym), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(q), e));
}

AVX2 static float avx2_scan(const float *l, uint32_t n, int mode, float thr, int32_t *idx, float *val, uint32_t *m);

/* The maximum, then the first index holding it: a scan keeping the best
 * under '>' ends on the first occurrence of the maximum. */
AVX2 static uint32_t avx2_argmax(const float *l, uint32_t n)
{
    if (l[0] != l[0]) /* nothing compares greater than NaN */
        return 0;
    float m = avx2_scan(l, n, SK_MAX_ONLY, 0, NULL, NULL, NULL);
    if (m == -INFINITY) /* only -inf and NaN: l[0] is -inf */
        return 0;
    __m256 mv = _mm256_set1_ps(m);
    uint32_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 e[4];
        UNROLL for (int a = 0; a < 4; a++)
            e[a] = _mm256_cmp_ps(_mm256_loadu_ps(l + i + 8 * a), mv, _CMP_EQ_OQ);
        if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(e[0], e[1]), _mm256_or_ps(e[2], e[3]))))
            break;
    }
    for (; i < n; i++)
        if (l[i] == m)
            return i;
    return 0; /* not reached: m is one of the values */
}

/* Appends the lanes of (at, v) selected by mask at (idx, val) + *c.  All
 * 8 lanes are stored (the caller's arrays have SK_SLACK spare entries) and
 * nothing branches on the mask, which is often unpredictable. */
AVX2 static inline void append8(unsigned mask, __m256i at, __m256 v, int32_t *idx, float *val, uint32_t *c)
{
    __m256i p = pack_perm(mask);
    _mm256_storeu_si256((__m256i *)(idx + *c), _mm256_permutevar8x32_epi32(at, p));
    _mm256_storeu_ps(val + *c, _mm256_permutevar8x32_ps(v, p));
    *c += (uint32_t)__builtin_popcount(mask);
}

AVX2 static float avx2_scan(const float *l, uint32_t n, int mode, float thr, int32_t *idx, float *val, uint32_t *m)
{
    /* four running maxima, so that no chain of dependent max operations
     * limits the pass */
    __m256 mx[4];
    for (int a = 0; a < 4; a++)
        mx[a] = _mm256_set1_ps(-INFINITY);
    uint32_t c = 0, i = 0, end = n / 32 * 32;
    if (mode == SK_MAX_ONLY) {
        for (; i < end; i += 32)
            UNROLL for (int a = 0; a < 4; a++)
                mx[a] = _mm256_max_ps(_mm256_loadu_ps(l + i + 8 * a), mx[a]); /* v > mx ? v : mx */
    } else {
        /* the threshold moves with the maximum of everything before the
         * current stretch of 256 values, never above the result */
        float seen = -INFINITY;
        __m256 t = _mm256_set1_ps(mode == SK_NEAR_MAX ? seen + thr : thr);
        __m256i at = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        while (i < end) {
            for (uint32_t stop = end - i < 256 ? end : i + 256; i < stop; i += 32) {
                __m256 v[4], ge[4];
                UNROLL for (int a = 0; a < 4; a++) {
                    v[a] = _mm256_loadu_ps(l + i + 8 * a);
                    mx[a] = _mm256_max_ps(v[a], mx[a]);
                    ge[a] = _mm256_cmp_ps(v[a], t, _CMP_GE_OQ);
                }
                if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(ge[0], ge[1]), _mm256_or_ps(ge[2], ge[3]))))
                    UNROLL for (int a = 0; a < 4; a++)
                        append8((unsigned)_mm256_movemask_ps(ge[a]), _mm256_add_epi32(at, _mm256_set1_epi32((int)i + 8 * a)),
                                v[a], idx, val, &c);
            }
            if (mode == SK_NEAR_MAX) {
                float lane[8];
                _mm256_storeu_ps(lane, _mm256_max_ps(_mm256_max_ps(mx[0], mx[1]), _mm256_max_ps(mx[2], mx[3])));
                for (int j = 0; j < 8; j++)
                    seen = lane[j] > seen ? lane[j] : seen;
                t = _mm256_set1_ps(seen + thr);
            }
        }
    }
    float lane[8], r = -INFINITY;
    _mm256_storeu_ps(lane, _mm256_max_ps(_mm256_max_ps(mx[0], mx[1]), _mm256_max_ps(mx[2], mx[3])));
    for (int j = 0; j < 8; j++)
        r = lane[j] > r ? lane[j] : r;
    for (; i < n; i++) {
        float x = l[i];
        r = x > r ? x : r;
        if ((mode == SK_AT_LEAST && x >= thr) || (mode == SK_NEAR_MAX && x >= r + thr)) {
            idx[c] = (int32_t)i;
            val[c++] = x;
        }
    }
    if (m)
        *m = c;
    return r;
}

/* In-register 8x8 transpose: r[k] lane j <- r[j] lane k. */
AVX2 static inline void transpose8(__m256 *r)
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* Where the rows of a group of `width` mass blocks starting at block b0
 * start, and how long they are; a short (last) block is copied into pad so
 * that whole vectors can be read past its end, and missing blocks read pad
 * with length 0.  Returns the longest length; *full: all rows full. */
static uint32_t group_rows(const float *v, uint32_t n, uint32_t b0, int width, float *pad, const float **row,
                           int32_t *len, bool *full)
{
    uint32_t nb = (n + SK_MASS_BLOCK - 1) / SK_MASS_BLOCK, steps = 0;
    *full = true;
    for (int j = 0; j < width; j++) {
        uint32_t b = b0 + (uint32_t)j, start = b * SK_MASS_BLOCK;
        row[j] = pad;
        len[j] = 0;
        if (b < nb) {
            uint32_t L = n - start < SK_MASS_BLOCK ? n - start : SK_MASS_BLOCK;
            len[j] = (int32_t)L;
            row[j] = v + start;
            if (L < SK_MASS_BLOCK) {
                memcpy(pad, v + start, L * sizeof *v);
                row[j] = pad;
            }
            steps = L > steps ? L : steps;
        }
        *full = *full && len[j] == SK_MASS_BLOCK;
    }
    return steps;
}

/* Up to 8 blocks from b0, one per lane: each lane keeps its own block's
 * float sum in the block's order (the values arrive transposed); lanes
 * past a block's end add exactly +0.  Adds the sums to *total in order. */
AVX2 static void avx2_mass_group(const float *v, uint32_t n, uint32_t b0, float max, float *pad, double *total)
{
    const float *row[8];
    int32_t len[8];
    bool full;
    uint32_t steps = group_rows(v, n, b0, 8, pad, row, len, &full);
    __m256 vmax = _mm256_set1_ps(max), acc = _mm256_setzero_ps();
    __m256i vlen = _mm256_loadu_si256((const __m256i *)len);
    for (uint32_t i = 0; i < steps; i += 8) {
        __m256 r[8];
        UNROLL for (int j = 0; j < 8; j++)
            r[j] = _mm256_loadu_ps(row[j] + i);
        transpose8(r);
        if (full) {
            UNROLL for (int k = 0; k < 8; k++)
                acc = _mm256_add_ps(acc, exp8(_mm256_sub_ps(r[k], vmax)));
        } else {
            UNROLL for (int k = 0; k < 8; k++) {
                __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(vlen, _mm256_set1_epi32((int)i + k)));
                acc = _mm256_add_ps(acc, _mm256_and_ps(exp8(_mm256_sub_ps(r[k], vmax)), live));
            }
        }
    }
    float part[8];
    _mm256_storeu_ps(part, acc);
    uint32_t nb = (n + SK_MASS_BLOCK - 1) / SK_MASS_BLOCK;
    for (uint32_t j = 0; j < 8 && b0 + j < nb; j++)
        *total += part[j];
}

AVX2 static double avx2_mass(const float *v, uint32_t n, float max, float *pad)
{
    uint32_t nb = (n + SK_MASS_BLOCK - 1) / SK_MASS_BLOCK;
    double total = 0;
    for (uint32_t b0 = 0; b0 < nb; b0 += 8)
        avx2_mass_group(v, n, b0, max, pad, &total);
    return total;
}

AVX2 static void avx2_exps(const float *v, float *out, uint32_t n, float max, float inv_t, float *lo, float *hi)
{
    __m256 vmax = _mm256_set1_ps(max), vt = _mm256_set1_ps(inv_t);
    __m256 a = _mm256_set1_ps(INFINITY), b = _mm256_set1_ps(-INFINITY);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + i), vmax), vt));
        _mm256_storeu_ps(out + i, e);
        a = _mm256_min_ps(a, e);
        b = _mm256_max_ps(b, e);
    }
    float la[8], lb[8], ta, tb;
    _mm256_storeu_ps(la, a);
    _mm256_storeu_ps(lb, b);
    portable_exps(v + i, out + i, n - i, max, inv_t, &ta, &tb);
    for (int j = 0; j < 8; j++) {
        ta = la[j] < ta ? la[j] : ta;
        tb = lb[j] > tb ? lb[j] : tb;
    }
    *lo = ta;
    *hi = tb;
}

AVX2 static void avx2_buckets(const float *v, uint8_t *out, uint32_t n, float max, float scale)
{
    __m256 vmax = _mm256_set1_ps(max), vs = _mm256_set1_ps(scale);
    __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(SK_BUCKETS - 1);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 b = _mm256_mul_ps(_mm256_sub_ps(vmax, _mm256_loadu_ps(v + i)), vs);
        b = _mm256_min_ps(_mm256_max_ps(b, zero), top); /* b > 0 ? .. : 0 (NaN too), then < 255 ? b : 255 */
        __m256i w = _mm256_cvttps_epi32(b);
        __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        _mm_storel_epi64((__m128i *)(out + i), _mm_packus_epi16(h, h));
    }
    portable_buckets(v + i, out + i, n - i, max, scale);
}

AVX2 static float avx2_min(const float *v, uint32_t n, float start)
{
    __m256 a = _mm256_set1_ps(start), b = a;
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_min_ps(_mm256_loadu_ps(v + i), a);
        b = _mm256_min_ps(_mm256_loadu_ps(v + i + 8), b);
    }
    float lane[8];
    _mm256_storeu_ps(lane, _mm256_min_ps(a, b));
    float lo = portable_min(v + i, n - i, start);
    return portable_min(lane, 8, lo);
}

AVX2 static uint32_t avx2_count_better(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv,
                                       int32_t pid)
{
    /* counts l > pv in vector lanes (a true compare is -1); the rare
     * stretches holding a value equal to pv are redone exactly */
    __m256 p = _mm256_set1_ps(pv);
    __m256i cnt = _mm256_setzero_si256();
    uint32_t c = 0, i = from;
    for (; i + 32 <= to; i += 32) {
        __m256 v[4], eq;
        UNROLL for (int a = 0; a < 4; a++)
            v[a] = _mm256_loadu_ps(l + i + 8 * a);
        eq = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v[0], p, _CMP_EQ_OQ), _mm256_cmp_ps(v[1], p, _CMP_EQ_OQ)),
                          _mm256_or_ps(_mm256_cmp_ps(v[2], p, _CMP_EQ_OQ), _mm256_cmp_ps(v[3], p, _CMP_EQ_OQ)));
        if (_mm256_movemask_ps(eq)) {
            c += portable_count_better(l, ids, i, i + 32, pv, pid);
            continue;
        }
        UNROLL for (int a = 0; a < 4; a++)
            cnt = _mm256_sub_epi32(cnt, _mm256_castps_si256(_mm256_cmp_ps(v[a], p, _CMP_GT_OQ)));
    }
    int32_t lane[8];
    _mm256_storeu_si256((__m256i *)lane, cnt);
    for (int j = 0; j < 8; j++)
        c += (uint32_t)lane[j];
    return c + portable_count_better(l, ids, i, to, pv, pid);
}

AVX2 static uint32_t avx2_split(int32_t *idx, float *val, const uint8_t *bucket, uint32_t n, int cross,
                                int32_t *cidx, float *cval, uint32_t *c)
{
    __m256i x = _mm256_set1_epi32(cross);
    uint32_t kept = 0, nc = 0, i = 0;
    for (; i + 8 <= n; i += 8) { /* writes at kept <= i: behind the reads */
        __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(bucket + i)));
        __m256i id = _mm256_loadu_si256((const __m256i *)(idx + i));
        __m256 v = _mm256_loadu_ps(val + i);
        unsigned below = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(x, b)));
        unsigned at = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, b)));
        append8(below, id, v, idx, val, &kept);
        if (at) /* the crossing bucket: a small fraction */
            append8(at, id, v, cidx, cval, &nc);
    }
    for (; i < n; i++) {
        int32_t id = idx[i];
        float v = val[i];
        if (bucket[i] < cross) {
            idx[kept] = id;
            val[kept++] = v;
        } else if (bucket[i] == cross) {
            cidx[nc] = id;
            cval[nc++] = v;
        }
    }
    *c = nc;
    return kept;
}

AVX2 static uint32_t avx2_collect_better(const float *l, const int32_t *ids, uint32_t from, uint32_t to, float pv,
                                         int32_t pid, int32_t *idx, float *val)
{
    __m256 p = _mm256_set1_ps(pv);
    __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    uint32_t c = 0, i = from;
    for (; i + 32 <= to; i += 32) {
        __m256 v[4], gt[4], eq;
        UNROLL for (int a = 0; a < 4; a++) {
            v[a] = _mm256_loadu_ps(l + i + 8 * a);
            gt[a] = _mm256_cmp_ps(v[a], p, _CMP_GT_OQ);
        }
        eq = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v[0], p, _CMP_EQ_OQ), _mm256_cmp_ps(v[1], p, _CMP_EQ_OQ)),
                          _mm256_or_ps(_mm256_cmp_ps(v[2], p, _CMP_EQ_OQ), _mm256_cmp_ps(v[3], p, _CMP_EQ_OQ)));
        if (_mm256_movemask_ps(eq)) { /* a tie with the pivot: decided by id, rarely */
            c += portable_collect_better(l, ids, i, i + 32, pv, pid, idx + c, val + c);
            continue;
        }
        if (!_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(gt[0], gt[1]), _mm256_or_ps(gt[2], gt[3]))))
            continue;
        UNROLL for (int a = 0; a < 4; a++) {
            __m256i id = ids ? _mm256_loadu_si256((const __m256i *)(ids + i + 8 * a))
                             : _mm256_add_epi32(iota, _mm256_set1_epi32((int)(i + 8 * (uint32_t)a)));
            append8((unsigned)_mm256_movemask_ps(gt[a]), id, v[a], idx, val, &c);
        }
    }
    return c + portable_collect_better(l, ids, i, to, pv, pid, idx + c, val + c);
}

static const sk_kernels avx2_kernels = {
    avx2_argmax, avx2_scan, avx2_mass, avx2_exps, avx2_buckets, avx2_min, avx2_count_better, avx2_split,
    avx2_collect_better,
};

/* sk_fast_exp on 16 lanes. */
AVX512 static inline __m512 exp16(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 y = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504f));
    __m512 ym = _mm512_add_ps(y, _mm512_set1_ps(12582912.0f));
    __m512 n = _mm512_sub_ps(ym, _mm512_set1_ps(12582912.0f));
    __m512 t = _mm512_mul_ps(_mm512_sub_ps(y, n), _mm512_set1_ps(0.693147181f));
    __m512 q = _mm512_set1_ps(1.0f / 720);
    q = _mm512_add_ps(_mm512_set1_ps(1.0f / 120), _mm512_mul_ps(t, q));
    q = _mm512_add_ps(_mm512_set1_ps(1.0f / 24), _mm512_mul_ps(t, q));
    q = _mm512_add_ps(_mm512_set1_ps(1.0f / 6), _mm512_mul_ps(t, q));
    q = _mm512_add_ps(_mm512_set1_ps(0.5f), _mm512_mul_ps(t, q));
    q = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(t, q));
    q = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(t, q));
    __m512i e = _mm512_slli_epi32(_mm512_castps_si512(ym), 23);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(q), e));
}

/* In-register 16x16 transpose: c[k] lane j <- r[j] lane k (r is clobbered). */
AVX512 static inline void transpose16(__m512 *r, __m512 *c)
{
    UNROLL for (int i = 0; i < 16; i += 2) {
        c[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        c[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    UNROLL for (int i = 0; i < 16; i += 4) { /* r[i + k] 128-bit lane q: rows i..i+3, column 4q + k */
        r[i] = _mm512_shuffle_ps(c[i], c[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(c[i], c[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(c[i + 1], c[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(c[i + 1], c[i + 3], 0xEE);
    }
    UNROLL for (int k = 0; k < 4; k++) { /* gather 128-bit lane q of the four row groups */
        __m512 ab0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88), ab1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);
        __m512 cd0 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88), cd1 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
        c[k] = _mm512_shuffle_f32x4(ab0, cd0, 0x88);
        c[k + 8] = _mm512_shuffle_f32x4(ab0, cd0, 0xDD);
        c[k + 4] = _mm512_shuffle_f32x4(ab1, cd1, 0x88);
        c[k + 12] = _mm512_shuffle_f32x4(ab1, cd1, 0xDD);
    }
}

/* As avx2_mass, 16 blocks per group; a last group of 8 or fewer blocks
 * goes to the 8-lane code rather than leave half the lanes idle. */
AVX512 static double avx512_mass(const float *v, uint32_t n, float max, float *pad)
{
    uint32_t nb = (n + SK_MASS_BLOCK - 1) / SK_MASS_BLOCK, b0 = 0;
    __m512 vmax = _mm512_set1_ps(max);
    double total = 0;
    for (; b0 + 8 < nb; b0 += 16) { /* more than 8 blocks left */
        const float *row[16];
        int32_t len[16];
        bool full;
        uint32_t steps = group_rows(v, n, b0, 16, pad, row, len, &full);
        __m512 acc = _mm512_setzero_ps();
        __m512i vlen = _mm512_loadu_si512(len);
        for (uint32_t i = 0; i < steps; i += 16) {
            __m512 r[16], c[16];
            UNROLL for (int j = 0; j < 16; j++)
                r[j] = _mm512_loadu_ps(row[j] + i);
            transpose16(r, c);
            if (full) {
                UNROLL for (int k = 0; k < 16; k++)
                    acc = _mm512_add_ps(acc, exp16(_mm512_sub_ps(c[k], vmax)));
            } else {
                UNROLL for (int k = 0; k < 16; k++) {
                    __mmask16 live = _mm512_cmpgt_epi32_mask(vlen, _mm512_set1_epi32((int)i + k));
                    acc = _mm512_mask_add_ps(acc, live, acc, exp16(_mm512_sub_ps(c[k], vmax)));
                }
            }
        }
        float part[16];
        _mm512_storeu_ps(part, acc);
        for (uint32_t j = 0; j < 16 && b0 + j < nb; j++)
            total += part[j];
    }
    if (b0 < nb)
        avx2_mass_group(v, n, b0, max, pad, &total);
    return total;
}

static const sk_kernels avx512_kernels = {
    avx2_argmax, avx2_scan, avx512_mass, avx2_exps, avx2_buckets, avx2_min, avx2_count_better, avx2_split,
    avx2_collect_better,
};
#else
#define HAVE_X86_KERNELS 0
#endif

/* ======================================================================
 * Dispatch
 * ====================================================================== */

int sk_best_level(void)
{
#if HAVE_X86_KERNELS
    /* __builtin_cpu_supports also checks that the OS saves the wide
     * registers; it reads a table filled at start-up, cheap to ask. */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("popcnt"))
        return 0;
    return __builtin_cpu_supports("avx512f") ? 2 : 1;
#else
    return 0;
#endif
}

int sk_get(sk_kernels *k, int level)
{
    int best = sk_best_level();
    level = level < 0 ? 0 : level > best ? best : level;
#if HAVE_X86_KERNELS
    *k = level == 2 ? avx512_kernels : level == 1 ? avx2_kernels : portable_kernels;
#else
    *k = portable_kernels;
#endif
    return level;
}
