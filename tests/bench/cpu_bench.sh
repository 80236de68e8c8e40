#!/bin/sh
# cpu_bench.sh: glmchat's CPU backend beside llama.cpp's CPU backend, on the
# same full-size GLM-4.7-Flash files, in the same call (the GPU machine's
# host: 16 cores with AVX-512 VNNI; nothing runs on the GPU).
#
# For each format of $FORMATS (default: Q4_0 Q4_K_M Q8_0 IQ4_XS), one at a
# time -- the files are 17-32 GB:
#   - the file: glmchat mkmodel --preset glm47-flash --type F into $BENCH_DIR;
#     for a type mkmodel cannot write (IQ4_XS until the quant types land),
#     llama-quantize ($LLAMA_QUANTIZE) from a Q8_0 -- the one this run
#     benched, when Q8_0 came earlier in $FORMATS, else one mkmodel writes
#     first (llama-quantize takes ~4 minutes on 16 cores: give that format a
#     call of its own);
#   - for each thread count of $THREADS (default "16 8"):
#       glmchat bench --backend cpu -t T -p $P -n $N (default 64 and 32;
#       greedy decode is the figure compared: llama-bench samples nothing);
#       with KERNELS="default avx2" (A/B of kernel sets) also the run with
#       GLMCHAT_CPU_KERNELS=avx2;
#       llama-bench -m F -ngl 0 -nopo 1 -t T -p P -n N -r $REPS -o jsonl
#       (CPU only: no layer and no op on the GPU);
# then one table: prompt and decode tokens/s of both programs and their
# ratios.  --profile for the formats in $PROFILE (default: none) prints
# glmchat's per-step tables into the log.  PRESET (default glm47-flash):
# another mkmodel preset, to try the script on a small machine.
#
# The calls on the GPU machine (see ../shared/peer/README.md for .peer and
# ../shared/device/README.md for carrying the build), each at most 540 s,
# chained without pause (the llama.cpp build stays in /tmp while the machine
# is held):
#   bash .peer/build-llama-bench.sh; LLAMA_WAIT=.peer/build-llama-bench.sh FORMATS="Q4_0 Q4_K_M" \
#       timeout 540 bash tests/bench/cpu_bench.sh
#   FORMATS=Q8_0 timeout 540 bash tests/bench/cpu_bench.sh
#   FORMATS=IQ4_XS timeout 540 bash tests/bench/cpu_bench.sh
# Figures only: nothing here passes or fails on speed.  Needs ~35 GB of disk
# in $BENCH_DIR and as much memory.
GLMCHAT=${GLMCHAT:-./glmchat}
LLAMA_BENCH=${LLAMA_BENCH:-/tmp/llama/build/bin/llama-bench}
LLAMA_QUANTIZE=${LLAMA_QUANTIZE:-/tmp/llama/build/bin/llama-quantize}
FORMATS=${FORMATS:-Q4_0 Q4_K_M Q8_0 IQ4_XS}
THREADS=${THREADS:-16 8}
KERNELS=${KERNELS:-default}
PROFILE=${PROFILE:-}
P=${P:-64}
N=${N:-32}
REPS=${REPS:-2}
T=${STEP_TIMEOUT:-300}
PRESET=${PRESET:-glm47-flash}
DIR=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/cpubench.XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
SUM=$DIR/summary

echo "host: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs," \
    "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "glmchat: $($GLMCHAT --version 2>/dev/null | head -n 1)"
[ -n "$LLAMA_WAIT" ] && bash "$LLAMA_WAIT" --wait
[ -x "$LLAMA_BENCH" ] || echo "llama-bench: not found at $LLAMA_BENCH (glmchat's figures only)"

# the tokens/s of glmchat bench's line that starts with PREFIX: its greedy
# figure for decode lines, else the only one
gl_fig() {
    g=$(sed -n "s/^$1: .*, \([0-9.]*\) greedy.*/\1/p" "$2" | head -n 1)
    [ -n "$g" ] && { echo "$g"; return; }
    sed -n "s/^$1: \([0-9.]*\) tokens\/s.*/\1/p" "$2" | head -n 1
}
# llama-bench's jsonl: avg_ts of the test with n_threads, n_prompt, n_gen
ll_fig() {
    grep "\"n_threads\": $1," "$4" | grep "\"n_prompt\": $2," | grep "\"n_gen\": $3," |
        sed -n 's/.*"avg_ts": \([0-9.e+]*\),.*/\1/p' | head -n 1 | awk '{ printf "%.2f", $1 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }

# make_file F PATH: the full-size file of format F
make_file() {
    if timeout "$T" $GLMCHAT mkmodel --preset "$PRESET" --type "$1" -o "$2" --quiet 2>"$DIR/mk.err"; then
        return 0
    fi
    if [ -x "$LLAMA_QUANTIZE" ]; then
        echo "$1: mkmodel cannot write it ($(head -c 200 "$DIR/mk.err")); llama-quantize from Q8_0"
        rm -f "$2"
        [ -f "$DIR/q8.gguf" ] || timeout "$T" $GLMCHAT mkmodel --preset "$PRESET" --type Q8_0 -o "$DIR/q8.gguf" --quiet
        timeout "$T" "$LLAMA_QUANTIZE" --allow-requantize "$DIR/q8.gguf" "$2" "$1" "$(nproc)" >"$DIR/q.log" 2>&1
        rc=$?
        rm -f "$DIR/q8.gguf"
        [ $rc = 0 ] || tail -n 3 "$DIR/q.log"
        return $rc
    fi
    echo "$1: mkmodel failed: $(head -c 300 "$DIR/mk.err")"
    return 1
}

for f in $FORMATS; do
    m=$DIR/$f.gguf
    echo "== $f"
    if ! make_file "$f" "$m"; then
        echo "$f - - - - - -" >>"$SUM"
        rm -f "$m"
        continue
    fi
    echo "file: $(du -h "$m" | cut -f1), active $($GLMCHAT info -m "$m" | sed -n 's/^active bytes  //p')"
    prof=
    case " $PROFILE " in *" $f "*) prof=--profile ;; esac
    for t in $THREADS; do
        for k in $KERNELS; do
            if [ "$k" = default ]; then
                timeout "$T" $GLMCHAT bench -m "$m" --backend cpu -t "$t" -p "$P" -n "$N" -r "$REPS" $prof \
                    >"$DIR/gl.txt" 2>&1
            else
                GLMCHAT_CPU_KERNELS=$k timeout "$T" $GLMCHAT bench -m "$m" --backend cpu -t "$t" -p "$P" -n "$N" \
                    -r "$REPS" >"$DIR/gl.txt" 2>&1
            fi
            tr '\r' '\n' <"$DIR/gl.txt" | grep -v '^uploading' | sed "s/^/[$f -t $t $k] /"
            echo "$k $(gl_fig "pp$P" "$DIR/gl.txt") $(gl_fig "tg$N @ depth 0" "$DIR/gl.txt")" >"$DIR/gl.$t.$k"
        done
        lpp=- ltg=-
        if [ -x "$LLAMA_BENCH" ]; then
            timeout "$T" "$LLAMA_BENCH" -m "$m" -ngl 0 -nopo 1 -t "$t" -p "$P" -n "$N" -r "$REPS" -o jsonl \
                >"$DIR/ll.jsonl" 2>"$DIR/ll.err" || tail -n 3 "$DIR/ll.err"
            sed "s/^/[$f -t $t llama-bench] /" "$DIR/ll.jsonl" | cut -c 1-400
            lpp=$(ll_fig "$t" "$P" 0 "$DIR/ll.jsonl")
            ltg=$(ll_fig "$t" 0 "$N" "$DIR/ll.jsonl")
        fi
        read -r _ gpp gtg <"$DIR/gl.$t.default" 2>/dev/null
        extra=
        for k in $KERNELS; do
            [ "$k" = default ] && continue
            read -r _ app atg <"$DIR/gl.$t.$k"
            extra="$extra $k:${app:--}/${atg:--}"
        done
        echo "$f $t ${gpp:--} ${lpp:--} ${gtg:--} ${ltg:--}$extra" >>"$SUM"
    done
    # a Q8_0 with formats still to come: kept as llama-quantize's source
    if [ "$f" = Q8_0 ] && [ "$f" != "$(echo $FORMATS | awk '{ print $NF }')" ]; then
        mv "$m" "$DIR/q8.gguf"
    else
        rm -f "$m"
    fi
done

echo
echo "== glmchat --backend cpu (gl) and llama.cpp -ngl 0 -nopo 1 (ll), tokens/s; x: gl / ll;"
echo "   pp$P: a $P-token prompt; tg$N: $N tokens decoded (glmchat greedy)"
printf "%-8s %3s | %8s %8s %5s | %8s %8s %5s | %s\n" format -t "pp$P.gl" "pp$P.ll" x "tg$N.gl" "tg$N.ll" x "other kernels pp/tg"
while read -r f t gpp lpp gtg ltg extra; do
    printf "%-8s %3s | %8s %8s %5s | %8s %8s %5s | %s\n" "$f" "$t" "$gpp" "$lpp" "$(ratio "$gpp" "$lpp")" \
        "$gtg" "$ltg" "$(ratio "$gtg" "$ltg")" "$extra"
done <"$SUM"
exit 0
