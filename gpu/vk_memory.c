/* vk_memory.c: device memory in blocks, and the staging ring that fills it.
 *
 * Blocks are at most maxMemoryAllocationSize; every sub-allocation is at
 * most maxStorageBufferRange (so any tensor can be bound whole) and aligned
 * to the device's storage-buffer offset alignment.  The same packing rule is
 * available as a dry run (vk_arena_plan) so a model that does not fit is
 * refused, with the numbers, before anything is uploaded. */
#include <stdlib.h>
#include <string.h>

#include "vk_core.h"

#define MiB (1024.0 * 1024.0)

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static uint32_t find_type(const vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags nice)
{
    uint32_t fallback = UINT32_MAX;
    for (uint32_t i = 0; i < c->mem.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = c->mem.memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & want) != want)
            continue;
        if ((f & nice) == nice)
            return i;
        if (fallback == UINT32_MAX)
            fallback = i;
    }
    return fallback;
}

void vk_arena_init(vk_ctx *c, vk_arena *a, int kind, uint64_t block_size, const char *what)
{
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->host = kind != VK_MEM_DEVICE;
    a->what = what;
    a->block_size = block_size < c->max_alloc ? block_size : c->max_alloc;
}

static uint64_t block_size_for(uint64_t preferred, uint64_t max_alloc, uint64_t need)
{
    uint64_t s = preferred < max_alloc ? preferred : max_alloc;
    return need > s ? need : s;
}

uint64_t vk_arena_plan(const vk_ctx *c, uint64_t block_size, const uint64_t *sizes, uint64_t n,
                       uint64_t *block_used, uint32_t *n_blocks, uint32_t max_blocks)
{
    /* First fit over the blocks opened so far, as vk_arena_alloc does; each
     * block is then made exactly as large as what it holds. */
    uint64_t nb = 0, total = 0;
    uint64_t bs = block_size < c->max_alloc ? block_size : c->max_alloc;
    uint64_t *used = calloc(n ? n : 1, sizeof *used);
    if (!used)
        return UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t s = align_up(sizes[i] ? sizes[i] : 1, c->align);
        uint64_t b = 0;
        while (b < nb && used[b] + s > (used[b] > bs ? used[b] : bs))
            b++;
        if (b == nb)
            nb++;
        used[b] += s;
    }
    for (uint64_t b = 0; b < nb; b++) {
        total += used[b];
        if (block_used && b < max_blocks)
            block_used[b] = used[b];
    }
    if (n_blocks)
        *n_blocks = (uint32_t)nb;
    free(used);
    return total;
}

static int new_block(vk_ctx *c, vk_arena *a, uint64_t size, const char *name, err_t *err)
{
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? a->cap * 2 : 16;
        vk_block *nb = realloc(a->blocks, cap * sizeof *nb);
        if (!nb)
            return err_set(err, "out of host memory");
        a->blocks = nb;
        a->cap = cap;
    }
    vk_block *b = &a->blocks[a->n];
    memset(b, 0, sizeof *b);
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT};
    VkResult r = vkCreateBuffer(c->dev, &bci, NULL, &b->buf);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(c->dev, b->buf, &req);
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = a->kind == VK_MEM_HOST     ? find_type(c, req.memoryTypeBits, hv, VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
                    : a->kind == VK_MEM_UPLOAD ? find_type(c, req.memoryTypeBits, hv, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
                                               : find_type(c, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (type == UINT32_MAX) {
        vkDestroyBuffer(c->dev, b->buf, NULL);
        return err_set(err, "Vulkan: no %s memory type for %s", a->host ? "host-visible" : "device-local", name);
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    /* the cap counts what is asked for (the sizes the fit check planned),
     * not the driver's rounding of it */
    bool capped = !a->host && c->dev_cap != UINT64_MAX && c->dev_held + size > c->dev_cap;
    r = capped ? VK_ERROR_OUT_OF_DEVICE_MEMORY : vkAllocateMemory(c->dev, &ai, NULL, &b->mem);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(c->dev, b->buf, NULL);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
            char held[96] = "";
            if (capped)
                snprintf(held, sizeof held, ", above --gpu-mem %.1f MiB with %.1f MiB held", c->dev_cap / MiB,
                         c->dev_held / MiB);
            return err_set(err, "out of %s memory: allocating %.1f MiB for %s (%s holds %.1f MiB%s; device-local "
                                "heap %.1f MiB); " VK_FIT_HINT,
                           a->host ? "host-visible" : "device", size / MiB, name, a->what, a->total / MiB, held,
                           c->info.device_local_bytes / MiB);
        }
        return vk_fail(c, err, r, "vkAllocateMemory");
    }
    r = vkBindBufferMemory(c->dev, b->buf, b->mem, 0);
    if (r == VK_SUCCESS && a->host)
        r = vkMapMemory(c->dev, b->mem, 0, VK_WHOLE_SIZE, 0, (void **)&b->map);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(c->dev, b->buf, NULL);
        vkFreeMemory(c->dev, b->mem, NULL);
        return vk_fail(c, err, r, a->host ? "vkMapMemory" : "vkBindBufferMemory");
    }
    b->size = size;
    a->total += req.size;
    if (!a->host)
        c->dev_held += size;
    a->n++;
    return 0;
}

int vk_arena_alloc(vk_ctx *c, vk_arena *a, uint64_t size, const char *name, vk_buf *out, err_t *err)
{
    if (size > c->max_range)
        return err_set(err, "%s needs %.1f MiB in one buffer, above this device's maxStorageBufferRange (%.1f MiB)",
                       name, size / MiB, c->max_range / MiB);
    if (size > c->max_alloc)
        return err_set(err, "%s needs %.1f MiB in one allocation, above this device's maxMemoryAllocationSize (%.1f MiB)",
                       name, size / MiB, c->max_alloc / MiB);
    uint64_t s = align_up(size ? size : 1, c->align);
    uint32_t b = 0;
    while (b < a->n && a->blocks[b].used + s > a->blocks[b].size)
        b++;
    if (b == a->n && new_block(c, a, block_size_for(a->block_size, c->max_alloc, s), name, err))
        return -1;
    vk_block *blk = &a->blocks[b];
    out->buf = blk->buf;
    out->off = blk->used;
    out->size = size ? size : 1;
    out->map = blk->map ? blk->map + blk->used : NULL;
    blk->used += s;
    return 0;
}

int vk_arena_reserve(vk_ctx *c, vk_arena *a, const uint64_t *sizes, uint64_t n, err_t *err)
{
    uint32_t nb = 0;
    if (vk_arena_plan(c, a->block_size, sizes, n, NULL, &nb, 0) == UINT64_MAX)
        return err_set(err, "out of host memory");
    uint64_t *bu = calloc(nb ? nb : 1, sizeof *bu);
    if (!bu)
        return err_set(err, "out of host memory");
    vk_arena_plan(c, a->block_size, sizes, n, bu, &nb, nb);
    for (uint32_t b = 0; b < nb; b++)
        if (new_block(c, a, bu[b], a->what, err)) {
            free(bu);
            return -1;
        }
    free(bu);
    return 0;
}

void vk_arena_release(vk_ctx *c, vk_arena *a)
{
    for (uint32_t i = 0; i < a->n; i++) {
        if (a->blocks[i].map)
            vkUnmapMemory(c->dev, a->blocks[i].mem);
        vkDestroyBuffer(c->dev, a->blocks[i].buf, NULL);
        vkFreeMemory(c->dev, a->blocks[i].mem, NULL);
        if (!a->host)
            c->dev_held -= a->blocks[i].size < c->dev_held ? a->blocks[i].size : c->dev_held;
    }
    free(a->blocks);
    a->blocks = NULL;
    a->n = a->cap = 0;
    a->total = 0;
}

/* ---- staging ring ----------------------------------------------------------- */

#define UP_SLOTS 4

typedef struct {
    VkCommandBuffer cb;
    VkFence fence;
    uint64_t used;
    bool recording, pending;
} up_slot;

struct vk_uploader {
    vk_ctx *c;
    vk_arena arena;
    vk_buf ring;
    uint64_t slot_bytes;
    up_slot slot[UP_SLOTS];
    uint32_t cur;
};

int vk_uploader_new(vk_ctx *c, uint64_t ring_bytes, vk_uploader **out, err_t *err)
{
    vk_uploader *u = calloc(1, sizeof *u);
    if (!u)
        return err_set(err, "out of host memory");
    u->c = c;
    if (ring_bytes > c->max_range)
        ring_bytes = c->max_range;
    u->slot_bytes = ring_bytes / UP_SLOTS / 256 * 256;
    vk_arena_init(c, &u->arena, VK_MEM_HOST, ring_bytes, "the staging ring");
    if (vk_arena_alloc(c, &u->arena, u->slot_bytes * UP_SLOTS, "the staging ring", &u->ring, err)) {
        vk_uploader_free(u);
        return -1;
    }
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = c->cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    for (int i = 0; i < UP_SLOTS; i++) {
        VkResult r = vkAllocateCommandBuffers(c->dev, &ai, &u->slot[i].cb);
        if (r == VK_SUCCESS)
            r = vkCreateFence(c->dev, &fci, NULL, &u->slot[i].fence);
        if (r != VK_SUCCESS) {
            vk_uploader_free(u);
            return vk_fail(c, err, r, "staging ring setup");
        }
    }
    *out = u;
    return 0;
}

uint64_t vk_uploader_slot_bytes(const vk_uploader *u)
{
    return u->slot_bytes;
}

static int slot_wait(vk_uploader *u, up_slot *s, err_t *err)
{
    if (!s->pending)
        return 0;
    VkResult r = vkWaitForFences(u->c->dev, 1, &s->fence, VK_TRUE, 60ull * 1000 * 1000 * 1000);
    if (r == VK_SUCCESS)
        r = vkResetFences(u->c->dev, 1, &s->fence);
    s->pending = false;
    if (r != VK_SUCCESS)
        return vk_fail(u->c, err, r, "weight upload");
    return 0;
}

static int slot_flush(vk_uploader *u, up_slot *s, err_t *err)
{
    if (!s->recording)
        return 0;
    s->recording = false;
    VkResult r = vkEndCommandBuffer(s->cb);
    if (r != VK_SUCCESS)
        return vk_fail(u->c, err, r, "vkEndCommandBuffer (upload)");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &s->cb};
    r = vkQueueSubmit(u->c->queue, 1, &si, s->fence);
    if (r != VK_SUCCESS)
        return vk_fail(u->c, err, r, "vkQueueSubmit (upload)");
    s->pending = true;
    return 0;
}

void *vk_upload_map(vk_uploader *u, const vk_buf *dst, uint64_t dst_off, uint64_t size, err_t *err)
{
    if (size > u->slot_bytes || dst_off + size > dst->size) {
        err_set(err, "internal: upload of %llu bytes at %llu does not fit (slot %llu, buffer %llu)",
                (unsigned long long)size, (unsigned long long)dst_off, (unsigned long long)u->slot_bytes,
                (unsigned long long)dst->size);
        return NULL;
    }
    up_slot *s = &u->slot[u->cur];
    if (s->recording && s->used + align_up(size, 16) > u->slot_bytes) {
        if (slot_flush(u, s, err))
            return NULL;
        u->cur = (u->cur + 1) % UP_SLOTS;
        s = &u->slot[u->cur];
    }
    if (!s->recording) {
        if (slot_wait(u, s, err))
            return NULL;
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        VkResult r = vkBeginCommandBuffer(s->cb, &bi);
        if (r != VK_SUCCESS) {
            vk_fail(u->c, err, r, "vkBeginCommandBuffer (upload)");
            return NULL;
        }
        s->recording = true;
        s->used = 0;
    }
    uint64_t src_off = u->ring.off + (uint64_t)u->cur * u->slot_bytes + s->used;
    if (size) {
        VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst->off + dst_off, .size = size};
        vkCmdCopyBuffer(s->cb, u->ring.buf, dst->buf, 1, &region);
    }
    void *p = u->ring.map + (uint64_t)u->cur * u->slot_bytes + s->used;
    s->used += align_up(size, 16);
    return p;
}

int vk_upload_bytes(vk_uploader *u, const vk_buf *dst, uint64_t dst_off, const void *src, uint64_t size, err_t *err)
{
    const uint8_t *p = src;
    while (size) {
        uint64_t n = size < u->slot_bytes ? size : u->slot_bytes;
        void *m = vk_upload_map(u, dst, dst_off, n, err);
        if (!m)
            return -1;
        memcpy(m, p, n);
        p += n;
        dst_off += n;
        size -= n;
    }
    return 0;
}

int vk_uploader_finish(vk_uploader *u, err_t *err)
{
    if (slot_flush(u, &u->slot[u->cur], err))
        return -1;
    for (int i = 0; i < UP_SLOTS; i++)
        if (slot_wait(u, &u->slot[i], err))
            return -1;
    return 0;
}

void vk_uploader_free(vk_uploader *u)
{
    if (!u)
        return;
    vk_ctx *c = u->c;
    for (int i = 0; i < UP_SLOTS; i++) {
        if (u->slot[i].pending)
            vkWaitForFences(c->dev, 1, &u->slot[i].fence, VK_TRUE, UINT64_MAX);
        if (u->slot[i].fence)
            vkDestroyFence(c->dev, u->slot[i].fence, NULL);
        if (u->slot[i].cb)
            vkFreeCommandBuffers(c->dev, c->cmd_pool, 1, &u->slot[i].cb);
    }
    vk_arena_release(c, &u->arena);
    free(u);
}
