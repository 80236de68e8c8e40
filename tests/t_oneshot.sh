#!/bin/sh
# t_oneshot.sh: `glmchat -p`: answers to stdout, determinism with a seed,
# -C conversations, inert control characters on a terminal, model
# discovery (-m, $GLMCHAT_MODEL, the XDG models directory, the demo model),
# exit codes and one-line errors.
. tests/lib.sh

MODEL=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf
BACKEND=${GLMCHAT_TEST_BACKEND:-cpu}
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL
G() { "$GLMCHAT" --backend "$BACKEND" "$@"; }

# ---- help and version
if "$GLMCHAT" --help >"$TMP/out" 2>&1 && grep -q -- '-p, --prompt' "$TMP/out"; then ok help; else fail help "$(head -c 200 "$TMP/out")"; fi
if "$GLMCHAT" --version | grep -qE '^glmchat [0-9]+\.[0-9]+'; then ok version; else fail version "no version line"; fi

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
rm "$XDG_DATA_HOME/glmchat/models/tiny.gguf"
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
"$GLMCHAT" --frobnicate -p hi >/dev/null 2>&1
if [ $? -eq 2 ]; then ok usage_status_2; else fail usage_status_2 "usage errors must exit 2"; fi
G -m "$TMP/nonexistent.gguf" -p hi >/dev/null 2>&1
if [ $? -eq 1 ]; then ok runtime_status_1; else fail runtime_status_1 "a missing model must exit 1"; fi
if [ "$(G -m "$TMP/nonexistent.gguf" -p hi 2>&1 | wc -l)" -eq 1 ]; then ok one_line_error; else fail one_line_error "more than one line"; fi

# ---- Ctrl-C: the answer stops, the status says so (130).  A long prompt
# in small chunks keeps the model busy long enough to be interrupted.
long=$(awk 'BEGIN { for (i = 0; i < 200; i++) printf "the quick brown fox %d ", i }')
(exec "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" -b 4 -c 8192 -n 50 -p "$long" >/dev/null 2>&1) &
pid=$!
sleep 0.5
kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ]; then ok sigint_130; else fail sigint_130 "exit status $rc after SIGINT"; fi

done_tests
