/* cpu_dot_iqs_x512.h: the 512-bit kernels of the grid formats with plain
 * sign bits (IQ3_S, IQ2_S) and of the signed-grid ones (IQ1_S, IQ1_M)
 * against q8_K, part of cpu_dot_x512.h's translation unit (included
 * before its table: its helpers, actK and TILE_DISPATCH are what these
 * use).
 *
 * Promises: cpu_kernels.h's (pure; a token's sum formed in the same order
 * whatever the tile), the integers of cpu_dot_portable.c's dot_iq3_s /
 * dot_iq2_s / dot_iq1.
 *
 * The scheme is grid_xxs_nt's: two sub-blocks of 32 per vector, their
 * magnitudes (<= 15 or <= 43, unsigned) against the activations negated
 * where the weights are, by vpmaddubsw into 16-bit pairs, times the odd
 * scales 2 ls + 1 by vpmaddwd / vpdpwssd, one conversion per block of 256.
 * The signs are stored as bits in element order, so the two sub-blocks'
 * 64 are the negation mask as they stand.  IQ3_S's magnitudes are two
 * 8-row gathers (one 16-row gather measured no faster on a Zen 4, kb).
 * IQ1's levels 8 g +- 1 are signed and never zero: their magnitudes, and
 * their signs as the negation mask. */
#include "cpu_dot_iqs_grid.h"

/* Multipliers of the 16-bit pairs: every word of 128-bit lane k odd[k]. */
INL __m512i lane_words(const int odd[4])
{
    const __m128i v = _mm_setr_epi16((short)odd[0], (short)odd[1], (short)odd[2], (short)odd[3], 0, 0, 0, 0);
    const __m512i lane = _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                                          0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0);
    return _mm512_permutexvar_epi16(lane, _mm512_castsi128_si512(v));
}

/* The 2 ls + 1 of two IQ2_S sub-blocks (scale bytes sc[0], sc[1]: low
 * nibble first), one per 128-bit lane. */
INL __m512i iq2_s_scales(const uint8_t *sc)
{
    const int odd[4] = {2 * (sc[0] & 0xf) + 1, 2 * (sc[0] >> 4) + 1, 2 * (sc[1] & 0xf) + 1, 2 * (sc[1] >> 4) + 1};
    return lane_words(odd);
}

/* The 2 ls + 1 of two IQ1_M sub-blocks: four 3-bit fields of sc, one per
 * 128-bit lane. */
INL __m512i iq1_m_scales(unsigned sc)
{
    const int odd[4] = {2 * (sc & 7) + 1, 2 * ((sc >> 3) & 7) + 1, 2 * ((sc >> 6) & 7) + 1, 2 * ((sc >> 9) & 7) + 1};
    return lane_words(odd);
}

/* IQ3_S (two false: a scale per 32, d d_x per block) / IQ2_S (a scale per
 * 16 -- each 128-bit lane its nibble's -- and d d_x / 8). */
INL void grid_s_nt(bool two, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    const float unit = two ? 0.125f : 1.f;
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = (const uint8_t *)row + b * (two ? sizeof(block_iq2_s) : sizeof(block_iq3_s));
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            __mmask64 neg;
            __m512i mag, ls;
            if (two) {
                const block_iq2_s *w = (const block_iq2_s *)blk;
                mag = join256(iq2_s_magnitudes(w, ib), iq2_s_magnitudes(w, ib + 1));
                memcpy(&neg, w->qs + QK_K / 8 + 4 * ib, sizeof neg);
                ls = iq2_s_scales(w->scales + ib);
            } else {
                const block_iq3_s *w = (const block_iq3_s *)blk;
                mag = join256(iq3_s_magnitudes(w, ib), iq3_s_magnitudes(w, ib + 1));
                memcpy(&neg, w->signs + 4 * ib, sizeof neg);
                const int sc = w->scales[ib / 2]; /* ib even: its scale the low nibble, ib + 1's the high */
                ls = join256(_mm256_set1_epi16((short)(2 * (sc & 0xf) + 1)),
                             _mm256_set1_epi16((short)(2 * (sc >> 4) + 1)));
            }
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, neg, ls, isum);
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
TILE_DISPATCH(z_dot_iq3_s, iq3_s_nt)
TILE_DISPATCH(z_dot_iq2_s, iq2_s_nt)

/* IQ1_S (m false: a scale per 32, d stored) / IQ1_M (a scale per 16, d in
 * the scale words); the block scaled by d d_x / 8. */
INL void grid_1_nt(bool m, const void *row, const void *const *x, int nt, uint64_t n, float *out)
{
    actK a;
    actK_init(&a, x, nt, n);
    __m512 acc[CPU_TILE_TOK];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        acc[t] = _mm512_setzero_ps();
    for (uint64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = (const uint8_t *)row + b * (m ? sizeof(block_iq1_m) : sizeof(block_iq1_s));
        const block_iq1_m *wm = (const block_iq1_m *)blk;
        const block_iq1_s *ws = (const block_iq1_s *)blk;
        __m512i isum[CPU_TILE_TOK];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            __m512i lv, ls;
            if (m) {
                lv = join256(iq1_m_levels(wm, ib), iq1_m_levels(wm, ib + 1));
                uint16_t sc; /* ib even: sub-block ib's two scales in bits 0-5, ib + 1's in 6-11 */
                memcpy(&sc, wm->scales + ib, sizeof sc);
                ls = iq1_m_scales(sc);
            } else {
                int l0, l1;
                const __m256i lv0 = iq1_s_levels(ws, ib, &l0), lv1 = iq1_s_levels(ws, ib + 1, &l1);
                lv = join256(lv0, lv1);
                ls = join256(_mm256_set1_epi16((short)l0), _mm256_set1_epi16((short)l1));
            }
            const __m512i mag = _mm512_abs_epi8(lv);
            const __mmask64 neg = _mm512_movepi8_mask(lv);
            signed_pairs(&a, nt, 256 * b + 32 * ib, mag, neg, ls, isum);
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
TILE_DISPATCH(z_dot_iq1_s, iq1_s_nt)
TILE_DISPATCH(z_dot_iq1_m, iq1_m_nt)
