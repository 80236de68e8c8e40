# ui_lib.sh: what the tmux tests of the chat UI share (tests/t_ui_*.sh):
# the backend and model they run, a private XDG home, starting the app,
# waiting for answers.  Sourced after lib.sh and tmux_lib.sh.

# The UI runs on the Vulkan backend (lavapipe in CI) when a device is
# there, else on the CPU; GLMCHAT_TEST_BACKEND picks one.  The sanitizer
# run (TEST_QUICK) looks for memory errors in the UI's host code, which is
# the same on either backend: there the CPU, whose answers on the model
# below take milliseconds where lavapipe's under ASan take seconds (a
# 670-token prompt: 20 s; t_ui_tmux went from 109 s to 15 s).  The Vulkan
# backend's host code has its own tests under the sanitizers, t_ui_profile
# keeps the chat on Vulkan there, and the normal run keeps every UI test on
# lavapipe.
BACKEND=${GLMCHAT_TEST_BACKEND:-}
[ -z "$BACKEND" ] && [ "${TEST_QUICK:-0}" = 1 ] && BACKEND=cpu
if [ -z "$BACKEND" ]; then
    if "$GLMCHAT" devices >/dev/null 2>&1; then BACKEND=vulkan; else BACKEND=cpu; fi
fi
echo "  (backend: $BACKEND)"
# --ignore-eos makes every answer exactly -n tokens long, so an answer of
# 2000 tokens runs long enough to be stopped and resized in the middle.  On
# the CPU backend a model larger than mkmodel's demo preset keeps a token at
# 5-15 ms on one core; on lavapipe the demo preset itself is that slow (the
# random model that was built in before the trained one, which is far
# smaller and faster).
if [ "$BACKEND" = cpu ]; then
    "$GLMCHAT" mkmodel --preset demo --type Q8_0 --hidden 768 --layers 4 --experts 8 --ff 2048 --moe-ff 512 \
        --quiet -o "$TMP/ui.gguf" || { fail ui_model "mkmodel failed"; done_tests; }
    MODEL_ARGS="-m $TMP/ui.gguf -t 1"
else
    "$GLMCHAT" mkmodel --preset demo --type Q4_K_M --seed 4747 --quiet -o "$TMP/ui.gguf" >/dev/null ||
        { fail ui_model "mkmodel failed"; done_tests; }
    MODEL_ARGS="-m $TMP/ui.gguf"
fi
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
CONV_DIR="$XDG_DATA_HOME/glmchat/conversations"
APP="$PWD/$GLMCHAT"
[ "${GLMCHAT#/}" != "$GLMCHAT" ] && APP="$GLMCHAT"
T=60   # seconds any single step may take (sanitizer builds are slow)

# start_app_size COLS ROWS [OPTIONS...]: the chat on the test model, with
# fixed-length answers (16 tokens unless OPTIONS say otherwise) and seed 11
# (UI_SEED= for none: a new seed for every answer).
start_app_size() {
    _c=$1 _r=$2
    shift 2
    tm_start "$_c" "$_r" env XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" \
        XDG_STATE_HOME="$XDG_STATE_HOME" "$APP" --backend "$BACKEND" $MODEL_ARGS --template chatml \
        --temp 2 ${UI_SEED---seed 11} --ignore-eos -n 16 "$@"
}
start_app() { start_app_size 120 40 "$@"; }

# Waits for the screen to show the app ready; false when it did not.
app_ready() { tm_wait $T '^ Ready'; }

# Quits with /quit and waits for the exit; a failure (named NAME, default
# ui_quit) when it did not exit 0, which is also how a sanitizer's report
# at exit shows.
quit_app() {
    tm_line "/quit"
    tm_wait $T "^EXITED 0" && return 0
    fail "${1:-ui_quit}" "$(tm_screen | grep -v '^ *$' | tail -5)"
    return 1
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

# Sends a message and waits until its answer is complete (N answers on screen).
answered() {
    _n=$(done_answers)
    tm_line "$1"
    _end=$(($(date +%s) + T))
    while [ "$(done_answers)" -le "$_n" ]; do
        [ "$(date +%s)" -ge $_end ] && return 1
        sleep 0.05
    done
    tm_gone $T "Answering"
}

# The input line's text (the row starting with "> "), trailing blanks and the side pane cut.
input_line() { tm_screen | grep -E '^> ' | tail -n 1 | sed 's/ *│.*//; s/ *$//'; }
