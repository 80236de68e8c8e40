# lib.sh: helpers for shell tests (tests/t_*.sh), sourced by each.
# Each case reports "ok - NAME" or "FAIL - NAME: why", like testlib.h.
GLMCHAT=${GLMCHAT:-./glmchat}
BUILD=${BUILD:-build/rel}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
_failed=0

ok() { echo "ok - $1"; }
fail() { echo "FAIL - $1: $2"; _failed=1; }

# expect_fail NAME PATTERN CMD...: CMD must exit non-zero and print one line
# matching PATTERN (grep -E) on stderr; no sanitizer report, no crash.
expect_fail() {
    name=$1 pat=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 0 ]; then fail "$name" "exit status 0"; return; fi
    if [ $rc -ge 128 ]; then fail "$name" "killed by signal $((rc - 128))"; return; fi
    if grep -qE 'Sanitizer|runtime error' "$TMP/err"; then fail "$name" "sanitizer: $(head -c 300 "$TMP/err")"; return; fi
    if ! grep -qE "$pat" "$TMP/err"; then fail "$name" "stderr '$(head -c 300 "$TMP/err")' does not match '$pat'"; return; fi
    ok "$name"
}

# at_lanes PROGRAM LANES MIN [MAX]: runs $BUILD/tests/PROGRAM once more on
# lavapipe at LANES lanes a subgroup (LP_NATIVE_VECTOR_WIDTH = 32 * LANES
# bits), the cases the caller's TEST_ONLY selects, its lines renamed
# "... [subgroup LANES]" (its output stays in $TMP/out).  A failure where it
# is not built, exits non-zero without a FAIL line, or runs fewer than MIN
# (more than MAX) cases.  A device other than lavapipe keeps its own size:
# then a comment says so.
at_lanes() {
    T=$BUILD/tests/$1
    if [ ! -x "$T" ]; then
        fail "$1 at subgroup $2" "$T not built"
        return
    fi
    LP_NATIVE_VECTOR_WIDTH=$((32 * $2)) "$T" >"$TMP/out" 2>&1
    rc=$?
    grep '^# device' "$TMP/out" | grep -q "subgroup $2)" ||
        echo "# not at subgroup $2 here: $(grep '^# device' "$TMP/out")"
    sed -n "s/^\(ok\|FAIL\) - \([^:]*\)\(.*\)\$/\1 - \2 [subgroup $2]\3/p" "$TMP/out"
    n=$(grep -c '^ok - ' "$TMP/out")
    if grep -q '^FAIL - ' "$TMP/out"; then
        _failed=1
    elif [ "$rc" -ne 0 ]; then
        fail "$1 at subgroup $2" "exit status $rc: $(tail -c 300 "$TMP/out")"
    elif [ "$n" -lt "$3" ] || [ "$n" -gt "${4:-$n}" ]; then
        fail "$1 at subgroup $2" "$n cases ran, want at least $3${4:+ and at most $4}: $(tail -c 300 "$TMP/out")"
    fi
}

done_tests() { exit $_failed; }
