#!/bin/sh
# Runs every test program ($BUILD/tests/test_*) and every shell test
# (tests/t_*.sh), counts their "ok - " / "FAIL - " lines, and prints
# "N passed, N failed" last.  A program that dies or exits non-zero without
# reporting a failure counts as one failure of its own.
BUILD=${BUILD:-build/rel}
export BUILD GLMCHAT=./glmchat
pass=0
fail=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Sanitizer runs: LeakSanitizer ignores the Vulkan loader's and drivers'
# own leaks (tests/lsan.supp says which libraries, and why), and libraries
# stay loaded so it can see and name them (tests/lsan_keep_loaded.c).  Our
# own leaks still fail.
if [ "${SANITIZE:-0}" = 1 ]; then
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export LSAN_OPTIONS
    keep="$BUILD/lsan_keep_loaded.so"
    case $keep in /*) ;; *) keep="$PWD/$keep" ;; esac
    if [ ! -f "$keep" ] || [ tests/lsan_keep_loaded.c -nt "$keep" ]; then
        ${CC:-cc} -shared -fPIC -O2 -o "$keep" tests/lsan_keep_loaded.c ||
            echo "run.sh: cannot build $keep; driver leaks may be reported as unknown modules"
    fi
    if [ -f "$keep" ]; then
        # The preloaded library comes before ASan's runtime: allowed, as it
        # only defines dlclose.
        LD_PRELOAD="$keep${LD_PRELOAD:+:$LD_PRELOAD}"
        ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
        export LD_PRELOAD ASAN_OPTIONS
    fi
fi

run_one() {
    name=$1
    shift
    start=$(date +%s)
    # stdin from /dev/null: `glmchat -p` reads piped stdin, and a test must
    # not wait on whatever stdin the runner was started with.
    "$@" </dev/null >"$log" 2>&1
    rc=$?
    end=$(date +%s)
    p=$(grep -c '^ok - ' "$log")
    f=$(grep -c '^FAIL - ' "$log")
    grep -E '^(ok|FAIL) - ' "$log" | sed "s|^|[$name] |"
    if [ "$f" -gt 0 ] || [ "$rc" -ne 0 ]; then
        # Show the program's other output when something failed.
        grep -vE '^(ok) - ' "$log" | tail -n 40 | sed 's/^/    /'
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "[$name] FAIL - exited with status $rc without reporting a failure"
        f=1
    fi
    echo "[$name] $p ok, $f failed ($((end - start))s)"
    pass=$((pass + p))
    fail=$((fail + f))
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in tests/t_*.sh; do
    [ -f "$t" ] || continue
    run_one "$(basename "$t" .sh)" sh "$t"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
