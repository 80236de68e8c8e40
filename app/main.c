/* main.c: glmchat's entry point: picks the subcommand.
 *
 * `glmchat [options]` (no subcommand) starts the chat UI, or answers once
 * with -p.  Everything else is `glmchat SUBCOMMAND ...`. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "common/version.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"chat", cmd_chat, "interactive chat (the default), or one answer with -p"},
    {"replay", cmd_replay, "re-run a saved conversation's user turns"},
    {"info", cmd_info, "model summary: architecture, sizes, quant census"},
    {"logits", cmd_logits, "write the logits of every prompt position"},
    {"generate", cmd_generate, "continue a token prompt"},
    {"tokenize", cmd_tokenize, "text on stdin -> token ids"},
    {"detokenize", cmd_detokenize, "token ids on stdin -> text"},
    {"template", cmd_template, "render a chat template from JSON on stdin"},
    {"bench", cmd_bench, "prefill and decode speed, per-kernel profile"},
    {"devices", cmd_devices, "list Vulkan devices"},
    {"mkmodel", cmd_mkmodel, "write a synthetic model in the real GGUF layout"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: glmchat [-m MODEL] [options]        chat (see --help)\n"
               "       glmchat SUBCOMMAND [options]\n\nsubcommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-11s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "\n`glmchat SUBCOMMAND --help` describes each; `man glmchat` has the rest.\n");
}

/* The last word on stdout: output still buffered that cannot be written (a
 * full disk, a closed descriptor) is an error, never a silent exit 0.  A
 * command that failed has said why already. */
static int close_stdout(int rc)
{
    errno = 0;
    bool bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = true;
        e = errno;
    }
    if (bad && rc == 0) {
        fprintf(stderr, "glmchat: standard output: %s\n", e ? strerror(e) : "write error");
        return 1;
    }
    return rc;
}

static int run(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("glmchat %s\n", GLMCHAT_VERSION);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && argv[1][0] != '-') {
        for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
            if (strcmp(argv[1], subcommands[i].name) == 0)
                return subcommands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "glmchat: unknown subcommand '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    /* No subcommand: the chat, with all arguments as its options. */
    argv[0] = "chat";
    return cmd_chat(argc, argv);
}

int main(int argc, char **argv)
{
    return close_stdout(run(argc, argv));
}
