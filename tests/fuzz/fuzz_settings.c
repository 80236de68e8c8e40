/* fuzz_settings: the settings file is untrusted.  Any text either fails
 * with a one-line error naming FILE:LINE, or loads; what loads is within
 * the ranges settings.h documents, reads the same a second time, counts as
 * no key given explicitly, and formats for /set in one line. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

static bool in(float v, float lo, float hi)
{
    return isfinite(v) && v >= lo && v <= hi;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    settings s;
    settings_defaults(&s);
    err_t err;
    if (settings_parse(&s, (const char *)data, size, "fuzz.settings", &err) != 0) {
        if (!err.msg[0] || strchr(err.msg, '\n') || strncmp(err.msg, "fuzz.settings:", 14))
            abort();
        return 0;
    }
    if ((s.has_temp && !in(s.temp, 0, 100)) || (s.has_top_p && !in(s.top_p, 0, 1)) ||
        (s.has_min_p && !in(s.min_p, 0, 1)) || (s.has_top_k && (s.top_k < 0 || s.top_k > 1000000)) ||
        !in(s.repeat_penalty, 0.1f, 10) || !in(s.presence_penalty, -2, 2) || !in(s.frequency_penalty, -2, 2) ||
        s.n_predict < -1 || s.n_predict > 10000000 || s.given != 0 || s.device < -1 || s.device > 64 ||
        (s.n_ctx != 0 && (s.n_ctx < 16 || s.n_ctx > 1u << 24)) || (s.side_width != 0 && (s.side_width < 24 || s.side_width > 200)) ||
        (s.think != 0 && s.think != 1) ||
        memchr(s.model, 0, sizeof s.model) == NULL || memchr(s.backend, 0, sizeof s.backend) == NULL ||
        memchr(s.tmpl, 0, sizeof s.tmpl) == NULL || memchr(s.theme, 0, sizeof s.theme) == NULL)
        abort();
    settings again;
    settings_defaults(&again);
    if (settings_parse(&again, (const char *)data, size, "fuzz.settings", &err) != 0 || memcmp(&s, &again, sizeof s))
        abort();
    char line[512];
    settings_format_sampling(&s, line, sizeof line);
    if (strchr(line, '\n'))
        abort();
    sampler_params sp;
    settings_to_sampler(&s, NULL, NULL, 7, &sp);
    return 0;
}
