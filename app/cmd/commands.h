/* commands.h: the glmchat subcommands.  Each takes the arguments after its
 * name (argv[0] is the subcommand name) and returns the process exit status:
 * 0 success, 1 runtime failure (bad file, device error), 2 usage error.
 * Errors are printed as one line "glmchat: ..." on stderr. */
#ifndef GLM_COMMANDS_H
#define GLM_COMMANDS_H

int cmd_chat(int argc, char **argv);       /* app/cmd/cmd_chat.c: the UI, and -p one-shot */
int cmd_replay(int argc, char **argv);     /* app/cmd/cmd_replay.c */
int cmd_info(int argc, char **argv);       /* app/cmd/cmd_info.c */
int cmd_logits(int argc, char **argv);     /* app/cmd/cmd_run.c */
int cmd_generate(int argc, char **argv);   /* app/cmd/cmd_run.c */
int cmd_mkmodel(int argc, char **argv);    /* app/cmd/cmd_mkmodel.c */
int cmd_tokenize(int argc, char **argv);   /* app/cmd/cmd_text.c */
int cmd_detokenize(int argc, char **argv); /* app/cmd/cmd_text.c */
int cmd_template(int argc, char **argv);   /* app/cmd/cmd_text.c */
int cmd_bench(int argc, char **argv);      /* app/cmd/cmd_bench.c */
int cmd_devices(int argc, char **argv);    /* app/cmd/cmd_bench.c */

#endif
