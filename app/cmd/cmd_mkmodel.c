/* cmd_mkmodel.c: `glmchat mkmodel`, synthetic models in the real GGUF layout.
 *
 *   glmchat mkmodel --preset NAME --type TYPE -o FILE [--seed S] [shape options]
 *   glmchat mkmodel --preset NAME --type TYPE --list
 *
 * Shape options use the fixtures' generator names (fixture.json ->
 * generator), so a fixture's shape can be rebuilt from its argument list. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "model/model.h"
#include "format/quant.h"
#include "model/synth.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glmchat mkmodel --preset NAME --type TYPE -o FILE [options]\n"
            "       glmchat mkmodel --preset NAME --type TYPE --list\n"
            "\n"
            "Writes a model with random weights in the exact layout of llama.cpp's\n"
            "GLM-4.7-Flash / DeepSeek-V2 GGUFs (keys, tensor names, shapes, per-tensor types).\n"
            "\n"
            "  --preset NAME        %s\n"
            "  --type TYPE          a file type, named as llama-quantize names them:\n"
            "                         F32 F16 BF16: as llama.cpp's converter writes them\n"
            "                         Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M\n"
            "                         Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4_MOE IQ3_XXS IQ2_XXS IQ1_S\n"
            "                         IQ1_M: llama-quantize's per-tensor types (no importance matrix)\n"
            "                         IQ3_S IQ2_XS IQ2_S: every weight of that type (as --pure)\n"
            "                         Q4_K_XL Q3_K_XL Q2_K_XL: dynamic mixes in the style of the UD\n"
            "                         files (more bits for attention, shared expert, dense layer)\n"
            "                       aliases: Q3_K, Q4_K, Q5_K (the _M ones), MXFP4, dynamic (Q4_K_XL)\n"
            "  -o, --output FILE    where to write (removed again on any error); an existing\n"
            "                       file is refused unless --force\n"
            "  --force              replace an existing FILE\n"
            "  --seed S             weights seed (default 1)\n"
            "  --threads N          generator threads (default: all CPUs)\n"
            "  --list, --dry-run    print the tensor table and totals, write nothing\n"
            "  --quiet              no progress line\n"
            "\n"
            "shape (override the preset):\n"
            "  --hidden --layers --dense-layers --heads --q-lora --kv-lora --qk-nope --qk-rope\n"
            "  --v-head --ff --moe-ff --experts --experts-used --shared --vocab --ctx N\n"
            "  --yarn F,CTX,BF,BS,MSCALE   YaRN factor, original context, beta fast/slow, mscale_all_dim\n"
            "  --no-yarn\n"
            "layout variants of real files:\n"
            "  --merged-gate-up     one ffn_gate_up_exps tensor instead of gate + up\n"
            "  --legacy-kv-b        attn_kv_b instead of attn_k_b + attn_v_b\n"
            "  --nextn N            N extra NextN/MTP blocks (block_count includes them)\n"
            "  --no-gating-key      leave out expert_gating_func\n",
            synth_preset_names());
}

static int parse_u32(const char *opt, const char *s, uint32_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-' || v > UINT32_MAX) {
        fprintf(stderr, "glmchat: mkmodel: %s wants a non-negative integer, got '%s'\n", opt, s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_yarn(const char *s, synth_config *c)
{
    float f, bf, bs;
    double ms;
    unsigned ctx;
    char tail;
    if (sscanf(s, "%f,%u,%f,%f,%lf%c", &f, &ctx, &bf, &bs, &ms, &tail) != 5 || !(f > 1.0f) || ctx == 0) {
        fprintf(stderr, "glmchat: mkmodel: --yarn wants FACTOR,ORIG_CTX,BETA_FAST,BETA_SLOW,MSCALE_ALL_DIM "
                        "(factor > 1), got '%s'\n", s);
        return -1;
    }
    c->yarn_factor = f;
    c->yarn_orig_ctx = ctx;
    c->yarn_beta_fast = bf;
    c->yarn_beta_slow = bs;
    c->yarn_mscale_all_dim = ms;
    c->ctx = (uint32_t)(f * (float)ctx + 0.5f); /* as DeepSeek-V2's config: factor x original */
    return 0;
}

/* The numeric shape options and where they go. */
static uint32_t *shape_field(synth_config *c, const char *opt)
{
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
        {"--hidden", offsetof(synth_config, hidden)},       {"--layers", offsetof(synth_config, layers)},
        {"--dense-layers", offsetof(synth_config, dense_layers)}, {"--heads", offsetof(synth_config, heads)},
        {"--q-lora", offsetof(synth_config, q_lora)},       {"--kv-lora", offsetof(synth_config, kv_lora)},
        {"--qk-nope", offsetof(synth_config, qk_nope)},     {"--qk-rope", offsetof(synth_config, qk_rope)},
        {"--v-head", offsetof(synth_config, v_head)},       {"--ff", offsetof(synth_config, ff)},
        {"--moe-ff", offsetof(synth_config, moe_ff)},       {"--experts", offsetof(synth_config, experts)},
        {"--experts-used", offsetof(synth_config, experts_used)}, {"--shared", offsetof(synth_config, shared)},
        {"--vocab", offsetof(synth_config, vocab)},         {"--ctx", offsetof(synth_config, ctx)},
        {"--nextn", offsetof(synth_config, nextn)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strcmp(opt, fields[i].name) == 0)
            return (uint32_t *)((char *)c + fields[i].off);
    return NULL;
}

/* The header's size: the metadata and tensor table as the writer lays them
 * out, up to the aligned start of the data. */
static uint64_t header_bytes(const synth_config *c, const synth_table *tab, err_t *err)
{
    gguf_writer *w = gguf_writer_new();
    uint64_t n = 0;
    if (w && synth_set_metadata(c, w, err) == 0) {
        int rc = 0;
        for (size_t i = 0; rc == 0 && i < tab->n; i++)
            rc = gguf_writer_add_tensor(w, tab->t[i].name, tab->t[i].type, tab->t[i].n_dims, tab->t[i].ne, err);
        if (rc == 0 && gguf_writer_begin(w, "/dev/null", err) == 0)
            n = gguf_writer_bytes_written(w);
    }
    gguf_writer_free(w);
    return n;
}

/* --list: one line per tensor, then the census (as `info` counts it). */
static int print_table(const synth_config *c)
{
    synth_table tab;
    err_t err;
    if (synth_build_table(c, &tab, &err) < 0) {
        fprintf(stderr, "glmchat: mkmodel: %s\n", err.msg);
        return 1;
    }
    model_config mc = {.n_layer = c->layers, .n_expert = c->experts, .n_expert_used = c->experts_used};
    model_census cs = {0};
    uint64_t file = header_bytes(c, &tab, &err);
    for (size_t i = 0; i < tab.n; i++) {
        const synth_tensor *t = &tab.t[i];
        char shape[96];
        int k = snprintf(shape, sizeof shape, "%" PRIu64, t->ne[0]);
        for (uint32_t d = 1; d < t->n_dims; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, ",%" PRIu64, t->ne[d]);
        printf("tensor %-40s %-5s %-18s %" PRIu64 "\n", t->name, quant_type_name(t->type), shape, t->bytes);
        gguf_tensor g = {.name = t->name, .n_dims = t->n_dims, .type = t->type, .size = t->bytes};
        memcpy(g.ne, t->ne, sizeof g.ne);
        model_census_add(&cs, &mc, &g, false);
        file += (t->bytes + 31) / 32 * 32; /* the writer pads each tensor to the alignment (32) */
    }
    for (uint32_t ty = 0; ty < QT_COUNT; ty++)
        if (cs.tensors_by_type[ty])
            printf("type %s: %" PRIu32 " tensors, %" PRIu64 " bytes\n", quant_type_name(ty), cs.tensors_by_type[ty],
                   cs.bytes_by_type[ty]);
    printf("total: %zu tensors, %" PRIu64 " bytes\n", tab.n, cs.weight_bytes);
    printf("params: %" PRIu64 " total, %" PRIu64 " active per token\n", cs.total_params, cs.active_params);
    printf("active bytes: %" PRIu64 " per decoded token\n", cs.active_bytes);
    printf("file: %" PRIu64 " bytes\n", file);
    synth_table_free(&tab);
    return 0;
}

/* A progress line on a terminal (the generator calls it twice a second). */
static void progress(void *user, uint64_t done, uint64_t total)
{
    (void)user;
    fprintf(stderr, "\rmkmodel: %5.1f%% (%.2f of %.2f GB)", total ? 100.0 * (double)done / (double)total : 100.0,
            (double)done / 1e9, (double)total / 1e9);
    if (done == total)
        fprintf(stderr, "\n");
}

/* The command line, before the preset is applied. */
typedef struct {
    const char *preset, *type, *out;
    bool list, quiet, help, force;
    struct {
        const char *opt;
        uint32_t val;
    } over[32]; /* shape overrides, applied after the preset */
    int n_over;
    uint32_t seed, threads;
    int yarn; /* 1 set, -1 off, 0 as the preset */
    const char *yarn_arg;
    bool merged, legacy, no_gating;
} mk_args;

/* 0, or the exit status of a usage error (already reported). */
static int parse_args(int argc, char **argv, mk_args *a)
{
    memset(a, 0, sizeof *a);
    a->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        synth_config probe;
        bool flag = true;
        if (!strcmp(o, "-h") || !strcmp(o, "--help"))
            a->help = true;
        else if (!strcmp(o, "--list") || !strcmp(o, "--dry-run"))
            a->list = true;
        else if (!strcmp(o, "--quiet"))
            a->quiet = true;
        else if (!strcmp(o, "--force"))
            a->force = true;
        else if (!strcmp(o, "--merged-gate-up"))
            a->merged = true;
        else if (!strcmp(o, "--legacy-kv-b"))
            a->legacy = true;
        else if (!strcmp(o, "--no-gating-key"))
            a->no_gating = true;
        else if (!strcmp(o, "--no-yarn"))
            a->yarn = -1;
        else
            flag = false;
        if (flag)
            continue;
        if (!val) {
            fprintf(stderr, "glmchat: mkmodel: unknown option or missing value: '%s' (see --help)\n", o);
            return 2;
        }
        i++;
        if (!strcmp(o, "--preset")) {
            a->preset = val;
        } else if (!strcmp(o, "--type")) {
            a->type = val;
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            a->out = val;
        } else if (!strcmp(o, "--yarn")) {
            a->yarn = 1;
            a->yarn_arg = val;
        } else if (!strcmp(o, "--seed") || !strcmp(o, "--threads")) {
            if (parse_u32(o, val, !strcmp(o, "--seed") ? &a->seed : &a->threads) < 0)
                return 2;
        } else if (shape_field(&probe, o) && a->n_over < (int)(sizeof a->over / sizeof a->over[0])) {
            a->over[a->n_over].opt = o;
            if (parse_u32(o, val, &a->over[a->n_over].val) < 0)
                return 2;
            a->n_over++;
        } else {
            fprintf(stderr, "glmchat: mkmodel: unknown option '%s' (see --help)\n", o);
            return 2;
        }
    }
    return 0;
}

/* The preset with the command line's type, seed, shape and layout applied. */
static int make_config(const mk_args *a, synth_config *cfg)
{
    err_t err;
    if (synth_preset(a->preset, cfg, &err) < 0) {
        fprintf(stderr, "glmchat: mkmodel: %s\n", err.msg);
        return 2;
    }
    int ft = synth_ftype_from_name(a->type);
    if (ft < 0) {
        fprintf(stderr, "glmchat: mkmodel: unknown type '%s' (types: %s)\n", a->type, synth_ftype_names());
        return 2;
    }
    cfg->ftype = (uint32_t)ft;
    cfg->seed = a->seed;
    for (int k = 0; k < a->n_over; k++)
        *shape_field(cfg, a->over[k].opt) = a->over[k].val;
    if (a->yarn == -1)
        cfg->yarn_factor = 0;
    if (a->yarn == 1 && parse_yarn(a->yarn_arg, cfg) < 0)
        return 2;
    cfg->merged_gate_up = a->merged;
    cfg->legacy_kv_b = a->legacy;
    cfg->no_gating_key = a->no_gating;
    if (synth_validate(cfg, &err) < 0) {
        fprintf(stderr, "glmchat: mkmodel: %s\n", err.msg);
        return 2;
    }
    return 0;
}

int cmd_mkmodel(int argc, char **argv)
{
    mk_args a;
    synth_config cfg;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    if (a.help) {
        usage(stdout);
        return 0;
    }
    if (!a.preset || !a.type || (!a.out && !a.list)) {
        fprintf(stderr, "glmchat: mkmodel: --preset, --type and -o FILE (or --list) are required\n");
        usage(stderr);
        return 2;
    }
    if ((rc = make_config(&a, &cfg)) != 0)
        return rc;
    if (a.list)
        return print_table(&cfg);
    /* A model file is big and slow to make again: never replaced by accident
     * (a device such as /dev/null is written to, as asked). */
    struct stat out_st;
    if (!a.force && stat(a.out, &out_st) == 0 && S_ISREG(out_st.st_mode)) {
        fprintf(stderr, "glmchat: mkmodel: %s exists; not replacing it (--force replaces it)\n", a.out);
        return 1;
    }
    synth_options opt = {.n_threads = (int)a.threads, .progress = !a.quiet && isatty(2) ? progress : NULL};
    synth_stats st;
    err_t err;
    if (synth_write(&cfg, a.out, &opt, &st, &err) < 0) {
        fprintf(stderr, "glmchat: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s: %s %s, %" PRIu64 " bytes in %.2f s (%.2f GB/s)\n", a.out, a.preset,
           synth_ftype_name(cfg.ftype), st.bytes, st.seconds, st.seconds > 0 ? (double)st.bytes / st.seconds / 1e9 : 0.0);
    return 0;
}
