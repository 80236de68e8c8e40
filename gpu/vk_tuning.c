/* vk_tuning.c: the tuning table (see vk_tuning.h).  Each knob names the
 * gpu/PERF.md run that chose its default; the runs also hold the figures. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vk.h"
#include "vk_tuning.h"

typedef struct {
    const char *name;
    size_t off;         /* of the field in vk_tuning */
    uint32_t def, lo, hi;
    const char *run;    /* the gpu/PERF.md run(s) that chose the default */
    const char *what;
} knob;

#define KNOB(f, def, lo, hi, run, what) {#f, offsetof(vk_tuning, f), def, lo, hi, run, what}

static const knob KNOBS[] = {
    KNOB(xs, 1, 0, 1, "runs 6-7", "x-stationary decode matvecs where they apply (0: the mv family)"),
    KNOB(xs_j, 8, 1, 32, "runs 6, 17", "most units of a row per lane (x-stationary)"),
    KNOB(xs_xreg, 64, 0, 256, "runs 6, 15", "inputs of a lane held in registers up to this many elements"),
    KNOB(xs_r, 0, 0, 8, "runs 6-7", "rows per pass (0: 4, Q6_K 2, halved for small grids)"),
    KNOB(xs_p, 0, 0, 256, "runs 15, 17", "passes per workgroup (0: doubled while the grid stays large)"),
    KNOB(xs_wgs, 0, 0, 1024, "runs 6-8, 18, 63", "x-stationary workgroup size (0: each kernel's own)"),
    KNOB(xs_pad, 25, 0, 75, "run 20", "largest team padding a row by at most this many % (0: least padding)"),
    KNOB(attn_fd, 1, 0, 1, "runs 14-15, 23", "attention on tensor cores (attn_fd; decode and prompt) where possible"),
    KNOB(attn_minchunk, 8, 1, 256, "run 11", "attn.comp: shortest chunk of a decode step"),
    KNOB(attn_sg, 48, 0, 1u << 20, "runs 7-8", "attn.comp: longest chunk scored by subgroups"),
    KNOB(attn_pu, 2, 1, 8, "runs 6, 11", "attn.comp: positions a subgroup scores together"),
    KNOB(fd_minchunk, 32, 16, 4096, "runs 14, 17", "attn_fd: shortest chunk (positions)"),
    KNOB(fd_chunks, 64, 1, 1024, "runs 14, 17, 19", "attn_fd: most chunks per token"),
    KNOB(batch_max, VK_TUNE_AUTO, 1, 2048, "issue 25", "largest prompt batch the memory plan chooses (-b wins)"),
    KNOB(coopmat, 1, 0, 1, "run 10", "prefill mat-mats on tensor cores (0: fp32, no fp16 range limit)"),
    KNOB(act16_out, 1, 0, 1, "runs 49-50", "prefill: o and the hidden states also in fp16 for their readers, where the writer runs on tensor cores"),
    KNOB(qkv_merge, 1, 0, 1, "run 16", "q_a and kv_a_mqa as one matrix where they can be"),
    KNOB(dep_flags, VK_TUNE_AUTO, 0, 511, "run 17", "decode steps joined by counters (bitmask; GLMCHAT_DEP_FLAGS)"),
    KNOB(dep_stall, 0, 0, 2, "runs 17, 30, 61", "fault injection: every counter wait and tagged-word poll gives up (1: in every recording; 2: until the counters are tried again once)"),
    KNOB(sync_retry, 256, 0, 1u << 20, "run 61", "after a dependency wait gave up: tokens on barriers before counters and tagged words are tried again, doubled after each give-up, at most 4 times (0: barriers for good at the first)"),
    KNOB(ll, VK_TUNE_AUTO, 0, 1, "runs 30, 32, 39", "decode qkv and q as tagged words (LL)"),
    KNOB(hx, 2, 0, 2, "run 40", "experts in host memory: hand-over (0 blocking waits, 1 polled, 2 timeline semaphores)"),
    KNOB(hx_rows, 0, 0, 4096, "run 40", "experts in host memory: CPU gate/up rows per item (0: even over the threads)"),
    KNOB(hx_stream, 64, 0, 1u << 20, "run 44", "experts in host memory: prompt batches of this many tokens or more copy each host layer's experts to the GPU, until both ways were timed, then the faster (0: never)"),
    KNOB(typed_spv, VK_TUNE_AUTO, 0, 1, "runs 41-42", "kernels built from their copy for the weight type (auto: on Mesa's drivers)"),
    KNOB(prof_every, 4, 0, 1000, "run 23a", "sampled profiler: a decoded token in this many times one layer (0: none)"),
    KNOB(nx_kv, 1, 0, 1, "run 55", "drafting: NextN rows before a call's last run up to their cache row alone (0: whole rows)"),
    KNOB(idot, 1, 0, 2, "runs 57-58", "decode matvecs (attn_vb too) of Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q4_K/Q5_K/Q6_K/IQ4_NL/IQ4_XS/MXFP4 weights by 8-bit integer dot products, the input quantized per 32 as llama.cpp's CUDA decode does (1: where the driver calls them accelerated; 2: wherever the device has them; 0: floats)"),
};
enum { N_KNOBS = sizeof KNOBS / sizeof KNOBS[0] };
_Static_assert(N_KNOBS * sizeof(uint32_t) == sizeof(vk_tuning), "every field of vk_tuning has a row in KNOBS");

static uint32_t *field(vk_tuning *t, const knob *k)
{
    return (uint32_t *)((char *)t + k->off);
}

static const uint32_t *cfield(const vk_tuning *t, const knob *k)
{
    return (const uint32_t *)((const char *)t + k->off);
}

void vk_tuning_default(vk_tuning *t)
{
    for (int i = 0; i < N_KNOBS; i++)
        *field(t, &KNOBS[i]) = KNOBS[i].def;
}

static const knob *find(const char *key, size_t n)
{
    for (int i = 0; i < N_KNOBS; i++)
        if (strlen(KNOBS[i].name) == n && strncmp(KNOBS[i].name, key, n) == 0)
            return &KNOBS[i];
    return NULL;
}

/* Sets knob k from text v (what: where it came from, for the error). */
static int set_value(vk_tuning *t, const knob *k, const char *v, const char *what, err_t *err)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end || errno == ERANGE || x < k->lo || x > k->hi)
        return err_set(err, "%s: '%s' is not a number from %u to %u -- %s", what, v, k->lo, k->hi, k->what);
    *field(t, k) = (uint32_t)x;
    return 0;
}

int vk_tuning_set(vk_tuning *t, const char *key_value, err_t *err)
{
    const char *eq = strchr(key_value, '=');
    const knob *k = eq ? find(key_value, (size_t)(eq - key_value)) : NULL;
    if (!k) {
        char keys[512];
        size_t at = 0;
        for (int i = 0; i < N_KNOBS && at < sizeof keys; i++)
            at += (size_t)snprintf(keys + at, sizeof keys - at, "%s%s", i ? ", " : "", KNOBS[i].name);
        if (!eq)
            return err_set(err, "--tune: '%s' is not KEY=VALUE (keys: %s)", key_value, keys);
        return err_set(err, "--tune: unknown key '%.*s' (keys: %s)", (int)(eq - key_value), key_value, keys);
    }
    char what[64];
    snprintf(what, sizeof what, "--tune %s", k->name);
    return set_value(t, k, eq + 1, what, err);
}

int vk_tuning_fill(vk_tuning *t, const char *const *overrides, uint32_t n_overrides, err_t *err)
{
    vk_tuning_default(t);
    const char *env = getenv("GLMCHAT_DEP_FLAGS");
    if (env && *env && set_value(t, find("dep_flags", 9), env, "GLMCHAT_DEP_FLAGS", err))
        return -1;
    for (uint32_t i = 0; i < n_overrides; i++)
        if (vk_tuning_set(t, overrides[i], err))
            return -1;
    return 0;
}

void vk_tuning_describe(const vk_tuning *t, char *buf, size_t n)
{
    size_t at = 0;
    if (n)
        buf[0] = 0;
    for (int i = 0; i < N_KNOBS && at < n; i++) {
        uint32_t v = *cfield(t, &KNOBS[i]);
        if (v != KNOBS[i].def)
            at += (size_t)snprintf(buf + at, n - at, "%s%s=%u", at ? " " : "", KNOBS[i].name, v);
    }
}

void vk_tune_print(FILE *f)
{
    fprintf(f, "%-14s %8s %-12s %-13s %s\n", "key", "default", "range", "chosen by", "what");
    for (int i = 0; i < N_KNOBS; i++) {
        const knob *k = &KNOBS[i];
        char def[16], range[24];
        if (k->def == VK_TUNE_AUTO)
            snprintf(def, sizeof def, "auto");
        else
            snprintf(def, sizeof def, "%u", k->def);
        snprintf(range, sizeof range, "%u-%u", k->lo, k->hi);
        fprintf(f, "%-14s %8s %-12s %-13s %s\n", k->name, def, range, k->run, k->what);
    }
    fprintf(f, "(runs: gpu/PERF.md; set with --tune KEY=VALUE, repeatable)\n");
}

int vk_tune_check(const char *key_value, err_t *err)
{
    vk_tuning t;
    vk_tuning_default(&t);
    return vk_tuning_set(&t, key_value, err);
}
