/* chat_template.h: chat-template presets as data (glm47, deepseek2, chatml,
 * llama3) and their rendering.
 *
 * Promises: tmpl_render() with the glm47 preset is byte-identical to the
 * official GLM-4.7-Flash Jinja template for every input it accepts
 * (system/user/assistant/tool messages, reasoning_content or inline
 * <think>, multi-part content, tools, tool_calls, enable_thinking,
 * clear_thinking). */
#ifndef GLM_CHAT_TEMPLATE_H
#define GLM_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "gguf.h"

typedef struct tmpl_preset tmpl_preset;

/* Lookup by name; NULL if unknown. */
const tmpl_preset *tmpl_find(const char *name);
/* Comma-separated names of all presets, for error messages. */
const char *tmpl_names(void);
const char *tmpl_name(const tmpl_preset *p);
/* Picks the preset for a model from its GGUF metadata
 * (tokenizer.chat_template text, architecture, name); never NULL. */
const tmpl_preset *tmpl_detect(const gguf_ctx *ctx);

/* Whether the model thinks before answering by default: false when its
 * file sets glmchat.thinking = false (a model not trained to think, such as
 * the built-in demo), else true (GLM-4.7's own default).  The user's
 * --think / settings file / a conversation's recording outrank it. */
bool tmpl_thinking_default(const gguf_ctx *ctx);

/* Texts of the tokens that end an assistant turn for this preset
 * (GLM: "<|user|>", "<|observation|>", "<|endoftext|>"); NULL-terminated. */
const char *const *tmpl_stop_texts(const tmpl_preset *p);
/* Recommended sampling defaults of the preset's model family. */
void tmpl_sampling_defaults(const tmpl_preset *p, float *temp, float *top_p, float *min_p, int *top_k);
/* The model file's own recommendation over them, where it gives one:
 * llama.cpp's general.sampling.temp / top_p / min_p / top_k keys (the
 * built-in demo, a small model, asks for a low temperature).  A value out of
 * range (a temperature below 0.01 or above 100, top-p outside (0, 1], min-p
 * outside [0, 1], a negative top-k) or of the wrong type is ignored. */
void tmpl_model_sampling(const gguf_ctx *ctx, float *temp, float *top_p, float *min_p, int *top_k);

/* Renders `inputs` -- a jansson object {"messages": [...],
 * "add_generation_prompt": bool, "enable_thinking"?, "clear_thinking"?,
 * "tools"?} -- into a malloc'd NUL-terminated string.  NULL + err on
 * malformed input (one line naming the offending field). */
struct json_t;
char *tmpl_render(const tmpl_preset *p, const struct json_t *inputs, err_t *err);

#endif
