/* cmd_mkmodel.c: PLACEHOLDER until its owner lands it (development only). */
#include <stdio.h>
#include "commands.h"
int cmd_mkmodel(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: mkmodel is not built yet\n");
    return 1;
}
