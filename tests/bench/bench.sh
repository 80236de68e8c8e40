#!/bin/sh
# make bench: runs every tests/bench/bench_*.sh from the repository root (each
# prints its own figures; nothing here passes or fails on speed).
status=0
for b in "$(dirname "$0")"/bench_*.sh; do
    [ -f "$b" ] || continue
    echo "== $(basename "$b" .sh)"
    sh "$b" || status=1
done
exit $status
