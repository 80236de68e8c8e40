/* chat_template.c: chat-template presets as data, and one renderer.
 *
 * A preset is a table row: the prompt prefix, the text around each role's
 * turn, the generation prompt, the thinking markers and how earlier turns'
 * reasoning is shown, the tool-call format, stop texts and sampling
 * defaults.  The renderer walks the messages once and consults the row; it
 * never asks "which model is this".
 *
 * The glm47 row reproduces GLM-4.7-Flash's official Jinja template (the
 * tokenizer.chat_template of its GGUFs), including what Jinja does with odd
 * input: a null content prints "None", a dict prints as Python's repr, a
 * tool message with list content always opens an <|observation|> turn.
 * Comments below quote the template's rule each step implements. */
#include "chat_template.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_dump.h"
#include "utf8.h"

/* ---- the presets ------------------------------------------------------------- */

typedef enum {
    REASONING_NONE,        /* the format has no reasoning */
    REASONING_LAST_TURNS,  /* shown only after the last user turn (unless clear_thinking=false) */
} reasoning_policy;

typedef enum {
    TOOLS_NONE,
    TOOLS_GLM_XML, /* <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call> */
} tools_style;

struct tmpl_preset {
    const char *name;
    const char *description;
    const char *prefix;           /* once, before everything */
    const char *system_open, *system_close;
    const char *user_open, *user_close;
    const char *assistant_open, *assistant_close;
    const char *tool_open, *tool_close; /* around each tool response */
    const char *observation;      /* opens a run of tool responses */
    const char *gen_prompt;       /* add_generation_prompt */
    bool trim_content;            /* content is strip()ped (llama3) */
    /* thinking */
    const char *think_open, *think_close;
    const char *gen_think_on, *gen_think_off; /* after the generation prompt */
    reasoning_policy reasoning;
    tools_style tools;
    const char *const stop[6];
    float temp, top_p, min_p;
    int top_k;
};

static const tmpl_preset presets[] = {
    {
        .name = "glm47",
        .description = "GLM-4.7 / GLM-4.7-Flash (thinking on by default)",
        .prefix = "[gMASK]<sop>",
        .system_open = "<|system|>",
        .user_open = "<|user|>",
        .assistant_open = "<|assistant|>",
        .tool_open = "<tool_response>", .tool_close = "</tool_response>",
        .observation = "<|observation|>",
        .gen_prompt = "<|assistant|>",
        .think_open = "<think>", .think_close = "</think>",
        .gen_think_on = "<think>", .gen_think_off = "</think>",
        .reasoning = REASONING_LAST_TURNS,
        .tools = TOOLS_GLM_XML,
        .stop = {"<|user|>", "<|observation|>", "<|endoftext|>", NULL},
        .temp = 1.0f, .top_p = 0.95f, .min_p = 0.01f, .top_k = 0,
    },
    {
        .name = "deepseek2",
        .description = "DeepSeek-V2 / V2-Lite chat",
        .prefix = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
        .system_close = "\n\n",
        .user_open = "User: ", .user_close = "\n\n",
        .assistant_open = "Assistant: ",
        .assistant_close = "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
        .gen_prompt = "Assistant:",
        .reasoning = REASONING_NONE,
        .tools = TOOLS_NONE,
        .stop = {"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "User:", NULL},
        .temp = 0.3f, .top_p = 0.95f, .min_p = 0.0f, .top_k = 0,
    },
    {
        .name = "chatml",
        .description = "ChatML (Qwen): <|im_start|>role ... <|im_end|>",
        .prefix = "",
        .system_open = "<|im_start|>system\n", .system_close = "<|im_end|>\n",
        .user_open = "<|im_start|>user\n", .user_close = "<|im_end|>\n",
        .assistant_open = "<|im_start|>assistant\n", .assistant_close = "<|im_end|>\n",
        .tool_open = "<|im_start|>user\n<tool_response>\n", .tool_close = "\n</tool_response><|im_end|>\n",
        .gen_prompt = "<|im_start|>assistant\n",
        .gen_think_off = "<think>\n\n</think>\n\n",
        .reasoning = REASONING_NONE,
        .tools = TOOLS_NONE,
        .stop = {"<|im_end|>", "<|endoftext|>", NULL},
        .temp = 0.7f, .top_p = 0.8f, .min_p = 0.0f, .top_k = 20,
    },
    {
        .name = "llama3",
        .description = "Llama 3 / 3.1 instruct",
        .prefix = "<|begin_of_text|>",
        .system_open = "<|start_header_id|>system<|end_header_id|>\n\n", .system_close = "<|eot_id|>",
        .user_open = "<|start_header_id|>user<|end_header_id|>\n\n", .user_close = "<|eot_id|>",
        .assistant_open = "<|start_header_id|>assistant<|end_header_id|>\n\n",
        .assistant_close = "<|eot_id|>",
        .tool_open = "<|start_header_id|>ipython<|end_header_id|>\n\n", .tool_close = "<|eot_id|>",
        .gen_prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n",
        .trim_content = true,
        .reasoning = REASONING_NONE,
        .tools = TOOLS_NONE,
        .stop = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", NULL},
        .temp = 0.6f, .top_p = 0.9f, .min_p = 0.0f, .top_k = 0,
    },
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

const tmpl_preset *tmpl_find(const char *name)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const char *tmpl_names(void)
{
    static char names[256];
    if (!names[0]) {
        size_t at = 0;
        for (size_t i = 0; i < N_PRESETS; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", presets[i].name);
    }
    return names;
}

const char *tmpl_name(const tmpl_preset *p) { return p->name; }

const char *const *tmpl_stop_texts(const tmpl_preset *p) { return p->stop; }

void tmpl_sampling_defaults(const tmpl_preset *p, float *temp, float *top_p, float *min_p, int *top_k)
{
    *temp = p->temp;
    *top_p = p->top_p;
    *min_p = p->min_p;
    *top_k = p->top_k;
}

/* ---- choosing a preset from GGUF metadata ---------------------------------------- */

static bool meta_contains(const gguf_ctx *ctx, const char *key, const char *needle)
{
    gguf_str s;
    err_t err;
    if (!gguf_has_key(ctx, key) || gguf_get_str(ctx, key, &s, &err) != 0)
        return false;
    size_t n = strlen(needle);
    for (uint64_t i = 0; i + n <= s.len; i++)
        if (memcmp(s.ptr + i, needle, n) == 0)
            return true;
    return false;
}

const tmpl_preset *tmpl_detect(const gguf_ctx *ctx)
{
    /* The template text says most: each family's turn markers are unique. */
    static const struct {
        const char *needle, *preset;
    } by_template[] = {
        {"[gMASK]<sop>", "glm47"},
        {"<|start_header_id|>", "llama3"},
        {"<|im_start|>", "chatml"},
        {"Assistant:", "deepseek2"},
    };
    for (size_t i = 0; i < sizeof by_template / sizeof by_template[0]; i++)
        if (meta_contains(ctx, "tokenizer.chat_template", by_template[i].needle))
            return tmpl_find(by_template[i].preset);
    /* No template: the model's name and the vocabulary's pre-tokenizer. */
    if (meta_contains(ctx, "general.name", "GLM") || meta_contains(ctx, "general.name", "glm") ||
        meta_contains(ctx, "tokenizer.ggml.pre", "glm4"))
        return tmpl_find("glm47");
    if (meta_contains(ctx, "tokenizer.ggml.pre", "llama-bpe"))
        return tmpl_find("llama3");
    if (meta_contains(ctx, "tokenizer.ggml.pre", "qwen2"))
        return tmpl_find("chatml");
    if (meta_contains(ctx, "general.architecture", "deepseek2") &&
        meta_contains(ctx, "general.name", "DeepSeek"))
        return tmpl_find("deepseek2");
    return tmpl_find("glm47"); /* the models this program is built for */
}

void tmpl_model_sampling(const gguf_ctx *ctx, float *temp, float *top_p, float *min_p, int *top_k)
{
    if (!ctx)
        return;
    err_t err;
    float v;
    int32_t k;
    if (gguf_has_key(ctx, "general.sampling.temp") && gguf_get_f32(ctx, "general.sampling.temp", &v, &err) == 0 &&
        v >= 0.01f && v <= 100.0f)
        *temp = v;
    if (gguf_has_key(ctx, "general.sampling.top_p") && gguf_get_f32(ctx, "general.sampling.top_p", &v, &err) == 0 &&
        v > 0.0f && v <= 1.0f)
        *top_p = v;
    if (gguf_has_key(ctx, "general.sampling.min_p") && gguf_get_f32(ctx, "general.sampling.min_p", &v, &err) == 0 &&
        v >= 0.0f && v <= 1.0f)
        *min_p = v;
    if (gguf_has_key(ctx, "general.sampling.top_k") && gguf_get_i32(ctx, "general.sampling.top_k", &k, &err) == 0 &&
        k >= 0)
        *top_k = k;
}

bool tmpl_thinking_default(const gguf_ctx *ctx)
{
    bool on = true;
    err_t err;
    if (gguf_has_key(ctx, "glmchat.thinking") && gguf_get_bool_or(ctx, "glmchat.thinking", true, &on, &err) != 0)
        return true; /* not a bool: ignored, as an unknown key would be */
    return on;
}

/* ---- Python string helpers the template relies on --------------------------------- */

/* A view of bytes (not NUL-terminated). */
typedef struct {
    const char *s;
    size_t n;
} view;

static size_t cp_len_back(const char *s, size_t n) /* length of the last code point of s[0..n) */
{
    size_t k = 1;
    while (k < n && k < 4 && ((unsigned char)s[n - k] & 0xC0) == 0x80)
        k++;
    return k;
}

/* str.strip(): Python's white space at both ends. */
static view py_strip(view v)
{
    while (v.n) {
        size_t used;
        uint32_t cp = utf8_decode_lax((const unsigned char *)v.s, v.n, &used);
        if (!py_isspace(cp))
            break;
        v.s += used;
        v.n -= used;
    }
    while (v.n) {
        size_t k = cp_len_back(v.s, v.n), used;
        uint32_t cp = utf8_decode_lax((const unsigned char *)v.s + v.n - k, k, &used);
        if (used != k || !py_isspace(cp))
            break;
        v.n -= k;
    }
    return v;
}

static view lstrip_nl(view v)
{
    while (v.n && v.s[0] == '\n') {
        v.s++;
        v.n--;
    }
    return v;
}

static view rstrip_nl(view v)
{
    while (v.n && v.s[v.n - 1] == '\n')
        v.n--;
    return v;
}

static const char *find(view hay, const char *needle)
{
    return memmem(hay.s, hay.n, needle, strlen(needle));
}

/* s.split(sep)[0] and s.split(sep)[-1] */
static view split_first(view v, const char *sep)
{
    const char *p = find(v, sep);
    return p ? (view){v.s, (size_t)(p - v.s)} : v;
}

static view split_last(view v, const char *sep)
{
    size_t n = strlen(sep);
    const char *last = NULL;
    for (view rest = v;;) {
        const char *p = find(rest, sep);
        if (!p)
            break;
        last = p;
        rest = (view){p + n, (size_t)(rest.s + rest.n - (p + n))};
    }
    return last ? (view){last + n, (size_t)(v.s + v.n - (last + n))} : v;
}

/* Python truthiness of a JSON value (absent is false). */
static bool truthy(const json_t *v)
{
    if (!v)
        return false;
    switch (json_typeof(v)) {
    case JSON_OBJECT: return json_object_size(v) > 0;
    case JSON_ARRAY: return json_array_size(v) > 0;
    case JSON_STRING: return json_string_length(v) > 0;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0.0;
    case JSON_TRUE: return true;
    default: return false;
    }
}

static bool role_is(const json_t *m, const char *role)
{
    const json_t *r = json_is_object(m) ? json_object_get(m, "role") : NULL;
    return json_is_string(r) && strcmp(json_string_value(r), role) == 0;
}

/* ---- rendering ------------------------------------------------------------------- */

typedef struct {
    const tmpl_preset *p;
    const json_t *in;
    jbuf out;
    err_t *err;
    bool failed;
} render;

static void put(render *r, view v) { jbuf_put(&r->out, v.s, v.n); }
static void puts_(render *r, const char *s) { if (s) jbuf_puts(&r->out, s); }

__attribute__((format(printf, 2, 3))) static int fail(render *r, const char *fmt, ...)
{
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err->msg, sizeof r->err->msg, fmt, ap);
        va_end(ap);
    }
    r->failed = true;
    return -1;
}

/* visible_text(content): a string as is; a list gives the text of its
 * {"type": "text"} parts and its plain strings; anything else prints as
 * Python's str() (null -> "None").  Absent content is empty. */
static void visible_text(jbuf *b, const json_t *content)
{
    if (!content)
        return;
    if (json_is_string(content)) {
        py_str(b, content);
    } else if (json_is_array(content)) {
        for (size_t i = 0; i < json_array_size(content); i++) {
            const json_t *item = json_array_get(content, i);
            if (json_is_object(item)) {
                const json_t *type = json_object_get(item, "type");
                if (json_is_string(type) && strcmp(json_string_value(type), "text") == 0) {
                    const json_t *text = json_object_get(item, "text");
                    if (text) /* an absent text prints nothing, as Jinja's Undefined */
                        py_str(b, text);
                }
            } else if (json_is_string(item)) {
                py_str(b, item);
            }
        }
    } else {
        py_str(b, content);
    }
}

/* Tool-call arguments as an object: given as one, or as a JSON string of
 * one (OpenAI style; the Jinja template would fail on those). */
static json_t *call_arguments(const json_t *args, bool *owned)
{
    *owned = false;
    if (json_is_object(args))
        return (json_t *)args;
    if (json_is_string(args)) {
        json_t *parsed = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
        if (json_is_object(parsed)) {
            *owned = true;
            return parsed;
        }
        json_decref(parsed);
    }
    return NULL;
}

/* {% for tc in m.tool_calls %}: <tool_call>NAME then each argument as
 * <arg_key>K</arg_key><arg_value>V</arg_value> (V as is when a string,
 * else tojson), then </tool_call>. */
static int tool_calls_glm(render *r, const json_t *calls, size_t msg)
{
    if (!json_is_array(calls))
        return fail(r, "messages[%zu].tool_calls must be a list", msg);
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const json_t *tc = json_array_get(calls, i);
        const json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        if (truthy(fn))
            tc = fn;
        const json_t *name = json_is_object(tc) ? json_object_get(tc, "name") : NULL;
        if (!json_is_string(name))
            return fail(r, "messages[%zu].tool_calls[%zu] has no \"name\" string", msg, i);
        bool owned;
        json_t *args = call_arguments(json_object_get(tc, "arguments"), &owned);
        if (!args)
            return fail(r, "messages[%zu].tool_calls[%zu].arguments is not an object", msg, i);
        puts_(r, "<tool_call>");
        py_str(&r->out, name);
        const char *k;
        json_t *v;
        json_object_foreach(args, k, v) {
            puts_(r, "<arg_key>");
            puts_(r, k);
            puts_(r, "</arg_key><arg_value>");
            if (json_is_string(v))
                py_str(&r->out, v);
            else
                py_json(&r->out, v);
            puts_(r, "</arg_value>");
        }
        puts_(r, "</tool_call>");
        if (owned)
            json_decref(args);
    }
    return 0;
}

/* An assistant turn, GLM style:
 *   reasoning = m.reasoning_content if it is a string, else the text
 *   between <think> and </think> of an inline content (which then keeps
 *   only what follows the last </think>);
 *   <think>reasoning.strip()</think> when reasoning is non-empty and the
 *   turn comes after the last user message (or clear_thinking is false),
 *   else a bare </think>; then content.strip() if not blank; then calls. */
static int assistant_turn(render *r, const json_t *m, size_t index, bool after_last_user,
                          bool keep_all_reasoning)
{
    const tmpl_preset *p = r->p;
    jbuf text = {0};
    visible_text(&text, json_object_get(m, "content"));
    if (text.oom)
        return fail(r, "out of memory rendering messages[%zu]", index);
    view content = {text.s ? text.s : "", text.n};
    view reasoning = {"", 0};
    const json_t *rc = json_object_get(m, "reasoning_content");
    if (p->think_close && json_is_string(rc)) {
        reasoning = (view){json_string_value(rc), json_string_length(rc)};
    } else if (p->think_close && find(content, p->think_close)) {
        reasoning = lstrip_nl(split_last(rstrip_nl(split_first(content, p->think_close)), p->think_open));
        content = lstrip_nl(split_last(content, p->think_close));
    }
    puts_(r, p->assistant_open);
    if (p->reasoning == REASONING_LAST_TURNS) {
        if ((keep_all_reasoning || after_last_user) && reasoning.n) {
            puts_(r, p->think_open);
            put(r, py_strip(reasoning));
            puts_(r, p->think_close);
        } else {
            puts_(r, p->think_close);
        }
    }
    view body = py_strip(content);
    if (p->trim_content || p->reasoning == REASONING_LAST_TURNS)
        put(r, body);
    else
        put(r, content);
    jbuf_free(&text);
    const json_t *calls = json_object_get(m, "tool_calls");
    if (p->tools == TOOLS_GLM_XML && truthy(calls) && tool_calls_glm(r, calls, index) != 0)
        return -1;
    puts_(r, p->assistant_close);
    return 0;
}

/* A tool message, GLM style: a string content opens <|observation|> only
 * when the previous message is not a tool message (consecutive responses
 * share one observation turn); a list content always opens one and adds
 * each item's "output" (or the item itself). */
static int tool_turn(render *r, const json_t *msgs, size_t i)
{
    const tmpl_preset *p = r->p;
    const json_t *m = json_array_get(msgs, i);
    const json_t *content = json_object_get(m, "content");
    if (!p->observation) { /* formats whose tool turn is an ordinary turn */
        puts_(r, p->tool_open);
        visible_text(&r->out, content);
        puts_(r, p->tool_close);
        return 0;
    }
    if (json_is_string(content)) {
        if (i == 0 || !role_is(json_array_get(msgs, i - 1), "tool"))
            puts_(r, p->observation);
        puts_(r, p->tool_open);
        py_str(&r->out, content);
        puts_(r, p->tool_close);
        return 0;
    }
    puts_(r, p->observation);
    if (!content)
        return 0;
    if (json_is_array(content)) {
        for (size_t k = 0; k < json_array_size(content); k++) {
            const json_t *tr = json_array_get(content, k);
            const json_t *out = json_is_object(tr) ? json_object_get(tr, "output") : NULL;
            puts_(r, p->tool_open);
            py_str(&r->out, out ? out : tr);
            puts_(r, p->tool_close);
        }
    } else if (json_is_object(content)) { /* iterating a dict gives its keys */
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)content, k, v) {
            puts_(r, p->tool_open);
            puts_(r, k);
            puts_(r, p->tool_close);
        }
    } else {
        return fail(r, "messages[%zu].content: a tool message needs a string or a list", i);
    }
    return 0;
}

/* The tools block of the system turn: every tool as tojson on its own line. */
static void tools_block_glm(render *r, const json_t *tools)
{
    puts_(r, "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
             "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        py_json(&r->out, json_array_get(tools, i));
        puts_(r, "\n");
    }
    puts_(r, "</tools>\n\nFor each function call, output the function name and arguments within the "
             "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
             "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
             "{arg-value-2}</arg_value>...</tool_call>");
}

static void plain_turn(render *r, const char *open, const char *close, const json_t *content)
{
    puts_(r, open);
    if (r->p->trim_content) {
        jbuf text = {0};
        visible_text(&text, content);
        if (text.oom)
            r->out.oom = true;
        put(r, py_strip((view){text.s ? text.s : "", text.n}));
        jbuf_free(&text);
    } else {
        visible_text(&r->out, content);
    }
    puts_(r, close);
}

static int check_inputs(render *r, const json_t **msgs, const json_t **tools)
{
    if (!json_is_object(r->in))
        return fail(r, "the template inputs must be a JSON object");
    *msgs = json_object_get(r->in, "messages");
    if (*msgs && !json_is_array(*msgs))
        return fail(r, "\"messages\" must be a list");
    *tools = json_object_get(r->in, "tools");
    if (truthy(*tools) && !json_is_array(*tools))
        return fail(r, "\"tools\" must be a list");
    if (truthy(*tools) && r->p->tools == TOOLS_NONE)
        return fail(r, "\"tools\" are not supported by the %s preset", r->p->name);
    return 0;
}

char *tmpl_render(const tmpl_preset *p, const json_t *inputs, err_t *err)
{
    render r = {.p = p, .in = inputs, .err = err};
    const json_t *msgs = NULL, *tools = NULL;
    if (check_inputs(&r, &msgs, &tools) != 0)
        return NULL;
    /* clear_thinking is defined and false: every turn keeps its reasoning. */
    const json_t *clear = json_object_get(inputs, "clear_thinking");
    bool keep_all_reasoning = clear && !truthy(clear);
    size_t n = msgs ? json_array_size(msgs) : 0;
    size_t last_user = (size_t)-1;
    for (size_t i = 0; i < n; i++)
        if (role_is(json_array_get(msgs, i), "user"))
            last_user = i;
    puts_(&r, p->prefix);
    if (truthy(tools) && p->tools == TOOLS_GLM_XML)
        tools_block_glm(&r, tools);
    for (size_t i = 0; i < n && !r.failed; i++) {
        const json_t *m = json_array_get(msgs, i);
        const json_t *content = json_is_object(m) ? json_object_get(m, "content") : NULL;
        if (role_is(m, "user"))
            plain_turn(&r, p->user_open, p->user_close, content);
        else if (role_is(m, "assistant"))
            assistant_turn(&r, m, i, last_user == (size_t)-1 || i > last_user, keep_all_reasoning);
        else if (role_is(m, "tool"))
            tool_turn(&r, msgs, i);
        else if (role_is(m, "system"))
            plain_turn(&r, p->system_open, p->system_close, content);
        /* other roles render nothing, as in the official templates */
    }
    if (r.failed) {
        jbuf_free(&r.out);
        return NULL;
    }
    if (truthy(json_object_get(inputs, "add_generation_prompt"))) {
        const json_t *think = json_object_get(inputs, "enable_thinking");
        puts_(&r, p->gen_prompt);
        puts_(&r, think && !truthy(think) ? p->gen_think_off : p->gen_think_on);
    }
    char *s = jbuf_finish(&r.out);
    if (!s)
        err_set(err, "out of memory rendering the prompt");
    return s;
}
