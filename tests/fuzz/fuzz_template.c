/* fuzz_template.c: bytes as the template JSON, through jansson and every
 * preset's renderer.  Malformed input must give NULL with a one-line error,
 * never a crash. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *in = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!in)
        return 0;
    static const char *const names[] = {"glm47", "deepseek2", "chatml", "llama3"};
    for (size_t i = 0; i < 4; i++) {
        err_t err = {{0}};
        char *out = tmpl_render(tmpl_find(names[i]), in, &err);
        if (!out && (!err.msg[0] || strchr(err.msg, '\n')))
            abort(); /* a failure must explain itself in one line */
        free(out);
    }
    json_decref(in);
    return 0;
}
