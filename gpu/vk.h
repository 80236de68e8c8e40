/* vk.h: the Vulkan backend, as the rest of glmchat sees it.
 *
 * Promises:
 *  - vk_list_devices() enumerates the Vulkan devices in the order `--device N`
 *    uses, with what each offers and, when a device cannot run glmchat, one
 *    line saying which required features it lacks.
 *  - vk_engine_backend implements engine.h on the GPU, with bench's
 *    optional entries: weights uploaded once (repacked into a GPU-friendly
 *    layout); each program recorded once (the decode graph, per layer
 *    family: a plain command buffer, one fully timed, one per layer timed
 *    for the sampled profiler -- 49 for GLM-4.7-Flash's 47 layers) and
 *    recorded again with barriers only if a dependency wait gives up; one
 *    submit per token (a second, the selection over the whole vocabulary,
 *    where a flat distribution needs it); MoE routing on the GPU; top-K +
 *    logsumexp read back instead of the logits unless the logits are asked
 *    for.
 *  - Every failure (no device, missing feature, out of device memory, device
 *    lost) comes back as one err_t line; nothing here exits.
 */
#ifndef GLM_VK_H
#define GLM_VK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "error.h"

#define VK_MAX_DEVICES 16

typedef struct {
    char name[256];
    const char *kind;        /* "discrete", "integrated", "virtual", "cpu", "other" */
    uint32_t api_major, api_minor;
    uint64_t device_local_bytes;
    uint32_t subgroup_size;
    uint64_t max_alloc_bytes;     /* maxMemoryAllocationSize */
    uint64_t max_range_bytes;     /* maxStorageBufferRange */
    uint32_t shared_bytes;        /* maxComputeSharedMemorySize */
    bool coopmat;                 /* fp16 cooperative matrices (NV) usable for prefill */
    bool usable;                  /* has everything glmchat requires */
    char missing[256];            /* when !usable: what it lacks */
} vk_device_info;

/* Fills up to VK_MAX_DEVICES entries in enumeration order; *n gets the count.
 * Also reports which index "best" selection would pick (-1: none usable). */
int vk_list_devices(vk_device_info *out, uint32_t *n, int *best, err_t *err);

/* True when a usable Vulkan device exists (cheap: no logical device). */
bool vk_available(void);

extern const engine_backend vk_engine_backend;

/* `--tune KEY=VALUE`: 0 when the Vulkan core has that knob and the value is
 * in its range, else -1 and one line in err.  The engine applies the
 * overrides when it is created (engine_params.tune). */
int vk_tune_check(const char *key_value, err_t *err);
/* The knobs: name, default, range, the gpu/PERF.md run that chose it. */
void vk_tune_print(FILE *f);

#endif
