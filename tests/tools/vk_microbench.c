/* vk_microbench: times single decode kernels on the default Vulkan device,
 * for tuning on the GPU machine (not a test: prints figures, exits 0).
 *
 *   vk_microbench [reps] [KEY=VALUE ...]
 *
 * Each case is recorded `reps` times back to back with a barrier between
 * (like the decode graph's dependent steps) between two timestamps; the
 * figure is the mean per call and the bytes of weights it streamed per
 * microsecond.  A case cycles through enough copies of its weights (>= 400
 * MB; the expert cases through 16 disjoint sets of experts, and copies of
 * the shared expert) that the GPU's L2 cache (50 MB on an H200) cannot hold
 * them between calls, as in the decode graph where every layer's weights
 * are different.
 * KEY=VALUE arguments set fields of the tuning table the kernel builders
 * read (gpu/vk_tuning.h, the keys of `glmchat bench --tune help`), so a
 * shell loop over settings compares variants.  The first line is the
 * device's plain streaming-read bandwidth.  MB_ONLY=TEXT runs the cases
 * whose name contains TEXT; MB_BWSIZES, MB_GRIDSYNC, MB_ATTN, MB_MIXED=1
 * run the other studies; MB_PIPE_STATS=1 prints the compiler's statistics
 * of each case's pipeline where the driver has them; MB_NOBW=1 skips the
 * bandwidth line. */
#include "shaders/bench/pc_bench.h"
#include "spv_tool_table.h"
#include "vk_kernels.h"
#include "vk_testutil.h"

static vk_kb KB;
static vk_tuning TUNE;
static err_t KERR;

#define MAXC 256

/* "shader[spec...]" of a call's pipeline (which kernel and geometry ran). */
static const char *pipe_desc(const vk_call *c)
{
    static char buf[160];
    snprintf(buf, sizeof buf, "?");
    for (uint32_t i = 0; i < G.pipes.n; i++)
        if (G.pipes.e[i].pipe == c->pipe) {
            int n = snprintf(buf, sizeof buf, "%s", G.pipes.e[i].shader->name);
            for (uint32_t k = 0; k < G.pipes.e[i].nspec && n < (int)sizeof buf - 12; k++)
                n += snprintf(buf + n, sizeof buf - n, "%c%u", k ? ',' : '[', G.pipes.e[i].spec[k]);
            snprintf(buf + n, sizeof buf - n, "]");
        }
    return buf;
}

static double time_calls(const vk_call *c, uint32_t nc, uint32_t reps, bool barriers)
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
    /* one untimed round first (caches, clocks) */
    for (uint32_t i = 0; i < nc; i++) {
        vk_rec_call(&r, &c[i]);
        vk_rec_barrier(&r);
    }
    vkCmdWriteTimestamp(G.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, 0);
    for (uint32_t i = 0; i < reps; i++) {
        vk_rec_call(&r, &c[i % nc]);
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

/* The read buffer (1 GiB, or half the largest range) and a small output
 * for the bw_read kernel; false (and a line) when they cannot be had. */
static bool bw_buffers(uint64_t *total, vk_buf *a, vk_buf *o)
{
    err_t err;
    *total = 1ull << 30;
    if (*total > G.c.max_range)
        *total = G.c.max_range / 2;
    if (vk_arena_alloc(&G.c, &G.dev, *total, "read", a, &err) || vk_arena_alloc(&G.c, &G.dev, 1 << 20, "o", o, &err)) {
        printf("# %s\n", err.msg);
        return false;
    }
    return true;
}

/* bw_read over `bytes` of a at offset off, `per` 16-byte loads per thread. */
static vk_call bw_call(VkPipeline pl, vk_buf a, uint64_t off, uint64_t bytes, vk_buf o, uint32_t per)
{
    vk_call c = {.pipe = pl, .name = "bw_read"};
    c.b[BW_B_IN] = a;
    c.b[BW_B_IN].off += off;
    c.b[BW_B_IN].size = bytes;
    c.b[BW_B_OUT] = o;
    uint32_t n = (uint32_t)(bytes / 16);
    pc_bw_read pc = {.n = n, .per = per};
    VK_PUSH(&c, pc);
    c.groups[0] = (n + 256 * per - 1) / (256 * per);
    c.groups[1] = c.groups[2] = 1;
    return c;
}

static void bandwidth(uint32_t reps)
{
    uint64_t bytes;
    vk_buf a, o;
    err_t err;
    if (!bw_buffers(&bytes, &a, &o))
        return;
    uint32_t spec[] = {256};
    vk_call c = bw_call(vk_pipe_get(&G.c, &G.pipes, &spv_tool_table[SPV_TOOL_BW_READ], spec, 1, &err), a, 0, bytes, o, 4);
    double us = time_calls(&c, 1, reps, true);
    printf("read %.0f MiB: %.1f us, %.0f GB/s\n", bytes / 1048576.0, us, bytes / us / 1e3);
    tu_reset_buffers();
}

/* bw_read over sizes a decode step reads (MB_BWSIZES=1): the floor of a
 * dependent step that streams that many bytes, each call on another part
 * of a 1 GiB buffer (past the L2), `per` loads per thread. */
static void bw_sizes(uint32_t reps)
{
    uint64_t total;
    vk_buf a, o;
    err_t err;
    if (!bw_buffers(&total, &a, &o))
        return;
    uint32_t spec[] = {256};
    VkPipeline pl = vk_pipe_get(&G.c, &G.pipes, &spv_tool_table[SPV_TOOL_BW_READ], spec, 1, &err);
    static const double mbs[] = {0.5, 1, 2, 4, 9, 14, 18, 64};
    static const uint32_t pers[] = {1, 2, 4, 8};
    for (size_t si = 0; si < sizeof mbs / sizeof mbs[0]; si++)
        for (size_t pi = 0; pi < sizeof pers / sizeof pers[0]; pi++) {
            uint64_t bytes = (uint64_t)(mbs[si] * 1e6) / 16 * 16;
            uint32_t ncopy = (uint32_t)(total / bytes) < 32 ? (uint32_t)(total / bytes) : 32;
            static vk_call c[32];
            for (uint32_t i = 0; i < ncopy; i++)
                c[i] = bw_call(pl, a, i * bytes, bytes, o, pers[pi]);
            double us = time_calls(c, ncopy, reps, true);
            printf("read %6.2f MB, %u loads/thread: %7.2f us  %5.0f GB/s\n", bytes / 1e6, pers[pi], us, bytes / us / 1e3);
        }
    tu_reset_buffers();
}

/* A device buffer of n floats with Gaussian values (n_ones: 1 + small noise). */
static vk_buf dev_vec(uint64_t n, bool ones)
{
    float *v = malloc(n * sizeof *v);
    for (uint64_t i = 0; i < n; i++)
        v[i] = ones ? 1.0f + 0.1f * tu_gauss() : tu_gauss();
    vk_buf b = {0};
    err_t err;
    if (vk_arena_alloc(&G.c, &G.dev, n * 4, "vec", &b, &err) || vk_upload_bytes(G.up, &b, 0, v, n * 4, &err) ||
        vk_uploader_finish(G.up, &err))
        printf("# %s\n", err.msg);
    free(v);
    return b;
}

/* `copies` uploads of one random tensor (n_mat matrices of N x K). */
static int tensors(uint32_t type, uint32_t K, uint32_t N, uint32_t n_mat, uint32_t copies, vk_tensor *t)
{
    uint64_t n = (uint64_t)K * N * n_mat;
    uint8_t *w = malloc(tu_row_bytes(type, K) * N * n_mat);
    tu_fill_random(type, w, n);
    int rc = 0;
    for (uint32_t i = 0; i < copies && !rc; i++)
        rc = tu_tensor(type, K, N, n_mat, w, &t[i]);
    free(w);
    return rc;
}

static uint32_t copies_for(uint64_t bytes)
{
    uint64_t c = (400ull << 20) / (bytes ? bytes : 1) + 1;
    return c > MAXC ? MAXC : (uint32_t)c;
}

typedef enum { K_MV, K_GLU, K_DOWN, K_ROUTER } kind;

typedef struct {
    const char *name;
    kind k;
    uint32_t type, K, N, nz;     /* nz: heads (mv) or routed experts (glu, down) */
    bool norm, acc;
    bool shared;                 /* down: with the shared expert; glu: the shared expert alone (nz 0) */
} mcase;

/* A case's calls (one per weight copy), its buffers left allocated. */
typedef struct {
    vk_call c[MAXC];
    uint32_t nc;
    double mb;
    bool ok;
} built;

static bool build_case(const mcase *m, built *b)
{
    static vk_tensor t[MAXC], u[MAXC], ts[MAXC], us[MAXC];
    b->ok = false;
    uint32_t nmat = m->k == K_GLU || m->k == K_DOWN ? 64 : m->nz ? m->nz : 1;
    uint64_t per = tu_row_bytes(m->type, m->K) * m->N;  /* one matrix */
    uint64_t touched = per * (m->k == K_GLU ? 2 * m->nz + (m->shared ? 2 : 0)
                              : m->k == K_DOWN ? m->nz + (m->shared ? 1 : 0) : nmat);
    uint64_t stored = per * nmat * (m->k == K_GLU ? 2 : 1);
    bool moe = m->k == K_GLU || m->k == K_DOWN;
    uint32_t nc = moe ? 16 : copies_for(stored), nt = moe ? 1 : nc;
    bool bad = tensors(m->type, m->K, m->N, nmat, nt, t) || (m->k == K_GLU && tensors(m->type, m->K, m->N, nmat, nt, u));
    if (m->shared && !bad)
        bad = tensors(m->type, m->K, m->N, 1, nc, ts) || (m->k == K_GLU && tensors(m->type, m->K, m->N, 1, nc, us));
    if (bad) {
        printf("# %s: upload failed\n", m->name);
        return false;
    }
    uint32_t xn = m->K * (m->k == K_DOWN ? m->nz + 1 : m->nz ? m->nz : 1);
    vk_buf x = dev_vec(xn + 64, false), nw = dev_vec(m->K + 64, true);
    vk_buf y = dev_vec((uint64_t)m->N * (m->nz + 1) + 64, false), lg = dev_vec(4096, false);
    vk_buf ids = dev_vec(64, false), wts = dev_vec(64, true), cnt = dev_vec(64, false);
    int32_t idv[64]; /* a permutation of the 64 experts: call i takes idv[4i..4i+3] */
    for (int z = 0; z < 64; z++)
        idv[z] = z * 13 % 64;
    err_t err;
    uint32_t zero[64] = {0};
    if (vk_upload_bytes(G.up, &ids, 0, idv, sizeof idv, &err) || vk_upload_bytes(G.up, &cnt, 0, zero, sizeof zero, &err) ||
        vk_uploader_finish(G.up, &err)) {
        printf("# %s\n", err.msg);
        return false;
    }
    vk_vec nv = {nw, 0};
    vk_call *c = b->c;
    int rc = 0;
    for (uint32_t i = 0; i < nc && !rc; i++) {
        uint32_t ti = moe ? 0 : i;
        vk_vec idvv = {ids, moe ? 4 * (i % 16) : 0};
        if (m->k == K_GLU) {
            vk_glu_args a = {.name = m->name, .gate = &t[ti], .up = &u[ti], .x = {x, 0}, .norm = m->norm ? &nv : NULL,
                             .eps = 1e-5f, .h = {y, 0}, .h_z = m->N, .nz = m->nz, .ids = &idvv};
            if (m->shared) /* the shared expert's gate/up: one matrix pair, no ids */
                a = (vk_glu_args){.name = m->name, .gate = &ts[i], .up = &us[i], .x = {x, 0},
                                  .norm = m->norm ? &nv : NULL, .eps = 1e-5f, .h = {y, 0}, .h_z = m->N, .nz = 1};
            rc = vk_k_glu(&KB, &a, &c[i]);
        } else if (m->k == K_DOWN) {
            vk_moe_down_args a = {.name = m->name, .down = &t[ti], .shared = m->shared ? &ts[i] : NULL, .h = {x, 0},
                                  .h_z = m->K, .nz = m->nz, .ids = idvv, .wts = {wts, idvv.off}, .y = {y, 0}};
            rc = vk_k_moe_down(&KB, &a, &c[i]);
        } else if (m->k == K_ROUTER) {
            vk_router_args a = {.w = &t[i], .x = {x, 0}, .norm = {nw, 0}, .eps = 1e-5f, .logits = {lg, 0},
                                .ids = {ids, 32}, .wts = {wts, 32}, .counter = {cnt, 0}, .n_used = 4, .gating = 2,
                                .nz = 1, .norm_w = true, .scale = 1.8f};
            rc = vk_k_router(&KB, &a, &c[i]);
        } else {
            vk_mv_args a = {.name = m->name, .w = &t[i], .x = {x, 0}, .x_z = m->nz > 1 ? m->K : 0, .y = {y, 0},
                            .y_z = m->N, .nz = m->nz, .norm = m->norm ? &nv : NULL, .eps = 1e-5f,
                            .accumulate = m->acc};
            rc = vk_k_mv(&KB, &a, &c[i]);
        }
    }
    if (rc) {
        printf("# %s: %s\n", m->name, KERR.msg);
        return false;
    }
    b->nc = nc;
    b->mb = touched / 1e6;
    b->ok = true;
    return true;
}

/* The compiler's statistics of a call's pipeline (MB_PIPE_STATS=1). */
static void print_stats(const vk_call *c)
{
    char st[1024];
    vk_pipe_stats(&G.c, c->pipe, st, sizeof st);
    if (st[0])
        printf("    stats: %s\n", st);
}

static void report(const mcase *m, const built *b, double us)
{
    const vk_call *c = b->c;
    printf("%-34s %8.2f MB %9.2f us %7.0f GB/s  (%u x %u groups, %u copies, %s)\n", m->name, b->mb, us,
           b->mb * 1e3 / us, c[0].groups[0], c[0].groups[1], b->nc, pipe_desc(&c[0]));
    print_stats(&c[0]);
}

static void run_case(const mcase *m, uint32_t reps)
{
    static built b;
    if (build_case(m, &b))
        report(m, &b, time_calls(b.c, b.nc, reps, true));
    tu_reset_buffers();
}

/* The cases one after another, as a decode layer runs them (different
 * kernels back to back, each on its own weights), against the sum of
 * their isolated times: what a graph costs beyond its kernels. */
static void run_mixed(const mcase *cases, size_t n, uint32_t reps)
{
    static built b[16];
    static vk_call seq[16 * MAXC];
    double sum = 0;
    uint32_t ns = 0;
    for (size_t i = 0; i < n && i < 16; i++) {
        if (!build_case(&cases[i], &b[i]))
            continue;
        double us = time_calls(b[i].c, b[i].nc, reps, true);
        sum += us;
        report(&cases[i], &b[i], us);
    }
    uint32_t nok = 0;
    for (size_t i = 0; i < n && i < 16; i++)
        nok += b[i].ok;
    for (uint32_t r = 0; r < 8; r++)
        for (size_t i = 0; i < n && i < 16; i++)
            if (b[i].ok)
                seq[ns++] = b[i].c[r % b[i].nc];
    double per = nok ? time_calls(seq, ns, ns * 4, true) * nok : 0;
    printf("mixed: one round of the cases above %.2f us, their isolated times %.2f us (%+.2f us)\n", per, sum,
           per - sum);
    tu_reset_buffers();
}

/* Decode attention of GLM-4.7-Flash's shape (20 heads, kv_lora 512, rope
 * 64, f16 cache) at several context lengths: the attention kernel alone and
 * followed by attn_vb (the combine + v_b), each call on one of 16 caches
 * (as the graph's layers: at 4096 positions, 75 MB, past the L2). */
static void run_attn(uint32_t reps)
{
    const uint32_t nh = 20, kv = 512, rope = 64, nope = 192, vh = 256, n_ctx = 8192, NCOPY = 16;
    static const uint32_t nkvs[] = {16, 64, 128, 512, 1024, 4096};
    for (size_t ni = 0; ni < sizeof nkvs / sizeof nkvs[0]; ni++) {
        uint32_t n_kv = nkvs[ni];
        err_t err;
        vk_attn_geom g;
        if (vk_attn_geom_init(&KB, &g, nh, kv, rope, nope, vh, true, n_ctx, &err)) {
            printf("# attn: %s\n", err.msg);
            return;
        }
        uint32_t nc, cl, RS = g.RS;
        vk_attn_chunks(&g, n_kv, &nc, &cl);
        vk_buf par = tu_host(64);
        uint32_t *p = (uint32_t *)par.map;
        p[VKP_POS0] = n_kv - 1;
        p[VKP_NTOK] = 1;
        p[VKP_NKV] = n_kv;
        p[VKP_NCHUNK] = nc;
        p[VKP_CHUNK] = cl;
        uint64_t rows = (uint64_t)n_ctx + VK_CACHE_PAD_ROWS, ch = rows * RS;
        uint16_t *hv = malloc(ch * sizeof *hv);
        for (uint64_t i = 0; i < ch; i++)
            hv[i] = tu_f2h(i / RS < (uint64_t)n_ctx ? 0.5f * tu_gauss() : 0.0f);
        vk_buf cache[16];
        int rc = 0;
        for (uint32_t i = 0; i < NCOPY && !rc; i++)
            rc = vk_arena_alloc(&G.c, &G.dev, ch * 2, "cache", &cache[i], &err) ||
                 vk_upload_bytes(G.up, &cache[i], 0, hv, ch * 2, &err);
        free(hv);
        if (rc || vk_uploader_finish(G.up, &err)) {
            printf("# attn: %s\n", err.msg);
            return;
        }
        vk_buf qa = dev_vec((uint64_t)nh * RS, false), o = dev_vec((uint64_t)nh * vh + 64, false);
        vk_buf part;
        if (vk_arena_alloc(&G.c, &G.dev, 4ull * g.max_chunks * vk_attn_part_heads(&g) * (kv + VK_PART_HDR), "part", &part, &err)) {
            printf("# attn: %s\n", err.msg);
            return;
        }
        vk_tensor vb;
        if (tensors(QT_Q4_0, kv, vh, nh, 1, &vb)) {
            printf("# attn: v_b upload failed\n");
            return;
        }
        static vk_call ca[16], cv[32];
        for (uint32_t i = 0; i < NCOPY && !rc; i++) {
            vk_attn_args aa = {.g = &g, .q_abs = {qa, 0}, .q_abs_z = nh * RS, .cache = {cache[i], 0}, .part = {part, 0},
                               .chunk_cap = g.max_chunks, .kq_scale = 0.07f, .params = par, .n_chunks = nc,
                               .nz = 1};
            vk_attn_vb_args va = {.g = &g, .v_b = &vb, .part = {part, 0}, .chunk_cap = g.max_chunks, .params = par,
                                  .o = {o, 0}, .o_z = nh * vh, .nz = 1};
            rc = vk_k_attn(&KB, &aa, &ca[i]) || vk_k_attn_vb(&KB, &va, &cv[2 * i + 1]);
            cv[2 * i] = ca[i];
        }
        if (rc) {
            printf("# attn: %s\n", KERR.msg);
            return;
        }
        double ta = time_calls(ca, NCOPY, reps, true), tv = time_calls(cv, 2 * NCOPY, 2 * reps, true) * 2;
        printf("attn n_kv %5u: %3u chunks of %4u  attn %7.2f us  attn + attn_vb %7.2f us  (%s)\n", n_kv, nc, cl, ta,
               tv, pipe_desc(&ca[0]));
        if (ni == 0) {
            print_stats(&ca[0]);
            print_stats(&cv[1]);
        }
        tu_reset_buffers();
    }
}

/* A chain of `reps` calls of c, each pair joined by: 0 nothing, 1 a
 * pipeline barrier (the graph's), 2 an event set after the first and
 * waited on before the second (then reset).  Mean per call, in us. */
static double time_sync(const vk_call *c, uint32_t reps, int mode)
{
    err_t err;
    VkQueryPool qp;
    VkEvent ev;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = 2};
    VkEventCreateInfo ei = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    if (vkCreateQueryPool(G.c.dev, &qi, NULL, &qp) != VK_SUCCESS)
        return -1;
    if (vkCreateEvent(G.c.dev, &ei, NULL, &ev) != VK_SUCCESS) {
        vkDestroyQueryPool(G.c.dev, qp, NULL);
        return -1;
    }
    vk_prog prog = {0};
    vk_rec r;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkBeginCommandBuffer(G.cb, &bi);
    vkCmdResetQueryPool(G.cb, qp, 0, 2);
    vk_rec_begin(&r, &G.c, &prog, G.cb, VK_PROF_OFF, 0, VK_NULL_HANDLE, 0, NULL, &err);
    vk_rec_call(&r, c);
    vk_rec_barrier(&r);
    vkCmdWriteTimestamp(G.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, 0);
    for (uint32_t i = 0; i < reps; i++) {
        vk_rec_call(&r, c);
        if (mode == 1) {
            vk_rec_barrier(&r);
        } else if (mode == 2) {
            vkCmdSetEvent(G.cb, ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
            vkCmdWaitEvents(G.cb, 1, &ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 1,
                            &mb, 0, NULL, 0, NULL);
            vkCmdResetEvent(G.cb, ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
        }
    }
    vk_rec_barrier(&r);
    vkCmdWriteTimestamp(G.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, 1);
    int rc = vk_rec_end(&r);
    vkEndCommandBuffer(G.cb);
    if (!rc)
        rc = vk_submit_wait(&G.c, G.cb, &err);
    uint64_t ts[2] = {0, 0};
    if (!rc)
        vkGetQueryPoolResults(G.c.dev, qp, 0, 2, sizeof ts, ts, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    vk_prog_free(&G.c, &prog);
    vkDestroyEvent(G.c.dev, ev, NULL);
    vkDestroyQueryPool(G.c.dev, qp, NULL);
    if (rc) {
        printf("# %s\n", err.msg);
        return -1;
    }
    return (double)(ts[1] - ts[0]) * G.c.ts_period_ns / 1000.0 / reps;
}

/* Grid-wide barriers inside one dispatch (MB_GRIDSYNC=1, shaders/bench/grid_sync.comp)
 * against dependent dispatches: a dispatch of `groups` workgroups doing R
 * rounds, per round, next to the same dispatch with no rounds, per call with
 * a pipeline barrier after each.  Workgroups: one and two per compute unit
 * (all resident: the spin needs them to be). */
static void run_gridsync(uint32_t reps)
{
    err_t err;
    vk_buf ctr;
    uint32_t zero[4] = {0};
    if (vk_arena_alloc(&G.c, &G.dev, 256, "counter", &ctr, &err) || vk_upload_bytes(G.up, &ctr, 0, zero, 16, &err) ||
        vk_uploader_finish(G.up, &err)) {
        printf("# %s\n", err.msg);
        return;
    }
    static const uint32_t wgs[] = {256, 128};
    for (size_t wi = 0; wi < 2; wi++)
        for (uint32_t per_sm = 1; per_sm <= 2; per_sm++) {
            uint32_t spec[] = {wgs[wi]};
            vk_call c = {.pipe = vk_pipe_get(&G.c, &G.pipes, &spv_tool_table[SPV_TOOL_GRID_SYNC], spec, 1, &err),
                         .name = "grid_sync"};
            if (!c.pipe) {
                printf("# %s\n", err.msg);
                return;
            }
            c.b[GRID_B_COUNTERS] = ctr;
            c.groups[0] = G.c.n_sm_hint * per_sm;
            c.groups[1] = c.groups[2] = 1;
            pc_grid_sync pc = {.rounds = 0};
            VK_PUSH(&c, pc);
            double t0 = time_calls(&c, 1, reps, true);
            /* the unsynchronized chain below leaves the counter anywhere: zero it */
            if (vk_upload_bytes(G.up, &ctr, 0, zero, 16, &err) || vk_uploader_finish(G.up, &err)) {
                printf("# %s\n", err.msg);
                return;
            }
            pc.rounds = 200;
            VK_PUSH(&c, pc);
            double t1 = time_calls(&c, 1, reps / 10 + 1, true);
            printf("grid_sync %4u x %3u threads: empty dispatch + barrier %6.2f us; per grid barrier in one "
                   "dispatch %6.3f us\n", c.groups[0], wgs[wi], t0, (t1 - t0) / 200);
            pc.rounds = 0;
            VK_PUSH(&c, pc);
            printf("  empty dispatches of %u x %u: %6.2f us each with no sync, %6.2f with a pipeline barrier, "
                   "%6.2f with an event set + waited\n", c.groups[0], wgs[wi], time_sync(&c, reps, 0),
                   time_sync(&c, reps, 1), time_sync(&c, reps, 2));
        }
    /* failed spins (a grid that was not all resident), copied to the host */
    vk_buf h = tu_host(4);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkBufferCopy region = {.srcOffset = ctr.off, .dstOffset = h.off, .size = 16};
    if (vkBeginCommandBuffer(G.cb, &bi) != VK_SUCCESS) {
        printf("# vkBeginCommandBuffer failed\n");
    } else {
        vkCmdCopyBuffer(G.cb, ctr.buf, h.buf, 1, &region);
        if (vkEndCommandBuffer(G.cb) != VK_SUCCESS || vk_submit_wait(&G.c, G.cb, &err))
            printf("# reading the counter back failed\n");
        else
            printf("grid_sync: %u failed spins, counter left at %u / %u\n", ((uint32_t *)h.map)[2],
                   ((uint32_t *)h.map)[0], ((uint32_t *)h.map)[1]);
    }
    tu_reset_buffers();
}

int main(int argc, char **argv)
{
    uint32_t reps = 50;
    vk_tuning_default(&TUNE);
    for (int i = 1; i < argc; i++) {
        err_t err;
        if (strchr(argv[i], '=')) {
            if (vk_tuning_set(&TUNE, argv[i], &err)) {
                fprintf(stderr, "vk_microbench: %s\n", err.msg);
                return 2;
            }
        } else if (argv[i][0] >= '1' && argv[i][0] <= '9') {
            reps = (uint32_t)strtoul(argv[i], NULL, 10);
        } else {
            fprintf(stderr, "vk_microbench: '%s' is neither a repetition count nor KEY=VALUE\n", argv[i]);
            return 2;
        }
    }
    const char *ps = getenv("MB_PIPE_STATS");
    if (tu_gpu_open(ps && strcmp(ps, "1") == 0))
        return 1;
    KB = (vk_kb){&G.c, &G.pipes, &TUNE, &KERR};
    char set[256];
    vk_tuning_describe(&TUNE, set, sizeof set);
    printf("# tuning: %s\n", *set ? set : "defaults");
    if (!getenv("MB_NOBW"))
        bandwidth(reps / 5 + 1);
    /* GLM-4.7-Flash's decode matvecs (Q4_0 file) */
    static const mcase cases[] = {
        {"moe_gate_up 4 experts", K_GLU, QT_Q4_0, 2048, 1536, 4, true, false, false},
        {"shexp_gate_up 2048->1536 norm", K_GLU, QT_Q4_0, 2048, 1536, 0, true, false, true},
        {"moe_down 4 experts + shared", K_DOWN, QT_Q4_0, 1536, 2048, 4, false, false, true},
        {"attn_q_a 2048->768 norm", K_MV, QT_Q4_0, 2048, 768, 1, true, false, false},
        {"attn_kv_a 2048->576 norm", K_MV, QT_Q4_0, 2048, 576, 1, true, false, false},
        {"attn_q_b 768->5120 norm", K_MV, QT_Q4_0, 768, 5120, 1, true, false, false},
        {"attn_k_b 20 x 192->512", K_MV, QT_Q4_0, 192, 512, 20, false, false, false},
        {"attn_output 5120->2048 acc", K_MV, QT_Q4_0, 5120, 2048, 1, false, true, false},
        {"router F32 2048->64 + top-4", K_ROUTER, QT_F32, 2048, 64, 1, true, false, false},
        {"head Q6_K 2048->154880 norm", K_MV, QT_Q6_K, 2048, 154880, 1, true, false, false},
        /* where the gate/up's time goes (MB_ONLY=probe): without the norm,
         * and as one plain matrix of the same rows */
        {"probe gate_up 4 experts no norm", K_GLU, QT_Q4_0, 2048, 1536, 4, false, false, false},
        {"probe Q4_0 2048->12288 norm", K_MV, QT_Q4_0, 2048, 12288, 1, true, false, false},
        {"probe Q4_0 2048->12288", K_MV, QT_Q4_0, 2048, 12288, 1, false, false, false},
        {"probe down 4 experts (no shared)", K_DOWN, QT_Q4_0, 1536, 2048, 4, false, false, false},
        {"probe Q4_0 1536->8192", K_MV, QT_Q4_0, 1536, 8192, 1, false, false, false},
    };
    if (getenv("MB_BWSIZES")) {
        bw_sizes(reps);
        tu_gpu_close();
        return 0;
    }
    if (getenv("MB_GRIDSYNC")) {
        run_gridsync(reps);
        tu_gpu_close();
        return 0;
    }
    if (getenv("MB_ATTN")) {
        run_attn(reps);
        tu_gpu_close();
        return 0;
    }
    const char *only = getenv("MB_ONLY");
    if (getenv("MB_MIXED")) {
        /* a decode layer's matvecs (the head is once per token) */
        run_mixed(cases, 9, reps); /* the nine layer kernels */
        tu_gpu_close();
        return 0;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!only || strstr(cases[i].name, only))
            run_case(&cases[i], cases[i].N > 100000 ? reps / 5 + 1 : reps);
    tu_gpu_close();
    return 0;
}
