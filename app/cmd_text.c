/* cmd_text.c: PLACEHOLDER until its owner lands it (development only). */
#include <stdio.h>
#include "commands.h"
int cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: tokenize is not built yet\n");
    return 1;
}
int cmd_detokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: detokenize is not built yet\n");
    return 1;
}
int cmd_template(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "glmchat: template is not built yet\n");
    return 1;
}
