#!/bin/sh
# run.sh: the whole recipe of the built-in demo model (`make demo-model`).
#
#   corpus (build_corpus.py) -> tokenizer + conversations (prepare.py) ->
#   training (train.py, nice 19, resumable) -> raw tensors + manifest
#   (export.py) -> GGUF through core/gguf_write.c (demo_gguf) -> checks:
#   glmchat's tokenizer gives the training ids (tokcheck.py), the C
#   reference's logits match torch's (parity.py) -> measurements
#   (evaluate.py) -> app/demo/glm-demo.gguf and app/demo/EVAL.md.
#
# Needs Debian's python3-torch, python3-numpy, python3-regex (and
# libopenblas0-openmp: torch's BLAS), wordnet-base and the manual pages of
# the packages build_corpus.py names.  Work files go to $DEMO_WORK
# (default build/demo_train); rerunning resumes the training.
#
# Environment: BUILD (the build folder with glmchat's tools), DEMO_WORK,
# DEMO_STEPS and DEMO_DECAY_FROM (the schedule; the shipped file's are the
# defaults), DEMO_MINUTES (a wall budget instead: the decay is placed at
# 80 % of it), DEMO_THREADS (default 1: see README.md, "Threads").
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build/rel}
WORK=${DEMO_WORK:-build/demo_train}
PY=/usr/bin/python3 # Debian's, where python3-torch is installed
STEPS=${DEMO_STEPS:-13502}
DECAY=${DEMO_DECAY_FROM:-10802}
THREADS=${DEMO_THREADS:-1}
# glibc returns big blocks to the kernel at every free; torch's temporaries
# then cost a page fault per 4 KiB
export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736
# OpenMP threads that wait for a descheduled partner spin; on a shared
# machine they should sleep
export OMP_WAIT_POLICY=PASSIVE

for m in torch numpy regex; do
    $PY -c "import $m" 2>/dev/null || {
        echo "run.sh: $PY lacks $m (apt-get install python3-torch python3-numpy python3-regex)" >&2; exit 1; }
done
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
t0=$(date +%s)
[ -f "$WORK/corpus/sources.json" ] || $PY "$HERE/build_corpus.py" "$WORK/corpus"
[ -f "$WORK/prep/train.npz" ] || $PY "$HERE/prepare.py" "$WORK/corpus" "$WORK/prep"
if [ -n "${DEMO_MINUTES:-}" ]; then
    sched="--steps 1000000 --minutes $DEMO_MINUTES"
else
    sched="--steps $STEPS --decay-from $DECAY"
fi
echo "run.sh: training (nice 19); progress in $WORK/train.log"
nice -n 19 $PY "$HERE/train.py" "$WORK/prep" "$WORK/train" $sched --threads "$THREADS" --resume \
    >>"$WORK/train.log" 2>&1 || { tail -n 20 "$WORK/train.log" >&2; exit 1; }
tail -n 1 "$WORK/train.log"
$PY "$HERE/export.py" "$WORK/train/final.pt" "$WORK/prep" "$WORK/corpus/sources.json" "$WORK/export" --type F16
"$BUILD/gen/demo_gguf" "$WORK/export/manifest.json" "$WORK/export/tensors.f32" "$WORK/glm-demo.gguf"
checks() { cat "$WORK/checks.txt"; echo "run.sh: a check of the exported file failed" >&2; exit 1; }
$PY "$HERE/tokcheck.py" "$WORK/prep" "$WORK/glm-demo.gguf" "$BUILD/glmchat" >"$WORK/checks.txt" || checks
$PY "$HERE/parity.py" "$WORK/train/final.pt" "$WORK/prep" "$WORK/export/manifest.json" "$WORK/glm-demo.gguf" \
    "$BUILD/glmchat" >>"$WORK/checks.txt" || checks
cat "$WORK/checks.txt"
$PY "$HERE/evaluate.py" "$WORK/train/final.pt" "$WORK/prep" > "$WORK/EVAL.md"
{ printf '\n## Checks of the exported file (run.sh)\n\n```\n'; cat "$WORK/checks.txt"; printf '```\n'; } >>"$WORK/EVAL.md"
mkdir -p app/demo
cp "$WORK/glm-demo.gguf" app/demo/glm-demo.gguf
cp "$WORK/EVAL.md" app/demo/EVAL.md
cp "$WORK/export/DATA-SOURCES.md" app/demo/DATA-SOURCES.md
${MAKE:-make} glmchat >/dev/null # the binary that embeds the new file: the tests' data come from it
sh "$HERE/test_data.sh" ./glmchat "$WORK"
echo "run.sh: app/demo/glm-demo.gguf ($(wc -c < app/demo/glm-demo.gguf) bytes) in $(( $(date +%s) - t0 )) s"
