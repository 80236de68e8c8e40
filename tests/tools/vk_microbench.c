/* vk_microbench: times single decode kernels on the default Vulkan device,
 * for tuning on the GPU machine (not a test: prints figures, exits 0).
 *
 *   vk_microbench [reps]
 *
 * Each case is recorded `reps` times back to back with a barrier between
 * (like the decode graph's dependent steps) between two timestamps; the
 * figure is the mean per call and the bytes of weights it streamed per
 * microsecond.  The matvec geometry comes from the GLMCHAT_MV_* environment
 * variables, so a shell loop over settings compares variants.  The first
 * line is the device's plain streaming-read bandwidth. */
#include "vk_kernels.h"
#include "vk_testutil.h"

static vk_kb KB;
static err_t KERR;

static double time_calls(const vk_call *c, uint32_t reps, bool barriers)
{
    err_t err;
    VkQueryPool qp;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = 2};
    if (vkCreateQueryPool(G.c.dev, &qi, NULL, &qp) != VK_SUCCESS)
        return -1;
    vk_prog prog = {0};
    vk_rec r;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vkBeginCommandBuffer(G.cb, &bi);
    vkCmdResetQueryPool(G.cb, qp, 0, 2);
    vk_rec_begin(&r, &G.c, &prog, G.cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
    /* one untimed call first (caches, clocks) */
    vk_rec_call(&r, c);
    vk_rec_barrier(&r);
    vkCmdWriteTimestamp(G.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, 0);
    for (uint32_t i = 0; i < reps; i++) {
        vk_rec_call(&r, c);
        if (barriers)
            vk_rec_barrier(&r);
    }
    vkCmdWriteTimestamp(G.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, 1);
    int rc = vk_rec_end(&r);
    vkEndCommandBuffer(G.cb);
    if (!rc)
        rc = vk_submit_wait(&G.c, G.cb, &err);
    uint64_t ts[2] = {0, 0};
    if (!rc)
        vkGetQueryPoolResults(G.c.dev, qp, 0, 2, sizeof ts, ts, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    vk_prog_free(&G.c, &prog);
    vkDestroyQueryPool(G.c.dev, qp, NULL);
    if (rc) {
        printf("# %s\n", err.msg);
        return -1;
    }
    return (double)(ts[1] - ts[0]) * G.c.ts_period_ns / 1000.0 / reps;
}

static void bandwidth(uint32_t reps)
{
    uint64_t bytes = 1ull << 30;
    if (bytes > G.c.max_range)
        bytes = G.c.max_range / 2;
    vk_buf a, o;
    err_t err;
    if (vk_arena_alloc(&G.c, &G.dev, bytes, "read", &a, &err) || vk_arena_alloc(&G.c, &G.dev, 1 << 20, "o", &o, &err)) {
        printf("# %s\n", err.msg);
        return;
    }
    uint32_t spec[] = {256};
    vk_call c = {.pipe = vk_pipe_get(&G.c, &G.pipes, "bw_read", spec, 1, &err), .name = "bw_read"};
    c.b[0] = a;
    c.b[1] = o;
    uint32_t n = (uint32_t)(bytes / 16), per = 4;
    c.push[0] = n;
    c.push[1] = per;
    c.groups[0] = (n + 256 * per - 1) / (256 * per);
    c.groups[1] = c.groups[2] = 1;
    double us = time_calls(&c, reps, true);
    printf("read %.0f MiB: %.1f us, %.0f GB/s\n", bytes / 1048576.0, us, bytes / us / 1e3);
    tu_reset_buffers();
}

static void mv_case(const char *name, uint32_t type, uint32_t K, uint32_t N, uint32_t nz, bool norm, bool glu,
                    uint32_t reps)
{
    vk_tensor t, u;
    uint32_t nmat = nz > 1 ? 64 : 1;
    uint64_t rb = tu_row_bytes(type, K);
    uint8_t *w = malloc(rb * N * nmat);
    tu_fill_random(type, w, (uint64_t)K * N * nmat);
    if (tu_tensor(type, K, N, nmat, w, &t) || (glu && tu_tensor(type, K, N, nmat, w, &u))) {
        free(w);
        return;
    }
    free(w);
    float *x = malloc(K * sizeof *x);
    for (uint32_t i = 0; i < K; i++)
        x[i] = tu_gauss();
    vk_buf bx = tu_host(K), by = tu_host((uint64_t)N * nz + 64), bn = tu_host(K), bi = tu_host(64);
    memcpy(bx.map, x, K * 4);
    memcpy(bn.map, x, K * 4);
    for (uint32_t z = 0; z < 16; z++)
        ((int32_t *)bi.map)[z] = (int32_t)(z * 13 % nmat);
    free(x);
    /* x in device memory, as in the engine */
    err_t err;
    vk_buf dx, dn;
    if (vk_arena_alloc(&G.c, &G.dev, K * 4, "x", &dx, &err) || vk_arena_alloc(&G.c, &G.dev, K * 4, "nw", &dn, &err) ||
        vk_upload_bytes(G.up, &dx, 0, bx.map, K * 4, &err) || vk_upload_bytes(G.up, &dn, 0, bn.map, K * 4, &err) ||
        vk_uploader_finish(G.up, &err)) {
        printf("# %s\n", err.msg);
        return;
    }
    vk_vec nv = {dn, 0}, idv = {bi, 0};
    vk_call c;
    int rc;
    if (glu) {
        vk_glu_args a = {.name = name, .gate = &t, .up = &u, .x = {dx, 0}, .norm = norm ? &nv : NULL, .eps = 1e-5f,
                         .h = {by, 0}, .h_z = N, .nz = nz, .ids = nz > 1 ? &idv : NULL};
        rc = vk_k_glu(&KB, &a, &c);
    } else {
        vk_mv_args a = {.name = name, .w = &t, .x = {dx, 0}, .y = {by, 0}, .y_z = N, .nz = nz,
                        .norm = norm ? &nv : NULL, .eps = 1e-5f, .ids = nz > 1 ? &idv : NULL};
        rc = vk_k_mv(&KB, &a, &c);
    }
    if (rc) {
        printf("# %s: %s\n", name, KERR.msg);
        return;
    }
    double us = time_calls(&c, reps, true);
    double mb = (double)rb * N * nz * (glu ? 2 : 1) / 1e6;
    printf("%-28s %8.2f MB %9.2f us %7.0f GB/s  (%u workgroups)\n", name, mb, us, mb * 1e3 / us,
           c.groups[0] * c.groups[1]);
    tu_reset_buffers();
}

int main(int argc, char **argv)
{
    uint32_t reps = argc > 1 ? (uint32_t)atoi(argv[1]) : 50;
    if (tu_gpu_open())
        return 1;
    KB = (vk_kb){&G.c, &G.pipes, &KERR};
    const char *e[] = {"GLMCHAT_MV_UPT", "GLMCHAT_MV_NR", "GLMCHAT_MV_WGS", "GLMCHAT_MV_CONV"};
    printf("# settings:");
    for (int i = 0; i < 4; i++)
        printf(" %s=%s", e[i], getenv(e[i]) ? getenv(e[i]) : "-");
    printf("\n");
    bandwidth(reps / 5 + 1);
    mv_case("moe_gate_up (4 experts)", QT_Q4_0, 2048, 1536, 4, true, true, reps);
    mv_case("attn_output 5120->2048", QT_Q4_0, 5120, 2048, 1, false, false, reps);
    mv_case("q4_0 2048->12288 norm", QT_Q4_0, 2048, 12288, 1, true, false, reps);
    mv_case("q4_0 2048->12288", QT_Q4_0, 2048, 12288, 1, false, false, reps);
    mv_case("attn_q_a 2048->768 norm", QT_Q4_0, 2048, 768, 1, true, false, reps);
    mv_case("head q6_k 2048->38720 norm", QT_Q6_K, 2048, 38720, 1, true, false, reps / 5 + 1);
    tu_gpu_close();
    return 0;
}
