/* cpu_dot_iqs_grid.h: the grid magnitudes of one sub-block of 32 of the
 * IQ3_S and IQ2_S formats in a 256-bit register, shared by the 256-bit
 * (cpu_dot_iqs_x86.h) and 512-bit (cpu_dot_iqs_x512.h) kernels; the
 * includer defines INL with its target.
 *
 * Promises: byte j of the result is element j's magnitude as
 * quant_decode_iq3_s / quant_decode_iq2_s look it up (quant_grids.h). */

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
