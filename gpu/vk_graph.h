/* vk_graph.h: a graph as a table of kernel calls in model order -- what the
 * recorders (vk_forward.c: the decode graph and the sampling programs;
 * vk_prefill.c: the prompt graph) write and the planner (vk_sync.h) turns
 * into a command buffer.
 *
 * A node is one kernel call (the builder and its operands, vk_kernels.h)
 * with the logical buffers it reads and writes: bits a graph names for
 * itself (its activations, or parts of one that different calls write).
 * The table says nothing about synchronisation but what only the model
 * knows: which boundary of a layer a node may wait at (a dep_flags bit),
 * which operands are tagged words, what is read before the call's wait or
 * as its grid.  What each kernel can do -- signal a counter, wait on one,
 * poll or write tagged words -- the kernels say (vk_node_* below, from
 * their vk_*_deps()).
 *
 * Promises:
 *  - A graph holds its nodes and the small operands they point to
 *    (vk_graph_vec, vk_graph_buf) at fixed addresses until vk_graph_free,
 *    so a node's pointers stay valid however many nodes follow.  Too many
 *    nodes for the capacity given at vk_graph_init is an error (one line),
 *    not a reallocation.
 *  - Nodes are recorded in the order they were added. */
#ifndef GLM_VK_GRAPH_H
#define GLM_VK_GRAPH_H

#include "vk_kernels.h"
#include "vk_sample.h"

/* An f32 operand: buffer b from float `off` on. */
static inline vk_vec V(vk_buf b, uint32_t off)
{
    return (vk_vec){b, off};
}

/* ---- kernel calls ------------------------------------------------------------------ */

typedef enum {
    VK_OP_EMBED,
    VK_OP_MV,
    VK_OP_GLU,
    VK_OP_MOE_DOWN,
    VK_OP_ROUTER,
    VK_OP_KV_STORE,
    VK_OP_ATTN,
    VK_OP_ATTN_VB,
    VK_OP_ATTN_COMBINE,
    VK_OP_RMSNORM,
    VK_OP_MM,
    VK_OP_MOE_GROUP,
    VK_OP_MOE_COMBINE,
    VK_OP_TOPK,
    VK_OP_SAMPLE_CAND,
    VK_OP_SAMPLE_PICK,
    VK_OP_SAMPLE_SELECT,
} vk_op;

/* The sampling kernels' operands (vk_sample.h); sel and pass for
 * sample_select. */
typedef struct {
    vk_sample_bufs b;
    uint32_t sel, pass;
    bool tail; /* sample_pick: selections follow on its grids; sample_select: one of them */
} vk_sample_args;

/* A kernel call: which builder, with what. */
typedef struct {
    vk_op op;
    union {
        vk_embed_args embed;
        vk_mv_args mv;
        vk_glu_args glu;
        vk_moe_down_args moe_down;
        vk_router_args router;
        vk_kv_store_args kv_store;
        vk_attn_args attn;
        vk_attn_vb_args attn_vb;
        vk_attn_combine_args attn_combine;
        vk_rmsnorm_args rmsnorm;
        vk_mm_args mm;
        vk_moe_group_args moe_group;
        vk_moe_combine_args moe_combine;
        vk_topk_args topk;
        vk_sample_args sample;
    } a;
} vk_kcall;

#define VK_CALL(OP, member, args) ((vk_kcall){.op = (OP), .a.member = (args)})
#define EMBED(args) VK_CALL(VK_OP_EMBED, embed, args)
#define MV(args) VK_CALL(VK_OP_MV, mv, args)
#define GLU(args) VK_CALL(VK_OP_GLU, glu, args)
#define MOE_DOWN(args) VK_CALL(VK_OP_MOE_DOWN, moe_down, args)
#define ROUTER(args) VK_CALL(VK_OP_ROUTER, router, args)
#define KV_STORE(args) VK_CALL(VK_OP_KV_STORE, kv_store, args)
#define ATTN(args) VK_CALL(VK_OP_ATTN, attn, args)
#define ATTN_VB(args) VK_CALL(VK_OP_ATTN_VB, attn_vb, args)
#define ATTN_COMBINE(args) VK_CALL(VK_OP_ATTN_COMBINE, attn_combine, args)
#define RMSNORM(args) VK_CALL(VK_OP_RMSNORM, rmsnorm, args)
#define MM(args) VK_CALL(VK_OP_MM, mm, args)
#define MOE_GROUP(args) VK_CALL(VK_OP_MOE_GROUP, moe_group, args)
#define MOE_COMBINE(args) VK_CALL(VK_OP_MOE_COMBINE, moe_combine, args)
#define TOPK(args) VK_CALL(VK_OP_TOPK, topk, args)
#define SAMPLE_CAND(bufs) ((vk_kcall){.op = VK_OP_SAMPLE_CAND, .a.sample = {.b = (bufs)}})
#define SAMPLE_PICK(bufs, t) ((vk_kcall){.op = VK_OP_SAMPLE_PICK, .a.sample = {.b = (bufs), .tail = (t)}})
#define SAMPLE_SELECT(bufs, s, p, t)                                                                           \
    ((vk_kcall){.op = VK_OP_SAMPLE_SELECT, .a.sample = {.b = (bufs), .sel = (s), .pass = (p), .tail = (t)}})

/* ---- the table --------------------------------------------------------------------- */

/* A set of a graph's logical buffers (bit i: the graph's buffer i). */
typedef uint64_t vk_res;

typedef struct {
    vk_kcall k;
    vk_res reads, writes;
    /* Of reads: those the kernel reads before it waits on anything (the
     * MoE down's expert ids, so that their weights load early); their
     * writer must be behind a barrier or waited for first. */
    vk_res reads_early;
    /* Of reads: the call's indirect grid (needs a barrier with indirect
     * access after its writer, never a counter). */
    vk_res grid;
    /* Operands stored as tagged words (shaders/dep_flag.glsl "LL"): of
     * reads, by the kernel's operand (mv: x; kv_store: kv, then q); of
     * writes.  The buffers are the tagged ones already: every reader of a
     * tagged buffer declares it here. */
    vk_res tagged_in[2], tagged_out;
    /* The boundary before this node's step as a bit of tune.dep_flags (a
     * mask with one bit set): there it may wait on a counter instead of a
     * barrier, where that bit is set.  0: never. */
    uint32_t dep_bit;
    /* The profiler's segment (vk_rec_segment; < 0: none), and the block of
     * counters a step of it signals in (vk_sync.h). */
    int segment;
    /* The params its waits and tagged words read the epoch from, where not
     * the planner's (a verify column's own words: the kernel's params
     * binding holds them); NULL: the planner's. */
    const vk_buf *dep_params;
} vk_node;

typedef struct {
    vk_node *nodes;
    uint32_t n, cap;
    vk_vec *vecs;
    vk_buf *bufs;
    uint32_t n_vecs, n_bufs, cap_small;
    int segment;          /* the segment NODE gives the nodes it adds (the recorders set it) */
    int status;           /* the first error */
    err_t *err;
} vk_graph;

/* A table of up to `cap` nodes (and 2 * cap small operands). */
int vk_graph_init(vk_graph *g, uint32_t cap, err_t *err);
void vk_graph_free(vk_graph *g);
/* Appends a copy of n; an error (too many nodes) stays in g->status. */
void vk_graph_add(vk_graph *g, const vk_node *n);
/* A copy of v / b at a fixed address for a node to point to. */
const vk_vec *vk_graph_vec(vk_graph *g, vk_vec v);
const vk_buf *vk_graph_buf(vk_graph *g, vk_buf b);

/* One line of a table: NODE(g, MV(args), .reads = ..., .writes = ...),
 * in the graph's current segment. */
#define NODE(g, call, ...) vk_graph_add((g), &(vk_node){.k = call, .segment = (g)->segment, __VA_ARGS__})

/* ---- what a node's kernel can do ---------------------------------------------------- */

/* Signal a counter and wait on one (the kernels' vk_*_deps()). */
bool vk_node_counts(const vk_kb *kb, const vk_node *n);
/* Poll operand i's tagged words (tagged_in[i]); write its output as
 * tagged words (i < 0). */
bool vk_node_tags(const vk_kb *kb, const vk_node *n, int i);
/* The dependency ends of its arguments (NULL: the kernel has none). */
vk_dep *vk_node_dep(vk_node *n);
/* Sets the sites of its tagged operands (in[i] for tagged_in[i], out). */
void vk_node_sites(vk_node *n, const uint32_t in[2], uint32_t out);
/* Whether the kernel can wait on one more counter before its early reads
 * (reads_early; the MoE down's expert ids), and that wait: `groups`
 * workgroups on `word` (false: it cannot). */
bool vk_node_waits_early(const vk_node *n);
bool vk_node_wait_early(vk_node *n, const vk_vec *word, uint32_t groups);
/* Its vk_call (the builder of its op). */
int vk_node_build(const vk_kb *kb, const vk_node *n, vk_call *out);

#endif
