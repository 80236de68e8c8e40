#!/bin/sh
# t_man.sh: man/glmchat.1 renders without warnings and documents every
# option of --help and every /command of the chat.
. tests/lib.sh

if ! command -v man >/dev/null 2>&1; then
    fail man_renders "man is not installed (apt-get install man-db)"
    done_tests
fi

# groff's warnings go to stderr; a clean page has none.
LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l man/glmchat.1 >"$TMP/page" 2>"$TMP/warn"
rc=$?
if [ $rc -ne 0 ]; then fail man_renders "man exited $rc: $(head -c 300 "$TMP/warn")"
elif [ -s "$TMP/warn" ]; then fail man_renders "warnings: $(head -c 300 "$TMP/warn")"
elif [ "$(wc -l <"$TMP/page")" -lt 100 ]; then fail man_renders "only $(wc -l <"$TMP/page") lines"
else ok man_renders
fi

# No rendered line is wider than MANWIDTH (counted on the ASCII rendering,
# where every character is one byte).
LC_ALL=C MANWIDTH=80 man -l man/glmchat.1 >"$TMP/ascii" 2>/dev/null
wide=$(awk 'length($0) > 80' "$TMP/ascii" | head -n 1)
if [ -n "$wide" ]; then fail man_width "line wider than 80: $wide"; else ok man_width; fi

missing=
for s in NAME SYNOPSIS DESCRIPTION OPTIONS KEYS COMMANDS "CONVERSATION FILES" SETTINGS THEMES FILES ENVIRONMENT \
         "EXIT STATUS" EXAMPLES; do
    grep -q "^$s\$" "$TMP/page" || missing="$missing $s"
done
if [ -n "$missing" ]; then fail man_sections "missing:$missing"; else ok man_sections; fi

# Every long option that --help lists is in the page.
"$GLMCHAT" --help >"$TMP/help" 2>&1
missing=
for o in $(grep -oE -- '--[a-z][a-z-]*' "$TMP/help" | sort -u); do
    grep -qF -- "$o" "$TMP/page" || missing="$missing $o"
done
if [ -n "$missing" ]; then fail man_options "not in the man page:$missing"; else ok man_options; fi

missing=
for c in /help /quit /clear /system /retry /edit /set /template /think /theme /save /load /replay /export /stats; do
    grep -qF -- "$c" "$TMP/page" || missing="$missing $c"
done
if [ -n "$missing" ]; then fail man_commands "not in the man page:$missing"; else ok man_commands; fi

# Every settings key the program knows is documented.
missing=
for k in model backend device template think temp top-k top-p min-p seed n-predict ctx theme side-pane side-width mouse ignore-eos draft; do
    grep -qE -- "(^|[ ,(])$k([ ,.)]|$)" "$TMP/page" || missing="$missing $k"
done
if [ -n "$missing" ]; then fail man_settings "not in the man page:$missing"; else ok man_settings; fi

done_tests
