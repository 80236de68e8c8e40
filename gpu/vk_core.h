/* vk_core.h: the Vulkan core's internal pieces, shared by the gpu/ sources and the
 * kernel tests (tests/test_vk_*.c).  Not for app/.
 *
 *   vk_ctx       one logical device + queue, its limits, the one descriptor
 *                set layout and pipeline layout every kernel uses
 *   vk_arena     device-local / host-visible memory, sub-allocated in blocks
 *                that respect maxMemoryAllocationSize and maxStorageBufferRange
 *   vk_uploader  a staging ring that fills device-local buffers
 *   vk_pipes     pipelines built from the embedded SPIR-V + specialization
 *   vk_prog      a recorded command-buffer family: dispatches, barriers,
 *                descriptor sets (shared by every variant), profiling marks
 *   vk_qlayout   the GPU layout of each weight type (see vk_layout.c)
 *
 * Kernel binding convention (every shader): set 0, binding 0 is an array of
 * VKC_WSLOTS weight buffers; bindings 1..VKC_NBIND are single storage
 * buffers; push constants are up to VKC_PUSH_WORDS 32-bit words;
 * specialization constant 0 is the workgroup size.  Each kernel declares
 * its push constants, binding and specialization slots once, in a header
 * its shader and its builder both include (shaders/pc_common.h).
 */
#ifndef GLM_VK_CORE_H
#define GLM_VK_CORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include "base/error.h"
#include "pc_common.h"
#include "vk.h"
#include "vk_spv.h"

#define VKC_WSLOTS PC_WEIGHT_SLOTS
#define VKC_NBIND PC_MAX_BINDING
#define VKC_PUSH_WORDS (PC_MAX_BYTES / 4)
#define VKC_MAX_SPEC PC_MAX_SPEC

/* ---- device --------------------------------------------------------------- */

typedef struct {
    VkInstance instance;
    VkPhysicalDevice pdev;
    VkDevice dev;
    VkQueue queue;
    uint32_t queue_family;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem;
    vk_device_info info;
    uint32_t subgroup;         /* the size kernels are specialized for */
    bool size_control;         /* pipelines pin subgroup size + full subgroups */
    bool coopmat;              /* VK_NV_cooperative_matrix fp16 16x16x16 enabled */
    bool timeline;             /* timeline semaphores enabled (Vulkan 1.2), and their host calls: */
    PFN_vkSignalSemaphore signal_semaphore;
    PFN_vkGetSemaphoreCounterValue semaphore_value;
    PFN_vkWaitSemaphores wait_semaphores;
    bool mesa_driver;          /* one of Mesa's drivers: their SPIR-V front end parses a
                                  whole module before specializing it, so kernels are
                                  built from their per-type copies (vk_spv.h) */
    bool idot;                 /* shaderIntegerDotProduct enabled (core in 1.3): the _id kernels may be built */
    bool idot_fast;            /* and the driver calls 4x8-bit packed mixed-signedness dot products accelerated */
    bool pipe_stats;           /* asked for at create and the device has
                                  VK_KHR_pipeline_executable_properties:
                                  pipelines keep the compiler's statistics */
    uint64_t max_alloc;        /* maxMemoryAllocationSize */
    uint64_t max_range;        /* maxStorageBufferRange */
    uint64_t align;            /* minStorageBufferOffsetAlignment (>= 16) */
    uint32_t shared_bytes;     /* maxComputeSharedMemorySize */
    uint32_t max_groups[3];
    double ts_period_ns;
    uint32_t n_sm_hint;        /* rough count of compute units, for grid sizing */
    VkCommandPool cmd_pool;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipe_layout;
    VkBuffer dummy_buf;        /* bound to unused bindings; holds the low-bit types' tables
                                  (pc_common.h PC_IQ_*: weight slot PC_IQ_TABLES_SLOT) */
    VkDeviceMemory dummy_mem;
    VkFence fence;
    bool lost;                 /* VK_ERROR_DEVICE_LOST seen: refuse further work */
    /* Device-local memory of VK_MEM_DEVICE arenas: held now, and the most
     * that may be held (`--gpu-mem`; UINT64_MAX: what the driver gives).
     * A block past the cap fails as the driver's out-of-memory would. */
    uint64_t dev_held, dev_cap;
} vk_ctx;

/* device_index < 0: the best usable device (discrete > integrated > virtual > cpu).
 * pipe_stats: pipelines keep the compiler's statistics where the device can
 * (vk_pipe_stats; for the microbenchmark). */
int vk_ctx_create(vk_ctx *c, int device_index, bool pipe_stats, err_t *err);
void vk_ctx_destroy(vk_ctx *c);

/* Formats a failed call as one line; returns -1.  Marks the context lost on
 * VK_ERROR_DEVICE_LOST so later calls fail fast.  Out of device or host
 * memory is said in words with what would fit (VK_FIT_HINT), never the
 * driver's code. */
int vk_fail(vk_ctx *c, err_t *err, VkResult r, const char *what);
/* What to try when the device's memory is short, for error lines. */
#define VK_FIT_HINT "try a smaller -c or --gpu-mem, or --backend cpu"
const char *vk_result_name(VkResult r);

/* Submits one command buffer and waits for it (fence), turning device loss
 * and timeouts into errors. */
int vk_submit_wait(vk_ctx *c, VkCommandBuffer cb, err_t *err);
/* The two halves of vk_submit_wait: the submit with the context's fence,
 * and the wait for it, polling the fence up to spin_ns first (0: a
 * blocking wait at once). */
int vk_submit_fenced(vk_ctx *c, VkCommandBuffer cb, err_t *err);
int vk_fence_wait(vk_ctx *c, uint64_t spin_ns, err_t *err);
/* The same with a fence of the caller's (several command buffers in
 * flight at once: vk_hostmoe_stream.c). */
int vk_submit_on(vk_ctx *c, VkCommandBuffer cb, VkFence fence, err_t *err);
int vk_wait_on(vk_ctx *c, VkFence fence, uint64_t spin_ns, err_t *err);
/* Submits one command buffer without a fence: what a later vk_submit_wait
 * on the queue waits for too (the queue runs them in order only where the
 * later one's barriers say so). */
int vk_submit(vk_ctx *c, VkCommandBuffer cb, err_t *err);

/* The low-bit types' tables in the layout shaders/pc_common.h gives
 * (PC_IQ_TABLES_WORDS words), from core/format/quant_grids.c (vk_iq_tables.c). */
void vk_iq_tables_fill(uint32_t *words);

/* ---- memory --------------------------------------------------------------- */

/* A range of a block's buffer; `map` is set for host-visible memory. */
typedef struct {
    VkBuffer buf;
    uint64_t off;
    uint64_t size;
    uint8_t *map;
} vk_buf;

typedef struct {
    VkDeviceMemory mem;
    VkBuffer buf;
    uint64_t size, used;
    uint8_t *map;
} vk_block;

typedef struct {
    vk_block *blocks;
    uint32_t n, cap;
    uint64_t block_size;     /* preferred size of a new block */
    int kind;                /* VK_MEM_* */
    bool host;               /* host-visible (mapped) */
    const char *what;        /* for error messages */
    uint64_t total;          /* bytes of device memory held */
} vk_arena;

enum {
    VK_MEM_DEVICE = 0,       /* device-local */
    VK_MEM_HOST = 1,         /* host-visible + coherent, cached when possible (read back) */
    VK_MEM_UPLOAD = 2,       /* host-visible + coherent, device-local when possible (written by the host,
                                read by every kernel) */
};
void vk_arena_init(vk_ctx *c, vk_arena *a, int kind, uint64_t block_size, const char *what);
/* Sub-allocates `size` bytes aligned to the device's storage alignment; a
 * request above maxStorageBufferRange is an error naming `name`. */
int vk_arena_alloc(vk_ctx *c, vk_arena *a, uint64_t size, const char *name, vk_buf *out, err_t *err);
void vk_arena_release(vk_ctx *c, vk_arena *a);

/* Packs `n` sizes (in allocation order) into blocks of at most block_size
 * the way vk_arena_alloc does, to check that a model fits before anything is
 * uploaded: returns the device bytes needed (UINT64_MAX: out of host memory)
 * and optionally each block's size. */
uint64_t vk_arena_plan(const vk_ctx *c, uint64_t block_size, const uint64_t *sizes, uint64_t n,
                       uint64_t *block_used, uint32_t *n_blocks, uint32_t max_blocks);
/* Creates the blocks that plan describes, each exactly as large as what it
 * will hold; allocating the same sizes in the same order then fills them. */
int vk_arena_reserve(vk_ctx *c, vk_arena *a, const uint64_t *sizes, uint64_t n, err_t *err);

/* Staging ring: vk_upload_map() hands out host memory that is copied to
 * dst+dst_off when its slot is flushed (slots rotate; the ring waits only for
 * the slot it reuses). */
typedef struct vk_uploader vk_uploader;
int vk_uploader_new(vk_ctx *c, uint64_t ring_bytes, vk_uploader **out, err_t *err);
/* size <= the slot size (vk_uploader_slot_bytes). */
void *vk_upload_map(vk_uploader *u, const vk_buf *dst, uint64_t dst_off, uint64_t size, err_t *err);
uint64_t vk_uploader_slot_bytes(const vk_uploader *u);
int vk_upload_bytes(vk_uploader *u, const vk_buf *dst, uint64_t dst_off, const void *src, uint64_t size, err_t *err);
int vk_uploader_finish(vk_uploader *u, err_t *err); /* flush + wait for all */
void vk_uploader_free(vk_uploader *u);

/* ---- pipelines ------------------------------------------------------------ */

typedef struct {
    const vk_spv *shader;
    uint32_t spec[VKC_MAX_SPEC];
    uint32_t nspec;
    VkPipeline pipe;
} vk_pipe_entry;

typedef struct {
    vk_pipe_entry *e;
    uint32_t n, cap;
} vk_pipes;

/* The pipeline of embedded shader `shader` (an entry of spv_table, or of
 * the microbenchmark's spv_tool_table) with specialization constants
 * spec[0..nspec) (ids 0..nspec-1; spec[0] is the workgroup size), built once
 * and cached. */
VkPipeline vk_pipe_get(vk_ctx *c, vk_pipes *p, const vk_spv *shader, const uint32_t *spec, uint32_t nspec,
                       err_t *err);
void vk_pipes_free(vk_ctx *c, vk_pipes *p);
/* The compiler's statistics of a pipeline ("name=value ..."; registers,
 * shared memory, spills where the driver reports them) into buf, when
 * c->pipe_stats; otherwise an empty string.  For tuning tools. */
void vk_pipe_stats(const vk_ctx *c, VkPipeline pipe, char *buf, size_t n);

/* ---- recorded programs ------------------------------------------------------ */

typedef struct {
    VkPipeline pipe;
    const char *name;             /* kernel name for the profile */
    vk_buf w[VKC_WSLOTS];         /* weight slots (binding 0), unused: buf == 0 */
    vk_buf b[1 + VKC_NBIND];      /* by binding number, 1..VKC_NBIND (b[0] unused: binding 0 is w) */
    uint32_t push[VKC_PUSH_WORDS];
    uint32_t npush;
    uint32_t groups[3];
    const vk_buf *indirect;       /* non-NULL: VkDispatchIndirectCommand there */
    uint64_t bytes;               /* bytes read + written (weights + activations) */
} vk_call;

/* A kernel's push constants (its pc_* struct, shaders/pc_*.h) into k. */
static inline void vk_call_push(vk_call *k, const void *pc, size_t bytes)
{
    memcpy(k->push, pc, bytes);
    k->npush = (uint32_t)(bytes / 4);
}
#define VK_PUSH(k, pcv) vk_call_push((k), &(pcv), sizeof(pcv))

enum { VK_PROF_OFF = 0, VK_PROF_SEGMENT = 1, VK_PROF_ALL = 2 };

/* A program is built by running the same recording code once per variant
 * (profiling off, one per sampled segment, full...).  The dispatch sequence
 * must be identical in every pass; descriptor sets are made in the first
 * pass and reused. */
typedef struct {
    uint32_t n_disp;               /* dispatches per pass */
    uint32_t n_dep;                /* dependent steps per pass: barriers + links */
    uint32_t n_link;               /* of which joined by a counter or tagged words, not a barrier */
    uint32_t n_tagged;             /* of those, by tagged words */
    VkDescriptorSet *sets;
    const char **names;
    uint64_t *bytes;
    int32_t *segment;              /* segment of each dispatch */
    uint32_t cap;
    VkDescriptorPool *pools;
    uint32_t n_pools, pool_left;
    bool defined;                  /* first pass done */
} vk_prog;

/* A recording as text (`glmchat bench --plan`): every segment, every
 * dispatch -- its name, shader, specialization, grid, push words and
 * bindings -- and every barrier and link, one line each; buffers are named
 * by their order of first appearance (b0, b1, ...), so two recordings of the
 * same graph print the same text whatever the driver's handles. */
#define VK_LISTING_BUFS 512
typedef struct {
    FILE *f;
    const vk_pipes *pipes;        /* where the pipelines' shaders and constants are found */
    VkBuffer bufs[VK_LISTING_BUFS];
    uint32_t n_bufs;
} vk_listing;

typedef struct {
    vk_ctx *c;
    vk_prog *p;
    VkCommandBuffer cb;
    int mode;                      /* VK_PROF_* */
    int timed_segment;             /* VK_PROF_SEGMENT: the segment timed */
    int always_a, always_b;        /* segments timed in every sampled variant */
    VkQueryPool qpool;
    uint32_t nq, qcap;
    int32_t *q_disp;               /* per query: dispatch index, -1 start mark */
    int segment;
    bool seg_open;                 /* a start timestamp was written for this run */
    uint32_t disp;                 /* next dispatch index */
    int status;                    /* first error */
    err_t *err;
    vk_listing *list;              /* non-NULL: the recording is also printed there */
} vk_rec;

/* Starts recording into cb (begun by the caller).  For timed modes the
 * caller passes a query pool with room for qcap queries and q_disp[qcap]. */
void vk_rec_begin(vk_rec *r, vk_ctx *c, vk_prog *p, VkCommandBuffer cb, int mode, int timed_segment,
                  VkQueryPool qpool, uint32_t qcap, int32_t *q_disp, err_t *err);
void vk_rec_segment(vk_rec *r, int segment);
void vk_rec_call(vk_rec *r, const vk_call *k);
/* A compute->compute dependency: everything before is visible after. */
void vk_rec_barrier(vk_rec *r);
/* A dependent step joined by a counter the consumers wait on, or by tagged
 * words they poll, instead of a barrier (shaders/dep_flag.glsl; vk_sync.h):
 * counted, nothing recorded. */
void vk_rec_link(vk_rec *r, bool tagged);
/* Also makes shader writes visible to indirect-dispatch reads. */
void vk_rec_barrier_indirect(vk_rec *r);
/* Writes the last timestamp; returns 0 or -1 (first error of the pass). */
int vk_rec_end(vk_rec *r);
void vk_prog_free(vk_ctx *c, vk_prog *p);

/* ---- weight layout on the GPU ------------------------------------------------ */

/* Each row is stored as blocks.  A block's quant bytes ("body", 16-byte
 * multiples, so kernels issue uvec4 loads) go to one array, its scales
 * ("head": d, m, scales, qh) to a second array after all bodies.  F32, F16
 * and BF16 rows are padded with zeros to a multiple of 8 elements. */
typedef struct {
    uint32_t blk;    /* elements per block */
    uint32_t body;   /* bytes of quant data per block (multiple of 16) */
    uint32_t head;   /* bytes of scales per block (0, 1, 2, 4, 8, 12, 16) */
    uint32_t unit;   /* elements a matvec thread handles at a time */
} vk_qlayout;

bool vk_qlayout_of(uint32_t type, vk_qlayout *out);

typedef struct {
    vk_buf buf;
    uint32_t type;
    uint32_t K;          /* logical row length */
    uint32_t Kp;         /* padded row length (bpr * blk) */
    uint32_t N;          /* rows per matrix */
    uint32_t n_mat;      /* matrices (experts / heads) */
    uint32_t bpr;        /* blocks per row */
    uint64_t head_off;   /* bytes from buf.off to the head array */
    uint64_t bytes;      /* device bytes of the whole tensor */
    uint64_t src_bytes;  /* bytes of the source tensor (for bandwidth figures) */
} vk_tensor;

/* Device bytes of a tensor of n_mat matrices of N rows of K elements. */
uint64_t vk_tensor_bytes(uint32_t type, uint64_t K, uint64_t N, uint64_t n_mat, uint64_t align);
/* Repacks `nrows` consecutive source rows (src rows `src_stride` bytes apart,
 * GGML blocks) into the body and head arrays (either may be NULL: that
 * part is skipped, so the two can be filled one after the other). */
void vk_repack_rows(uint32_t type, uint64_t K, const uint8_t *src, uint64_t src_stride, uint64_t nrows,
                    uint8_t *body, uint8_t *head);

#endif
