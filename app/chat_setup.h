/* chat_setup.h: what the chat, `-p` and `replay` share before any answer:
 * their options (settings file first, then the command line), finding the
 * model (-m, $GLMCHAT_MODEL, the settings file, the XDG models directory,
 * else the built-in demo model), and opening it with its tokenizer and
 * chat template. */
#ifndef GLM_CHAT_SETUP_H
#define GLM_CHAT_SETUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat_template.h"
#include "cli_common.h"
#include "engine.h"
#include "error.h"
#include "model.h"
#include "settings.h"
#include "tokenizer.h"

typedef struct {
    settings s;               /* defaults < settings file < command line */
    cli_options cli;          /* -t, -b, --kv-type */
    const char *model;        /* -m (the settings file's model is in s.model) */
    const char *prompt;       /* -p */
    const char *system;       /* -s */
    const char *conversation; /* -C */
    const char *resume;       /* --resume [N|NAME]: "1" without an argument; NULL when not given */
    const char *positional;   /* replay: the FILE */
    bool help, version;
} chat_args;

/* Parses argv[1..]; `replay` accepts one positional FILE and no -p/-C.
 * Returns 0, or -1 with err set (a usage error, or a bad settings file
 * naming FILE:LINE, in which case *usage is false). */
int chat_args_parse(chat_args *a, int argc, char **argv, bool replay, bool *usage, err_t *err);
void chat_args_free(chat_args *a);
/* The option lines of --help shared by chat and replay. */
const char *chat_args_help(void);

typedef struct {
    model m;
    bool loaded;
    tokenizer *tok;
    const tmpl_preset *tmpl;
    bool think_default;             /* the model's default for thinking (tmpl_thinking_default) */
    const engine_backend *be;       /* the backend to start */
    const engine_backend *fallback; /* the CPU backend when `be` is auto's first choice */
    engine_params params;
    char path[PATH_MAX];            /* the file, or DEMO_MODEL_NAME */
    char name[128];                 /* general.name, else the file name */
    char fingerprint[72];
    uint64_t size;
    const char *demo_note;          /* non-NULL for the built-in demo model */
    char backend_note[320];         /* backend auto: which backend runs and why, else "" */
    char pick_note[800];            /* taken from a models directory of several files: which one, else "" */
    char lines[4][96];              /* summary for the side pane */
} chat_model;

/* The .gguf files of the XDG models directory (~/.local/share/glmchat/models),
 * sorted by name: what the chat takes without -m (the first) and what
 * /model lists. */
#define CHAT_MODELS_MAX 1000
typedef struct {
    char dir[PATH_MAX];
    char **names; /* file names in dir */
    size_t n;
} chat_models;
/* A missing directory is an empty list; -1 + err only without a home
 * directory or memory. */
int chat_models_scan(chat_models *l, err_t *err);
void chat_models_free(chat_models *l);
/* The path of file i of the list; -1 when it does not fit cap. */
int chat_models_path(const chat_models *l, size_t i, char *out, size_t cap);

/* Finds, loads and checks the model, tokenizer and template.  Errors name
 * the file ("FILE: ..."). */
int chat_model_open(chat_model *cm, const chat_args *a, err_t *err);
void chat_model_close(chat_model *cm);

/* Prints "glmchat: " + a formatted message on stderr as one line, with
 * any control characters in it (file names, quoted file contents, model
 * metadata) shown inert. */
void chat_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Starts a decoder on the model and waits until its engine is ready,
 * falling back to the CPU backend (with a note on stderr) when the first
 * choice of `--backend auto` fails.  For the non-interactive commands. */
struct decoder;
int chat_start_decoder(chat_model *cm, struct decoder **out, err_t *err);

#endif
