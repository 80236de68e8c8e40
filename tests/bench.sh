#!/bin/sh
# make bench: runs every tests/bench_*.sh (each prints its own figures).
status=0
for b in tests/bench_*.sh; do
    [ -f "$b" ] || continue
    echo "== $(basename "$b" .sh)"
    sh "$b" || status=1
done
exit $status
