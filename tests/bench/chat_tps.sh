#!/bin/sh
# chat_tps.sh: the chat's own decode speed, as a user sees it.  Runs the
# real chat UI in tmux on MODEL (side pane open, the model preset's default
# sampling, --think off so that a random model's tokens are answer text),
# types a message ANSWERS times, waits for each answer of exactly N tokens
# (--ignore-eos -n N: done when the pane's generated count has grown by N
# and the status says Ready), and prints each answer's tok/s
# (the pane's decode figure, which is the answer header's and the status
# line's) and the final screen (the kernel table).  Compare with
# `glmchat bench -m MODEL -n N` (tg N, the chat's sampling) on the same
# machine, in the same call.
#
#   sh tests/bench/chat_tps.sh MODEL [N=128] [ANSWERS=3]
#   GLMCHAT=path/to/glmchat BACKEND=vulkan|cpu EXTRA="--repeat-penalty 1.1"
#   LOAD_S=300: seconds the model may take to load
#   MSG_WORDS=W: each message W words longer (a long prompt; the pane's
#   prefill figure is printed with each answer's rate)
set -u
MODEL=${1:?usage: chat_tps.sh MODEL [N] [ANSWERS]}
N=${2:-128}
ANSWERS=${3:-3}
GLMCHAT=${GLMCHAT:-./glmchat}
BACKEND=${BACKEND:-vulkan}
EXTRA=${EXTRA:-}
LOAD_S=${LOAD_S:-300}
MSG_WORDS=${MSG_WORDS:-0}
command -v tmux >/dev/null 2>&1 || { echo "chat_tps: tmux is not installed" >&2; exit 1; }
case $GLMCHAT in /*) ;; *) GLMCHAT=$PWD/$GLMCHAT ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
TMP=$(mktemp -d)
SOCK=$TMP/tmux.sock
tm() { tmux -S "$SOCK" -f /dev/null "$@"; }
trap 'tm kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM HUP PIPE
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"

screen() { tm capture-pane -p -t ui >"$TMP/screen" 2>/dev/null; }
# wait_for SECONDS PATTERN (grep -E on the screen), polling
wait_for() {
    end=$(($(date +%s) + $1))
    while [ "$(date +%s)" -lt "$end" ]; do
        screen
        grep -qE -- "$2" "$TMP/screen" && return 0
        sleep 0.2
    done
    return 1
}
# The pane's counts ("session  P prompt, G generated": prompt tokens read,
# tokens the answers generated) and the last answer's rate ("decode  R (last)").
generated() { screen; sed -n 's/.* \([0-9]\{1,\}\) generated.*/\1/p' "$TMP/screen" | head -n 1; }
rate() { sed -n 's/.*[│x] decode \{1,\}\([0-9.]\{1,\}\) (last).*/\1/p' "$TMP/screen" | head -n 1; }

# The pane stays after the program ends, with its exit status (so a failed
# start shows why).  The terminal type: the first this machine knows.
TERMTYPE=xterm-256color
for t in tmux-256color screen-256color; do
    if tput -T "$t" cols >/dev/null 2>&1; then TERMTYPE=$t; break; fi
done
cat >"$TMP/run.sh" <<EOS
"\$@"
echo "EXITED \$?"
sleep 600
EOS
# shellcheck disable=SC2086
tm new-session -d -s ui -x 170 -y 55 env TERM=$TERMTYPE LANG=C.UTF-8 LC_ALL=C.UTF-8 \
    XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" XDG_STATE_HOME="$XDG_STATE_HOME" \
    sh "$TMP/run.sh" "$GLMCHAT" -m "$MODEL" --backend "$BACKEND" --think off --ignore-eos -n "$N" $EXTRA
if ! wait_for "$LOAD_S" '^ Ready|^EXITED' || grep -q '^EXITED' "$TMP/screen"; then
    echo "chat_tps: the chat did not become ready in $LOAD_S s:" >&2
    cat "$TMP/screen" >&2
    exit 1
fi
echo "chat_tps: $MODEL, backend $BACKEND, answers of $N tokens, sampling: the preset's default $EXTRA (TERM $TERMTYPE)"
i=1
while [ "$i" -le "$ANSWERS" ]; do
    g0=$(generated)
    msg="Tell me a long story about the sea, part $i."
    [ "$MSG_WORDS" -gt 0 ] &&
        msg="$msg $(yes 'waves roll over the old stone pier at dawn' | head -n $((MSG_WORDS / 9 + 1)) | tr '\n' ' ')"
    tm send-keys -t ui -l "$msg"
    tm send-keys -t ui Enter
    # an answer of N tokens (the pane counts as the answers' headers do)
    end=$(($(date +%s) + 600))
    while [ "$(date +%s)" -lt "$end" ]; do
        g=$(generated)
        [ -n "$g" ] && [ "$g" -ge $((${g0:-0} + N)) ] && grep -q '^ \(Ready\|Stopped\)' "$TMP/screen" && break
        sleep 0.2
    done
    r=$(rate)
    [ -n "$r" ] && [ "$(date +%s)" -lt "$end" ] || { echo "chat_tps: answer $i did not finish" >&2; cat "$TMP/screen" >&2; exit 1; }
    pf=$(sed -n 's/.*[│x] prefill \{1,\}\([0-9.]\{1,\}\).*/\1/p' "$TMP/screen" | head -n 1)
    echo "answer $i: $N tokens, $r tok/s${pf:+, prefill $pf tok/s}"
    i=$((i + 1))
done
screen
# (the pane's border: a line-drawing character, or 'x' where the terminal
# type draws them so)
echo "pane: $(sed -n 's/.*[│x] \(decode .*\)/\1/p' "$TMP/screen" | tr -s ' ' | head -n 1)"
echo "pane: $(sed -n 's/.*[│x] \(token .*\)/\1/p' "$TMP/screen" | tr -s ' ' | head -n 1)"
echo "---- screen"
cat "$TMP/screen"
