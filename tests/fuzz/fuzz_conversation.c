/* fuzz_conversation: conversation files are untrusted.  Any input either
 * fails with a one-line error or loads; what loads is written back and
 * loads again with the same messages. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conversation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    conversation c;
    err_t err;
    if (conv_parse(&c, (const char *)data, size, "fuzz.json", &err) != 0) {
        if (strchr(err.msg, '\n') || c.n != 0)
            abort();
        conv_free(&c);
        return 0;
    }
    char *json = conv_to_json(&c);
    conversation d;
    if (conv_parse(&d, json, strlen(json), "again.json", &err) != 0 || d.n != c.n)
        abort();
    for (size_t i = 0; i < c.n; i++)
        if (strcmp(c.msgs[i].content, d.msgs[i].content) || strcmp(c.msgs[i].role, d.msgs[i].role))
            abort();
    sbuf md = {0};
    conv_to_markdown(&c, &md);
    sbuf_free(&md);
    free(json);
    conv_free(&c);
    conv_free(&d);
    return 0;
}
