/* fuzz_conversation: conversation files are untrusted.  Any input either
 * fails with a one-line error or loads; what loads is written back and
 * loads again with the same messages, turn metadata and sampling (penalties
 * included).  The seeds (tests/fuzz/seeds/conversation) include turns, with
 * null, negative and out-of-range message indices (a null index once wrote
 * before the array), and penalties recorded, absent, null and out of range. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/conversation.h"

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-5 * (fabs(a) > 1 ? fabs(a) : 1);
}

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
        if (strcmp(c.msgs[i].content, d.msgs[i].content) || strcmp(c.msgs[i].role, d.msgs[i].role) ||
            c.msgs[i].n_tokens != d.msgs[i].n_tokens ||
            (!strcmp(c.msgs[i].role, "assistant") && c.msgs[i].stopped != d.msgs[i].stopped))
            abort();
    if (c.sampling.set != d.sampling.set || c.sampling.seed != d.sampling.seed ||
        c.sampling.top_k != d.sampling.top_k || c.sampling.n_predict != d.sampling.n_predict)
        abort();
    /* Reals are written to 6 digits: the same to 1e-5 (the ranges' ends stay within them). */
    if (!near(c.sampling.repeat_penalty, d.sampling.repeat_penalty) ||
        !near(c.sampling.presence_penalty, d.sampling.presence_penalty) ||
        !near(c.sampling.frequency_penalty, d.sampling.frequency_penalty))
        abort();
    sbuf md = {0};
    conv_to_markdown(&c, &md);
    sbuf_free(&md);
    free(json);
    conv_free(&c);
    conv_free(&d);
    return 0;
}
