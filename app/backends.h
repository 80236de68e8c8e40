/* backends.h: the engine backends this binary offers, by name. */
#ifndef GLM_BACKENDS_H
#define GLM_BACKENDS_H

#include "engine.h"
#include "error.h"

/* "cpu", "vulkan", or "auto" (Vulkan when a device works, else cpu).  NULL +
 * err ("backend 'x' is not available: ...") when it cannot be had. */
const engine_backend *app_find_backend(const char *name, err_t *err);
/* The same, except that "auto" also takes a CPU Vulkan device (lavapipe)
 * when there is no GPU: for models as small as the built-in demo, which
 * lavapipe runs quickly, so a fresh machine shows the Vulkan core at work. */
const engine_backend *app_find_backend_small_model(const char *name, err_t *err);
/* Names offered, comma-separated, for --help and errors. */
const char *app_backend_names(void);

#endif
