/* cmd_info.c: `glmchat info -m FILE`: the model summary.
 *
 * Reads only the GGUF header and tensor table (mmap; no weight data is
 * touched), so it answers at once even for a 17 GB file. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/backends.h"
#include "common/cli_common.h"
#include "commands.h"
#include "cpu/cpu_pack.h"
#include "model/model.h"
#include "base/text_safe.h"
#include "vk.h"

static void info_usage(FILE *f)
{
    fprintf(f, "usage: glmchat info -m FILE [--backend NAME] [--gpu-mem SIZE] [--n-cpu-moe N] [-c N] [--device N]\n"
               "                   [--kv-type T]\n"
               "Prints the model's architecture, dimensions, attention and expert shape,\n"
               "RoPE scaling, a census of tensor types, the mix (each tensor kind's types by\n"
               "layer), and the parameters and bytes read per decoded token.\n"
               "With --backend or --gpu-mem, also what the backend would place where: on\n"
               "Vulkan the device memory of the weights, of the KV cache for -c N tokens (or\n"
               "the largest context that fits) and of the activations, against what the\n"
               "device has free or --gpu-mem allows, and the layers whose routed experts stay\n"
               "in host memory (--n-cpu-moe N, or as many as the device's memory needs), and\n"
               "the pinned host memory the chat's engine reserves -- or the one line saying\n"
               "what would fit.\n");
}

/* Strings from the file (its name, general.name, the architecture): inert
 * and on one line, so a downloaded GGUF cannot drive the terminal. */
static void put_meta(const char *s)
{
    sbuf b = {0};
    tsafe_one_line(&b, s, strlen(s));
    fputs(sbuf_str(&b), stdout);
    sbuf_free(&b);
}

/* 1234567 -> "1,234,567" */
static const char *grouped(uint64_t v, char *buf, size_t len)
{
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%" PRIu64, v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = 0;
    return buf;
}

static const char *human_bytes(double b, char *buf, size_t len)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

/* llama.cpp's llama_ftype names for general.file_type. */
static const char *file_type_name(uint32_t ft)
{
    static const struct { uint32_t id; const char *name; } names[] = {
        {0, "F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"},
        {10, "Q2_K"}, {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"},
        {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"}, {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"},
        {22, "IQ3_XS"}, {23, "IQ3_XXS"}, {24, "IQ1_S"}, {25, "IQ4_NL"}, {26, "IQ3_S"}, {27, "IQ3_M"},
        {28, "IQ2_S"}, {29, "IQ2_M"}, {30, "IQ4_XS"}, {31, "IQ1_M"}, {32, "BF16"}, {36, "TQ1_0"}, {37, "TQ2_0"},
        {38, "MXFP4_MOE"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].id == ft)
            return names[i].name;
    return "other";
}

static void print_shape(const model *m)
{
    const model_config *c = &m->cfg;
    uint32_t n_moe = c->n_expert ? c->n_layer - c->n_dense_lead : 0;
    printf("blocks        %u run (%u dense + %u MoE)", c->n_layer, c->n_layer - n_moe, n_moe);
    if (c->n_nextn)
        printf(" + %u NextN/MTP (run only to draft: --draft)", c->n_nextn);
    printf("\nembedding     %u\n", c->n_embd);
    printf("attention     MLA, %u heads; ", c->n_head);
    if (c->q_lora_rank)
        printf("q_lora %u; ", c->q_lora_rank);
    else
        printf("q uncompressed (attn_q); ");
    printf("kv_lora %u; qk %u nope + %u rope; v_head %u; kq_scale %.6g\n", c->kv_lora_rank, c->qk_nope,
           c->qk_rope, c->v_head, (double)c->kq_scale);
    printf("kv layout     %s\n", c->legacy_kv_b ? "legacy attn_kv_b (split at load)" : "attn_k_b + attn_v_b");
    if (c->n_dense_lead)
        printf("dense ffn     %u\n", c->n_ff_dense);
    if (c->n_expert) {
        printf("experts       %u routed (%u per token) of ffn %u, %u shared%s\n", c->n_expert, c->n_expert_used,
               c->n_ff_exp, c->n_expert_shared, c->merged_gate_up ? "; merged ffn_gate_up_exps" : "");
        bool bias = false;
        for (uint32_t il = 0; il < c->n_layer; il++)
            bias |= m->layers[il].exp_probs_b.data != NULL;
        printf("gating        %s%s, weights %snormalized",
               c->gating == MODEL_GATING_SIGMOID ? "sigmoid" : "softmax", bias ? " + selection bias" : "",
               c->expert_weights_norm ? "" : "not ");
        if (c->expert_weights_scale != 0.0f && c->expert_weights_scale != 1.0f)
            printf(", scaled by %g", (double)c->expert_weights_scale);
        printf("\n");
    }
    printf("rope          base %g, %u dims, ", (double)c->rope_base, c->qk_rope);
    if (c->yarn)
        printf("YaRN factor %g (original context %u, beta %g/%g)\n", (double)(1.0f / c->rope_freq_scale),
               c->n_ctx_orig, (double)c->yarn_beta_fast, (double)c->yarn_beta_slow);
    else if (c->rope_freq_scale != 1.0f)
        printf("linear scaling %g\n", (double)(1.0f / c->rope_freq_scale));
    else
        printf("no scaling\n");
    printf("context       %u (trained)\n", c->n_ctx_train);
    printf("vocab         %u\n", c->n_vocab);
}

static void print_census(const model *m)
{
    model_census cs;
    model_census_compute(m, &cs);
    char a[32], b[32], h[32];
    printf("tensors       %zu\n\n", gguf_n_tensors(m->gguf));
    printf("  %-7s %8s %18s %7s\n", "type", "tensors", "bytes", "%");
    for (int t = 0; t < QT_COUNT; t++) {
        if (!cs.tensors_by_type[t])
            continue;
        printf("  %-7s %8u %18s %6.2f%%\n", quant_type_name((uint32_t)t), cs.tensors_by_type[t],
               grouped(cs.bytes_by_type[t], a, sizeof a),
               cs.weight_bytes ? 100.0 * (double)cs.bytes_by_type[t] / (double)cs.weight_bytes : 0.0);
    }
    printf("  %-7s %8zu %18s %6.2f%%\n\n", "total", gguf_n_tensors(m->gguf), grouped(cs.weight_bytes, a, sizeof a),
           100.0);
    printf("params        %s total, %s active per token\n", grouped(cs.total_params, a, sizeof a),
           grouped(cs.active_params, b, sizeof b));
    printf("active bytes  %s per decoded token (%s)\n", grouped(cs.active_bytes, a, sizeof a),
           human_bytes((double)cs.active_bytes, h, sizeof h));
}

/* ---- the mix: each tensor kind's types by layer ------------------------------------ */

/* A tensor kind: the name without "blk.N." (one entry for the non-block
 * tensors), with the type of each block's tensor (0xFF: none). */
typedef struct {
    char name[64];
    uint8_t *type_of; /* per block; the non-block tensors use [0] */
    bool per_block;
} mix_kind;

/* "a-b" runs of the blocks of kind k whose tensor has type t; the count. */
static uint32_t layer_ranges(const mix_kind *k, uint32_t n_blocks, uint8_t t, char *buf, size_t len)
{
    size_t o = 0;
    uint32_t n = 0;
    buf[0] = 0;
    for (uint32_t b = 0; b < n_blocks; b++) {
        if (k->type_of[b] != t)
            continue;
        uint32_t e = b;
        while (e + 1 < n_blocks && k->type_of[e + 1] == t)
            e++;
        n += e - b + 1;
        int w = e > b ? snprintf(buf + o, len - o, "%s%u-%u", o ? "," : "", b, e)
                      : snprintf(buf + o, len - o, "%s%u", o ? "," : "", b);
        if (w < 0 || (size_t)w >= len - o) {
            snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
            o = len - 1;
        } else {
            o += (size_t)w;
        }
        b = e;
    }
    return n;
}

/* Prints, per tensor kind in file order, each type it has and in which
 * blocks: a file's mix (llama-quantize's K-quant rules, dynamic files) at a
 * glance.  Returns -1 when out of memory. */
static int print_mix(const model *m)
{
    uint32_t n_blocks = m->cfg.n_layer + m->cfg.n_nextn, cap = 64, nk = 0;
    if (n_blocks == 0)
        n_blocks = 1;
    mix_kind *kinds = calloc(cap, sizeof *kinds);
    int rc = kinds ? 0 : -1;
    for (size_t i = 0; !rc && i < gguf_n_tensors(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        const char *name = t->name, *rest = name;
        unsigned blk = 0;
        int used = 0;
        bool per_block = sscanf(name, "blk.%u.%n", &blk, &used) == 1 && used > 0 && blk < n_blocks;
        if (per_block)
            rest = name + used;
        uint32_t k = 0;
        while (k < nk && (kinds[k].per_block != per_block || strcmp(kinds[k].name, rest) != 0))
            k++;
        if (k == nk) {
            if (nk == cap) {
                mix_kind *grown = realloc(kinds, 2 * cap * sizeof *kinds);
                if (!grown) {
                    rc = -1;
                    break;
                }
                kinds = grown;
                cap *= 2;
            }
            memset(&kinds[nk], 0, sizeof kinds[nk]);
            snprintf(kinds[nk].name, sizeof kinds[nk].name, "%s", rest);
            kinds[nk].per_block = per_block;
            if (!(kinds[nk].type_of = malloc(n_blocks))) {
                rc = -1;
                break;
            }
            memset(kinds[nk].type_of, 0xFF, n_blocks);
            nk++;
        }
        kinds[k].type_of[per_block ? blk : 0] = (uint8_t)(t->type < QT_COUNT ? t->type : 0xFE);
    }
    if (!rc)
        printf("\nmix           types by tensor kind and layer\n");
    for (uint32_t k = 0; !rc && k < nk; k++) {
        const mix_kind *mk = &kinds[k];
        bool first = true;
        for (uint32_t t = 0; t <= 0xFE; t++) {
            char ranges[512];
            uint32_t n = mk->per_block ? layer_ranges(mk, n_blocks, (uint8_t)t, ranges, sizeof ranges)
                                       : mk->type_of[0] == t;
            if (!n)
                continue;
            const char *tn = t == 0xFE ? "?" : quant_type_name(t);
            char name[4 * sizeof mk->name]; /* a tensor name from the file, inert */
            tsafe_one_line_buf(name, sizeof name, mk->name, strlen(mk->name));
            if (mk->per_block)
                printf("  %-26s %-7s %3u: %s\n", first ? name : "", tn, n, ranges);
            else
                printf("  %-26s %s\n", name, tn);
            first = false;
        }
    }
    for (uint32_t k = 0; kinds && k < nk; k++)
        free(kinds[k].type_of);
    free(kinds);
    return rc;
}

/* Where --backend would place the model (the usage text says what);
 * 0, or 1 with the reason on stderr. */
static int print_placement(const char *path, const cli_options *o)
{
    model m;
    err_t err = {{0}};
    if (model_load(&m, path, &err) < 0) {
        fprintf(stderr, "glmchat: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    const engine_backend *be = app_choose_backend(o->backend, &m, NULL, 0, &err);
    if (!be) {
        rc = 1;
    } else if (be != &vk_engine_backend) {
        char kv[64];
        snprintf(kv, sizeof kv, o->n_ctx ? "for %u tokens" : "for the largest context half the free memory holds",
                 o->n_ctx);
        printf("\nplacement     the %s backend: weights in host memory (the mapped file), KV cache %s\n", be->name,
               kv);
        const cpu_kernels *k = be == &cpu_engine_backend ? cpu_kernels_best(&err) : NULL;
        uint64_t packed = k ? cpu_pack_model_bytes(k, &m) : 0;
        if (packed) /* what cpu_forward.c's pack_weights makes at open */
            printf("  packed      %.1f MiB more: the Q4_0 / Q5_0 / Q8_0 / IQ4_NL matrices copied with 16 rows interleaved for the %s "
                   "kernels (each where it fits in memory)\n",
                   (double)packed / (1024.0 * 1024.0), k->name);
    } else {
        engine_params p;
        engine_params_default(&p);
        p.kv = cli_kv_type(o, be);
        p.device_index = o->device;
        p.gpu_mem = o->gpu_mem;
        p.n_cpu_moe = o->n_cpu_moe;
        p.n_ctx = o->n_ctx; /* 0: the largest that fits, as the chat takes it */
        p.n_batch = o->n_batch ? o->n_batch : ENGINE_BATCH_AUTO; /* as the chat takes it */
        p.tune = o->tune;
        p.n_tune = o->n_tune;
        vk_placement pl;
        if (vk_plan_placement(&m, &p, &pl, &err) == 0) {
            char line[480], host[320] = "nothing (the file is read once, at load)", slot[32], stream[160] = "";
            vk_placement_line(&pl, line, sizeof line);
            if (pl.stream_slot)
                snprintf(stream, sizeof stream, "; prompt batches of %u+ tokens (once timed, the faster way) copy "
                         "them to the GPU a layer at a time, through a %s slot", pl.stream_min, human_bytes((double)pl.stream_slot, slot, sizeof slot));
            if (pl.host_layers) /* the line's last clause says which */
                snprintf(host, sizeof host, "the routed experts of %u MoE layer%s (%.1f MiB, read from the mapped "
                         "file, computed by the CPU%s)", pl.host_layers, pl.host_layers > 1 ? "s" : "",
                         (double)pl.host_bytes / (1024.0 * 1024.0), stream);
            printf("\nplacement     Vulkan on %s\n  device      %s\n  host        %s\n", pl.device, line, host);
            /* what cpu_moe_host.c packs at each host layer's first use (where
             * prompts stream the experts, only when memory holds the copies
             * beside the file's pages: vk_hostmoe.c may_pack) */
            const cpu_kernels *k = pl.host_layers ? cpu_kernels_best(&err) : NULL;
            uint64_t packed = 0;
            for (uint32_t il = pl.host_first; k && il <= pl.host_last && il < m.cfg.n_layer; il++) {
                const mtensor *e[3] = {&m.layers[il].gate_exps, &m.layers[il].up_exps, &m.layers[il].down_exps};
                for (int i = 0; i < 3; i++)
                    packed += cpu_pack_wanted(k, e[i]) ? cpu_pack_bytes(e[i]) : 0;
            }
            if (packed)
                printf("  packed      %.1f MiB more: their Q4_0 / Q5_0 / Q8_0 / IQ4_NL copied with 16 rows interleaved for the %s kernels, "
                       "each layer at its first use (where it fits in memory%s)\n",
                       (double)packed / (1024.0 * 1024.0), k->name,
                       pl.stream_slot ? " beside the file's pages, which streamed prompts read" : "");
            char pinned[32];
            printf("  pinned      %s of host-visible buffers (read-backs, the params and sampling words%s)\n",
                   human_bytes((double)pl.host_visible, pinned, sizeof pinned),
                   pl.stream_slot ? ", the experts' two staging buffers" : "");
        } else {
            rc = 1;
        }
    }
    if (rc) {
        fflush(stdout);
        fprintf(stderr, "glmchat: %s\n", err.msg);
    }
    model_free(&m);
    return rc;
}

int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    cli_options o;
    cli_options_init(&o);
    bool place = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        err_t perr = {{0}};
        int r;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            info_usage(stdout);
            cli_options_free(&o);
            return 0;
        } else if (a[0] != '-' && !path) {
            path = a;
        } else if ((r = cli_parse_common(&o, argc, argv, &i, &perr)) > 0 && strcmp(a, "--tokens") != 0) {
            place |= !strcmp(a, "--backend") || !strcmp(a, "--gpu-mem") || !strcmp(a, "--n-cpu-moe");
        } else {
            if (r < 0)
                fprintf(stderr, "glmchat: info: %s\n", perr.msg);
            else
                fprintf(stderr, "glmchat: info: unknown option or missing value: '%s'\n", a);
            info_usage(stderr);
            cli_options_free(&o);
            return 2;
        }
    }
    cli_options_free(&o);
    if (o.model_path && !path)
        path = o.model_path;
    if (!path) {
        fprintf(stderr, "glmchat: info: no model given (-m FILE)\n");
        return 2;
    }
    model m;
    err_t err = {{0}};
    /* A file holding a type glmchat cannot compute with is still shown
     * (its census names the type); the refusal comes last, and the exit
     * status says the file cannot be run. */
    err_t refused = {{0}};
    bool runnable = model_load_ex(&m, path, MODEL_LOAD_NO_CONVERT, &refused) == 0;
    if (!runnable && model_load_ex(&m, path, MODEL_LOAD_NO_CONVERT | MODEL_LOAD_ANY_TYPE, &err) < 0) {
        fprintf(stderr, "glmchat: %s\n", err.msg);
        return 1;
    }
    const model_config *c = &m.cfg;
    char a[32], h[32];
    printf("file          ");
    put_meta(path);
    printf("\n");
    printf("size          %s bytes (%s), GGUF v%u\n", grouped(gguf_file_size(m.gguf), a, sizeof a),
           human_bytes((double)gguf_file_size(m.gguf), h, sizeof h), gguf_version(m.gguf));
    printf("architecture  ");
    put_meta(c->arch);
    printf("\n");
    if (c->name[0]) {
        printf("name          ");
        put_meta(c->name);
        printf("\n");
    }
    if (gguf_has_key(m.gguf, "general.file_type"))
        printf("file type     %s (%u)\n", file_type_name(c->file_type), c->file_type);
    print_shape(&m);
    print_census(&m);
    int rc = print_mix(&m);
    if (rc)
        fprintf(stderr, "glmchat: info: out of memory listing the mix\n");
    model_free(&m);
    if (!runnable) {
        fflush(stdout);
        fprintf(stderr, "glmchat: %s\n", refused.msg);
        return 1;
    }
    if (!rc && place)
        rc = print_placement(path, &o);
    return rc ? 1 : 0;
}
