/* vk_kernels.h: one builder per kernel.  Each turns the operands of an
 * operation into a vk_call (pipeline with its specialization, bindings,
 * push constants, grid), choosing team sizes and tiles for the device.  The
 * forward passes and the kernel test use the same builders, so the test
 * covers the host-side choices too. */
#ifndef GLM_VK_KERNELS_H
#define GLM_VK_KERNELS_H

#include "vk_core.h"

typedef struct {
    vk_ctx *c;
    vk_pipes *pipes;
    err_t *err;
} vk_kb;

/* An f32 operand: buffer + offset in floats. */
typedef struct {
    vk_buf b;
    uint32_t off;
} vk_vec;

/* ---- decode matrix-vector ---------------------------------------------------------
 * y[y.off + z*y_z + r] (=|+=) sum_k W[m(z)][r][k] * xin[z][k] for r < W.N, z < nz,
 * xin[z] = x[x.off + z*x_z ...] or rmsnorm(x) * norm when norm is given;
 * m(z) = z, or ids[ids.off + z] when ids is given. */
typedef struct {
    const char *name;
    const vk_tensor *w;
    vk_vec x;
    uint32_t x_z;
    vk_vec y;
    uint32_t y_z;
    uint32_t nz;
    const vk_vec *norm;
    float eps;
    bool accumulate;
    const vk_vec *ids;
} vk_mv_args;
int vk_k_mv(const vk_kb *k, const vk_mv_args *a, vk_call *out);

/* h[z][r] = silu(G[m(z)][r] . n) * (U[m(z)][r] . n), n = rmsnorm(x) * norm (or x). */
typedef struct {
    const char *name;
    const vk_tensor *gate, *up;
    vk_vec x;
    const vk_vec *norm;
    float eps;
    vk_vec h;
    uint32_t h_z;
    uint32_t nz;
    const vk_vec *ids;
} vk_glu_args;
int vk_k_glu(const vk_kb *k, const vk_glu_args *a, vk_call *out);

/* y[r] += sum_{z<nz} wt[z] * (D[ids[z]][r] . h[z]) + (S[r] . h_s)   (S optional). */
typedef struct {
    const char *name;
    const vk_tensor *down;      /* routed experts */
    const vk_tensor *shared;    /* shared expert(s), may be NULL */
    vk_vec h;                   /* h[z] at h.off + z*h_z; shared input at h.off + nz*h_z */
    uint32_t h_z;
    uint32_t nz;
    vk_vec ids, wts;
    vk_vec y;                   /* residual stream, accumulated into */
} vk_moe_down_args;
int vk_k_moe_down(const vk_kb *k, const vk_moe_down_args *a, vk_call *out);

#endif
