/* cpu_dot_iqs_x512.h: the 512-bit kernels of the grid formats with plain
 * sign bits (IQ3_S, IQ2_S) against q8_K, part of cpu_dot_x512.h's
 * translation unit (included before its table: its helpers, actK and
 * TILE_DISPATCH are what these use).
 *
 * Promises: cpu_kernels.h's (pure; a token's sum formed in the same order
 * whatever the tile), the integers of cpu_dot_portable.c's dot_iq3_s /
 * dot_iq2_s.
 *
 * The scheme is grid_xxs_nt's: two sub-blocks of 32 per vector, their
 * magnitudes (<= 15 or <= 43, unsigned) against the activations negated
 * where the weights are, by vpmaddubsw into 16-bit pairs, times the odd
 * scales 2 ls + 1 by vpmaddwd / vpdpwssd, one conversion per block of 256.
 * The signs are stored as bits in element order, so the two sub-blocks'
 * 64 are the negation mask as they stand.  IQ3_S's magnitudes are two
 * 8-row gathers (one 16-row gather measured no faster on a Zen 4, kb). */
#include "cpu_dot_iqs_grid.h"

/* The 2 ls + 1 of two IQ2_S sub-blocks (scale bytes sc[0], sc[1]: low
 * nibble first) as the 16-bit pairs' multipliers: 128-bit lane k takes
 * nibble k's, every word of it. */
INL __m512i iq2_s_scales(const uint8_t *sc)
{
    const uint64_t s = (uint64_t)(sc[0] & 0xf) | (uint64_t)(sc[0] >> 4) << 16 | (uint64_t)(sc[1] & 0xf) << 32 |
                       (uint64_t)(sc[1] >> 4) << 48;
    const __m128i odd = _mm_cvtsi64_si128((long long)(2 * s + 0x0001000100010001ULL));
    const __m512i lane = _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                                          0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0);
    return _mm512_permutexvar_epi16(lane, _mm512_castsi128_si512(odd));
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
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const __m512i y = load512(a.q[t] + 256 * b + 32 * ib);
                const __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
                isum[t] = add_scaled(isum[t], _mm512_maddubs_epi16(mag, sy), ls);
            }
        }
        const float dw = half(blk); /* d leads both blocks */
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(unit * dw * a.d[t][b]), _mm512_cvtepi32_ps(isum[t]), acc[t]);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        out[t] = hsum16(acc[t]);
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
