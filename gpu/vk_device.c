/* vk_device.c: instance, device choice, required features, the logical
 * device and the objects every kernel shares (descriptor set layout,
 * pipeline layout, a dummy buffer for unused bindings). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk_core.h"
#include "base/spin.h"

/* ---- results -------------------------------------------------------------- */

const char *vk_result_name(VkResult r)
{
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VK_ERROR_UNKNOWN";
    }
}

int vk_fail(vk_ctx *c, err_t *err, VkResult r, const char *what)
{
    if (r == VK_ERROR_DEVICE_LOST) {
        if (c)
            c->lost = true;
        return err_set(err, "Vulkan device lost during %s (driver reset or GPU fault); restart glmchat "
                            "or use --backend cpu", what);
    }
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ||
        r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL)
        return err_set(err, "out of %s memory during %s; " VK_FIT_HINT,
                       r == VK_ERROR_OUT_OF_HOST_MEMORY ? "host" : "device", what);
    return err_set(err, "Vulkan: %s failed: %s", what, vk_result_name(r));
}

/* ---- instance ------------------------------------------------------------- */

static int make_instance(VkInstance *out, uint32_t *api, err_t *err)
{
    uint32_t loader = VK_API_VERSION_1_0;
    PFN_vkEnumerateInstanceVersion ev =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (ev && ev(&loader) != VK_SUCCESS)
        loader = VK_API_VERSION_1_0;
    if (VK_API_VERSION_MINOR(loader) < 1 && VK_API_VERSION_MAJOR(loader) == 1)
        return err_set(err, "the Vulkan loader is version 1.0; glmchat needs Vulkan 1.1 or later");
    *api = VK_API_VERSION_MINOR(loader) >= 3 ? VK_API_VERSION_1_3 : loader;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "glmchat",
                             .pEngineName = "glmchat",
                             .apiVersion = *api};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = vkCreateInstance(&ci, NULL, out);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return err_set(err, "no Vulkan driver found (install one, e.g. mesa-vulkan-drivers, or use --backend cpu)");
    if (r != VK_SUCCESS)
        return vk_fail(NULL, err, r, "vkCreateInstance");
    return 0;
}

/* One VkInstance for the whole process, made on first use and kept until
 * the process ends.  The loader loads the driver with each instance and
 * unloads it with the last one, and NVIDIA's driver (580.159) refused a new
 * instance (VK_ERROR_INCOMPATIBLE_DRIVER) after some two dozen such cycles
 * in one process (gpu/perf/runs/39: every case of test_vk_spec passed
 * alone, the 25th engine of one run could not start) -- a chat that opens
 * one model after another would get there.  Not destroyed at exit: an
 * engine another thread still holds then would lose its instance under it. */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static VkInstance shared_instance;
static uint32_t shared_api;

static int get_instance(VkInstance *out, uint32_t *api, err_t *err)
{
    pthread_mutex_lock(&shared_lock);
    int rc = shared_instance ? 0 : make_instance(&shared_instance, &shared_api, err);
    if (rc)
        shared_instance = VK_NULL_HANDLE;
    *out = shared_instance;
    *api = shared_api;
    pthread_mutex_unlock(&shared_lock);
    return rc;
}

/* ---- capabilities --------------------------------------------------------- */

static const char *kind_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

static int kind_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

static bool has_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    if (!e)
        return false;
    bool found = false;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

/* The queue family with compute and timestamps, or UINT32_MAX. */
static uint32_t compute_family(VkPhysicalDevice pd, bool *timestamps)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[32];
    if (n > 32)
        n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    uint32_t best = UINT32_MAX;
    *timestamps = false;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
            continue;
        /* Prefer a family that also has timestamps; graphics+compute first
         * (on some drivers the compute-only family lacks them). */
        bool ts = q[i].timestampValidBits > 0;
        if (best == UINT32_MAX || (ts && !*timestamps)) {
            best = i;
            *timestamps = ts;
        }
    }
    return best;
}

typedef struct {
    vk_device_info info;
    uint32_t family;
    bool size_control_ext, size_control_core;
    bool coopmat_ext;
    bool timeline;             /* Vulkan 1.2's timelineSemaphore feature */
    bool dyn_index;
    bool float16, storage16, vmm;
    uint32_t sm_count;
    bool mesa;                 /* a Mesa driver (VkPhysicalDeviceDriverProperties) */
    bool idot;                 /* shaderIntegerDotProduct (core 1.3) */
    bool idot_fast;            /* and its 4x8-bit packed mixed-signedness dot products accelerated */
} dev_caps;

/* Mesa's drivers, which share one SPIR-V front end (vk_core.h: mesa_driver). */
static bool is_mesa_driver(VkDriverId id)
{
    switch (id) {
    case VK_DRIVER_ID_MESA_RADV:
    case VK_DRIVER_ID_INTEL_OPEN_SOURCE_MESA:
    case VK_DRIVER_ID_MESA_LLVMPIPE:
    case VK_DRIVER_ID_MESA_TURNIP:
    case VK_DRIVER_ID_MESA_V3DV:
    case VK_DRIVER_ID_MESA_PANVK:
    case VK_DRIVER_ID_MESA_VENUS:
    case VK_DRIVER_ID_MESA_DOZEN:
    case VK_DRIVER_ID_MESA_NVK:
    case VK_DRIVER_ID_IMAGINATION_OPEN_SOURCE_MESA: return true;
    default: return false;
    }
}

static void add_missing(vk_device_info *d, const char *what)
{
    size_t len = strlen(d->missing);
    snprintf(d->missing + len, sizeof d->missing - len, "%s%s", len ? ", " : "", what);
    d->usable = false;
}

static bool coopmat_fp16_16(VkInstance inst, VkPhysicalDevice pd)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV f = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)
        vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    if (!f)
        return false;
    uint32_t n = 0;
    if (f(pd, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
    if (!p)
        return false;
    for (uint32_t i = 0; i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    bool ok = false;
    if (f(pd, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            if (p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
                p[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV && p[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                p[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV && p[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                p[i].scope == VK_SCOPE_SUBGROUP_NV)
                ok = true;
    free(p);
    return ok;
}

uint64_t vk_budget_margin(uint64_t heap)
{
    return heap > (512ull << 20) ? (heap >> 5) + (256ull << 20) : heap / 2;
}

/* The largest device-local heap and what of it is free to take now: the
 * driver's budget less its usage (VK_EXT_memory_budget: accounts for other
 * programs and the display), else the heap less vk_budget_margin. */
static void query_budget(VkPhysicalDevice pd, vk_device_info *d)
{
    VkPhysicalDeviceMemoryBudgetPropertiesEXT bp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    bool ext = has_ext(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    VkPhysicalDeviceMemoryProperties2 mp2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                             .pNext = ext ? &bp : NULL};
    vkGetPhysicalDeviceMemoryProperties2(pd, &mp2);
    const VkPhysicalDeviceMemoryProperties *mp = &mp2.memoryProperties;
    uint32_t heap = UINT32_MAX;
    for (uint32_t i = 0; i < mp->memoryHeapCount; i++)
        if ((mp->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            (heap == UINT32_MAX || mp->memoryHeaps[i].size > mp->memoryHeaps[heap].size))
            heap = i;
    d->device_local_bytes = heap == UINT32_MAX ? 0 : mp->memoryHeaps[heap].size;
    d->budget_bytes = d->device_local_bytes - vk_budget_margin(d->device_local_bytes);
    d->budget_from_ext = false;
    /* a budget of 0 or above the heap is a driver that fills the struct
     * without meaning it: the heap's own figure is safer */
    if (ext && heap != UINT32_MAX && bp.heapBudget[heap] && bp.heapBudget[heap] <= d->device_local_bytes) {
        uint64_t b = bp.heapBudget[heap], used = bp.heapUsage[heap];
        d->budget_bytes = b > used ? b - used : 0;
        d->budget_from_ext = true;
    }
}

static void query_caps(VkInstance inst, VkPhysicalDevice pd, dev_caps *c)
{
    memset(c, 0, sizeof *c);
    vk_device_info *d = &c->info;
    d->usable = true;

    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT scp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV smp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    bool sm_ext = has_ext(pd, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    c->size_control_ext = has_ext(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    sg.pNext = &m3;
    m3.pNext = &scp;
    scp.pNext = sm_ext ? &smp : NULL;
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    /* the driver's identity: core in 1.2, else its extension */
    bool driver_props = VK_API_VERSION_MINOR(base.apiVersion) >= 2 || VK_API_VERSION_MAJOR(base.apiVersion) > 1 ||
                        has_ext(pd, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
    if (driver_props) { /* at the chain's end: after smp where it is chained */
        if (sm_ext)
            smp.pNext = &drv;
        else
            scp.pNext = &drv;
    }
    /* integer dot products: core in 1.3 (their properties struct chained
     * first, where the device knows it) */
    bool api13 = (VK_API_VERSION_MINOR(base.apiVersion) >= 3 || VK_API_VERSION_MAJOR(base.apiVersion) > 1) &&
                 VK_API_VERSION_MINOR(shared_api) >= 3;   /* the instance's version too (shared_lock not
                                                              needed: set before any instance is handed out) */
    VkPhysicalDeviceShaderIntegerDotProductProperties idp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES, .pNext = &sg};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = api13 ? (void *)&idp : (void *)&sg};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    const VkPhysicalDeviceProperties *p = &p2.properties;
    c->mesa = driver_props && is_mesa_driver(drv.driverID);

    snprintf(d->name, sizeof d->name, "%s", p->deviceName);
    d->kind = kind_name(p->deviceType);
    d->api_major = VK_API_VERSION_MAJOR(p->apiVersion);
    d->api_minor = VK_API_VERSION_MINOR(p->apiVersion);
    d->subgroup_size = sg.subgroupSize;
    d->max_alloc_bytes = m3.maxMemoryAllocationSize;
    d->max_range_bytes = p->limits.maxStorageBufferRange;
    d->shared_bytes = p->limits.maxComputeSharedMemorySize;
    c->sm_count = sm_ext ? smp.shaderSMCount : 0;

    query_budget(pd, d);

    /* Features (1.1 core structs + extension structs). */
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT scf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceVulkanMemoryModelFeatures vmm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cmf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    c->coopmat_ext = has_ext(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    bool sc_any = c->size_control_ext || d->api_minor >= 3;
    f16.pNext = &s16;
    s16.pNext = &vmm;
    vmm.pNext = sc_any ? (void *)&scf : NULL;
    if (c->coopmat_ext) {
        if (sc_any)
            scf.pNext = &cmf;
        else
            vmm.pNext = &cmf;
    }
    /* timeline semaphores (core 1.2; the struct is chained only where the
     * device knows it) */
    VkPhysicalDeviceTimelineSemaphoreFeatures tsf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES,
                                                     .pNext = &f16};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = d->api_minor >= 2 || d->api_major > 1 ? (void *)&tsf : (void *)&f16};
    VkPhysicalDeviceShaderIntegerDotProductFeatures idf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, .pNext = f2.pNext};
    if (api13)
        f2.pNext = &idf;
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (api13)
        f2.pNext = idf.pNext;
    c->idot = api13 && idf.shaderIntegerDotProduct;
    c->idot_fast = c->idot && idp.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
    d->idot_fast = c->idot_fast;
    c->timeline = f2.pNext == &tsf && tsf.timelineSemaphore;
    c->dyn_index = f2.features.shaderStorageBufferArrayDynamicIndexing;
    c->float16 = f16.shaderFloat16;
    c->storage16 = s16.storageBuffer16BitAccess;
    c->vmm = vmm.vulkanMemoryModel;
    bool sc_ok = sc_any && scf.subgroupSizeControl && scf.computeFullSubgroups &&
                 (scp.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
    c->size_control_core = sc_ok && d->api_minor >= 3;
    if (!sc_ok)
        c->size_control_ext = false;

    bool ts = false;
    c->family = compute_family(pd, &ts);

    /* What glmchat requires, one entry per missing feature. */
    if (d->api_major == 1 && d->api_minor < 1)
        add_missing(d, "Vulkan 1.1");
    if (c->family == UINT32_MAX)
        add_missing(d, "a compute queue");
    if (!ts || p->limits.timestampPeriod <= 0)
        add_missing(d, "timestamp queries on the compute queue");
    if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
        add_missing(d, "subgroup operations in compute shaders");
    if (!(sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT))
        add_missing(d, "basic subgroup operations");
    if (!(sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT))
        add_missing(d, "subgroup arithmetic");
    if (!(sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT))
        add_missing(d, "subgroup shuffle");
    /* the sampler's kernels and the router's choice of experts */
    if (!(sg.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT))
        add_missing(d, "subgroup ballot");
    if (!(sg.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT))
        add_missing(d, "subgroup vote");
    if (sg.subgroupSize < 4 || sg.subgroupSize > 128 || (sg.subgroupSize & (sg.subgroupSize - 1)))
        add_missing(d, "a power-of-two subgroup size between 4 and 128");
    if (p->limits.maxComputeWorkGroupInvocations < 256 || p->limits.maxComputeWorkGroupSize[0] < 256)
        add_missing(d, "256-invocation workgroups");
    if (p->limits.maxComputeSharedMemorySize < 16384)
        add_missing(d, "16 KiB of shared memory");
    if (!c->dyn_index)
        add_missing(d, "shaderStorageBufferArrayDynamicIndexing");
    if (p->limits.maxPushConstantsSize < 128)
        add_missing(d, "128 bytes of push constants");

    d->coopmat = c->coopmat_ext && cmf.cooperativeMatrix && c->float16 && c->storage16 && c->vmm &&
                 d->subgroup_size == 32 && coopmat_fp16_16(inst, pd);
}

int vk_list_devices(vk_device_info *out, uint32_t *n, int *best, err_t *err)
{
    VkInstance inst;
    uint32_t api;
    *n = 0;
    *best = -1;
    if (get_instance(&inst, &api, err))
        return -1;
    uint32_t count = 0;
    VkResult r = vkEnumeratePhysicalDevices(inst, &count, NULL);
    VkPhysicalDevice pds[VK_MAX_DEVICES];
    if (count > VK_MAX_DEVICES)
        count = VK_MAX_DEVICES;
    if (r == VK_SUCCESS && count)
        r = vkEnumeratePhysicalDevices(inst, &count, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return vk_fail(NULL, err, r, "vkEnumeratePhysicalDevices");
    int best_rank = 99;
    for (uint32_t i = 0; i < count; i++) {
        dev_caps c;
        query_caps(inst, pds[i], &c);
        out[i] = c.info;
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        if (c.info.usable && kind_rank(p.deviceType) < best_rank) {
            best_rank = kind_rank(p.deviceType);
            *best = (int)i;
        }
    }
    *n = count;
    return 0;
}

bool vk_available(void)
{
    vk_device_info d[VK_MAX_DEVICES];
    uint32_t n;
    int best;
    err_t e;
    return vk_list_devices(d, &n, &best, &e) == 0 && best >= 0;
}

/* ---- logical device ----------------------------------------------------------- */

static int pick_device(vk_ctx *c, int device_index, dev_caps *caps, err_t *err)
{
    uint32_t count = 0;
    VkResult r = vkEnumeratePhysicalDevices(c->instance, &count, NULL);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkEnumeratePhysicalDevices");
    if (count == 0)
        return err_set(err, "no Vulkan device found (install a driver, e.g. mesa-vulkan-drivers, or use --backend cpu)");
    VkPhysicalDevice pds[VK_MAX_DEVICES];
    if (count > VK_MAX_DEVICES)
        count = VK_MAX_DEVICES;
    r = vkEnumeratePhysicalDevices(c->instance, &count, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return vk_fail(c, err, r, "vkEnumeratePhysicalDevices");
    if (device_index >= 0) {
        if ((uint32_t)device_index >= count)
            return err_set(err, "--device %d: there are only %u Vulkan devices (see `glmchat devices`)",
                           device_index, count);
        query_caps(c->instance, pds[device_index], caps);
        if (!caps->info.usable)
            return err_set(err, "Vulkan device %d (%s) lacks: %s", device_index, caps->info.name,
                           caps->info.missing);
        c->pdev = pds[device_index];
        return 0;
    }
    int best = -1, best_rank = 99;
    char why[1024] = "";
    for (uint32_t i = 0; i < count; i++) {
        dev_caps dc;
        query_caps(c->instance, pds[i], &dc);
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        if (!dc.info.usable) {
            size_t len = strlen(why);
            if (len + strlen(dc.info.name) + strlen(dc.info.missing) + 10 < sizeof why)
                snprintf(why + len, sizeof why - len, "%s%.200s lacks %.250s", len ? "; " : "", dc.info.name,
                         dc.info.missing);
            continue;
        }
        if (kind_rank(p.deviceType) < best_rank) {
            best_rank = kind_rank(p.deviceType);
            best = (int)i;
            *caps = dc;
        }
    }
    if (best < 0)
        return err_set(err, "no usable Vulkan device: %s", why);
    c->pdev = pds[best];
    return 0;
}

static int make_device(vk_ctx *c, const dev_caps *caps, bool pipe_stats, err_t *err)
{
    const char *exts[5];
    uint32_t n_ext = 0;
    bool stats = pipe_stats && has_ext(c->pdev, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    if (stats)
        exts[n_ext++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    bool sc = caps->size_control_ext || caps->size_control_core;
    if (caps->size_control_ext && !caps->size_control_core)
        exts[n_ext++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
    if (caps->info.coopmat)
        exts[n_ext++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;

    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT scf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT,
        .subgroupSizeControl = VK_TRUE,
        .computeFullSubgroups = VK_TRUE};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
                                                      .shaderFloat16 = VK_TRUE};
    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
                                               .storageBuffer16BitAccess = VK_TRUE};
    VkPhysicalDeviceVulkanMemoryModelFeatures vmm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
                                                    .vulkanMemoryModel = VK_TRUE};
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cmf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
                                                       .cooperativeMatrix = VK_TRUE};
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pef = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE};
    void *chain = NULL;
    if (stats) {
        pef.pNext = chain;
        chain = &pef;
    }
    if (sc) {
        scf.pNext = chain;
        chain = &scf;
    }
    if (caps->info.coopmat) {
        f16.pNext = &s16;
        s16.pNext = &vmm;
        vmm.pNext = &cmf;
        cmf.pNext = chain;
        chain = &f16;
    }
    VkPhysicalDeviceTimelineSemaphoreFeatures tsf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES,
                                                     .timelineSemaphore = VK_TRUE};
    if (caps->timeline) {
        tsf.pNext = chain;
        chain = &tsf;
    }
    VkPhysicalDeviceShaderIntegerDotProductFeatures idf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .shaderIntegerDotProduct = VK_TRUE};
    if (caps->idot) {
        idf.pNext = chain;
        chain = &idf;
    }
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = chain};
    f2.features.shaderStorageBufferArrayDynamicIndexing = VK_TRUE;

    float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = caps->family,
                                 .queueCount = 1,
                                 .pQueuePriorities = &prio};
    VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f2,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &q,
                             .enabledExtensionCount = n_ext,
                             .ppEnabledExtensionNames = exts};
    VkResult r = vkCreateDevice(c->pdev, &ci, NULL, &c->dev);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkCreateDevice");
    c->size_control = sc;
    c->coopmat = caps->info.coopmat;
    c->pipe_stats = stats;
    c->timeline = caps->timeline;
    c->mesa_driver = caps->mesa;
    c->idot = caps->idot;
    c->idot_fast = caps->idot_fast;
    c->queue_family = caps->family;
    vkGetDeviceQueue(c->dev, caps->family, 0, &c->queue);
    return 0;
}

/* The tables into the unused-binding buffer: one vkCmdUpdateBuffer (21 KiB,
 * within its 64 KiB), made visible to every later compute shader. */
static int fill_tables(vk_ctx *c, err_t *err)
{
    _Static_assert(PC_IQ_TABLES_WORDS * 4 <= 65536, "vkCmdUpdateBuffer takes at most 64 KiB");
    uint32_t *words = malloc(PC_IQ_TABLES_WORDS * 4);
    if (!words)
        return err_set(err, "out of host memory");
    vk_iq_tables_fill(words);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = c->cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkCommandBuffer cb;
    VkResult r = vkAllocateCommandBuffers(c->dev, &ai, &cb);
    if (r != VK_SUCCESS) {
        free(words);
        return vk_fail(c, err, r, "vkAllocateCommandBuffers");
    }
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = vkBeginCommandBuffer(cb, &bi);
    int rc = r == VK_SUCCESS ? 0 : vk_fail(c, err, r, "vkBeginCommandBuffer");
    if (!rc) {
        vkCmdUpdateBuffer(cb, c->dummy_buf, 0, PC_IQ_TABLES_WORDS * 4, words);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                             NULL, 0, NULL);
        r = vkEndCommandBuffer(cb);
        rc = r == VK_SUCCESS ? vk_submit_wait(c, cb, err) : vk_fail(c, err, r, "vkEndCommandBuffer");
    }
    vkFreeCommandBuffers(c->dev, c->cmd_pool, 1, &cb);
    free(words);
    return rc;
}

static int make_shared_objects(vk_ctx *c, err_t *err)
{
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = c->queue_family};
    VkResult r = vkCreateCommandPool(c->dev, &pci, NULL, &c->cmd_pool);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkCreateCommandPool");

    VkDescriptorSetLayoutBinding b[1 + VKC_NBIND];
    b[0] = (VkDescriptorSetLayoutBinding){.binding = 0,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = VKC_WSLOTS,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    for (uint32_t i = 1; i <= VKC_NBIND; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = 1 + VKC_NBIND,
                                           .pBindings = b};
    r = vkCreateDescriptorSetLayout(c->dev, &dci, NULL, &c->set_layout);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = VKC_PUSH_WORDS * 4};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &c->set_layout,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &pr};
    r = vkCreatePipelineLayout(c->dev, &lci, NULL, &c->pipe_layout);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkCreatePipelineLayout");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = vkCreateFence(c->dev, &fci, NULL, &c->fence);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkCreateFence");

    /* A small device buffer bound wherever a kernel leaves a binding unused:
     * it holds the low-bit types' tables, which kernels read from weight
     * slot PC_IQ_TABLES_SLOT (no kernel binds a tensor there). */
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = PC_IQ_TABLES_WORDS * 4,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    r = vkCreateBuffer(c->dev, &bci, NULL, &c->dummy_buf);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(c->dev, c->dummy_buf, &req);
    uint32_t type = UINT32_MAX;
    /* device-local where there is such a type (every workgroup of a low-bit
     * kernel reads its table from it) */
    for (uint32_t i = 0; i < c->mem.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) &&
            (c->mem.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
            type = i;
    for (uint32_t i = 0; i < c->mem.memoryTypeCount && type == UINT32_MAX; i++)
        if (req.memoryTypeBits & (1u << i))
            type = i;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    r = vkAllocateMemory(c->dev, &ai, NULL, &c->dummy_mem);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkAllocateMemory");
    r = vkBindBufferMemory(c->dev, c->dummy_buf, c->dummy_mem, 0);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkBindBufferMemory");
    return fill_tables(c, err);
}

int vk_ctx_create(vk_ctx *c, int device_index, bool pipe_stats, err_t *err)
{
    memset(c, 0, sizeof *c);
    uint32_t api;
    if (get_instance(&c->instance, &api, err))
        return -1;
    dev_caps caps;
    if (pick_device(c, device_index, &caps, err)) {
        vk_ctx_destroy(c);
        return -1;
    }
    if (VK_API_VERSION_MAJOR(api) == 1 && VK_API_VERSION_MINOR(api) < 2)
        caps.timeline = false; /* the instance's version caps the device's */
    if (make_device(c, &caps, pipe_stats, err)) {
        vk_ctx_destroy(c);
        return -1;
    }
    if (c->timeline) {
        /* by address: a loader older than 1.2 does not export them */
        c->signal_semaphore = (PFN_vkSignalSemaphore)vkGetDeviceProcAddr(c->dev, "vkSignalSemaphore");
        c->semaphore_value = (PFN_vkGetSemaphoreCounterValue)vkGetDeviceProcAddr(c->dev, "vkGetSemaphoreCounterValue");
        c->wait_semaphores = (PFN_vkWaitSemaphores)vkGetDeviceProcAddr(c->dev, "vkWaitSemaphores");
        c->timeline = c->signal_semaphore && c->semaphore_value && c->wait_semaphores;
    }
    vkGetPhysicalDeviceProperties(c->pdev, &c->props);
    vkGetPhysicalDeviceMemoryProperties(c->pdev, &c->mem);
    c->info = caps.info;
    c->subgroup = caps.info.subgroup_size;
    c->dev_cap = UINT64_MAX;
    c->max_alloc = caps.info.max_alloc_bytes ? caps.info.max_alloc_bytes : (1ull << 30);
    c->max_range = c->props.limits.maxStorageBufferRange;
    c->align = c->props.limits.minStorageBufferOffsetAlignment;
    if (c->align < 256)
        c->align = 256; /* also keeps every tensor uvec4- and cache-line-aligned */
    c->shared_bytes = c->props.limits.maxComputeSharedMemorySize;
    for (int i = 0; i < 3; i++)
        c->max_groups[i] = c->props.limits.maxComputeWorkGroupCount[i];
    c->ts_period_ns = c->props.limits.timestampPeriod;
    if (caps.sm_count)
        c->n_sm_hint = caps.sm_count;
    else
        c->n_sm_hint = c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 4 : 64;
    if (make_shared_objects(c, err)) {
        vk_ctx_destroy(c);
        return -1;
    }
    return 0;
}

void vk_ctx_destroy(vk_ctx *c)
{
    if (c->dev) {
        vkDeviceWaitIdle(c->dev);
        if (c->dummy_buf)
            vkDestroyBuffer(c->dev, c->dummy_buf, NULL);
        if (c->dummy_mem)
            vkFreeMemory(c->dev, c->dummy_mem, NULL);
        if (c->fence)
            vkDestroyFence(c->dev, c->fence, NULL);
        if (c->pipe_layout)
            vkDestroyPipelineLayout(c->dev, c->pipe_layout, NULL);
        if (c->set_layout)
            vkDestroyDescriptorSetLayout(c->dev, c->set_layout, NULL);
        if (c->cmd_pool)
            vkDestroyCommandPool(c->dev, c->cmd_pool, NULL);
        vkDestroyDevice(c->dev, NULL);
    }
    /* c->instance is the process's (get_instance): kept */
    memset(c, 0, sizeof *c);
}

int vk_submit(vk_ctx *c, VkCommandBuffer cb, err_t *err)
{
    if (c->lost)
        return err_set(err, "the Vulkan device was lost earlier; restart glmchat or use --backend cpu");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    VkResult r = vkQueueSubmit(c->queue, 1, &si, VK_NULL_HANDLE);
    return r == VK_SUCCESS ? 0 : vk_fail(c, err, r, "vkQueueSubmit");
}

int vk_submit_on(vk_ctx *c, VkCommandBuffer cb, VkFence fence, err_t *err)
{
    if (c->lost)
        return err_set(err, "the Vulkan device was lost earlier; restart glmchat or use --backend cpu");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    VkResult r = vkResetFences(c->dev, 1, &fence);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkResetFences");
    r = vkQueueSubmit(c->queue, 1, &si, fence);
    return r == VK_SUCCESS ? 0 : vk_fail(c, err, r, "vkQueueSubmit");
}

int vk_submit_fenced(vk_ctx *c, VkCommandBuffer cb, err_t *err)
{
    return vk_submit_on(c, cb, c->fence, err);
}

int vk_wait_on(vk_ctx *c, VkFence fence, uint64_t spin_ns, err_t *err)
{
    VkResult r = VK_NOT_READY;
    const char *call = "vkGetFenceStatus";
    if (spin_ns) {
        /* Polled: a blocking wait returns only after the driver's thread
         * wakes this one (tens of us on some drivers), on the path of
         * every host layer (vk_hostmoe.c).  The clock is read every few
         * hundred polls; a yield now and then keeps a loaded machine going. */
        uint64_t until = mono_ns() + spin_ns;
        for (uint32_t i = 1; (r = vkGetFenceStatus(c->dev, fence)) == VK_NOT_READY; i++) {
            spin_pause();
            if (i % 256 == 0) {
                if (mono_ns() >= until)
                    break;
                sched_yield();
            }
        }
    }
    if (r == VK_NOT_READY) {
        /* A GPU finishes a prompt chunk in well under a second, so two
         * minutes without completion is a hang; a CPU implementation
         * (lavapipe) may legitimately take minutes over a long prompt. */
        uint64_t limit_s = c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 1800 : 120;
        call = "vkWaitForFences";
        r = vkWaitForFences(c->dev, 1, &fence, VK_TRUE, limit_s * 1000 * 1000 * 1000);
        if (r == VK_TIMEOUT) {
            c->lost = true;
            return err_set(err, "the Vulkan device did not finish a command buffer within %llu s (GPU hang)",
                           (unsigned long long)limit_s);
        }
    }
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, call);
    return 0;
}

int vk_fence_wait(vk_ctx *c, uint64_t spin_ns, err_t *err)
{
    return vk_wait_on(c, c->fence, spin_ns, err);
}

int vk_submit_wait(vk_ctx *c, VkCommandBuffer cb, err_t *err)
{
    return vk_submit_fenced(c, cb, err) ? -1 : vk_fence_wait(c, 0, err);
}
