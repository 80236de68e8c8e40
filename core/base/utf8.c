/* utf8.c: UTF-8 decoding (lax, llama.cpp-compatible; and strict) and encoding. */
#include "utf8.h"

#include "unicode_data.h"

uint32_t utf8_decode_lax(const unsigned char *s, size_t n, size_t *used)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    *used = 1;
    if (c < 0x80)
        return c;
    if ((c & 0x40) == 0) /* a continuation byte cannot start a sequence */
        return 0xFFFD;
    if ((c & 0x20) == 0) {
        len = 2;
        cp = c & 0x1F;
    } else if ((c & 0x10) == 0) {
        len = 3;
        cp = c & 0x0F;
    } else if ((c & 0x08) == 0) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0xFFFD;
    }
    if (len > n)
        return 0xFFFD;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0xFFFD;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *used = len;
    return cp;
}

size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp > 0x10FFFF)
        cp = 0xFFFD;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_check(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    int len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else {
        return -1;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n)
            return 0;
        unsigned char b = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h)
            return -i;
    }
    return len;
}

uni_class uni_class_of(uint32_t cp)
{
    if (cp > 0x10FFFF)
        return UNI_OTHER;
    unsigned lo = 0, hi = uni_n_ranges; /* find the last range with start <= cp */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (uni_ranges[mid].start <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return (uni_class)uni_ranges[lo].klass;
}
