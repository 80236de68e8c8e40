/* cmd_bench.c: PLACEHOLDER devices while the real bench lands (development only). */
#include <stdio.h>
#include "commands.h"
#include "vk.h"
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
    vk_device_info d[VK_MAX_DEVICES];
    uint32_t n;
    int best;
    err_t err;
    if (vk_list_devices(d, &n, &best, &err)) {
        fprintf(stderr, "glmchat: %s\n", err.msg);
        return 1;
    }
    for (uint32_t i = 0; i < n; i++)
        printf("%u: %s\n", i, d[i].name);
    return best >= 0 ? 0 : 1;
}
