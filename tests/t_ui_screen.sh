#!/bin/sh
# t_ui_screen.sh: what the chat shows, in tmux: a terminal that cannot
# place the cursor (TERM=dumb) gets a line mode that sends no escape
# sequence (16.6, 17.11); a failed command leaves no stale status; notes
# stay below the answers they followed when a system prompt is set; the
# status line keeps the way to quit whole at 110 columns, the input line
# shows U+202E inert (17.11).
# Screens are kept in build/artifacts/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_screen "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
. tests/ui_lib.sh

# line_of PATTERN: the number of the first screen line matching PATTERN (0: none).
line_of() { grep -nE -- "$1" "$TMP/screen" | head -n 1 | cut -d: -f1 | grep . || echo 0; }

# ---- TERM=dumb: lines in, answers out, not one escape sequence.  The app
# waits for $TMP/go, so tmux's pipe-pane sees every byte it writes.
rm -f "$TMP/go" "$TMP/raw"
tm_start 100 30 sh -c 'until [ -e "$0" ]; do sleep 0.05; done; shift; exec "$@"' "$TMP/go" x \
    env TERM=dumb XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" XDG_STATE_HOME="$XDG_STATE_HOME" \
    "$APP" --backend "$BACKEND" $MODEL_ARGS --template chatml --temp 2 --seed 11 --ignore-eos -n 16
tm pipe-pane -t ui "cat >>'$TMP/raw'"
touch "$TMP/go"
if tm_wait $T "TERM=dumb.*line mode|cannot place the cursor: line mode" && tm_wait $T '^> ?$'; then
    tm_line "hello there"
    if tm_wait $T '^\(16 tokens, [0-9.]+ tok/s\)' && tm_wait 10 '^> ?$'; then ok ui_dumb_line_mode; else fail ui_dumb_line_mode "$(tm_screen | tail -6)"; fi
    # A line ending in '\' goes on with the next: one message of two lines.
    tm_line 'first line\'
    tm_line 'second line'
    f=$(ls "$CONV_DIR"/*.json 2>/dev/null | tail -n 1)
    end=$(($(date +%s) + T))
    until [ -n "$f" ] && [ "$("$BUILD/tools/json_get" "$f" messages.3.role 2>/dev/null)" = assistant ]; do
        [ "$(date +%s)" -ge $end ] && break
        sleep 0.1
        f=$(ls "$CONV_DIR"/*.json 2>/dev/null | tail -n 1)
    done
    if [ "$("$BUILD/tools/json_get" "$f" messages.2.content)" = "$(printf 'first line\nsecond line')" ]; then
        ok ui_dumb_continued_line
    else
        fail ui_dumb_continued_line "$("$BUILD/tools/json_get" "$f" messages.2.content 2>&1 | head -c 200)"
    fi
    tm_line "/quit"
    tm_wait $T "^EXITED 0"
else
    fail ui_dumb_line_mode "$(tm_screen | grep -v '^$' | tail -4)"
fi
tm_snap dumb
tm_wait 5 "icanon echo" >/dev/null
esc=$(printf '\033')
if [ ! -s "$TMP/raw" ] || ! grep -q "Assistant:" "$TMP/raw"; then
    fail ui_dumb_no_escapes "nothing captured"
elif grep -q "$esc" "$TMP/raw"; then
    fail ui_dumb_no_escapes "escape sequences sent: $(grep -o "$esc.\{0,6\}" "$TMP/raw" | head -3 | od -c | head -2)"
else
    ok ui_dumb_no_escapes
fi

# ---- a failed command does not leave the last command's message standing
start_app
app_ready
tm_line "/theme mono"
tm_wait 10 "^ Theme: mono"
tm_line "/load $TMP/no-such-file.json"
if tm_wait 10 "^/load: " && tail -n 1 "$TMP/screen" | grep -q "^ Ready"; then
    ok ui_status_not_stale
else
    fail ui_status_not_stale "$(tail -n 1 "$TMP/screen")"
fi
tm_line "/theme default"

# ---- /system in the middle: notes stay where they were written
answered "q1"
tm_line "/template"
tm_wait 10 "^Template: chatml"
tm_line "/system Be brief"
tm_wait 10 "System prompt set"
tm_line "/think"
tm_wait 10 "^usage: /think"
tm_snap system-notes
a=$(grep -nE "^Assistant " "$TMP/screen" | tail -n 1 | cut -d: -f1)
t=$(line_of "^Template: chatml")
u=$(line_of "^usage: /think")
s=$(line_of "^System ")
if [ -n "$a" ] && [ "$s" -gt 0 ] && [ "$s" -lt "$a" ] && [ "$a" -lt "$t" ] && [ "$t" -lt "$u" ]; then
    ok ui_notes_after_system
else
    fail ui_notes_after_system "lines: system $s, answer $a, /template's note $t, /think's note $u"
fi
quit_app

# ---- the input line shows U+202E (right-to-left override) as the chat view
# does, inert (17.11): it was drawn raw, reversing what followed it
start_app
app_ready
tm_keys -l "$(printf 'abc\342\200\256def')"
if tm_wait 10 "^> abc<U\+202E>def *(│|$)"; then
    tm_keys Enter
    if tm_wait $T "^abc<U\+202E>def *(│|$)"; then ok ui_input_inert_bidi; else fail ui_input_inert_bidi "chat view: $(tm_screen | grep abc)"; fi
else
    fail ui_input_inert_bidi "input line: $(input_line)"
fi
tm_gone $T "Answering"
quit_app

# ---- 110 columns: a long message keeps its way out whole (17.11: "...or qui")
printf 'x' >"$TMP/notadir"
start_app_size 110 30 -C "$TMP/notadir/c.json"
app_ready
# the way out of a failed save (a new file in the conversations folder) fails too
convs=$XDG_DATA_HOME/glmchat/conversations
rm -rf "$convs" && printf 'x' >"$convs"
answered "hello"
tm_wait 10 "Autosave failed" >/dev/null
tm_line "/quit"
if tm_wait 10 "Quit again to leave" && tail -n 1 "$TMP/screen" |
   grep -q "^ Quit again to leave without saving, or /save FILE (the conversation is NOT saved: see above) .*\^C\^C quit *$"; then
    ok ui_status_quit_hint_whole
else
    fail ui_status_quit_hint_whole "$(tail -n 1 "$TMP/screen")"
fi
tm_snap status-110
tm_line "/quit"
if tm_wait $T "^EXITED 1" && grep -q "could not be saved" "$TMP/screen"; then ok ui_quit_unsaved_twice; else fail ui_quit_unsaved_twice "$(tm_screen | grep -v '^$' | tail -3)"; fi
rm -f "$convs" && mkdir -p "$convs"
tm_stop

# ---- an answer whose tokens spell no text (a random model on a vocabulary
# of mostly empty pieces) is still a turn: its header shows, it is saved
"$GLMCHAT" mkmodel --preset demo --type Q8_0 --vocab 60000 --quiet -o "$TMP/empty.gguf" >/dev/null ||
    fail ui_empty_answer "mkmodel failed"
tm_start 120 40 env XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" \
    XDG_STATE_HOME="$XDG_STATE_HOME" "$APP" --backend cpu -m "$TMP/empty.gguf" --template chatml \
    --temp 2 --seed 11 --ignore-eos -n 3
app_ready
if answered "hello" && tm_wait $T "^ Ready" && [ "$(done_answers)" -eq 1 ] &&
   grep -q '"role": *"assistant"' "$CONV_DIR"/*.json; then
    ok ui_empty_answer
else
    fail ui_empty_answer "$(tm_screen | grep -v '^ *$' | tail -5)"
fi
quit_app
tm_stop
done_tests
