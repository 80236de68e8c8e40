# tmux_lib.sh: driving the real glmchat in tmux, for tests/t_*.sh.
# Sourced after lib.sh.  Every wait polls the screen with a timeout; no
# step relies on a fixed sleep alone.
_tm_n=0
TM_SOCK="$TMP/tmux0.sock"
tm() { tmux -S "$TM_SOCK" -f /dev/null "$@"; }
ART="build/artifacts/$(basename "$0" .sh)-$(basename "$BUILD")"
rm -rf "$ART"
mkdir -p "$ART"
_snap_n=0

# tm_start COLS ROWS COMMAND...: runs COMMAND in a fresh session "ui".  When
# it exits, the pane prints "EXITED <status>" and the terminal modes.
tm_start() {
    cols=$1 rows=$2
    shift 2
    cat >"$TMP/run.sh" <<EOS
"\$@"
echo "EXITED \$?"
stty -a | tr ' ;' '\n\n' | grep -xE -- '-?(icanon|echo)' | tr '\n' ' '
echo
sleep 600
EOS
    tm kill-server 2>/dev/null
    # A fresh server each time: a dying one may still hold the old socket.
    _tm_n=$((_tm_n + 1))
    TM_SOCK="$TMP/tmux$_tm_n.sock"
    tm new-session -d -s ui -x "$cols" -y "$rows" \
        env TERM=tmux-256color LANG=C.UTF-8 LC_ALL=C.UTF-8 sh "$TMP/run.sh" "$@"
}

tm_screen() { tm capture-pane -p -t ui >"$TMP/screen" 2>/dev/null; cat "$TMP/screen"; }

# tm_wait TIMEOUT_S PATTERN: until the screen matches PATTERN (grep -E).
tm_wait() {
    t=$1 pat=$2
    end=$(($(date +%s%N) / 1000000 + t * 1000))
    while :; do
        tm capture-pane -p -t ui >"$TMP/screen" 2>/dev/null
        grep -qE -- "$pat" "$TMP/screen" && return 0
        [ $(($(date +%s%N) / 1000000)) -ge $end ] && return 1
        # The program ended: what we wait for will not come (unless it is
        # what the pane prints after the exit).
        case $pat in *EXITED*|*icanon*) ;; *) grep -q "^EXITED [0-9]" "$TMP/screen" && return 1 ;; esac
        sleep 0.05
    done
}

# tm_wait_all TIMEOUT_S PATTERN...: until one capture of the screen matches
# every PATTERN (grep -E).  (Waiting for one and grepping that capture for
# the rest can catch a redraw half done, on a loaded machine.)  On failure
# TM_MISSING names the patterns the last capture lacked.
tm_wait_all() {
    t=$1
    shift
    end=$(($(date +%s%N) / 1000000 + t * 1000))
    while :; do
        tm capture-pane -p -t ui >"$TMP/screen" 2>/dev/null
        TM_MISSING=
        for pat in "$@"; do
            grep -qE -- "$pat" "$TMP/screen" || TM_MISSING="$TM_MISSING [$pat]"
        done
        [ -z "$TM_MISSING" ] && return 0
        [ $(($(date +%s%N) / 1000000)) -ge $end ] && return 1
        grep -q "^EXITED [0-9]" "$TMP/screen" && return 1
        sleep 0.05
    done
}

# tm_gone TIMEOUT_S PATTERN: until the screen no longer matches.
tm_gone() {
    t=$1 pat=$2
    end=$(($(date +%s%N) / 1000000 + t * 1000))
    while :; do
        tm capture-pane -p -t ui >"$TMP/screen" 2>/dev/null
        grep -qE -- "$pat" "$TMP/screen" || return 0
        [ $(($(date +%s%N) / 1000000)) -ge $end ] && return 1
        sleep 0.05
    done
}

tm_keys() { tm send-keys -t ui "$@"; }
# Types text literally, then Enter.
tm_line() { tm send-keys -t ui -l "$1"; tm send-keys -t ui Enter; }

# tm_snap NAME: keeps the screen text as a test artifact.
tm_snap() {
    _snap_n=$((_snap_n + 1))
    tm capture-pane -p -t ui >"$ART/$(printf %02d $_snap_n)-$1.txt" 2>/dev/null
}

tm_stop() { tm kill-server 2>/dev/null; }

# The pid of the program started by tm_start.
# (From /proc: procps' pgrep is not on every minimal system.)
tm_app_pid() {
    _pp=$(tm display -p -t ui '#{pane_pid}')
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v p="$_pp" '$4 == p { print $1; exit }'
}
