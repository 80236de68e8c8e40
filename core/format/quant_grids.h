/* quant_grids.h: the lookup tables of ggml's non-linear quant formats.
 *
 * Promises: the values of llama.cpp's tables (ggml-common.h), byte for byte,
 * generated from gguf-py by tests/tools/gen_quant_grids.py into
 * quant_grids.c (never edited by hand).  Row i of a grid is the grid point
 * ggml stores as entry i of its uint64_t / uint32_t table; element j of the
 * point is byte j of that entry.  Read-only data, safe from any thread. */
#ifndef GLM_QUANT_GRIDS_H
#define GLM_QUANT_GRIDS_H

#include <stdint.h>

/* The 8 sign bits of a group of 8 from a 7-bit index: bits 0-6 as given,
 * bit 7 making the number of set bits even (ksigns_iq2xs). */
extern const uint8_t quant_ksigns_iq2xs[128];
/* IQ4_NL / IQ4_XS levels (kvalues_iq4nl). */
extern const int8_t quant_kvalues_iq4nl[16];
/* MXFP4: the e2m1 values doubled (kvalues_mxfp4); the E8M0 scale is halved
 * to match (quant.c). */
extern const int8_t quant_kvalues_mxfp4[16];

/* Magnitudes (8, 25 or 43) of groups of 8: IQ2_XXS, IQ2_XS, IQ2_S. */
extern const uint8_t quant_iq2xxs_grid[256][8];
extern const uint8_t quant_iq2xs_grid[512][8];
extern const uint8_t quant_iq2s_grid[1024][8];
/* Magnitudes of groups of 4: IQ3_XXS (4, 12, ..., 52, 62), IQ3_S (1, 3, ..., 15). */
extern const uint8_t quant_iq3xxs_grid[256][4];
extern const uint8_t quant_iq3s_grid[512][4];
/* Signed values (-1, 0, 1) of groups of 8: IQ1_S, IQ1_M. */
extern const int8_t quant_iq1s_grid[2048][8];

#endif
