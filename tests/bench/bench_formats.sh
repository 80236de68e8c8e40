#!/bin/sh
# bench_formats.sh (make bench): every file format people download for
# GLM-4.7-Flash, full size, glmchat beside llama.cpp on the same file.
#
# For each format of $FORMATS (default: Q4_K_M Q5_K_M Q4_K_XL Q4_0 Q6_K Q8_0;
# Q4_K_XL is mkmodel's dynamic mix) one at a time -- the files are 17-32 GB:
#   - glmchat mkmodel --preset glm47-flash --type F into $BENCH_DIR (removed
#     again before the next one);
#   - glmchat bench: pp512, tg128 at depth 0 and 4096 (--profile for the
#     formats in $PROFILE: the per-kernel table);
#   - llama.cpp's llama-bench on the same file, when $LLAMA_BENCH names
#     it (../shared/peer/ builds it on the GPU machine; device_run.sh passes
#     the path that build's script names): CUDA, all layers on the GPU, flash
#     attention, the same tests;
# then one table: both programs' figures, their ratios, each format's tg128
# after 4096 as a share of its own tg128, and its bandwidth floor: the
# active bytes of a decoded token (`glmchat info`) over the device's read
# bandwidth ($BW_GBS, else vk_microbench's streaming read when $MICROBENCH
# exists) -- the fastest decode the file allows, had a token no other cost.
# BASE=path/to/glmchat (an earlier binary) with BASE_FORMATS (default: all)
# adds its pp512 and tg128 on the same files, for an A/B in the same run;
# AB="default xs_pad=25 xs_r=2,xs_p=2 ..." with AB_FORMATS runs pp512 and
# tg64 under each setting (comma-separated --tune fields; "base": the BASE
# binary with its defaults) on those files;
# AB_ARGS (e.g. --profile) are added to those runs, whose whole output then
# goes into the log.  MAIN=0: only the A/Bs (no bench of the defaults, no
# llama-bench, no BASE) -- an A/B call that must stay short.
# PRESET / MIN_GIB / MIN_DISK_GB (default glm47-flash, 36, 34): another
# mkmodel preset and its needs, to try the script on a small device.
# SPLIT=1: all of glmchat's figures first, then llama-bench's (each file made
# again, the same bytes) -- so llama-bench's build can finish meanwhile.
# NCMOE=N: both programs with the routed experts of the first N blocks in
# host memory, computed by the CPU (glmchat --n-cpu-moe N, llama-bench
# -ncmoe N: the same blocks); depth 0 only unless NCMOE_DEPTHS says more
# (glmchat then reads a prompt a token at a time); the A/B runs split the
# same way and log glmchat's breakdown of a decoded token's time.
# Figures only: nothing here passes or fails on speed.  Needs a Vulkan GPU
# with ~35 GB free and as much disk; without a device it says so and skips.
GLMCHAT=${GLMCHAT:-./glmchat}
LLAMA_BENCH=${LLAMA_BENCH:-}
MICROBENCH=${MICROBENCH:-build/rel/tools/vk_microbench}
FORMATS=${FORMATS:-Q4_K_M Q5_K_M Q4_K_XL Q4_0 Q6_K Q8_0}
PROFILE=${PROFILE:-$FORMATS}
REPS=${REPS:-2}
if [ -n "${BENCH_DIR:-}" ]; then DIR=$(mktemp -d "$BENCH_DIR/formats.XXXXXX"); else DIR=$(mktemp -d); fi || exit 1
trap 'rm -rf "$DIR"' EXIT
T=${STEP_TIMEOUT:-240}
GL_SPLIT= LL_SPLIT= DEPTHS=0,4096
if [ -n "${NCMOE:-}" ]; then
    GL_SPLIT="--n-cpu-moe $NCMOE" LL_SPLIT="-ncmoe $NCMOE" DEPTHS=${NCMOE_DEPTHS:-0}
    echo "routed experts of blocks 0..$((NCMOE - 1)) in host memory (--n-cpu-moe / -ncmoe $NCMOE)"
fi

dev=$($GLMCHAT devices 2>/dev/null | grep -- '<- default')
dev_gib=$(echo "$dev" | sed -n 's/.* \([0-9.]*\) GiB device-local.*/\1/p')
PRESET=${PRESET:-glm47-flash}
if [ -z "$dev" ] || [ "${dev_gib%%.*}" -lt "${MIN_GIB:-36}" ]; then
    echo "bench_formats: no Vulkan device with ${MIN_GIB:-36} GiB (${dev:-none}); skipped"
    exit 0
fi
free_gb=$(df -Pk "$DIR" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
if [ "${free_gb:-0}" -lt "${MIN_DISK_GB:-34}" ]; then
    echo "bench_formats: $free_gb GB free in $DIR, the largest file needs 33; skipped (BENCH_DIR=elsewhere)"
    exit 0
fi
if [ -z "$BW_GBS" ] && [ -x "$MICROBENCH" ]; then
    BW_GBS=$(MB_ONLY=no-such-case "$MICROBENCH" 5 2>/dev/null | sed -n 's/^read .* us, \([0-9.]*\) GB\/s$/\1/p' | head -n 1)
fi
echo "device: $dev"
echo "read bandwidth: ${BW_GBS:-unknown} GB/s"
[ -x "$LLAMA_BENCH" ] || echo "llama-bench: not found at $LLAMA_BENCH (glmchat's figures only)"

# the tokens/s of glmchat bench's line that starts with PREFIX
gl_fig() { sed -n "s/^$1: \([0-9.]*\) tokens\/s.*/\1/p" "$2" | head -n 1; }
# a decode line's greedy figure (bench prints the chat's sampling first and
# greedy beside it; llama-bench samples nothing, so greedy is the fair
# comparison), else its only figure (an older binary)
gl_tg() { g=$(sed -n "s/^$1: .*, \([0-9.]*\) greedy.*/\1/p" "$2" | head -n 1); echo "${g:-$(gl_fig "$1" "$2")}"; }
# llama-bench's csv: avg_ts of the test with n_prompt, n_gen, n_depth (its
# last fields: n_prompt, n_gen, n_depth, test_time, avg_ns, stddev_ns,
# avg_ts, stddev_ts -- counted from the end, as a model name may hold commas)
ll_fig() { awk -F, -v p="$1" -v g="$2" -v d="$3" 'NR > 1 { gsub(/"/, "")
    if ($(NF - 7) == p && $(NF - 6) == g && $(NF - 5) == d) { printf "%.1f\n", $(NF - 1); exit } }' "$4"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }

SUM=$DIR/summary
# passes: "both" (glmchat then llama-bench on each file), or with SPLIT
# "gl" (glmchat on every file) then "ll" (llama-bench on every file)
passes=both
[ "${SPLIT:-0}" = 1 ] && passes="gl ll"
for pass in $passes; do
# LLAMA_WAIT: the peer's build script, to wait for its build before llama-bench
[ "$pass" != gl ] && [ -n "$LLAMA_WAIT" ] && bash "$LLAMA_WAIT" --wait
for f in $FORMATS; do
    [ "$pass" = ll ] && ! [ -x "$LLAMA_BENCH" ] && continue
    m=$DIR/$f.gguf
    echo "== $f ($pass)"
    if ! timeout "$T" $GLMCHAT mkmodel --preset "$PRESET" --type "$f" -o "$m" --quiet; then
        echo "$f mkmodel failed" >>"$SUM"
        rm -f "$m"
        continue
    fi
    if [ "$pass" = ll ]; then
        timeout "$T" "$LLAMA_BENCH" -m "$m" -ngl 99 $LL_SPLIT -fa 1 -p 512 -n 128 -d "$DEPTHS" -r "$REPS" -o csv \
            >"$DIR/ll.$f.csv" 2>"$DIR/ll.err" || tail -n 3 "$DIR/ll.err"
        cat "$DIR/ll.$f.csv"
        rm -f "$m"
        continue
    fi
    active=$($GLMCHAT info -m "$m" | sed -n 's/^active bytes  \([0-9,]*\) per.*/\1/p' | tr -d ,)
    prof=
    case " $PROFILE " in *" $f "*) prof=--profile ;; esac
    : >"$DIR/gl.txt"
    [ "${MAIN:-1}" = 0 ] ||
        timeout "$T" $GLMCHAT bench -m "$m" --backend vulkan $GL_SPLIT -p 512 -n 128 -d "$DEPTHS" -r "$REPS" $prof 2>&1 |
        tr '\r' '\n' | grep -v '^uploading' >"$DIR/gl.txt"
    cat "$DIR/gl.txt"
    pp=$(gl_fig pp512 "$DIR/gl.txt")
    tg=$(gl_tg "tg128 @ depth 0" "$DIR/gl.txt")
    tgd=$(gl_tg "tg128 @ depth 4096" "$DIR/gl.txt")
    tgc=$(gl_fig "tg128 @ depth 0" "$DIR/gl.txt")
    bpp=- btg=-
    case " ${BASE_FORMATS:-$FORMATS} " in *" $f "*)
        if [ -n "$BASE" ] && [ "${MAIN:-1}" != 0 ]; then
            timeout "$T" "$BASE" bench -m "$m" --backend vulkan -p 512 -n 128 -r "$REPS" 2>&1 | tr '\r' '\n' |
                grep -v '^uploading' >"$DIR/base.txt"
            sed 's/^/base: /' "$DIR/base.txt"
            bpp=$(gl_fig pp512 "$DIR/base.txt")
            btg=$(gl_tg "tg128 @ depth 0" "$DIR/base.txt")
        fi ;;
    esac
    case " ${AB_FORMATS:-} " in *" $f "*)
        for setting in $AB; do
            tunes= bin=$GLMCHAT
            [ "$setting" = base ] && bin=$BASE
            case $setting in default | base) ;; *) tunes=$(echo "$setting" | tr ',' '\n' | sed 's/^/--tune /' | tr '\n' ' ') ;; esac
            # shellcheck disable=SC2086
            timeout "$T" $bin bench -m "$m" --backend vulkan $GL_SPLIT -p 512 -n 64 -r 2 $tunes $AB_ARGS 2>&1 |
                tr '\r' '\n' | grep -v '^uploading' >"$DIR/ab.txt"
            if [ -n "$AB_ARGS" ]; then
                sed "s/^/ab $f $setting: /" "$DIR/ab.txt"
            elif [ -n "$NCMOE" ]; then # the split's breakdown (bench prints it under its decode line)
                grep -A 8 '^  experts in host memory' "$DIR/ab.txt" | sed "s/^/ab $f $setting: /"
            fi
            echo "ab $f $setting: pp512 $(gl_fig pp512 "$DIR/ab.txt") tg64 $(gl_tg "tg64 @ depth 0" "$DIR/ab.txt")" |
                tee -a "$DIR/ab_summary"
        done ;;
    esac
    lpp=- ltg=- ltgd=-
    if [ -x "$LLAMA_BENCH" ] && [ "$pass" = both ] && [ "${MAIN:-1}" != 0 ]; then
        timeout "$T" "$LLAMA_BENCH" -m "$m" -ngl 99 $LL_SPLIT -fa 1 -p 512 -n 128 -d "$DEPTHS" -r "$REPS" -o csv \
            >"$DIR/ll.csv" 2>"$DIR/ll.err" || tail -n 3 "$DIR/ll.err"
        cat "$DIR/ll.csv"
        lpp=$(ll_fig 512 0 0 "$DIR/ll.csv")
        ltg=$(ll_fig 0 128 0 "$DIR/ll.csv")
        ltgd=$(ll_fig 0 128 4096 "$DIR/ll.csv")
    fi
    echo "$f ${pp:--} ${lpp:--} ${tg:--} ${ltg:--} ${tgd:--} ${ltgd:--} ${active:-0} ${bpp:--} ${btg:--} ${tgc:--}" >>"$SUM"
    rm -f "$m"
done
done
# SPLIT: llama-bench's figures into the summary
if [ "${SPLIT:-0}" = 1 ] && [ -f "$SUM" ]; then
    while read -r f pp lpp tg ltg tgd ltgd rest; do
        c=$DIR/ll.$f.csv
        [ -f "$c" ] && lpp=$(ll_fig 512 0 0 "$c") ltg=$(ll_fig 0 128 0 "$c") ltgd=$(ll_fig 0 128 4096 "$c")
        echo "$f $pp ${lpp:--} $tg ${ltg:--} $tgd ${ltgd:--} $rest"
    done <"$SUM" >"$SUM.2"
    mv "$SUM.2" "$SUM"
fi

echo
[ -f "$DIR/ab_summary" ] && { echo "== A/B (tokens/s)"; cat "$DIR/ab_summary"; }
echo "== formats: glmchat (gl) and llama.cpp CUDA (ll), tokens/s; x: gl / ll; glmchat's decode greedy"
echo "   (chat: with the model's default sampler, as the chat runs); floor: active bytes / ${BW_GBS:-?} GB/s"
printf "%-8s %8s %8s %5s | %7s %7s %5s %7s | %7s %7s %5s %6s | %8s %7s %6s | %8s %7s\n" format pp512.gl pp512.ll x \
    tg128.gl tg128.ll x chat tg@4k.gl tg@4k.ll x "4k/0" "MB/tok" floor "% fl" pp.base tg.base
while read -r f pp lpp tg ltg tgd ltgd active bpp btg tgc; do
    [ "$pp" = mkmodel ] && { echo "$f: mkmodel failed"; continue; }
    floor=$(awk -v a="$active" -v bw="${BW_GBS:-0}" 'BEGIN { if (a > 0 && bw > 0) printf "%.0f", bw * 1e9 / a; else printf "-" }')
    printf "%-8s %8s %8s %5s | %7s %7s %5s %7s | %7s %7s %5s %6s | %8s %7s %6s | %8s %7s\n" "$f" "$pp" "$lpp" "$(ratio "$pp" "$lpp")" \
        "$tg" "$ltg" "$(ratio "$tg" "$ltg")" "${tgc:--}" "$tgd" "$ltgd" "$(ratio "$tgd" "$ltgd")" \
        "$(awk -v a="$tgd" -v b="$tg" 'BEGIN { if (a > 0 && b > 0) printf "%.1f%%", 100 * a / b; else printf "-" }')" \
        "$(awk -v a="$active" 'BEGIN { printf "%.0f", a / 1e6 }')" "$floor" \
        "$(awk -v a="$tg" -v b="$floor" 'BEGIN { if (a > 0 && b > 0) printf "%.1f%%", 100 * a / b; else printf "-" }')" \
        "$bpp" "$btg"
done <"$SUM"
exit 0
