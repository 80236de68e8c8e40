/* backends.c: name -> engine backend.
 *
 * "auto" takes the Vulkan backend when a Vulkan GPU (discrete, integrated
 * or virtual) can run glmchat, and the CPU reference otherwise: a CPU
 * implementation of Vulkan (Mesa's lavapipe) is a correctness tool, far
 * slower than the CPU backend itself, so it is used only when asked for
 * with --backend vulkan -- except for a model as small as the built-in demo
 * (app_find_backend_small_model), where lavapipe is quick enough and the
 * side pane then shows the Vulkan core's own kernels. */
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

/* True when the device "best" selection picks is a GPU (or, with
 * any_device, when there is any Vulkan device at all, lavapipe included). */
static bool vulkan_available(bool any_device)
{
    vk_device_info d[VK_MAX_DEVICES];
    uint32_t n = 0;
    int best = -1;
    err_t e;
    if (vk_list_devices(d, &n, &best, &e) || best < 0)
        return false;
    return any_device || strcmp(d[best].kind, "cpu") != 0;
}

const engine_backend *app_find_backend(const char *name, err_t *err)
{
    if (strcmp(name, "auto") == 0)
        name = vulkan_available(false) ? "vulkan" : "cpu";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, name) == 0)
            return backends[i].be;
    err_set(err, "unknown backend '%s' (choose from: %s)", name, app_backend_names());
    return NULL;
}

const engine_backend *app_find_backend_small_model(const char *name, err_t *err)
{
    if (strcmp(name, "auto") == 0 && vulkan_available(true))
        name = "vulkan";
    return app_find_backend(name, err);
}
