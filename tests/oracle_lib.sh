# oracle_lib.sh: the fixture criteria every model file of tests/data is held
# to, by t_cli_run.sh (the CPU backend) and t_vk_fixtures.sh (Vulkan) alike.
# Sourced after tests/lib.sh; needs CMP (cmp_logits) and JG (json_get).
#   logits: against the float64 reference of that very file -- F32 within
#     1e-4 rel-L2 and every argmax; quantized within max(1.5 x llama.cpp's
#     own rel-L2, 1e-3) with at least llama.cpp's argmax agreement
#   greedy continuation: F32 identical to llama.cpp's; Q8_0's first 8 tokens
#     equal to an oracle's (llama.cpp's or the exact reference's); the 4-bit
#     files equal to the exact reference's where no near tie (a top-2
#     margin below 1e-3) can flip a token, else the right number of ids.

# oracle_logits NAME DIR VARIANT N_TOK VOCAB BIN: BIN's logits of the prompt
oracle_logits() {
    _name=$1 _dir=$2 _v=$3 _ntok=$4 _vocab=$5 _bin=$6
    if [ "$_v" = f32 ]; then
        _tol=1e-4 _agree=$_ntok
    else
        _lrel=$($JG "$_dir/logits.ref_f64.$_v.json" llamacpp_same_file_vs_this.rel_l2)
        _agree=$($JG "$_dir/logits.ref_f64.$_v.json" llamacpp_same_file_vs_this.top1_agree)
        _tol=$(awk -v r="$_lrel" 'BEGIN { t = 1.5 * r; if (t < 1e-3) t = 1e-3; printf "%.6g", t }')
    fi
    if _out=$($CMP --vocab "$_vocab" --max-rel-l2 "$_tol" --min-argmax "$_agree" "$_bin" \
              "$_dir/logits.ref_f64.$_v.bin"); then
        ok "$_name vs f64 reference ($_out)"
    else
        fail "$_name vs f64 reference" "$_out"
    fi
}

_first8() { echo "$1" | tr ' ' '\n' | head -n 8 | tr '\n' ' '; }

# oracle_generate NAME DIR VARIANT GOT ERRFILE: GOT, the greedy ids after
# the prompt (as many as the fixture's llama.cpp continuation), ERRFILE the
# run's stderr (quoted in a failure)
oracle_generate() {
    _name=$1 _dir=$2 _v=$3 _got=$4 _err=$5
    _want=$($JG "$_dir/fixture.json" "greedy.$_v")
    _ref=$($JG "$_dir/logits.ref_f64.$_v.json" greedy_continuation 2>/dev/null)
    case $_v in
    f32)
        [ "$_got" = "$_want" ] && ok "$_name = llama.cpp" ||
            fail "$_name" "got '$_got', llama.cpp '$_want' $(head -c 200 "$_err")" ;;
    q8_0)
        if [ "$(_first8 "$_got")" = "$(_first8 "$_want")" ] || [ "$(_first8 "$_got")" = "$(_first8 "$_ref")" ]; then
            ok "$_name: first 8 = an oracle's"
        else
            fail "$_name" "got '$_got', llama.cpp '$_want', reference '$_ref'"
        fi ;;
    *)
        _margin=$($JG "$_dir/logits.ref_f64.$_v.json" greedy_min_top2_margin 2>/dev/null || echo 0)
        _n=$(echo "$_want" | wc -w)
        if awk -v m="$_margin" 'BEGIN { exit !(m >= 1e-3) }'; then
            [ "$_got" = "$_ref" ] && ok "$_name = exact reference" ||
                fail "$_name" "got '$_got', reference '$_ref' $(head -c 200 "$_err")"
        else
            [ "$(echo "$_got" | wc -w)" -eq "$_n" ] && ok "$_name prints $_n ids (near tie: $_margin)" ||
                fail "$_name" "got '$_got' $(head -c 200 "$_err")"
        fi ;;
    esac
}

# oracle_same_file NAME MODEL TOKENS VOCAB N_TOK: a file with no llama.cpp
# figures (made from a fixture's F32 file by our quantizer) against the CPU
# reference forward pass (--backend ref) on that very file -- the same exactly dequantized
# weights, summed in f32 (the Vulkan side on its float decode path, --tune idot=0): the decode graph (-b 1) and the prompt graph with
# fp32 mat-mats (--tune coopmat=0) within F32's 1e-4 rel-L2 and every
# argmax; the default prompt graph (tensor cores where the device has them:
# fp16 operands, each product within 2^-10 of itself) within 1e-2; greedy
# ids equal to the reference's (its own prompt's top-2 margins stand far
# above either bound on the fixtures).  Needs GLMCHAT, CMP, TMP.
oracle_same_file() {
    _name=$1 _m=$2 _tok=$3 _vocab=$4 _ntok=$5
    if ! $GLMCHAT logits -m "$_m" --backend ref --tokens "$_tok" -o "$TMP/same.cpu.bin" 2>"$TMP/err"; then
        fail "$_name: cpu reference" "$(head -c 300 "$TMP/err")"
        return
    fi
    for _case in "decode graph|-b 1|1e-4" "prompt graph, fp32 mat-mats|-b 64 --tune coopmat=0|1e-4" \
        "prompt graph|-b 64|1e-2"; do
        _what=${_case%%|*} _rest=${_case#*|}
        _opts=${_rest%%|*} _tol=${_rest#*|}
        # shellcheck disable=SC2086
        if $GLMCHAT logits -m "$_m" --backend vulkan --tune idot=0 --kv-type f32 $_opts --tokens "$_tok" -o "$TMP/same.vk.bin" \
               2>"$TMP/err" &&
            _out=$($CMP --vocab "$_vocab" --max-rel-l2 "$_tol" --min-argmax "$_ntok" "$TMP/same.vk.bin" "$TMP/same.cpu.bin"); then
            ok "$_name: $_what = cpu reference on the same file ($_out)"
        else
            fail "$_name: $_what = cpu reference on the same file" "${_out:-$(head -c 300 "$TMP/err")}"
        fi
    done
    _want=$($GLMCHAT generate -m "$_m" --backend ref --tokens "$_tok" -n 12 --temp 0 --ids 2>"$TMP/err")
    _got=$($GLMCHAT generate -m "$_m" --backend vulkan --tune idot=0 --kv-type f32 --tokens "$_tok" -n 12 --temp 0 --ids \
        2>>"$TMP/err")
    if [ -n "$_want" ] && [ "$_got" = "$_want" ]; then
        ok "$_name: greedy ids = cpu reference's"
    else
        fail "$_name: greedy ids" "got '$_got', cpu '$_want' $(head -c 200 "$TMP/err")"
    fi
}
