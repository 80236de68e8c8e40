/* demo_model.c: opens the embedded demo model in place (no copy). */
#include "demo_model.h"

#include "format/gguf.h"

extern const unsigned char glm_demo_gguf[];
extern const unsigned char glm_demo_gguf_end[];

const void *demo_model_data(size_t *size)
{
    *size = (size_t)(glm_demo_gguf_end - glm_demo_gguf);
    return glm_demo_gguf;
}

int demo_model_load(model *m, err_t *err)
{
    size_t size;
    const void *data = demo_model_data(&size);
    gguf_ctx *ctx = gguf_open_memory(data, size, DEMO_MODEL_NAME, err);
    if (!ctx)
        return -1;
    return model_load_gguf(m, ctx, err);
}
