#!/bin/sh
# t_ui_files.sh: the chat's files in tmux: /export and /save never replace
# a file glmchat did not write unless told with '!' (issue 16.2), /export
# never a symbolic link or a directory, and what it writes is 0600 (28.8);
# /load writes no file until the first new turn (16.6), nor when quitting
# right after it (28.8); /list, /resume N and glmchat --resume [N] (16).
# Screens are kept in build/artifacts/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_files "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
. tests/ui_lib.sh

# line_of PATTERN: the number of the first screen line matching PATTERN (0: none).
line_of() { grep -nE -- "$1" "$TMP/screen" | head -n 1 | cut -d: -f1 | grep . || echo 0; }

# until_true CMD...: until CMD succeeds (T seconds at most).
until_true() {
    _end=$(($(date +%s) + T))
    until "$@"; do
        [ "$(date +%s)" -ge $_end ] && return 1
        sleep 0.05
    done
}

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
# Replacing keeps nothing of the old file: an export is 0600 even over a
# 0644 one (issue 28.8: the old mode stayed).
chmod 644 "$TMP/notes.txt"
tm_line "/export $TMP/notes.txt"
private() { [ "$(stat -c %a "$TMP/notes.txt")" = 600 ]; }
if until_true private; then
    ok ui_export_replaced_is_private
else
    fail ui_export_replaced_is_private "mode $(stat -c %a "$TMP/notes.txt")"
fi
# Never through a symbolic link, never over a directory, even with '!'.
printf 'the target\n' >"$TMP/target.md"
ln -s "$TMP/target.md" "$TMP/link.md"
tm_line "/export! $TMP/link.md"
if tm_wait 10 "link.md is a symbolic link" && [ -L "$TMP/link.md" ] &&
   grep -qx "the target" "$TMP/target.md"; then
    ok ui_export_refuses_symlink
else
    fail ui_export_refuses_symlink "$(ls -l "$TMP/link.md"); $(head -c 100 "$TMP/target.md")"
fi
mkdir "$TMP/adir.md"
tm_line "/export! $TMP/adir.md"
if tm_wait 10 "adir.md is a directory" && [ -d "$TMP/adir.md" ]; then
    ok ui_export_refuses_directory
else
    fail ui_export_refuses_directory "$(tm_screen | grep -v '^ *│\? *$' | tail -2)"
fi
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
# /load and then quit: nothing new to keep, no copy of the loaded file
# (issue 28.8: quitting saved one).
n1=$(ls "$CONV_DIR" | grep -c '\.json$')
tm_line "/load $TMP/other.txt"
tm_wait 10 "Loaded 4 messages from"
quit_app
if [ "$(ls "$CONV_DIR" | grep -c '\.json$')" -eq "$n1" ]; then
    ok ui_load_quit_no_duplicate
else
    fail ui_load_quit_no_duplicate "$n1 files before /load, $(ls "$CONV_DIR" | grep -c '\.json$') after quitting"
fi

# ---- /list and /resume: two conversations, newest first; /resume 2 continues
# the older one in its own file; glmchat --resume [N] at start
rm -f "$CONV_DIR"/*.json
start_app_size 200 50
app_ready
answered "the first conversation"
first=$(ls "$CONV_DIR"/*.json)
tm_line "/clear"
tm_line "/clear"
tm_wait 10 "New conversation"
answered "the second conversation"
tm_line "/list"
if tm_wait 10 "^Saved conversations, newest first" &&
   l1=$(line_of "^ 1  [0-9-]+ [0-9:]+  .*  1 turn  the second conversation  \(this one\)") &&
   l2=$(line_of "^ 2  [0-9-]+ [0-9:]+  .*  1 turn  the first conversation *(│|$)") && [ "$l1" -gt 0 ] && [ "$l2" -gt "$l1" ]; then
    ok ui_list
else
    fail ui_list "$(grep -E '^ ?[0-9]  ' "$TMP/screen")"
fi
tm_snap list
tm_line "/resume 2"
if tm_wait 10 "^Continuing .*conversations/" && tm_wait 5 "^the first conversation" &&
   ! grep -q "^the second conversation" "$TMP/screen"; then
    answered "more on the first"
    if [ "$("$BUILD/tools/conv_stress" count "$first")" = 4 ] && [ "$(ls "$CONV_DIR" | grep -c '\.json$')" = 2 ]; then
        ok ui_resume
    else
        fail ui_resume "$("$BUILD/tools/conv_stress" count "$first") messages in $first; $(ls "$CONV_DIR")"
    fi
else
    fail ui_resume "$(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
quit_app
# At start: the most recent (the one just continued), then number 2.
start_app_size 200 50 --resume
if app_ready && grep -q "^Continuing $first (4 messages)" "$TMP/screen" && grep -q "^more on the first" "$TMP/screen"; then
    ok ui_resume_at_start
else
    fail ui_resume_at_start "$(tm_screen | grep -E '^Continuing|^[a-z]' | head -5)"
fi
quit_app
start_app_size 200 50 --resume 2
if app_ready && grep -q "^the second conversation" "$TMP/screen" && ! grep -q "^the first conversation" "$TMP/screen"; then
    ok ui_resume_at_start_n
else
    fail ui_resume_at_start_n "$(tm_screen | grep -E '^Continuing|^the' | head -5)"
fi
quit_app
expect_fail ui_resume_no_such "resume: no conversation 9: the list has 1-2" "$GLMCHAT" --resume 9 --backend cpu
expect_fail ui_resume_and_c "resume and -C both name" "$GLMCHAT" --resume 1 -C "$first" --backend cpu
tm_stop
done_tests
