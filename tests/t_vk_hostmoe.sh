#!/bin/sh
# t_vk_hostmoe.sh: routed experts in host memory on the Vulkan backend
# (lavapipe in CI; gpu/vk_hostmoe.c): the experts of the first N blocks
# computed by the CPU, the rest of the model on the device.
#  - every fixture file type (each on one of the fixture models) with all
#    its MoE layers' experts on the CPU, and the GLM model with one of two, held to the fixture criteria
#    the unsplit Vulkan run is held to (tests/oracle_lib.sh: logits against
#    the float64 reference of the file, greedy continuations), the prompt
#    as one batch (the prompt graph's parts) and a token at a time (the
#    decode graph's), and within 1e-2 rel-L2 of the unsplit run (the CPU's
#    8-bit activations against the GPU's: ~6e-3 on the Q8_0 file); the same
#    at subgroup 16; the prompt in chunks of 3 within 1e-5 of one batch (as
#    t_vk_fixtures.sh holds the unsplit run: the attention's splits follow
#    the chunk; the CPU's sums do not depend on it);
#  - --n-cpu-moe 1 on a model whose block 0 is dense moves nothing: the
#    unsplit run's bits;
#  - a --gpu-mem too small for every expert splits by itself (info, -p's
#    note and the logits say so), one too small even then is one line;
#  - the hand-overs of --tune hx=0 (side part after a blocking wait) and
#    hx=1 (side part before the wait, the fence polled) held to the same
#    criteria as the default hx=2 (a token's parts submitted at once, linked
#    by timeline semaphores) on two files, and the three give the same bits;
#  - bench prints the split's breakdown (engine_split_stat) under each
#    value: every figure non-negative, the GPU parts and the GPU's idle
#    time within the token, the CPU's experts within the host's turns, the
#    host's waits and turns adding up to the token;
#  - prompt batches streamed to the GPU (--tune hx_stream=1) give the
#    unsplit prompt graph's bits, as one batch, in chunks, at subgroup 16,
#    and the same greedy continuations; below the threshold the CPU's path;
#  - bad values of the flag and the settings key are one-line errors.
. tests/lib.sh
. tests/oracle_lib.sh
CMP=$BUILD/tools/cmp_logits
JG=$BUILD/tools/json_get
ROOT=tests/data/models
# --tune idot=0: the float decode path, held to the exact criteria below
# (integer dot products -- on by default where a GPU makes them fast --
# have their own end-to-end checks in t_vk_fixtures.sh)
VK="--backend vulkan --kv-type f32 --tune idot=0"

if ! $GLMCHAT devices >/dev/null 2>&1; then
    fail "vulkan device" "none usable ($($GLMCHAT devices 2>&1 | head -c 300))"
    done_tests
fi

# blocks MODEL: how many blocks the model runs (info's "blocks N run")
blocks() { $GLMCHAT info -m "$1" | sed -n 's/^blocks *\([0-9]*\) run.*/\1/p'; }

# split_case NAME DIR VARIANT N: logits and greedy ids with the experts of
# blocks 0..N-1 in host memory, against the oracles and the unsplit run
# ($HX: more flags for the split runs, e.g. a hand-over)
HX=
split_case() {
    _c=$1 _d=$2 _v=$3 _n=$4
    _m=$_d/$(basename "$_d").$_v.gguf
    _tokens=$($JG "$_d/fixture.json" prompt.tokens --sep ,)
    _vocab=$($JG "$_d/logits.ref_f64.f32.json" shape.1)
    _ntok=$(echo "$_tokens" | tr ',' '\n' | wc -l)
    if ! $GLMCHAT logits -m "$_m" $VK $HX --n-cpu-moe "$_n" --tokens "$_tokens" -o "$TMP/$_c.bin" 2>"$TMP/err"; then
        fail "$_c logits" "$(head -c 300 "$TMP/err")"
        return
    fi
    oracle_logits "$_c logits" "$_d" "$_v" "$_ntok" "$_vocab" "$TMP/$_c.bin"
    if $GLMCHAT logits -m "$_m" $VK $HX --n-cpu-moe "$_n" -b 1 --tokens "$_tokens" -o "$TMP/$_c.b1.bin" 2>"$TMP/err"; then
        oracle_logits "$_c logits a token at a time" "$_d" "$_v" "$_ntok" "$_vocab" "$TMP/$_c.b1.bin"
    else
        fail "$_c logits a token at a time" "$(head -c 300 "$TMP/err")"
    fi
    if $GLMCHAT logits -m "$_m" $VK --n-cpu-moe 0 -b 1 --tokens "$_tokens" -o "$TMP/$_c.whole.bin" 2>"$TMP/err" &&
        _out=$($CMP --vocab "$_vocab" --max-rel-l2 1e-2 --min-argmax "$_ntok" "$TMP/$_c.bin" "$TMP/$_c.whole.bin"); then
        ok "$_c logits vs every expert on the device ($_out)"
    else
        fail "$_c logits vs every expert on the device" "${_out:-$(head -c 300 "$TMP/err")}"
    fi
    _k=$($JG "$_d/fixture.json" "greedy.$_v" | wc -w)
    _got=$($GLMCHAT generate -m "$_m" $VK $HX --n-cpu-moe "$_n" --tokens "$_tokens" -n "$_k" --temp 0 --ids 2>"$TMP/err")
    oracle_generate "$_c generate" "$_d" "$_v" "$_got" "$TMP/err"
}

# ---- every MoE layer's experts on the CPU ---------------------------------------------
# Every weight type once over the fixture models (the first model's F32
# and Q4_0 files, the next one's Q8_0 and Q4_K_M, ...: each case is four
# runs on lavapipe, and the split's host side does not depend on which
# architecture carries which type; t_vk_fixtures.sh holds every file to
# the criteria unsplit).  The sanitizer run (TEST_QUICK): the first file.
QUICK=${TEST_QUICK:-0}
i=0
for dir in "$ROOT"/*/; do
    [ -f "$dir/fixture.json" ] || continue
    dir=${dir%/}
    name=$(basename "$dir")
    nb=$(blocks "$dir/$name.f32.gguf")
    j=0
    for v in f32 q8_0 q4_0 q4_k_m; do
        j=$((j + 1))
        [ $(((i + j) % 2)) = 1 ] || continue
        [ "$QUICK" = 1 ] && [ $((i + j)) != 1 ] && continue
        [ -f "$dir/$name.$v.gguf" ] && split_case "host experts $name.$v (all $nb blocks)" "$dir" "$v" "$nb"
    done
    i=$((i + 1))
done

# ---- some layers: the GLM model's first MoE layer (block 1) ---------------------------
G=$ROOT/tiny-glm-a
vs="f32 q4_k_m"
[ "$QUICK" = 1 ] && vs=q4_k_m
for v in $vs; do
    split_case "host experts tiny-glm-a.$v (blocks 0..1)" "$G" "$v" 2
done

# ---- the other hand-overs: blocking waits (0), the fence polled (1) -----------------------
for hx in 0 1; do
    HX="--tune hx=$hx"
    for v in q8_0 q4_k_m; do
        [ "$QUICK" = 1 ] && [ "$v" != q8_0 ] && continue
        split_case "host experts tiny-glm-a.$v (blocks 0..2, hx=$hx)" "$G" "$v" 3
    done
done
HX=
tokens=$($JG "$G/fixture.json" prompt.tokens --sep ,)
for hx in 0 1 2; do
    $GLMCHAT logits -m "$G/tiny-glm-a.q8_0.gguf" $VK --n-cpu-moe 3 --tune hx=$hx -b 1 --tokens "$tokens" \
        -o "$TMP/hx$hx.bin" 2>"$TMP/err" || fail "logits hx=$hx" "$(head -c 300 "$TMP/err")"
done
if cmp -s "$TMP/hx0.bin" "$TMP/hx1.bin" && cmp -s "$TMP/hx0.bin" "$TMP/hx2.bin"; then
    ok "hand-overs 0, 1, 2: the same bits"
else
    fail "hand-overs 0, 1, 2: the same bits" "the logits differ"
fi

# ---- the breakdown: bench's lines, under both hand-overs ---------------------------------
# split_sane HX: bench's breakdown with the experts of blocks 0..2 in host
# memory; its figures as printed (us per token) must be non-negative, the
# GPU's parts and idle time within the token (timestamps on the device's
# clock, the token on the host's: 2 % + 20 us for the clocks' drift and
# rounding), the CPU's experts within the host's turns
split_sane() {
    if ! $GLMCHAT bench -m "$G/tiny-glm-a.q8_0.gguf" $VK --n-cpu-moe 3 --tune hx="$1" -p 0 -n 16 --draft off \
        >"$TMP/bench" 2>&1; then
        fail "bench hx=$1: the breakdown" "$(head -c 400 "$TMP/bench")"
        return
    fi
    _f=$(awk '
        # each figure twice: the run with the chat sampler (column 1), greedy (column 2)
        function two(i) { v[name, 1] = $i; v[name, 2] = $(i + 2) }
        /experts in host memory, 2 layers; a decoded token, means of [0-9]+ and [0-9]+ sampled/ { hdr = 1 }
        /^    token \(host clock\) / { name = "tok"; two(4) }
        /^    GPU parts \(timestamps\) / { name = "gpu"; two(4) }
        /^    GPU idle between parts / { name = "idle"; two(5) }
        /^      host.s turn: part seen -> next / { name = "turn"; two(7) }
        /^        of which the CPU.s experts / { name = "cpu"; two(6) }
        /^      hand-over: idle - turn / { name = "ho"; two(5) }
        /^    host waits: part submitted -> seen / { name = "wt"; two(7) }
        /^    shared experts \(GPU, in the turns\) / { name = "sd"; two(7) }
        END {
            if (!hdr) { print "no header"; exit 1 }
            for (c = 1; c <= 2; c++) {
                tok = v["tok", c]; gpu = v["gpu", c]; idle = v["idle", c]; turn = v["turn", c]
                cpu = v["cpu", c]; ho = v["ho", c]; wt = v["wt", c]; sd = v["sd", c]
                if (tok == "" || gpu == "" || idle == "" || turn == "" || cpu == "" || ho == "" || wt == "" || sd == "")
                    { print "missing lines (column " c ")"; exit 1 }
                if (tok <= 0 || gpu <= 0 || idle < 0 || turn <= 0 || cpu <= 0 || wt <= 0 || sd < 0)
                    { print "a figure out of range (column " c ")"; exit 1 }
                if (gpu + idle > tok * 1.02 + 20) { print "GPU " gpu " + idle " idle " > token " tok; exit 1 }
                if (cpu > turn + 0.2) { print "CPU " cpu " > turn " turn; exit 1 }
                if (turn + wt > tok * 1.001 + 1 || turn + wt < tok * 0.999 - 1)
                    { print "turn " turn " + waits " wt " != token " tok " (column " c ")"; exit 1 }
                printf "%s token %s us: GPU %s, idle %s (turn %s, CPU %s), waits %s; ", c == 1 ? "chat" : "greedy", tok, gpu, idle, turn, cpu, wt
            }
        }' "$TMP/bench")
    if [ $? -eq 0 ]; then
        ok "bench hx=$1: the breakdown is there and sane ($_f)"
    else
        fail "bench hx=$1: the breakdown" "$_f: $(grep -A8 'experts in host memory' "$TMP/bench" | head -c 600)"
    fi
}
split_sane 1
split_sane 0
split_sane 2

# bench says whether the CPU multiplies packed copies of the host experts
# (cpu_pack.h; Q8_0 is packed by the AVX-512 VNNI set only) and how large:
# one of the two lines after the default kernel set's run, and with the
# portable set (no packed kernels) always the file's rows
if grep -Eq "^  experts in host memory, 2 layers: the CPU's packed copies [0-9]+\.[0-9] MiB$|^  experts in host memory, 2 layers: the CPU multiplies the file's rows \(no packed copies\)$" "$TMP/bench"; then
    ok "bench: the host experts' packed copies ($(grep "2 layers: the CPU" "$TMP/bench" | sed 's/.*layers: //'))"
else
    fail "bench: the host experts' packed copies" "$(grep 'experts in host memory' "$TMP/bench" | head -c 300)"
fi
if GLMCHAT_CPU_KERNELS=portable $GLMCHAT bench -m "$G/tiny-glm-a.q8_0.gguf" $VK --n-cpu-moe 3 -p 0 -n 2 --draft off \
    >"$TMP/bench_p" 2>&1 && grep -q "2 layers: the CPU multiplies the file's rows (no packed copies)" "$TMP/bench_p"; then
    ok "bench: the portable kernel set packs no host experts"
else
    fail "bench: the portable kernel set packs no host experts" "$(grep -i 'experts in host memory\|error' "$TMP/bench_p" | head -c 300)"
fi

# ---- subgroup 16 (lavapipe's 512-bit vectors; the device's kernels only: not
# in the sanitizer run) ------------------------------------------------------------------
[ "$QUICK" = 1 ] ||
    LP_NATIVE_VECTOR_WIDTH=512 split_case "host experts tiny-glm-a.q8_0 [subgroup 16]" "$G" q8_0 3

# ---- the prompt in chunks of 3 ------------------------------------------------------------
# fp32 mat-mats (--tune coopmat=0): on a device with tensor cores a chunk of
# 3 and the whole prompt would take fp16 operands in different tiles, ~1e-3
# apart (the H200, run 38); this case is about the split's chunking
tokens=$($JG "$G/fixture.json" prompt.tokens --sep ,)
vocab=$($JG "$G/logits.ref_f64.f32.json" shape.1)
FP32="--tune coopmat=0"
if $GLMCHAT logits -m "$G/tiny-glm-a.q8_0.gguf" $VK $FP32 --n-cpu-moe 3 --tokens "$tokens" -o "$TMP/one.bin" 2>"$TMP/err" &&
    $GLMCHAT logits -m "$G/tiny-glm-a.q8_0.gguf" $VK $FP32 --n-cpu-moe 3 -b 3 --tokens "$tokens" -o "$TMP/b3.bin" \
        2>>"$TMP/err" &&
    out=$($CMP --vocab "$vocab" --max-rel-l2 1e-5 "$TMP/b3.bin" "$TMP/one.bin"); then
    ok "host experts: the prompt in chunks of 3 = one batch ($out)"
else
    fail "host experts: the prompt in chunks of 3" "${out:-$(head -c 300 "$TMP/err")}"
fi

# ---- prompt batches streamed to the GPU (--tune hx_stream=1: vk_hostmoe_stream.c) -------
# Each host layer's experts laid out by the host, copied to the device slot
# and run by the prompt graph's own kernels: the same kernels on the same
# bytes as with every expert on the device, so every position's logits are
# the unsplit prompt graph's bit for bit -- as one batch, in chunks of 3, at
# subgroup 16 -- and the token `generate` takes from the prompt's last row
# (the graph without every position's logits) is the same.  (The tokens
# after it are decodes: the CPU's experts, within the split's bounds above.)
stream_case() {
    _c=$1 _m=$2 _n=$3 _tokens=$4
    shift 4
    # in chunks of 3: a whole number of them (a last chunk of one token
    # would be a decode, the CPU's experts whatever the threshold)
    _t3=$(echo "$_tokens" | tr ',' '\n' | awk '{ t[NR] = $0 } END { n = NR - NR % 3; for (i = 1; i <= n; i++) printf "%s%s", t[i], i < n ? "," : "" }')
    for _b in "" "-b 3"; do
        [ -n "$_b" ] && _tokens=$_t3
        # shellcheck disable=SC2086
        if $GLMCHAT logits -m "$_m" $VK "$@" $_b --n-cpu-moe "$_n" --tune hx_stream=1 --tokens "$_tokens" \
            -o "$TMP/st.bin" 2>"$TMP/err" &&
            $GLMCHAT logits -m "$_m" $VK "$@" $_b --n-cpu-moe 0 --tokens "$_tokens" -o "$TMP/st0.bin" 2>>"$TMP/err" &&
            cmp -s "$TMP/st.bin" "$TMP/st0.bin"; then
            ok "$_c${_b:+ ($_b)}: streamed = every expert on the device, bit for bit"
        else
            fail "$_c${_b:+ ($_b)}: streamed = every expert on the device" \
                "$(head -c 300 "$TMP/err")$(cmp "$TMP/st.bin" "$TMP/st0.bin" 2>&1 | head -c 200)"
        fi
    done
    _a=$($GLMCHAT generate -m "$_m" $VK "$@" --n-cpu-moe "$_n" --tune hx_stream=1 --tokens "$_tokens" -n 1 --temp 0 \
        --ids 2>"$TMP/err")
    _b=$($GLMCHAT generate -m "$_m" $VK "$@" --n-cpu-moe 0 --tokens "$_tokens" -n 1 --temp 0 --ids 2>>"$TMP/err")
    if [ -n "$_a" ] && [ "$_a" = "$_b" ]; then
        ok "$_c: the prompt's greedy token streamed = unsplit ($_a)"
    else
        fail "$_c: the prompt's greedy token streamed = unsplit" "'$_a' against '$_b': $(head -c 300 "$TMP/err")"
    fi
}
i=0
for dir in "$ROOT"/*/; do
    [ -f "$dir/fixture.json" ] || continue
    dir=${dir%/}
    name=$(basename "$dir")
    nb=$(blocks "$dir/$name.f32.gguf")
    tokens=$($JG "$dir/fixture.json" prompt.tokens --sep ,)
    # every type once over the models, as above (the layout per type is
    # vk_layout.c's, which the upload and t_vk_fixtures.sh share)
    j=0
    for v in q4_0 q4_k_m f32 q8_0; do
        j=$((j + 1))
        [ $(((i + j) % 2)) = 1 ] || continue
        [ "$QUICK" = 1 ] && [ $i != 0 ] && continue
        [ -f "$dir/$name.$v.gguf" ] && stream_case "streamed $name.$v (all $nb blocks)" "$dir/$name.$v.gguf" "$nb" "$tokens"
        [ "$QUICK" = 1 ] && break
    done
    i=$((i + 1))
done
tokens=$($JG "$G/fixture.json" prompt.tokens --sep ,)
[ "$QUICK" = 1 ] ||
    LP_NATIVE_VECTOR_WIDTH=512 stream_case "streamed tiny-glm-a.q4_k_m (blocks 0..1) [subgroup 16]" \
        "$G/tiny-glm-a.q4_k_m.gguf" 2 "$tokens"
# below the threshold (the default, 64 tokens): the CPU's path, as before
if $GLMCHAT logits -m "$G/tiny-glm-a.q8_0.gguf" $VK --n-cpu-moe 3 --tokens "$tokens" -o "$TMP/d.bin" 2>"$TMP/err" &&
    $GLMCHAT logits -m "$G/tiny-glm-a.q8_0.gguf" $VK --n-cpu-moe 3 --tune hx_stream=0 --tokens "$tokens" \
        -o "$TMP/d0.bin" 2>>"$TMP/err" && cmp -s "$TMP/d.bin" "$TMP/d0.bin" &&
    ! $GLMCHAT info -m "$G/tiny-glm-a.q8_0.gguf" $VK --n-cpu-moe 3 --tune hx_stream=0 | grep -q 'slot' &&
    $GLMCHAT info -m "$G/tiny-glm-a.q8_0.gguf" $VK --n-cpu-moe 3 |
    grep -qE '^  host        .*computed by the CPU; prompt batches of 64\+ tokens \(once timed, the faster way\) copy them to the GPU a layer at a time, through a [0-9.]+ KiB slot\)$'; then
    ok "a prompt below hx_stream's 64 tokens: the CPU's experts (hx_stream=0's bits); info names the slot"
else
    fail "a prompt below hx_stream's 64 tokens" "$(head -c 300 "$TMP/err")"
fi

# ---- block 0 is dense: --n-cpu-moe 1 moves nothing --------------------------------------
M=$G/tiny-glm-a.q8_0.gguf
TOK=1,2,3,4,5,6,7,8
if $GLMCHAT logits -m "$M" $VK --n-cpu-moe 1 --tokens $TOK -o "$TMP/n1.bin" 2>"$TMP/err" &&
    $GLMCHAT logits -m "$M" $VK --n-cpu-moe 0 --tokens $TOK -o "$TMP/n0.bin" 2>>"$TMP/err" &&
    cmp -s "$TMP/n1.bin" "$TMP/n0.bin" &&
    ! $GLMCHAT info -m "$M" --backend vulkan --n-cpu-moe 1 | grep -q 'in host memory'; then
    ok "--n-cpu-moe 1 (block 0 dense): nothing moved, the same bits"
else
    fail "--n-cpu-moe 1 (block 0 dense)" "$(head -c 300 "$TMP/err")"
fi

# ---- what goes where: info, -p's note ------------------------------------------------
if $GLMCHAT info -m "$M" --backend vulkan --n-cpu-moe 3 >"$TMP/info" 2>"$TMP/err" &&
    grep -qE '^  device      weights .*; routed experts of layers 1\.\.2 in host memory \([0-9.]+ MiB\)$' "$TMP/info" &&
    grep -qE '^  host        the routed experts of 2 MoE layers \([0-9.]+ MiB, read from the mapped file' "$TMP/info"; then
    ok "info --n-cpu-moe 3: layers 1..2 in host memory"
else
    fail "info --n-cpu-moe 3" "$(tail -3 "$TMP/info") $(head -c 300 "$TMP/err")"
fi
if $GLMCHAT -m "$M" --backend vulkan --n-cpu-moe 2 -p hello -n 2 --temp 0 --think off >/dev/null 2>"$TMP/err" </dev/null &&
    grep -q '^glmchat: note: Vulkan: routed experts of layer 1 in host memory ([0-9.]* MiB); ' "$TMP/err"; then
    ok "-p --n-cpu-moe 2: the note names layer 1"
else
    fail "-p --n-cpu-moe 2: the note" "$(head -c 300 "$TMP/err")"
fi

# ---- a cap too small for every expert on the device: the split by itself ---------------
# the device memory of the whole model and of the model without its routed
# experts, at -c 256 (MiB, as info prints them)
total() { $GLMCHAT info -m "$M" $VK -c 256 "$@" | sed -n 's/.*: \([0-9.]*\) MiB of .*/\1/p'; }
whole=$(total --n-cpu-moe 0)
least=$(total --n-cpu-moe 3)
capm=$(awk -v l="$least" 'BEGIN { printf "%.1f", l + 0.1 }')
cap=${capm}M
if [ -z "$whole" ] || [ -z "$least" ] || ! awk -v w="$whole" -v l="$least" 'BEGIN { exit !(l + 0.1 < w) }'; then
    fail "the cap between" "whole '$whole' MiB, without the experts '$least' MiB"
else
    if $GLMCHAT info -m "$M" $VK -c 256 --gpu-mem "$cap" >"$TMP/info" 2>"$TMP/err" &&
        grep -qE "^  device      .* of $capm MiB \(--gpu-mem\); routed experts of layers? [0-9.]+ in host memory" "$TMP/info"; then
        ok "info --gpu-mem $cap (the model needs ${whole} MiB): experts in host memory"
    else
        fail "info --gpu-mem $cap: experts in host memory" "$(tail -2 "$TMP/info") $(head -c 300 "$TMP/err")"
    fi
    tokens=$($JG "$G/fixture.json" prompt.tokens --sep ,)
    vocab=$($JG "$G/logits.ref_f64.f32.json" shape.1)
    ntok=$(echo "$tokens" | tr ',' '\n' | wc -l)
    if $GLMCHAT logits -m "$M" $VK -c 256 --gpu-mem "$cap" --tokens "$tokens" -o "$TMP/cap.bin" 2>"$TMP/err"; then
        oracle_logits "logits under --gpu-mem $cap" "$G" q8_0 "$ntok" "$vocab" "$TMP/cap.bin"
    else
        fail "logits under --gpu-mem $cap" "$(head -c 300 "$TMP/err")"
    fi
    if $GLMCHAT -m "$M" $VK -c 256 --gpu-mem "$cap" -p hello -n 2 --temp 0 --think off >/dev/null \
        2>"$TMP/err" </dev/null && grep -q '^glmchat: note: .*routed experts of layers\? [0-9.]* in host memory' "$TMP/err"; then
        ok "-p under --gpu-mem $cap: the note names the host layers"
    else
        fail "-p under --gpu-mem $cap: the note" "$(head -c 300 "$TMP/err")"
    fi
fi
# too small even with every expert in host memory: one line, non-zero
expect_fail "--gpu-mem 0.3M: too small even so" \
    'with the routed experts of layers 1\.\.2 in host memory \([0-9.]+ MiB\)\) but .* has 0\.3 MiB \(--gpu-mem\); even -c [0-9]+ needs' \
    $GLMCHAT logits -m "$M" $VK -c 256 --gpu-mem 0.3M --tokens $TOK -o "$TMP/x.bin"
if [ "$(wc -l <"$TMP/err")" -eq 1 ]; then ok "--gpu-mem 0.3M: one line"; else fail "--gpu-mem 0.3M: one line" "$(head -c 300 "$TMP/err")"; fi
expect_fail "--n-cpu-moe 2 under --gpu-mem 0.9M: too small" 'routed experts of layer 1 in host memory \([0-9.]+ MiB\)\) but .* has 0\.9 MiB \(--gpu-mem\)' \
    $GLMCHAT logits -m "$M" $VK -c 256 --n-cpu-moe 2 --gpu-mem 0.9M --tokens $TOK -o "$TMP/x.bin"

# ---- bad values --------------------------------------------------------------------------
for v in -1 x 2.5 "" 4097; do
    $GLMCHAT logits -m "$M" $VK --n-cpu-moe "$v" --tokens $TOK -o "$TMP/x.bin" >/dev/null 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q -- "^glmchat: --n-cpu-moe: '$v' is not auto or a number of layers from 0 to 4096" "$TMP/err" &&
        [ "$(wc -l <"$TMP/err")" -le 2 ]; then
        ok "--n-cpu-moe '$v' is refused"
    else
        fail "--n-cpu-moe '$v' is refused" "status $rc: $(head -c 300 "$TMP/err")"
    fi
done
expect_fail "--n-cpu-moe 4: more than the model's 3 blocks" '^glmchat: .*--n-cpu-moe 4: the model has 3 layers$' \
    $GLMCHAT logits -m "$M" $VK --n-cpu-moe 4 --tokens $TOK -o "$TMP/x.bin"
mkdir -p "$TMP/cfg/glmchat"
echo "n-cpu-moe = two" >"$TMP/cfg/glmchat/settings"
XDG_CONFIG_HOME=$TMP/cfg expect_fail "settings: n-cpu-moe = two" "n-cpu-moe: 'two' is not auto or a number of layers" \
    $GLMCHAT -m "$M" --backend vulkan -p hello -n 2 </dev/null
echo "n-cpu-moe = 3" >"$TMP/cfg/glmchat/settings"
if XDG_CONFIG_HOME=$TMP/cfg $GLMCHAT -m "$M" --backend vulkan -p hello -n 2 --think off >/dev/null 2>"$TMP/err" </dev/null &&
    grep -q 'routed experts of layers 1\.\.2 in host memory' "$TMP/err"; then
    ok "settings: n-cpu-moe = 3"
else
    fail "settings: n-cpu-moe = 3" "$(head -c 300 "$TMP/err")"
fi

done_tests
