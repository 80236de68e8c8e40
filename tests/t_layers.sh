#!/bin/sh
# t_layers.sh: the layers depend one way (app -> gpu -> core; core on
# neither), no files use each other in a circle, and no folders either.
#
# Uses are read from what was built, not guessed from the text: a call (or a
# use of a global) is an undefined symbol in one object that another object
# defines (nm); an include is a direct `#include "..."` line, resolved as the
# compiler does (the includer's folder, then the layer roots).  Circles are
# found by $BUILD/tools/dep_cycles.  The include direction between the
# layers is also kept by the compiler (each layer is built with only the
# include paths it may use: Makefile); this test keeps the calls.
. tests/lib.sh

# (objects whose source is gone -- a file moved or removed since they were
# built -- are not the tree's, and left out)
objs=$(find "$BUILD/core" "$BUILD/gpu" "$BUILD/app" -name '*.o' 2>/dev/null | sort |
    while read -r o; do src=${o#"$BUILD/"}; [ -f "${src%.o}.c" ] && echo "$o"; done)
if [ -z "$objs" ]; then
    fail layers_built "no objects under $BUILD/core, gpu, app (run make first)"
    done_tests
fi

# --- calls: "FROM TO SYMBOL" for every symbol one object takes from another
# shellcheck disable=SC2086
nm -A $objs 2>"$TMP/nm.err" | awk -v build="$BUILD/" '
    {
        colon = index($0, ":"); file = substr($0, 1, colon - 1)
        sub("^" build, "", file); sub(/\.o$/, ".c", file)
        n = split(substr($0, colon + 1), f, " ")
        type = f[n - 1]; sym = f[n]
        if (type == "U") { nuse++; use_file[nuse] = file; use_sym[nuse] = sym }
        else if (type ~ /^[TDBRCVW]$/) def[sym] = file
    }
    END { for (i = 1; i <= nuse; i++) if (use_sym[i] in def) print use_file[i], def[use_sym[i]], use_sym[i] }
' >"$TMP/calls"
if [ -s "$TMP/nm.err" ]; then fail layers_nm "nm: $(head -c 300 "$TMP/nm.err")"; done_tests; fi

# --- includes: "FROM TO #include" for every quoted include that is ours
: >"$TMP/includes"
for f in $(find core gpu app -name '*.[ch]' -not -path 'app/tools/*' | sort); do
    dir=$(dirname "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
        for root in "$dir" core gpu app; do
            if [ -f "$root/$inc" ]; then
                echo "$f $(realpath --relative-to=. "$root/$inc") #include" >>"$TMP/includes"
                break
            fi
        done
    done
done

# --- direction: core uses neither gpu nor app; gpu does not use app
awk '
    function rank(p) { return p ~ /^core\// ? 0 : p ~ /^gpu\// ? 1 : 2 }
    rank($2) > rank($1) { print "  " $1 " uses " $2 " (" $3 ")" }
' "$TMP/calls" "$TMP/includes" >"$TMP/upward"
if [ -s "$TMP/upward" ]; then
    fail layers_one_way "$(wc -l <"$TMP/upward") uses against the layering:
$(cat "$TMP/upward")"
else
    ok layers_one_way
fi

# --- circles: among the calls, and among the includes
for kind in calls includes; do
    "$BUILD/tools/dep_cycles" <"$TMP/$kind" >"$TMP/$kind.cycles" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        ok "layers_no_${kind}_cycles"
    else
        fail "layers_no_${kind}_cycles" "exit $rc:
$(cat "$TMP/$kind.cycles")"
    fi
done

# --- and the folders (core/text, app/ui, ...) use each other one way: the
# same uses, each file taken as its folder
cat "$TMP/calls" "$TMP/includes" |
    awk '{ a = $1; b = $2; sub(/\/[^\/]*$/, "", a); sub(/\/[^\/]*$/, "", b); print a, b, $1 "->" $2 }' \
    >"$TMP/folders"
"$BUILD/tools/dep_cycles" <"$TMP/folders" >"$TMP/folders.cycles" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
    ok layers_no_folder_cycles
else
    fail layers_no_folder_cycles "exit $rc:
$(cat "$TMP/folders.cycles")"
fi

# --- the checker itself finds a circle and a clean graph passes (so the
# cases above cannot pass by reading nothing)
printf 'a.c b.c f\nb.c c.c g\nc.c a.c h\nc.c d.c i\n' | "$BUILD/tools/dep_cycles" >"$TMP/probe"
if [ $? -eq 1 ] && grep -q '^cycle: a.c -> b.c (f) -> c.c (g) -> a.c (h)$' "$TMP/probe"; then
    ok layers_checker_finds_cycle
else
    fail layers_checker_finds_cycle "got: $(cat "$TMP/probe")"
fi
if printf 'a.c b.c f\nb.c c.c g\n' | "$BUILD/tools/dep_cycles" >"$TMP/probe" && [ ! -s "$TMP/probe" ] &&
    [ "$(wc -l <"$TMP/calls")" -gt 100 ] && [ "$(wc -l <"$TMP/includes")" -gt 100 ]; then
    ok layers_checker_reads_graph
else
    fail layers_checker_reads_graph "probe '$(cat "$TMP/probe")', $(wc -l <"$TMP/calls") calls, $(wc -l <"$TMP/includes") includes"
fi
done_tests
