/* fuzz_theme: theme files are untrusted.  Any text either fails with a
 * one-line error naming FILE:LINE, or gives a theme whose every element has
 * colours curses can take (the default, a palette index or #rrggbb) and
 * known attributes, and whose colours reduce to the terminal's 256, 16 or
 * 8 colours within range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "theme.h"

static bool color_ok(int c)
{
    return c == THEME_DEFAULT || (c >= 0 && c <= 255) || (c & ~0xffffff) == THEME_RGB_FLAG;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    theme t;
    err_t err;
    if (theme_parse(&t, (const char *)data, size, "fuzz.theme", &err) != 0) {
        if (!err.msg[0] || strchr(err.msg, '\n') || strncmp(err.msg, "fuzz.theme:", 11))
            abort();
        return 0;
    }
    const unsigned known = THEME_BOLD | THEME_DIM | THEME_ITALIC | THEME_UNDERLINE | THEME_REVERSE | THEME_STANDOUT;
    for (int e = 0; e < TH_COUNT; e++) {
        const theme_style *st = &t.el[e];
        if (!color_ok(st->fg) || !color_ok(st->bg) || (st->attrs & ~known) || !theme_el_name((theme_el)e))
            abort();
        static const int depths[] = {256, 16, 8};
        for (int k = 0; k < 3; k++) {
            bool bold = false;
            int fg = theme_reduce_color(st->fg, depths[k], &bold), bg = theme_reduce_color(st->bg, depths[k], NULL);
            if (fg < THEME_DEFAULT || fg >= depths[k] || bg < THEME_DEFAULT || bg >= depths[k])
                abort();
        }
    }
    return 0;
}
