/* vk_k_common.h: what the kernel builders (gpu/vk_k_*.c) share, and
 * nothing else includes: small arithmetic, the pipeline of an embedded
 * shader, the geometry of the two decode matrix-vector families (the mv
 * kernels, shaders/mv_common.glsl; the x-stationary ones,
 * shaders/mv_xs_common.glsl) and a dependency's two ends (vk_dep). */
#ifndef GLM_VK_K_COMMON_H
#define GLM_VK_K_COMMON_H

#include <string.h>

#include "format/quant.h"
#include "pc_matvec.h"
#include "spv_table.h"
#include "vk_kernels.h"

/* Threads of the small fixed-size kernels (kv_store, embed, attn_combine). */
#define VKK_WGS 128u

static inline uint32_t ceil_div(uint64_t a, uint64_t b)
{
    return (uint32_t)((a + b - 1) / b);
}

static inline uint32_t pow2_ceil(uint32_t v)
{
    uint32_t p = 1;
    while (p < v)
        p *= 2;
    return p;
}

/* The pipeline of embedded shader `shader` with spec[0..n): from its copy
 * for the weight type in spec where the build made one (vk_spv.h) when the
 * typed_spv knob says so -- by default on Mesa's drivers, where the copies
 * cut the parse (measured on lavapipe); elsewhere the generic modules:
 * on NVIDIA the copies changed neither speed nor start-up (gpu/PERF.md run
 * 42), only some decode bits. */
static inline VkPipeline pipe(const vk_kb *k, enum spv_id shader, const uint32_t *spec, uint32_t n)
{
    const vk_spv *s = &spv_table[shader];
    bool typed = k->tune->typed_spv == VK_TUNE_AUTO ? k->c->mesa_driver : k->tune->typed_spv != 0;
    return vk_pipe_get(k->c, k->pipes, typed ? vk_spv_for(s, spec, n) : s, spec, n, k->err);
}

/* ---- the mv kernels --------------------------------------------------------------------- */

/* Decode matvec geometry: threads per row (TEAM, a power of two no larger
 * than a subgroup, so teams reduce with shuffles), units each thread takes
 * per row (UPT, loads issued up front), rows per team (NR) and the
 * workgroup size.  A decode matvec is 0.5-15 MB: it needs many threads with
 * little state each (high occupancy keeps enough loads in flight) and many
 * small workgroups to spread over every compute unit: 2 units per thread,
 * 64-thread workgroups (gpu/PERF.md runs 2-5). */
typedef struct {
    uint32_t wgs, team, upt, nr;
} vkk_mv_cfg;

vkk_mv_cfg vkk_mv_config(const vk_ctx *c, const vk_tensor *w, uint32_t nz);
/* The family's specialization constants of geometry m (WGS, TYPE, TEAM, NR, SG). */
void vkk_mv_spec(const vk_kb *k, const vkk_mv_cfg *m, uint32_t type, uint32_t *spec);

static inline uint32_t rows_per_wg(const vkk_mv_cfg *m)
{
    return m->wgs / m->team * m->nr;
}

/* ---- the x-stationary kernels (shaders/mv_xs_common.glsl) ---------------------------------
 * The workgroup stages its input once in shared memory; each lane owns J
 * units (column runs) of every row and streams R rows of weights at a
 * time, `passes` times.  The geometry (H200 sweeps, gpu/PERF.md run 6):
 *   wgs   per kernel: 256 threads for gate/up, 512 for the down and for a
 *         single small matrix (<= 8192 rows in all: fewer workgroups,
 *         fewer stagings of the input), 256 for the router (runs 6-8, 18)
 *   team  threads per row: the power of two <= subgroup size that pads the
 *         row's units least (ties: the larger team)
 *   j     units per lane, at most tune->xs_j (8)
 *   r     rows per pass, at most 4 (Q6_K: 2, its units are large): the
 *         loads of one pass (r * j * uvec4s per unit * matrices) stay within
 *         16 uvec4 registers; halved while the grid has fewer than 2
 *         workgroups per compute unit
 *   passes doubled (up to 16) while the grid keeps 8 workgroups per compute
 *         unit and a workgroup's rows stay within the matrix: fewer
 *         stagings of the input
 * (the register budget, waves and workgroups per compute unit re-swept with
 * no gain, gpu/PERF.md runs 6, 15, 17).  The input of all J*team units must
 * fit in the device's shared memory; wider inputs keep the mv kernels.
 * tune->xs = 0 turns the path off; xs_r, xs_wgs, xs_p and xs_xreg
 * override the choices (the kernel tests use them to cover the geometries a
 * 32-wide GPU takes). */
typedef struct {
    uint32_t wgs, team, j, r, passes, xreg, xrn, ksh, groups;
} vkk_xs_cfg;

/* The workgroup the x-stationary kernels ask for on one token's calls (the
 * matvecs, gate/ups, MoE down, attn_vb, the router): 512 threads, within
 * the device's limit.  (Runs 6-7 and 18 gave the matvecs of more than 8192
 * rows, the gate/ups, attn_vb and the router 256, on the float path; with
 * the integer dot products 512 decoded IQ4_XS 6.6 % and Q4_K_M 2.6 % faster
 * on the H200: gpu/PERF.md run 63.) */
#define VKK_XS_WGS 512u

/* kp: elements of the (padded, concatenated) input; rows: per z; nz: z
 * count; sets: matrices per pass (gate + up: 2); wgs: the kernel's
 * workgroup size.  False: the kernel does not apply. */
bool vkk_xs_config(const vk_kb *k, uint32_t type, uint32_t kp, uint32_t rows, uint32_t nz, uint32_t sets,
                   uint32_t wgs, vkk_xs_cfg *m);
/* The family's specialization constants of geometry m. */
void vkk_xs_spec(const vk_kb *k, const vkk_xs_cfg *m, uint32_t type, uint32_t *spec);

/* ---- dependencies ----------------------------------------------------------------------- */

/* The push words of a dependency: the signalled counter, the awaited one,
 * the producers' workgroups (every kernel's block names them dep_signal,
 * dep_wait, dep_n). */
typedef struct {
    uint32_t signal, wait, n;
    uint32_t ll_in, ll_out;  /* LL sites (blocks with ll_in, ll_out: VKK_LL_PUSH) */
} vkk_dep_words;
#define VKK_DEP_PUSH(pcv, w) ((pcv).dep_signal = (w).signal, (pcv).dep_wait = (w).wait, (pcv).dep_n = (w).n)
#define VKK_LL_PUSH(pcv, w) ((pcv).ll_in = (w).ll_in, (pcv).ll_out = (w).ll_out)
/* The kernel's SPIR-V: its -DLL build (Makefile LL_SHADERS) where d takes
 * or gives tagged words, the plain one elsewhere. */
#define VKK_SPV(plain, d) ((d)->ll_in || (d)->ll_out ? plain##_LL : plain)

/* Sets d's spec constants (PC_S_SIGNAL, PC_S_WAIT, and where the kernel
 * can take tagged words -- ll_ok -- PC_S_LL_IN, PC_S_LL_OUT) and bindings
 * (the counters at PC_B_DEP, the params at params_binding) in spec and out,
 * its push words in *words; nothing when d has neither end nor LL. */
int vkk_dep_bind(const vk_kb *k, const char *name, const vk_dep *d, bool ll_ok, uint32_t *spec,
                 uint32_t params_binding, vk_call *out, vkk_dep_words *words);

#endif
