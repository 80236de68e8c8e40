#!/bin/sh
# t_ui_tmux.sh: the real chat UI in tmux on a small model: start, type, the
# answer streams, the side pane shows kernel rows and tokens/s, Esc stops
# an answer and keeps it, /retry, a resize in the middle of an answer,
# /save /load /replay, unknown-command hints, quitting restores the
# terminal (also after Ctrl-C twice, SIGTERM and a fatal signal).
# Screens are kept in build/artifacts/ui-*/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_tmux "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT

BACKEND=${GLMCHAT_TEST_BACKEND:-cpu}
# A model big enough that an answer takes a while (5-15 ms a token on one
# core); --ignore-eos makes answers exactly -n tokens long, so an answer of
# 2000 tokens runs long enough to be stopped and resized in the middle.
MODEL="$TMP/ui.gguf"
"$GLMCHAT" mkmodel --preset demo --type Q8_0 --hidden 768 --layers 4 --experts 8 --ff 2048 --moe-ff 512 \
    --quiet -o "$MODEL" || { fail ui_model "mkmodel failed"; done_tests; }
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
APP="$PWD/$GLMCHAT"
[ "${GLMCHAT#/}" != "$GLMCHAT" ] && APP="$GLMCHAT"
T=60   # seconds any single step may take (sanitizer builds are slow)

start_app() {
    tm_start 120 40 env XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" \
        XDG_STATE_HOME="$XDG_STATE_HOME" "$APP" --backend "$BACKEND" -m "$MODEL" -t 1 --template chatml \
        --temp 2 --seed 11 --ignore-eos -n 16 "$@"
}

done_answers() { tm_screen | grep -cE "^Assistant .*tokens, [0-9.]+ tok/s"; }

# Sends a message and waits until its answer is streaming; /retry when the
# answer ended (a stop token) before it could be seen running.
answer_running() {
    tm_line "$1"
    for try in 1 2 3 4 5; do
        n0=$(done_answers)
        end=$(($(date +%s) + T))
        while [ "$(date +%s)" -lt $end ]; do
            # Answering, and text has arrived under the answer's header.
            tm_screen | grep -q "Answering" &&
                awk '/^Assistant +[0-9.]+ tok\/s/ { getline; sub(/│.*/, ""); if ($0 ~ /[^ ]/) found = 1 } END { exit !found }' \
                    "$TMP/screen" && return 0
            [ "$(done_answers)" -gt "$n0" ] && break
            sleep 0.05
        done
        tm_line "/retry"
    done
    return 1
}

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
if tm_wait $T "Answering" && tm_gone $T "Answering" && [ "$(tm_screen | grep -c '^Assistant ')" -eq "$before" ]; then
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
if tm_wait $T "^EXITED 0" && tm_wait 5 "icanon echo" && [ "$(tm display -p -t ui '#{alternate_on}')" = 0 ] &&
   grep -q "conversation saved in $XDG_DATA_HOME/glmchat/conversations/" "$TMP/screen"; then
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
