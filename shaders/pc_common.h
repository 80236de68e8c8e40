/* pc_common.h: one declaration of a kernel's interface for both sides.
 *
 * A shaders/pc_*.h header is included by the kernel's GLSL (glslc defines
 * GL_core_profile) and by its C builder (gpu/): PC_BEGIN/PC_END declare the
 * push-constant block -- the shader's `pc`, the builder's struct of the
 * same name, whose size is asserted to fit the push range in whole words --
 * and PC_ENUM names a binding or specialization-constant slot (a `const
 * uint` in GLSL, a member of a named enum in C).  Only 32-bit scalars go
 * into a block, so the std430 layout of the shader and the C struct agree
 * field by field.  (The host pushes VKC_PUSH_WORDS words to every kernel: a
 * block may be shorter, never longer.)  A header may declare the blocks of
 * several kernels: C sees them all (PC_HOST), a shader only the one it
 * selects with `#define PC_USE_<BLOCK>` before the include. */
#ifndef PC_COMMON_H
#define PC_COMMON_H

#ifdef GL_core_profile
#define PC_HOST 0
#define PC_U32 uint
#define PC_F32 float
#define PC_BEGIN(name) layout(push_constant) uniform name {
#define PC_END(name) } pc;
#define PC_ENUM_BEGIN(name)
#define PC_ENUM(name, value) const uint name = uint(value);
#define PC_ENUM_END(name)
/* WEIGHT_TYPE(ID, NAME): a kernel's weight type, specialization constant ID
 * -- or, in the copies the build makes per type (-DFIXED_TYPE=T, the
 * Makefile's TYPED_SHADERS), the constant T, so that copy's SPIR-V holds
 * the code of type T alone (gpu/vk_spv.h says why). */
#ifdef FIXED_TYPE
#define WEIGHT_TYPE(id, name) const uint name = uint(FIXED_TYPE)
#else
#define WEIGHT_TYPE(id, name) layout(constant_id = id) const uint name = 2u
#endif
#else
#include <stdint.h>
#define PC_HOST 1
#define PC_U32 uint32_t
#define PC_F32 float
#define PC_BEGIN(name) typedef struct {
#define PC_END(name)                                                                           \
    } name;                                                                                    \
    _Static_assert(sizeof(name) % 4 == 0 && sizeof(name) <= PC_MAX_BYTES,                      \
                   #name ": push constants are whole 32-bit words within the push range");
#define PC_ENUM_BEGIN(name) enum name {
#define PC_ENUM(name, value) name = (value),
#define PC_ENUM_END(name) };
#endif

/* Limits every kernel shares (gpu/vk_core.h's descriptor set and pipeline
 * layout are made from them). */
PC_ENUM_BEGIN(pc_limits)
PC_ENUM(PC_MAX_BYTES, 128)      /* push constants per kernel */
PC_ENUM(PC_WEIGHT_SLOTS, 4)     /* buffers in the weight array at binding 0 */
PC_ENUM(PC_MAX_BINDING, 9)      /* single buffers at bindings 1..9 */
PC_ENUM(PC_MAX_SPEC, 16)        /* specialization constants per kernel */
PC_ENUM_END(pc_limits)

/* Slots every kernel means the same by. */
PC_ENUM_BEGIN(pc_common_slot)
PC_ENUM(PC_B_WEIGHTS, 0)        /* binding: the weight tensors (quant.glsl) */
PC_ENUM(PC_B_DEP, 9)            /* binding: the dependency counters (dep_flag.glsl) */
PC_ENUM(PC_S_WGS, 0)            /* spec: workgroup size (local_size_x_id) */
PC_ENUM(PC_S_SIGNAL, 12)        /* spec: count finished workgroups on a counter (dep_flag.glsl) */
PC_ENUM(PC_S_WAIT, 13)          /* spec: wait on a counter first (dep_flag.glsl) */
PC_ENUM(PC_S_LL_IN, 14)         /* spec: the input is tagged words, polled (dep_flag.glsl "LL") */
PC_ENUM(PC_S_LL_OUT, 15)        /* spec: the output is written as tagged words */
PC_ENUM_END(pc_common_slot)

/* The low-bit types' tables (shaders/quant_iq.glsl): the grids of IQ2_XXS
 * (16), IQ2_XS (17), IQ2_S (22) -- two words a point, its bytes 0-3 and 4-7
 * --, of IQ3_XXS (18), IQ3_S (21) -- a word a point --, IQ1_S / IQ1_M's (19,
 * 29) -- two points a word (bits 0-15, 16-31), element j of a point as its
 * value + 1 at bits 2j --, and the 16 levels of IQ4_NL / IQ4_XS (20, 23) and
 * MXFP4 (39) as float bits (ggml type ids).  They live in the buffer the
 * device context binds wherever a kernel leaves a binding unused
 * (gpu/vk_device.c, filled by gpu/vk_iq_tables.c), at these word offsets;
 * no kernel binds a tensor to weight slot PC_IQ_TABLES_SLOT, so they are
 * always there.  Each kernel copies the ones its types read into shared
 * memory (PC_IQ_TABLE_WORDS words each), which the builders add to their
 * shared-memory budgets. */
PC_ENUM_BEGIN(pc_iq_tables)
PC_ENUM(PC_IQ_TABLES_SLOT, 3)
PC_ENUM(PC_IQ_OFF_IQ4NL, 0)
PC_ENUM(PC_IQ_OFF_MXFP4, 16)
PC_ENUM(PC_IQ_OFF_IQ2XXS, 32)
PC_ENUM(PC_IQ_OFF_IQ2XS, 544)
PC_ENUM(PC_IQ_OFF_IQ2S, 1568)
PC_ENUM(PC_IQ_OFF_IQ3XXS, 3616)
PC_ENUM(PC_IQ_OFF_IQ3S, 3872)
PC_ENUM(PC_IQ_OFF_IQ1S, 4384)
PC_ENUM(PC_IQ_TABLES_WORDS, 5408)
PC_ENUM_END(pc_iq_tables)
#define PC_IQ_TABLE_WORDS(t)                                                                              \
    ((t) == 16u ? 512u : (t) == 17u ? 1024u : (t) == 22u ? 2048u : (t) == 18u ? 256u : (t) == 21u ? 512u  \
     : ((t) == 19u || (t) == 29u) ? 1024u : ((t) == 20u || (t) == 23u || (t) == 39u) ? 16u : 0u)
#define PC_IQ_TABLE_OFF(t)                                                                                \
    ((t) == 16u ? PC_IQ_OFF_IQ2XXS : (t) == 17u ? PC_IQ_OFF_IQ2XS : (t) == 22u ? PC_IQ_OFF_IQ2S           \
     : (t) == 18u ? PC_IQ_OFF_IQ3XXS : (t) == 21u ? PC_IQ_OFF_IQ3S : (t) == 39u ? PC_IQ_OFF_MXFP4          \
     : ((t) == 20u || (t) == 23u) ? PC_IQ_OFF_IQ4NL : PC_IQ_OFF_IQ1S)

#endif
