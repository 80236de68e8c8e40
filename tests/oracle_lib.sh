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
