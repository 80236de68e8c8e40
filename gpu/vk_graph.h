/* vk_graph.h: what the two graph recorders share (vk_forward.c, the
 * decode graph; vk_prefill.c, the prompt graph): an early return on error,
 * an operand at an offset, and recording a dispatch a builder made. */
#ifndef GLM_VK_GRAPH_H
#define GLM_VK_GRAPH_H

#include "vk_engine.h"

#define TRY(x)               \
    do {                     \
        if ((x) < 0)         \
            return -1;       \
    } while (0)

/* An f32 operand: buffer b from float `off` on. */
static inline vk_vec V(vk_buf b, uint32_t off)
{
    return (vk_vec){b, off};
}

/* Records k, which a builder returned rc for; -1 on either's error. */
static inline int record(vk_rec *r, int rc, const vk_call *k)
{
    if (rc < 0)
        return -1;
    vk_rec_call(r, k);
    return r->status;
}

#endif
