/* vk.h: the Vulkan backend, as the rest of glmchat sees it.
 *
 * Promises:
 *  - vk_list_devices() enumerates the Vulkan devices in the order `--device N`
 *    uses, with what each offers and, when a device cannot run glmchat, one
 *    line saying which required features it lacks.
 *  - vk_engine_backend implements engine.h on the GPU: weights uploaded once
 *    (repacked into a GPU-friendly layout), one recorded command buffer per
 *    token shape, one submit per token, MoE routing on the GPU, top-K +
 *    logsumexp read back instead of the logits unless the logits are asked for.
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

/* Hooks for `glmchat bench` on an engine opened on vk_engine_backend
 * (impl = engine.impl). */
void vk_engine_set_profile(void *impl, profile_mode mode);
/* Per-kernel figures of the last fully timed prompt batch (per batch, not per token). */
void vk_engine_prefill_stats(void *impl, engine_stats *st);
/* `--tune KEY=VALUE`: 0 when the Vulkan core has that knob and the value is
 * in its range, else -1 and one line in err.  The engine applies the
 * overrides when it is created (engine_params.tune). */
int vk_tune_check(const char *key_value, err_t *err);
/* The knobs: name, default, range, the gpu/PERF.md run that chose it. */
void vk_tune_print(FILE *f);

/* After one eval of n_tokens (<= the prefill batch): per MoE layer, how
 * many distinct experts those tokens chose. */
int vk_engine_routing(void *impl, uint32_t n_tokens, uint32_t *distinct, uint32_t cap, uint32_t *n_layers,
                      uint32_t *n_expert, err_t *err);

#endif
