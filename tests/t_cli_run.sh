#!/bin/sh
# t_cli_run.sh: `glmchat logits`, `generate` and `info` on every fixture
# model, on both CPU backends (cpu: the fast one; ref: the plain-C
# reference), held to the fixture criteria (tests/oracle_lib.sh: the
# tolerances of tests/test_ref_forward.c and tests/test_cpu_forward.c), and
# the commands' error handling; f16 KV within 2e-3 of the f32 KV run.
. tests/lib.sh
. tests/oracle_lib.sh
CMP=$BUILD/tools/cmp_logits
JG=$BUILD/tools/json_get
ROOT=tests/data/models

for be in cpu ref; do
for dir in "$ROOT"/*/; do
    [ -f "$dir/fixture.json" ] || continue
    name=$($JG "$dir/fixture.json" name)
    tokens=$($JG "$dir/fixture.json" prompt.tokens --sep ,)
    vocab=$($JG "$dir/logits.ref_f64.f32.json" shape.1)
    n_tok=$(echo "$tokens" | tr ',' '\n' | wc -l)
    for file in $($JG "$dir/fixture.json" files); do
        v=${file#"$name".}
        v=${v%.gguf}
        model=$dir/$file
        case=$name.$v.$be
        # logits: one eval over the prompt, compared with the f64 reference
        if ! $GLMCHAT logits -m "$model" --backend $be --tokens "$tokens" -o "$TMP/$case.bin" 2>"$TMP/err"; then
            fail "logits $case" "$(head -c 300 "$TMP/err")"
            continue
        fi
        oracle_logits "$be logits $case" "$dir" "$v" "$n_tok" "$vocab" "$TMP/$case.bin"
        # generate: greedy ids
        n=$($JG "$dir/fixture.json" "greedy.$v" | wc -w)
        got=$($GLMCHAT generate -m "$model" --backend $be --tokens "$tokens" -n "$n" --temp 0 --ids 2>"$TMP/err")
        oracle_generate "$be generate $case" "$dir" "$v" "$got" "$TMP/err"
    done

    # f16 KV cache close to the f32 one
    f32=$dir/$name.f32.gguf
    if $GLMCHAT logits -m "$f32" --backend $be --kv-type f16 --tokens "$tokens" -o "$TMP/f16.bin" 2>"$TMP/err" &&
        out=$($CMP --vocab "$vocab" --max-rel-l2 2e-3 --min-argmax "$n_tok" "$TMP/f16.bin" "$TMP/$name.f32.$be.bin"); then
        ok "$be logits $name --kv-type f16 ($out)"
    else
        fail "$be logits $name --kv-type f16" "$out $(head -c 200 "$TMP/err")"
    fi
    # the CPU backends' default cache is f32 (the oracle rounds nothing)
    if $GLMCHAT logits -m "$f32" --backend $be --kv-type f32 --tokens "$tokens" -o "$TMP/kv32.bin" 2>"$TMP/err" &&
        cmp -s "$TMP/kv32.bin" "$TMP/$name.f32.$be.bin"; then
        ok "logits $name: the $be backend's default KV cache is f32"
    else
        fail "logits $name: the $be backend's default KV cache is f32" "$(head -c 200 "$TMP/err")"
    fi
    # small batches and threads give the same file
    if $GLMCHAT logits -m "$f32" --backend $be -b 4 -t 1 --tokens "$tokens" -o "$TMP/b4.bin" 2>"$TMP/err" &&
        cmp -s "$TMP/b4.bin" "$TMP/$name.f32.$be.bin"; then
        ok "$be logits $name -b 4 -t 1 identical"
    else
        fail "$be logits $name -b 4 -t 1" "differs $(head -c 200 "$TMP/err")"
    fi
    # info: the summary, quickly (once)
    [ "$be" = cpu ] || continue
    if $GLMCHAT info -m "$f32" >"$TMP/info" 2>"$TMP/err" && grep -q '^architecture  deepseek2' "$TMP/info" &&
        grep -q "^vocab         $vocab" "$TMP/info" && grep -q '^active bytes' "$TMP/info"; then
        ok "info $name"
    else
        fail "info $name" "$(head -c 300 "$TMP/info") $(head -c 200 "$TMP/err")"
    fi
done
done

# ---- errors: one line, the right exit status -------------------------------
M=$(ls "$ROOT"/*/*.f32.gguf | head -n 1)
expect_fail "logits: missing file" "^glmchat: $TMP/none.gguf: " \
    $GLMCHAT logits -m "$TMP/none.gguf" --backend cpu --tokens 1 -o "$TMP/x.bin"
expect_fail "generate: not a GGUF" "^glmchat: $TMP/junk.gguf: " \
    sh -c "echo junk >$TMP/junk.gguf; $GLMCHAT generate -m $TMP/junk.gguf --backend cpu --tokens 1 -n 2"
expect_fail "info: missing file" "^glmchat: $TMP/none.gguf: " $GLMCHAT info -m "$TMP/none.gguf"
expect_fail "logits: token out of range" "^glmchat: .*token id 99999 .*out of range" \
    $GLMCHAT logits -m "$M" --backend cpu --tokens 1,99999 -o "$TMP/x.bin"
expect_fail "generate: --ctx too small" "too small" \
    $GLMCHAT generate -m "$M" --backend cpu --tokens 1,2,3 -n 8 -c 4
[ -f "$TMP/x.bin" ] && fail "logits: failed run left an output file" "$TMP/x.bin" || ok "logits: failed run left no output"
expect_fail "GLMCHAT_CPU_KERNELS: an unknown set" "GLMCHAT_CPU_KERNELS: 'sse9' is not one of portable, avx2" \
    env GLMCHAT_CPU_KERNELS=sse9 $GLMCHAT logits -m "$M" --backend cpu --tokens 1 -o "$TMP/x.bin"

usage_fail() { # NAME PATTERN CMD...: exit status 2 and the pattern on stderr
    name=$1 pat=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -qE "$pat" "$TMP/err"; then ok "$name"; else
        fail "$name" "exit $rc, stderr '$(head -c 200 "$TMP/err")'"; fi
}
usage_fail "logits: no -m" "no model given" $GLMCHAT logits --tokens 1 -o "$TMP/x.bin"
usage_fail "logits: no -o" "no output file" $GLMCHAT logits -m "$M" --tokens 1
usage_fail "logits: bad --tokens" "not a list of token ids" $GLMCHAT logits -m "$M" --tokens 1,,2 -o "$TMP/x.bin"
usage_fail "logits: unknown option" "unknown option" $GLMCHAT logits -m "$M" --tokens 1 -o "$TMP/x.bin" --frobnicate
usage_fail "generate: --top-p out of range" "out of range" $GLMCHAT generate -m "$M" --tokens 1 -n 2 --temp 0.7 --top-p 1.5

# Sampling: the same seed gives the same tokens; the ids are in range.
s1=$($GLMCHAT generate -m "$M" --backend cpu --tokens 304,306 -n 12 --temp 1.0 --top-p 0.95 --min-p 0.01 --seed 7 2>&1)
s2=$($GLMCHAT generate -m "$M" --backend cpu --tokens 304,306 -n 12 --temp 1.0 --top-p 0.95 --min-p 0.01 --seed 7 2>&1)
s3=$($GLMCHAT generate -m "$M" --backend cpu --tokens 304,306 -n 12 --temp 1.5 --seed 8 2>&1)
[ "$s1" = "$s2" ] && [ "$(echo "$s1" | wc -w)" -eq 12 ] && ok "generate --temp 1: same seed, same tokens" ||
    fail "generate --temp 1: same seed" "'$s1' vs '$s2'"
echo "$s1 $s3" | tr ' ' '\n' | awk '$1 < 0 || $1 >= 324 || $1 !~ /^[0-9]+$/ { bad = 1 } END { exit bad }' &&
    [ "$s1" != "$s3" ] && ok "generate --temp: ids in range, seeds differ" || fail "generate --temp: ids" "'$s1' / '$s3'"
usage_fail "generate: bad --kv-type" "kv-type" $GLMCHAT generate -m "$M" --tokens 1 --kv-type q8
usage_fail "generate: -n not a number" "not a number" $GLMCHAT generate -m "$M" --tokens 1 -n many
usage_fail "info: no model" "no model given" $GLMCHAT info
usage_fail "generate: unknown backend" "unknown backend 'gpu'" $GLMCHAT generate -m "$M" --backend gpu --tokens 1

# --backend vulkan: through the backend table; without it, a clear message
if $GLMCHAT generate -m "$M" --backend vulkan --tokens 1,2 -n 2 >"$TMP/out" 2>"$TMP/err"; then
    [ "$(wc -w <"$TMP/out")" -eq 2 ] && ok "generate --backend vulkan runs" || fail "generate --backend vulkan" "$(cat "$TMP/out")"
else
    grep -qE "^glmchat: .*vulkan" "$TMP/err" && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
        ok "generate --backend vulkan: clear message when unavailable" ||
        fail "generate --backend vulkan" "$(head -c 300 "$TMP/err")"
fi
done_tests
