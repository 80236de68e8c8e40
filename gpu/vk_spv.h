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

typedef struct {
    const char *name;       /* the file's base name: "mv_xs" */
    const uint32_t *code;
    size_t size;            /* bytes */
} vk_spv;

#endif
