/* backends.h: the engine backends this binary offers, by name, and the
 * choice `auto` makes. */
#ifndef GLM_BACKENDS_H
#define GLM_BACKENDS_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "error.h"
#include "model.h"

/* "cpu" (the fast CPU backend), "ref" (the plain-C reference), "vulkan",
 * or "auto" (Vulkan on a GPU, else the CPU backend).  NULL + err when the
 * name is unknown.  Without the model at hand: a CPU implementation of
 * Vulkan counts as no GPU (app_choose_backend). */
const engine_backend *app_find_backend(const char *name, err_t *err);
/* The same for model m: where the only Vulkan device runs on the CPU
 * (lavapipe, llvmpipe), "auto" takes whichever of the CPU backend and
 * Vulkan an estimate from the model's size says is faster.  why (optional,
 * for auto only, else ""): one line -- which backend runs and why. */
const engine_backend *app_choose_backend(const char *name, const model *m, char *why, size_t why_len, err_t *err);
/* Names offered, comma-separated, for --help and errors (the macro for
 * code that links without the backends: the settings reader, its fuzzer). */
#define APP_BACKEND_NAMES "cpu, ref, vulkan, auto"
const char *app_backend_names(void);
/* Whether `name` is one of them (auto included). */
bool app_backend_known(const char *name);

#endif
