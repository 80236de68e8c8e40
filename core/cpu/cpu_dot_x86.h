/* cpu_dot_x86.h: the 256-bit x86 kernels, written once and compiled twice:
 * by cpu_dot_avx2.c (u8 x s8 products through vpmaddubsw + vpmaddwd) and by
 * cpu_dot_avxvnni.c (CPU_X86_VNNI: one vpdpbusd).  The includer defines
 * CPU_X86_TARGET (the target attribute string) and CPU_X86_FILL (the name
 * of the function that puts the kernels in a table).
 *
 * The form of every 32-element kernel: the weight block's levels unpacked
 * once into 32 bytes (unsigned where the format allows, so a u8 x s8
 * product needs no sign trick), then per token one integer dot product of
 * 8 lanes, converted and scaled by d_w * d_x -- llama.cpp's expressions:
 *   Q4_0, Q5_0: levels offset by 8 / 16, taken off the integer sum through
 *     the activation's sum(q): d_w d_x (lv . q - off sum(q)), exact;
 *   Q4_1, Q5_1: d_w d_x (lv . q) + m_w s, with q8_1's s;
 *   Q8_0, IQ4_NL and MXFP4 (levels from their tables): signed levels,
 *     |lv| x sign(q, lv).
 * The K-quants follow ggml's own layout of the work: per 32 (Q4_K, Q5_K) or
 * 16 (Q6_K, Q3_K, Q2_K) elements a vpmaddubsw into 16-bit pairs, vpmaddwd (Q4_K, Q5_K:
 * vpdpwssd with VNNI) with the sub-block's scale into 32 bits -- the scales
 * unpacked into one register and routed to their lanes by a byte shuffle --
 * one conversion per super-block; mins (Q4_K, Q5_K, Q2_K) and Q6_K's /
 * Q3_K's offsets of 32 / 4 from q8_K's sums per 16.
 *
 * Why two accumulators per token: a single chain of dependent FMAs (4
 * cycles each) would bound a mat-vec at one block per 4 cycles, below what
 * memory delivers. */
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

/* 8 lanes, each the sum of 4 products of unsigned u and signed s bytes
 * (|u| <= 128 with |s| <= 127: vpmaddubsw's 16-bit pairs cannot saturate). */
INL __m256i dot_u8s8(__m256i u, __m256i s)
{
#ifdef CPU_X86_VNNI
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* acc (8 int32 lanes) += 16-bit pairs p times 16-bit scales s. */
INL __m256i add_scaled16(__m256i acc, __m256i p, __m256i s)
{
#ifdef CPU_X86_VNNI
    return _mm256_dpwssd_avx_epi32(acc, p, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
}

/* The 16-bit lanes of register sc (its 8 words in both 128-bit lanes) all
 * set to word i: one byte shuffle. */
INL __m256i word_of(__m256i sc, int i)
{
    return _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 + 0x0202 * i)));
}

INL float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INL float hsum4(__m128 s)
{
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

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

/* 16 packed bytes -> 32 levels: low nibbles (elements 0-15), high (16-31). */
INL __m256i nibbles32(const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
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

/* The tile's view of q8_32 activations. */
typedef struct {
    const int8_t *q[CPU_TILE_TOK];
    const float *d[CPU_TILE_TOK], *s[CPU_TILE_TOK];
    const int32_t *sum[CPU_TILE_TOK];
} act32;

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

/* Per-token running sums: two sets (see "Why" above). */
typedef struct {
    __m256 v[CPU_TILE_TOK];
    float c[CPU_TILE_TOK];
} sums;

/* Levels lv - off (off 8 or 16, lv unsigned) of block b against every
 * token: the offset leaves the integer sum as off/8 * sum(q) from each of
 * the 8 lanes, so acc += d_w d_x * (exact integer dot). */
INL void block32_offset(const act32 *a, int nt, uint64_t b, __m256i lv, int off, float dw, sums *acc)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i y = load256(a->q[t] + 32 * b);
        const __m256i p = _mm256_sub_epi32(dot_u8s8(lv, y), _mm256_set1_epi32(off / 8 * a->sum[t][b]));
        acc->v[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a->d[t][b]), _mm256_cvtepi32_ps(p), acc->v[t]);
    }
}

/* Levels lv with a min m (value d_w lv + m): acc += d_w d_x (lv . q), and
 * c += m s for block b of every token. */
INL void block32_min(const act32 *a, int nt, uint64_t b, __m256i lv, float dw, float m, sums *acc)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i y = load256(a->q[t] + 32 * b);
        const __m256 p = _mm256_cvtepi32_ps(dot_u8s8(lv, y));
        acc->v[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a->d[t][b]), p, acc->v[t]);
        acc->c[t] += m * a->s[t][b];
    }
}

/* Q8_0's signed levels: |lv| against q with lv's signs. */
INL void block32_signed(const act32 *a, int nt, uint64_t b, __m256i lv, float dw, sums *acc)
{
    const __m256i au = _mm256_sign_epi8(lv, lv);
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i y = _mm256_sign_epi8(load256(a->q[t] + 32 * b), lv);
        const __m256 p = _mm256_cvtepi32_ps(dot_u8s8(au, y));
        acc->v[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a->d[t][b]), p, acc->v[t]);
    }
}

INL void sums_zero(sums *s, int nt)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        s->v[t] = _mm256_setzero_ps();
        s->c[t] = 0;
    }
}

/* out[t] = hsum(v) + c over both sets. */
INL void sums_out(const sums *s0, const sums *s1, int nt, float *out)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum8(_mm256_add_ps(s0->v[t], s1->v[t])) + (s0->c[t] + s1->c[t]);
}

/* A cpu_rows_fn over fn_nt(row, x, NT, n, out), called with a constant NT
 * (the inlined body is then specialized: the token loops unrolled, the
 * sums in registers). */
#define ROWS_NT(fn_nt, NT)                                                                   \
    for (uint64_t r = 0; r < n_rows; r++) {                                                  \
        float o_[CPU_TILE_TOK];                                                              \
        fn_nt((const char *)w + r * row_bytes, x, NT, n, o_);                                \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)                                                         \
            y[t][r] = accumulate ? y[t][r] + o_[t] : o_[t];                                  \
    }
/* More than 4 tokens: two passes over the row (4, then the rest), the
 * second from the L1 cache -- 16 registers hold the sums of 4 tokens, not 8. */
#define ROWS_NT_SPLIT(fn_nt, NT2)                                                            \
    for (uint64_t r = 0; r < n_rows; r++) {                                                  \
        float o_[CPU_TILE_TOK];                                                              \
        fn_nt((const char *)w + r * row_bytes, x, 4, n, o_);                                 \
        fn_nt((const char *)w + r * row_bytes, x + 4, NT2, n, o_ + 4);                       \
        _Pragma("GCC unroll 8") for (int t = 0; t < 4 + NT2; t++)                            \
            y[t][r] = accumulate ? y[t][r] + o_[t] : o_[t];                                  \
    }
#define TILE_DISPATCH(name, fn_nt)                                                                        \
    TGT static void name(const void *w, uint64_t row_bytes, uint64_t n_rows, const void *const *x, int nt, \
                         uint64_t n, float *const *y, bool accumulate)                                     \
    {                                                                                                     \
        switch (nt) {                                                                                     \
        case 1: ROWS_NT(fn_nt, 1) break;                                                                  \
        case 2: ROWS_NT(fn_nt, 2) break;                                                                  \
        case 3: ROWS_NT(fn_nt, 3) break;                                                                  \
        case 4: ROWS_NT(fn_nt, 4) break;                                                                  \
        case 5: ROWS_NT_SPLIT(fn_nt, 1) break;                                                            \
        case 6: ROWS_NT_SPLIT(fn_nt, 2) break;                                                            \
        case 7: ROWS_NT_SPLIT(fn_nt, 3) break;                                                            \
        default: ROWS_NT_SPLIT(fn_nt, 4) break;                                                           \
        }                                                                                                 \
    }

/* The loop over 32-element blocks shared by the five formats: STEP(b, acc)
 * handles block b, even blocks into one set of sums, odd into the other
 * (for every nt alike: a token's sum must not depend on its tile). */
#define LOOP32(nt, nb, STEP)                          \
    sums s0_, s1_;                                    \
    sums_zero(&s0_, nt);                              \
    sums_zero(&s1_, nt);                              \
    uint64_t b_ = 0;                                  \
    for (; b_ + 2 <= (nb); b_ += 2) {                 \
        STEP(b_, &s0_);                               \
        STEP(b_ + 1, &s1_);                           \
    }                                                 \
    if (b_ < (nb))                                    \
        STEP(b_, &s0_)

/* ======================================================================
 * 32-element formats against q8_32
 * ====================================================================== */

INL void q4_0_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q4_0 *w = row;
    act32 a;
    act32_init(&a, x, nt, n);
#define STEP(b, acc) block32_offset(&a, nt, b, nibbles32(w[b].qs), 8, half(&w[b].d), acc)
    LOOP32(nt, n / 32, STEP);
#undef STEP
    sums_out(&s0_, &s1_, nt, out);
}
TILE_DISPATCH(x_dot_q4_0, q4_0_nt)

/* ======================================================================
 * Q4_0 packed by 16 rows (cpu_pack.h), as two halves of 8 rows: per block
 * and token, the 8 rows' exact integer dot products (one per 32-bit lane)
 * against the token's 4-byte groups broadcast; then acc += (d_w d_x) s as
 * the portable kernel adds it (no FMA), so the bits are the portable set's.
 * ====================================================================== */

/* The 8 rows' (lanes') sums over 4-element groups k: low nibbles of chunk
 * c's bytes are elements 4c.., high ones 16 + 4c..; the offset of 8 comes
 * off through the token's block sum, leaving each block's dot exact.
 * Without VNNI the 16-bit pairs of all 8 vpmaddubsw add up before the one
 * vpmaddwd: each 16-bit lane holds at most 16 products of 15 x 128. */
INL __m256i packed_block8(const __m256i *lo, const __m256i *hi, const int8_t *q, int32_t qsum)
{
#ifdef CPU_X86_VNNI
    __m256i s = _mm256_set1_epi32(-8 * qsum);
    for (int c = 0; c < 4; c++) {
        int32_t a, b;
        memcpy(&a, q + 4 * c, 4);
        memcpy(&b, q + 16 + 4 * c, 4);
        s = _mm256_dpbusd_avx_epi32(s, lo[c], _mm256_set1_epi32(a));
        s = _mm256_dpbusd_avx_epi32(s, hi[c], _mm256_set1_epi32(b));
    }
    return s;
#else
    __m256i p = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        int32_t a, b;
        memcpy(&a, q + 4 * c, 4);
        memcpy(&b, q + 16 + 4 * c, 4);
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(lo[c], _mm256_set1_epi32(a)));
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[c], _mm256_set1_epi32(b)));
    }
    return _mm256_sub_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)), _mm256_set1_epi32(8 * qsum));
#endif
}

INL void packed_q4_0_half(const uint8_t *group, int half8, const void *const *x, int nt, uint64_t n, float *const *y,
                          uint64_t r0, bool accumulate)
{
    act32 a;
    act32_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const uint8_t *blk = group;
    for (uint64_t b = 0; b < n / 32; b++, blk += 288) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * half8)));
        __m256i lo[4], hi[4];
        for (int c = 0; c < 4; c++) {
            const __m256i v = load256(blk + 32 + 64 * c + 32 * half8);
            lo[c] = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256i s = packed_block8(lo, hi, a.q[t] + 32 * b, a.sum[t][b]);
            const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[t][b]));
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s)));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        float *o = y[t] + r0 + 8 * half8;
        _mm256_storeu_ps(o, accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), acc[t]) : acc[t]);
    }
}

/* A packed kernel: every group's two halves of 8 rows through HALF, the
 * tile's token count a constant in each call (so its loops unroll). */
#define PACKED_NT(HALF, NT)                                                                    \
    for (uint64_t g = 0; g < n_groups; g++)                                                    \
        for (int h = 0; h < 2; h++)                                                            \
            HALF((const uint8_t *)groups + g * group_bytes, h, x, NT, n, y, 16 * g, accumulate);
#define PACKED_KERNEL(NAME, HALF)                                                              \
    TGT static void NAME(const void *groups, uint64_t group_bytes, uint64_t n_groups, const void *const *x, int nt, \
                         uint64_t n, float *const *y, bool accumulate)                         \
    {                                                                                          \
        switch (nt) {                                                                          \
        case 1: PACKED_NT(HALF, 1) break;                                                      \
        case 2: PACKED_NT(HALF, 2) break;                                                      \
        case 3: PACKED_NT(HALF, 3) break;                                                      \
        case 4: PACKED_NT(HALF, 4) break;                                                      \
        case 5: PACKED_NT(HALF, 5) break;                                                      \
        case 6: PACKED_NT(HALF, 6) break;                                                      \
        case 7: PACKED_NT(HALF, 7) break;                                                      \
        default: PACKED_NT(HALF, 8) break;                                                     \
        }                                                                                      \
    }
PACKED_KERNEL(x_packed_q4_0, packed_q4_0_half)

/* ======================================================================
 * MXFP4 packed by 16 rows (cpu_pack.h: the rows' exponent bytes, then
 * Q4_0's chunks of codes), as two halves of 8 rows.  Its levels are signed
 * and small (|l| <= 12), so no bias: vpmaddubsw(|l|, sign(x, l)), whose
 * 16-bit pairs (at most 2 x 12 x 127) add up over a block's 8 products
 * within 24,384, then one vpmaddwd: each row's exact integer dot product,
 * and acc += (d_w d_x) s as the portable kernel adds it -- its bits.  The
 * same code in both sets (no vpdpbusd: its unsigned operand would need the
 * levels biased, as the AVX-512 VNNI kernel has them).
 * ====================================================================== */

/* 8 rows' scales from their exponent bytes, as cpu_mxfp4_scale: e < 2 the
 * subnormals 0x00200000 << e, else (e - 1) << 23. */
INL __m256 mxfp4_scales8(const uint8_t *e)
{
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
}

INL void packed_mxfp4_half(const uint8_t *group, int half8, const void *const *x, int nt, uint64_t n,
                           float *const *y, uint64_t r0, bool accumulate)
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cpu_mxfp4_levels));
    act32 a;
    act32_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const uint8_t *blk = group;
    for (uint64_t b = 0; b < n / 32; b++, blk += 288) {
        const __m256 dw = mxfp4_scales8(blk + 8 * half8);
        __m256i p[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            p[t] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i v = load256(blk + 32 + 64 * c + 32 * half8);
            const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, _mm256_set1_epi8(0x0F)));
            const __m256i hi =
                _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)));
            const __m256i lo_abs = _mm256_abs_epi8(lo), hi_abs = _mm256_abs_epi8(hi);
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                int32_t lo4, hi4;
                memcpy(&lo4, a.q[t] + 32 * b + 4 * c, 4);
                memcpy(&hi4, a.q[t] + 32 * b + 16 + 4 * c, 4);
                p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(lo_abs, _mm256_sign_epi8(_mm256_set1_epi32(lo4), lo)));
                p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(hi_abs, _mm256_sign_epi8(_mm256_set1_epi32(hi4), hi)));
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256i s = _mm256_madd_epi16(p[t], _mm256_set1_epi16(1));
            const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[t][b]));
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s)));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        float *o = y[t] + r0 + 8 * half8;
        _mm256_storeu_ps(o, accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), acc[t]) : acc[t]);
    }
}

PACKED_KERNEL(x_packed_mxfp4, packed_mxfp4_half)
#undef PACKED_KERNEL
#undef PACKED_NT

INL void q4_1_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q4_1 *w = row;
    act32 a;
    act32_init(&a, x, nt, n);
#define STEP(b, acc) block32_min(&a, nt, b, nibbles32(w[b].qs), half(&w[b].d), half(&w[b].m), acc)
    LOOP32(nt, n / 32, STEP);
#undef STEP
    sums_out(&s0_, &s1_, nt, out);
}
TILE_DISPATCH(x_dot_q4_1, q4_1_nt)

INL void q5_0_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q5_0 *w = row;
    act32 a;
    act32_init(&a, x, nt, n);
#define STEP(b, acc) \
    block32_offset(&a, nt, b, _mm256_or_si256(nibbles32(w[b].qs), fifth_bits(w[b].qh)), 16, half(&w[b].d), acc)
    LOOP32(nt, n / 32, STEP);
#undef STEP
    sums_out(&s0_, &s1_, nt, out);
}
TILE_DISPATCH(x_dot_q5_0, q5_0_nt)

INL void q5_1_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q5_1 *w = row;
    act32 a;
    act32_init(&a, x, nt, n);
#define STEP(b, acc) \
    block32_min(&a, nt, b, _mm256_or_si256(nibbles32(w[b].qs), fifth_bits(w[b].qh)), half(&w[b].d), half(&w[b].m), acc)
    LOOP32(nt, n / 32, STEP);
#undef STEP
    sums_out(&s0_, &s1_, nt, out);
}
TILE_DISPATCH(x_dot_q5_1, q5_1_nt)

INL void q8_0_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q8_0 *w = row;
    act32 a;
    act32_init(&a, x, nt, n);
#define STEP(b, acc) block32_signed(&a, nt, b, load256(w[b].qs), half(&w[b].d), acc)
    LOOP32(nt, n / 32, STEP);
#undef STEP
    sums_out(&s0_, &s1_, nt, out);
}
TILE_DISPATCH(x_dot_q8_0, q8_0_nt)

/* IQ4_NL: the table's signed levels by one byte shuffle of the nibbles
 * (the 16 levels in both 128-bit lanes), then as Q8_0. */
INL void iq4_nl_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_iq4_nl *w = row;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cpu_iq4_levels));
    act32 a;
    act32_init(&a, x, nt, n);
#define STEP(b, acc) block32_signed(&a, nt, b, _mm256_shuffle_epi8(table, nibbles32(w[b].qs)), half(&w[b].d), acc)
    LOOP32(nt, n / 32, STEP);
#undef STEP
    sums_out(&s0_, &s1_, nt, out);
}
TILE_DISPATCH(x_dot_iq4_nl, iq4_nl_nt)

/* MXFP4: IQ4_NL's form with its own table and the power-of-two scale. */
INL void mxfp4_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_mxfp4 *w = row;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cpu_mxfp4_levels));
    act32 a;
    act32_init(&a, x, nt, n);
#define STEP(b, acc) \
    block32_signed(&a, nt, b, _mm256_shuffle_epi8(table, nibbles32(w[b].qs)), cpu_mxfp4_scale(w[b].e), acc)
    LOOP32(nt, n / 32, STEP);
#undef STEP
    sums_out(&s0_, &s1_, nt, out);
}
TILE_DISPATCH(x_dot_mxfp4, mxfp4_nt)

/* ======================================================================
 * K-quants against q8_K
 * ====================================================================== */

/* The 8 six-bit scales (sm[0..7]) and mins (sm[8..15]) of a Q4_K/Q5_K
 * block: the first four pairs in the low 6 bits of bytes 0-3 and 4-7, the
 * last four with their low 4 bits in bytes 8-11 and their high 2 bits in
 * the top bits of bytes 0-7. */
INL void kq_scales_mins(const uint8_t *s, uint8_t *sm)
{
    /* four bytes at a time: scales 0-3 and mins 0-3 are the low 6 bits of
     * words 0 and 1; 4-7 take word 2's nibbles and the top 2 bits of words
     * 0 and 1 (shifted within each byte: the masks drop what a neighbour
     * byte shifted in) */
    uint32_t u[3], o[4];
    memcpy(u, s, 12);
    o[0] = u[0] & 0x3f3f3f3f;
    o[1] = (u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4;
    o[2] = u[1] & 0x3f3f3f3f;
    o[3] = ((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4;
    memcpy(sm, o, 16);
}

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
 * token's products with 32 weights of magnitudes mag (unsigned bytes, as
 * vpmaddubsw wants one side) whose signs (those of sgn's bytes) are put on
 * the activations instead, times the 16-bit scales ls, into its integer
 * sum; off: where in the token's q8_K row the 32 activations start. */
INL void signed_pairs(const actK *a, int nt, uint64_t off, __m256i mag, __m256i sgn, __m256i ls, __m256i *isum)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i y = _mm256_sign_epi8(load256(a->q[t] + off), sgn);
        isum[t] = add_scaled16(isum[t], _mm256_maddubs_epi16(mag, y), ls);
    }
}

/* A block's integer sums into the float accumulators: acc[t] += scale *
 * d_x(t, block b) * isum[t], scale being the weights' (times whatever the
 * levels left out), in that order of products. */
INL void block_to_acc(const actK *a, int nt, uint64_t b, float scale, const __m256i *isum, __m256 *acc)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(scale * a->d[t][b]), _mm256_cvtepi32_ps(isum[t]), acc[t]);
}

INL void tile_sums(int nt, const __m256 *acc, float *out)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum8(acc[t]);
}

/* Pair p of a Q4_K block: the levels of elements 64p..64p+31 (lo) and
 * 64p+32..64p+63 (hi). */
INL void q4k_levels(const block_q4_K *w, int p, __m256i *lo, __m256i *hi)
{
    const __m256i raw = load256(w->qs + 32 * p), m4 = _mm256_set1_epi8(0x0F);
    *lo = _mm256_and_si256(raw, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
}

/* Q5_K: bit 2p of qh[l] is the fifth bit of element l of pair p's first
 * sub-block, bit 2p+1 of its second. */
INL void q5k_levels(const block_q5_K *w, int p, __m256i *lo, __m256i *hi)
{
    const __m256i raw = load256(w->qs + 32 * p), m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i h = load256(w->qh);
    const __m256i hl = _mm256_and_si256(_mm256_srli_epi16(h, 2 * p), one);
    const __m256i hh = _mm256_and_si256(_mm256_srli_epi16(h, 2 * p + 1), one);
    *lo = _mm256_or_si256(_mm256_and_si256(raw, m4), _mm256_slli_epi16(hl, 4));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), _mm256_slli_epi16(hh, 4));
}

/* Q4_K (five 0) and Q5_K (five 1): d * sum_j sc_j (lv_j . q_j) - dmin *
 * sum_j mn_j sum(q_j) over the 8 sub-blocks of each super-block. */
INL void kq_nt(const void *row, int five, const void *const *x, int nt, uint64_t n, float *out)
{
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    __m128 accm[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        acc[t] = _mm256_setzero_ps();
        accm[t] = _mm_setzero_ps();
    }
    for (uint64_t b = 0; b < n / 256; b++) {
        const block_q4_K *w4 = (const block_q4_K *)row + b;
        const block_q5_K *w5 = (const block_q5_K *)row + b;
        uint8_t sm[16];
        kq_scales_mins(five ? w5->scales : w4->scales, sm);
        const __m128i smv = _mm_loadu_si128((const __m128i *)sm);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(smv, 8));
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(smv));
        const float dw = half(five ? &w5->d : &w4->d), dmw = half(five ? &w5->dmin : &w4->dmin);
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            __m256i lo, hi;
            if (five)
                q5k_levels(w5, p, &lo, &hi);
            else
                q4k_levels(w4, p, &lo, &hi);
            const __m256i s_lo = word_of(sc, 2 * p), s_hi = word_of(sc, 2 * p + 1);
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const int8_t *q = a.q[t] + 256 * b + 64 * p;
                isum[t] = add_scaled16(isum[t], _mm256_maddubs_epi16(lo, load256(q)), s_lo);
                isum[t] = add_scaled16(isum[t], _mm256_maddubs_epi16(hi, load256(q + 32)), s_hi);
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const float dx = a.d[t][b];
            const __m256i bs = load256(a.bs[t] + 16 * b);
            const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            const __m128i pm = _mm_madd_epi16(mins, pairs);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dw), _mm256_cvtepi32_ps(isum[t]), acc[t]);
            accm[t] = _mm_fmadd_ps(_mm_set1_ps(dx * dmw), _mm_cvtepi32_ps(pm), accm[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum8(acc[t]) - hsum4(accm[t]);
}

INL void q4_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    kq_nt(row, 0, x, nt, n, out);
}
TILE_DISPATCH(x_dot_q4_K, q4_K_nt)

INL void q5_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    kq_nt(row, 1, x, nt, n, out);
}
TILE_DISPATCH(x_dot_q5_K, q5_K_nt)

/* Q6_K: levels 0..63 (stored q + 32); 16 int8 scales of 16 elements; the
 * offset of 32 from the activation's sums per 16. */
INL void q6_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q6_K *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(0x0302), _mm_set1_epi16(0x0100)); /* word 0 | word 1 */
    for (uint64_t b = 0; b < n / 256; b++) {
        const int8_t *sc = w[b].scales;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        /* scales 0-7 and 8-15, each in both 128-bit lanes */
        const __m256i sc_lo = _mm256_permute2x128_si256(sc16, sc16, 0x00), sc_hi = _mm256_permute2x128_si256(sc16, sc16, 0x11);
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) /* - 32 * sum_j sc_j bsum_j */
            isum[t] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a.bs[t] + 16 * b)), 5);
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = load256(w[b].ql + 64 * h), l1 = load256(w[b].ql + 64 * h + 32);
            const __m256i qh = load256(w[b].qh + 32 * h);
            __m256i lv[4];
            lv[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            lv[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            lv[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            lv[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int g = 0; g < 4; g++) {
                const int k = 8 * h + 2 * g; /* the scales of the group's two sub-blocks */
                const __m256i half_sc = h ? sc_hi : sc_lo, k8 = _mm256_set1_epi16((short)(0x0202 * (k % 8)));
                /* low lane: scale k's word; high lane: k + 1's (a byte shuffle) */
                const __m256i s = _mm256_shuffle_epi8(half_sc, _mm256_add_epi16(k8, pick));
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    const __m256i y = load256(a.q[t] + 256 * b + 128 * h + 32 * g);
                    isum[t] = _mm256_sub_epi32(isum[t], _mm256_madd_epi16(s, _mm256_maddubs_epi16(lv[g], y)));
                }
            }
        }
        const float dw = half(&w[b].d);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) /* isum holds -(sum): hence the minus */
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-dw * a.d[t][b]), _mm256_cvtepi32_ps(isum[t]), acc[t]);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(x_dot_q6_K, q6_K_nt)

/* Q3_K: levels stored as lv + 4 = code | hbit << 2 (0..7, unsigned: no
 * sign trick) in 16 sub-blocks of 16 with scales -32..31, as Q6_K's
 * layout of the work: per 32 elements (one row of a half: sub-blocks k,
 * k + 1) a vpmaddubsw into 16-bit pairs and a vpmaddwd with the two
 * scales; the offset of 4 from q8_K's sums per 16 (- 4 sum_j sc_j bsum_j,
 * exact), one conversion per super-block. */
INL void q3_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q3_K *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(0x03), one = _mm256_set1_epi8(1);
    const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(0x0302), _mm_set1_epi16(0x0100)); /* word 0 | word 1 */
    for (uint64_t b = 0; b < n / 256; b++) {
        uint32_t sw[4]; /* in registers: a store and a 16-byte reload would stall */
        cpu_q3_K_scale_words(w[b].scales, sw);
        const __m128i sc8 = _mm_sub_epi8(_mm_setr_epi32((int)sw[0], (int)sw[1], (int)sw[2], (int)sw[3]), _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        /* scales 0-7 and 8-15, each in both 128-bit lanes */
        const __m256i sc_lo = _mm256_permute2x128_si256(sc16, sc16, 0x00), sc_hi = _mm256_permute2x128_si256(sc16, sc16, 0x11);
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) /* - 4 * sum_j sc_j bsum_j: the levels' offset */
            isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a.bs[t] + 16 * b)), 2));
        const __m256i hm = load256(w[b].hmask);
        for (int h = 0; h < 2; h++) {
            const __m256i qs = load256(w[b].qs + 32 * h);
            #pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const int k = 8 * h + 2 * r; /* the row's two sub-blocks: k, k + 1 */
                const __m256i code = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * r), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + r), one);
                const __m256i lv = _mm256_or_si256(code, _mm256_slli_epi16(hb, 2));
                const __m256i half_sc = h ? sc_hi : sc_lo, k8 = _mm256_set1_epi16((short)(0x0202 * (k % 8)));
                /* low lane: scale k's word; high lane: k + 1's (a byte shuffle) */
                const __m256i s = _mm256_shuffle_epi8(half_sc, _mm256_add_epi16(k8, pick));
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    const __m256i y = load256(a.q[t] + 256 * b + 128 * h + 32 * r);
                    isum[t] = add_scaled16(isum[t], _mm256_maddubs_epi16(lv, y), s);
                }
            }
        }
        const float dw = half(&w[b].d);
        block_to_acc(&a, nt, b, dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(x_dot_q3_K, q3_K_nt)

/* Q2_K: levels 0..3 with 4-bit scales and mins per 16, the work laid out
 * as Q3_K's (vpmaddubsw, vpmaddwd / vpdpwssd with the two scales of each
 * 32); the mins against q8_K's sums per 16 in a second f32 sum. */
INL void q2_K_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_q2_K *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK], accm[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = accm[t] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(0x03);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(0x0302), _mm_set1_epi16(0x0100)); /* word 0 | word 1 */
    for (uint64_t b = 0; b < n / 256; b++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)w[b].scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        const __m256i sc_lo = _mm256_permute2x128_si256(sc16, sc16, 0x00), sc_hi = _mm256_permute2x128_si256(sc16, sc16, 0x11);
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i qs = load256(w[b].qs + 32 * h);
            #pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const int k = 8 * h + 2 * r; /* the row's two sub-blocks: k, k + 1 */
                const __m256i lv = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * r), m3);
                const __m256i half_sc = h ? sc_hi : sc_lo, k8 = _mm256_set1_epi16((short)(0x0202 * (k % 8)));
                const __m256i s = _mm256_shuffle_epi8(half_sc, _mm256_add_epi16(k8, pick));
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    const __m256i y = load256(a.q[t] + 256 * b + 128 * h + 32 * r);
                    isum[t] = add_scaled16(isum[t], _mm256_maddubs_epi16(lv, y), s);
                }
            }
        }
        const float dw = half(&w[b].d), dmw = half(&w[b].dmin);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const float dx = a.d[t][b];
            const __m256i pm = _mm256_madd_epi16(mins, load256(a.bs[t] + 16 * b));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dw), _mm256_cvtepi32_ps(isum[t]), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dmw), _mm256_cvtepi32_ps(pm), accm[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum8(acc[t]) - hsum8(accm[t]);
}
TILE_DISPATCH(x_dot_q2_K, q2_K_nt)

/* The 8 scales (ls - 32) of an IQ4_XS block as 16-bit lanes: the low 4
 * bits two per byte of scales_l, the high 2 bits of sub-block ib at bit 2ib
 * of scales_h -- brought to the top of each lane by a multiply by
 * 2^(14 - 2ib) (a per-lane left shift, which AVX2 has only for 32 bits). */
INL __m128i iq4_xs_scales(const cpu_iq4_xs_block *w)
{
    uint32_t sl;
    memcpy(&sl, w->scales_l, sizeof sl);
    const __m128i v = _mm_cvtsi32_si128((int)sl), m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4)));
    const __m128i top = _mm_mullo_epi16(_mm_set1_epi16((short)w->scales_h),
                                        _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1));
    const __m128i hb = _mm_and_si128(_mm_srli_epi16(top, 10), _mm_set1_epi16(0x30));
    return _mm_sub_epi16(_mm_or_si128(lo, hb), _mm_set1_epi16(32));
}

/* IQ4_XS: two sub-blocks per 32-byte load of indices; the table's levels by
 * one byte shuffle per 32 indices (the 16 levels in both 128-bit lanes) and
 * a lane exchange into sub-block order; then per sub-block |lv| . sign(q,
 * lv) into 16-bit pairs (|lv| <= 127: no saturation) and the sub-block's
 * scale (ls - 32), taken from one register by a byte shuffle, by vpmaddwd
 * (vpdpwssd with VNNI), as ggml's expression. */
INL void iq4_xs_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const cpu_iq4_xs_block *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cpu_iq4_levels));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (uint64_t b = 0; b < n / 256; b++) {
        const __m256i sc = _mm256_broadcastsi128_si256(iq4_xs_scales(&w[b]));
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i raw = load256(w[b].qs + 32 * k);
            const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(raw, m4));
            const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
            const __m256i lv[2] = {_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31)};
            #pragma GCC unroll 2
            for (int g = 0; g < 2; g++) {
                const int ib = 2 * k + g;
                const __m256i ls = word_of(sc, ib);
                const __m256i au = _mm256_sign_epi8(lv[g], lv[g]);
                signed_pairs(&a, nt, 256 * b + 32 * ib, au, lv[g], ls, isum);
            }
        }
        const float dw = half(&w[b].d);
        block_to_acc(&a, nt, b, dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(x_dot_iq4_xs, iq4_xs_nt)

/* The 32 sign bytes (0 or -1) of a grid sub-block from its four 7-bit sign
 * indices (word aux, bits 0-27): the four sign bytes of ksigns in one
 * word, byte j/8 spread to bytes j, then a bit test of bit j%8. */
INL __m256i grid_signs(uint32_t aux)
{
    const uint32_t s = (uint32_t)quant_ksigns_iq2xs[aux & 127] | (uint32_t)quant_ksigns_iq2xs[(aux >> 7) & 127] << 8 |
                       (uint32_t)quant_ksigns_iq2xs[(aux >> 14) & 127] << 16 |
                       (uint32_t)quant_ksigns_iq2xs[(aux >> 21) & 127] << 24;
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* The 32 grid magnitudes of sub-block ib of an IQ2_XXS block (four rows of
 * 8, one 64-bit load apiece) or an IQ3_XXS block (eight rows of 4, its
 * index bytes before the sign / scale words), and that word in *aux. */
INL __m256i grid_magnitudes(bool three, const uint8_t *blk, int ib, uint32_t *aux)
{
    const uint8_t *qs = blk + 2, *q = qs + 8 * ib; /* after the f16 d */
    memcpy(aux, three ? qs + QK_K / 4 + 4 * ib : q + 4, sizeof *aux);
    if (three) {
        uint32_t g[8];
        for (int l = 0; l < 8; l++)
            memcpy(&g[l], quant_iq3xxs_grid[q[l]], 4);
        return _mm256_setr_epi32((int)g[0], (int)g[1], (int)g[2], (int)g[3], (int)g[4], (int)g[5], (int)g[6],
                                 (int)g[7]);
    }
    /* 64-bit loads paired in registers: four stores to a stack array read
     * back as one 256-bit load stall store forwarding (3x slower, kb) */
    const __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[0]]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[1]]));
    const __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[2]]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2xxs_grid[q[3]]));
    return _mm256_set_m128i(hi, lo);
}

/* IQ2_XXS (three false) / IQ3_XXS: per sub-block the magnitudes (<= 62,
 * unsigned) against the activations with the weights' signs by vpmaddubsw
 * into 16-bit pairs, times the odd scale 2 ls + 1 by vpmaddwd / vpdpwssd;
 * the block scaled once by d d_x / 8 or / 4 (cpu_dot_portable.c says why). */
INL void grid_xxs_nt(bool three, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const uint64_t block_bytes = three ? sizeof(block_iq3_xxs) : sizeof(block_iq2_xxs);
    const float unit = three ? 0.25f : 0.125f;
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i one = _mm256_set1_epi8(1);
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = (const uint8_t *)row + b * block_bytes;
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux;
            const __m256i mag = grid_magnitudes(three, blk, ib, &aux);
            /* +1 or -1 per byte: what vpsignb multiplies the activations by */
            const __m256i sgn = _mm256_or_si256(grid_signs(aux), one);
            const __m256i ls = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, sgn, ls, isum);
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
TILE_DISPATCH(x_dot_iq2_xxs, iq2_xxs_nt)
TILE_DISPATCH(x_dot_iq3_xxs, iq3_xxs_nt)

/* IQ2_XS: grid_xxs_nt's scheme with a 9-bit grid index and a 7-bit sign
 * index per 16-bit word (the sign indices gathered into grid_signs' word)
 * and a scale per 16: the low 128-bit lane of the 16-bit pairs takes the
 * low nibble's 2 ls + 1, the high lane the high nibble's. */
INL void iq2_xs_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const block_iq2_xs *w = row;
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i one = _mm256_set1_epi8(1);
    for (uint64_t b = 0; b < n / 256; b++) {
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint16_t q[4];
            memcpy(q, &w[b].qs[4 * ib], sizeof q);
            const __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[0] & 511]),
                                                  _mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[1] & 511]));
            const __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[2] & 511]),
                                                  _mm_loadl_epi64((const __m128i *)quant_iq2xs_grid[q[3] & 511]));
            const __m256i mag = _mm256_set_m128i(hi, lo);
            const uint32_t aux = (uint32_t)(q[0] >> 9) | (uint32_t)(q[1] >> 9) << 7 | (uint32_t)(q[2] >> 9) << 14 |
                                 (uint32_t)(q[3] >> 9) << 21;
            const __m256i sgn = _mm256_or_si256(grid_signs(aux), one);
            const int sc = w[b].scales[ib];
            const __m256i ls = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (sc >> 4) + 1)),
                                                _mm_set1_epi16((short)(2 * (sc & 0xf) + 1)));
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, sgn, ls, isum);
        }
        const float dw = half(&w[b].d);
        block_to_acc(&a, nt, b, 0.125f * dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
TILE_DISPATCH(x_dot_iq2_xs, iq2_xs_nt)

/* ======================================================================
 * Float weights against f32 activations
 * ====================================================================== */

/* 8 weights of row type `kind` (0 F32, 1 F16, 2 BF16) from p, as floats. */
INL __m256 load8w(int kind, const uint8_t *p)
{
    if (kind == 0)
        return _mm256_loadu_ps((const float *)p);
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (kind == 1)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INL float load1w(int kind, const uint8_t *p)
{
    if (kind == 0) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return kind == 1 ? _cvtsh_ss(h) : quant_bf16_to_f32(h);
}

INL void float_nt(int kind, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const uint8_t *w = row;
    const int es = kind == 0 ? 4 : 2;
    __m256 a0[CPU_TILE_TOK], a1[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        a0[t] = a1[t] = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 = load8w(kind, w + es * i), w1 = load8w(kind, w + es * (i + 8));
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const float *xt = (const float *)x[t] + i;
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), a1[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        float tail = 0;
        for (uint64_t j = i; j < n; j++)
            tail += load1w(kind, w + es * j) * ((const float *)x[t])[j];
        out[t] = hsum8(_mm256_add_ps(a0[t], a1[t])) + tail;
    }
}

INL void f32_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    float_nt(0, row, x, nt, n, out);
}
TILE_DISPATCH(x_dot_f32_rows, f32_nt)

INL void f16_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    float_nt(1, row, x, nt, n, out);
}
TILE_DISPATCH(x_dot_f16_rows, f16_nt)

INL void bf16_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    float_nt(2, row, x, nt, n, out);
}
TILE_DISPATCH(x_dot_bf16_rows, bf16_nt)

/* ======================================================================
 * Attention over the latent cache
 * ====================================================================== */

INL float dot_any(int kind, const void *a, const float *b, uint64_t n)
{
    const uint8_t *p = a;
    const int es = kind == 0 ? 4 : 2;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(load8w(kind, p + es * i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(load8w(kind, p + es * (i + 8)), _mm256_loadu_ps(b + i + 8), s1);
    }
    float tail = 0;
    for (; i < n; i++)
        tail += load1w(kind, p + es * i) * b[i];
    return hsum8(_mm256_add_ps(s0, s1)) + tail;
}

TGT static float x_dot_f32(const float *a, const float *b, uint64_t n)
{
    return dot_any(0, a, b, n);
}

TGT static float x_dot_f16(const uint16_t *a, const float *b, uint64_t n)
{
    return dot_any(1, a, b, n);
}

INL void axpy_any(int kind, float *y, float a, const void *x, uint64_t n)
{
    const uint8_t *p = x;
    const int es = kind == 0 ? 4 : 2;
    const __m256 va = _mm256_set1_ps(a);
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load8w(kind, p + es * i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * load1w(kind, p + es * i);
}

TGT static void x_axpy_f32(float *y, float a, const float *x, uint64_t n)
{
    axpy_any(0, y, a, x, n);
}

TGT static void x_axpy_f16(float *y, float a, const uint16_t *x, uint64_t n)
{
    axpy_any(1, y, a, x, n);
}

/* ======================================================================
 * Activation preparers (the same bytes as cpu_q8.c's)
 * ====================================================================== */

INL float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

INL int hsum8i(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* 32 floats times `scale`, rounded half to even, as bytes at q; the four
 * int32 vectors in i[] (for sums). */
INL void quantize32(const float *x, __m256 scale, int8_t *q, __m256i *i)
{
    for (int k = 0; k < 4; k++)
        i[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

INL __m256 abs8(const float *x)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x));
}

TGT static void x_prepare_q8_32(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row)
{
    int8_t *q = (int8_t *)row + from;
    float *d = (float *)((char *)row + n), *s = d + n / 32;
    int32_t *qsum = (int32_t *)(s + n / 32);
    x += from;
    for (uint64_t b = from / 32; b < to / 32; b++, x += 32, q += 32) {
        __m256 m = _mm256_max_ps(_mm256_max_ps(abs8(x), abs8(x + 8)), _mm256_max_ps(abs8(x + 16), abs8(x + 24)));
        const float amax = hmax8(m), dr = amax / 127.f;
        __m256i i[4];
        quantize32(x, _mm256_set1_ps(amax != 0 ? 127.f / amax : 0.f), q, i);
        const int sum = hsum8i(_mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3])));
        d[b] = _cvtsh_ss(_cvtss_sh(dr, _MM_FROUND_TO_NEAREST_INT));
        s[b] = _cvtsh_ss(_cvtss_sh(dr * (float)sum, _MM_FROUND_TO_NEAREST_INT));
        qsum[b] = sum;
    }
}

TGT static void x_prepare_q8_K(const float *x, uint64_t n, uint64_t from, uint64_t to, void *row)
{
    int8_t *q = (int8_t *)row + from;
    float *d = (float *)((char *)row + n);
    int16_t *bsum = (int16_t *)(d + n / 256);
    x += from;
    for (uint64_t b = from / 256; b < to / 256; b++, x += 256, q += 256) {
        __m256 m = abs8(x);
        for (int k = 8; k < 256; k += 8)
            m = _mm256_max_ps(m, abs8(x + k));
        const float amax = hmax8(m);
        const float iscale = amax != 0 ? 127.f / amax : 0.f;
        for (int g = 0; g < 8; g++) {
            __m256i i[4];
            quantize32(x + 32 * g, _mm256_set1_ps(iscale), q + 32 * g, i);
            bsum[16 * b + 2 * g] = (int16_t)hsum8i(_mm256_add_epi32(i[0], i[1]));
            bsum[16 * b + 2 * g + 1] = (int16_t)hsum8i(_mm256_add_epi32(i[2], i[3]));
        }
        d[b] = amax != 0 ? 1.f / iscale : 0.f;
    }
}

#include "cpu_dot_iqs_x86.h" /* IQ3_S, IQ2_S, IQ1_S, IQ1_M */

/* ======================================================================
 * The table
 * ====================================================================== */

void CPU_X86_FILL(cpu_kernels *k)
{
    k->type[QT_F32] = (cpu_type_kernel){CPU_ACT_F32, x_dot_f32_rows, NULL};
    k->type[QT_F16] = (cpu_type_kernel){CPU_ACT_F32, x_dot_f16_rows, NULL};
    k->type[QT_BF16] = (cpu_type_kernel){CPU_ACT_F32, x_dot_bf16_rows, NULL};
    k->type[QT_Q4_0] = (cpu_type_kernel){CPU_ACT_Q8_32, x_dot_q4_0, x_packed_q4_0};
    k->type[QT_Q4_1] = (cpu_type_kernel){CPU_ACT_Q8_32, x_dot_q4_1, NULL};
    k->type[QT_Q5_0] = (cpu_type_kernel){CPU_ACT_Q8_32, x_dot_q5_0, NULL};
    k->type[QT_Q5_1] = (cpu_type_kernel){CPU_ACT_Q8_32, x_dot_q5_1, NULL};
    k->type[QT_Q8_0] = (cpu_type_kernel){CPU_ACT_Q8_32, x_dot_q8_0, NULL};
    k->type[QT_IQ4_NL] = (cpu_type_kernel){CPU_ACT_Q8_32, x_dot_iq4_nl, NULL};
    k->type[QT_MXFP4] = (cpu_type_kernel){CPU_ACT_Q8_32, x_dot_mxfp4, x_packed_mxfp4};
    k->type[QT_Q4_K] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_q4_K, NULL};
    k->type[QT_Q5_K] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_q5_K, NULL};
    k->type[QT_Q6_K] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_q6_K, NULL};
    k->type[QT_Q3_K] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_q3_K, NULL};
    k->type[QT_Q2_K] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_q2_K, NULL};
    k->type[QT_IQ4_XS] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq4_xs, NULL};
    k->type[QT_IQ2_XXS] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq2_xxs, NULL};
    k->type[QT_IQ3_XXS] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq3_xxs, NULL};
    k->type[QT_IQ2_XS] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq2_xs, NULL};
    k->type[QT_IQ3_S] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq3_s, NULL};
    k->type[QT_IQ2_S] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq2_s, NULL};
    k->type[QT_IQ1_S] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq1_s, NULL};
    k->type[QT_IQ1_M] = (cpu_type_kernel){CPU_ACT_Q8_K, x_dot_iq1_m, NULL};
    k->prepare[CPU_ACT_Q8_32] = x_prepare_q8_32;
    k->prepare[CPU_ACT_Q8_K] = x_prepare_q8_K;
    k->dot_f32 = x_dot_f32;
    k->dot_f16 = x_dot_f16;
    k->axpy_f32 = x_axpy_f32;
    k->axpy_f16 = x_axpy_f16;
}
