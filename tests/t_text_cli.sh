# t_text_cli.sh: glmchat tokenize / detokenize / template from the command line.
. tests/lib.sh
QWEN=tests/data/tokenizer/qwen3.vocab.gguf
GLM=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf

# --ids: ids on one line
out=$(printf '%s' 'Hello world' | $GLMCHAT tokenize -m $QWEN --ids)
[ "$out" = "9707 1879" ] && ok tokenize_ids || fail tokenize_ids "got '$out'"

# --special parses special-token text; without it the text stays plain
out=$(printf '%s' '<|im_start|>user' | $GLMCHAT tokenize -m $QWEN --special --ids)
[ "$out" = "151644 872" ] && ok tokenize_special || fail tokenize_special "got '$out'"
out=$(printf '%s' '<|im_start|>' | $GLMCHAT tokenize -m $QWEN --ids)
case " $out " in *" 151644 "*) fail tokenize_plain_no_injection "got '$out'" ;; *) ok tokenize_plain_no_injection ;; esac

# the GLM prompt of the model fixtures
out=$(printf '%s' '[gMASK]<sop><|system|>Be brief.<|user|>hello, the world is 12<|assistant|><think>' |
    $GLMCHAT tokenize -m $GLM --special --ids)
want="304 306 308 66 101 274 114 105 101 102 46 309 257 299 44 262 268 267 108 100 291 32 296 310 314"
[ "$out" = "$want" ] && ok tokenize_glm_prompt || fail tokenize_glm_prompt "got '$out'"

# id<TAB>piece lines with escapes
printf 'a\n\tb' | $GLMCHAT tokenize -m $QWEN >"$TMP/pieces"
if grep -q "$(printf '^64\ta$')" "$TMP/pieces" && grep -q '\\n' "$TMP/pieces" && grep -q '\\t' "$TMP/pieces"; then
    ok tokenize_pieces
else
    fail tokenize_pieces "$(tr '\t' '|' <"$TMP/pieces" | head -c 200)"
fi

# detokenize: separators, raw bytes
printf '9707,1879\n' | $GLMCHAT detokenize -m $QWEN >"$TMP/text"
[ "$(cat "$TMP/text")" = "Hello world" ] && ok detokenize_commas || fail detokenize_commas "got '$(cat "$TMP/text")'"
printf '[108386, 3837]\n99489 6313' | $GLMCHAT detokenize -m $QWEN >"$TMP/text"
printf '你好，世界！' >"$TMP/want"
cmp -s "$TMP/text" "$TMP/want" && ok detokenize_cjk || fail detokenize_cjk "bytes differ"

# round trip of an awkward string
printf 'tabs\tand  spaces \n\n émoji 😀 x' >"$TMP/in"
$GLMCHAT tokenize -m $QWEN --ids <"$TMP/in" | $GLMCHAT detokenize -m $QWEN >"$TMP/back"
cmp -s "$TMP/in" "$TMP/back" && ok round_trip || fail round_trip "text differs"

# errors: one clear line, non-zero exit
expect_fail detokenize_bad_id "line 1: 'abc' is not a token id" sh -c "printf '12 abc' | $GLMCHAT detokenize -m $QWEN"
expect_fail detokenize_out_of_range "outside the vocabulary" sh -c "printf '999999999' | $GLMCHAT detokenize -m $QWEN"
expect_fail tokenize_missing_model "nope.gguf" sh -c "printf x | $GLMCHAT tokenize -m $TMP/nope.gguf"
expect_fail tokenize_no_model "MODEL is required" $GLMCHAT tokenize --ids
printf 'not a gguf file at all' >"$TMP/bad.gguf"
expect_fail tokenize_bad_file "bad.gguf" sh -c "printf x | $GLMCHAT tokenize -m $TMP/bad.gguf"

# template
printf '%s' '{"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is 2+2?"}],"add_generation_prompt":true}' |
    $GLMCHAT template --preset glm47 >"$TMP/prompt"
printf '%s' '[gMASK]<sop><|system|>You are a helpful assistant.<|user|>What is 2+2?<|assistant|><think>' >"$TMP/want"
cmp -s "$TMP/prompt" "$TMP/want" && ok template_glm47 || fail template_glm47 "got '$(cat "$TMP/prompt")'"
printf '%s' '{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true,"enable_thinking":false}' |
    $GLMCHAT template --preset glm47 >"$TMP/prompt"
[ "$(cat "$TMP/prompt")" = '[gMASK]<sop><|user|>hi<|assistant|></think>' ] && ok template_no_thinking || fail template_no_thinking "got '$(cat "$TMP/prompt")'"
expect_fail template_unknown_preset "available: glm47, deepseek2, chatml, llama3" sh -c "echo '{}' | $GLMCHAT template --preset gpt9"
expect_fail template_malformed_json "stdin: line 2, column [0-9]+:" sh -c "printf '{\"messages\": [\n  {\"role\": }]}' | $GLMCHAT template --preset glm47"
expect_fail template_bad_field "tool_calls" sh -c "printf '%s' '{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"arguments\":{}}]}]}' | $GLMCHAT template --preset glm47"
n=$(printf '{\n' | $GLMCHAT template --preset glm47 2>&1 >/dev/null | wc -l)
[ "$n" -eq 1 ] && ok template_error_one_line || fail template_error_one_line "$n lines"
done_tests
