/* cli_common.h: options shared by the commands that run a model (logits,
 * generate, bench, chat) and the "open model + engine" step they share.
 *
 *   -m, --model FILE        GGUF model
 *   --backend NAME          cpu, ref, vulkan or auto (default auto)
 *   --kv-type f32|f16       KV cache storage (default: f16 on Vulkan, f32 on the
 *                           CPU reference, whose job is to be exact)
 *   -c, --ctx N             context size in tokens
 *   -b, --batch N           prompt chunk size (tokens per backend call)
 *   -t, --threads N         CPU threads (0: all cores)
 *   --device N              Vulkan device index
 *   --gpu-mem SIZE          the most device memory to use (6G, 512M; auto)
 *   --n-cpu-moe N|auto      routed experts of blocks 0..N-1 in host memory (auto)
 *   --tokens 1,2,3          prompt as token ids
 *   --tune KEY=VALUE        a Vulkan tuning knob (repeatable; gpu/vk_tuning.h)
 */
#ifndef GLM_CLI_COMMON_H
#define GLM_CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "base/error.h"
#include "model/model.h"

#define CLI_MAX_TUNE 32

typedef struct {
    const char *model_path;
    const char *backend;
    kv_type kv;          /* meaningful when kv_given; else cli_kv_type() picks */
    bool kv_given;
    uint32_t n_ctx;      /* 0: the command's default */
    uint32_t n_batch;    /* 0: the engine's default */
    int n_threads;       /* 0: all cores */
    int device;          /* -1: best available */
    uint64_t gpu_mem;    /* bytes, 0: what the device has */
    int n_cpu_moe;       /* ENGINE_CPU_MOE_AUTO, or blocks whose routed experts stay in host memory */
    int32_t *tokens;     /* --tokens (owned) */
    uint32_t n_tokens;
    bool have_tokens;
    const char *tune[CLI_MAX_TUNE]; /* --tune KEY=VALUE, checked (argv's strings) */
    uint32_t n_tune;
} cli_options;

void cli_options_init(cli_options *o);

/* The KV cache type for backend be: --kv-type when given, else f16 on the
 * Vulkan core (half the cache reads per token, as llama.cpp) and f32 on the
 * CPU reference (the oracle: no rounding there unless asked for). */
kv_type cli_kv_type(const cli_options *o, const engine_backend *be);
void cli_options_free(cli_options *o);

/* If argv[*i] is one of the options above, consumes it and its value
 * (advancing *i past the value) and returns 1; returns 0 when it is not a
 * common option; -1 with err set for a missing or bad value (a usage error). */
int cli_parse_common(cli_options *o, int argc, char **argv, int *i, err_t *err);

/* The lines of help text for the options above. */
const char *cli_common_help(void);

/* Strict parsers (whole string, range checked); -1 with err naming `what`. */
int cli_parse_u32(const char *s, const char *what, uint32_t min, uint32_t max, uint32_t *out, err_t *err);
int cli_parse_float(const char *s, const char *what, float *out, err_t *err);
/* "1,2,3" (spaces allowed after commas) -> malloc'd ids. */
int cli_parse_tokens(const char *s, int32_t **ids, uint32_t *n, err_t *err);

/* -1 with err set when --tune was given for a backend without tuning knobs. */
int cli_check_tune(const cli_options *o, const engine_backend *be, err_t *err);

/* A loaded model with an open engine. */
typedef struct {
    model m;
    engine eng;
    bool loaded, opened;
} cli_session;

/* Loads -m and opens the engine of --backend.  The context is -c when
 * given, else `n_ctx_default` (0: the smaller of the trained context and
 * 4096); all_logits: every position's logits will be asked for
 * (engine_params.all_logits).  Errors carry the model path where the
 * problem is the file. */
int cli_session_open(cli_session *s, const cli_options *o, uint32_t n_ctx_default, bool all_logits, err_t *err);
void cli_session_close(cli_session *s);

#endif
