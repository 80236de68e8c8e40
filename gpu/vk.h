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
 *    submit per token, and a second where a flat distribution keeps more
 *    tokens than the candidates hold (the selection over the whole
 *    vocabulary); MoE routing on the GPU; top-K +
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

#include "engine/engine.h"
#include "base/error.h"

#define VK_MAX_DEVICES 16

typedef struct {
    char name[256];
    const char *kind;        /* "discrete", "integrated", "virtual", "cpu", "other" */
    uint32_t api_major, api_minor;
    uint64_t device_local_bytes;  /* the largest device-local heap */
    /* What glmchat may take of that heap now: VK_EXT_memory_budget's budget
     * less what is in use where the device has the extension
     * (budget_from_ext), else the heap less a margin for the driver and
     * other programs (vk_budget_margin). */
    uint64_t budget_bytes;
    bool budget_from_ext;
    uint32_t subgroup_size;
    uint64_t max_alloc_bytes;     /* maxMemoryAllocationSize */
    uint64_t max_range_bytes;     /* maxStorageBufferRange */
    uint32_t shared_bytes;        /* maxComputeSharedMemorySize */
    bool coopmat;                 /* fp16 cooperative matrices (NV) usable for prefill */
    bool idot_fast;               /* accelerated 8-bit integer dot products (Vulkan 1.3): the decode's
                                     matvecs take them by default (the idot knob) */
    bool usable;                  /* has everything glmchat requires */
    char missing[256];            /* when !usable: what it lacks */
} vk_device_info;

/* The part of a heap of `heap` bytes left to the driver, the display and
 * other programs where no budget is reported: 1/32 + 256 MiB (half of a
 * heap under 512 MiB). */
uint64_t vk_budget_margin(uint64_t heap);

/* Fills up to VK_MAX_DEVICES entries in enumeration order; *n gets the count.
 * Also reports which index "best" selection would pick (-1: none usable). */
int vk_list_devices(vk_device_info *out, uint32_t *n, int *best, err_t *err);

/* True when a usable Vulkan device exists (cheap: no logical device). */
bool vk_available(void);

extern const engine_backend vk_engine_backend;

/* Where the Vulkan backend would place model m under params p, worked out
 * as engine creation does (the same fit check, the same context chosen when
 * p->n_ctx is 0) but with nothing uploaded: for `info`.  When it does not
 * fit: -1, err the line engine creation gives, out the figures that did
 * not fit. */
typedef struct {
    char device[256];
    uint64_t available;      /* device memory the fit was checked against */
    const char *limit;       /* what set it: "--gpu-mem", "the memory budget", "the heap less a margin" */
    uint64_t weights, kv, act; /* device bytes of each */
    uint32_t n_ctx;          /* the KV cache's tokens */
    uint32_t n_batch;        /* the activations' tokens: the largest prompt chunk */
    /* host-visible (pinned) bytes: read-backs, the params and sampling
     * words, every position's logits where engine_params.all_logits */
    uint64_t host_visible;
    /* routed experts left in host memory (--n-cpu-moe, or what the device
     * lacks): of host_layers MoE layers, host_first..host_last; their bytes
     * in the file */
    uint32_t host_layers, host_first, host_last;
    uint64_t host_bytes;
    /* prompt batches of stream_min tokens or more copy each host layer's
     * experts to a device slot of stream_slot bytes (counted in act), from
     * two staging buffers as large (counted in host_visible); 0: never */
    uint64_t stream_slot;
    uint32_t stream_min;
} vk_placement;
int vk_plan_placement(const model *m, const engine_params *p, vk_placement *out, err_t *err);
/* One line: "weights W, KV cache K (N tokens), activations A (batches of
 * B tokens): T of AVAIL
 * (LIMIT)" in MiB or GiB, then "; routed experts of layers a..b in host
 * memory (X)" where there are any. */
void vk_placement_line(const vk_placement *pl, char *buf, size_t len);

/* `--tune KEY=VALUE`: 0 when the Vulkan core has that knob and the value is
 * in its range, else -1 and one line in err.  The engine applies the
 * overrides when it is created (engine_params.tune). */
int vk_tune_check(const char *key_value, err_t *err);
/* The knobs: name, default, range, the gpu/PERF.md run that chose it. */
void vk_tune_print(FILE *f);

#endif
