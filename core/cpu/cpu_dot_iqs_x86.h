/* cpu_dot_iqs_x86.h: the 256-bit kernels of the grid formats with plain
 * sign bits (IQ3_S, IQ2_S) and of the signed-grid ones (IQ1_S, IQ1_M)
 * against q8_K, part of cpu_dot_x86.h's translation unit (included
 * before its table: its helpers, actK and TILE_DISPATCH are what these
 * use).
 *
 * Promises: cpu_kernels.h's (pure; a token's sum formed in the same order
 * whatever the tile), the integers of cpu_dot_portable.c's dot_iq3_s /
 * dot_iq2_s / dot_iq1.
 *
 * The scheme is grid_xxs_nt's: per sub-block of 32 the grid magnitudes
 * (<= 15 or <= 43, unsigned) against the activations carrying the weights'
 * signs (vpsignb) by vpmaddubsw into 16-bit pairs, times the odd scales
 * 2 ls + 1 by vpmaddwd / vpdpwssd, one conversion per block of 256.  The
 * signs are stored as bits, so a sub-block's 32 are one 32-bit word.
 * IQ1's levels 8 g +- 1 are signed and never zero: their magnitudes
 * against the activations with their signs, the same way. */

#include "cpu_dot_iqs_grid.h"

/* +1 or -1 in byte j of 32 as bit j of `bits` is clear or set: byte j/8
 * spread to byte j, bit j%8 tested. */
INL __m256i plain_signs(uint32_t bits)
{
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(1));
}

/* IQ3_S (two false: a scale per 32, d d_x per block) / IQ2_S (a scale per
 * 16 -- the low 128-bit lane takes the low nibble's -- and d d_x / 8). */
INL void grid_s_nt(bool two, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const float unit = two ? 0.125f : 1.f;
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = (const uint8_t *)row + b * (two ? sizeof(block_iq2_s) : sizeof(block_iq3_s));
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint32_t bits;
            __m256i mag, ls;
            if (two) {
                const block_iq2_s *w2 = (const block_iq2_s *)blk;
                mag = iq2_s_magnitudes(w2, ib);
                memcpy(&bits, w2->qs + QK_K / 8 + 4 * ib, sizeof bits);
                const int sc = w2->scales[ib];
                ls = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (sc >> 4) + 1)),
                                      _mm_set1_epi16((short)(2 * (sc & 0xf) + 1)));
            } else {
                const block_iq3_s *w3 = (const block_iq3_s *)blk;
                mag = iq3_s_magnitudes(w3, ib);
                memcpy(&bits, w3->signs + 4 * ib, sizeof bits);
                ls = _mm256_set1_epi16((short)(2 * ((w3->scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1));
            }
            const __m256i sgn = plain_signs(bits);
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, sgn, ls, isum);
        }
        const float dw = half(blk); /* d leads both blocks */
        block_to_acc(&a, nt, b, unit * dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
INL void iq3_s_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    grid_s_nt(false, row, x, nt, n, out);
}
INL void iq2_s_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    grid_s_nt(true, row, x, nt, n, out);
}
TILE_DISPATCH(x_dot_iq3_s, iq3_s_nt)
TILE_DISPATCH(x_dot_iq2_s, iq2_s_nt)

/* IQ1_S (m false: a scale per 32, d stored) / IQ1_M (a scale per 16 -- the
 * low 128-bit lane takes the first --, d in the scale words); the block
 * scaled by d d_x / 8. */
INL void grid_1_nt(bool m, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    actK a;
    actK_init(&a, x, nt, n);
    __m256 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = (const uint8_t *)row + b * (m ? sizeof(block_iq1_m) : sizeof(block_iq1_s));
        const block_iq1_m *wm = (const block_iq1_m *)blk;
        const block_iq1_s *ws = (const block_iq1_s *)blk;
        uint16_t sc[4] = {0};
        if (m)
            memcpy(sc, wm->scales, sizeof sc);
        __m256i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            __m256i lv, ls;
            if (m) {
                lv = iq1_m_levels(wm, ib);
                const int s = sc[ib / 2] >> (6 * (ib % 2));
                ls = _mm256_set_m128i(_mm_set1_epi16((short)(2 * ((s >> 3) & 7) + 1)),
                                      _mm_set1_epi16((short)(2 * (s & 7) + 1)));
            } else {
                int l;
                lv = iq1_s_levels(ws, ib, &l);
                ls = _mm256_set1_epi16((short)l);
            }
            const __m256i mag = _mm256_abs_epi8(lv);
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, lv, ls, isum);
        }
        const float dw = m ? iq1_m_d(wm) : half(blk);
        block_to_acc(&a, nt, b, 0.125f * dw, isum, acc);
    }
    tile_sums(nt, acc, out);
}
INL void iq1_s_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    grid_1_nt(false, row, x, nt, n, out);
}
INL void iq1_m_nt(const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    grid_1_nt(true, row, x, nt, n, out);
}
TILE_DISPATCH(x_dot_iq1_s, iq1_s_nt)
TILE_DISPATCH(x_dot_iq1_m, iq1_m_nt)
