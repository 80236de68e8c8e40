/* synth.c: synthetic models in the real GLM-4.7-Flash / DeepSeek-V2 layout.
 *
 * Sections in pipeline order: presets; the tensor table (names, shapes,
 * converter order; the file types and llama-quantize's type rules and
 * order are in synth_types.c); the metadata and tokenizer; the streaming
 * writer (worker threads fill chunks with synth_blocks.c's random blocks,
 * one thread writes them in order).
 */
#include "synth.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "format/quant.h"
#include "synth_internal.h"

/* ======================================================================
 * Presets and file types
 * ====================================================================== */

static void flavour_glm(synth_config *c)
{
    c->glm = true;
    c->rope_base = 1e6f;
    c->rms_eps = 1e-5f;
    c->expert_weights_scale = 1.8f;
}

static void flavour_lite(synth_config *c)
{
    c->glm = false;
    c->rope_base = 1e4f;
    c->rms_eps = 1e-6f;
    c->expert_weights_scale = 1.0f;
    /* DeepSeek-V2-Lite's YaRN settings */
    c->yarn_factor = 40.0f;
    c->yarn_orig_ctx = 4096;
    c->yarn_beta_fast = 32.0f;
    c->yarn_beta_slow = 1.0f;
    c->yarn_mscale_all_dim = 0.707;
}

typedef struct {
    const char *name;
    bool glm;
    const char *general_name;
    uint32_t hidden, layers, dense, heads, q_lora, kv_lora, nope, rope, v_head, ff, moe_ff, experts, used, shared,
        vocab, ctx;
} preset;

static const preset presets[] = {
    /* the fixtures' shapes (tests/data/models/ * /fixture.json) */
    {"tiny-glm", true, "tiny GLM 4.7 Flash random", 256, 3, 1, 4, 64, 64, 32, 16, 40, 96, 32, 8, 4, 1, 324, 4096},
    {"tiny-dsv2lite", false, "tiny DeepSeek V2 Lite random", 64, 3, 1, 4, 0, 32, 32, 16, 24, 96, 32, 8, 2, 2, 324,
     163840},
    /* the app's built-in demo: GLM-flavoured, a few MB, K-quant friendly */
    {"demo", true, "glmchat demo (random GLM 4.7 Flash layout)", 256, 4, 1, 4, 128, 128, 64, 32, 64, 768, 128, 16, 4,
     1, 324, 8192},
    /* GLM-4.7-Flash itself */
    {"glm47-flash", true, "GLM 4.7 Flash (synthetic random weights)", 2048, 47, 1, 20, 768, 512, 192, 64, 256,
     10240, 1536, 64, 4, 1, 154880, 202752},
};

int synth_preset(const char *name, synth_config *cfg, err_t *err)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        if (strcmp(p->name, name) != 0)
            continue;
        memset(cfg, 0, sizeof *cfg);
        if (p->glm)
            flavour_glm(cfg);
        else
            flavour_lite(cfg);
        snprintf(cfg->name, sizeof cfg->name, "%s", p->general_name);
        cfg->hidden = p->hidden;
        cfg->layers = p->layers;
        cfg->dense_layers = p->dense;
        cfg->heads = p->heads;
        cfg->q_lora = p->q_lora;
        cfg->kv_lora = p->kv_lora;
        cfg->qk_nope = p->nope;
        cfg->qk_rope = p->rope;
        cfg->v_head = p->v_head;
        cfg->ff = p->ff;
        cfg->moe_ff = p->moe_ff;
        cfg->experts = p->experts;
        cfg->experts_used = p->used;
        cfg->shared = p->shared;
        cfg->vocab = p->vocab;
        cfg->ctx = p->ctx;
        cfg->ftype = SYNTH_FT_F32;
        cfg->seed = 1;
        return 0;
    }
    return err_set(err, "unknown preset '%s' (presets: %s)", name, synth_preset_names());
}

const char *synth_preset_names(void) { return "tiny-glm, tiny-dsv2lite, demo, glm47-flash"; }

int synth_validate(const synth_config *c, err_t *err)
{
    if (!synth_ftype_known(c->ftype))
        return err_set(err, "unknown file type %" PRIu32, c->ftype);
    if (!c->hidden || !c->layers || !c->heads || !c->kv_lora || !c->qk_nope || !c->v_head || !c->vocab)
        return err_set(err, "hidden, layers, heads, kv-lora, qk-nope, v-head and vocab must be > 0");
    if (c->qk_rope == 0 || c->qk_rope % 2)
        return err_set(err, "qk-rope must be even and > 0 (got %" PRIu32 ")", c->qk_rope);
    if (c->dense_layers > c->layers)
        return err_set(err, "dense-layers %" PRIu32 " exceeds layers %" PRIu32, c->dense_layers, c->layers);
    if (c->dense_layers && !c->ff)
        return err_set(err, "dense layers need --ff > 0");
    bool moe = c->dense_layers < c->layers || c->nextn > 0;
    if (moe && (!c->experts || !c->moe_ff || !c->experts_used || c->experts_used > c->experts))
        return err_set(err, "MoE layers need experts > 0, moe-ff > 0 and 0 < experts-used <= experts (got %" PRIu32
                       " of %" PRIu32 ")", c->experts_used, c->experts);
    if (c->vocab < 256 + 22 && !c->no_tokenizer)
        return err_set(err, "vocab %" PRIu32 " too small: the tokenizer needs 256 byte tokens + 22 added tokens",
                       c->vocab);
    /* Keep every dimension product far from overflow (and from absurd files). */
    const uint32_t dims[] = {c->hidden, c->heads, c->q_lora, c->kv_lora, c->qk_nope, c->qk_rope, c->v_head, c->ff,
                             c->moe_ff, c->experts, c->shared, c->vocab};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > (1u << 20))
            return err_set(err, "a dimension (%" PRIu32 ") exceeds 2^20", dims[i]);
    if (c->layers + c->nextn > 1024)
        return err_set(err, "too many layers (%" PRIu32 ")", c->layers + c->nextn);
    return 0;
}

/* ======================================================================
 * The tensor table
 * ====================================================================== */

typedef struct {
    synth_table *tab;
    size_t cap;
    int failed;
} table_builder;

static void add(table_builder *b, synth_kind kind, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void add(table_builder *b, synth_kind kind, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                const char *fmt, ...)
{
    if (b->failed)
        return;
    if (b->tab->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        synth_tensor *t = realloc(b->tab->t, cap * sizeof *t);
        if (!t) {
            b->failed = 1;
            return;
        }
        b->tab->t = t;
        b->cap = cap;
    }
    synth_tensor *t = &b->tab->t[b->tab->n++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->kind = kind;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = n_dims > 2 ? ne2 : 1;
    t->ne[3] = 1;
    /* Matrices: rms 1/sqrt(fan_in) with fan_in = ne[0] keeps activations O(1). */
    t->rms = kind == SYNTH_WEIGHT ? (float)(1.0 / sqrt((double)ne0)) : 0.0f;
}

#define W SYNTH_WEIGHT
#define N SYNTH_NORM

/* One block in the converter's order (llama.cpp's deepseek2 tensor mapping). */
static void add_block(table_builder *b, const synth_config *c, uint32_t il)
{
    uint64_t H = c->hidden, q_dim = (uint64_t)c->heads * (c->qk_nope + c->qk_rope);
    add(b, N, 1, H, 0, 0, "blk.%u.attn_norm.weight", il);
    if (c->q_lora)
        add(b, N, 1, c->q_lora, 0, 0, "blk.%u.attn_q_a_norm.weight", il);
    add(b, N, 1, c->kv_lora, 0, 0, "blk.%u.attn_kv_a_norm.weight", il);
    if (c->q_lora) {
        add(b, W, 2, H, c->q_lora, 0, "blk.%u.attn_q_a.weight", il);
        add(b, W, 2, c->q_lora, q_dim, 0, "blk.%u.attn_q_b.weight", il);
    } else {
        add(b, W, 2, H, q_dim, 0, "blk.%u.attn_q.weight", il);
    }
    add(b, W, 2, H, (uint64_t)c->kv_lora + c->qk_rope, 0, "blk.%u.attn_kv_a_mqa.weight", il);
    if (c->legacy_kv_b) {
        add(b, W, 2, c->kv_lora, (uint64_t)c->heads * (c->qk_nope + c->v_head), 0, "blk.%u.attn_kv_b.weight", il);
    } else {
        add(b, W, 3, c->qk_nope, c->kv_lora, c->heads, "blk.%u.attn_k_b.weight", il);
        add(b, W, 3, c->kv_lora, c->v_head, c->heads, "blk.%u.attn_v_b.weight", il);
    }
    add(b, W, 2, (uint64_t)c->heads * c->v_head, H, 0, "blk.%u.attn_output.weight", il);
    add(b, N, 1, H, 0, 0, "blk.%u.ffn_norm.weight", il);
    if (il < c->dense_layers) {
        add(b, W, 2, H, c->ff, 0, "blk.%u.ffn_gate.weight", il);
        add(b, W, 2, H, c->ff, 0, "blk.%u.ffn_up.weight", il);
        add(b, W, 2, c->ff, H, 0, "blk.%u.ffn_down.weight", il);
        return;
    }
    uint64_t F = c->moe_ff, E = c->experts, FS = (uint64_t)c->moe_ff * c->shared;
    add(b, W, 2, H, E, 0, "blk.%u.ffn_gate_inp.weight", il);
    if (c->glm)
        add(b, SYNTH_BIAS, 1, E, 0, 0, "blk.%u.exp_probs_b.bias", il);
    add(b, W, 3, F, H, E, "blk.%u.ffn_down_exps.weight", il);
    if (c->merged_gate_up) {
        add(b, W, 3, H, 2 * F, E, "blk.%u.ffn_gate_up_exps.weight", il);
    } else {
        add(b, W, 3, H, F, E, "blk.%u.ffn_gate_exps.weight", il);
        add(b, W, 3, H, F, E, "blk.%u.ffn_up_exps.weight", il);
    }
    if (c->shared) {
        add(b, W, 2, H, FS, 0, "blk.%u.ffn_gate_shexp.weight", il);
        add(b, W, 2, H, FS, 0, "blk.%u.ffn_up_shexp.weight", il);
        add(b, W, 2, FS, H, 0, "blk.%u.ffn_down_shexp.weight", il);
    }
    if (il >= c->layers) { /* NextN/MTP block: its own projections and norms */
        add(b, W, 2, 2 * H, H, 0, "blk.%u.nextn.eh_proj.weight", il);
        add(b, N, 1, H, 0, 0, "blk.%u.nextn.enorm.weight", il);
        add(b, N, 1, H, 0, 0, "blk.%u.nextn.hnorm.weight", il);
        add(b, N, 1, H, 0, 0, "blk.%u.nextn.shared_head_norm.weight", il);
    }
}

static void add_all(table_builder *b, const synth_config *c)
{
    add(b, W, 2, c->hidden, c->vocab, 0, "token_embd.weight");
    b->tab->t[0].rms = 1.0f; /* embeddings are N(0,1), like the fixtures' */
    for (uint32_t il = 0; il < c->layers + c->nextn; il++)
        add_block(b, c, il);
    add(b, N, 1, c->hidden, 0, 0, "output_norm.weight");
    add(b, W, 2, c->hidden, c->vocab, 0, "output.weight");
}

#undef W
#undef N

int synth_build_table(const synth_config *c, synth_table *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    if (synth_validate(c, err) < 0)
        return -1;
    table_builder b = {.tab = out};
    add_all(&b, c);
    if (b.failed) {
        synth_table_free(out);
        return err_set(err, "out of memory");
    }
    if (synth_assign_types(c, out, err) < 0) {
        synth_table_free(out);
        return -1;
    }
    for (size_t i = 0; i < out->n; i++) {
        synth_tensor *t = &out->t[i];
        uint64_t row;
        if (!quant_row_bytes(t->type, t->ne[0], &row)) {
            synth_table_free(out);
            return err_set(err, "tensor %s: row length %" PRIu64 " does not fit type %s", t->name, t->ne[0],
                           quant_type_name(t->type));
        }
        if (__builtin_mul_overflow(row, t->ne[1] * t->ne[2], &t->bytes) || t->bytes > (1ull << 50)) {
            synth_table_free(out);
            return err_set(err, "tensor %s is absurdly large", t->name);
        }
    }
    return 0;
}

void synth_table_free(synth_table *tab)
{
    free(tab->t);
    tab->t = NULL;
    tab->n = 0;
}

/* ======================================================================
 * Metadata and tokenizer
 * ====================================================================== */

/* GLM-4.7-Flash's chat template, as its GGUFs carry it
 * (tests/data/models/ * /fixture GGUFs, tokenizer.chat_template). */
static const char glm47_chat_template[] =
    "[gMASK]<sop>\n"
    "{%- if tools -%}\n"
    "<|system|>\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{% for tool in tools %}\n"
    "{{ tool | tojson(ensure_ascii=False) }}\n"
    "{% endfor %}\n"
    "</tools>\n"
    "\n"
    "For each function call, output the function name and arguments within the following XML format:\n"
    "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>{%- endif -%}\n"
    "{%- macro visible_text(content) -%}\n"
    "    {%- if content is string -%}\n"
    "        {{- content }}\n"
    "    {%- elif content is iterable and content is not mapping -%}\n"
    "        {%- for item in content -%}\n"
    "            {%- if item is mapping and item.type == 'text' -%}\n"
    "                {{- item.text }}\n"
    "            {%- elif item is string -%}\n"
    "                {{- item }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{- content }}\n"
    "    {%- endif -%}\n"
    "{%- endmacro -%}\n"
    "{%- set ns = namespace(last_user_index=-1) %}\n"
    "{%- for m in messages %}\n"
    "    {%- if m.role == 'user' %}\n"
    "        {% set ns.last_user_index = loop.index0 -%}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{% for m in messages %}\n"
    "{%- if m.role == 'user' -%}<|user|>{{ visible_text(m.content) }}\n"
    "{%- elif m.role == 'assistant' -%}\n"
    "<|assistant|>\n"
    "{%- set reasoning_content = '' %}\n"
    "{%- set content = visible_text(m.content) %}\n"
    "{%- if m.reasoning_content is string %}\n"
    "    {%- set reasoning_content = m.reasoning_content %}\n"
    "{%- else %}\n"
    "    {%- if '</think>' in content %}\n"
    "        {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n"
    "        {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- if ((clear_thinking is defined and not clear_thinking) or loop.index0 > ns.last_user_index) and reasoning_content -%}\n"
    "{{ '<think>' + reasoning_content.strip() +  '</think>'}}\n"
    "{%- else -%}\n"
    "{{ '</think>' }}\n"
    "{%- endif -%}\n"
    "{%- if content.strip() -%}\n"
    "{{ content.strip() }}\n"
    "{%- endif -%}\n"
    "{% if m.tool_calls %}\n"
    "{% for tc in m.tool_calls %}\n"
    "{%- if tc.function %}\n"
    "    {%- set tc = tc.function %}\n"
    "{%- endif %}\n"
    "{{- '<tool_call>' + tc.name -}}\n"
    "{% set _args = tc.arguments %}{% for k, v in _args.items() %}<arg_key>{{ k }}</arg_key><arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>{% endfor %}</tool_call>{% endfor %}\n"
    "{% endif %}\n"
    "{%- elif m.role == 'tool' -%}\n"
    "{%- if m.content is string -%}\n"
    "{%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "    {{- '<|observation|>' }}\n"
    "{%- endif %}\n"
    "{{- '<tool_response>' }}\n"
    "{{- m.content }}\n"
    "{{- '</tool_response>' }}\n"
    "{%- else -%}\n"
    "<|observation|>{% for tr in m.content %}\n"
    "<tool_response>{{ tr.output if tr.output is defined else tr }}</tool_response>{% endfor -%}\n"
    "{% endif -%}\n"
    "{%- elif m.role == 'system' -%}\n"
    "<|system|>{{ visible_text(m.content) }}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    <|assistant|>{{- '</think>' if (enable_thinking is defined and not enable_thinking) else '<think>' -}}\n"
    "{%- endif -%}";

/* GLM's added tokens in the real vocabulary's order (ids 151329...), and
 * whether the compact tiny vocabularies keep them (22 of the 36). */
static const struct {
    const char *text;
    int32_t type; /* 3 CONTROL, 4 USER_DEFINED */
    bool compact;
} glm_added[] = {
    {"<|endoftext|>", 3, true},      {"[MASK]", 3, true},
    {"[gMASK]", 3, true},            {"[sMASK]", 3, true},
    {"<sop>", 3, true},              {"<eop>", 3, true},
    {"<|system|>", 3, true},         {"<|user|>", 3, true},
    {"<|assistant|>", 3, true},      {"<|observation|>", 3, true},
    {"<|begin_of_image|>", 3, true}, {"<|end_of_image|>", 3, true},
    {"<|begin_of_video|>", 3, false}, {"<|end_of_video|>", 3, false},
    {"<|begin_of_audio|>", 3, false}, {"<|end_of_audio|>", 3, false},
    {"<|begin_of_transcription|>", 3, false}, {"<|end_of_transcription|>", 3, false},
    {"<|code_prefix|>", 3, false},   {"<|code_middle|>", 3, false},
    {"<|code_suffix|>", 3, false},   {"<think>", 4, true},
    {"</think>", 4, true},           {"<tool_call>", 4, true},
    {"</tool_call>", 4, true},       {"<tool_response>", 4, true},
    {"</tool_response>", 4, true},   {"<arg_key>", 4, true},
    {"</arg_key>", 4, true},         {"<arg_value>", 4, true},
    {"</arg_value>", 4, true},       {"/nothink", 4, false},
    {"<|begin_of_box|>", 4, false},  {"<|end_of_box|>", 4, false},
    {"<|image|>", 4, false},         {"<|video|>", 4, false},
};
#define N_ADDED (sizeof glm_added / sizeof glm_added[0])
#define N_ADDED_COMPACT 22u
#define GLM_FIRST_ADDED 151329u /* <|endoftext|> in the real vocabulary */

/* A few byte-level BPE merges (the fixtures' list; Ġ is a space, Ċ a newline). */
static const char *const bpe_merges[] = {
    "\u0120 t", "h e", "i n", "\u0120 a", "e r", "o n", "\u0120t he", "r e", "a t", "e n", "\u0120 s", "o r",
    "\u0120 w", "\u0120 c", "i s", "e s", "\u0120 o", "i t", "\u0120 b", "a n", "\u0120 f", "\u0120 m",
    "\u0120 p", "a l", "l l", "\u0120 d", "\u0120 h", "\u0120 l", "\u0120 in", "o u", "e d", "\u0120o f",
    "\u0120a n", "\u0120an d", "\u0120 i", "\u0120 is", "\u010a \u010a", "\u0120 \u0120",
    "\u0120\u0120 \u0120\u0120", "\u0120 1", "1 2", "\u0120 he", "l o", "ll o", "\u0120 y", "o o",
};
#define N_MERGES (sizeof bpe_merges / sizeof bpe_merges[0])

/* GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
 * others for U+0100 upwards in byte order; written as UTF-8. */
static void byte_token(unsigned byte, char out[4])
{
    unsigned cp = byte, k = 0;
    bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
    if (!printable) {
        for (unsigned b = 0; b < byte; b++)
            k += !((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174);
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

typedef struct {
    char **text;
    int32_t *type;
    uint32_t n;
    uint32_t added_base;  /* id of <|endoftext|> */
    uint32_t n_merges;
    bool full;            /* real-layout ids (151329...) */
} vocab;

static void vocab_free(vocab *v)
{
    if (v->text)
        for (uint32_t i = 0; i < v->n; i++)
            free(v->text[i]);
    free(v->text);
    free(v->type);
}

/* Merged token of a merge rule "a b" -> "ab". */
static char *merged(const char *rule)
{
    size_t n = strlen(rule);
    char *s = malloc(n);
    if (!s)
        return NULL;
    const char *sp = strchr(rule, ' ');
    size_t a = (size_t)(sp - rule);
    memcpy(s, rule, a);
    memcpy(s + a, sp + 1, n - a - 1);
    s[n - 1] = 0;
    return s;
}

/* Layout: 256 byte tokens, merged tokens, then either the 22 added tokens
 * right after (tiny vocabularies) or padding up to 151329 and the real 36
 * added tokens there (full size); [PADn] UNUSED tokens fill the rest. */
static int build_vocab(const synth_config *c, vocab *v, err_t *err)
{
    memset(v, 0, sizeof *v);
    v->n = c->vocab;
    v->full = c->vocab >= GLM_FIRST_ADDED + N_ADDED;
    uint32_t n_added = v->full ? (uint32_t)N_ADDED : N_ADDED_COMPACT;
    uint32_t room = c->vocab - 256 - N_ADDED_COMPACT;
    v->n_merges = room < N_MERGES ? room : (uint32_t)N_MERGES;
    v->added_base = v->full ? GLM_FIRST_ADDED : 256 + v->n_merges;
    v->text = calloc(v->n, sizeof *v->text);
    v->type = calloc(v->n, sizeof *v->type);
    if (!v->text || !v->type)
        goto oom;
    for (uint32_t i = 0; i < v->n; i++) {
        char buf[40];
        v->type[i] = 1; /* NORMAL */
        if (i < 256) {
            byte_token(i, buf);
            v->text[i] = strdup(buf);
        } else if (i < 256 + v->n_merges) {
            v->text[i] = merged(bpe_merges[i - 256]);
        } else if (i >= v->added_base && i < v->added_base + n_added) {
            uint32_t k = i - v->added_base, j = 0;
            for (uint32_t seen = 0; j < N_ADDED; j++) /* k-th entry kept by this layout */
                if ((v->full || glm_added[j].compact) && seen++ == k)
                    break;
            v->text[i] = strdup(glm_added[j].text);
            v->type[i] = glm_added[j].type;
        } else {
            snprintf(buf, sizeof buf, "[PAD%" PRIu32 "]", i);
            v->text[i] = strdup(buf);
            v->type[i] = 5; /* UNUSED */
        }
        if (!v->text[i])
            goto oom;
    }
    return 0;
oom:
    vocab_free(v);
    return err_set(err, "out of memory building a %" PRIu32 "-token vocabulary", c->vocab);
}

/* Id of an added token in this vocabulary. */
static uint32_t added_id(const vocab *v, const char *text)
{
    for (uint32_t i = v->added_base; i < v->n; i++)
        if (v->type[i] != 1 && v->type[i] != 5 && strcmp(v->text[i], text) == 0)
            return i;
    return 0;
}

static int set_tokenizer(const synth_config *c, gguf_writer *w, err_t *err)
{
    vocab v;
    if (build_vocab(c, &v, err) < 0)
        return -1;
    int rc = 0;
    rc |= gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    rc |= gguf_writer_set_str(w, "tokenizer.ggml.pre", "glm4");
    rc |= gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.text, v.n);
    rc |= gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v.type, v.n);
    rc |= gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", bpe_merges, v.n_merges);
    uint32_t eos = added_id(&v, "<|endoftext|>");
    rc |= gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", eos);
    rc |= gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", eos);
    rc |= gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", added_id(&v, "[gMASK]"));
    rc |= gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", added_id(&v, "<|user|>"));
    rc |= gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", eos);
    rc |= gguf_writer_set_u32(w, "tokenizer.ggml.eom_token_id", added_id(&v, "<|observation|>"));
    rc |= gguf_writer_set_str(w, "tokenizer.chat_template", glm47_chat_template);
    vocab_free(&v);
    return rc ? err_set(err, "out of memory writing the tokenizer") : 0;
}

/* Keys in the order llama.cpp's converter writes them (Glm4MoeLiteModel /
 * DeepseekV2Model); llama-quantize then moves general.file_type last. */
int synth_set_metadata(const synth_config *c, gguf_writer *w, err_t *err)
{
    const char *a = "deepseek2";
    char k[128];
    int rc = 0;
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", a, suffix), k)
    rc |= gguf_writer_set_str(w, "general.architecture", a);
    rc |= gguf_writer_set_str(w, "general.type", "model");
    rc |= gguf_writer_set_str(w, "general.name", c->name);
    rc |= gguf_writer_set_str(w, "general.size_label", "synthetic");
    rc |= gguf_writer_set_str(w, "general.license", "mit");
    rc |= gguf_writer_set_u32(w, KEY("block_count"), c->layers + c->nextn);
    rc |= gguf_writer_set_u32(w, KEY("context_length"), c->ctx);
    rc |= gguf_writer_set_u32(w, KEY("embedding_length"), c->hidden);
    rc |= gguf_writer_set_u32(w, KEY("feed_forward_length"), c->ff);
    rc |= gguf_writer_set_u32(w, KEY("attention.head_count"), c->heads);
    rc |= gguf_writer_set_u32(w, KEY("attention.head_count_kv"), 1);
    if (c->yarn_factor > 0) {
        rc |= gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
        rc |= gguf_writer_set_f32(w, KEY("rope.scaling.factor"), c->yarn_factor);
        rc |= gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), c->yarn_orig_ctx);
        rc |= gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), c->yarn_beta_fast);
        rc |= gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), c->yarn_beta_slow);
    }
    rc |= gguf_writer_set_f32(w, KEY("rope.freq_base"), c->rope_base);
    rc |= gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->rms_eps);
    rc |= gguf_writer_set_u32(w, KEY("expert_count"), c->experts);
    rc |= gguf_writer_set_u32(w, KEY("expert_used_count"), c->experts_used);
    rc |= gguf_writer_set_u32(w, KEY("expert_group_count"), 1);
    rc |= gguf_writer_set_u32(w, KEY("expert_group_used_count"), 1);
    if (!c->no_gating_key)
        rc |= gguf_writer_set_u32(w, KEY("expert_gating_func"), c->glm ? 2 : 1);
    if (synth_is_float_ftype(c->ftype))
        rc |= gguf_writer_set_u32(w, "general.file_type", synth_file_type_key(c->ftype));
    rc |= gguf_writer_set_u32(w, KEY("leading_dense_block_count"), c->dense_layers);
    rc |= gguf_writer_set_u32(w, KEY("vocab_size"), c->vocab);
    rc |= gguf_writer_set_u32(w, KEY("attention.q_lora_rank"), c->q_lora);
    rc |= gguf_writer_set_u32(w, KEY("attention.kv_lora_rank"), c->kv_lora);
    if (c->legacy_kv_b) { /* before the MLA split: per-head key/value widths */
        rc |= gguf_writer_set_u32(w, KEY("attention.key_length"), c->qk_nope + c->qk_rope);
        rc |= gguf_writer_set_u32(w, KEY("attention.value_length"), c->v_head);
    } else {
        rc |= gguf_writer_set_u32(w, KEY("attention.key_length"), c->kv_lora + c->qk_rope);
        rc |= gguf_writer_set_u32(w, KEY("attention.value_length"), c->kv_lora);
        rc |= gguf_writer_set_u32(w, KEY("attention.key_length_mla"), c->qk_nope + c->qk_rope);
        rc |= gguf_writer_set_u32(w, KEY("attention.value_length_mla"), c->v_head);
    }
    rc |= gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), c->moe_ff);
    rc |= gguf_writer_set_u32(w, KEY("expert_shared_count"), c->shared);
    rc |= gguf_writer_set_f32(w, KEY("expert_weights_scale"), c->expert_weights_scale);
    if (c->glm)
        rc |= gguf_writer_set_bool(w, KEY("expert_weights_norm"), true);
    rc |= gguf_writer_set_u32(w, KEY("rope.dimension_count"), c->qk_rope);
    if (c->yarn_factor > 0)
        rc |= gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"), (float)(0.1 * c->yarn_mscale_all_dim));
    if (c->nextn)
        rc |= gguf_writer_set_u32(w, KEY("nextn_predict_layers"), c->nextn);
#undef KEY
    if (rc)
        return err_set(err, "out of memory writing metadata");
    if (!c->no_tokenizer && set_tokenizer(c, w, err) < 0)
        return -1;
    rc |= gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!synth_is_float_ftype(c->ftype))
        rc |= gguf_writer_set_u32(w, "general.file_type", synth_file_type_key(c->ftype));
    return rc ? err_set(err, "out of memory writing metadata") : 0;
}

/* ======================================================================
 * Streaming writer
 *
 * The data is cut into chunks of at most CHUNK_BYTES, each inside one
 * tensor.  Worker threads take chunk numbers in order from a counter and
 * fill slot (number % n_slots) of a small ring; the calling thread hands the
 * slots to the GGUF writer in chunk order.  Memory: n_slots x CHUNK_BYTES.
 * ====================================================================== */

#define CHUNK_BYTES (4u << 20)

typedef struct {
    uint32_t tensor;
    uint64_t first_block, n_blocks, bytes;
} chunk;

typedef struct {
    uint8_t *buf;
    uint64_t turn;   /* the chunk this slot may hold next */
    bool ready;
} slot;

typedef struct {
    const synth_config *cfg;
    const synth_table *tab;
    chunk *chunks;
    uint64_t n_chunks, next_chunk;
    slot *slots;
    uint32_t n_slots;
    bool abort;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pipeline;

static void *worker_main(void *arg)
{
    pipeline *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        uint64_t idx = p->next_chunk++;
        slot *s = &p->slots[idx % p->n_slots];
        while (!p->abort && idx < p->n_chunks && s->turn != idx)
            pthread_cond_wait(&p->cv, &p->mu);
        bool stop = p->abort || idx >= p->n_chunks;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return NULL;
        const chunk *c = &p->chunks[idx];
        synth_fill_blocks(&p->tab->t[c->tensor], p->cfg->seed, c->tensor, c->first_block, c->n_blocks, s->buf);
        pthread_mutex_lock(&p->mu);
        s->ready = true;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static int make_chunks(pipeline *p, err_t *err)
{
    uint64_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (uint32_t i = 0; i < p->tab->n; i++) {
            const synth_tensor *t = &p->tab->t[i];
            const quant_traits *qt = quant_traits_of(t->type);
            uint64_t blocks = t->bytes / qt->block_bytes, per = CHUNK_BYTES / qt->block_bytes;
            for (uint64_t b = 0; b < blocks; b += per, n++)
                if (pass == 1) {
                    uint64_t k = blocks - b < per ? blocks - b : per;
                    p->chunks[n] = (chunk){i, b, k, k * qt->block_bytes};
                }
        }
        if (pass == 0 && !(p->chunks = malloc((n ? n : 1) * sizeof *p->chunks)))
            return err_set(err, "out of memory");
    }
    p->n_chunks = n;
    return 0;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Hands the chunks to the writer in order, as the workers finish them. */
static int drain(pipeline *p, gguf_writer *w, const synth_options *opt, uint64_t total, err_t *err)
{
    uint64_t done = 0;
    double last = now_seconds();
    for (uint64_t idx = 0; idx < p->n_chunks; idx++) {
        slot *s = &p->slots[idx % p->n_slots];
        pthread_mutex_lock(&p->mu);
        while (!(s->turn == idx && s->ready))
            pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        if (gguf_writer_write(w, s->buf, (size_t)p->chunks[idx].bytes, err) < 0)
            return -1;
        done += p->chunks[idx].bytes;
        pthread_mutex_lock(&p->mu);
        s->ready = false;
        s->turn = idx + p->n_slots;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (opt && opt->progress && now_seconds() - last >= 0.5) {
            last = now_seconds();
            opt->progress(opt->user, done, total);
        }
    }
    if (opt && opt->progress)
        opt->progress(opt->user, done, total);
    return 0;
}

static int stream_data(const synth_config *cfg, const synth_table *tab, gguf_writer *w, const synth_options *opt,
                       err_t *err)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int n_threads = opt && opt->n_threads > 0 ? opt->n_threads : (int)(ncpu > 0 ? ncpu : 1);
    if (n_threads > 256)
        n_threads = 256;
    pipeline p = {.cfg = cfg, .tab = tab};
    uint64_t total = 0;
    for (size_t i = 0; i < tab->n; i++)
        total += tab->t[i].bytes;
    if (make_chunks(&p, err) < 0)
        return -1;
    p.n_slots = 2 * (uint32_t)n_threads + 2;
    p.slots = calloc(p.n_slots, sizeof *p.slots);
    pthread_t *th = calloc((size_t)n_threads, sizeof *th);
    int rc = 0, started = 0;
    if (!p.slots || !th)
        rc = err_set(err, "out of memory");
    for (uint32_t i = 0; rc == 0 && i < p.n_slots; i++) {
        p.slots[i].turn = i;
        if (!(p.slots[i].buf = malloc(CHUNK_BYTES)))
            rc = err_set(err, "out of memory for %u chunk buffers of %u bytes", p.n_slots, CHUNK_BYTES);
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    for (; rc == 0 && started < n_threads; started++)
        if (pthread_create(&th[started], NULL, worker_main, &p) != 0)
            rc = err_set(err, "cannot start thread %d", started);
    if (rc == 0 && started > 0)
        rc = drain(&p, w, opt, total, err);
    pthread_mutex_lock(&p.mu);
    p.abort = true;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    for (uint32_t i = 0; p.slots && i < p.n_slots; i++)
        free(p.slots[i].buf);
    free(p.slots);
    free(th);
    free(p.chunks);
    return rc;
}

int synth_write(const synth_config *cfg, const char *path, const synth_options *opt, synth_stats *stats,
                err_t *err)
{
    double t0 = now_seconds();
    synth_table tab;
    if (synth_build_table(cfg, &tab, err) < 0)
        return -1;
    gguf_writer *w = gguf_writer_new();
    int rc = w ? 0 : err_set(err, "out of memory");
    if (rc == 0)
        rc = synth_set_metadata(cfg, w, err);
    for (size_t i = 0; rc == 0 && i < tab.n; i++)
        rc = gguf_writer_add_tensor(w, tab.t[i].name, tab.t[i].type, tab.t[i].n_dims, tab.t[i].ne, err);
    if (rc == 0)
        rc = gguf_writer_begin(w, path, err);
    if (rc == 0)
        rc = stream_data(cfg, &tab, w, opt, err);
    if (rc == 0)
        rc = gguf_writer_finish(w, err);
    if (rc == 0 && stats) {
        stats->tensor_bytes = 0;
        for (size_t i = 0; i < tab.n; i++)
            stats->tensor_bytes += tab.t[i].bytes;
        stats->bytes = gguf_writer_bytes_written(w);
        stats->seconds = now_seconds() - t0;
    }
    gguf_writer_free(w); /* removes the file unless finished */
    synth_table_free(&tab);
    return rc;
}
