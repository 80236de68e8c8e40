#!/bin/bash
# pp_ab.sh: a prefill A/B on the GPU machine in one call (gpu/PERF.md run 25):
# for each format of $FORMATS, the full-size file made once (mkmodel), then
# pp512 (best of 2, no decode) of each setting of $SETS in turn, $ROUNDS
# rounds alternating, so drift between runs falls on every setting alike.
# A setting is "base" (the earlier binary $BASE), "default" (this binary,
# $GLMCHAT), or comma-separated --tune fields (this binary).  One line a
# format: FORMAT setting=pp512 ... (every round), also to $OUT/ab.txt; each
# run's output in $OUT/abN.txt.  Figures only: nothing passes or fails.
#   GLMCHAT=.dev/B/glmchat BASE=.dev/B/base/glmchat FORMATS="Q5_K_M Q8_0" \
#     SETS="base default coop_x=0" ROUNDS=2 DEADLINE=350 bash tests/bench/pp_ab.sh
# DEADLINE (seconds since the start): later formats are skipped, so the
# call ends inside its limit.  Files go to $BENCH_DIR (default: a directory
# of mktemp's, removed at the end), the outputs to $OUT (default: there too); PRESET
# (default glm47-flash) another mkmodel preset, e.g. tiny-glm to try it here.
GLMCHAT=${GLMCHAT:-./glmchat}
FORMATS=${FORMATS:-Q5_K_M Q8_0 Q4_K_M Q4_0 Q6_K Q4_K_XL}
SETS=${SETS:-base default}
ROUNDS=${ROUNDS:-2}
scratch=$(mktemp -d) || exit 1
trap 'rm -rf "$scratch"' EXIT
BENCH_DIR=${BENCH_DIR:-$scratch}
OUT=${OUT:-$scratch}
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
pp() { sed -n 's/^pp512: \([0-9.]*\) tokens.*/\1/p' "$1" | head -n 1; }
i=0
for fmt in $FORMATS; do
    if [ -n "$DEADLINE" ] && [ "$(elapsed)" -gt "$DEADLINE" ]; then
        echo "$fmt skipped at $(elapsed) s"
        continue
    fi
    m=$BENCH_DIR/pp_ab.$fmt.gguf
    if ! timeout 90 "$GLMCHAT" mkmodel --preset "${PRESET:-glm47-flash}" --type "$fmt" -o "$m" --quiet --force; then
        echo "$fmt: mkmodel failed"
        rm -f "$m"
        continue
    fi
    line=$fmt
    for _ in $(seq "$ROUNDS"); do
        for s in $SETS; do
            bin=$GLMCHAT tunes=
            i=$((i + 1))
            case $s in
            base) bin=$BASE ;;
            default) ;;
            *) tunes=$(echo "$s" | tr ',' '\n' | sed 's/^/--tune /' | tr '\n' ' ') ;;
            esac
            if [ -z "$bin" ]; then
                line="$line $s=no-BASE"
                continue
            fi
            # shellcheck disable=SC2086
            timeout 60 "$bin" bench -m "$m" --backend vulkan -p 512 -n 0 -r 2 $tunes >"$OUT/ab$i.txt" 2>&1
            line="$line $s=$(pp "$OUT/ab$i.txt")"
        done
    done
    echo "$line ($(elapsed) s)" | tee -a "$OUT/ab.txt"
    rm -f "$m"
done
