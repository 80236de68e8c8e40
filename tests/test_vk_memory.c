/* test_vk_memory.c: the Vulkan core's memory accounting (gpu/vk_memory.c,
 * the budget in gpu/vk_device.c): the budget read from the device, arenas
 * reserved exactly as planned, the --gpu-mem cap refusing a block the way
 * the driver's out-of-memory would, and out-of-memory results said as one
 * line of words with what to try, never the driver's code. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"
#include "vk_core.h"

#define MiB (1ull << 20)

static vk_ctx G;

/* One line, says what to try, no driver code. */
static void check_oom_line(const char *msg, const char *what)
{
    CHECK(strchr(msg, '\n') == NULL, "%s: more than one line: %s", what, msg);
    CHECK(strstr(msg, "VK_") == NULL, "%s: the driver's code: %s", what, msg);
    CHECK(strstr(msg, "--backend cpu") && strstr(msg, "--gpu-mem") && strstr(msg, "-c"),
          "%s: does not say what to try: %s", what, msg);
}

static void budget(void)
{
    const vk_device_info *d = &G.info;
    CHECK(d->device_local_bytes > 0, "no device-local heap");
    CHECK(d->budget_bytes > 0 && d->budget_bytes <= d->device_local_bytes, "budget %llu of a %llu-byte heap",
          (unsigned long long)d->budget_bytes, (unsigned long long)d->device_local_bytes);
    if (!d->budget_from_ext)
        CHECK(d->budget_bytes == d->device_local_bytes - vk_budget_margin(d->device_local_bytes),
              "without VK_EXT_memory_budget the budget is the heap less the margin");
    /* the margin: 1/32 + 256 MiB of a large heap, half of a small one */
    CHECK(vk_budget_margin(8ull << 30) == (256ull << 20) + (256ull << 20), "margin of 8 GiB");
    CHECK(vk_budget_margin(256 * MiB) == 128 * MiB, "margin of 256 MiB");
    printf("# %s: heap %.1f MiB, budget %.1f MiB (%s)\n", d->name, d->device_local_bytes / (double)MiB,
           d->budget_bytes / (double)MiB, d->budget_from_ext ? "VK_EXT_memory_budget" : "heap less a margin");
}

/* An arena reserved from a plan holds exactly the planned bytes, and the
 * same allocations then fit without a new block. */
static void reserve_matches_plan(void)
{
    const uint64_t sizes[] = {3 * MiB + 17, 1000, 700 * 1024, 5 * MiB, 1, 64 * 1024 + 3, 2 * MiB};
    const uint64_t n = sizeof sizes / sizeof sizes[0];
    uint32_t nb = 0;
    uint64_t planned = vk_arena_plan(&G, 4 * MiB, sizes, n, NULL, &nb, 0);
    vk_arena a;
    err_t err = {{0}};
    vk_arena_init(&G, &a, VK_MEM_DEVICE, 4 * MiB, "test arena");
    uint64_t held0 = G.dev_held;
    CHECK(vk_arena_reserve(&G, &a, sizes, n, &err) == 0, "reserve: %.300s", err.msg);
    CHECK(G.dev_held - held0 == planned, "held %llu after reserving a plan of %llu",
          (unsigned long long)(G.dev_held - held0), (unsigned long long)planned);
    CHECK(a.n == nb, "%u blocks for a plan of %u", a.n, nb);
    for (uint64_t i = 0; i < n; i++) {
        vk_buf b;
        CHECK(vk_arena_alloc(&G, &a, sizes[i], "piece", &b, &err) == 0, "alloc %llu: %.300s", (unsigned long long)i,
              err.msg);
    }
    CHECK(a.n == nb && G.dev_held - held0 == planned, "the planned allocations opened a block (%u of %u)", a.n, nb);
    vk_arena_release(&G, &a);
    CHECK(G.dev_held == held0, "held %llu after release", (unsigned long long)G.dev_held);
}

/* Past the cap a block is refused with the out-of-memory line; what is
 * held stays as it was, and a block within the cap still comes. */
static void cap_refuses(void)
{
    vk_arena a;
    err_t err = {{0}};
    vk_buf b;
    uint64_t held0 = G.dev_held;
    G.dev_cap = held0 + 3 * MiB;
    vk_arena_init(&G, &a, VK_MEM_DEVICE, 1 * MiB, "capped arena");
    CHECK(vk_arena_alloc(&G, &a, 2 * MiB, "first", &b, &err) == 0, "2 MiB under a 3 MiB cap: %.300s", err.msg);
    CHECK(vk_arena_alloc(&G, &a, 2 * MiB, "second", &b, &err) != 0, "4 MiB under a 3 MiB cap");
    check_oom_line(err.msg, "cap");
    CHECK(strstr(err.msg, "out of device memory") && strstr(err.msg, "second"), "names the allocation: %.300s",
          err.msg);
    CHECK(G.dev_held == held0 + 2 * MiB, "held %llu after a refusal", (unsigned long long)(G.dev_held - held0));
    CHECK(vk_arena_alloc(&G, &a, 1 * MiB, "third", &b, &err) == 0, "3 MiB under a 3 MiB cap: %.300s", err.msg);
    /* host-visible memory is not the device's: not under the cap */
    vk_arena h;
    vk_arena_init(&G, &h, VK_MEM_HOST, 4 * MiB, "host arena");
    CHECK(vk_arena_alloc(&G, &h, 4 * MiB, "host", &b, &err) == 0, "host memory under the cap: %.300s", err.msg);
    vk_arena_release(&G, &h);
    vk_arena_release(&G, &a);
    CHECK(G.dev_held == held0, "held %llu after release", (unsigned long long)(G.dev_held - held0));
    G.dev_cap = UINT64_MAX;
}

static void fail_words(void)
{
    const VkResult rs[] = {VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_HOST_MEMORY, VK_ERROR_OUT_OF_POOL_MEMORY};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
        err_t err = {{0}};
        CHECK(vk_fail(&G, &err, rs[i], "vkAllocateDescriptorSets") == -1, "vk_fail returns -1");
        check_oom_line(err.msg, "vk_fail");
        CHECK(strstr(err.msg, "out of") != NULL, "says out of memory: %.300s", err.msg);
    }
    CHECK(!G.lost, "out of memory is not device loss");
}

int main(void)
{
    err_t err = {{0}};
    if (vk_ctx_create(&G, -1, false, &err)) {
        printf("FAIL - vulkan device: %s\n", err.msg);
        return 1;
    }
    RUN(budget);
    RUN(reserve_matches_plan);
    RUN(cap_refuses);
    RUN(fail_words);
    vk_ctx_destroy(&G);
    TESTS_DONE();
}
