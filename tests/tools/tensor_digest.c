/* tensor_digest: one SHA-256 over a GGUF file's tensors -- each tensor's
 * name, ggml type and stored bytes, in name order -- so that two files with
 * the same weights compare equal whatever their metadata and tensor order
 * (llama-quantize writes its own order and keys; tests/tools/requant keeps
 * the input's).
 *
 *   tensor_digest FILE          prints 64 hex digits
 *
 * Exit status 0, or 1 with one line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "base/sha256.h"

static int by_name(const void *a, const void *b)
{
    const gguf_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: tensor_digest FILE\n");
        return 1;
    }
    err_t err;
    gguf_ctx *g = gguf_open(argv[1], &err);
    if (!g) {
        fprintf(stderr, "tensor_digest: %s\n", err.msg);
        return 1;
    }
    size_t n = gguf_n_tensors(g);
    const gguf_tensor **t = malloc((n ? n : 1) * sizeof *t);
    if (!t) {
        fprintf(stderr, "tensor_digest: out of memory\n");
        gguf_close(g);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        t[i] = gguf_tensor_at(g, i);
    qsort(t, n, sizeof *t, by_name);
    sha256_ctx c;
    sha256_init(&c);
    for (size_t i = 0; i < n; i++) {
        unsigned char type[4] = {(unsigned char)t[i]->type, (unsigned char)(t[i]->type >> 8),
                                 (unsigned char)(t[i]->type >> 16), (unsigned char)(t[i]->type >> 24)};
        sha256_update(&c, t[i]->name, strlen(t[i]->name) + 1);
        sha256_update(&c, type, sizeof type);
        sha256_update(&c, t[i]->data, (size_t)t[i]->size);
    }
    unsigned char d[32];
    char hex[65];
    sha256_final(&c, d);
    sha256_hex(d, hex);
    printf("%s\n", hex);
    free(t);
    gguf_close(g);
    return 0;
}
