/* demo_model.h: the small random model built into glmchat, used when no
 * model is given (its answers are noise; it shows the app working). */
#ifndef GLM_DEMO_MODEL_H
#define GLM_DEMO_MODEL_H

#include <stddef.h>

#include "error.h"
#include "model.h"

#define DEMO_MODEL_NAME "(built-in demo model)"

int demo_model_load(model *m, err_t *err);
const void *demo_model_data(size_t *size);

#endif
