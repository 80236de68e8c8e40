#!/bin/sh
# make check: the whole suite as CI runs it -- the tests in a normal build,
# the same tests under ASan+UBSan, and a short run of every fuzz target --
# with one combined "N passed, N failed" as the last line.
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
pass=0
fail=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

count() { # adds the "N passed, N failed" line of $log to the totals
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "check: $1 did not finish (no summary line)"
        fail=$((fail + 1))
        return
    fi
    p=${line%% passed*}
    f=${line#*passed, }
    f=${f%% failed}
    pass=$((pass + p))
    fail=$((fail + f))
}

echo "== make test"
make -s -j"$JOBS" glmchat >/dev/null && make -s -j"$JOBS" test 2>&1 | tee "$log"
count "make test"

echo "== make test SANITIZE=1"
make -s -j"$JOBS" SANITIZE=1 glmchat >/dev/null && make -s -j"$JOBS" SANITIZE=1 test 2>&1 | tee "$log"
count "make test SANITIZE=1"

echo "== make fuzz FUZZ_SECONDS=$FUZZ_SECONDS"
if make -s -j"$JOBS" fuzz FUZZ_SECONDS="$FUZZ_SECONDS" >"$log" 2>&1; then
    n=$(grep -c '^fuzz: ' "$log")
    cat "$log"
    echo "ok - fuzz ($n targets, ${FUZZ_SECONDS}s each)"
    pass=$((pass + 1))
else
    cat "$log"
    echo "FAIL - fuzz"
    fail=$((fail + 1))
fi
# Leave ./glmchat as the normal build.
make -s glmchat >/dev/null 2>&1
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
