/* cpu_dot_iqs_grid.h: one sub-block of 32 of the IQ3_S and IQ2_S formats
 * (its grid magnitudes) or of IQ1_S and IQ1_M (its signed levels) in a
 * 256-bit register, shared by the 256-bit (cpu_dot_iqs_x86.h) and 512-bit
 * (cpu_dot_iqs_x512.h) kernels; the includer defines INL with its target.
 *
 * Promises: byte j of the result is element j's magnitude as
 * quant_decode_iq3_s / quant_decode_iq2_s look it up (quant_grids.h), or
 * 8 times element j of quant_decode_iq1_s / _iq1_m over d (2 ls + 1). */

/* The 32 magnitudes of sub-block ib of an IQ3_S block: eight rows of 4,
 * their 9-bit indices (qs, and bit l of qh[ib] as bit 8 of index l)
 * formed in a vector and the rows gathered (eight scalar loads put
 * together measured 2.6x slower at 1 token on a Zen 4, kb). */
INL __m256i iq3_s_magnitudes(const block_iq3_s *w, int ib)
{
    const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w->qs + 8 * ib)));
    const __m256i shifted = _mm256_srlv_epi32(_mm256_set1_epi32(w->qh[ib] << 8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i high = _mm256_and_si256(shifted, _mm256_set1_epi32(256));
    return _mm256_i32gather_epi32((const int *)quant_iq3s_grid, _mm256_or_si256(low, high), 4);
}

/* The 32 magnitudes of sub-block ib of an IQ2_S block: four rows of 8
 * (10-bit indices: qs and two bits of qh[ib] each), paired in registers as
 * IQ2_XXS's are (store forwarding; a 4-row gather measured 10-20 %
 * slower on a Zen 4, kb). */
INL __m256i iq2_s_magnitudes(const block_iq2_s *w, int ib)
{
    const uint8_t *q = w->qs + 4 * ib;
    const unsigned h = w->qh[ib];
    const __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2s_grid[q[0] | ((h << 8) & 0x300)]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2s_grid[q[1] | ((h << 6) & 0x300)]));
    const __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq2s_grid[q[2] | ((h << 4) & 0x300)]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq2s_grid[q[3] | ((h << 2) & 0x300)]));
    return _mm256_set_m128i(hi, lo);
}

/* The 8-byte grid rows i0..i3 of IQ1 in one register, paired in registers
 * (store forwarding, as above). */
INL __m256i iq1_rows(int i0, int i1, int i2, int i3)
{
    const __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq1s_grid[i0]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq1s_grid[i1]));
    const __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)quant_iq1s_grid[i2]),
                                          _mm_loadl_epi64((const __m128i *)quant_iq1s_grid[i3]));
    return _mm256_set_m128i(hi, lo);
}

/* 8 g + s per byte: the grid's -1 / 0 / 1 times 8 (vpsignb of 8), plus
 * the shift's sign s (+-1, byte by byte in `shift`): never zero. */
INL __m256i iq1_levels(__m256i g, __m256i shift)
{
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), shift);
}

/* Sub-block ib of an IQ1_S block: its levels, and its 2 ls + 1 in *ls. */
INL __m256i iq1_s_levels(const block_iq1_s *w, int ib, int *ls)
{
    uint16_t qh;
    memcpy(&qh, &w->qh[ib], sizeof qh);
    const uint8_t *q = w->qs + 4 * ib;
    *ls = 2 * ((qh >> 12) & 7) + 1;
    const __m256i g = iq1_rows(q[0] | ((qh << 8) & 0x700), q[1] | ((qh << 5) & 0x700), q[2] | ((qh << 2) & 0x700),
                               q[3] | ((qh >> 1) & 0x700));
    return iq1_levels(g, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1));
}

/* Sub-block ib of an IQ1_M block: its levels (a shift sign per group of 8:
 * bit 3 of each qh nibble). */
INL __m256i iq1_m_levels(const block_iq1_m *w, int ib)
{
    const uint8_t *q = w->qs + 4 * ib;
    const unsigned h0 = w->qh[2 * ib], h1 = w->qh[2 * ib + 1];
    const __m256i g = iq1_rows(q[0] | ((h0 << 8) & 0x700), q[1] | ((h0 << 4) & 0x700), q[2] | ((h1 << 8) & 0x700),
                               q[3] | ((h1 << 4) & 0x700));
    const long long plus = 0x0101010101010101LL, minus = -1;
    const __m256i shift = _mm256_setr_epi64x(h0 & 0x08 ? minus : plus, h0 & 0x80 ? minus : plus, h1 & 0x08 ? minus : plus,
                                             h1 & 0x80 ? minus : plus);
    return iq1_levels(g, shift);
}

/* An IQ1_M block's d: the top nibbles of its four scale words. */
INL float iq1_m_d(const block_iq1_m *w)
{
    uint16_t sc[4];
    memcpy(sc, w->scales, sizeof sc);
    return _cvtsh_ss((unsigned short)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
}
