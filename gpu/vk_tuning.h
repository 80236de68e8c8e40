/* vk_tuning.h: the Vulkan core's tuning knobs, in one table.
 *
 * Promises:
 *  - Every knob the kernel builders and the graphs read is a field here,
 *    with a name, a default, a range and the gpu/PERF.md run that chose the
 *    default (vk_tuning.c); nothing else in gpu/ reads the environment
 *    except GLMCHAT_DEP_FLAGS (documented in man/glmchat.1), which fills
 *    dep_flags.
 *  - An engine fills its table once, when it is created (defaults, then
 *    GLMCHAT_DEP_FLAGS, then the "key=value" overrides of
 *    engine_params.tune: `glmchat ... --tune key=value`), and hands it to
 *    the kernel builders (vk_kb.tune); tests set fields directly.
 *  - An unknown key or a value out of range is a one-line error naming the
 *    key, the value and what is allowed.  The app checks `--tune` with
 *    vk_tune_check() and lists the table with vk_tune_print() (vk.h).
 * Knobs whose A/B is finished are not here: their values are written into
 * the builders, with the run that decided them. */
#ifndef GLM_VK_TUNING_H
#define GLM_VK_TUNING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* dep_flags' and ll's default: by device (all nine boundaries, and tagged
 * words, where the device is known to run them, none elsewhere; vk_sync.c;
 * the boundaries are named in vk_forward.c). */
#define VK_TUNE_AUTO UINT32_MAX

typedef struct {
    /* decode matrix-vector products (vk_k_matvec.c, geometry in vk_k_common.c) */
    uint32_t xs;           /* 1: the x-stationary kernels where they apply; 0: the mv family everywhere */
    uint32_t xs_j;         /* most units of a row per lane */
    uint32_t xs_xreg;      /* a lane keeps its inputs in registers up to this many elements (else shared memory) */
    uint32_t xs_r;         /* rows per pass; 0: the rule (4, Q6_K 2, fewer for small grids) */
    uint32_t xs_p;         /* passes per workgroup; 0: the rule (doubled while the grid stays large) */
    uint32_t xs_wgs;       /* workgroup size of every x-stationary kernel; 0: each kernel's own */
    uint32_t xs_pad;       /* the largest team padding a row by at most this many % (0: the least padding) */
    /* attention */
    uint32_t attn_fd;       /* 1: attn_fd (tensor cores; decode and prompt) where the device and the f16 cache allow it */
    uint32_t attn_minchunk; /* attn.comp: shortest chunk of a decode step */
    uint32_t attn_sg;       /* attn.comp: longest chunk scored by subgroups (longer: a thread per position) */
    uint32_t attn_pu;       /* attn.comp: positions a subgroup scores together */
    uint32_t fd_minchunk;   /* attn_fd: shortest chunk (positions, a multiple of 16) */
    uint32_t fd_chunks;     /* attn_fd: most chunks per token */
    /* prefill */
    uint32_t batch_max;     /* the largest prompt batch a plan left to choose takes (vk_engine.c grow_batch);
                               VK_TUNE_AUTO: by device (1024 on a GPU, 256 on a CPU device) */
    uint32_t coopmat;       /* 1: mat-mats of quantized weights on tensor cores where the device has them */
    uint32_t act16_out;     /* 1: the tensor-core mat-mats writing o and the hidden states write their fp16 twins
                               too, which attn_output and the downs read (vk_prefill.c out16) */
    /* weights */
    uint32_t qkv_merge;     /* 1: q_a (or q) and kv_a_mqa uploaded as one matrix where they can be */
    /* the decode graph's counters (shaders/dep_flag.glsl) */
    uint32_t dep_flags;     /* boundaries joined by counters (a bitmask of nine); VK_TUNE_AUTO: by device */
    uint32_t dep_stall;     /* fault injection: every counter wait and tagged-word poll gives up (tests the fall-back);
                             * 2: only in recordings before the first retry (tests the retry) */
    uint32_t sync_retry;    /* tokens on barriers after a give-up before the counters are tried again (0: never) */
    uint32_t ll;            /* 1: decode's qkv and q as tagged words (LL), read with no counter or barrier,
                               every lane polling its words; VK_TUNE_AUTO: by device (on where the
                               counters are, else off) */
    /* experts in host memory (vk_hostmoe.c) */
    uint32_t hx;            /* the hand-over: 1: a host layer's side part submitted behind its part, before the
                               wait, and the part's fence polled; 0: submitted after a blocking wait; 2: every
                               part submitted at once, linked by timeline semaphores (where the device has them) */
    uint32_t hx_rows;       /* the CPU's experts: gate/up rows per work item (0: even over the threads) */
    uint32_t hx_stream;     /* prompt batches of this many tokens or more bring each host layer's experts to the
                               GPU through one device slot (vk_hostmoe_stream.c), until both ways were timed,
                               then the faster as timed (vk_hostmoe.c stream_batch); 0: never, nor the slot */
    /* pipelines (vk_k_common.h) */
    uint32_t typed_spv;     /* pipelines from the per-weight-type SPIR-V copies (vk_spv.h) */
    /* the sampled profiler (vk_profiler.c) */
    uint32_t prof_every;    /* decode: one layer's dispatches timed every this many tokens (0: none) */
    /* drafting (vk_spec.c) */
    uint32_t nx_kv;         /* NextN rows before a call's last: their cache rows alone */
    /* integer dot products (vk_k_matvec.c) */
    uint32_t idot;          /* the decode matvecs (mv_xs tagged or not, mv_glu_xs, mv_moe_down_xs, attn_vb_xs) of the
                               types vk_k_idot names
                               from their -DIDOT build: 1 where the device's 4x8-bit dot products are accelerated,
                               2 wherever it has them, 0 never */
} vk_tuning;

/* Every field at its default. */
void vk_tuning_default(vk_tuning *t);

/* One override, "key=value" (a decimal number in the knob's range). */
int vk_tuning_set(vk_tuning *t, const char *key_value, err_t *err);

/* The engine's table: defaults, GLMCHAT_DEP_FLAGS when set, then the
 * overrides in order. */
int vk_tuning_fill(vk_tuning *t, const char *const *overrides, uint32_t n_overrides, err_t *err);

/* The fields that differ from their defaults, "key=value key=value" (empty:
 * none), for names of test cases and bench's report. */
void vk_tuning_describe(const vk_tuning *t, char *buf, size_t n);

#endif
