/* spec_testlib.h: what the drafting tests of the fast CPU backend and of
 * the Vulkan one share (test_cpu_spec.c, test_vk_spec.c): the fixture
 * list, a private temporary directory, random prompts, and the models
 * with a NextN block they run on.
 *
 * Promises:
 *  - M(err): err's message (msg_of is kept out of line: the message of a
 *    struct passed by address, read where the CHECK formats it);
 *  - fx / n_fx / tmpdir: each program's own (statics); main() fills them
 *    (fixtures_list, mkdtemp) before any case runs;
 *  - random_tokens: n ids below V, the same for the same seed everywhere;
 *  - load_fixture_nextn / make_synth: 0 and a loaded model (its file
 *    already unlinked from tmpdir: the mapping stays valid), or -1 with a
 *    CHECK failure naming the model. */
#ifndef GLM_TESTS_SPEC_TESTLIB_H
#define GLM_TESTS_SPEC_TESTLIB_H

#include <unistd.h>

#include "fixtures.h"
#include "model/model.h"
#include "model/synth.h"
#include "model_variants.h"
#include "testlib.h"

__attribute__((noinline, unused)) static const char *msg_of(const err_t *e) { return e->msg; }
#define M(e) msg_of(&(e))

static fixture_model fx[FIXTURE_MAX];
static int n_fx;
static char tmpdir[256];

static inline void random_tokens(int32_t *t, uint32_t n, uint32_t V, uint64_t seed)
{
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((seed >> 33) % V);
    }
}

/* Fixture f's variant with a NextN block added (model_variants.h). */
static inline int load_fixture_nextn(const fixture_model *f, const char *var, model *m)
{
    char src[512], out[512];
    err_t err;
    model plain;
    fixture_path(f, var, src, sizeof src);
    if (model_load(&plain, src, &err) < 0) {
        CHECK(0, "%s", M(err));
        return -1;
    }
    snprintf(out, sizeof out, "%s/%s-%s-nextn.gguf", tmpdir, f->name, var);
    int rc = mv_nextn(&plain.cfg, src, out, &err);
    model_free(&plain);
    if (rc < 0 || model_load(m, out, &err) < 0) {
        CHECK(0, "%s %s with a NextN block: %s", f->name, var, M(err));
        return -1;
    }
    unlink(out); /* the mapping stays valid */
    return 0;
}

/* A synthetic model of the preset and file type ftype with a NextN block. */
static inline int make_synth(const char *preset, uint32_t ftype, uint64_t seed, model *m)
{
    synth_config c;
    err_t err;
    if (synth_preset(preset, &c, &err) < 0) {
        CHECK(0, "%s", M(err));
        return -1;
    }
    c.nextn = 1;
    c.ftype = ftype;
    c.seed = seed;
    char path[512];
    snprintf(path, sizeof path, "%s/synth-%u.gguf", tmpdir, ftype);
    synth_options opt = {.n_threads = 1};
    synth_stats st;
    if (synth_write(&c, path, &opt, &st, &err) < 0 || model_load(m, path, &err) < 0) {
        CHECK(0, "%s type %u: %s", preset, ftype, M(err));
        return -1;
    }
    unlink(path);
    return 0;
}

#endif
