/* vk_hostmoe_cut.c: one part of a graph cut at the layers whose routed
 * experts are in host memory (vk_hostmoe.c says why and how they run).
 *
 * Why a file of its own: the graphs' recorders (vk_forward.c, vk_prefill.c)
 * call it, and vk_hostmoe.c calls the profiler that calls them; kept here,
 * the calls go one way (tests/t_layers.sh). */
#include "vk_engine.h"

/* Nodes [from, to) of g recorded into r as a graph of their own. */
static int record_nodes(vk_engine *e, vk_rec *r, const vk_graph *g, uint32_t from, uint32_t to)
{
    vk_graph pg;
    if (vk_graph_init(&pg, to - from + 1, r->err))
        return r->status = -1;
    for (uint32_t i = from; i < to; i++) /* copies pointing into g's operands, which outlive pg */
        vk_graph_add(&pg, &g->nodes[i]);
    int rc = pg.status ? -1 : vk_sync_record(&e->rec.sync, &pg, r);
    vk_graph_free(&pg);
    return rc;
}

int vk_hostmoe_record_part(vk_engine *e, vk_rec *r, const vk_graph *g, const uint32_t *cut, uint32_t part, bool side,
                           bool timed)
{
    const uint32_t n_layers = e->hx.n_layers;
    if (part > n_layers || (side && part == n_layers))
        return r->status = err_set(r->err, "internal: part %u of %u", part, n_layers + 1);
    uint32_t from = side ? cut[2 * part] : part ? cut[2 * part - 1] : 0;
    uint32_t to = side ? cut[2 * part + 1] : part < n_layers ? cut[2 * part] : g->n;
    /* the breakdown's marks (vk_hostmoe.c): a part's begin when the queue
     * reaches it, a side part's once the part before it has computed (it
     * is submitted before that part ends); each end when all is done.
     * A reset orders itself after the earlier uses of its queries. */
    VkQueryPool qp = timed ? e->hx.qpool : VK_NULL_HANDLE;
    uint32_t q = side ? 2 * (n_layers + 1 + part) : 2 * part;
    if (qp) {
        vkCmdResetQueryPool(r->cb, qp, q, 2);
        if (!side)
            vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, q);
    }
    if (side || part > 0) {
        /* the command buffers before it on the queue (a part, a side part
         * submitted without a wait) finish their writes first; a part also
         * reads the host's sum, which with --tune hx=2 the host writes
         * after the part was submitted (vk_hostmoe.c): the host stage and
         * its writes in the first scope make those visible, chained to the
         * submit's semaphore wait (its stage mask: compute) */
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | (side ? 0 : VK_ACCESS_HOST_WRITE_BIT),
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
        VkPipelineStageFlags src = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | (side ? 0 : VK_PIPELINE_STAGE_HOST_BIT);
        vkCmdPipelineBarrier(r->cb, src, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    }
    if (qp && side)
        vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, q);
    int rc = record_nodes(e, r, g, from, to);
    if (rc == 0 && !side && part < n_layers) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
                             NULL, 0, NULL);
    }
    if (qp)
        vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, q + 1);
    return rc;
}

int vk_hostmoe_stream_record_part(vk_engine *e, vk_rec *r, const vk_graph *g, const uint32_t *cut, uint32_t part)
{
    const vk_hostmoe *hx = &e->hx;
    const uint32_t n_layers = hx->n_layers;
    if (part > n_layers)
        return r->status = err_set(r->err, "internal: part %u of %u", part, n_layers + 1);
    uint32_t from = part ? cut[part - 1] : 0, to = part < n_layers ? cut[part] : g->n;
    if (part > 0) {
        /* The slot's last readers (host layer part - 2's MoE, in an earlier
         * part) finish before the copy overwrites it, and the parts before
         * finish their writes before this one reads them (a barrier's first
         * scope takes in every command submitted earlier on the queue).
         * The host wrote the staging buffer before this part's
         * vkQueueSubmit, which makes those writes visible to the device
         * (the spec's host write ordering guarantee). */
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                               VK_ACCESS_TRANSFER_WRITE_BIT};
        vkCmdPipelineBarrier(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL,
                             0, NULL);
        const vk_tensor *st = &hx->st[3 * (part - 1)];
        uint64_t bytes = st[2].buf.off + st[2].bytes - hx->slot.off; /* the three tensors, in order */
        const vk_buf *src = &hx->stage[(part - 1) % 2];
        VkBufferCopy cp = {.srcOffset = src->off, .dstOffset = hx->slot.off, .size = bytes};
        vkCmdCopyBuffer(r->cb, src->buf, hx->slot.buf, 1, &cp);
        VkMemoryBarrier cb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
        vkCmdPipelineBarrier(r->cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &cb,
                             0, NULL, 0, NULL);
    }
    return record_nodes(e, r, g, from, to);
}
