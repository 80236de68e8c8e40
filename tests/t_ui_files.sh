#!/bin/sh
# t_ui_files.sh: the chat's files in tmux: /export and /save never replace
# a file glmchat did not write unless told with '!' (issue 16.2); /load
# writes no file until the first new turn (16.6).
# Screens are kept in build/artifacts/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_files "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
. tests/ui_lib.sh

# until_file FILE PATTERN: until FILE holds a line matching PATTERN (grep -E).
until_file() {
    _end=$(($(date +%s) + T))
    until grep -qE -- "$2" "$1" 2>/dev/null; do
        [ "$(date +%s)" -ge $_end ] && return 1
        sleep 0.05
    done
}

# ---- /export and /save: '!' replaces a file that is not ours
start_app
app_ready
answered "first question"
printf 'my notes\n' >"$TMP/notes.txt"
cp "$TMP/notes.txt" "$TMP/notes.orig"
tm_line "/export $TMP/notes.txt"
if tm_wait 10 "(exists and was not written by glmchat|by glmchat; /export! replaces it)" && cmp -s "$TMP/notes.txt" "$TMP/notes.orig"; then
    ok ui_export_refuses_other_files
else
    fail ui_export_refuses_other_files "$(head -c 200 "$TMP/notes.txt"); $(tm_screen | grep -v '^ *│\? *$' | tail -3)"
fi
tm_line "/export! $TMP/notes.txt"
if until_file "$TMP/notes.txt" "^# Conversation" && grep -q "first question" "$TMP/notes.txt"; then
    ok ui_export_bang_replaces
else
    fail ui_export_bang_replaces "$(head -c 200 "$TMP/notes.txt")"
fi
# Now it is an export of ours: /export replaces it without '!'.
answered "second question"
tm_line "/export $TMP/notes.txt"
if until_file "$TMP/notes.txt" "second question"; then ok ui_export_replaces_own; else fail ui_export_replaces_own "$(tail -c 200 "$TMP/notes.txt")"; fi
printf 'keep me\n' >"$TMP/other.txt"
tm_line "/save $TMP/other.txt"
if tm_wait 10 "exists and is not a conversation|replaces it" && grep -qx "keep me" "$TMP/other.txt"; then
    ok ui_save_refuses_other_files
else
    fail ui_save_refuses_other_files "$(head -c 200 "$TMP/other.txt")"
fi
tm_line "/save! $TMP/other.txt"
if tm_wait 10 "Saved 4 messages to .*other.txt" && [ "$("$BUILD/tools/conv_stress" count "$TMP/other.txt")" = 4 ]; then
    ok ui_save_bang_replaces
else
    fail ui_save_bang_replaces "$(head -c 200 "$TMP/other.txt")"
fi
tm_snap export-save

# ---- /load writes nothing until the first new turn (it wrote a copy at once)
n0=$(ls "$CONV_DIR" | grep -c '\.json$')
tm_line "/load $TMP/other.txt"
if tm_wait 10 "Loaded 4 messages from" && [ "$(ls "$CONV_DIR" | grep -c '\.json$')" -eq "$n0" ]; then
    answered "after the load"
    if [ "$(ls "$CONV_DIR" | grep -c '\.json$')" -eq $((n0 + 1)) ]; then
        ok ui_load_no_duplicate
    else
        fail ui_load_no_duplicate "no new file after the first turn: $(ls "$CONV_DIR")"
    fi
else
    fail ui_load_no_duplicate "$n0 files before /load, $(ls "$CONV_DIR" | grep -c '\.json$') after"
fi
quit_app
tm_stop
done_tests
