/* gguf_edit: a copy of a GGUF with string keys, vocabulary entries or an
 * extra tensor changed, for shell tests that need a crafted model (e.g.
 * metadata holding escape sequences, issue 28.3).
 *
 *   gguf_edit IN.gguf OUT.gguf [--str KEY VALUE]... [--token ID TEXT]... [--tensor NAME]...
 *
 * --str sets (or adds) a string key, --token replaces the text of entry ID
 * of tokenizer.ggml.tokens, --tensor adds a one-element F32 tensor named
 * NAME (the model does not use it; `info` lists it).  Values are taken as
 * they are: the shell writes control bytes with printf.  Exit status 0, or
 * 1 with one line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_edit.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gguf_edit IN.gguf OUT.gguf [--str KEY VALUE]... [--token ID TEXT]... [--tensor NAME]...\n");
        return 1;
    }
    model_edit e;
    if (me_open(&e, argv[1]) < 0) {
        fprintf(stderr, "gguf_edit: %s\n", e.err.msg);
        me_close(&e);
        return 1;
    }
    static const float one = 1.0f;
    int rc = 0;
    for (int i = 3; i < argc && rc == 0; i++) {
        if (!strcmp(argv[i], "--str") && i + 2 < argc) {
            me_set_str(&e, argv[i + 1], argv[i + 2]);
            i += 2;
        } else if (!strcmp(argv[i], "--token") && i + 2 < argc) {
            me_set_token(&e, strtoull(argv[i + 1], NULL, 10), argv[i + 2]);
            i += 2;
        } else if (!strcmp(argv[i], "--tensor") && i + 1 < argc) {
            uint64_t ne[1] = {1};
            rc = me_add_tensor(&e, argv[++i], QT_F32, 1, ne, &one, sizeof one);
        } else {
            fprintf(stderr, "gguf_edit: unknown argument '%s'\n", argv[i]);
            rc = -1;
        }
    }
    if (rc == 0 && me_write(&e, argv[2]) < 0) {
        fprintf(stderr, "gguf_edit: %s: %s\n", argv[2], e.err.msg);
        rc = -1;
    }
    me_close(&e);
    return rc ? 1 : 0;
}
