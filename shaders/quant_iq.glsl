// quant_iq.glsl: the tables of the low-bit weight types in shared memory --
// the grids of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S / IQ1_M and the
// 16 levels of IQ4_NL, IQ4_XS, MXFP4 -- and quant.glsl's iq_* lookups.
//
// Included by every kernel that includes quant.glsl, once its weight types
// are declared: IQ_T1 (and IQ_T2, a second weight type, e.g. the up matrix
// of a gate/up kernel; default IQ_T1) name them.  Each type that has a table
// gets a shared copy of it (PC_IQ_TABLE_WORDS words, 1 for the others),
// filled by iq_fill() / iq_init() once per workgroup from the tables buffer
// at weight slot PC_IQ_TABLES_SLOT (pc_common.h gives its layout).
//
// Why shared memory: a lookup per group of 4 or 8 weights (a level per
// weight) at random indices, which a workgroup then serves at shared-memory
// speed after one copy of at most 8 KiB from L2 (llama.cpp's Vulkan shaders
// copy theirs the same way).  The 16 levels are 16 words in 16 banks: any
// lookup pattern is conflict-free.  Why a buffer and not GLSL constant
// arrays: lavapipe took minutes to compile a kernel holding the 1024-point
// IQ2_S grid as a constant array indexed at run time.

#ifndef IQ_T2
#define IQ_T2 IQ_T1
#endif

const uint IQ_W1 = PC_IQ_TABLE_WORDS(IQ_T1);
const uint IQ_W2 = IQ_T2 == IQ_T1 ? 0u : PC_IQ_TABLE_WORDS(IQ_T2);
shared uint iq_tab1[IQ_W1 > 0u ? IQ_W1 : 1u];
shared uint iq_tab2[IQ_W2 > 0u ? IQ_W2 : 1u];

// Word i of type t's table.
uint iq_table_word(uint t, uint i) { return W[PC_IQ_TABLES_SLOT].w[PC_IQ_TABLE_OFF(t) + i]; }

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
