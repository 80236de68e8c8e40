/* json_dump.h: JSON values written the way Python writes them.
 *
 * Chat templates are Jinja run by Python, so what they print is Python's
 * text for a value: json.dumps(v, ensure_ascii=False) for `| tojson`
 * (", " and ": " separators, keys in their given order, floats as repr,
 * non-ASCII kept), and str(v) for `{{ v }}` (None, True, 1.5, 'quoted'
 * strings inside lists and dicts).  Values are jansson's. */
#ifndef GLM_JSON_DUMP_H
#define GLM_JSON_DUMP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A growable byte buffer; `oom` is set when an append could not grow it. */
typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} jbuf;

void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
/* NUL-terminated contents, or NULL when memory ran out (the buffer is freed). */
char *jbuf_finish(jbuf *b);
void jbuf_free(jbuf *b);

/* json.dumps(v, ensure_ascii=False) */
void py_json(jbuf *b, const json_t *v);
/* str(v): a string as itself, anything else as repr(v) */
void py_str(jbuf *b, const json_t *v);
/* repr(v) */
void py_repr(jbuf *b, const json_t *v);
/* repr(float) */
void py_float(jbuf *b, double d);

/* Python's str.isspace() for one code point (what str.strip() removes). */
bool py_isspace(unsigned cp);

#endif
