#!/bin/sh
# t_ui_tmux.sh: the real chat UI in tmux on a small model: start, type, the
# answer streams, the side pane shows kernel rows and tokens/s, Esc stops
# an answer and keeps it, /retry, a resize in the middle of an answer,
# /save /load /replay, unknown-command hints, /edit with a system prompt
# set or removed meanwhile, quitting restores the terminal (also after
# Ctrl-C twice, SIGTERM and a fatal signal).
# Screens are kept in build/artifacts/ui-*/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_tmux "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT

. tests/ui_lib.sh

# ---- start
start_app
if tm_wait $T '^ Ready' && grep -q "Type a message" "$TMP/screen" && grep -q "Kernels" "$TMP/screen"; then
    ok ui_start
else
    fail ui_start "$(tm_screen | tail -5)"
fi
tm_snap start

# ---- a message and its answer
tm_line "Hello glmchat, how are you?"
if tm_wait $T "^You " && tm_wait $T "^Assistant .*16 tokens, [0-9.]+ tok/s" && tm_gone $T "Answering"; then
    ok ui_answer
else
    fail ui_answer "$(tm_screen | head -20)"
fi
tm_snap answer

# ---- the side pane: kernel rows and a non-zero decode rate
if tm_wait $T "kernel +c/t +us/t" && tm_wait $T "decode +([1-9][0-9]*|0\.[0-9]*[1-9])" &&
   grep -qE "│ [a-z][a-z /+_0-9-]* +[0-9]+ +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+ *$" "$TMP/screen"; then
    ok ui_side_pane
else
    fail ui_side_pane "$(tm_screen | cut -c 80- | head -30)"
fi
tm_snap side-pane

# ---- streaming, then Esc stops the answer and keeps what it said
tm_line "/set n-predict 2000"
if answer_running "Tell me a long story"; then
    tm_snap streaming
    tm_keys Escape
    if tm_wait $T "\(stopped\)" && tm_gone $T "Answering" && grep -q "Stopped; the partial answer is kept" "$TMP/screen"; then
        ok ui_esc_stops
    else
        fail ui_esc_stops "$(tm_screen | tail -8)"
    fi
else
    fail ui_esc_stops "no answer ran long enough to be stopped"
fi
tm_snap stopped

# ---- /retry replaces the last answer
before=$(tm_screen | grep -c "^Assistant ")
tm_line "/set n-predict 16"
tm_line "/retry"
if tm_wait $T "Stopped at n-predict \(16 tokens\)" && [ "$(tm_screen | grep -c '^Assistant ')" -eq "$before" ]; then
    ok ui_retry
else
    fail ui_retry "$before answers before, $(grep -c '^Assistant ' "$TMP/screen") after"
fi
tm_snap retry

# ---- resize in the middle of an answer: narrow (the side pane hides), then wide again
tm_line "/set n-predict 2000"
if answer_running "And another one, please"; then
    tm resize-window -t ui -x 72 -y 22
    # Still answering after the resize, drawn for 72x22: no side pane,
    # nothing wider than the window, the rule and the status line in place.
    tm_wait $T "^─.*─$" >/dev/null
    rows=$(wc -l <"$TMP/screen")
    wide=$(LC_ALL=C.UTF-8 wc -L <"$TMP/screen")
    if [ "$rows" -eq 22 ] && [ "$wide" -le 72 ] && ! grep -q "Kernels" "$TMP/screen" && tail -n 1 "$TMP/screen" | grep -q "Answering"; then
        ok ui_resize_narrow
    else
        fail ui_resize_narrow "$rows rows, $wide columns: $(tail -3 "$TMP/screen")"
    fi
    tm_snap resized-narrow
    tm resize-window -t ui -x 120 -y 40
    if tm_wait $T "Kernels" && [ "$(tm_screen | wc -l)" -eq 40 ]; then ok ui_resize_wide; else fail ui_resize_wide "$(tail -3 "$TMP/screen")"; fi
    tm_keys Escape
    tm_gone $T "Answering"
    tm_snap resized-wide
else
    fail ui_resize_narrow "no answer ran long enough to resize in the middle"
fi
tm_line "/set n-predict 8"

# ---- unknown commands answer with the closest one
tm_line "/sav"
if tm_wait 10 "Unknown command '/sav'. Did you mean /save\?"; then ok ui_hint; else fail ui_hint "$(tm_screen | tail -4)"; fi

# ---- /save, /load, /replay
SAVED="$TMP/saved.json"
tm_line "/save $SAVED"
if tm_wait 10 "Saved [0-9]+ messages to" && n=$("$BUILD/tools/conv_stress" count "$SAVED") && [ "$n" -ge 6 ]; then
    ok ui_save
else
    fail ui_save "$(tm_screen | tail -3)"
fi
tm_line "/clear"
tm_line "/clear"
tm_wait 10 "New conversation"
tm_line "/load $SAVED"
if tm_wait 10 "Loaded $n messages from" && tm_wait 5 "Hello glmchat, how are you"; then ok ui_load; else fail ui_load "$(tm_screen | tail -4)"; fi
tm_snap loaded
tm_line "/replay $SAVED"
if tm_wait $T "Replay: turn 1 of" && tm_wait $T "recorded.* │ new" && tm_wait $T "Replay done: [0-9]+ turns"; then
    ok ui_replay
else
    fail ui_replay "$(tm_screen | tail -6)"
fi
tm_snap replay

# ---- quit: the terminal comes back (cooked mode, main screen)
tm_line "/quit"
# (Loaded and nothing new since: the conversation is in the file it came
# from, and quitting writes no copy of it, issue 28.8.)
if tm_wait $T "^EXITED 0" && tm_wait 5 "icanon echo" && [ "$(tm display -p -t ui '#{alternate_on}')" = 0 ] &&
   grep -q "conversation saved in $SAVED" "$TMP/screen"; then
    ok ui_quit_restores
else
    fail ui_quit_restores "$(tm_screen | grep -v '^$' | tail -4)"
fi
tm_snap quit
if [ -s "$XDG_STATE_HOME/glmchat/history" ] && grep -q "Tell me a long story" "$XDG_STATE_HOME/glmchat/history"; then
    ok ui_history
else
    fail ui_history "no history file"
fi

# ---- editing and display: Alt-Enter, a bracketed paste, Tab, /edit,
# reasoning folds, code blocks kept verbatim, wide characters, scrolling,
# /stats, /theme, NO_COLOR
R="$TMP/render.json"
LONG=$((T * 5)) # an answer to a long prompt (below)
printf '%s' '{"messages": [
 {"role": "user", "content": "show me code"},
 {"role": "assistant", "reasoning_content": "secret plan: answer with code", "content": "Here:\n```\n    for (int i = 0; i < n; i++) total += weights[i] * values[i]; /* one long verbatim line that must not be reflowed */\n```\n漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字 end"}]}' >"$R"
for i in $(seq 1 30); do echo "line $i"; done >"$TMP/lines"
start_app -C "$R"
tm_wait $T '^ Ready'
if grep -q "Thinking: 5 words (F3 shows)" "$TMP/screen" && ! grep -q "secret plan" "$TMP/screen"; then
    tm_keys F3
    if tm_wait 10 "secret plan: answer with code"; then ok ui_think_fold; else fail ui_think_fold "F3 did not unfold"; fi
else
    fail ui_think_fold "$(tm_screen | head -12)"
fi
# The code block under its header; its long line is cut at the pane's edge
# and continued, never re-flowed at spaces.  Both waited for (the capture
# after F3 may catch the pane mid-redraw), then checked on one capture.
code_re="^ {4}for \(int i = 0; i < n; i\+\+\) total \+= weights\[i\] \* values\[i\]; /\* one long"
if tm_wait 10 "$code_re" && tm_wait 10 '^\[1\] code' && grep -qE "$code_re" "$TMP/screen"; then
    ok ui_code_verbatim
else
    fail ui_code_verbatim "$(grep -n "for (int\|code" "$TMP/screen" | head -4)"
fi
if [ "$(grep -c "漢字" "$TMP/screen")" -ge 2 ] && [ "$(awk '/漢字/' "$TMP/screen" | sed 's/│.*//' | LC_ALL=C.UTF-8 wc -L)" -le 79 ]; then
    ok ui_wide_chars
else
    fail ui_wide_chars "$(grep "漢字" "$TMP/screen" | head -3)"
fi
tm_snap render
tm_keys -l "first line"
tm_keys M-Enter
tm_keys -l "second line"
tm_keys M-Enter
tm set-buffer -b p "$(cat "$TMP/lines")"
tm paste-buffer -p -b p -t ui
tm_keys Enter
# One message of 32 lines: Alt-Enter's and the paste's line breaks kept.
# (Its prompt is ~670 tokens: on lavapipe under load it takes minutes.)
if tm_wait $T "^line 30" && tm_wait $LONG "^Assistant .*16 tokens" && [ "$("$BUILD/tools/json_get" "$R" messages.2.content)" = \
   "$(printf 'first line\nsecond line\n'; cat "$TMP/lines")" ]; then
    ok ui_multiline_paste
else
    fail ui_multiline_paste "$("$BUILD/tools/json_get" "$R" messages.2.content | head -c 300)"
fi
tm_snap multiline
# Scrolling back: PgUp shows older lines and a marker; new lines stay below.
tm_keys PPage
if tm_wait 10 "more \(PgDn\)" && grep -q "^line 1[0-9]" "$TMP/screen"; then
    tm_keys NPage NPage NPage NPage
    if tm_gone 10 "more \(PgDn\)"; then ok ui_scroll; else fail ui_scroll "PgDn did not come back"; fi
else
    fail ui_scroll "$(tm_screen | head -5)"
fi
tm_keys -l "/sa"
tm_keys Tab
if tm_wait 10 "^> /save +(│|$)"; then ok ui_tab_completion; else fail ui_tab_completion "$(tail -2 "$TMP/screen")"; fi
tm_keys C-u
tm_line "/edit"
if tm_wait 10 "^  line 30 +(│|$)" && tm_wait 5 "Editing your last message"; then
    tm_keys C-e End
    tm_keys -l " (edited)"
    tm_keys Enter
    if tm_wait $T "^line 30 \(edited\)" && tm_wait $LONG "^Assistant .*16 tokens" && [ "$(tm_screen | grep -c '^You ')" -le 2 ]; then
        ok ui_edit
    else
        fail ui_edit "$(tm_screen | grep -v '^ *│\? *$' | tail -6)"
    fi
else
    fail ui_edit "the last message did not come back for editing"
fi
tm_line "/stats"
if tm_wait 10 "^Backend: " && tm_wait 5 "^Answers: [0-9]+ tokens generated"; then ok ui_stats; else fail ui_stats "$(tail -5 "$TMP/screen")"; fi
tm capture-pane -p -e -t ui >"$TMP/colour"
tm_line "/theme mono"
tm_wait 10 "Theme: mono"
tm capture-pane -p -e -t ui >"$TMP/mono"
if grep -qE '\[(38|48);5;' "$TMP/colour" && ! grep -qE '\[(38|48);5;' "$TMP/mono"; then ok ui_theme_switch
else fail ui_theme_switch "256-colour codes: default $(grep -cE '\[(38|48);5;' "$TMP/colour"), mono $(grep -cE '\[(38|48);5;' "$TMP/mono")"; fi
tm_line "/quit"
tm_wait $T "^EXITED 0"
if cmp -s "$R" "$R" && "$BUILD/tools/conv_stress" count "$R" >/dev/null && grep -q '"(edited)\|(edited)' "$R"; then
    ok ui_conversation_file_saved
else
    fail ui_conversation_file_saved "-C FILE did not get the new turns"
fi

# ---- /edit, then /system set or removed, then the new text: the edit
# rewrites the message it brought back, and the answers before it stay
# (issue 17: the edit index did not move with the system prompt)
E="$TMP/edit.json"
printf '%s' '{"messages": [
 {"role": "user", "content": "first question"}, {"role": "assistant", "content": "first answer"},
 {"role": "user", "content": "second question"}, {"role": "assistant", "content": "second answer"}]}' >"$E"
jget() { "$BUILD/tools/json_get" "$E" "$1" 2>/dev/null; }
# until_answered I TEXT: until message I of the file is TEXT and an answer follows it
until_answered() {
    end=$(($(date +%s) + T))
    until [ "$(jget messages.$1.content)" = "$2" ] && [ "$(jget messages.$(($1 + 1)).role)" = assistant ]; do
        [ "$(date +%s)" -ge $end ] && return 1
        sleep 0.1
    done
}
start_app -C "$E"
tm_wait $T '^ Ready'
tm_line "/edit"
if tm_wait 10 "^> second question +(│|$)"; then
    tm_keys C-u
    tm_line "/system Be brief"
    tm_wait 10 "System prompt set"
    tm_line "second question, edited"
    if until_answered 3 "second question, edited" && [ "$(jget messages.0.role)" = system ] &&
       [ "$(jget messages.2.content)" = "first answer" ] && [ "$("$BUILD/tools/conv_stress" count "$E")" -eq 5 ]; then
        ok ui_edit_then_system
    else
        fail ui_edit_then_system "messages: $(jget messages.0.role) '$(jget messages.2.content)' '$(jget messages.3.content)'"
    fi
else
    fail ui_edit_then_system "the last message did not come back for editing"
fi
tm_line "/edit"
if tm_wait 10 "^> second question, edited +(│|$)"; then
    tm_keys C-u
    tm_line "/system -"
    tm_wait 10 "System prompt removed"
    tm_line "third version"
    if until_answered 2 "third version" && [ "$(jget messages.0.role)" = user ] &&
       [ "$(jget messages.1.content)" = "first answer" ] && [ "$("$BUILD/tools/conv_stress" count "$E")" -eq 4 ]; then
        ok ui_edit_then_system_removed
    else
        fail ui_edit_then_system_removed "messages: $(jget messages.0.role) '$(jget messages.1.content)' '$(jget messages.2.content)' ($("$BUILD/tools/conv_stress" count "$E"))"
    fi
else
    fail ui_edit_then_system_removed "the last message did not come back for editing"
fi
tm_snap edit-system
tm_line "/quit"
tm_wait $T "^EXITED 0"

# NO_COLOR: attributes only
start_app
tm_wait $T '^ Ready'
tm capture-pane -p -e -t ui >"$TMP/colour"
tm_line "/quit"
tm_wait $T "^EXITED 0"
tm_start 120 40 env NO_COLOR=1 XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" \
    XDG_STATE_HOME="$XDG_STATE_HOME" "$APP" --backend "$BACKEND" $MODEL_ARGS
tm_wait $T '^ Ready'
tm capture-pane -p -e -t ui >"$TMP/nocolour"
# (39 and 49 are "the terminal's default colour"; attributes such as bold stay)
if grep -qE '\[(38|48);5;' "$TMP/colour" && ! grep -qE '\[([0-9;]*;)?(3[0-8]|4[0-8])(;[0-9;]*)?m' "$TMP/nocolour" &&
   grep -q "$(printf '\033')\[1m" "$TMP/nocolour"; then
    ok ui_no_color
else
    fail ui_no_color "colour codes with NO_COLOR set"
fi
tm_line "/quit"
tm_wait $T "^EXITED 0"

# ---- Ctrl-C twice in the middle of an answer: quits, saving the partial answer
start_app -n 2000
tm_wait $T '^ Ready'
if answer_running "Go on and on"; then
    tm_keys C-c
    tm_keys C-c
    f=$(ls "$XDG_DATA_HOME"/glmchat/conversations/*.json | tail -n 1)
    if tm_wait $T "^EXITED 0" && tm_wait 5 "icanon echo" && [ "$(tm display -p -t ui '#{alternate_on}')" = 0 ]; then
        ok ui_ctrl_c_twice
    else
        fail ui_ctrl_c_twice "$(tm_screen | grep -v '^$' | tail -4)"
    fi
else
    fail ui_ctrl_c_twice "no answer ran"
fi

# ---- SIGTERM and a fatal signal restore the terminal too
for sig in TERM SEGV; do
    start_app
    tm_wait $T '^ Ready'
    kill -$sig "$(tm_app_pid)"
    want=143
    [ $sig = SEGV ] && want=139
    # Under AddressSanitizer the SEGV goes on to its report, which exits 1.
    [ $sig = SEGV ] && [ "${SANITIZE:-0}" = 1 ] && want=1
    if tm_wait $T "^EXITED $want" && tm_wait 5 "icanon echo" && [ "$(tm display -p -t ui '#{alternate_on}')" = 0 ]; then
        ok ui_sig$sig
    else
        fail ui_sig$sig "$(tm_screen | grep -v '^$' | tail -3)"
    fi
done
tm_stop
done_tests
