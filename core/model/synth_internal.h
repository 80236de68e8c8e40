/* synth_internal.h: what the synthetic-model sources share (core/model/synth.c,
 * synth_types.c, synth_blocks.c); not part of the API (synth.h).
 *
 * Promises: synth_assign_types() leaves the table in the order the file
 * holds it (llama-quantize's for quantized types, the converter's for
 * float ones) with every tensor's type set, or fails with one line. */
#ifndef GLM_SYNTH_INTERNAL_H
#define GLM_SYNTH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "synth.h"

bool synth_ftype_known(uint32_t ftype);
bool synth_is_float_ftype(uint32_t ftype);
/* The general.file_type value a file of this type carries. */
uint32_t synth_file_type_key(uint32_t ftype);
/* Sorts the table into file order and sets every tensor's type. */
int synth_assign_types(const synth_config *cfg, synth_table *tab, err_t *err);

#endif
