#!/bin/sh
# t_sampling_values.sh: absurd sampler settings are refused on every entry
# path -- the command line of the chat and of `generate`, the settings
# file, a conversation file (-C and replay) -- with one line naming the
# value, and nothing runs (issue 28.2: a temperature below ~3e-39 was
# accepted everywhere; the CPU sampler then read out of bounds and the GPU
# sampler failed).  /set goes through the same check (test_ui_session).
. tests/lib.sh

MODEL=tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL
G() { "$GLMCHAT" --backend cpu "$@"; }

# expect_usage NAME PATTERN ARGS...: status 2 (a usage error), one line
# matching PATTERN first, no sanitizer report.
expect_usage() {
    name=$1 pat=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -ne 2 ]; then fail "$name" "exit status $rc, expected 2: $(head -c 300 "$TMP/err")"
    elif grep -qE 'Sanitizer|runtime error' "$TMP/err"; then fail "$name" "sanitizer: $(head -c 300 "$TMP/err")"
    elif ! head -n 1 "$TMP/err" | grep -qE "$pat"; then fail "$name" "stderr '$(head -c 300 "$TMP/err")' does not match '$pat'"
    elif [ -s "$TMP/out" ]; then fail "$name" "something ran: $(head -c 100 "$TMP/out")"
    else ok "$name"
    fi
}

# ---- the chat's command line (-p, so nothing waits for a terminal)
for v in 1e-39 2.9e-39 1e-45 0.0001 nan inf -1 1e39; do
    expect_usage "option_temp_$v" "^glmchat: --temp: temp: .*(out of range|not a number)" \
        G -m "$MODEL" -n 2 --temp "$v" -p hi
done
expect_usage option_top_p_subnormal "^glmchat: --top-p: top-p: 1e-40 is too close to 0" G -m "$MODEL" -n 2 --top-p 1e-40 -p hi
expect_usage option_min_p_subnormal "^glmchat: --min-p: min-p: .* is too close to 0" G -m "$MODEL" -n 2 --min-p 1e-39 -p hi
expect_usage option_top_k_huge "^glmchat: --top-k: top-k: 2000000 is out of range" G -m "$MODEL" -n 2 --top-k 2000000 -p hi
expect_usage option_repeat_penalty_huge "^glmchat: --repeat-penalty: repeat-penalty: 1e\+30 is out of range" \
    G -m "$MODEL" -n 2 --repeat-penalty 1e30 -p hi
expect_usage option_presence_penalty_nan "^glmchat: --presence-penalty: presence-penalty: nan is not a number" \
    G -m "$MODEL" -n 2 --presence-penalty nan -p hi
expect_usage option_frequency_penalty_tiny "^glmchat: --frequency-penalty: frequency-penalty: .* too close to 0" \
    G -m "$MODEL" -n 2 --frequency-penalty -1e-40 -p hi
expect_usage option_temp_underflow "^glmchat: --temp: temp: 1e-400 is out of range" G -m "$MODEL" -n 2 --temp 1e-400 -p hi
expect_usage option_seed_negative "^glmchat: --seed: seed: ' -5' is not a non-negative integer" \
    G -m "$MODEL" -n 2 --seed " -5" -p hi
# The edges of the ranges still work.
if G -m "$MODEL" -n 2 --temp 0.001 --top-p 0 --min-p 1 --repeat-penalty 0.1 -p hi >/dev/null 2>"$TMP/err"; then
    ok option_edges_accepted
else
    fail option_edges_accepted "$(head -c 300 "$TMP/err")"
fi

# ---- generate
expect_usage generate_temp "^glmchat: --temp: 1e-39 is out of range" \
    "$GLMCHAT" generate -m "$MODEL" --tokens 1,2,3 -n 2 --temp 1e-39 --backend cpu
expect_usage generate_top_p "^glmchat: top-p: nan is not a number|^glmchat: --top-p: 'nan' is not a number" \
    "$GLMCHAT" generate -m "$MODEL" --tokens 1,2,3 -n 2 --temp 1 --top-p nan --backend cpu

# ---- the settings file: FILE:LINE, status 1
mkdir -p "$XDG_CONFIG_HOME/glmchat"
S="$XDG_CONFIG_HOME/glmchat/settings"
printf '# defaults\ntemp = 1e-39\n' >"$S"
expect_fail settings_file_temp "^glmchat: $S:2: temp: 1e-39 is out of range \[0.001, 100\] \(or 0: greedy\)$" G -m "$MODEL" -n 2 -p hi
printf 'min-p = -nan\n' >"$S"
expect_fail settings_file_min_p "^glmchat: $S:1: min-p: -?nan is not a number" G -m "$MODEL" -n 2 -p hi
rm -f "$S"

# ---- conversation files: -C and replay refuse them, and -C leaves the file alone
conv() { # FILE FIELD VALUE
    printf '{"format": "glmchat-conversation", "version": 1, "sampling": {"%s": %s},\n "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n' \
        "$2" "$3" >"$1"
}
for f in "temperature 1e-39" "temperature 3e-39" "top_p 1e-40" "min_p -0.5" "repeat_penalty 1e300" "top_k 2.0e9"; do
    set -- $f
    C="$TMP/conv_$1.json"
    conv "$C" "$1" "$2"
    cp "$C" "$TMP/before.json"
    expect_fail "conversation_$1_$2" "^glmchat: $C: sampling\.$1: " G -m "$MODEL" -n 2 -C "$C" -p "more"
    if cmp -s "$C" "$TMP/before.json"; then ok "conversation_$1_$2_untouched"; else fail "conversation_$1_$2_untouched" "the file changed"; fi
done
conv "$TMP/rep.json" temperature 1e-39
expect_fail replay_temperature "^glmchat: .*sampling\.temperature: 1e-39 " "$GLMCHAT" replay "$TMP/rep.json" -m "$MODEL" --backend cpu

done_tests
