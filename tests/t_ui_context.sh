#!/bin/sh
# t_ui_context.sh: a context that ends well, in tmux: a conversation longer
# than the context leaves its oldest exchanges out with a note (or, with
# context-overflow stop, is not answered), the side pane shows the context in
# use, /undo removes exchanges (and the file follows), /set ctx N starts the
# model again with another size, and a message stopped (Esc) before its
# answer began comes back to the input line instead of staying, as does a
# message larger than the context.
# Screens are kept in build/artifacts/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_context "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
. tests/ui_lib.sh

msgs() { "$BUILD/tools/conv_stress" count "$(ls "$CONV_DIR"/*.json | tail -n 1)" 2>/dev/null; }
Q="a question of quite a few words to fill the small context"

# ---- a context of 128 tokens: a message larger than it comes back to the
# input line whole, with a note, and stays out of the conversation (issue
# 28.10: it stayed, unanswerable)
start_app -c 128
app_ready
big=$(awk 'BEGIN { for (i = 1; i <= 40; i++) printf "w%02d ", i; printf "end" }')
tm_line "$big"
if tm_wait $T "^Not sent: your message is too large for the context" &&
   tm_wait 10 "Too large for the context: your message is back in the input line" &&
   tm_wait 10 "^> w01 w02 w03" && tm_gone $T "Answering" && ! grep -q "^You " "$TMP/screen" &&
   ! ls "$CONV_DIR"/*.json >/dev/null 2>&1; then
    ok ui_oversized_message_given_back
else
    fail ui_oversized_message_given_back "$(ls "$CONV_DIR" 2>&1); $(tm_screen | grep -v '^ *│\? *$' | tail -5)"
fi
tm_snap oversized
tm_keys C-u
tm_gone 10 "^> w01"

# ---- the second exchange no longer fits whole
answered "$Q"
answered "$Q"
if tm_wait 10 "^The context is full: the oldest 1 exchange" && tm_wait 10 "/ 128 tokens" &&
   tm_wait 10 "oldest 1 exchange left out" && [ "$(msgs)" = 4 ]; then
    ok ui_context_trim
else
    fail ui_context_trim "$(msgs) messages; $(tm_screen | grep -E 'context|Context|tokens' | head -5)"
fi
tm_snap context-trim
tm_line "/set context-overflow stop"
tm_wait 10 "context-overflow = stop"
tm_line "$Q"
if tm_wait $T "^Not answered: The conversation is [0-9]+ tokens; the context holds 128" && tm_gone $T "Answering" &&
   [ "$(msgs)" = 5 ]; then
    ok ui_context_stop
else
    fail ui_context_stop "$(msgs) messages; $(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi

# ---- /undo: the unanswered message, then the exchange before it
tm_line "/undo"
if tm_wait 10 "Removed your last exchange \(1 message\)" && [ "$(msgs)" = 4 ]; then
    tm_line "/undo"
    if tm_wait 10 "Removed your last exchange \(2 messages\)" && [ "$(msgs)" = 2 ] &&
       [ "$(tm_screen | grep -c '^You ')" = 1 ]; then
        ok ui_undo
    else
        fail ui_undo "$(msgs) messages after the second /undo"
    fi
else
    fail ui_undo "$(msgs) messages after /undo: $(tail -n 1 "$TMP/screen")"
fi
tm_snap undo

# ---- /set ctx: the model starts again with the new size
tm_line "/set ctx 256"
if tm_wait 10 "Starting the model again with a context of 256 tokens" && app_ready && tm_wait $T "/ 256 tokens" &&
   answered "after the restart"; then
    ok ui_set_ctx
else
    fail ui_set_ctx "$(tm_screen | grep -E 'Context|tokens|Ready' | head -4)"
fi
quit_app

# ---- Esc while the prompt is read: the message comes back to the input line
rm -f "$CONV_DIR"/*.json
start_app -b 8
app_ready
# (When the prompt was read before the Esc arrived, the answer began: the
# partial answer is kept; /undo and again, with a longer message.)
result=
for words in 120 150 175; do
    awk -v n=$words 'BEGIN { for (i = 0; i < n; i++) printf "word%03d filler text, ", i; printf "\nthe end" }' >"$TMP/long"
    tm set-buffer -b p "$(cat "$TMP/long")"
    tm paste-buffer -p -b p -t ui
    tm_keys Enter
    if ! tm_wait $T "reading [0-9]+ tokens"; then
        result="the prompt was not seen being read: $(tm_screen | tail -3)"
        break
    fi
    tm_keys Escape
    tm_wait $T "Stopped before the answer began: your message is back|Stopped; the partial answer is kept"
    if grep -q "Stopped; the partial answer is kept" "$TMP/screen"; then
        tm_line "/undo"
        tm_wait 10 "Removed your last exchange"
        result="the prompt was always read before the Esc arrived"
        continue
    fi
    if tm_wait 5 "^  the end *(│|$)" && ! grep -q "^You " "$TMP/screen" && ! ls "$CONV_DIR"/*.json >/dev/null 2>&1; then
        result=ok
    else
        result="$(ls "$CONV_DIR"); $(tm_screen | grep -v '^ *│\? *$' | tail -5)"
    fi
    break
done
if [ "$result" = ok ]; then ok ui_esc_prefill_gives_back; else fail ui_esc_prefill_gives_back "$result"; fi
tm_snap esc-prefill
tm_keys C-c
tm_gone 10 "^  the end"
quit_app
tm_stop
done_tests
