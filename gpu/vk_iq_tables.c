/* vk_iq_tables.c: the low-bit weight types' tables in the layout the
 * kernels read them (shaders/pc_common.h, PC_IQ_*): core/format/quant_grids.c's
 * grids and levels, so the GPU and the CPU reference share one source. */
#include <string.h>

#include "format/quant_grids.h"
#include "vk_core.h"

static uint32_t word4(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void levels(uint32_t *w, const int8_t *v)
{
    for (int i = 0; i < 16; i++) {
        float f = (float)v[i];
        memcpy(&w[i], &f, 4);
    }
}

static void grid8(uint32_t *w, const uint8_t (*g)[8], int n)
{
    for (int i = 0; i < n; i++) {
        w[2 * i] = word4(g[i]);
        w[2 * i + 1] = word4(g[i] + 4);
    }
}

/* IQ1's points: element j (-1, 0, 1) as j + 1 at bits 2j. */
static uint32_t iq1_point(const int8_t *p)
{
    uint32_t v = 0;
    for (int j = 0; j < 8; j++)
        v |= (uint32_t)(p[j] + 1) << (2 * j);
    return v;
}

void vk_iq_tables_fill(uint32_t *w)
{
    memset(w, 0, PC_IQ_TABLES_WORDS * sizeof *w);
    levels(w + PC_IQ_OFF_IQ4NL, quant_kvalues_iq4nl);
    levels(w + PC_IQ_OFF_MXFP4, quant_kvalues_mxfp4);
    grid8(w + PC_IQ_OFF_IQ2XXS, quant_iq2xxs_grid, 256);
    grid8(w + PC_IQ_OFF_IQ2XS, quant_iq2xs_grid, 512);
    grid8(w + PC_IQ_OFF_IQ2S, quant_iq2s_grid, 1024);
    for (int i = 0; i < 256; i++)
        w[PC_IQ_OFF_IQ3XXS + i] = word4(quant_iq3xxs_grid[i]);
    for (int i = 0; i < 512; i++)
        w[PC_IQ_OFF_IQ3S + i] = word4(quant_iq3s_grid[i]);
    for (int i = 0; i < 1024; i++)
        w[PC_IQ_OFF_IQ1S + i] = iq1_point(quant_iq1s_grid[2 * i]) | iq1_point(quant_iq1s_grid[2 * i + 1]) << 16;
}
