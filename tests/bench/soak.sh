#!/bin/sh
# soak.sh: a long chat in the real UI, watched for what grows.  Runs the
# chat in tmux (side pane open), sends TURNS messages one after the other,
# waits for each answer (the conversation file holds one more answer), and
# every EVERY turns prints the process's resident memory, open file
# descriptors, threads and the last answer's tokens/s.  A leak shows as a
# column that keeps growing after the first turns; memory that levels is
# caches filling once.  Not part of the test suite (it takes minutes):
# run it by hand, or on the GPU machine, before and after a change.
#
#   sh tests/bench/soak.sh [TURNS=200] [EVERY=10]
#   GLMCHAT=path/to/glmchat BACKEND=vulkan|cpu MODEL=FILE (default: the
#   built-in demo model) N=tokens per answer (16) CLEAR=K (/clear every K
#   turns, 0: one conversation; default 0) EXTRA="more options"
#   LOAD_S=300: seconds the model may take to load
#
# Output: one line per EVERY turns,
#   turn  rss_kb  anon_kb  fds  threads  tok/s  seconds
# (anon_kb: RssAnon, the part of RSS that is the process's own memory --
# heap, device memory on lavapipe -- rather than mapped files)
# then the growth of RSS over the second half of the run (a leak keeps
# growing there; caches that fill level out before it).
set -u
TURNS=${1:-200}
EVERY=${2:-10}
GLMCHAT=${GLMCHAT:-./glmchat}
BACKEND=${BACKEND:-vulkan}
MODEL=${MODEL:-}
N=${N:-16}
CLEAR=${CLEAR:-0}
EXTRA=${EXTRA:-}
LOAD_S=${LOAD_S:-300}
command -v tmux >/dev/null 2>&1 || { echo "soak: tmux is not installed" >&2; exit 1; }
case $GLMCHAT in /*) ;; *) GLMCHAT=$PWD/$GLMCHAT ;; esac
MODEL_ARG=
if [ -n "$MODEL" ]; then
    case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
    MODEL_ARG="-m $MODEL"
fi
TMP=$(mktemp -d)
SOCK=$TMP/tmux.sock
tm() { tmux -S "$SOCK" -f /dev/null "$@"; }
trap 'tm kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM HUP PIPE
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
CONV_DIR=$XDG_DATA_HOME/glmchat/conversations

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
# Answers saved so far, over every file of the run (one per /clear).
answers() { cat "$CONV_DIR"/*.json 2>/dev/null | grep -c '"role": "assistant"'; }
rate() { screen; sed -n 's/.*[│x] decode \{1,\}\([0-9.]\{1,\}\).*/\1/p' "$TMP/screen" | head -n 1; }
field() { sed -n "s/^$2:[[:space:]]*\([0-9]*\).*/\1/p" "/proc/$1/status"; }

TERMTYPE=xterm-256color
for t in tmux-256color screen-256color; do
    if tput -T "$t" cols >/dev/null 2>&1; then TERMTYPE=$t; break; fi
done
cat >"$TMP/run.sh" <<EOS
echo \$\$ >"$TMP/pid"
exec "\$@"
EOS
# shellcheck disable=SC2086
tm new-session -d -s ui -x 170 -y 55 env TERM=$TERMTYPE LANG=C.UTF-8 LC_ALL=C.UTF-8 \
    XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" XDG_STATE_HOME="$XDG_STATE_HOME" \
    sh "$TMP/run.sh" "$GLMCHAT" $MODEL_ARG --backend "$BACKEND" --side-pane on --ignore-eos -n "$N" $EXTRA
tm set-option -t ui remain-on-exit on >/dev/null
if ! wait_for "$LOAD_S" '^ Ready'; then
    echo "soak: the chat did not become ready in $LOAD_S s:" >&2
    cat "$TMP/screen" >&2
    exit 1
fi
PID=$(cat "$TMP/pid")
echo "soak: backend $BACKEND, ${MODEL:-the built-in demo model}, $TURNS turns of $N tokens, pid $PID $EXTRA"
printf '%6s %9s %9s %5s %8s %8s %8s\n' turn rss_kb anon_kb fds threads tok/s seconds
t0=$(date +%s)
half_rss=
turn=1
while [ "$turn" -le "$TURNS" ]; do
    a0=$(answers)
    tm send-keys -t ui -l "Tell me about the sea, part $turn."
    tm send-keys -t ui Enter
    end=$(($(date +%s) + 600))
    while [ "$(answers)" -le "$a0" ]; do
        if [ "$(date +%s)" -ge "$end" ] || [ ! -d "/proc/$PID" ]; then
            echo "soak: turn $turn did not end:" >&2
            screen
            cat "$TMP/screen" >&2
            exit 1
        fi
        sleep 0.1
    done
    wait_for 60 '^ Ready' >/dev/null
    if [ $((turn % EVERY)) -eq 0 ] || [ "$turn" -eq "$TURNS" ]; then
        rss=$(field "$PID" VmRSS)
        printf '%6d %9s %9s %5s %8s %8s %8d\n' "$turn" "$rss" "$(field "$PID" RssAnon)" "$(ls "/proc/$PID/fd" | wc -l)" \
            "$(field "$PID" Threads)" "$(rate)" $(($(date +%s) - t0))
        [ -z "$half_rss" ] && [ "$turn" -ge $((TURNS / 2)) ] && half_rss=$rss
    fi
    if [ "$CLEAR" -gt 0 ] && [ $((turn % CLEAR)) -eq 0 ]; then
        tm send-keys -t ui -l "/clear"
        tm send-keys -t ui Enter
        tm send-keys -t ui -l "/clear"
        tm send-keys -t ui Enter
        wait_for 30 'New conversation' >/dev/null
    fi
    turn=$((turn + 1))
done
if [ -n "$half_rss" ]; then
    echo "soak: RSS over the second half: $half_rss -> $rss kB ($((rss - half_rss)) kB)"
fi
tm send-keys -t ui -l "/quit"
tm send-keys -t ui Enter
