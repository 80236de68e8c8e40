#!/bin/sh
# t_conv_safety.sh: `-p -C FILE` and what a user of real conversations hits
# (issue 28.4, 28.6a, 28.6b):
#  - a signal during the model's load (or while waiting for another run's
#    lock) ends the run without leaving a lock file behind;
#  - -C through a symbolic link writes the file it leads to and keeps the link;
#  - a conversation that outgrew the context is answered from a prompt
#    without its oldest exchanges (the context-overflow setting), or refused
#    with --context-overflow stop, the file unchanged; it used to fail on
#    every later run, advising the UI's /clear.
. tests/lib.sh

MODEL=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf
BACKEND=${GLMCHAT_TEST_BACKEND:-cpu}
J="$BUILD/tools/json_get"
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL
G() { "$GLMCHAT" --backend "$BACKEND" "$@"; }
LONG="--temp 1 --seed 5 --think off --ignore-eos -n 100000 -c 4096"

# count_messages FILE: how many messages the conversation holds.
count_messages() {
    k=0
    while "$J" "$1" messages.$k.role >/dev/null 2>&1; do k=$((k + 1)); done
    echo $k
}

# wait_for TIMEOUT_S TEST...: until `test TEST...` holds (a guard against a
# hang, not a timing).
wait_for() {
    end=$(($(date +%s) + $1))
    shift
    while ! test "$@"; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.02
    done
}

# ---- a signal during the load: the lock file goes with the run.  The
# Vulkan backend on a CPU implementation takes seconds to start (its
# pipelines): the signal is sent as soon as the lock file appears, while
# the engine is still starting.
C="$TMP/load.json"
L="$TMP/.load.json.lock"
(exec "$GLMCHAT" --backend vulkan -m "$MODEL" $LONG -C "$C" -p "go on" >"$TMP/load.out" 2>"$TMP/load.err") &
pid=$!
if ! wait_for 60 -e "$L"; then
    kill -9 $pid 2>/dev/null
    wait $pid
    fail sigterm_during_load "the lock file never appeared: $(head -c 300 "$TMP/load.err")"
else
    kill -TERM $pid
    wait $pid
    rc=$?
    if [ $rc -ne 143 ]; then fail sigterm_during_load "exit status $rc, expected 143: $(head -c 300 "$TMP/load.err")"
    elif [ -e "$L" ]; then fail sigterm_during_load "the lock file was left: $(cat "$L" | tr '\n' ' ')"
    else ok sigterm_during_load
    fi
fi

# ---- a signal while waiting for another run's lock: this run ends, the
# other's lock stays (it is still answering), then that one saves.
C="$TMP/wait.json"
L="$TMP/.wait.json.lock"
(exec "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" $LONG -C "$C" -p "first" >"$TMP/first.out" 2>"$TMP/first.err") &
first=$!
wait_for 60 -s "$TMP/first.out" || fail sigterm_while_waiting "the first run did not answer"
(exec "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" -n 2 -C "$C" -p "second" >/dev/null 2>"$TMP/second.err") &
second=$!
wait_for 60 -s "$TMP/second.err"
kill -TERM $second
wait $second
rc=$?
if [ $rc -ne 143 ]; then fail sigterm_while_waiting "exit status $rc: $(head -c 300 "$TMP/second.err")"
elif ! grep -q "^glmchat: waiting: " "$TMP/second.err"; then fail sigterm_while_waiting "it did not wait: $(head -c 300 "$TMP/second.err")"
elif [ ! -e "$L" ]; then fail sigterm_while_waiting "the other run's lock file was removed"
else ok sigterm_while_waiting
fi
kill -INT $first
wait $first
if [ $? -eq 130 ] && [ ! -e "$L" ] && [ "$("$J" "$C" messages.0.content 2>/dev/null)" = first ]; then ok first_run_saved
else fail first_run_saved "$(head -c 300 "$TMP/first.err")"; fi

# ---- -C through a symbolic link
mkdir -p "$TMP/store" "$TMP/links"
G -m "$MODEL" --temp 0 -n 2 -C "$TMP/store/real.json" -p "one" >/dev/null 2>&1
ln -s ../store/real.json "$TMP/links/link.json"
G -m "$MODEL" --temp 0 -n 2 -C "$TMP/links/link.json" -p "two" >/dev/null 2>"$TMP/err"
if [ ! -L "$TMP/links/link.json" ]; then fail conversation_link_kept "the link was replaced: $(ls -l "$TMP/links")"
elif [ "$("$J" "$TMP/store/real.json" messages.2.content 2>/dev/null)" != two ]; then fail conversation_link_kept "the target did not get the turn: $(head -c 300 "$TMP/err")"
elif [ -n "$(ls -A "$TMP/links" | grep -v '^link.json$')" ] || [ -n "$(ls -A "$TMP/store" | grep -v '^real.json$')" ]; then
    fail conversation_link_kept "litter: $(ls -A "$TMP/links" "$TMP/store" | tr '\n' ' ')"
else ok conversation_link_kept
fi

# ---- a conversation longer than the context
C="$TMP/long.json"
i=1
while [ $i -le 6 ]; do
    G -m "$MODEL" --temp 0 --think off -n 8 -c 1024 -C "$C" -p "message number $i, with a few more words in it to fill a context" \
        >/dev/null 2>&1
    i=$((i + 1))
done
n_before=$(count_messages "$C")
G -m "$MODEL" --temp 0 --think off -n 8 -c 64 -C "$C" -p "and now?" >"$TMP/out" 2>"$TMP/err"
rc=$?
n_after=$(count_messages "$C")
if [ $rc -ne 0 ]; then fail oneshot_trims_to_context "exit $rc: $(head -c 300 "$TMP/err")"
elif ! grep -q "^glmchat: note: The context is full: the oldest [0-9]* exchanges .* left out of the prompt" "$TMP/err"; then
    fail oneshot_trims_to_context "no note: $(head -c 300 "$TMP/err")"
elif [ "$n_after" -ne $((n_before + 2)) ] || [ "$("$J" "$C" messages.0.content)" != "message number 1, with a few more words in it to fill a context" ]; then
    fail oneshot_trims_to_context "the file lost or gained messages: $n_before -> $n_after"
else ok oneshot_trims_to_context
fi
cp "$C" "$TMP/before.json"
expect_fail oneshot_overflow_stop "^glmchat: not answered: the conversation is [0-9]+ tokens; the context holds 64 .*--context-overflow trim" \
    G -m "$MODEL" --temp 0 -n 8 -c 64 --context-overflow stop -C "$C" -p "stop here"
if cmp -s "$C" "$TMP/before.json"; then ok oneshot_overflow_stop_unchanged; else fail oneshot_overflow_stop_unchanged "the file changed"; fi
if grep -q "/clear" "$TMP/err"; then fail oneshot_no_ui_advice "it advises the UI's /clear: $(head -c 200 "$TMP/err")"; else ok oneshot_no_ui_advice; fi
# the settings file's context-overflow counts too
mkdir -p "$XDG_CONFIG_HOME/glmchat"
printf 'context-overflow = stop\n' >"$XDG_CONFIG_HOME/glmchat/settings"
expect_fail oneshot_overflow_stop_setting "^glmchat: not answered: the conversation is" G -m "$MODEL" --temp 0 -n 8 -c 64 -C "$C" -p "stop"
rm "$XDG_CONFIG_HOME/glmchat/settings"
# a message that alone cannot fit: refused by its length, the file unchanged
big=$(head -c 20000 /dev/zero | tr '\0' 'a')
expect_fail oneshot_message_too_long "^glmchat: not answered: the system prompt and this message alone are at least [0-9]+ tokens" \
    G -m "$MODEL" --temp 0 -n 8 -c 64 -C "$C" -p "$big"
if cmp -s "$C" "$TMP/before.json"; then ok oneshot_message_too_long_unchanged; else fail oneshot_message_too_long_unchanged "the file changed"; fi

done_tests
