/* vk_hostmoe_cut.c: one part of a graph cut at the layers whose routed
 * experts are in host memory (vk_hostmoe.c says why and how they run).
 *
 * Why a file of its own: the graphs' recorders (vk_forward.c, vk_prefill.c)
 * call it, and vk_hostmoe.c calls the profiler that calls them; kept here,
 * the calls go one way (tests/t_layers.sh). */
#include "vk_engine.h"

int vk_hostmoe_record_part(vk_engine *e, vk_rec *r, const vk_graph *g, const uint32_t *cut, uint32_t part, bool side)
{
    const uint32_t n_layers = e->hx.n_layers;
    if (part > n_layers || (side && part == n_layers))
        return r->status = err_set(r->err, "internal: part %u of %u", part, n_layers + 1);
    uint32_t from = side ? cut[2 * part] : part ? cut[2 * part - 1] : 0;
    uint32_t to = side ? cut[2 * part + 1] : part < n_layers ? cut[2 * part] : g->n;
    if (side || part > 0) {
        /* the command buffers before it on the queue (a part, a side part
         * submitted without a wait) finish their writes first */
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
        vkCmdPipelineBarrier(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &mb, 0, NULL, 0, NULL);
    }
    vk_graph pg;
    if (vk_graph_init(&pg, to - from + 1, r->err))
        return r->status = -1;
    for (uint32_t i = from; i < to; i++) /* copies pointing into g's operands, which outlive pg */
        vk_graph_add(&pg, &g->nodes[i]);
    int rc = pg.status ? -1 : vk_sync_record(&e->rec.sync, &pg, r);
    vk_graph_free(&pg);
    if (rc == 0 && !side && part < n_layers) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
                             NULL, 0, NULL);
    }
    return rc;
}
