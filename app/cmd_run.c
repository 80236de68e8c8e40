/* cmd_run.c: PLACEHOLDER until its owner lands it (development only). */
#include <stdio.h>
#include "commands.h"
int cmd_logits(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: logits is not built yet\n");
    return 1;
}
int cmd_generate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: generate is not built yet\n");
    return 1;
}
