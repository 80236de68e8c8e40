#!/bin/sh
# t_mkmodel.sh: `glmchat mkmodel`, the synthetic-model generator, through the CLI.
#  - Rebuilt from each fixture's own generator arguments (fixture.json ->
#    generator), every file type has the fixture's hparams, per-tensor types
#    and file size (tests/tools/fixture_cmp) and loads with `glmchat info`.
#  - The full-size preset's table has the real Q4_0 file's figures.
#  - The demo preset and the layout variants load and run.
#  - The low-bit and non-linear types (Q2_K .. IQ1_M, the UD-style mixes):
#    full-size tables; tiny models of each answer on the CPU backend and match
#    a float64 forward pass on their own weights (tests/data/quant/ref), as do
#    files llama-quantize made (tests/data/quant/lq: IQ2_XXS, IQ3_XXS, IQ1_S,
#    IQ2_M, IQ3_M, its own mixes); our quantizers write llama-quantize's bytes
#    for the 13 presets it makes without an importance matrix (t_vk_lowbit.sh:
#    the same models on the Vulkan backend).
#  - Bad arguments give one clear line and a non-zero exit; nothing is left behind.
. tests/lib.sh

JSON_GET=$BUILD/tools/json_get
CMP=$BUILD/tools/fixture_cmp

# ---- the fixtures, rebuilt ----------------------------------------------------
for dir in tests/data/models/*/; do
    name=$(basename "$dir")
    fx=$dir/fixture.json
    preset=$($JSON_GET "$fx" generator.preset)
    seed=$($JSON_GET "$fx" generator.seed)
    overrides=$($JSON_GET "$fx" generator.overrides)
    for variant in f32 q8_0 q4_0 q4_k_m; do
        out=$TMP/$name.$variant.gguf
        # shellcheck disable=SC2086 # the overrides are separate arguments
        if ! $GLMCHAT mkmodel --preset "$preset" --seed "$seed" $overrides --type "$variant" -o "$out" \
            >"$TMP/log" 2>&1; then
            fail "mkmodel $name $variant" "$(head -c 300 "$TMP/log")"
            continue
        fi
        if $CMP "$out" "$fx" "$name.$variant.gguf" >"$TMP/cmp" 2>&1; then
            ok "mkmodel $name $variant: fixture hparams, tensor types, size"
        else
            fail "mkmodel $name $variant: fixture hparams, tensor types, size" "$(head -n 5 "$TMP/cmp" | tr '\n' ';')"
        fi
        if $GLMCHAT info -m "$out" >"$TMP/info" 2>&1 && grep -q "$(echo "$variant" | tr a-z A-Z)" "$TMP/info"; then
            ok "mkmodel $name $variant: info loads it"
        else
            fail "mkmodel $name $variant: info loads it" "$(head -c 300 "$TMP/info")"
        fi
    done
done

# our quantizer with the generator's type rules (tests/tools/requant) turns a
# fixture's F32 file into llama-quantize's Q4_K_M of it: the same per-tensor
# types and the same bytes (CPU logits bit for bit)
for dir in tests/data/models/*/; do
    name=$(basename "$dir")
    tokens=$($BUILD/tools/json_get "$dir/fixture.json" prompt.tokens --sep ,)
    if $BUILD/tools/requant "$dir/$name.f32.gguf" "$TMP/rq.gguf" Q4_K_M 2>"$TMP/err" &&
        $GLMCHAT logits -m "$TMP/rq.gguf" --backend cpu --tokens "$tokens" -o "$TMP/rq.bin" 2>>"$TMP/err" &&
        $GLMCHAT logits -m "$dir/$name.q4_k_m.gguf" --backend cpu --tokens "$tokens" -o "$TMP/fx.bin" 2>>"$TMP/err" &&
        cmp -s "$TMP/rq.bin" "$TMP/fx.bin"; then
        ok "requant $name F32 -> Q4_K_M = llama-quantize's file"
    else
        fail "requant $name F32 -> Q4_K_M" "$(head -c 300 "$TMP/err")"
    fi
done
expect_fail "requant: unknown type" "unknown type 'Q7_K'" $BUILD/tools/requant "$dir/$name.f32.gguf" "$TMP/x.gguf" Q7_K

# ---- the full-size table --------------------------------------------------------
if $GLMCHAT mkmodel --preset glm47-flash --type Q4_0 --list >"$TMP/list" 2>&1; then
    for line in "type Q4_0: 562 tensors, 16661200896 bytes" "type Q6_K: 1 tensors, 260198400 bytes" \
        "type F32: 281 tensors, 25147904 bytes" "total: 844 tensors, 16946547200 bytes" \
        "active bytes: 2116898432 per decoded token"; do
        if grep -qx "$line" "$TMP/list"; then ok "glm47-flash Q4_0 table: $line"; else
            fail "glm47-flash Q4_0 table: $line" "not in: $(tail -n 8 "$TMP/list" | tr '\n' ';')"; fi
    done
    if [ "$(grep -c '^tensor ' "$TMP/list")" = 844 ] && grep -q '^tensor output.weight  *Q6_K  *2048,154880 ' "$TMP/list"; then
        ok "glm47-flash Q4_0 table: 844 rows, output Q6_K {2048,154880}"
    else
        fail "glm47-flash Q4_0 table: rows" "$(head -n 3 "$TMP/list" | tr '\n' ';')"
    fi
else
    fail "glm47-flash --list" "$(head -c 300 "$TMP/list")"
fi
if $GLMCHAT mkmodel --preset glm47-flash --type Q4_K_M --nextn 1 --list >"$TMP/list" 2>&1 &&
    grep -q '^tensor blk.47.nextn.eh_proj.weight  *Q4_K  *4096,2048 ' "$TMP/list" &&
    grep -q '^total: 866 tensors' "$TMP/list"; then
    ok "glm47-flash Q4_K_M --nextn 1 table"
else
    fail "glm47-flash Q4_K_M --nextn 1 table" "$(tail -n 4 "$TMP/list" | tr '\n' ';')"
fi

# the dynamic mix (Q4_K_XL, alias dynamic): its census, and `info` shows the mix
# by tensor kind and layer range
if $GLMCHAT mkmodel --preset glm47-flash --type dynamic --list >"$TMP/list" 2>&1 &&
    grep -qx "type Q8_0: 282 tensors, 1086537728 bytes" "$TMP/list" && grep -qx "type Q4_K: 72 tensors, 8153726976 bytes" "$TMP/list" &&
    grep -qx "type Q5_K: 44 tensors, 6090129408 bytes" "$TMP/list" && grep -qx "type Q6_K: 165 tensors, 4561428480 bytes" "$TMP/list" &&
    grep -q '^tensor blk.1.ffn_gate_exps.weight  *Q5_K ' "$TMP/list" && grep -q '^tensor blk.20.ffn_gate_exps.weight  *Q4_K ' "$TMP/list"; then
    ok "glm47-flash dynamic (Q4_K_XL) table"
else
    fail "glm47-flash dynamic (Q4_K_XL) table" "$(tail -n 9 "$TMP/list" | tr '\n' ';')"
fi
if $GLMCHAT mkmodel --preset tiny-glm --layers 12 --type Q4_K_XL -o "$TMP/mix.gguf" >/dev/null 2>"$TMP/err" &&
    $GLMCHAT info -m "$TMP/mix.gguf" >"$TMP/info" 2>&1 && grep -q '^file type  *Q4_K_M (15)$' "$TMP/info" &&
    grep -qE '^  ffn_gate_exps.weight +Q4_K +9: 1-9$' "$TMP/info" && grep -qE '^ +Q5_K +2: 10-11$' "$TMP/info" &&
    grep -qE '^  attn_q_b.weight +Q8_0 +12: 0-11$' "$TMP/info" && grep -qE '^  output.weight +Q6_K$' "$TMP/info"; then
    ok "info shows a dynamic file's mix by tensor kind and layer"
else
    fail "info shows the mix" "$(sed -n '/^mix/,$p' "$TMP/info" | head -n 30 | tr '\n' ';') $(head -c 200 "$TMP/err")"
fi

# ---- the demo preset and --list's file size ------------------------------------------
for t in Q4_0 Q4_K_M Q8_0; do
    out=$TMP/demo.$t.gguf
    if $GLMCHAT mkmodel --preset demo --type $t -o "$out" >/dev/null 2>"$TMP/err" &&
        $GLMCHAT generate -m "$out" --tokens 1,2,3 -n 4 --temp 0 --ids >"$TMP/ids" 2>"$TMP/err" &&
        [ "$(wc -w <"$TMP/ids")" -eq 4 ]; then
        ok "demo $t: generates"
    else
        fail "demo $t: generates" "$(head -c 300 "$TMP/err")"
    fi
    want=$($GLMCHAT mkmodel --preset demo --type $t --list | sed -n 's/^file: \([0-9]*\) bytes$/\1/p')
    got=$(wc -c <"$out" | tr -d ' ')
    if [ "$got" = "$want" ]; then ok "demo $t: --list predicts the file size"; else
        fail "demo $t: --list file size" "list $want, file $got"; fi
done

# ---- layout variants of real files --------------------------------------------------
for v in "--merged-gate-up" "--legacy-kv-b" "--nextn 1" "--no-gating-key" \
    "--merged-gate-up --legacy-kv-b --nextn 1 --no-gating-key"; do
    out=$TMP/variant.gguf
    rm -f "$out"
    # shellcheck disable=SC2086
    if $GLMCHAT mkmodel --preset tiny-glm --type Q4_K_M $v -o "$out" >/dev/null 2>"$TMP/err" &&
        $GLMCHAT info -m "$out" >"$TMP/info" 2>>"$TMP/err" &&
        $GLMCHAT generate -m "$out" --tokens 304,306,308 -n 3 --temp 0 --ids >/dev/null 2>>"$TMP/err"; then
        ok "variant $v: loads and runs"
    else
        fail "variant $v: loads and runs" "$(head -c 300 "$TMP/err")"
    fi
done
$GLMCHAT mkmodel --preset tiny-glm --type F16 --legacy-kv-b -o "$TMP/v.gguf" >/dev/null 2>&1
if $GLMCHAT info -m "$TMP/v.gguf" 2>&1 | grep -q "attn_kv_b"; then ok "variant --legacy-kv-b: info shows attn_kv_b"; else
    fail "variant --legacy-kv-b: info shows attn_kv_b" "$($GLMCHAT info -m "$TMP/v.gguf" 2>&1 | grep -i 'kv layout')"; fi

# ---- determinism ---------------------------------------------------------------------
$GLMCHAT mkmodel --preset demo --type Q4_K_M --seed 9 --threads 1 -o "$TMP/a.gguf" >/dev/null 2>&1
$GLMCHAT mkmodel --preset demo --type Q4_K_M --seed 9 --threads 2 -o "$TMP/b.gguf" >/dev/null 2>&1
$GLMCHAT mkmodel --preset demo --type Q4_K_M --seed 10 -o "$TMP/c.gguf" >/dev/null 2>&1
if cmp -s "$TMP/a.gguf" "$TMP/b.gguf"; then ok "same seed, 1 or 2 threads: same bytes"; else
    fail "same seed, 1 or 2 threads: same bytes" "files differ"; fi
if ! cmp -s "$TMP/a.gguf" "$TMP/c.gguf"; then ok "another seed: other weights"; else
    fail "another seed: other weights" "files equal"; fi

# ---- the low-bit and non-linear types -------------------------------------------------
# Full-size tables: the per-tensor types are llama-quantize's (synth_types.c; its
# --dry-run gave the same types on these presets for the fixtures' shapes and a
# 47-layer one, outside the repo); the totals pin them down here.
for case in "Q2_K|type Q2_K: 375 tensors, 6433867776 bytes|type Q3_K: 140 tensors, 4262297600 bytes" \
    "Q3_K_M|type Q3_K: 375 tensors, 8425303040 bytes|type Q5_K: 3 tensors, 154992640 bytes" \
    "IQ4_XS|type IQ4_XS: 506 tensors, 15240843264 bytes|type Q5_K: 9 tensors, 576716800 bytes" \
    "MXFP4_MOE|type MXFP4: 232 tensors, 14874300416 bytes|type Q8_0: 331 tensors, 2059575296 bytes" \
    "IQ2_XXS|type IQ2_XXS: 509 tensors, 7419945984 bytes|type Q2_K: 6 tensors, 245145600 bytes" \
    "IQ3_XXS|type IQ3_XXS: 374 tensors, 7384753152 bytes|type IQ3_S: 48 tensors, 348057600 bytes" \
    "Q2_K_XL|type Q2_K: 72 tensors, 4756340736 bytes|type Q5_K: 376 tensors, 981229568 bytes" \
    "Q3_K_XL|type Q3_K: 72 tensors, 6228541440 bytes|type Q6_K: 377 tensors, 1430983680 bytes"; do
    t=${case%%|*} rest=${case#*|}
    if $GLMCHAT mkmodel --preset glm47-flash --type "$t" --list >"$TMP/list" 2>&1 && grep -qx "${rest%%|*}" "$TMP/list" &&
        grep -qx "${rest#*|}" "$TMP/list" && grep -q '^total: 844 tensors' "$TMP/list"; then
        ok "glm47-flash $t table"
    else
        fail "glm47-flash $t table" "$(grep -E '^(type|total)' "$TMP/list" | tr '\n' ';')"
    fi
done
if $GLMCHAT mkmodel --preset glm47-flash --type IQ2_S --list 2>&1 | grep -q '^tensor blk.10.ffn_down_exps.weight  *IQ2_S ' &&
    $GLMCHAT mkmodel --preset glm47-flash --type IQ2_S --list 2>&1 | grep -q '^tensor output.weight  *IQ2_S '; then
    ok "glm47-flash IQ2_S: plain (every weight IQ2_S)"
else
    fail "glm47-flash IQ2_S: plain" "$($GLMCHAT mkmodel --preset glm47-flash --type IQ2_S --list 2>&1 | grep -E '^type' | tr '\n' ';')"
fi

# llama-quantize's bytes: requantizing the tiny-glm-a fixture's F32 file gives the
# tensors llama-quantize (d32676d7, no importance matrix) writes for each of its
# presets in tests/data/quant/lq/llama_quantize_digests.txt (lq/make.sh made it)
n_lq=0
while read -r t want; do
    n_lq=$((n_lq + 1))
    if $BUILD/tools/requant tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf "$TMP/lq.gguf" "$t" 2>"$TMP/err" &&
        [ "$($BUILD/tools/tensor_digest "$TMP/lq.gguf")" = "$want" ]; then
        ok "requant tiny-glm-a F32 -> $t = llama-quantize's tensors"
    else
        fail "requant tiny-glm-a F32 -> $t = llama-quantize's tensors" "$(head -c 200 "$TMP/err")"
    fi
done <tests/data/quant/lq/llama_quantize_digests.txt
[ "$n_lq" -ge 13 ] || fail "llama-quantize digests" "$n_lq presets in tests/data/quant/lq/llama_quantize_digests.txt"

# Tiny models of each type against a float64 forward pass on their own weights
# (tests/data/quant/ref; gen_refs.sh there made them with tests/tools/ref_f64.py).
# The reference backend (float32 activations, every type decoded exactly): within
# the fixtures' bound for float32 activations (1e-3 rel-L2) and every argmax (each
# reference's smallest top-2 margin is >= 3e-4, far above f32 error), the greedy
# continuation equal to the reference's.  The fast CPU backend multiplies most
# types with 8-bit activations, as llama.cpp does: llama.cpp's own logits on the
# fixture files are 1.5e-2..4.9e-2 rel-L2 from float64 with 24-25/25 argmaxes
# (tests/data/models/*/logits.ref_f64.*.json), so the bound for it is 0.1 (twice
# llama.cpp's worst) and 80% of the argmaxes; its greedy run is not compared
# (a near tie may flip under 8-bit activations) but must produce 12 ids.
# One exception: our IQ1_S file (IQ1_S experts and attention, 1.56 bits a
# weight), whose random network amplifies activation rounding most: 0.077
# while its IQ1_S tensors took f32 activations, 0.105 with 8-bit ones as
# llama.cpp's CPU backend gives them (every kernel set alike; the kernels
# equal the exact product with the 8-bit activations, test_cpu_kernels), so
# 0.13 for it; llama-quantize's own IQ1_S file moved 0.014 -> 0.052.
REF=tests/data/quant/ref
for j in $REF/*.json; do
    id=$(basename "$j" .json) src=${id%%.*} t=${id#*.}
    m=$TMP/$id.gguf
    if [ "$src" = rq ]; then
        $BUILD/tools/requant tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf "$m" "$t" 2>"$TMP/err"
    elif [ "$src" = lq ]; then
        cp "tests/data/quant/lq/$t.gguf" "$m" 2>"$TMP/err"
    else
        $GLMCHAT mkmodel --preset tiny-glm --seed 7 --type "$t" --quiet -o "$m" >/dev/null 2>"$TMP/err"
    fi || { fail "$id: make the model" "$(head -c 200 "$TMP/err")"; continue; }
    digest=$($BUILD/tools/tensor_digest "$m")
    if [ "$digest" != "$($JSON_GET "$j" tensor_digest)" ]; then
        fail "$id: weights" "tensor digest $digest is not the reference's: the quantizer or generator changed; regenerate $REF (gen_refs.sh)"
        continue
    fi
    tokens=$($JSON_GET "$j" tokens --sep ,)
    n_tok=$($JSON_GET "$j" tokens | wc -w)
    vocab=$($JSON_GET "$j" n_vocab)
    if $GLMCHAT logits -m "$m" --backend ref --tokens "$tokens" -o "$TMP/l.bin" 2>"$TMP/err" &&
        out=$($BUILD/tools/cmp_logits --vocab "$vocab" --max-rel-l2 1e-3 --min-argmax "$n_tok" \
            "$TMP/l.bin" "$REF/$id.bin"); then
        ok "$id: ref logits vs f64 reference ($out)"
    else
        fail "$id: ref logits vs f64 reference" "${out:-$(head -c 200 "$TMP/err")}"
    fi
    want=$($JSON_GET "$j" greedy_continuation)
    got=$($GLMCHAT generate -m "$m" --backend ref --tokens "$tokens" -n 12 --temp 0 --ids 2>"$TMP/err")
    if [ "$(echo $got)" = "$(echo $want)" ]; then ok "$id: ref greedy ids = reference"; else
        fail "$id: ref greedy ids" "got '$got', reference '$want' $(head -c 200 "$TMP/err")"; fi
    cpu_bound=0.1
    [ "$id" = mk.IQ1_S ] && cpu_bound=0.13
    if $GLMCHAT logits -m "$m" --backend cpu --tokens "$tokens" -o "$TMP/l.bin" 2>"$TMP/err" &&
        out=$($BUILD/tools/cmp_logits --vocab "$vocab" --max-rel-l2 $cpu_bound --min-argmax $((n_tok * 4 / 5)) \
            "$TMP/l.bin" "$REF/$id.bin"); then
        ok "$id: cpu logits vs f64 reference ($out)"
    else
        fail "$id: cpu logits vs f64 reference" "${out:-$(head -c 200 "$TMP/err")}"
    fi
    got=$($GLMCHAT generate -m "$m" --backend cpu --tokens "$tokens" -n 12 --temp 0 --ids 2>"$TMP/err")
    if [ "$(echo $got | wc -w)" = 12 ]; then ok "$id: cpu greedy run"; else
        fail "$id: cpu greedy run" "got '$got' $(head -c 200 "$TMP/err")"; fi
    if $GLMCHAT -m "$m" -p hi --backend cpu -n 4 --temp 0 >/dev/null 2>"$TMP/err"; then ok "$id: -p hi answers"; else
        fail "$id: -p hi answers" "$(head -c 200 "$TMP/err")"; fi
done

# the other file types load and answer too
for t in Q3_K_S Q3_K_L Q2_K_XL Q3_K_XL IQ4_NL MXFP4_MOE; do
    if $GLMCHAT mkmodel --preset demo --type $t --quiet -o "$TMP/d.gguf" --force >/dev/null 2>"$TMP/err" &&
        $GLMCHAT -m "$TMP/d.gguf" -p hi --backend cpu -n 4 --temp 0 >/dev/null 2>>"$TMP/err"; then
        ok "demo $t: -p hi answers"
    else
        fail "demo $t: -p hi answers" "$(head -c 300 "$TMP/err")"
    fi
done

# every file type mkmodel knows (the unknown-type error lists them) is in --help,
# and the layout variants work with them too
names=$($GLMCHAT mkmodel --preset demo --type Q7_K -o "$TMP/x.gguf" 2>&1 | sed -n 's/.*(types: \(.*\))$/\1/p' |
    sed 's/ ([^)]*)//g; s/,//g')
$GLMCHAT mkmodel --help >"$TMP/help" 2>&1
missing=
for n in $names; do grep -qw -- "$n" "$TMP/help" || missing="$missing $n"; done
if [ -n "$names" ] && [ -z "$missing" ]; then ok "mkmodel --help names every type"; else
    fail "mkmodel --help names every type" "missing:$missing (names: $(echo $names | head -c 100))"; fi
if $GLMCHAT mkmodel --preset tiny-glm --type IQ3_XXS --merged-gate-up --legacy-kv-b --nextn 1 --quiet -o "$TMP/v.gguf" \
    --force >/dev/null 2>"$TMP/err" &&
    $GLMCHAT generate -m "$TMP/v.gguf" --backend cpu --tokens 304,306,308 -n 3 --temp 0 --ids >/dev/null 2>>"$TMP/err"; then
    ok "IQ3_XXS with every layout variant: loads and runs"
else
    fail "IQ3_XXS with every layout variant" "$(head -c 300 "$TMP/err")"
fi

# ---- errors --------------------------------------------------------------------------
expect_fail "mkmodel: unknown preset" "^glmchat: mkmodel: unknown preset 'gpt2' \(presets: tiny-glm" \
    $GLMCHAT mkmodel --preset gpt2 --type Q4_0 -o "$TMP/x.gguf"
expect_fail "mkmodel: unknown type" "unknown type 'Q7_K' \(types: F32" \
    $GLMCHAT mkmodel --preset demo --type Q7_K -o "$TMP/x.gguf"
expect_fail "mkmodel: no output" "are required" $GLMCHAT mkmodel --preset demo --type Q4_0
expect_fail "mkmodel: bad number" "mkmodel: --hidden wants a non-negative integer, got 'big'" \
    $GLMCHAT mkmodel --preset demo --type Q4_0 --hidden big -o "$TMP/x.gguf"
expect_fail "mkmodel: impossible shape" "experts-used" \
    $GLMCHAT mkmodel --preset demo --type Q4_0 --experts-used 17 -o "$TMP/x.gguf"
expect_fail "mkmodel: row not quantizable" "row length 100 is not a multiple of the" \
    $GLMCHAT mkmodel --preset demo --type Q4_0 --hidden 100 -o "$TMP/x.gguf"
expect_fail "mkmodel: bad --yarn" "mkmodel: --yarn wants FACTOR" \
    $GLMCHAT mkmodel --preset demo --type Q4_0 --yarn 40,4096 -o "$TMP/x.gguf"
expect_fail "mkmodel: unknown option" "unknown option '--frobnicate'" \
    $GLMCHAT mkmodel --preset demo --type Q4_0 --frobnicate -o "$TMP/x.gguf"
expect_fail "mkmodel: unwritable output" "^glmchat: $TMP/no/such/dir/x.gguf: cannot create" \
    $GLMCHAT mkmodel --preset demo --type Q4_0 -o "$TMP/no/such/dir/x.gguf"
if [ ! -e "$TMP/x.gguf" ]; then ok "mkmodel: failures leave no file"; else fail "mkmodel: failures leave no file" "x.gguf exists"; fi
# An existing file is not replaced unless --force (it was, silently).
printf 'my notes\n' >"$TMP/notes.txt"
expect_fail "mkmodel: existing output refused" "^glmchat: mkmodel: $TMP/notes.txt exists; not replacing it \(--force replaces it\)$" \
    $GLMCHAT mkmodel --preset demo --type Q4_0 -o "$TMP/notes.txt"
if [ "$(cat "$TMP/notes.txt")" = "my notes" ]; then ok "mkmodel: existing output kept"; else fail "mkmodel: existing output kept" "the file changed"; fi
if $GLMCHAT mkmodel --preset demo --type Q4_0 --force -o "$TMP/notes.txt" >/dev/null 2>"$TMP/err" &&
    $GLMCHAT info -m "$TMP/notes.txt" >/dev/null 2>&1; then ok "mkmodel: --force replaces"
else fail "mkmodel: --force replaces" "$(head -c 200 "$TMP/err")"; fi
if $GLMCHAT mkmodel --preset demo --type Q4_0 --quiet -o /dev/null >/dev/null 2>"$TMP/err"; then ok "mkmodel: a device is written to"
else fail "mkmodel: a device is written to" "$(head -c 200 "$TMP/err")"; fi

done_tests
