/* fixtures.h: the oracle models of tests/data/models for C tests.
 *
 * Every directory with a fixture.json is a model; its files ("files" keys,
 * "<name>.<variant>.gguf") are the variants (f32, q8_0, ...).  The same
 * code runs on the hidden set with other names, shapes and seeds, so
 * nothing here names a particular model. */
#ifndef GLM_TESTS_FIXTURES_H
#define GLM_TESTS_FIXTURES_H

#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Paths and messages here are short; a truncated failure message would
 * still fail the test, so gcc's truncation analysis only adds noise. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#define FIXTURE_ROOT "tests/data/models"
#define FIXTURE_MAX 16
#define FIXTURE_MAX_VARIANTS 8

typedef struct {
    char dir[256];
    char name[64];
    json_t *json; /* fixture.json */
    int n_variants;
    char variants[FIXTURE_MAX_VARIANTS][16]; /* "f32", "q8_0", ... (f32 first) */
} fixture_model;

static inline int fixture_cmp(const void *a, const void *b)
{
    return strcmp(((const fixture_model *)a)->name, ((const fixture_model *)b)->name);
}

static inline void fixture_add_variants(fixture_model *f)
{
    json_t *files = json_object_get(f->json, "files");
    const char *key;
    json_t *v;
    size_t nl = strlen(f->name);
    json_object_foreach(files, key, v) {
        size_t kl = strlen(key);
        if (kl <= nl + 6 || strncmp(key, f->name, nl) != 0 || key[nl] != '.' || strcmp(key + kl - 5, ".gguf") != 0)
            continue;
        if (f->n_variants == FIXTURE_MAX_VARIANTS || kl - nl - 6 >= sizeof f->variants[0])
            continue;
        char *dst = f->variants[f->n_variants++];
        memcpy(dst, key + nl + 1, kl - nl - 6);
        dst[kl - nl - 6] = 0;
        if (strcmp(dst, "f32") == 0 && f->n_variants > 1) { /* f32 first */
            char tmp[16];
            memcpy(tmp, f->variants[0], sizeof tmp);
            memcpy(f->variants[0], dst, sizeof tmp);
            memcpy(dst, tmp, sizeof tmp);
        }
    }
}

/* Fills out[] (sorted by name); returns the count. */
static inline int fixtures_list(fixture_model *out, int max)
{
    DIR *d = opendir(FIXTURE_ROOT);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        if (de->d_name[0] == '.')
            continue;
        fixture_model *f = &out[n];
        memset(f, 0, sizeof *f);
        snprintf(f->dir, sizeof f->dir, "%s/%s", FIXTURE_ROOT, de->d_name);
        char path[512];
        snprintf(path, sizeof path, "%s/fixture.json", f->dir);
        f->json = json_load_file(path, 0, NULL);
        if (!f->json)
            continue;
        const char *name = json_string_value(json_object_get(f->json, "name"));
        snprintf(f->name, sizeof f->name, "%s", name ? name : de->d_name);
        fixture_add_variants(f);
        n++;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof *out, fixture_cmp);
    return n;
}

static inline void fixtures_free(fixture_model *f, int n)
{
    for (int i = 0; i < n; i++)
        json_decref(f[i].json);
}

static inline void fixture_path(const fixture_model *f, const char *variant, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s.%s.gguf", f->dir, f->name, variant);
}

/* json_t at a dotted path ("greedy.f32"); NULL when absent. */
static inline json_t *json_at(json_t *root, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = root;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, strtoul(tok, NULL, 10)) : json_object_get(v, tok);
    return v;
}

/* An int array at path into ids (malloc'd); returns the count, 0 if absent. */
static inline uint32_t json_ids(json_t *root, const char *path, int32_t **ids)
{
    json_t *a = json_at(root, path);
    *ids = NULL;
    if (!json_is_array(a) || json_array_size(a) == 0)
        return 0;
    *ids = malloc(json_array_size(a) * sizeof **ids);
    for (size_t i = 0; *ids && i < json_array_size(a); i++)
        (*ids)[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return *ids ? (uint32_t)json_array_size(a) : 0;
}

/* A sidecar JSON of the fixture dir ("logits.ref_f64.q8_0.json"). */
static inline json_t *fixture_sidecar(const fixture_model *f, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", f->dir, file);
    return json_load_file(path, 0, NULL);
}

/* Little-endian float32 file -> malloc'd floats; returns the count. */
static inline size_t read_f32_file(const char *path, float **out)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = len > 0 ? malloc((size_t)len) : NULL;
    size_t n = 0;
    if (b && fread(b, 1, (size_t)len, fp) == (size_t)len && (*out = malloc((size_t)len))) {
        n = (size_t)len / 4;
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                         (uint32_t)b[4 * i + 3] << 24;
            memcpy(&(*out)[i], &u, 4);
        }
    }
    free(b);
    fclose(fp);
    return n;
}

#endif
