/* quant_formats.h: what the per-family quant sources give the type table in
 * core/format/quant.c, and the small exact helpers they share.  Internal to core/
 * and the quant tests; the API is quant.h.
 *
 * Promises: every decode_* below writes one block's values exactly as
 * ggml's dequantize_row_* (and gguf-py's dequantizers) do; every
 * quantize_* fills one block and never has undefined behaviour, whatever
 * the floats (NaN and inf give unspecified bytes).  The helpers round and
 * convert the way ggml's reference C does, because the quantizers' searches
 * compare float sums and one differently rounded value can flip a choice.
 */
#ifndef GLM_QUANT_FORMATS_H
#define GLM_QUANT_FORMATS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

/* ---- block codecs, by family ------------------------------------------- */

/* core/format/quant_kquant.c */
void quant_decode_q2_K(const void *b, float *y);
void quant_decode_q3_K(const void *b, float *y);
void quant_decode_q4_K(const void *b, float *y);
void quant_decode_q5_K(const void *b, float *y);
void quant_decode_q6_K(const void *b, float *y);
void quant_quantize_q2_K(const float *x, void *b);
void quant_quantize_q3_K(const float *x, void *b);
void quant_quantize_q4_K(const float *x, void *b);
void quant_quantize_q5_K(const float *x, void *b);
void quant_quantize_q6_K(const float *x, void *b);

/* core/format/quant_iq4.c */
void quant_decode_iq4_nl(const void *b, float *y);
void quant_decode_iq4_xs(const void *b, float *y);
void quant_decode_mxfp4(const void *b, float *y);
void quant_quantize_iq4_nl(const float *x, void *b);
void quant_quantize_iq4_xs(const float *x, void *b);
void quant_quantize_mxfp4(const float *x, void *b);
/* MXFP4's scale: 2^(e-128), i.e. half of the E8M0 value, as ggml keeps it
 * (its level table is the e2m1 values doubled). */
float quant_e8m0_half(uint8_t e);

/* core/format/quant_iq.c */
void quant_decode_iq2_xxs(const void *b, float *y);
void quant_decode_iq2_xs(const void *b, float *y);
void quant_decode_iq2_s(const void *b, float *y);
void quant_decode_iq3_xxs(const void *b, float *y);
void quant_decode_iq3_s(const void *b, float *y);
void quant_decode_iq1_s(const void *b, float *y);
void quant_decode_iq1_m(const void *b, float *y);

/* core/format/quant_iq_quantize.c */
void quant_quantize_iq2_xxs(const float *x, void *b);
void quant_quantize_iq2_xs(const float *x, void *b);
void quant_quantize_iq2_s(const float *x, void *b);
void quant_quantize_iq3_xxs(const float *x, void *b);
void quant_quantize_iq3_s(const float *x, void *b);
void quant_quantize_iq1_s(const float *x, void *b);
void quant_quantize_iq1_m(const float *x, void *b);

/* ---- shared helpers ------------------------------------------------------ */

/* ggml's smallest group maximum that is not treated as all-zero. */
#define QUANT_GROUP_MAX_EPS 1e-15f

static inline uint16_t quant_load_u16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t quant_load_u32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void quant_store_u16(void *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

/* Round to nearest, ties to even, the way ggml's K-quant code does it
 * (nearest_int): adding 1.5*2^23 leaves the rounded integer in the low
 * mantissa bits.  Exact for |v| < 2^22; beyond that, and for NaN, it
 * returns some int (never UB). */
static inline int quant_round_even(float v)
{
    float t = v + 12582912.0f;
    uint32_t u;
    memcpy(&u, &t, sizeof u);
    return (int)(u & 0x7fffff) - 0x400000;
}

static inline int quant_clamp_int(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The element of largest magnitude (the first one on ties), sign kept. */
static inline float quant_signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

#endif
