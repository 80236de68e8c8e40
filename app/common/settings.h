/* settings.h: user defaults, read from $XDG_CONFIG_HOME/glmchat/settings.
 *
 * The file is lines of `key = value`; `#` starts a comment.  The same keys
 * are used by the command line and by /set, so one parser checks them all.
 * An unknown key or a bad value is an error naming FILE:LINE. */
#ifndef GLM_SETTINGS_H
#define GLM_SETTINGS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat/chat.h"
#include "text/chat_template.h"
#include "chat/conversation.h"
#include "base/error.h"
#include "sample/sampler.h"

typedef enum { SETTINGS_PANE_AUTO = 0, SETTINGS_PANE_ON, SETTINGS_PANE_OFF } settings_pane;

typedef struct {
    char model[PATH_MAX];  /* "" : not set */
    char backend[32];      /* cpu | vulkan | auto */
    int device;            /* Vulkan device index, -1: best */
    char tmpl[32];         /* template preset, "" : detect from the model */
    int think;             /* 1 on, 0 off */
    /* Sampling; a field with has_* false takes the template family's default. */
    bool has_temp, has_top_k, has_top_p, has_min_p;
    float temp, top_p, min_p;
    int top_k;
    /* Penalties over the last 64 tokens (1, 0, 0: off, the default). */
    float repeat_penalty, presence_penalty, frequency_penalty;
    bool has_seed;         /* false: a fresh random seed per session (recorded) */
    uint64_t seed;
    int n_predict;         /* tokens per answer, -1: until the context is full */
    uint32_t n_ctx;        /* context size in tokens, 0: the engine's choice (engine.h) */
    uint64_t gpu_mem;      /* bytes of device memory glmchat may use, 0: what the device has (engine.h) */
    chat_ctx_policy ctx_overflow; /* a conversation longer than the context: trim (default) or stop */
    char theme[64];
    settings_pane side_pane;
    int side_width;        /* columns, 0: adapt to the terminal */
    bool mouse;            /* wheel scrolling (mouse reporting on) */
    bool ignore_eos;       /* answers end only at n-predict or a full context (benchmarks, stress) */
    int draft;             /* NextN drafting: -1 auto (default), 0 off, 1..4 drafts per step (engine.h) */
    int n_cpu_moe;         /* routed experts of blocks 0..N-1 in host memory, -1 auto (default; engine.h) */
    /* The keys given explicitly -- on the command line or by /set, not by
     * the settings file or the defaults -- for settings_given(). */
    uint32_t given;
} settings;

void settings_defaults(settings *s);
/* Reads a settings file into s (over the current values).  A missing file is
 * not an error when `missing_ok`. */
int settings_load(settings *s, const char *path, bool missing_ok, err_t *err);
/* The same for the file's text[0..len); `path` names it in errors (PATH:LINE). */
int settings_parse(settings *s, const char *text, size_t len, const char *path, err_t *err);
/* Sets one key from text (no FILE:LINE prefix in err); outside
 * settings_load it counts as given explicitly. */
int settings_set(settings *s, const char *key, const char *value, err_t *err);
/* True when `key` was given explicitly (the command line, /set). */
bool settings_given(const settings *s, const char *key);
/* The key a command-line option sets: "--KEY" for every key but model and
 * ignore-eos (their commands parse -m and the flag --ignore-eos), and "-n"
 * and "-c" for n-predict and ctx; NULL when arg is none of these. */
const char *settings_option_key(const char *arg);
/* A size of memory ("6G", "1.5G", "512M", "auto" or "0": none) in bytes
 * into *out; -1 with err naming `key` when it is not one. */
int settings_parse_size(const char *key, const char *v, uint64_t *out, err_t *err);
/* The routed experts of how many first blocks stay in host memory
 * (n-cpu-moe, --n-cpu-moe): "auto" -> ENGINE_CPU_MOE_AUTO, or 0 to 4096. */
int settings_parse_cpu_moe(const char *key, const char *v, int *out, err_t *err);
/* True for the keys /set may change at run time. */
bool settings_is_sampling_key(const char *key);
/* Space-separated list of every key, for help and errors. */
const char *settings_keys(void);
/* Writes `key = value` lines for the sampling keys into buf (for /set). */
void settings_format_sampling(const settings *s, char *buf, size_t cap);

/* The sampler settings for an answer: the template family's defaults, then
 * the model file's recommendation (general.sampling.*; `meta`, the model
 * file's metadata, may be NULL),
 * then whatever the settings give; `seed` when the settings give none. */
void settings_to_sampler(const settings *s, const tmpl_preset *tmpl, const gguf_ctx *meta, uint64_t seed,
                         sampler_params *sp);
/* A recording's settings -- a conversation file's thinking and sampling
 * (penalties, seed and n-predict included) -- replace the settings file's
 * and the defaults, but not those given explicitly: replay and -C go on as
 * the conversation was made unless told otherwise.  What the file did not
 * record (c->sampling_missing, CONV_S_*) stays as it is.  The template is
 * the caller's: it belongs to a model. */
void settings_follow_recording(settings *s, const conversation *c);
/* A fresh random seed (from the OS), below 2^63 so JSON keeps it exact. */
uint64_t settings_random_seed(void);

#endif
