/* backends.c: name -> engine backend.
 *
 * "auto" takes the Vulkan backend when a Vulkan GPU (discrete, integrated
 * or virtual) can run glmchat, and the CPU reference otherwise: a CPU
 * implementation of Vulkan (Mesa's lavapipe) is a correctness tool, far
 * slower than the CPU backend itself, so it is used only when asked for
 * with --backend vulkan. */
#include "backends.h"

#include <string.h>

#include "vk.h"

typedef struct {
    const char *name;
    const engine_backend *be;
} backend_entry;

static const backend_entry backends[] = {
    {"cpu", &ref_engine_backend},
    {"vulkan", &vk_engine_backend},
};

const char *app_backend_names(void)
{
    return "cpu, vulkan, auto";
}

/* True when the device "best" selection picks is a GPU. */
static bool vulkan_gpu_available(void)
{
    vk_device_info d[VK_MAX_DEVICES];
    uint32_t n = 0;
    int best = -1;
    err_t e;
    if (vk_list_devices(d, &n, &best, &e) || best < 0)
        return false;
    return strcmp(d[best].kind, "cpu") != 0;
}

const engine_backend *app_find_backend(const char *name, err_t *err)
{
    if (strcmp(name, "auto") == 0)
        name = vulkan_gpu_available() ? "vulkan" : "cpu";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, name) == 0)
            return backends[i].be;
    err_set(err, "unknown backend '%s' (choose from: %s)", name, app_backend_names());
    return NULL;
}
