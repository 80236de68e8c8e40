/* cpu_moe_host.h: one MoE layer's routed experts on the CPU, for a GPU
 * backend that keeps some layers' experts in host memory (cpu_moe_host_).
 *
 * Another backend (gpu/: attention, router, shared expert on the GPU) hands
 * over, for n tokens, the FFN-normalized activations and the routing it
 * computed; this module returns
 *     y[t] = sum over slots k (in slot order) of w[t][k] *
 *            down_e(SiLU(gate_e . x[t]) * (up_e . x[t])),   e = ids[t][k]
 * reading the experts straight from the model's (mmapped) tensors, at the
 * fast CPU backend's precision: its kernels (cpu_kernels.h: activations
 * quantized per block as llama.cpp does, integer dot products), its row
 * tiling (cpu_matmul.h) and its thread pool (cpu_pool.h).  Each expert's
 * gate/up reads its weights once for all the tokens that chose it; down is
 * split by output rows across all experts, as cpu_ffn.c does.
 *
 * Promises:
 *  - cpu_moe_host_new() allocates everything (sized for n_batch tokens and
 *    every activation form); cpu_moe_host_eval() allocates nothing, but
 *    for the packed copy of a layer's Q4_0 / Q5_0 / Q8_0 / IQ4_NL / MXFP4 experts at its first eval
 *    (cpu_pack.h: a kernel set with a packed kernel, and memory for it;
 *    without the memory the plain rows serve, never an error).
 *  - A result depends only on its token's inputs and the kernel set, not on
 *    n, the other tokens or the thread count (each value is computed by one
 *    thread in one order).
 *  - Bad input (n > n_batch, an expert id out of range, tensors whose shape
 *    is not the one given at creation) is a one-line error, nothing computed.
 *  - One eval at a time per object (it owns its pool); the caller's thread
 *    works as thread 0.
 */
#ifndef GLM_CPU_MOE_HOST_H
#define GLM_CPU_MOE_HOST_H

#include <stdint.h>

#include "cpu_kernels.h"
#include "base/error.h"
#include "model/model.h"

typedef struct cpu_moe_host cpu_moe_host;

typedef struct {
    uint32_t n_embd;   /* the experts' input and output width */
    uint32_t n_ff;     /* one expert's hidden width */
    uint32_t n_expert; /* experts per layer (ids are < n_expert) */
    uint32_t n_used;   /* K: experts per token */
    uint32_t n_batch;  /* most tokens per eval */
    int n_threads;     /* <= 0: one per CPU */
    const cpu_kernels *kernels; /* NULL: cpu_kernels_best() */
    uint32_t gate_rows; /* rows of gate and up per work item: 0: chosen so every thread gets the same
                           number of rows; else a multiple of 32 (the split never changes the bits) */
    bool no_pack;       /* read the experts' plain rows, never a packed copy: the caller reads the file's
                           pages too (the Vulkan core's streamed prompts), and a copy beside them would
                           double the host memory the experts hold */
} cpu_moe_host_params;

cpu_moe_host *cpu_moe_host_new(const cpu_moe_host_params *p, err_t *err);
void cpu_moe_host_free(cpu_moe_host *h);
int cpu_moe_host_threads(const cpu_moe_host *h);
const cpu_kernels *cpu_moe_host_kernels(const cpu_moe_host *h);
/* Host memory of its own holding packed Q4_0 / Q5_0 / Q8_0 / IQ4_NL / MXFP4 experts (cpu_pack.h): each
 * layer's are packed at its first eval, so this grows over the first
 * prompt, up to the experts' size in the file. */
uint64_t cpu_moe_host_packed_bytes(const cpu_moe_host *h);

/* The routed experts of layer L (its gate_exps, up_exps, down_exps) for n
 * tokens: x [n][n_embd] (FFN-normalized), ids and w [n][n_used], into
 * y [n][n_embd] (overwritten). */
int cpu_moe_host_eval(cpu_moe_host *h, const model_layer *L, const float *x, const int32_t *ids, const float *w,
                      uint32_t n, float *y, err_t *err);

#endif
