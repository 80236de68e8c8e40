#!/bin/sh
# t_ui_input.sh: the chat's input line in tmux: history across restarts
# (Up gives the last entries of the session before, multi-line ones whole;
# Ctrl-R searches them; a history file of earlier versions loads one entry
# per line, issue 16.1); a lone Esc is no Meta prefix, and Ctrl-C keeps
# the line it clears for Ctrl-Y (issue 28.11).
# Screens are kept in build/artifacts/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_input "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
. tests/ui_lib.sh

HIST="$XDG_STATE_HOME/glmchat/history"
mkdir -p "$XDG_STATE_HOME/glmchat"
# Written the way earlier versions did: lines, no timestamps.
printf 'legacy one\nlegacy two\n' >"$HIST"

# ---- one session: x1, x2, a message of two lines
start_app
app_ready
answered "x1" && answered "x2"
tm_keys -l "m1"
tm_keys M-Enter
tm_keys -l "m2"
tm_keys Enter
tm_wait $T "^m2" && tm_gone $T "Answering"
tm_snap history-first-session
quit_app
# Commands are entries too: /quit is the newest.
if [ "$(grep -c '^#[0-9][0-9]*$' "$HIST")" -eq 4 ] && grep -q '^legacy two$' "$HIST" && tail -n 1 "$HIST" | grep -qx /quit; then
    ok ui_history_file_marks_entries
else
    fail ui_history_file_marks_entries "$(head -c 300 "$HIST")"
fi

# ---- the next session: Up walks back through them, newest first
start_app
app_ready
tm_keys Up
tm_wait 10 "^> /quit"
tm_keys Up
if tm_wait 10 "^> m1 *(│|$)" && awk '/^> m1/ { getline; exit !($0 ~ /^  m2 *(│|$)/) }' "$TMP/screen"; then
    ok ui_history_multiline_entry
else
    fail ui_history_multiline_entry "$(grep -A1 '^> ' "$TMP/screen")"
fi
got=
for want in x2 x1 "legacy two" "legacy one"; do
    tm_keys Up
    if tm_wait 10 "^> $want *(│|$)"; then got="$got|$want"; else got="$got|($(input_line))"; fi
done
if [ "$got" = "|x2|x1|legacy two|legacy one" ]; then
    ok ui_history_up_across_restart
else
    fail ui_history_up_across_restart "Up gave $got"
fi
tm_snap history-up
# Ctrl-R finds an entry of an earlier session; Enter sends it.  (From
# the end of the history: a search goes back from where Up left it.)
tm_keys 'M->'
tm_gone 10 "^> legacy one"
tm_keys C-r
tm_keys -l "legacy o"
if tm_wait 10 "reverse-i-search.*legacy o.*legacy one"; then
    tm_keys Enter
    if tm_wait $T "^legacy one *(│|$)" && tm_wait $T "^You "; then
        ok ui_history_search
    else
        fail ui_history_search "Enter did not send the entry: $(tm_screen | grep -v '^ *│\? *$' | tail -4)"
    fi
else
    fail ui_history_search "$(tm_screen | tail -3)"
fi
tm_snap history-search
tm_gone $T "Answering"

# ---- Esc on an idle line is no Meta prefix: the next key is typed as it
# is (issue 28.11: readline took "Esc, d" as M-d and ate the d)
tm_keys -l "abc"
tm_wait 10 "^> abc"
tm_keys Escape
if tm_wait 10 "Esc stops an answer or leaves /edit: nothing to stop now"; then
    tm_keys -l "d"
    if tm_wait 10 "^> abcd *(│|$)"; then ok ui_esc_idle_no_meta; else fail ui_esc_idle_no_meta "line '$(input_line)'"; fi
else
    fail ui_esc_idle_no_meta "no word on the lone Esc: $(tm_screen | tail -1)"
fi
tm_keys C-u
tm_gone 10 "^> abc"

# ---- Ctrl-C on a long pasted message clears it, says so, and Ctrl-Y
# brings it back (issue 28.11: it went without a word)
tm set-buffer -b p "$(printf 'first pasted line\nsecond pasted line\nthird pasted line')"
tm paste-buffer -p -b p -t ui
tm_wait 10 "^  third pasted line"
tm_keys C-c
if tm_wait 10 "Line cleared: Ctrl-Y brings it back" && tm_gone 10 "^> first pasted line"; then
    tm_keys C-y
    if tm_wait 10 "^> first pasted line" && tm_wait 10 "^  third pasted line"; then
        ok ui_ctrl_c_line_recoverable
    else
        fail ui_ctrl_c_line_recoverable "Ctrl-Y gave '$(input_line)'"
    fi
else
    fail ui_ctrl_c_line_recoverable "$(tm_screen | grep -E '^> |^  ' | head -3; tm_screen | tail -1)"
fi
tm_keys C-u
quit_app
tm_stop
done_tests
