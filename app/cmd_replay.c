/* cmd_replay.c: PLACEHOLDER until its owner lands it (development only). */
#include <stdio.h>
#include "commands.h"
int cmd_replay(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: replay is not built yet\n");
    return 1;
}
