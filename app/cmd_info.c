/* cmd_info.c: PLACEHOLDER until its owner lands it (development only). */
#include <stdio.h>
#include "commands.h"
int cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: info is not built yet\n");
    return 1;
}
