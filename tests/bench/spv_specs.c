/* spv_specs.c: an LD_PRELOAD library that writes every compute pipeline a
 * Vulkan program creates as one line "SHADER ID:VALUE ..." (its module
 * named by the .spv file of $SPV_SPECS_DIR with the same bytes, else by
 * its FNV-1a hash) to $SPV_SPECS_LOG: the specializations
 * tests/bench/spv_same.sh compares.  A developer's tool (not built by
 * make):
 *   cc -shared -fPIC -o build/spv_specs.so tests/bench/spv_specs.c -ldl
 *   for t in build/rel/tests/test_vk_*; do SPV_SPECS_DIR=build/spv \
 *     SPV_SPECS_LOG=build/specs.txt LD_PRELOAD=$PWD/build/spv_specs.so $t; done */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

enum { MAX_MODULES = 4096, MAX_FILES = 256 };
static struct {
    VkShaderModule m;
    unsigned long long h;
} mods[MAX_MODULES];
static int nmods;
static struct {
    char name[64];
    unsigned long long h;
} files[MAX_FILES];
static int nfiles = -1;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned long long fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The hashes of the .spv files of $SPV_SPECS_DIR, once. */
static void load_files(void)
{
    const char *dir = getenv("SPV_SPECS_DIR");
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    nfiles = 0;
    while (d && (e = readdir(d)) && nfiles < MAX_FILES) {
        size_t n = strlen(e->d_name);
        if (n < 5 || n - 4 >= sizeof files[0].name || strcmp(e->d_name + n - 4, ".spv"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        static unsigned char buf[1 << 22];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        memcpy(files[nfiles].name, e->d_name, n - 4);
        files[nfiles].name[n - 4] = 0;
        files[nfiles++].h = fnv1a(buf, len);
    }
    if (d)
        closedir(d);
}

VKAPI_ATTR VkResult VKAPI_CALL vkCreateShaderModule(VkDevice dev, const VkShaderModuleCreateInfo *ci,
                                                    const VkAllocationCallbacks *a, VkShaderModule *out)
{
    PFN_vkCreateShaderModule real = (PFN_vkCreateShaderModule)dlsym(RTLD_NEXT, "vkCreateShaderModule");
    VkResult r = real(dev, ci, a, out);
    pthread_mutex_lock(&mu);
    if (r == VK_SUCCESS && nmods < MAX_MODULES)
        mods[nmods].m = *out, mods[nmods++].h = fnv1a(ci->pCode, ci->codeSize);
    pthread_mutex_unlock(&mu);
    return r;
}

VKAPI_ATTR VkResult VKAPI_CALL vkCreateComputePipelines(VkDevice dev, VkPipelineCache cache, uint32_t n,
                                                        const VkComputePipelineCreateInfo *ci,
                                                        const VkAllocationCallbacks *a, VkPipeline *out)
{
    PFN_vkCreateComputePipelines real = (PFN_vkCreateComputePipelines)dlsym(RTLD_NEXT, "vkCreateComputePipelines");
    const char *log = getenv("SPV_SPECS_LOG");
    pthread_mutex_lock(&mu);
    if (nfiles < 0)
        load_files();
    FILE *f = log ? fopen(log, "a") : NULL;
    for (uint32_t i = 0; f && i < n; i++) {
        unsigned long long h = 0;
        for (int k = nmods - 1; k >= 0 && !h; k--)
            if (mods[k].m == ci[i].stage.module)
                h = mods[k].h;
        int fi = 0;
        while (fi < nfiles && files[fi].h != h)
            fi++;
        if (fi < nfiles)
            fprintf(f, "%s", files[fi].name);
        else
            fprintf(f, "%016llx", h);
        const VkSpecializationInfo *si = ci[i].stage.pSpecializationInfo;
        for (uint32_t e = 0; si && e < si->mapEntryCount; e++) {
            uint32_t v;
            memcpy(&v, (const char *)si->pData + si->pMapEntries[e].offset, 4);
            fprintf(f, " %u:%u", si->pMapEntries[e].constantID, v);
        }
        fputc('\n', f);
    }
    if (f)
        fclose(f);
    pthread_mutex_unlock(&mu);
    return real(dev, cache, n, ci, a, out);
}
