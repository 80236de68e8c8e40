/* vk_sync.h: the synchronisation planner -- a graph's table (vk_graph.h)
 * into a recorded command buffer, with what joins each step to the next.
 *
 * Walking the table in order, consecutive nodes of which none reads or
 * writes what another writes form one step: they run together.  Between a
 * step P and the next, C, it records one of
 *  - a barrier with indirect access, where C takes its grid from a buffer
 *    written since the last barrier (a counter cannot order a grid);
 *  - nothing but tagged words (shaders/dep_flag.glsl "LL"), where every
 *    node of P writes only tagged words, C reads nothing the steps since
 *    the last counter or barrier wrote but tagged words it polls, writes
 *    nothing they read or write, and reads nothing early;
 *  - a counter: P's workgroups count themselves finished on a word, C's
 *    wait for that count after issuing what does not depend on P (their
 *    weight loads) -- where C's nodes share a bit of tune.dep_flags that is
 *    set (the table's dep_bit), every kernel of P can signal and every one
 *    of C can wait (vk_node_counts), every tagged word written since the
 *    last barrier has been polled (so a counter finishes all that came
 *    before, as a barrier does), and each early read of a buffer written
 *    since the last barrier can wait for its writer's counter first;
 *  - a pipeline barrier everywhere else.
 * The counters: word 0 of the counters' buffer counts waits and polls that
 * gave up; the counter of a boundary whose P lies in segment s >= 1 and
 * whose C waits at dep_flags bit b is word 1 + (s - 1) * VK_DEP_PER_LAYER +
 * b (one boundary a word: where an earlier boundary of the segment took
 * it, a barrier instead), and C waits until it reaches params[VKP_EPOCH]
 * times P's workgroups --
 * or, for the decode attention (whose grid the host writes per token),
 * params[VKP_ATTN_TOTAL], the host's running total.  A tagged word carries
 * the tag params[VKP_EPOCH] * VK_LL_SITES + site, sites numbered 1, 2, ...
 * by the tagged writes in table order.
 *
 * Promises:
 *  - The calls are recorded in table order; the planner adds barriers and
 *    links between steps and fills each call's vk_dep (and kv_store's
 *    ll_q, the MoE down's ids_wait), nothing else.
 *  - With no dep_flags bit set and no tagged words the plan is all
 *    barriers: the plan every other is tested against, bit for bit.
 *  - After vk_sync_give_up (a wait or a poll gave up: word 0 is not 0
 *    after a token) every plan is all barriers and graphs keep no tagged
 *    words (vk_sync_tagged).
 *  - Fault injection, tune.dep_stall = 1: every counter wait expects one
 *    workgroup more than its producers have and every poll a site nothing
 *    writes (VK_LL_STALL_SITE), so each gives up after its bound and counts
 *    itself in word 0 -- the fall-back's test, in the planner alone;
 *    dep_stall = 2 does so only until vk_sync_retry (the retry's test).
 *  - A table that declares tagged words a kernel cannot poll or write, or
 *    more tagged writes than there are sites, is recorded not at all:
 *    VK_SYNC_UNTAGGED, and the recorder builds it again without them.
 *  - With the recording's listing on (vk_rec.list) every call is followed
 *    by a line "    # ..." that says what it waits for, signals or polls.
 *  - Nothing here runs per token: plans are made when a graph is recorded.
 */
#ifndef GLM_VK_SYNC_H
#define GLM_VK_SYNC_H

#include "vk_graph.h"

/* Counters a segment (a layer) may use: one per dep_flags bit. */
#define VK_DEP_PER_LAYER 16u

/* Retries after give-ups (tune.sync_retry): at most this many, then
 * barriers for good. */
#define VK_SYNC_RETRIES 4u

/* vk_sync_record: the table declares tagged words that cannot be. */
#define VK_SYNC_UNTAGGED 1

typedef struct {
    const vk_kb *kb;
    vk_buf counters;       /* host-visible: word 0 the give-ups, then the counters */
    vk_buf params;         /* VKP_EPOCH, VKP_ATTN_TOTAL, the attention's grid at VKP_ATTN_IND */
    bool device_known;     /* the device is known to run counters and tagged words as assumed */
    bool gave_up;          /* a wait or a poll gave up: barriers only */
    bool retried;          /* counters and tagged words tried again after a give-up (vk_sync_retry) */
} vk_sync;

/* The planner of an engine: its builders (kb, with the tuning table), the
 * counters' buffer and the params buffer.  Counters and tagged words by
 * default only where measured and checked: NVIDIA (in-order workgroup
 * launch; the H200 and H100 runs) and lavapipe (the CI runs that graph). */
void vk_sync_init(vk_sync *s, const vk_kb *kb, vk_buf counters, vk_buf params);
/* After a give-up, counters and tagged words again for the graphs recorded
 * from now on (the caller zeroes the counters, the tagged words and the
 * epochs first: vk_engine.c). */
void vk_sync_retry(vk_sync *s);
/* Whether graphs should keep what they can as tagged words (tune.ll; by
 * device; never after a give-up). */
bool vk_sync_tagged(const vk_sync *s);
/* The dep_flags bits in force (tune.dep_flags; by device; 0 after a
 * give-up). */
uint32_t vk_sync_dep_mask(const vk_sync *s);
/* Plans g and records it into r: 0, -1 (error in r), or VK_SYNC_UNTAGGED
 * (nothing recorded). */
int vk_sync_record(const vk_sync *s, vk_graph *g, vk_rec *r);
/* A wait or a poll gave up: plans are all barriers from now on. */
void vk_sync_give_up(vk_sync *s);

#endif
