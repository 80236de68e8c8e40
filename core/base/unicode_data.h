/* unicode_data.h: the code point classes the pre-tokenizer regexes need.
 *
 * One class per code point (white space wins over the general category);
 * the table lives in the generated core/base/unicode_data.c. */
#ifndef GLM_UNICODE_DATA_H
#define GLM_UNICODE_DATA_H

#include <stdint.h>

typedef enum {
    UNI_OTHER = 0, /* controls, format, unassigned, private use, separators that are not space */
    UNI_N,         /* \p{N} */
    UNI_L,         /* \p{L} */
    UNI_P,         /* \p{P} */
    UNI_M,         /* \p{M} */
    UNI_S,         /* \p{S} */
    UNI_WS,        /* Unicode White_Space */
} uni_class;

typedef struct {
    uint32_t start; /* first code point of the range; it ends where the next begins */
    uint8_t klass;
} uni_range;

extern const uni_range uni_ranges[];
extern const unsigned uni_n_ranges;

/* Class of a code point (anything above U+10FFFF is UNI_OTHER). */
uni_class uni_class_of(uint32_t cp);

#endif
