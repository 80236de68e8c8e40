#!/bin/sh
# t_oneshot.sh: `glmchat -p`: answers to stdout, determinism with a seed,
# -C conversations, replay and the recorded settings it follows (penalties
# too), inert control characters on a terminal, model discovery (-m,
# $GLMCHAT_MODEL, the XDG models directory, the demo model), exit codes and
# one-line errors.
. tests/lib.sh

MODEL=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf
BACKEND=${GLMCHAT_TEST_BACKEND:-cpu}
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL
G() { "$GLMCHAT" --backend "$BACKEND" "$@"; }

# ---- help and version
if "$GLMCHAT" --help >"$TMP/out" 2>&1 && grep -q -- '-p, --prompt' "$TMP/out"; then ok help; else fail help "$(head -c 200 "$TMP/out")"; fi
if "$GLMCHAT" --version | grep -qE '^glmchat [0-9]+\.[0-9]+'; then ok version; else fail version "no version line"; fi
# --help names --tune and every settings key (issue 28.13: both were missing)
missing=
for k in --tune repeat-penalty presence-penalty frequency-penalty context-overflow side-pane ignore-eos; do
    grep -q -- "$k" "$TMP/out" || missing="$missing $k"
done
if [ -z "$missing" ]; then ok help_tune_and_keys; else fail help_tune_and_keys "--help lacks:$missing"; fi

# ---- an answer, the same twice with --temp 0
G -m "$MODEL" --temp 0 --think off -n 12 -p "hello, the world is 12" >"$TMP/a1" 2>"$TMP/e1"
rc1=$?
G -m "$MODEL" --temp 0 --think off -n 12 -p "hello, the world is 12" >"$TMP/a2" 2>/dev/null
if [ $rc1 -ne 0 ]; then fail answer "exit $rc1: $(head -c 200 "$TMP/e1")"
elif [ -s "$TMP/e1" ]; then fail answer "unexpected stderr: $(head -c 200 "$TMP/e1")"
elif [ "$(tail -c 1 "$TMP/a1" | od -An -c | tr -d ' ')" != '\n' ]; then fail answer "no final newline"
elif ! cmp -s "$TMP/a1" "$TMP/a2"; then fail answer "--temp 0 differs between runs"
else ok answer
fi

# ---- a seed reproduces a sampled answer
G -m "$MODEL" --temp 1.2 --seed 99 -n 20 -p "tell me" >"$TMP/s1" 2>/dev/null
G -m "$MODEL" --temp 1.2 --seed 99 -n 20 -p "tell me" >"$TMP/s2" 2>/dev/null
if cmp -s "$TMP/s1" "$TMP/s2"; then ok seed_reproduces; else fail seed_reproduces "same seed, different answers"; fi

# ---- -C: a conversation grows by one turn per call, and records its settings
C="$TMP/conv.json"
G -m "$MODEL" --temp 0 -n 6 -s "Be brief." -C "$C" -p "first" >/dev/null 2>&1
G -m "$MODEL" --temp 0 -n 6 -C "$C" -p "second" >/dev/null 2>&1
J="$BUILD/tools/json_get"
n=$("$J" "$C" messages --sep , 2>/dev/null | tr ',' '\n' | grep -c role)
if [ "$("$J" "$C" messages.3.content 2>/dev/null)" = "second" ] && [ "$("$J" "$C" messages.0.role)" = system ] &&
   [ "$("$J" "$C" sampling.n_predict)" = 6 ] && [ "$("$J" "$C" version)" = 1 ] &&
   [ "$("$J" "$C" messages.4.role)" = assistant ] && [ "$("$J" "$C" turns.3.tokens)" -le 6 ] 2>/dev/null; then
    ok conversation_file
else
    fail conversation_file "$(head -c 400 "$C")"
fi

# ---- seeds of 2^63 and above are recorded exactly (they were clipped to 2^63-1)
for sd in 9223372036854775808 18446744073709551615; do
    rm -f "$TMP/seed.json"
    G -m "$MODEL" --temp 1 --seed $sd -n 4 -C "$TMP/seed.json" -p "hi" >/dev/null 2>&1
    got=$("$J" "$TMP/seed.json" sampling.seed 2>&1)
    if [ "$got" = "$sd" ]; then ok "seed_recorded_$sd"; else fail "seed_recorded_$sd" "recorded as '$got'"; fi
done

# ---- replay reproduces a recording: it follows the recorded settings
# (template, thinking, sampling, seed) unless the command line overrides
# them, and its metadata lines are comments, so the man page's recipe
# (two replays, grep -v '^#', diff) holds.
rm -f "$TMP/rec.json"
G -m "$MODEL" --temp 1 --think off -n 12 -C "$TMP/rec.json" -p "hello there" >/dev/null 2>&1
G -m "$MODEL" --temp 1 --think off -n 12 -C "$TMP/rec.json" -p "and again" >/dev/null 2>&1
R() { "$GLMCHAT" replay "$@" --backend "$BACKEND"; }
R "$TMP/rec.json" -m "$MODEL" >"$TMP/rep1" 2>"$TMP/rep.err"
R "$TMP/rec.json" -m "$MODEL" >"$TMP/rep2" 2>>"$TMP/rep.err"
# answer_of FILE WHICH N: the indented text after the Nth "--- WHICH" line.
answer_of() { awk -v w="--- $2" -v n="$3" '$0 == w { k++; on = (k == n); next } /^  / { if (on) print; next } { on = 0 }' "$1"; }
grep -v '^#' "$TMP/rep1" >"$TMP/rep1.nc"
grep -v '^#' "$TMP/rep2" >"$TMP/rep2.nc"
if ! cmp -s "$TMP/rep1.nc" "$TMP/rep2.nc"; then fail replay_diff_recipe "two replays differ: $(diff "$TMP/rep1.nc" "$TMP/rep2.nc" | head -c 300)"
elif ! grep -q '^# settings: template glm47, thinking off, temp 1,' "$TMP/rep1"; then fail replay_diff_recipe "settings line: $(grep settings "$TMP/rep1")"
elif grep -qE '^template ' "$TMP/rep1"; then fail replay_diff_recipe "an uncommented settings line"
else ok replay_diff_recipe
fi
# Every turn of a -C conversation is reproduced (the runs share its seed).
for t in 1 2; do
    rec=$(answer_of "$TMP/rep1" "recorded answer" $t)
    new=$(answer_of "$TMP/rep1" "new answer" $t)
    if [ -n "$rec" ] && [ "$rec" = "$new" ]; then ok "replay_reproduces_turn_$t"
    else fail "replay_reproduces_turn_$t" "recorded '$rec', new '$new' ($(head -c 200 "$TMP/rep.err"))"; fi
done
# The recording's --think off is used (the default is on) unless given.
R "$TMP/rec.json" -m "$MODEL" --think on -n 2 >"$TMP/rep3" 2>/dev/null
if grep -q '^# settings: template glm47, thinking on, temp 1, .*n-predict 2$' "$TMP/rep3"; then ok replay_command_line_overrides
else fail replay_command_line_overrides "$(grep settings "$TMP/rep3")"; fi
# A seed of 2^64-1 is recorded and replayed exactly.
rm -f "$TMP/big.json"
G -m "$MODEL" --temp 1 --think off --seed 18446744073709551615 -n 12 -C "$TMP/big.json" -p "hi" >/dev/null 2>&1
R "$TMP/big.json" -m "$MODEL" >"$TMP/rep4" 2>/dev/null
rec=$(answer_of "$TMP/rep4" "recorded answer" 1)
new=$(answer_of "$TMP/rep4" "new answer" 1)
if grep -q 'seed 18446744073709551615,' "$TMP/rep4" && [ -n "$rec" ] && [ "$rec" = "$new" ]; then ok replay_big_seed
else fail replay_big_seed "$(grep settings "$TMP/rep4"); recorded '$rec', new '$new'"; fi
# Each answer records the sampler's draw with its seed; a replay of answers
# recorded before it was (another order of the draw: the same seed gives
# another sampled answer) says so on a comment line, and only there.
if [ "$(grep -c '"draw": "id"' "$TMP/rec.json")" = 2 ]; then ok draw_recorded
else fail draw_recorded "draw entries: $(grep '"draw"' "$TMP/rec.json" | head -c 200)"; fi
sed -E '/"seed": [0-9]+,$/{N;s/,\n *"draw": "id"$//}' "$TMP/rec.json" >"$TMP/old.json"
R "$TMP/old.json" -m "$MODEL" >"$TMP/rep5" 2>"$TMP/rep5.err"
R "$TMP/old.json" -m "$MODEL" --temp 0 >"$TMP/rep6" 2>>"$TMP/rep5.err"
note='^# note: another glmchat drew the recorded answer \(its draw: order; this one.s: id\), so with the same seed'
if [ "$(grep -cE "$note" "$TMP/rep5")" = 2 ] && ! grep -q '# note: another glmchat' "$TMP/rep1" "$TMP/rep6" &&
    grep -v '^#' "$TMP/rep5" | cmp -s - "$TMP/rep1.nc"; then ok replay_notes_an_older_draw
else fail replay_notes_an_older_draw "$(grep -c 'note' "$TMP/rep5") notes; $(head -c 200 "$TMP/rep5.err")"; fi
# A full disk: a truncated transcript must not pass for a whole one.
R "$TMP/rec.json" -m "$MODEL" >/dev/full 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "^glmchat: standard output: No space left on device$" "$TMP/err"; then ok replay_stdout_full
else fail replay_stdout_full "exit $rc: $(head -c 200 "$TMP/err")"; fi

# ---- the penalties are recorded and followed.  A -C conversation made with
# penalties replays with the same answers (they were not recorded, so a
# replay ran without them); -C goes on with the recorded ones unless the
# command line gives others; a file without them (as glmchat wrote before)
# loads and replays with the current settings.
rm -f "$TMP/pen.json"
G -m "$MODEL" --temp 1 --seed 21 --think off -n 24 --repeat-penalty 1.3 --presence-penalty 0.5 \
  -C "$TMP/pen.json" -p "hello there" >/dev/null 2>&1
G -m "$MODEL" -C "$TMP/pen.json" -p "and again" >/dev/null 2>&1
pens() { echo "$("$J" "$1" sampling.repeat_penalty) $("$J" "$1" sampling.presence_penalty) $("$J" "$1" sampling.frequency_penalty)"; }
if [ "$(pens "$TMP/pen.json" 2>&1)" = "1.3 0.5 0" ] && [ "$("$J" "$TMP/pen.json" messages.3.role)" = assistant ]; then
    ok penalties_recorded
else fail penalties_recorded "sampling: $(pens "$TMP/pen.json" 2>&1)"; fi
R "$TMP/pen.json" -m "$MODEL" >"$TMP/pen1" 2>"$TMP/pen.err"
R "$TMP/pen.json" -m "$MODEL" >"$TMP/pen2" 2>>"$TMP/pen.err"
grep -v '^#' "$TMP/pen1" >"$TMP/pen1.nc"
grep -v '^#' "$TMP/pen2" >"$TMP/pen2.nc"
if ! cmp -s "$TMP/pen1.nc" "$TMP/pen2.nc"; then fail penalties_replay_twice "two replays differ: $(diff "$TMP/pen1.nc" "$TMP/pen2.nc" | head -c 300)"
elif ! grep -q '^# settings: .*, min-p 0.01, repeat-penalty 1.3, presence-penalty 0.5, frequency-penalty 0, seed 21,' "$TMP/pen1"
then fail penalties_replay_twice "settings line: $(grep settings "$TMP/pen1")"
else ok penalties_replay_twice
fi
# Both turns as recorded: the second was made by a -C run that gave no penalties.
for t in 1 2; do
    rec=$(answer_of "$TMP/pen1" "recorded answer" $t)
    new=$(answer_of "$TMP/pen1" "new answer" $t)
    if [ -n "$rec" ] && [ "$rec" = "$new" ]; then ok "penalties_replay_reproduces_turn_$t"
    else fail "penalties_replay_reproduces_turn_$t" "recorded '$rec', new '$new' ($(head -c 200 "$TMP/pen.err"))"; fi
done
# The penalties make a difference here (else the cases above prove nothing),
# and the command line overrides the recording.
R "$TMP/pen.json" -m "$MODEL" --repeat-penalty 1 --presence-penalty 0 >"$TMP/pen3" 2>/dev/null
changed=0
for t in 1 2; do
    [ "$(answer_of "$TMP/pen3" "recorded answer" $t)" = "$(answer_of "$TMP/pen3" "new answer" $t)" ] || changed=1
done
if [ $changed -eq 1 ] && grep -q 'repeat-penalty 1, presence-penalty 0, frequency-penalty 0, seed 21,' "$TMP/pen3"; then
    ok penalties_matter_and_override
else fail penalties_matter_and_override "changed $changed: $(grep settings "$TMP/pen3")"; fi
G -m "$MODEL" --frequency-penalty -0.25 --repeat-penalty 1.1 -C "$TMP/pen.json" -p "once more" >/dev/null 2>&1
if grep -q '"repeat_penalty": 1.1,' "$TMP/pen.json" && grep -q '"presence_penalty": 0.5,' "$TMP/pen.json" &&
   grep -q '"frequency_penalty": -0.25,' "$TMP/pen.json"; then ok penalties_continue_command_line
else fail penalties_continue_command_line "sampling: $(grep penalty "$TMP/pen.json" | tr -d '\n')"; fi
# A file without the penalty fields: loads, replays as recorded (it was made
# without penalties), and takes the settings file's penalties, which a
# recording that has them overrides.
grep -v '_penalty"' "$TMP/rec.json" >"$TMP/old.json"
R "$TMP/old.json" -m "$MODEL" >"$TMP/old1" 2>"$TMP/old.err"
rc=$?
rec=$(answer_of "$TMP/old1" "recorded answer" 2)
new=$(answer_of "$TMP/old1" "new answer" 2)
if grep -q penalty "$TMP/old.json"; then fail penalties_absent_replays "the fields are still there"
elif [ $rc -ne 0 ] || [ -z "$rec" ] || [ "$rec" != "$new" ]; then fail penalties_absent_replays "exit $rc, recorded '$rec', new '$new' ($(head -c 200 "$TMP/old.err"))"
elif ! grep -q 'repeat-penalty 1, presence-penalty 0, frequency-penalty 0,' "$TMP/old1"; then fail penalties_absent_replays "$(grep settings "$TMP/old1")"
else ok penalties_absent_replays
fi
mkdir -p "$XDG_CONFIG_HOME/glmchat"
printf 'repeat-penalty = 1.2\nfrequency-penalty = 0.1\n' >"$XDG_CONFIG_HOME/glmchat/settings"
R "$TMP/old.json" -m "$MODEL" -n 1 >"$TMP/old2" 2>/dev/null
R "$TMP/rec.json" -m "$MODEL" -n 1 >"$TMP/rec2" 2>/dev/null
rm "$XDG_CONFIG_HOME/glmchat/settings"
if grep -q 'repeat-penalty 1.2, presence-penalty 0, frequency-penalty 0.1,' "$TMP/old2" &&
   grep -q 'repeat-penalty 1, presence-penalty 0, frequency-penalty 0,' "$TMP/rec2"; then ok penalties_settings_file_vs_recording
else fail penalties_settings_file_vs_recording "$(grep settings "$TMP/old2" "$TMP/rec2")"; fi
# -C keeps the recorded template and thinking too (the file has one record
# of them), but another model file brings its own template.
rm -f "$TMP/tpl.json"
G -m "$MODEL" --temp 0 --template chatml --think off -n 2 -C "$TMP/tpl.json" -p one >/dev/null 2>&1
G -m "$MODEL" --temp 0 -n 2 -C "$TMP/tpl.json" -p two >/dev/null 2>&1
t1="$("$J" "$TMP/tpl.json" template 2>&1) $("$J" "$TMP/tpl.json" thinking 2>&1) $("$J" "$TMP/tpl.json" messages.3.role 2>&1)"
G -m "${MODEL%.f32.gguf}.q8_0.gguf" --temp 0 -n 2 -C "$TMP/tpl.json" -p three >/dev/null 2>&1
t2="$("$J" "$TMP/tpl.json" template 2>&1) $("$J" "$TMP/tpl.json" thinking 2>&1) $("$J" "$TMP/tpl.json" messages.5.role 2>&1)"
if [ "$t1" = "chatml false assistant" ] && [ "$t2" = "glm47 false assistant" ]; then ok continue_keeps_template_and_thinking
else fail continue_keeps_template_and_thinking "same model: '$t1'; another: '$t2'"; fi
# 0.1, the range's end, is accepted (it was compared as a double, below 0.1f).
G -m "$MODEL" --temp 0 --think off -n 2 --repeat-penalty 0.1 -p hi >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ]; then ok repeat_penalty_range_end; else fail repeat_penalty_range_end "exit $rc: $(head -c 200 "$TMP/err")"; fi

# ---- control characters: inert on a terminal, raw bytes into a pipe.
# Random tokens of the tiny byte-level vocabulary include control bytes.
ARGS="-m $MODEL --temp 1.5 --seed 3 -n 300 --think off -p go"
G $ARGS >"$TMP/piped" 2>/dev/null
script -qec "$GLMCHAT --backend $BACKEND $ARGS 2>/dev/null" /dev/null >"$TMP/tty" </dev/null
# bytes other than tab, newline and carriage return below 0x20, and DEL
ctl() { od -An -v -tu1 "$1" | tr -s ' ' '\n' | awk '$1 != "" && (($1 < 32 && $1 != 9 && $1 != 10 && $1 != 13) || $1 == 127)' | wc -l; }
if [ "$(ctl "$TMP/piped")" -eq 0 ]; then fail tty_inert "the test answer holds no control bytes; it cannot show anything"
elif [ "$(ctl "$TMP/tty")" -ne 0 ]; then fail tty_inert "$(ctl "$TMP/tty") control bytes reached the terminal"
elif ! grep -q '\^' "$TMP/tty"; then fail tty_inert "no ^X forms on the terminal"
else ok tty_inert
fi

# ---- finding the model
G --temp 0 -n 4 -p hi >"$TMP/out" 2>"$TMP/err"
if [ $? -eq 0 ] && grep -q "demo model" "$TMP/err"; then ok demo_model; else fail demo_model "$(head -c 200 "$TMP/err")"; fi
GLMCHAT_MODEL="$MODEL" G --temp 0 -n 4 -p hi -C "$TMP/env.json" >/dev/null 2>"$TMP/err"
if ! grep -q demo "$TMP/err" && grep -q "tiny-glm-a.f32.gguf" "$TMP/env.json"; then ok env_model; else fail env_model "$(head -c 200 "$TMP/err")"; fi
mkdir -p "$XDG_DATA_HOME/glmchat/models"
ln -s "$PWD/$MODEL" "$XDG_DATA_HOME/glmchat/models/tiny.gguf"
G --temp 0 -n 4 -p hi -C "$TMP/xdg.json" >/dev/null 2>"$TMP/err"
if ! grep -q demo "$TMP/err" && grep -q "models/tiny.gguf" "$TMP/xdg.json"; then ok xdg_model; else fail xdg_model "$(head -c 200 "$TMP/err")"; fi
# Several files there: the first by name runs, and stderr says which (issue 28.13: the choice was silent).
ln -s "$PWD/$MODEL" "$XDG_DATA_HOME/glmchat/models/another.gguf"
G --temp 0 -n 4 -p hi -C "$TMP/xdg2.json" >/dev/null 2>"$TMP/err"
if grep -q "models/another.gguf" "$TMP/xdg2.json" &&
   grep -q "^glmchat: note: Model: another.gguf, the first by name of the 2 .gguf files in .*glmchat/models" "$TMP/err"; then
    ok xdg_model_choice_said
else
    fail xdg_model_choice_said "$(head -c 300 "$TMP/err")"
fi
rm "$XDG_DATA_HOME/glmchat/models/tiny.gguf" "$XDG_DATA_HOME/glmchat/models/another.gguf"
mkdir -p "$XDG_CONFIG_HOME/glmchat"
echo "model = $PWD/$MODEL" >"$XDG_CONFIG_HOME/glmchat/settings"
G --temp 0 -n 4 -p hi -C "$TMP/set.json" >/dev/null 2>"$TMP/err"
if grep -q "tiny-glm-a.f32.gguf" "$TMP/set.json"; then ok settings_model; else fail settings_model "$(head -c 200 "$TMP/err")"; fi
rm "$XDG_CONFIG_HOME/glmchat/settings"

# ---- errors: one line, the right status
expect_fail missing_model 'glmchat: .*nonexistent\.gguf' G -m "$TMP/nonexistent.gguf" -p hi
expect_fail not_a_model "glmchat: .*$TMP/conv.json" G -m "$TMP/conv.json" -p hi
expect_fail unknown_option "unknown option '--frobnicate'" G --frobnicate -p hi
expect_fail bad_temp "temp: 'hot' is not a number" G --temp hot -p hi
expect_fail bad_top_p "top-p: 2 is out of range" G --top-p 2 -p hi
expect_fail missing_value "option -n needs a value" G -p hi -n
expect_fail unknown_template "unknown template 'nope'" G -m "$MODEL" --template nope -p hi
expect_fail unknown_backend "unknown backend 'gpu9'" "$GLMCHAT" --backend gpu9 -m "$MODEL" -p hi
# Every usage error exits 2, as the man page says (--template foo exited 1).
bad=
for args in "--frobnicate -p hi" "-p" "-p hi -n" "-p hi -n many" "-p hi --template foo" "-p hi --backend gpu9" \
            "-p hi --think maybe" "-p hi --ctx 3" "-p hi --side-pane maybe" "-p hi --mouse sometimes" \
            "-p hi --side-width 3" "-p hi --tokens 1" "-p hi extra" "replay" "replay --temp 0" \
            "replay a.json --template foo" "info" "logits" "generate" "mkmodel" "mkmodel --type f32" "frob"; do
    "$GLMCHAT" $args >/dev/null 2>"$TMP/err" </dev/null
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -ge 1 ] || bad="$bad [$args: $rc]"
done
if [ -z "$bad" ]; then ok usage_status_2; else fail usage_status_2 "not status 2:$bad"; fi
# Every settings key is a long option (--side-pane and --mouse were refused).
G -m "$MODEL" --temp 0 -n 2 --side-pane off --mouse off --side-width 30 --theme mono --device 0 -p hi >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ]; then ok settings_keys_are_options; else fail settings_keys_are_options "exit $rc: $(head -c 200 "$TMP/err")"; fi
# A bad name in the settings file is that file's error (status 1, FILE:LINE).
mkdir -p "$XDG_CONFIG_HOME/glmchat"
printf 'template = foo\n' >"$XDG_CONFIG_HOME/glmchat/settings"
expect_fail settings_bad_template "^glmchat: $XDG_CONFIG_HOME/glmchat/settings:1: unknown template 'foo'" G -m "$MODEL" -p hi
G -m "$MODEL" -p hi >/dev/null 2>&1
if [ $? -eq 1 ]; then ok settings_error_status_1; else fail settings_error_status_1 "a bad settings file must exit 1"; fi
rm "$XDG_CONFIG_HOME/glmchat/settings"
G -m "$TMP/nonexistent.gguf" -p hi >/dev/null 2>&1
if [ $? -eq 1 ]; then ok runtime_status_1; else fail runtime_status_1 "a missing model must exit 1"; fi
if [ "$(G -m "$TMP/nonexistent.gguf" -p hi 2>&1 | wc -l)" -eq 1 ]; then ok one_line_error; else fail one_line_error "more than one line"; fi

# ---- signals: SIGINT, SIGTERM, SIGHUP and SIGPIPE each stop the answer,
# save what was generated into -C, and exit 128 + the signal (SIGHUP and
# SIGPIPE saved nothing; SIGTERM exited 130).  A long answer (no end of
# turn, a big context) is interrupted once its first text has arrived.
LONG="-m $MODEL --temp 1 --seed 5 --think off --ignore-eos -n 100000 -c 65536"
# wait_file FILE TIMEOUT_S: until FILE is not empty.
wait_file() {
    end=$(($(date +%s) + $2))
    while [ ! -s "$1" ]; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.05
    done
}
check_signal() { # NAME SIGNAL STATUS
    rm -f "$TMP/sig.json" "$TMP/sig.out"
    # exec: the signal goes to glmchat itself, not to a subshell waiting for it.
    (exec "$GLMCHAT" --backend "$BACKEND" $LONG -C "$TMP/sig.json" -p "go on" >"$TMP/sig.out" 2>"$TMP/sig.err") &
    pid=$!
    if ! wait_file "$TMP/sig.out" 60; then kill -9 $pid; wait $pid; fail "$1" "no answer began"; return; fi
    kill -"$2" $pid
    wait $pid
    rc=$?
    if [ $rc -ne "$3" ]; then fail "$1" "exit status $rc, expected $3 ($(head -c 200 "$TMP/sig.err"))"
    elif [ "$("$J" "$TMP/sig.json" messages.1.role 2>/dev/null)" != assistant ] ||
         [ "$("$J" "$TMP/sig.json" turns.1.stopped 2>/dev/null)" != true ]; then fail "$1" "the partial answer was not saved"
    elif [ -z "$("$J" "$TMP/sig.json" messages.1.content 2>/dev/null)" ]; then fail "$1" "the saved answer is empty"
    else ok "$1"
    fi
}
check_signal sigint_saves_130 INT 130
check_signal sigterm_saves_143 TERM 143
check_signal sighup_saves_129 HUP 129
# SIGPIPE: the reader goes away after the first bytes.
rm -f "$TMP/sig.json"
{ G $LONG -C "$TMP/sig.json" -p "go on" 2>"$TMP/sig.err"; echo $? >"$TMP/sig.rc"; } | head -c 10 >/dev/null
rc=$(cat "$TMP/sig.rc")
if [ "$rc" != 141 ]; then fail sigpipe_saves_141 "exit status $rc ($(head -c 200 "$TMP/sig.err"))"
elif [ "$("$J" "$TMP/sig.json" turns.1.stopped 2>/dev/null)" != true ]; then fail sigpipe_saves_141 "the partial answer was not saved"
elif [ -s "$TMP/sig.err" ]; then fail sigpipe_saves_141 "a closed pipe is no error to report: $(head -c 200 "$TMP/sig.err")"
else ok sigpipe_saves_141
fi

# ---- output errors: a full disk is reported, with status 1 (it was exit 0)
G -m "$MODEL" --temp 0 --think off -n 8 -p hi >/dev/full 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "^glmchat: standard output: No space left on device$" "$TMP/err"; then ok stdout_full
else fail stdout_full "exit $rc: $(head -c 200 "$TMP/err")"; fi
# Every command's output: info, --help, the version.
for cmd in "info -m $MODEL" "--help" "--version" "help"; do
    "$GLMCHAT" $cmd >/dev/full 2>"$TMP/err"
    rc=$?
    if [ $rc -ne 0 ] && grep -q "^glmchat: standard output: No space left on device$" "$TMP/err"; then ok "stdout_full_${cmd%% *}"
    else fail "stdout_full_${cmd%% *}" "exit $rc: $(head -c 200 "$TMP/err")"; fi
done
# The turn is still saved: nothing the user wrote is lost.
rm -f "$TMP/full.json"
G -m "$MODEL" --temp 0 --think off -n 8 -C "$TMP/full.json" -p hi >/dev/full 2>/dev/null
if [ "$("$J" "$TMP/full.json" messages.0.content 2>/dev/null)" = hi ]; then ok stdout_full_saves; else fail stdout_full_saves "no turn saved"; fi

# ---- concurrent runs on one file: all eight turns are kept (1 of 8 was)
rm -f "$TMP/par.json"
G -m "$MODEL" --temp 0 -n 2 -C "$TMP/par.json" -p "start" >/dev/null 2>&1
k=0
while [ $k -lt 8 ]; do
    (G -m "$MODEL" --temp 0 -n 2 -C "$TMP/par.json" -p "parallel $k" >/dev/null 2>"$TMP/par$k.err"; echo $? >"$TMP/par$k.rc") &
    k=$((k + 1))
done
wait
bad=0 k=0
while [ $k -lt 8 ]; do
    [ "$(cat "$TMP/par$k.rc")" = 0 ] || bad=$((bad + 1))
    grep -q "parallel $k\"" "$TMP/par.json" || bad=$((bad + 1))
    k=$((k + 1))
done
n=0
while "$J" "$TMP/par.json" messages.$n.role >/dev/null 2>&1; do n=$((n + 1)); done
if [ $bad -eq 0 ] && [ "$n" -eq 18 ]; then ok parallel_runs_keep_every_turn
else fail parallel_runs_keep_every_turn "$n messages (expected 18), $bad runs failed or lost: $(cat "$TMP"/par*.err | head -c 300)"; fi
if ls -a "$TMP" | grep -qE '^\.par\.json\.(lock|tmp\.)'; then fail parallel_no_litter "$(ls -a "$TMP" | grep par)"; else ok parallel_no_litter; fi

# ---- the prompt from stdin: `-p -`, and piped stdin after -p TEXT
rm -f "$TMP/in1.json" "$TMP/in2.json"
printf 'what stdin says\n' | G -m "$MODEL" --temp 0 -n 2 -C "$TMP/in1.json" -p - >/dev/null 2>&1
printf 'the data\n' | G -m "$MODEL" --temp 0 -n 2 -C "$TMP/in2.json" -p "summarize" >/dev/null 2>&1
if [ "$("$J" "$TMP/in1.json" messages.0.content 2>/dev/null)" = "what stdin says" ]; then ok prompt_dash_stdin
else fail prompt_dash_stdin "user message '$("$J" "$TMP/in1.json" messages.0.content 2>&1)'"; fi
want=$(printf 'summarize\n\nthe data')
if [ "$("$J" "$TMP/in2.json" messages.0.content 2>/dev/null)" = "$want" ]; then ok prompt_stdin_appended
else fail prompt_stdin_appended "user message '$("$J" "$TMP/in2.json" messages.0.content 2>&1)'"; fi
expect_fail prompt_dash_empty "^glmchat: -p -: nothing on standard input" sh -c "\"\$0\" --backend $BACKEND -m $MODEL -p - </dev/null" "$GLMCHAT"
# ---- an answer that is all reasoning says so (and still exits 0)
G -m "$MODEL" --temp 0 -n 3 -p hi </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "the answer is empty: all 3 generated tokens went into the reasoning" "$TMP/err"; then ok empty_answer_note
else fail empty_answer_note "exit $rc: $(head -c 200 "$TMP/err")"; fi
# ... and advises raising -n only when -n ended it (issue 28.13): here the context did.
G -m "$MODEL" --temp 0 -c 40 --ignore-eos -p hi </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "the answer is empty: .*until the context (40 tokens) was full" "$TMP/err" &&
   ! grep -q -- "-n" "$TMP/err"; then
    ok empty_answer_advice_without_n
else
    fail empty_answer_advice_without_n "exit $rc: $(head -c 300 "$TMP/err")"
fi

done_tests
