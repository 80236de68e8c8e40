#!/bin/sh
# t_files_bad.sh: broken conversation, theme and settings files give one
# clear line and a non-zero exit, and are never overwritten; escape
# sequences inside a conversation are shown inert (chat, replay, export).
. tests/lib.sh

MODEL=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf
BACKEND=${GLMCHAT_TEST_BACKEND:-cpu}
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL
G() { "$GLMCHAT" --backend "$BACKEND" "$@"; }
R() { "$GLMCHAT" replay "$@" --backend "$BACKEND"; }

# ---- conversations
G -m "$MODEL" --temp 0 -n 4 -C "$TMP/good.json" -p "hello" >/dev/null 2>&1
[ -s "$TMP/good.json" ] || { fail conv_setup "no conversation was written"; done_tests; }
size=$(wc -c <"$TMP/good.json")
head -c $((size / 2)) "$TMP/good.json" >"$TMP/truncated.json"
sed 's/"version": 1/"version": 7/' "$TMP/good.json" >"$TMP/newer.json"
printf 'this is not JSON\n' >"$TMP/garbage.json"
: >"$TMP/empty.json"
printf '{"messages": "hello"}' >"$TMP/types.json"
printf '{"messages": [{"role": "wizard", "content": "hi"}]}' >"$TMP/role.json"
printf '\211PNG\r\n\032\n\000\000\000\rIHDR' >"$TMP/binary.json"
printf '[1, 2, 3]' >"$TMP/array.json"
# A turn's "message": null once wrote before the messages array (heap
# corruption, issue 17): every turn field is checked.
printf '{"messages":[{"role":"user","content":"hi"}],"turns":[{"message":null}]}' >"$TMP/turnnull.json"
printf '{"messages":[],"turns":[{"message":null}]}' >"$TMP/turnnull0.json"
printf '{"messages":[{"role":"user","content":"hi"}],"turns":[{"message":0,"tokens":-1}]}' >"$TMP/turntokens.json"

check_conv() { # NAME FILE PATTERN
    cp "$2" "$TMP/orig"
    expect_fail "conv_${1}_chat" "^glmchat: $2: .*$3" G -m "$MODEL" -C "$2" -p "hi"
    cmp -s "$2" "$TMP/orig" || fail "conv_${1}_kept" "the -p run changed the file"
    expect_fail "conv_${1}_replay" "^glmchat: $2: .*$3" R "$2" -m "$MODEL"
    if cmp -s "$2" "$TMP/orig" && [ "$(wc -l <"$TMP/err")" -eq 1 ]; then ok "conv_${1}_kept"
    else fail "conv_${1}_kept" "changed, or the error is not one line"; fi
}
check_conv truncated "$TMP/truncated.json" "not valid JSON: .*line [0-9]+, column [0-9]+"
check_conv newer "$TMP/newer.json" "version 7 is newer than this glmchat reads \(1\)"
check_conv garbage "$TMP/garbage.json" "not valid JSON"
check_conv empty "$TMP/empty.json" "empty file"
check_conv types "$TMP/types.json" "messages: expected an array"
check_conv role "$TMP/role.json" "unknown role 'wizard'"
check_conv binary "$TMP/binary.json" "not valid JSON"
check_conv array "$TMP/array.json" "top level"
check_conv turn_null "$TMP/turnnull.json" "turns\[0\]\.message: expected the index of a message"
check_conv turn_null0 "$TMP/turnnull0.json" "turns\[0\]\.message: expected the index of a message"
check_conv turn_tokens "$TMP/turntokens.json" "turns\[0\]\.tokens: value out of range"
# A broken file's bytes quoted in the error are shown inert too.
printf '{"messages": [\033[2J]}' >"$TMP/rawesc.json"
check_conv rawesc "$TMP/rawesc.json" "invalid token near '\^\['"
if grep -q "$(printf '\033')" "$TMP/err"; then fail conv_error_inert "a raw escape byte in the error"; else ok conv_error_inert; fi
expect_fail conv_missing_replay "^glmchat: $TMP/none.json: No such file" R "$TMP/none.json" -m "$MODEL"
expect_fail conv_directory "^glmchat: $TMP: .*(directory|not a regular file)" G -m "$MODEL" -C "$TMP" -p "hi"

# ---- not regular files: a FIFO (no writer) once blocked the open forever,
# /dev/zero behind a settings file looped forever.  timeout(1) turns a hang
# into a failure (status 124) instead of a stuck suite.
mkfifo "$TMP/fifo.json" "$TMP/fifo.theme"
expect_fail fifo_conv_chat "^glmchat: $TMP/fifo.json: not a regular file \(a FIFO\)" timeout 20 "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" -C "$TMP/fifo.json" -p hi
expect_fail fifo_conv_replay "^glmchat: $TMP/fifo.json: not a regular file \(a FIFO\)" timeout 20 "$GLMCHAT" replay "$TMP/fifo.json" -m "$MODEL" --backend "$BACKEND"
expect_fail fifo_theme "^glmchat: $TMP/fifo.theme: not a regular file \(a FIFO\)" timeout 20 "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" --theme "$TMP/fifo.theme"
expect_fail model_directory "^glmchat: $TMP: .*is a directory" G -m "$TMP" -p hi

# ---- themes: FILE:LINE and the problem; a good file passes the check
# (and the chat then stops for want of a terminal).
mkdir -p "$TMP/th"
printf 'normal = default default\nusr = red default\n' >"$TMP/th/element.theme"
printf '# colours\nnormal = pruple default\n' >"$TMP/th/colour.theme"
printf 'normal = red\n' >"$TMP/th/short.theme"
printf 'normal = red blue blink\n' >"$TMP/th/attr.theme"
printf 'normal default default\n' >"$TMP/th/noeq.theme"
printf 'user = red blue\n' >"$TMP/th/nonormal.theme"
printf '\033]0;pwned\007 = red blue\n' >"$TMP/th/escape.theme"
head -c 70000 /dev/zero | tr '\0' '#' >"$TMP/th/huge.theme"
expect_fail theme_element "^glmchat: $TMP/th/element.theme:2: unknown element 'usr'" G -m "$MODEL" --theme "$TMP/th/element.theme"
expect_fail theme_colour "^glmchat: $TMP/th/colour.theme:2: normal: unknown colour 'pruple'" G -m "$MODEL" --theme "$TMP/th/colour.theme"
expect_fail theme_short "^glmchat: $TMP/th/short.theme:1: normal: expected a foreground and a background" G -m "$MODEL" --theme "$TMP/th/short.theme"
expect_fail theme_attr "^glmchat: $TMP/th/attr.theme:1: normal: unknown attribute 'blink'" G -m "$MODEL" --theme "$TMP/th/attr.theme"
expect_fail theme_noeq "^glmchat: $TMP/th/noeq.theme:1: expected 'ELEMENT = " G -m "$MODEL" --theme "$TMP/th/noeq.theme"
expect_fail theme_nonormal "no 'normal' element" G -m "$MODEL" --theme "$TMP/th/nonormal.theme"
expect_fail theme_huge "too large for a theme file" G -m "$MODEL" --theme "$TMP/th/huge.theme"
expect_fail theme_name "no theme named 'nosuch' \(available: .*mono" G -m "$MODEL" --theme nosuch
expect_fail theme_escape "escape.theme:1: unknown element" G -m "$MODEL" --theme "$TMP/th/escape.theme"
if grep -q "$(printf '\033')" "$TMP/err"; then fail theme_escape_inert "a raw escape byte in the error"; else ok theme_escape_inert; fi
# Exactly 64 KiB is within the limit (it was refused as too large).
{ echo 'normal = default default'; awk 'BEGIN { for (i = 0; i < 1039; i++) printf "# %060d\n", i; printf "# %051d\n", 0 }'; } >"$TMP/th/max.theme"
[ "$(wc -c <"$TMP/th/max.theme")" -eq 65536 ] || fail theme_64k_setup "the file is not 65536 bytes"
expect_fail theme_64k "needs a terminal" G -m "$MODEL" --theme "$TMP/th/max.theme"
printf 'normal = default default\nuser = red\000 default\n' >"$TMP/th/nul.theme"
expect_fail theme_nul "^glmchat: $TMP/th/nul.theme:2: NUL byte" G -m "$MODEL" --theme "$TMP/th/nul.theme"
for t in default light high-contrast mono; do
    expect_fail "theme_$t" "needs a terminal" G -m "$MODEL" --theme "$t"
done

# ---- settings
mkdir -p "$XDG_CONFIG_HOME/glmchat"
S="$XDG_CONFIG_HOME/glmchat/settings"
printf 'temp = 0.5\ntop-k = many\n' >"$S"
expect_fail settings_value "^glmchat: $S:2: top-k: 'many' is not an integer" G -m "$MODEL" -p hi
printf 'colour = blue\n' >"$S"
expect_fail settings_key "^glmchat: $S:1: unknown setting 'colour'" G -m "$MODEL" -p hi
printf 'theme = nosuch\n' >"$S"
expect_fail settings_theme "no theme named 'nosuch'" G -m "$MODEL"
# A NUL inside a line once cut the line there silently ("temp = 0.5" used).
printf 'temp = 0.5\000 garbage\n' >"$S"
expect_fail settings_nul "^glmchat: $S:1: NUL byte in a settings file" G -m "$MODEL" -p hi
rm "$S"
mkfifo "$S"
expect_fail settings_fifo "^glmchat: $S: not a regular file \(a FIFO\)" timeout 20 "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" -p hi
rm "$S"
ln -s /dev/zero "$S"
expect_fail settings_dev_zero "^glmchat: $S: not a regular file \(a device\)" timeout 20 "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" -p hi
rm "$S"
head -c 1100000 /dev/zero | tr '\0' '#' >"$S"
expect_fail settings_huge "^glmchat: $S: too large for a settings file \(1 MiB at most\)" G -m "$MODEL" -p hi
rm "$S"

# ---- escape sequences in a conversation are shown, not obeyed
E="$TMP/escapes.json"
printf '%s' '{"messages": [
 {"role": "user", "content": "title \u001b]0;pwned\u0007 end"},
 {"role": "assistant", "content": "clear \u001b[2J and bell \u0007 and csi \u009b31m red", "reasoning_content": "think \u001b[1;1H here"}]}' >"$E"
R "$E" -m "$MODEL" --temp 0 -n 2 >"$TMP/replay.txt" 2>/dev/null
script -qec "$GLMCHAT replay --backend $BACKEND $E -m $MODEL --temp 0 -n 2 2>/dev/null" /dev/null </dev/null >"$TMP/replay_tty.txt"
if grep -q "$(printf '\033')" "$TMP/replay_tty.txt"; then fail escapes_replay_tty "raw ESC reached the terminal"
elif ! grep -qF 'title ^[]0;pwned^G end' "$TMP/replay_tty.txt" || ! grep -qF 'clear ^[[2J' "$TMP/replay_tty.txt" ||
     ! grep -qF 'csi <U+009B>31m' "$TMP/replay_tty.txt"; then fail escapes_replay_tty "inert forms missing"
else ok escapes_replay_tty
fi
if grep -q "$(printf '\033')" "$TMP/replay.txt"; then ok escapes_replay_pipe; else fail escapes_replay_pipe "a pipe should get the bytes as they are"; fi

# ---- escapes in metadata: the file name, model.name/model.path of the file,
# the GGUF's general.name (an OSC 52 clipboard write, an OSC 8 link) reached
# the terminal raw through replay's '#' lines and `info`.
ESC=$(printf '\033')
EV="$TMP/evil$(printf '\033]0;t\007').json"
printf '%s' '{"model": {"name": "n \u001b]52;c;aGk=\u0007 x", "path": "p \u001b]8;;http://x\u001b\\ y\nforged"},
 "messages": [{"role": "user", "content": "hi"}]}' >"$EV"
perl -0777 -pe 's/tiny GLM 4\.7 Flash random/\e]52;c;aGk=\a\e]8;;x\e\\!!!!!/' "$MODEL" >"$TMP/evil.gguf"
script -qec "$GLMCHAT replay --backend $BACKEND '$EV' -m $TMP/evil.gguf --temp 0 -n 2 2>/dev/null" /dev/null </dev/null >"$TMP/meta_tty.txt"
R "$EV" -m "$TMP/evil.gguf" --temp 0 -n 2 >"$TMP/meta_pipe.txt" 2>/dev/null
if grep -q "$ESC" "$TMP/meta_tty.txt"; then fail meta_replay_tty "raw ESC reached the terminal: $(grep -a "$ESC" "$TMP/meta_tty.txt" | head -c 200)"
elif ! grep -qF '# recorded with: n ^[]52;c;aGk=^G x, p ^[]8;;http://x^[\ y^Jforged' "$TMP/meta_tty.txt" ||
     ! grep -qF '# model: ^[]52;c;aGk=^G^[]8;;x^[\!!!!!' "$TMP/meta_tty.txt" ||
     ! grep -qF 'evil^[]0;t^G.json' "$TMP/meta_tty.txt"; then fail meta_replay_tty "inert forms missing: $(head -c 400 "$TMP/meta_tty.txt")"
else ok meta_replay_tty
fi
# '#' lines stay single lines even into a pipe: none can forge a transcript line.
if grep -q "^forged" "$TMP/meta_pipe.txt" || grep '^#' "$TMP/meta_pipe.txt" | grep -q "$ESC"; then fail meta_replay_pipe "$(head -c 300 "$TMP/meta_pipe.txt")"
else ok meta_replay_pipe; fi
script -qec "$GLMCHAT info -m $TMP/evil.gguf" /dev/null </dev/null >"$TMP/info_tty.txt"
if grep -q "$ESC" "$TMP/info_tty.txt" || ! grep -qF 'name          ^[]52;c;aGk=^G' "$TMP/info_tty.txt"; then
    fail meta_info "$(grep -a name "$TMP/info_tty.txt" | head -c 200)"
else ok meta_info; fi

if command -v tmux >/dev/null 2>&1; then
    . tests/tmux_lib.sh
    trap 'tm_stop; rm -rf "$TMP"' EXIT
    cp "$E" "$TMP/orig"
    APP="$PWD/$GLMCHAT"
    [ "${GLMCHAT#/}" != "$GLMCHAT" ] && APP="$GLMCHAT"
    tm_start 200 40 env XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" \
        XDG_STATE_HOME="$XDG_STATE_HOME" "$APP" --backend "$BACKEND" -m "$MODEL" --temp 0 -n 2
    tm_wait 60 '^ Ready'
    tm_line "/load $E"
    tm_keys F3
    if tm_wait 30 'title \^\[\]0;pwned\^G end' && tm_wait 5 'clear \^\[\[2J and bell \^G' &&
       tm_wait 5 'think \^\[\[1;1H here' && tm_wait 5 'csi <U\+009B>31m' && tm_wait 5 "Loaded 2 messages" &&
       [ "$(tm display -p -t ui '#{pane_title}')" != pwned ]; then
        ok escapes_ui_inert
    else
        fail escapes_ui_inert "$(tm_screen | grep -v '^ *$' | head -12)"
    fi
    tm_snap escapes
    tm_line "/export $TMP/escapes.md"
    tm_wait 10 "Exported 2 messages"
    if [ -s "$TMP/escapes.md" ] && ! grep -q "$(printf '\033')" "$TMP/escapes.md" && grep -qF '^[]0;pwned^G' "$TMP/escapes.md"; then
        ok escapes_export
    else
        fail escapes_export "raw escapes or nothing in the Markdown"
    fi
    # The export holds the conversation: private like it (it was 0644).
    mode=$(stat -c %a "$TMP/escapes.md" 2>/dev/null)
    if [ "$mode" = 600 ]; then ok export_private; else fail export_private "mode $mode"; fi
    # /load of a broken file: an error in the chat; the current one stays.
    tm_line "/load $TMP/truncated.json"
    if tm_wait 10 "/load: $TMP/truncated.json: not valid JSON" && grep -q "title" "$TMP/screen"; then ok ui_load_broken
    else fail ui_load_broken "$(tm_screen | grep -v '^ *$' | tail -5)"; fi
    # A FIFO once blocked /load for good (and the UI ignored Ctrl-C then).
    tm_line "/load $TMP/fifo.json"
    if tm_wait 10 "/load: $TMP/fifo.json: not a regular file \(a FIFO\)" && grep -q "title" "$TMP/screen"; then ok ui_load_fifo
    else fail ui_load_fifo "$(tm_screen | grep -v '^ *$' | tail -5)"; fi
    # /replay of an empty user message: memcpy from NULL (UBSan abort in
    # the sanitizer build, issue 17).
    printf '%s' '{"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": "was empty"}]}' >"$TMP/emptyturn.json"
    tm_line "/replay $TMP/emptyturn.json"
    if tm_wait 30 "Replay: turn 1 of 1" && tm_wait 60 "new · [0-9.]+ tok/s" && ! grep -q "^EXITED" "$TMP/screen"; then ok ui_replay_empty_message
    else fail ui_replay_empty_message "$(tm_screen | grep -v '^ *$' | tail -5)"; fi
    tm_line "/theme $TMP/th/colour.theme"
    if tm_wait 10 "/theme: $TMP/th/colour.theme:2: normal: unknown colour 'pruple'"; then ok ui_theme_broken
    else fail ui_theme_broken "$(tm_screen | grep -v '^ *$' | tail -5)"; fi
    tm_line "/save $TMP/garbage.json"
    if tm_wait 10 "not a conversation glmchat can read; not overwriting it" && cmp -s "$TMP/garbage.json" /dev/stdin <<EOG
this is not JSON
EOG
    then ok ui_save_refuses; else fail ui_save_refuses "$(tm_screen | grep -v '^ *$' | tail -4)"; fi
    tm_line "/quit"
    tm_wait 30 "^EXITED 0"
    if cmp -s "$E" "$TMP/orig"; then ok escapes_file_kept; else fail escapes_file_kept "the loaded file changed"; fi
    tm_stop
else
    fail escapes_ui_inert "tmux is not installed"
fi
done_tests
