/* cmd_bench.c: PLACEHOLDER until its owner lands it (development only). */
#include <stdio.h>
#include "commands.h"
int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: bench is not built yet\n");
    return 1;
}
int cmd_devices(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: devices is not built yet\n");
    return 1;
}
