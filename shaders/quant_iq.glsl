// quant_iq.glsl: the tables of the low-bit weight types in shared memory --
// the grids of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S / IQ1_M and the
// 16 levels of IQ4_NL, IQ4_XS, MXFP4 -- and quant.glsl's iq_* lookups.
//
// Included by every kernel that includes quant.glsl, once its weight types
// are declared: IQ_T1 (and IQ_T2, a second weight type, e.g. the up matrix
// of a gate/up kernel; default IQ_T1) name them.  Each type that has a table
// gets a shared copy of it (PC_IQ_TABLE_WORDS words, 1 for the others), filled
// by iq_fill() / iq_init() once per workgroup from the generated constants
// (quant_grids.glsl, made from core/quant_grids.c).
//
// Why shared memory: a lookup per group of 4 or 8 weights (a level per
// weight) at random indices.  Constant arrays indexed at run time are slow
// or spilled on many drivers, a storage buffer costs a binding and an L1
// miss per cold line; a workgroup copies at most 8 KiB once and then reads
// at shared-memory speed (llama.cpp's Vulkan shaders do the same).  The 16
// levels are 16 words in 16 banks: any lookup pattern is conflict-free.

#ifndef IQ_T2
#define IQ_T2 IQ_T1
#endif
#include "quant_grids.glsl"

const uint IQ_W1 = PC_IQ_TABLE_WORDS(IQ_T1);
const uint IQ_W2 = IQ_T2 == IQ_T1 ? 0u : PC_IQ_TABLE_WORDS(IQ_T2);
shared uint iq_tab1[IQ_W1 > 0u ? IQ_W1 : 1u];
shared uint iq_tab2[IQ_W2 > 0u ? IQ_W2 : 1u];

// Word i of type t's table (gen_grids_glsl.c gives the layouts).
uint iq_table_word(uint t, uint i)
{
    if (t == T_IQ2_XXS) {
        uvec2 p = IQ2XXS_GRID[i >> 1];
        return (i & 1u) != 0u ? p.y : p.x;
    }
    if (t == T_IQ2_XS) {
        uvec2 p = IQ2XS_GRID[i >> 1];
        return (i & 1u) != 0u ? p.y : p.x;
    }
    if (t == T_IQ2_S) {
        uvec2 p = IQ2S_GRID[i >> 1];
        return (i & 1u) != 0u ? p.y : p.x;
    }
    if (t == T_IQ3_XXS)
        return IQ3XXS_GRID[i];
    if (t == T_IQ3_S)
        return IQ3S_GRID[i];
    if (t == T_MXFP4)
        return floatBitsToUint(MXFP4_LEVELS[i]);
    if (t == T_IQ4_NL || t == T_IQ4_XS)
        return floatBitsToUint(IQ4NL_LEVELS[i]);
    return IQ1S_GRID[i];
}

// Copies the tables this kernel's types read into shared memory; the
// caller's next barrier() makes them visible.  Call from every invocation.
void iq_fill()
{
    for (uint i = gl_LocalInvocationIndex; i < IQ_W1; i += gl_WorkGroupSize.x)
        iq_tab1[i] = iq_table_word(IQ_T1, i);
    for (uint i = gl_LocalInvocationIndex; i < IQ_W2; i += gl_WorkGroupSize.x)
        iq_tab2[i] = iq_table_word(IQ_T2, i);
}

// iq_fill and the barrier, where there is a table (uniform control flow).
void iq_init()
{
    if (IQ_W1 + IQ_W2 > 0u) {
        iq_fill();
        barrier();
    }
}

uint iq_word(uint t, uint i) { return t == IQ_T1 ? iq_tab1[i] : iq_tab2[i]; }
uvec2 iq_grid8(uint t, uint i) { return uvec2(iq_word(t, 2u * i), iq_word(t, 2u * i + 1u)); }
uint iq_grid4(uint t, uint i) { return iq_word(t, i); }
uint iq_grid1(uint t, uint i) { return (iq_word(t, i >> 1) >> (16u * (i & 1u))) & 0xFFFFu; }
float iq_level(uint t, uint q) { return uintBitsToFloat(iq_word(t, q)); }
