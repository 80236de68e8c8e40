#!/bin/sh
# t_file_escapes.sh: strings from files never drive the terminal (issue
# 28.3).  A crafted GGUF holds escape sequences in its metadata (an OSC 52
# clipboard write in deepseek2.rope.scaling.type, a title change in
# general.name, a C1 CSI -- U+009B, and a raw 0x9b byte -- in the
# tokenizer's keys and a vocabulary entry, an escape in a tensor name);
# conversation and settings files hold them in their fields.  Each command
# runs on a pseudo-terminal (`script` from util-linux), and what the
# terminal got must hold no ESC, BEL, C1 control (encoded or raw), only the
# inert forms (^[, ^G, <U+009B>, U+FFFD).  `detokenize` into a pipe keeps
# the exact bytes: that is its job.
. tests/lib.sh

MODEL=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf
EDIT="$BUILD/tools/gguf_edit"
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL

ESC=$(printf '\033')
BEL=$(printf '\007')
C1=$(printf '\302\233')  # U+009B (CSI), encoded
RAW9B=$(printf '\233')   # a raw 0x9b byte (invalid UTF-8)
OSC52="${ESC}]52;c;aGk=${BEL}"

# on_tty NAME COMMAND: runs COMMAND (a shell command line) on a
# pseudo-terminal; what the terminal got goes to $TMP/NAME.tty, the status
# to $TMP/NAME.rc.
on_tty() {
    script -qec "$2" /dev/null </dev/null >"$TMP/$1.tty" 2>&1
    echo $? >"$TMP/$1.rc"
}

# inert NAME WANT: the terminal got no ESC, BEL or C1 control, and WANT
# (a fixed string: the inert form of what was planted) shows.
inert() {
    f="$TMP/$1.tty"
    if grep -q 'Sanitizer\|runtime error' "$f"; then fail "$1" "sanitizer: $(head -c 300 "$f")"
    elif LC_ALL=C grep -q "$ESC\|$BEL\|$RAW9B" "$f" || LC_ALL=C grep -q "$(printf '\302')[$(printf '\200')-$(printf '\237')]" "$f"; then
        fail "$1" "control bytes reached the terminal: $(od -c "$f" | head -n 6 | tr '\n' ' ')"
    elif ! grep -qF -- "$2" "$f"; then fail "$1" "'$2' is not in what the terminal got: $(head -c 300 "$f")"
    else ok "$1"
    fi
}

# ---- the crafted models
"$EDIT" "$MODEL" "$TMP/rope.gguf" --str deepseek2.rope.scaling.type "$OSC52" || fail crafting "rope.gguf"
"$EDIT" "$MODEL" "$TMP/name.gguf" --str general.name "${ESC}]0;owned${BEL} x${C1}31m y${RAW9B}z" \
    --tensor "extra${ESC}[41mtensor" || fail crafting "name.gguf"
"$EDIT" "$MODEL" "$TMP/pre.gguf" --str tokenizer.ggml.pre "$OSC52" || fail crafting "pre.gguf"
"$EDIT" "$MODEL" "$TMP/tmodel.gguf" --str tokenizer.ggml.model "x${C1}2J" || fail crafting "tmodel.gguf"
# entry 309 (<|user|>, a special token: its piece is its text)
"$EDIT" "$MODEL" "$TMP/vocab.gguf" --token 309 "${OSC52}${C1}31mRED" || fail crafting "vocab.gguf"

# ---- info: an error quoting a key, the name, a tensor name
on_tty info_rope_type "$GLMCHAT info -m $TMP/rope.gguf"
inert info_rope_type "rope.scaling.type '^[]52;c;aGk=^G' is not supported"
if [ "$(cat "$TMP/info_rope_type.rc")" = 1 ]; then ok info_rope_type_status; else fail info_rope_type_status "exit $(cat "$TMP/info_rope_type.rc")"; fi
on_tty info_name "$GLMCHAT info -m $TMP/name.gguf"
cp "$TMP/info_name.tty" "$TMP/info_tensor_name.tty"
inert info_name "^[]0;owned^G x<U+009B>31m y"
inert info_tensor_name "extra^[[41mtensor"

# ---- bench: general.name on its first line
on_tty bench_name "$GLMCHAT bench -m $TMP/name.gguf --backend cpu -p 4 -n 2 -r 1"
inert bench_name "(^[]0;owned^G x<U+009B>31m y"

# ---- the text tools: the tokenizer's keys, a vocabulary entry
on_tty tokenize_pre "printf hi | $GLMCHAT tokenize -m $TMP/pre.gguf"
inert tokenize_pre "^[]52;c;aGk=^G"
on_tty tokenize_model "printf hi | $GLMCHAT tokenize -m $TMP/tmodel.gguf"
inert tokenize_model "x<U+009B>2J"
on_tty detokenize_pre "echo 5 | $GLMCHAT detokenize -m $TMP/pre.gguf"
inert detokenize_pre "^[]52;c;aGk=^G"
on_tty generate_rope "$GLMCHAT generate -m $TMP/rope.gguf --tokens 1,2 -n 1 --backend cpu"
inert generate_rope "^[]52;c;aGk=^G"
printf '%s' "${OSC52}${C1}31mRED" >"$TMP/entry"
on_tty tokenize_entry "$GLMCHAT tokenize -m $TMP/vocab.gguf --special <$TMP/entry"
inert tokenize_entry '309	\x1b]52;c;aGk=\x07\xc2\x9b31mRED'
on_tty detokenize_entry "echo 309 | $GLMCHAT detokenize -m $TMP/vocab.gguf"
inert detokenize_entry "^[]52;c;aGk=^G<U+009B>31mRED"
# Into a pipe: the exact bytes.
echo 309 | "$GLMCHAT" detokenize -m "$TMP/vocab.gguf" >"$TMP/entry.out" 2>"$TMP/err"
if cmp -s "$TMP/entry" "$TMP/entry.out"; then ok detokenize_pipe_exact
else fail detokenize_pipe_exact "$(od -c "$TMP/entry.out" | head -n 3 | tr '\n' ' ')"; fi

# ---- -p and replay: errors quoting a model's key, a conversation's field
on_tty oneshot_rope "$GLMCHAT -m $TMP/rope.gguf --backend cpu -p hi"
inert oneshot_rope "^[]52;c;aGk=^G"
printf '{"messages": [{"role": "\\u001b]52;c;aGk=\\u0007", "content": "hi"}]}\n' >"$TMP/role.json"
on_tty conversation_role "$GLMCHAT -m $MODEL --backend cpu -C $TMP/role.json -p hi"
inert conversation_role "^[]52;c;aGk=^G"
on_tty replay_role "$GLMCHAT replay $TMP/role.json -m $MODEL --backend cpu"
inert replay_role "^[]52;c;aGk=^G"

# ---- the settings file: an error quoting a value
mkdir -p "$XDG_CONFIG_HOME/glmchat"
printf 'backend = %s\n' "$OSC52" >"$XDG_CONFIG_HOME/glmchat/settings"
on_tty settings_value "$GLMCHAT -m $MODEL -p hi"
inert settings_value "unknown backend '^[]52;c;aGk=^G'"
rm -f "$XDG_CONFIG_HOME/glmchat/settings"

done_tests
