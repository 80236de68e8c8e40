#!/bin/sh
# t_mkmodel.sh: `glmchat mkmodel`, the synthetic-model generator, through the CLI.
#  - Rebuilt from each fixture's own generator arguments (fixture.json ->
#    generator), every file type has the fixture's hparams, per-tensor types
#    and file size (tests/tools/fixture_cmp) and loads with `glmchat info`.
#  - The full-size preset's table has the real Q4_0 file's figures.
#  - The demo preset and the layout variants load and run.
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

# ---- errors --------------------------------------------------------------------------
expect_fail "mkmodel: unknown preset" "^glmchat: mkmodel: unknown preset 'gpt2' \(presets: tiny-glm" \
    $GLMCHAT mkmodel --preset gpt2 --type Q4_0 -o "$TMP/x.gguf"
expect_fail "mkmodel: unknown type" "unknown type 'Q3_K_M' \(types: F32" \
    $GLMCHAT mkmodel --preset demo --type Q3_K_M -o "$TMP/x.gguf"
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
