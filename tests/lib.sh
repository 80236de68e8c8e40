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

done_tests() { exit $_failed; }
