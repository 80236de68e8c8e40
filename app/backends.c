/* backends.c: name -> engine backend.  The Vulkan backend registers here
 * once gpu/ provides it. */
#include "backends.h"

#include <string.h>

typedef struct {
    const char *name;
    const engine_backend *be;
} backend_entry;

static const backend_entry backends[] = {
    {"cpu", &ref_engine_backend},
};

const char *app_backend_names(void)
{
    return "cpu, vulkan, auto";
}

const engine_backend *app_find_backend(const char *name, err_t *err)
{
    if (strcmp(name, "auto") == 0)
        name = "cpu";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, name) == 0)
            return backends[i].be;
    if (strcmp(name, "vulkan") == 0) {
        err_set(err, "backend 'vulkan' is not available in this build yet; use --backend cpu");
        return NULL;
    }
    err_set(err, "unknown backend '%s' (choose from: %s)", name, app_backend_names());
    return NULL;
}
