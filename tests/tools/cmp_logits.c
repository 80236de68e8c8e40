/* cmp_logits: compares two logits files ([rows][n_vocab] little-endian
 * float32) and checks thresholds.
 *
 *   cmp_logits --vocab N [--max-rel-l2 X] [--max-abs X] [--min-argmax K] GOT.bin REF.bin
 *
 * Prints one line: rel-L2 (||got-ref||2 / ||ref||2 over every element),
 * max-abs difference, and in how many rows the argmax (lowest id on ties)
 * agrees.  Exit status: 0 when every given threshold holds, 1 when one
 * fails (the line says which), 2 for usage or I/O errors. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *read_floats(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cmp_logits: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            unsigned char *b2 = realloc(buf, cap *= 2);
            if (!b2) {
                free(buf);
                buf = NULL;
            }
            buf = b2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad || len % 4 != 0) {
        fprintf(stderr, "cmp_logits: %s: %s\n", path,
                !buf ? "out of memory" : bad ? "read error" : "size is not a multiple of 4 bytes");
        free(buf);
        return NULL;
    }
    float *v = malloc(len ? len : 4);
    for (size_t i = 0; v && i < len / 4; i++) {
        uint32_t u = (uint32_t)buf[4 * i] | (uint32_t)buf[4 * i + 1] << 8 | (uint32_t)buf[4 * i + 2] << 16 |
                     (uint32_t)buf[4 * i + 3] << 24;
        memcpy(&v[i], &u, 4);
    }
    free(buf);
    *n = len / 4;
    return v;
}

static size_t argmax(const float *v, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

static int usage(void)
{
    fprintf(stderr, "usage: cmp_logits --vocab N [--max-rel-l2 X] [--max-abs X] [--min-argmax K] GOT.bin REF.bin\n");
    return 2;
}

static int parse_num(const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    return end != s && *end == 0 && isfinite(*out) ? 0 : -1;
}

int main(int argc, char **argv)
{
    double vocab = 0, max_rel = -1, max_abs = -1, min_agree = -1;
    const char *files[2] = {0};
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        double *dst = strcmp(argv[i], "--vocab") == 0        ? &vocab
                      : strcmp(argv[i], "--max-rel-l2") == 0 ? &max_rel
                      : strcmp(argv[i], "--max-abs") == 0    ? &max_abs
                      : strcmp(argv[i], "--min-argmax") == 0 ? &min_agree
                                                             : NULL;
        if (dst) {
            if (i + 1 >= argc || parse_num(argv[++i], dst) < 0)
                return usage();
        } else if (argv[i][0] == '-' || nf == 2) {
            return usage();
        } else {
            files[nf++] = argv[i];
        }
    }
    if (nf != 2 || vocab < 1 || vocab != floor(vocab))
        return usage();
    size_t na, nb;
    float *a = read_floats(files[0], &na), *b = a ? read_floats(files[1], &nb) : NULL;
    if (!a || !b) {
        free(a);
        return 2;
    }
    size_t V = (size_t)vocab;
    if (na != nb || na == 0 || na % V != 0) {
        fprintf(stderr, "cmp_logits: %s has %zu floats, %s has %zu: not the same [rows][%zu] shape\n", files[0], na,
                files[1], nb, V);
        free(a);
        free(b);
        return 2;
    }
    double d2 = 0, r2 = 0, mabs = 0;
    int nonfinite = 0;
    for (size_t i = 0; i < na; i++) {
        double d = (double)a[i] - (double)b[i];
        nonfinite |= !isfinite(a[i]);
        d2 += d * d;
        r2 += (double)b[i] * b[i];
        mabs = fabs(d) > mabs ? fabs(d) : mabs;
    }
    size_t rows = na / V, agree = 0;
    for (size_t r = 0; r < rows; r++)
        agree += argmax(a + r * V, V) == argmax(b + r * V, V);
    double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    printf("rel_l2 %.3e  max_abs %.3e  argmax %zu/%zu", rel, mabs, agree, rows);
    int fail = 0;
    if (nonfinite)
        fail = printf("  FAIL: non-finite values in %s", files[0]) > 0;
    if (max_rel >= 0 && !(rel <= max_rel))
        fail = printf("  FAIL: rel_l2 > %.3e", max_rel) > 0;
    if (max_abs >= 0 && !(mabs <= max_abs))
        fail = printf("  FAIL: max_abs > %.3e", max_abs) > 0;
    if (min_agree >= 0 && (double)agree < min_agree)
        fail = printf("  FAIL: argmax agreement < %.0f", min_agree) > 0;
    printf("\n");
    free(a);
    free(b);
    return fail ? 1 : 0;
}
