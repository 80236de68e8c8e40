/* vk_hostmoe_linked.c: the hand-over between the GPU's parts and the
 * CPU's experts (vk_hostmoe.c) -- the host's clock, how long the host polls
 * before it sleeps, and --tune hx=2: a token's parts linked by timeline
 * semaphores instead of a submit and a fence per part.
 *
 * Why the GPU may wait on the host here although vk_hostmoe.c avoids a
 * wait inside a command buffer: a timeline semaphore's wait is between
 * batches, on the queue, where no command buffer is running, and the spec
 * lets a batch be submitted before the value it waits for is signalled
 * (wait-before-signal); a host-set event must be set before the command
 * buffer waiting on it is submitted (vkSetEvent's note, "queue forward
 * progress").
 *
 * The host's sum reaches the GPU as follows: the host writes y (host
 * coherent), then signals "sum written" (vkSignalSemaphore, whose first
 * synchronization scope holds everything that happened-before it on the
 * host); the waiting part's batch waits for that value at the compute
 * stage, and the part begins with a barrier whose first scope holds the
 * host stage and HOST_WRITE (vk_hostmoe_cut.c), chained to that wait, which
 * makes the host's writes visible to the shaders that read y. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "vk_engine.h"
#include "base/spin.h"

/* The host's clock, in us. */
double vk_hostmoe_now_us(void)
{
    return (double)mono_ns() * 1e-3;
}

/* How long the host polls a part's fence before sleeping on it: beyond
 * the longest part on a GPU (the rest of the model after the last host
 * layer: a few ms); on a CPU device (lavapipe) briefly, since the polling
 * thread takes a core from the device's own threads. */
uint64_t vk_hostmoe_poll_ns(const vk_engine *e)
{
    if (e->tune.hx == 0)
        return 0;
    return e->c.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 200000 : 50000000;
}

/* One batch (cb) on the queue: waiting, where wait_v > 0, for the host's
 * "sum written" to reach wait_v; signalling the GPU's "part done" with
 * signal_v where > 0, the context's fence where `fence`. */
static int submit_linked(vk_engine *e, VkCommandBuffer cb, uint64_t wait_v, uint64_t signal_v, bool fence, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = wait_v ? 1 : 0,
                                        .pWaitSemaphoreValues = &wait_v,
                                        .signalSemaphoreValueCount = signal_v ? 1 : 0,
                                        .pSignalSemaphoreValues = &signal_v};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = &ti,
                       .waitSemaphoreCount = wait_v ? 1 : 0,
                       .pWaitSemaphores = &hx->sem_host,
                       .pWaitDstStageMask = &stage,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &cb,
                       .signalSemaphoreCount = signal_v ? 1 : 0,
                       .pSignalSemaphores = &hx->sem_gpu};
    VkResult r;
    if (fence && (r = vkResetFences(e->c.dev, 1, &e->c.fence)) != VK_SUCCESS)
        return vk_fail(&e->c, err, r, "vkResetFences");
    r = vkQueueSubmit(e->c.queue, 1, &si, fence ? e->c.fence : VK_NULL_HANDLE);
    return r == VK_SUCCESS ? 0 : vk_fail(&e->c, err, r, "vkQueueSubmit");
}

/* Until the GPU's "part done" reaches v: polled for spin_ns, then a
 * blocking wait (a hang is an error, as vk_fence_wait has it). */
static int wait_gpu(vk_engine *e, uint64_t v, uint64_t spin_ns, err_t *err)
{
    vk_ctx *c = &e->c;
    uint64_t got = 0, until = 0;
    for (uint32_t i = 0;; i++) {
        VkResult r = c->semaphore_value(c->dev, e->hx.sem_gpu, &got);
        if (r != VK_SUCCESS)
            return vk_fail(c, err, r, "vkGetSemaphoreCounterValue");
        if (got >= v)
            return 0;
        if (i % 256 == 0) {
            double t = vk_hostmoe_now_us();
            if (!until)
                until = (uint64_t)t + spin_ns / 1000;
            else if ((uint64_t)t >= until)
                break;
            sched_yield();
        }
        spin_pause();
    }
    uint64_t limit_s = c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 1800 : 120;
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &e->hx.sem_gpu,
                              .pValues = &v};
    VkResult r = c->wait_semaphores(c->dev, &wi, limit_s * 1000 * 1000 * 1000);
    if (r == VK_TIMEOUT) {
        c->lost = true;
        return err_set(err, "the Vulkan device did not finish a command buffer within %llu s (GPU hang)",
                       (unsigned long long)limit_s);
    }
    return r == VK_SUCCESS ? 0 : vk_fail(c, err, r, "vkWaitSemaphores");
}

static int signal_host(vk_engine *e, uint64_t v, err_t *err)
{
    VkSemaphoreSignalInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, .semaphore = e->hx.sem_host, .value = v};
    VkResult r = e->c.signal_semaphore(e->c.dev, &si);
    return r == VK_SUCCESS ? 0 : vk_fail(&e->c, err, r, "vkSignalSemaphore");
}

/* vk_hostmoe.c's run_parts with hx=2: every part and side part of the token submitted up
 * front, part p + 1 waiting on the queue for the host's "sum written" of
 * host layer p, which the host signals (vkSignalSemaphore) once the CPU's
 * sum is in y; the host polls the GPU's "part done" instead of a fence.
 * No submit and no fence reset between the router and the CPU or between
 * the sum and the next part.  Timeline semaphores may be waited on before
 * they are signalled (wait-before-signal), unlike a host-set event, which
 * must be set before the command buffer waiting on it is submitted.  On an
 * error the host still signals the last value, so the queue drains, and
 * waits for it before returning. */
int vk_hostmoe_run_linked(vk_engine *e, const vk_family *parts, const vk_family *last, const vk_family *sides,
                          uint32_t n, bool timed, vk_host_marks *hm, err_t *err)
{
    vk_hostmoe *hx = &e->hx;
    uint64_t spin = vk_hostmoe_poll_ns(e), g0 = hx->val_gpu, h0 = hx->val_host;
    memset(hm, 0, sizeof *hm);
    hm->first = vk_hostmoe_now_us();
    uint32_t submitted = 0;
    int rc = 0;
    for (uint32_t p = 0; p < hx->n_parts && !rc; p++) {
        const vk_family *f = p == hx->n_layers ? last : &parts[p];
        rc = submit_linked(e, (timed ? &f->full : &f->plain)->cb, p ? h0 + p : 0, p < hx->n_layers ? g0 + p + 1 : 0,
                           p == hx->n_layers, err);
        if (!rc)
            submitted = p + 1;
        if (!rc && p < hx->n_layers && sides && sides[p].plain.cb)
            rc = vk_submit(&e->c, (timed ? &sides[p].full : &sides[p].plain)->cb, err);
    }
    double t0 = hm->first;
    for (uint32_t p = 0; p < hx->n_layers && !rc; p++) {
        if ((rc = wait_gpu(e, g0 + p + 1, spin, err)))
            break;
        double t1 = vk_hostmoe_now_us();
        hm->wait += t1 - t0;
        if (p > 0)
            hm->turn += t0 - hm->seen;
        hm->seen = t1;
        uint32_t il = hx->layer[p];
        rc = cpu_moe_host_eval(hx->cpu, &e->m->layers[il], (const float *)hx->xn.map, (const int32_t *)hx->ids.map,
                               (const float *)hx->wts.map, n, (float *)hx->y.map, err);
        if (rc) {
            err_prefix(err, "layer %u's routed experts on the CPU", il);
            break;
        }
        hm->cpu += vk_hostmoe_now_us() - t1;
        t0 = vk_hostmoe_now_us();
        if ((rc = signal_host(e, h0 + p + 1, err)))
            break;
    }
    hx->val_gpu = g0 + hx->n_layers;
    hx->val_host = h0 + hx->n_layers;
    if (rc) { /* release whatever waits, then wait for what was submitted */
        err_t ignore = {{0}};
        if (submitted && !e->c.lost && !signal_host(e, hx->val_host, &ignore) && submitted == hx->n_parts)
            vk_fence_wait(&e->c, 0, &ignore);
        else if (submitted)
            vkQueueWaitIdle(e->c.queue);
        return -1;
    }
    if (vk_fence_wait(&e->c, spin, err))
        return -1;
    double t1 = vk_hostmoe_now_us();
    hm->wait += t1 - t0;
    if (hx->n_layers)
        hm->turn += t0 - hm->seen;
    hm->seen = t1;
    return 0;
}

