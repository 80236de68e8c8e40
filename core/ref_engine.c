/* ref_engine.c: PLACEHOLDER until the reference forward pass lands (development only). */
#include "engine.h"

static int ref_create(void **impl, const model *m, const engine_params *p, err_t *err)
{
    (void)impl;
    (void)m;
    (void)p;
    return err_set(err, "the CPU reference backend is not built yet");
}

const engine_backend ref_engine_backend = {.name = "cpu", .create = ref_create};
