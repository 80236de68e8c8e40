/* vk_spv.h: one compiled shader embedded in the binary.
 *
 * The build turns each shaders/NAME.comp into an entry of
 * $(BUILD)/gen/spv_table.{c,h} (shaders/tools/embed_spv.c): an array of these and an enum naming each
 * entry (SPV_MV, SPV_ATTN_FD, ...), so a kernel builder names its shader by
 * an enum constant and a misspelt name fails to compile.  Shaders only the
 * microbenchmark runs (shaders/bench/) go into a second table linked into
 * that tool alone (spv_tool_table.h). */
#ifndef GLM_VK_SPV_H
#define GLM_VK_SPV_H

#include <stddef.h>
#include <stdint.h>

typedef struct vk_spv {
    const char *name;       /* the file's base name: "mv_xs" */
    const uint32_t *code;
    size_t size;            /* bytes */
    /* The shader compiled once per weight type (the Makefile's
     * TYPED_SHADERS): by_type[T] is the copy whose weight types are T, or
     * NULL.  A copy holds that type's code alone -- a driver that parses a
     * whole module before specializing it (lavapipe: ~0.3 s for the largest
     * generic module) reads 1/15 of it.  type_specs: bit i set for each
     * specialization constant that holds a weight type, which a copy fixes
     * (every one of them to T). */
    const struct vk_spv *const *by_type;
    uint32_t n_by_type;
    uint32_t type_specs;
} vk_spv;

/* The module to build shader s with spec[0..n) from: its copy for the
 * weight type the spec names where there is one (every weight-type
 * constant holding that same type), else s itself. */
static inline const vk_spv *vk_spv_for(const vk_spv *s, const uint32_t *spec, uint32_t n)
{
    if (!s->by_type || !s->type_specs)
        return s;
    uint32_t first = (uint32_t)__builtin_ctz(s->type_specs);
    if (first >= n || spec[first] >= s->n_by_type || !s->by_type[spec[first]])
        return s;
    for (uint32_t i = first; i < 32; i++)
        if ((s->type_specs >> i & 1u) && (i >= n || spec[i] != spec[first]))
            return s;
    return s->by_type[spec[first]];
}

#endif
