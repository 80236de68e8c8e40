/* embed_spv: turns compiled SPIR-V files into a C table and an enum.
 *
 * usage: embed_spv OUT_BASE PREFIX file.spv...
 * writes OUT_BASE.h and OUT_BASE.c: `const vk_spv PREFIX_table[]` (the
 * words of each file, gpu/vk_spv.h) and `enum PREFIX_id` whose constants are
 * PREFIX_ and the file's base name in capitals (mv_xs.spv -> SPV_MV_XS for
 * PREFIX spv), plus PREFIX_COUNT.  A build-time tool: the shaders travel
 * inside the binary, so glmchat needs no files at run time, and a kernel
 * builder that names a shader which does not exist fails to compile.
 *
 * A file named NAME.tT.spv is NAME compiled for weight type T alone
 * (-DFIXED_TYPE=T, see the Makefile's TYPED_SHADERS): it gets no enum
 * constant of its own but goes into NAME's by_type[T].  The specialization
 * constants NAME declares and the copy does not are the weight types the
 * copy fixed (vk_spv.type_specs); they are read from the SPIR-V's SpecId
 * decorations, so nothing here knows which slot a kernel keeps its type in. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_FILES = 2048, MAX_TYPES = 64 };

typedef struct {
    const char *path;
    char name[256];   /* NAME (a copy's base shader's name) */
    int type;         /* T of NAME.tT.spv, -1 for a base shader */
    uint32_t *words;
    size_t n;
    uint32_t spec_ids; /* bit i: the module declares specialization constant i */
} spv_file;

static int fail(const char *what, const char *path)
{
    fprintf(stderr, "embed_spv: %s: %s\n", what, path);
    return 1;
}

static int is_ident(const char *s)
{
    if (!s[0] || isdigit((unsigned char)s[0]))
        return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return 0;
    return 1;
}

/* The file's base name without ".spv" (and without ".tT", whose T goes to
 * *type); 0 unless the name is a C identifier. */
static int base_name(const char *path, char *out, size_t cap, int *type)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, cap, "%s", b);
    char *dot = strstr(out, ".spv");
    if (dot)
        *dot = 0;
    *type = -1;
    char *t = strstr(out, ".t");
    if (t) {
        char *end;
        long v = strtol(t + 2, &end, 10);
        if (end == t + 2 || *end || v < 0 || v >= MAX_TYPES)
            return 0;
        *type = (int)v;
        *t = 0;
    }
    return is_ident(out);
}

static void upper(const char *s, char *out, size_t cap)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++)
        out[i] = (char)toupper((unsigned char)s[i]);
    out[i] = 0;
}

static int read_spv(spv_file *f)
{
    FILE *in = fopen(f->path, "rb");
    if (!in)
        return fail("cannot read", f->path);
    size_t cap = 1 << 16;
    f->words = malloc(cap * 4);
    unsigned char w[4];
    size_t got;
    f->n = 0;
    while (f->words && (got = fread(w, 1, 4, in)) == 4) {
        if (f->n == cap) {
            uint32_t *nw = realloc(f->words, (cap *= 2) * 4);
            if (!nw)
                break;
            f->words = nw;
        }
        f->words[f->n++] = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
    }
    fclose(in);
    if (!f->words || f->n < 5 || f->words[0] != 0x07230203u)
        return fail("not a SPIR-V module", f->path);
    /* OpDecorate (71) <target> SpecId (1) <id> */
    f->spec_ids = 0;
    for (size_t i = 5; i < f->n;) {
        uint32_t wc = f->words[i] >> 16, op = f->words[i] & 0xffffu;
        if (wc == 0 || i + wc > f->n)
            return fail("a malformed instruction", f->path);
        if (op == 71 && wc == 4 && f->words[i + 2] == 1) {
            if (f->words[i + 3] >= 32)
                return fail("a specialization constant id above 31", f->path);
            f->spec_ids |= 1u << f->words[i + 3];
        }
        i += wc;
    }
    return 0;
}

static void emit_words(FILE *c, const char *prefix, const spv_file *f)
{
    if (f->type < 0)
        fprintf(c, "static const uint32_t %s_%s[] = {", prefix, f->name);
    else
        fprintf(c, "static const uint32_t %s_%s_t%d[] = {", prefix, f->name, f->type);
    for (size_t i = 0; i < f->n; i++)
        fprintf(c, "%s0x%08xu,", i % 8 ? "" : "\n", f->words[i]);
    fprintf(c, "\n};\n");
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return fail("usage", "embed_spv OUT_BASE PREFIX file.spv...");
    if (argc - 3 > MAX_FILES)
        return fail("too many files", argv[1]);
    const char *prefix = argv[2];
    static spv_file files[MAX_FILES];
    int nf = argc - 3;
    for (int i = 0; i < nf; i++) {
        files[i].path = argv[i + 3];
        if (!base_name(files[i].path, files[i].name, sizeof files[i].name, &files[i].type))
            return fail("not a C identifier (or NAME.tT with T below 64)", files[i].path);
        if (read_spv(&files[i]))
            return 1;
    }
    char hpath[4096], cpath[4096], up[128], guard[160];
    snprintf(hpath, sizeof hpath, "%s.h", argv[1]);
    snprintf(cpath, sizeof cpath, "%s.c", argv[1]);
    upper(prefix, up, sizeof up);
    snprintf(guard, sizeof guard, "GLM_%s_TABLE_H", up);
    const char *hname = strrchr(hpath, '/');
    hname = hname ? hname + 1 : hpath;
    FILE *h = fopen(hpath, "w");
    FILE *c = fopen(cpath, "w");
    if (!h || !c)
        return fail("cannot write", argv[1]);
    fprintf(h, "/* generated by embed_spv: do not edit */\n#ifndef %s\n#define %s\n#include \"vk_spv.h\"\n\nenum %s_id {\n",
            guard, guard, prefix);
    fprintf(c, "/* generated by embed_spv: do not edit */\n#include \"%s\"\n", hname);
    for (int i = 0; i < nf; i++)
        emit_words(c, prefix, &files[i]);
    /* each base shader's copies per type and the constants they fixed */
    static int ntypes_of[MAX_FILES];
    static uint32_t fixed_of[MAX_FILES];
    for (int j = 0; j < nf; j++) {
        const spv_file *v = &files[j];
        if (v->type < 0)
            continue;
        int i = 0;
        while (i < nf && !(files[i].type < 0 && strcmp(files[i].name, v->name) == 0))
            i++;
        if (i == nf)
            return fail("a typed copy of a shader that is not in the list", v->path);
        uint32_t gone = files[i].spec_ids & ~v->spec_ids;
        if (v->spec_ids & ~files[i].spec_ids)
            return fail("a typed copy declares a specialization constant its shader does not", v->path);
        if (gone == 0 || (fixed_of[i] && gone != fixed_of[i]))
            return fail("a typed copy fixes no weight type, or other ones than the shader's other copies", v->path);
        fixed_of[i] = gone;
        if (v->type + 1 > ntypes_of[i])
            ntypes_of[i] = v->type + 1;
        fprintf(c, "static const vk_spv %s_%s_t%d_e = {\"%s.t%d\", %s_%s_t%d, sizeof %s_%s_t%d, NULL, 0, 0};\n", prefix,
                v->name, v->type, v->name, v->type, prefix, v->name, v->type, prefix, v->name, v->type);
    }
    for (int i = 0; i < nf; i++) {
        if (!ntypes_of[i])
            continue;
        fprintf(c, "static const vk_spv *const %s_%s_by_type[%d] = {\n", prefix, files[i].name, ntypes_of[i]);
        for (int j = 0; j < nf; j++)
            if (files[j].type >= 0 && strcmp(files[j].name, files[i].name) == 0)
                fprintf(c, "    [%d] = &%s_%s_t%d_e,\n", files[j].type, prefix, files[j].name, files[j].type);
        fprintf(c, "};\n");
    }
    fprintf(c, "const vk_spv %s_table[%s_COUNT] = {\n", prefix, up);
    for (int i = 0; i < nf; i++) {
        const spv_file *b = &files[i];
        if (b->type >= 0)
            continue;
        char uname[256];
        upper(b->name, uname, sizeof uname);
        fprintf(h, "    %s_%s,\n", up, uname);
        if (ntypes_of[i])
            fprintf(c, "    {\"%s\", %s_%s, sizeof %s_%s, %s_%s_by_type, %d, 0x%xu},\n", b->name, prefix, b->name, prefix,
                    b->name, prefix, b->name, ntypes_of[i], fixed_of[i]);
        else
            fprintf(c, "    {\"%s\", %s_%s, sizeof %s_%s, NULL, 0, 0},\n", b->name, prefix, b->name, prefix, b->name);
    }
    fprintf(c, "};\n");
    fprintf(h, "    %s_COUNT\n};\n\nextern const vk_spv %s_table[%s_COUNT];\n\n#endif\n", up, prefix, up);
    if (fclose(h) || fclose(c))
        return fail("write failed", argv[1]);
    return 0;
}
