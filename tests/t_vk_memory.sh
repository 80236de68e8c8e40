#!/bin/sh
# t_vk_memory.sh: device memory that cannot be had, on the Vulkan backend
# (lavapipe in CI), with --gpu-mem standing in for a small GPU: one line
# naming what would fit and a non-zero exit, never a crash or the driver's
# text; a cap that fits runs and gives the logits it gives without one; the
# default context shrinks to what the weights leave; `info` and -p's note
# say what is placed where; bad sizes are usage errors.  Every expert on
# the device (--n-cpu-moe 0): what a cap does once the routed experts may go
# to host memory is t_vk_hostmoe.sh's.
. tests/lib.sh
M=tests/data/models/tiny-glm-a/tiny-glm-a.q8_0.gguf
TOK=1,2,3,4,5,6,7,8
VK="--backend vulkan --n-cpu-moe 0"

if ! $GLMCHAT devices >/dev/null 2>&1; then
    fail "vulkan device" "none usable ($($GLMCHAT devices 2>&1 | head -c 300))"
    done_tests
fi

# one_line NAME: the last command's stderr ($TMP/err) is one line, in words
one_line() {
    if [ "$(wc -l <"$TMP/err")" -ne 1 ]; then fail "$1" "$(wc -l <"$TMP/err") lines: $(head -c 300 "$TMP/err")"
    elif grep -q 'VK_' "$TMP/err"; then fail "$1" "the driver's code: $(head -c 300 "$TMP/err")"
    else ok "$1"
    fi
}

# ---- too small: the weights alone ------------------------------------------------
expect_fail "logits: --gpu-mem below the weights" \
    'needs .* device memory .*has 1\.0 MiB \(--gpu-mem\); even -c 8 needs [0-9.]+ MiB: --gpu-mem [0-9]+M or more, or --backend cpu$' \
    $GLMCHAT logits -m "$M" $VK --gpu-mem 1M --tokens $TOK -o "$TMP/x.bin"
one_line "logits: --gpu-mem below the weights, one line"
# the size it names is enough
need=$(sed -n 's/.*--gpu-mem \([0-9]*M\) or more.*/\1/p' "$TMP/err")
if [ -n "$need" ] && $GLMCHAT logits -m "$M" $VK --gpu-mem "$need" --tokens $TOK -o "$TMP/need.bin" 2>"$TMP/err2"; then
    ok "logits: the --gpu-mem it names ($need) fits"
else
    fail "logits: the --gpu-mem it names ('$need') fits" "$(head -c 300 "$TMP/err2")"
fi

# ---- a context too large for the cap: the largest that fits is named, and fits ---
expect_fail "logits: -c 2000 under --gpu-mem 5M" \
    'KV cache .* for 2000 tokens.* has 5\.0 MiB \(--gpu-mem\); -c [0-9]+ fits, or a larger --gpu-mem, or --backend cpu$' \
    $GLMCHAT logits -m "$M" $VK --gpu-mem 5M -c 2000 --tokens $TOK -o "$TMP/x.bin"
one_line "logits: -c 2000 under --gpu-mem 5M, one line"
c=$(sed -n 's/.*; -c \([0-9]*\) fits.*/\1/p' "$TMP/err")
if [ -z "$c" ] || [ "$c" -ge 2000 ] || [ "$c" -lt 8 ]; then
    fail "logits: the context named" "'$c' from $(head -c 300 "$TMP/err")"
elif ! $GLMCHAT logits -m "$M" $VK --gpu-mem 5M -c "$c" --tokens $TOK -o "$TMP/cap.bin" 2>"$TMP/err"; then
    fail "logits: -c $c under --gpu-mem 5M runs" "$(head -c 300 "$TMP/err")"
elif ! $GLMCHAT logits -m "$M" $VK -c "$c" --tokens $TOK -o "$TMP/free.bin" 2>"$TMP/err"; then
    fail "logits: -c $c without a cap" "$(head -c 300 "$TMP/err")"
elif ! cmp -s "$TMP/cap.bin" "$TMP/free.bin"; then
    fail "logits: -c $c under --gpu-mem 5M" "logits differ from the run without a cap"
else
    ok "logits: -c $c (named) runs under --gpu-mem 5M, the same logits as without the cap"
fi
# one step more does not fit: the context named is the largest (in 256-token steps)
if [ -n "$c" ] && [ "$c" -ge 256 ]; then
    expect_fail "logits: -c $((c + 256)) under --gpu-mem 5M" 'fits, or a larger --gpu-mem' \
        $GLMCHAT logits -m "$M" $VK --gpu-mem 5M -c $((c + 256)) --tokens $TOK -o "$TMP/x.bin"
fi

# ---- the default context: the largest under the cap --------------------------------
# -p takes the largest context that fits (at most the trained 4096): under
# 5M less than 4096, in steps of 256; its note says what went where
if out=$($GLMCHAT -m "$M" $VK --gpu-mem 5M -p hello -n 3 --temp 0 --think off 2>"$TMP/err" </dev/null); then
    n=$(sed -n 's/.*KV cache [0-9.]* [MG]iB (\([0-9]*\) tokens).*of 5\.0 MiB (--gpu-mem).*/\1/p' "$TMP/err")
    if [ -n "$n" ] && [ "$n" -lt 4096 ] && [ $((n % 256)) -eq 0 ] && [ "$n" -ge 256 ]; then
        ok "-p: the default context under --gpu-mem 5M is $n tokens, said on stderr"
    else
        fail "-p: the default context under --gpu-mem 5M" "'$n' from $(head -c 400 "$TMP/err")"
    fi
    if [ -n "$c" ] && [ -n "$n" ] && [ $((c / 256 * 256)) -ne "$n" ]; then
        fail "-p: the default context is the largest that fits" "$n tokens, while logits named -c $c"
    else
        ok "-p: the default context is the one logits names as the largest ($n)"
    fi
else
    fail "-p under --gpu-mem 5M" "$(head -c 300 "$TMP/err")"
fi
# without a cap: the trained context, and no note
if $GLMCHAT -m "$M" $VK -p hello -n 2 --temp 0 --think off >/dev/null 2>"$TMP/err" </dev/null &&
    ! grep -q 'device memory' "$TMP/err"; then
    ok "-p without --gpu-mem: no placement note"
else
    fail "-p without --gpu-mem" "$(head -c 300 "$TMP/err")"
fi
# too small even for the smallest default context: one line, non-zero, nothing answered
expect_fail "-p: --gpu-mem 2M" 'KV cache .* for 256 tokens.*has 2\.0 MiB \(--gpu-mem\); (-c [0-9]+ fits|even -c)' \
    $GLMCHAT -m "$M" $VK --gpu-mem 2M -p hello -n 2 </dev/null
one_line "-p: --gpu-mem 2M, one line"

# ---- the settings key --------------------------------------------------------------
mkdir -p "$TMP/cfg/glmchat"
printf 'gpu-mem = 1M\nn-cpu-moe = 0\n' >"$TMP/cfg/glmchat/settings"
XDG_CONFIG_HOME=$TMP/cfg expect_fail "settings: gpu-mem = 1M" 'has 1\.0 MiB \(--gpu-mem\)' \
    $GLMCHAT -m "$M" $VK -p hello -n 2 </dev/null
echo "gpu-mem = 6X" >"$TMP/cfg/glmchat/settings"
XDG_CONFIG_HOME=$TMP/cfg expect_fail "settings: gpu-mem = 6X" 'settings:1: gpu-mem: .6X. is not a size like 6G' \
    $GLMCHAT -m "$M" $VK -p hello -n 2 </dev/null
# the command line outranks the file
echo "gpu-mem = 1M" >"$TMP/cfg/glmchat/settings"
if XDG_CONFIG_HOME=$TMP/cfg $GLMCHAT -m "$M" $VK --gpu-mem auto -p hello -n 2 --think off >/dev/null 2>"$TMP/err" </dev/null; then
    ok "settings: --gpu-mem auto outranks the file's 1M"
else
    fail "settings: --gpu-mem auto outranks the file's 1M" "$(head -c 300 "$TMP/err")"
fi

# ---- bad sizes: usage errors -------------------------------------------------------
for v in 6 6X -1 1.5.5G "" G 0.0001K 2000T; do
    $GLMCHAT logits -m "$M" $VK --gpu-mem "$v" --tokens $TOK -o "$TMP/x.bin" >/dev/null 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q -- "--gpu-mem: .* \(is not a size like 6G\|is out of range\)" "$TMP/err"; then
        ok "--gpu-mem '$v' is refused"
    else
        fail "--gpu-mem '$v' is refused" "status $rc: $(head -c 300 "$TMP/err")"
    fi
done
for v in 512M 1.5G 0.5g 4096KiB auto 0; do
    if $GLMCHAT logits -m "$M" $VK --gpu-mem "$v" --tokens $TOK -o "$TMP/x.bin" 2>"$TMP/err"; then
        ok "--gpu-mem '$v' is taken"
    else
        fail "--gpu-mem '$v' is taken" "$(head -c 300 "$TMP/err")"
    fi
done

# ---- info: what is placed where, without loading the weights ----------------------
if $GLMCHAT info -m "$M" $VK --gpu-mem 5M >"$TMP/info" 2>"$TMP/err" &&
    grep -q '^placement     Vulkan on ' "$TMP/info" &&
    grep -qE '^  device      weights [0-9.]+ MiB, KV cache [0-9.]+ MiB \([0-9]+ tokens\), activations [0-9.]+ MiB \(batches of [0-9]+ tokens\): [0-9.]+ MiB of 5\.0 MiB \(--gpu-mem\)$' "$TMP/info" &&
    grep -q '^architecture  deepseek2' "$TMP/info"; then
    ok "info --gpu-mem 5M: the placement"
else
    fail "info --gpu-mem 5M: the placement" "$(tail -3 "$TMP/info") $(head -c 300 "$TMP/err")"
fi
# the pinned host memory: the chat's engine keeps one row of logits there,
# not n_batch rows of them (test_vk_logits.c checks the bytes on a large
# vocabulary)
kib=$(sed -n 's/^  pinned      \([0-9]*\)\.[0-9]* KiB of host-visible buffers.*/\1/p' "$TMP/info")
batch=$(sed -n 's/.*(batches of \([0-9]*\) tokens).*/\1/p' "$TMP/info")
vocab=$(sed -n 's/^vocab  *\([0-9]*\)$/\1/p' "$TMP/info")
if [ -n "$kib" ] && [ -n "$batch" ] && [ -n "$vocab" ] && [ "$kib" -lt $((batch * vocab * 4 / 1024)) ]; then
    ok "info: the pinned host memory ($kib KiB) holds less than a batch of logits"
else
    fail "info: the pinned host memory" "'$kib' KiB, batch '$batch', vocab '$vocab': $(grep '^  pinned' "$TMP/info")"
fi
n_info=$(sed -n 's/.*KV cache [0-9.]* MiB (\([0-9]*\) tokens).*/\1/p' "$TMP/info")
if [ -n "$n_info" ] && [ "$n_info" = "${n:-x}" ]; then
    ok "info: the context -p takes under the same cap ($n_info)"
else
    fail "info: the context -p takes under the same cap" "info '$n_info', -p '$n'"
fi
if $GLMCHAT info -m "$M" $VK -c 1000 >"$TMP/info" 2>"$TMP/err" &&
    grep -qE '^  device      .*KV cache [0-9.]+ MiB \(1000 tokens\).* of [0-9.]+ [MG]iB \((the memory budget|the heap less a margin)\)$' "$TMP/info"; then
    ok "info -c 1000: against the device's budget"
else
    fail "info -c 1000: against the device's budget" "$(tail -3 "$TMP/info") $(head -c 300 "$TMP/err")"
fi
expect_fail "info --gpu-mem 1M: does not fit" 'has 1\.0 MiB \(--gpu-mem\); even -c 16 needs [0-9.]+ MiB: --gpu-mem 2M or more' \
    $GLMCHAT info -m "$M" $VK --gpu-mem 1M
if grep -q '^architecture  deepseek2' "$TMP/out"; then ok "info: the summary still comes first"; else fail "info: the summary" "$(head -c 200 "$TMP/out")"; fi
if $GLMCHAT info -m "$M" --backend cpu >"$TMP/info" 2>"$TMP/err" &&
    grep -q '^placement     the cpu backend: weights in host memory' "$TMP/info"; then
    ok "info --backend cpu: host memory"
else
    fail "info --backend cpu" "$(tail -2 "$TMP/info") $(head -c 300 "$TMP/err")"
fi
if $GLMCHAT info -m "$M" >"$TMP/info" 2>&1 && ! grep -q '^placement' "$TMP/info"; then
    ok "info without --backend: the file only"
else
    fail "info without --backend" "$(tail -3 "$TMP/info")"
fi

done_tests
