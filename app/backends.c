/* backends.c: name -> engine backend, and what "auto" picks.
 *
 * "auto" takes the Vulkan backend on a Vulkan GPU (discrete, integrated or
 * virtual).  Where the only Vulkan device is a CPU implementation (Mesa's
 * lavapipe / llvmpipe), both backends would run on the same cores, and the
 * choice is the one an estimate of a token's time says is faster for the
 * model at hand -- from its size and the device type, without running
 * either (see estimate_ms).  Without a Vulkan device it is the fast CPU
 * backend ("cpu"); the plain-C reference ("ref", the oracle the tests
 * compare against) runs only when asked for. */
#include "backends.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vk.h"

/* The fast CPU backend's weight streaming per core, GB/s (a 2-core x86-64:
 * 10.8 on one core for a mid-size Q4_0 model, README "CPU speed"; half of
 * that, for cores that share memory bandwidth). */
#define CPU_GBS_PER_CORE 5.0

typedef struct {
    const char *name;
    const engine_backend *be;
} backend_entry;

static const backend_entry backends[] = {
    {"cpu", &cpu_engine_backend},
    {"ref", &ref_engine_backend},
    {"vulkan", &vk_engine_backend},
};

const char *app_backend_names(void)
{
    return APP_BACKEND_NAMES;
}

bool app_backend_known(const char *name)
{
    if (strcmp(name, "auto") == 0)
        return true;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, name) == 0)
            return true;
    return false;
}

/* The device "best" selection picks, or -1 (in *d when there is one). */
static int best_device(vk_device_info *d)
{
    vk_device_info all[VK_MAX_DEVICES];
    uint32_t n = 0;
    int best = -1;
    err_t e;
    if (vk_list_devices(all, &n, &best, &e) || best < 0)
        return -1;
    *d = all[best];
    return best;
}

static const engine_backend *by_name(const char *name, err_t *err)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, name) == 0)
            return backends[i].be;
    err_set(err, "unknown backend '%s' (choose from: %s)", name, app_backend_names());
    return NULL;
}

const engine_backend *app_find_backend(const char *name, err_t *err)
{
    vk_device_info d;
    if (strcmp(name, "auto") == 0)
        name = best_device(&d) >= 0 && strcmp(d.kind, "cpu") != 0 ? "vulkan" : "cpu";
    return by_name(name, err);
}

/* A token's time, in ms, on the fast CPU backend and on a CPU Vulkan
 * device, for a model reading `bytes` of weights per token over
 * `dispatches` dependent dispatches on `cores` cores.  Both stream the
 * weights; the CPU backend does so at CPU_GBS_PER_CORE per core plus about
 * 2 us per step (a barrier), the GPU kernels compiled for the CPU at
 * ~0.15 GB/s per core plus ~0.4 ms per dispatch (glmchat bench on a 2-core
 * x86-64 with lavapipe, LLVM 15: the demo model 20.6 ms a token, 26 MB
 * active 75 ms, 161 MB 607 ms). */
static void estimate_ms(double bytes, double dispatches, double cores, double *cpu, double *vk_cpu)
{
    *cpu = bytes / (CPU_GBS_PER_CORE * 1e9 * cores) * 1e3 + 0.002 * dispatches;
    *vk_cpu = bytes / (0.15e9 * cores) * 1e3 + 0.4 * dispatches;
}

const engine_backend *app_choose_backend(const char *name, const model *m, char *why, size_t why_len, err_t *err)
{
    if (why && why_len)
        why[0] = 0;
    if (strcmp(name, "auto") != 0)
        return by_name(name, err);
    vk_device_info d;
    char buf[320];
    const char *pick = "cpu";
    if (best_device(&d) < 0) {
        snprintf(buf, sizeof buf, "backend: the CPU (no usable Vulkan device)");
    } else if (strcmp(d.kind, "cpu") != 0) {
        pick = "vulkan";
        snprintf(buf, sizeof buf, "backend: Vulkan on %.200s (a %s GPU)", d.name, d.kind);
    } else {
        model_census cen;
        model_census_compute(m, &cen);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        double cpu, vkc;
        estimate_ms((double)cen.active_bytes, 1.0 + 9.0 * m->cfg.n_layer + 3.0, cores > 0 ? (double)cores : 1.0, &cpu,
                    &vkc);
        pick = vkc < cpu ? "vulkan" : "cpu";
        snprintf(buf, sizeof buf,
                 "backend: %s -- the only Vulkan device (%.120s) runs on the CPU, where the %s is faster for this "
                 "model (about %.1f against %.1f ms a token); --backend %s forces the other",
                 vkc < cpu ? "Vulkan" : "the CPU", d.name, vkc < cpu ? "Vulkan core" : "CPU backend",
                 vkc < cpu ? vkc : cpu, vkc < cpu ? cpu : vkc, vkc < cpu ? "cpu" : "vulkan");
    }
    if (why && why_len)
        snprintf(why, why_len, "%s", buf);
    return by_name(pick, err);
}
