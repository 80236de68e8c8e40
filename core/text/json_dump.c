/* json_dump.c: Python's json.dumps / str / repr for jansson values. */
#include "json_dump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/unicode_data.h"
#include "base/utf8.h"

/* ---- buffer ----------------------------------------------------------------- */

void jbuf_put(jbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void jbuf_puts(jbuf *b, const char *s)
{
    jbuf_put(b, s, strlen(s));
}

char *jbuf_finish(jbuf *b)
{
    if (b->oom) {
        jbuf_free(b);
        return NULL;
    }
    if (!b->s)
        jbuf_put(b, "", 0);
    char *s = b->s;
    b->s = NULL;
    return s;
}

void jbuf_free(jbuf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

/* ---- numbers ------------------------------------------------------------------ */

/* repr(float): the shortest digits that read back to the same double, in
 * fixed notation when the decimal exponent is in [-4, 16), else as
 * d.ddde+XX; fixed notation always shows a fractional part. */
void py_float(jbuf *b, double d)
{
    char buf[64];
    if (isnan(d)) {
        jbuf_puts(b, "nan");
        return;
    }
    if (isinf(d)) {
        jbuf_puts(b, d < 0 ? "-inf" : "inf");
        return;
    }
    int prec;
    for (prec = 0; prec < 17; prec++) { /* shortest %.{prec}e that round-trips */
        snprintf(buf, sizeof buf, "%.*e", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    snprintf(buf, sizeof buf, "%.*e", prec, d);
    /* buf = [-]D[.DDD]e[+-]XX: take the digits and the exponent apart */
    char digits[32];
    size_t nd = 0;
    const char *p = buf;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            o += (size_t)sprintf(out + o, "0.");
            for (int i = -1; i > exp; i--)
                out[o++] = '0';
            memcpy(out + o, digits, nd);
            o += nd;
        } else {
            for (int i = 0; i <= exp; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd) {
                memcpy(out + o, digits + exp + 1, nd - (size_t)exp - 1);
                o += nd - (size_t)exp - 1;
            } else {
                out[o++] = '0';
            }
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        o += (size_t)sprintf(out + o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    jbuf_put(b, out, o);
}

static void put_int(jbuf *b, json_int_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, v);
    jbuf_put(b, buf, (size_t)n);
}

/* ---- strings as json.dumps writes them ----------------------------------------- */

static void dump_string(jbuf *b, const char *s, size_t n)
{
    jbuf_put(b, "\"", 1);
    size_t run = 0; /* bytes copied as they are */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (!esc)
            continue;
        jbuf_put(b, s + run, i - run);
        jbuf_puts(b, esc);
        run = i + 1;
    }
    jbuf_put(b, s + run, n - run);
    jbuf_put(b, "\"", 1);
}

/* ---- strings as repr writes them ---------------------------------------------- */

bool py_isspace(unsigned cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* str.isprintable() for one code point: not a control, format, private,
 * unassigned or separator character (the space excepted). */
static bool py_isprintable(uint32_t cp)
{
    if (cp == ' ')
        return true;
    uni_class k = uni_class_of(cp);
    return k != UNI_OTHER && k != UNI_WS;
}

static void repr_string(jbuf *b, const char *s, size_t n)
{
    bool has_single = memchr(s, '\'', n) != NULL, has_double = memchr(s, '"', n) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    jbuf_put(b, &quote, 1);
    for (size_t i = 0; i < n;) {
        size_t used;
        uint32_t cp = utf8_decode_lax((const unsigned char *)s + i, n - i, &used);
        char esc[16];
        if (cp == (uint32_t)quote || cp == '\\') {
            esc[0] = '\\';
            esc[1] = (char)cp;
            jbuf_put(b, esc, 2);
        } else if (cp == '\t') {
            jbuf_puts(b, "\\t");
        } else if (cp == '\n') {
            jbuf_puts(b, "\\n");
        } else if (cp == '\r') {
            jbuf_puts(b, "\\r");
        } else if (py_isprintable(cp)) {
            jbuf_put(b, s + i, used);
        } else if (cp < 0x100) {
            snprintf(esc, sizeof esc, "\\x%02x", cp);
            jbuf_puts(b, esc);
        } else if (cp < 0x10000) {
            snprintf(esc, sizeof esc, "\\u%04x", cp);
            jbuf_puts(b, esc);
        } else {
            snprintf(esc, sizeof esc, "\\U%08x", cp);
            jbuf_puts(b, esc);
        }
        i += used;
    }
    jbuf_put(b, &quote, 1);
}

/* ---- values: one walker for json.dumps, repr and str ------------------------------ */

/* What differs between json.dumps and repr: how a string (keys included)
 * and a float are written, and the three literals.  The walk itself -- key
 * order, ", " and ": " separators, brackets -- is the same for both. */
typedef struct {
    void (*put_string)(jbuf *b, const char *s, size_t n);
    void (*put_real)(jbuf *b, double d);
    const char *true_text, *false_text, *null_text;
} py_dialect;

static void py_walk(jbuf *b, const json_t *v, const py_dialect *d)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        bool first = true;
        jbuf_put(b, "{", 1);
        json_object_foreach((json_t *)v, key, val) {
            if (!first)
                jbuf_put(b, ", ", 2);
            first = false;
            d->put_string(b, key, strlen(key));
            jbuf_put(b, ": ", 2);
            py_walk(b, val, d);
        }
        jbuf_put(b, "}", 1);
        break;
    }
    case JSON_ARRAY:
        jbuf_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                jbuf_put(b, ", ", 2);
            py_walk(b, json_array_get(v, i), d);
        }
        jbuf_put(b, "]", 1);
        break;
    case JSON_STRING:
        d->put_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        put_int(b, json_integer_value(v));
        break;
    case JSON_REAL:
        d->put_real(b, json_real_value(v));
        break;
    case JSON_TRUE: jbuf_puts(b, d->true_text); break;
    case JSON_FALSE: jbuf_puts(b, d->false_text); break;
    case JSON_NULL: jbuf_puts(b, d->null_text); break;
    }
}

/* json.dumps writes non-finite floats as JavaScript's names (allow_nan). */
static void dump_real(jbuf *b, double d)
{
    if (isnan(d))
        jbuf_puts(b, "NaN");
    else if (isinf(d))
        jbuf_puts(b, d < 0 ? "-Infinity" : "Infinity");
    else
        py_float(b, d);
}

void py_json(jbuf *b, const json_t *v)
{
    static const py_dialect json_dumps = {dump_string, dump_real, "true", "false", "null"};
    py_walk(b, v, &json_dumps);
}

void py_repr(jbuf *b, const json_t *v)
{
    static const py_dialect repr = {repr_string, py_float, "True", "False", "None"};
    py_walk(b, v, &repr);
}

void py_str(jbuf *b, const json_t *v)
{
    if (json_is_string(v))
        jbuf_put(b, json_string_value(v), json_string_length(v));
    else
        py_repr(b, v);
}
