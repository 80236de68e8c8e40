#!/bin/sh
# test_data.sh: what tests/t_demo_model.sh compares the built-in demo with,
# written from the model the build embeds (run.sh calls it last; rerun it
# by hand after replacing app/demo/glm-demo.gguf).
#
#   tests/data/demo/words.txt     the answers' 15,000 most frequent words
#   tests/data/demo/heldout.txt   held-out text, and heldout.ids: the ids the
#                                 training tokenizer (bpe.py) gives it
#   tests/data/demo/replay.json   a fixed conversation (greedy, CPU reference)
#                                 and replay.expected: its replay, '#' lines out
#
# Usage: test_data.sh GLMCHAT WORK_DIR   (run from the repository root)
set -eu
GLMCHAT=$1
WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
D=tests/data/demo
mkdir -p "$D"
cp "$WORK/corpus/words.txt" "$D/words.txt"
head -n 40 "$WORK/prep/test.txt" >"$D/heldout.txt"
/usr/bin/python3 -c '
import json, sys
sys.path.insert(0, sys.argv[1])
import bpe
tj = json.load(open(sys.argv[2]))
tok = bpe.Tokenizer([tuple(m.split(" ")) for m in tj["merges"]])
print(" ".join(map(str, tok.encode(open(sys.argv[3]).read()))))
' "$HERE" "$WORK/prep/tokenizer.json" "$D/heldout.txt" >"$D/heldout.ids"

# The conversation: each question answered greedily on the CPU reference
# (bit-reproducible whatever the thread count), recorded turn by turn.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for q in "What is a river?" "What does ocean mean?" "What does the ls command do?" "Hello"; do
    env -u GLMCHAT_MODEL XDG_CONFIG_HOME="$tmp/c" XDG_DATA_HOME="$tmp/d" XDG_STATE_HOME="$tmp/s" \
        "$GLMCHAT" --backend cpu --temp 0 --seed 1 -n 64 -p "$q" -C "$tmp/replay.json" >/dev/null 2>&1
done
cp "$tmp/replay.json" "$D/replay.json"
env -u GLMCHAT_MODEL XDG_CONFIG_HOME="$tmp/c" XDG_DATA_HOME="$tmp/d" XDG_STATE_HOME="$tmp/s" \
    "$GLMCHAT" replay "$D/replay.json" --backend cpu 2>/dev/null | grep -v '^#' >"$D/replay.expected"
echo "test_data.sh: $D: $(wc -l <"$D/words.txt") words, $(wc -w <"$D/heldout.ids") held-out ids, replay of $(grep -c '^=== turn' "$D/replay.expected") turns"
