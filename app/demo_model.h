/* demo_model.h: the small model built into glmchat, used when no model is
 * given: app/demo/glm-demo.gguf, trained by app/tools/demo_train (a
 * GLM-4.7-Flash-architecture model that answers questions about words and
 * commands), embedded by app/demo_model.S. */
#ifndef GLM_DEMO_MODEL_H
#define GLM_DEMO_MODEL_H

#include <stddef.h>

#include "error.h"
#include "model.h"

#define DEMO_MODEL_NAME "(built-in demo model)"

int demo_model_load(model *m, err_t *err);
const void *demo_model_data(size_t *size);

#endif
