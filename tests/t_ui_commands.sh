#!/bin/sh
# t_ui_commands.sh: commands of the chat in tmux (issue 28): /exit and /bye
# quit; /retry draws a new seed for every answer unless one was set, records
# it with the answer, and `glmchat replay` reproduces the answer from it;
# an answer's tokens are counted once (header, side pane, /stats); /set
# lists, completes and shows the penalties; /model lists the models
# directory, says which of several files runs, and switches (the
# conversation goes on with the same template, else a new one begins);
# /copy inside tmux says when tmux lets no clipboard request through.
# Commands, not kernels: the CPU backend unless GLMCHAT_TEST_BACKEND says
# otherwise.  Screens are kept in build/artifacts/ (text, not compared).
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_commands "tmux is not installed"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
GLMCHAT_TEST_BACKEND=${GLMCHAT_TEST_BACKEND:-cpu}
. tests/ui_lib.sh
J="$BUILD/tools/json_get"

# until_flat PATTERN: until the chat's text, its lines joined (a note
# wraps anywhere), matches PATTERN (grep -E).
flat_matches() { tm_screen | sed 's/ *│.*//' | tr '\n' ' ' | tr -s ' ' | grep -qE -- "$1"; }
until_flat() { until_true flat_matches "$1"; }
newest() { ls -t "$CONV_DIR"/*.json 2>/dev/null | head -n 1; }
# until_true CMD...: until CMD succeeds (T seconds at most).
until_true() {
    _end=$(($(date +%s) + T))
    until "$@"; do
        [ "$(date +%s)" -ge $_end ] && return 1
        sleep 0.05
    done
}

# ---- /exit and /bye quit (issue 28.9: /exit suggested /edit)
for word in exit bye; do
    start_app
    app_ready
    tm_line "/$word"
    if tm_wait $T "^EXITED 0"; then ok "ui_$word"; else fail "ui_$word" "$(tm_screen | grep -v '^ *│\? *$' | tail -3)"; fi
done

# ---- /retry: a new seed for every answer, recorded, and replay reproduces it
# (issue 28.7: the chat's one seed made every retry the same answer)
# (Random seeds draw answers no run has seen: they are shown as written
# (F5), not rendered, while the Markdown renderer is being replaced --
# issue 28.1's crash is not what these cases test.)
UI_SEED= start_app
app_ready
tm_keys F5
tm_wait 10 "Answers as written"
answered "tell me about the sea"
f=$(newest)
a1=$("$J" "$f" messages.1.content)
s1=$("$J" "$f" turns.1.seed)
tm_line "/retry"
seed_changed() { s2=$("$J" "$f" turns.1.seed 2>/dev/null) && [ -n "$s2" ] && [ "$s2" != "$s1" ]; }
if [ -n "$s1" ] && until_true seed_changed && tm_gone $T "Answering"; then
    a2=$("$J" "$f" messages.1.content)
    s2=$("$J" "$f" turns.1.seed)
    if [ "$a2" != "$a1" ] && [ "$("$J" "$f" sampling.seed)" = "$s2" ]; then
        ok ui_retry_new_seed
    else
        fail ui_retry_new_seed "the same answer after /retry: '$a1' (seeds $s1, $s2)"
    fi
else
    fail ui_retry_new_seed "no new seed recorded: '$s1' then '$("$J" "$f" turns.1.seed 2>&1)'"
fi
tm_snap retry
# /replay of the answer as a glmchat from before the draw by id recorded it
# (no "draw"): its seed, being the answer's own, draws another answer now,
# and the replay says so at that turn
sed -E '/"seed": [0-9]+,$/{N;s/,\n *"draw": "id"$//}' "$f" >"$TMP/old.json"
tm_line "/replay $TMP/old.json"
if grep -q '"draw": "id"' "$f" && ! grep -q '"draw"' "$TMP/old.json" &&
    tm_wait $T "Turn 1: another glmchat drew the recorded" &&
    tm_wait $T "Replay done: 1 turn"; then
    ok ui_replay_notes_an_older_draw
else
    fail ui_replay_notes_an_older_draw "$(grep -c '"draw"' "$f") draws; $(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
quit_app
# shellcheck disable=SC2086
"$GLMCHAT" replay "$f" --backend "$BACKEND" $MODEL_ARGS --ignore-eos >"$TMP/rep" 2>"$TMP/rep.err"
new=$(awk '$0 == "--- new answer" { on = 1; next } /^  / { if (on) print; next } { on = 0 }' "$TMP/rep" | sed 's/^  //')
# (a random seed may draw 16 tokens that show as nothing -- whitespace or
# markers the chat keeps out of the text -- so an empty answer counts when
# replay printed its block and the two agree)
if grep -q "^# seed $s2 (recorded with this answer)" "$TMP/rep" && grep -q "^--- new answer" "$TMP/rep" &&
    [ "$new" = "$a2" ]; then
    ok ui_retry_seed_replays
else
    fail ui_retry_seed_replays "recorded '$a2', replayed '$new' ($(grep '^# seed' "$TMP/rep"; head -c 200 "$TMP/rep.err"))"
fi
# A seed the user set stays: /retry gives the same answer again.
rm -f "$CONV_DIR"/*.json
start_app
app_ready
answered "tell me about the sea"
f=$(newest)
a1=$("$J" "$f" messages.1.content)
t1=$("$J" "$f" turns.1.time)
tm_line "/retry"
retried() { t2=$("$J" "$f" turns.1.time 2>/dev/null) && [ "$t2" != "$t1" ]; }
if until_true retried && tm_gone $T "Answering" && [ "$("$J" "$f" messages.1.content)" = "$a1" ] &&
   [ "$("$J" "$f" turns.1.seed)" = 11 ]; then
    ok ui_retry_set_seed_kept
else
    fail ui_retry_set_seed_kept "'$a1' became '$("$J" "$f" messages.1.content)', seed $("$J" "$f" turns.1.seed 2>&1)"
fi

quit_app

# ---- one answer, one count: its header, the side pane and /stats agree
# (issue 28.12: 16, 15 and 15), and the pane shows the answer as over
# ("(last)") once it is, not at the next turn
start_app --side-pane on
app_ready
answered "count my tokens"
if tm_wait 10 "^Assistant .*· 16 tokens, " && tm_wait 10 "│ session +[0-9]+ prompt, 16 generated" &&
   tm_wait 10 "│ decode +[0-9.]+ \(last\)"; then
    tm_line "/stats"
    if tm_wait 10 "^Answers: 16 tokens generated in"; then
        ok ui_one_token_count
    else
        fail ui_one_token_count "/stats: $(tm_screen | grep -E '^(Answers|Decode|Prompts|Prefill)')"
    fi
    # whose clock the token's time is: the CPU backend's steps and time, not
    # a GPU's (the pane and /stats said "us GPU, 706 dispatches" there)
    if [ "$BACKEND" = cpu ]; then
        if tm_wait 10 "^CPU steps per token \(barriers\): [1-9][0-9]*; CPU time per token: [1-9][0-9]* us" &&
           tm_wait 10 "│ token +[1-9][0-9]* us CPU, [1-9][0-9]* steps" && ! grep -q "GPU time per token" "$TMP/screen"; then
            ok ui_cpu_clock_named
        else
            fail ui_cpu_clock_named "$(tm_screen | grep -E 'time per token|│ token' | head -3)"
        fi
    elif grep -qE "CPU time per token|us CPU, " "$TMP/screen"; then
        fail ui_gpu_clock_named "$(grep -E 'time per token|│ token' "$TMP/screen" | head -3)"
    else
        ok ui_gpu_clock_named
    fi
else
    fail ui_one_token_count "$(tm_screen | grep -E '^Assistant|session|decode' | sed 's/^.*│//' | head -3)"
fi
tm_snap counts
a1=$("$J" "$(newest)" messages.1.content) # the answer /copy copies below

# ---- /set and the penalties (issue 28.13: neither /set nor its Tab knew them)
tm_line "/set"
if until_flat "repeat-penalty = 1, presence-penalty = 0, frequency-penalty = 0, seed = 11"; then
    ok ui_set_lists_penalties
else
    fail ui_set_lists_penalties "$(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
tm_keys -l "/set rep"
tm_keys Tab
if tm_wait 10 "^> /set repeat-penalty"; then ok ui_set_completes_penalties; else fail ui_set_completes_penalties "$(input_line)"; fi
tm_keys -l " 1.3"
tm_keys Enter
tm_wait 10 "repeat-penalty = 1.3 \(from the next answer on\)"
tm_line "/set"
if until_flat "In use: .*repeat-penalty 1.3, presence-penalty 0, frequency-penalty 0, seed 11"; then ok ui_set_penalty; else fail ui_set_penalty "$(tm_screen | grep 'In use' | tail -1)"; fi

# ---- /copy inside a tmux that drops clipboard requests (its defaults here:
# set-clipboard external, allow-passthrough off) says so; with
# set-clipboard on the answer reaches tmux's buffer (issue 28.13: it
# reported a copy that never happened)
tm delete-buffer 2>/dev/null
tm_line "/copy"
if tm_wait 10 "/copy: nothing was copied: tmux passes no clipboard" &&
   ! tm show-buffer >/dev/null 2>&1; then
    ok ui_copy_tmux_off_said
else
    fail ui_copy_tmux_off_said "$(tm_screen | grep -v '^ *│\? *$' | tail -3)"
fi
tm set-option -g set-clipboard on
tm_line "/copy"
if tm_wait 10 "Copied the last answer" && [ "$(tm show-buffer 2>/dev/null)" = "$a1" ]; then
    ok ui_copy_tmux_on
else
    fail ui_copy_tmux_on "buffer '$(tm show-buffer 2>&1 | head -c 80)'; $(tm_screen | grep -v '^ *│\? *$' | tail -2)"
fi
quit_app

# ---- /model: three files in the models directory, no -m
MODELS="$XDG_DATA_HOME/glmchat/models"
mkdir -p "$MODELS"
# beta: another template (ChatML's turn marker where GLM-4.7's was, the
# same length, so the GGUF stays valid and the detection finds ChatML).
"$GLMCHAT" mkmodel --preset demo --type Q8_0 --quiet -o "$MODELS/alpha.gguf" &&
    "$GLMCHAT" mkmodel --preset demo --type Q8_0 --seed 2 --quiet -o "$MODELS/gamma.gguf" &&
    LC_ALL=C sed 's/\[gMASK\]<sop>/<|im_start|>/' "$MODELS/gamma.gguf" >"$MODELS/beta.gguf" ||
    { fail ui_model "mkmodel failed"; done_tests; }
rm -f "$CONV_DIR"/*.json
tm_start 120 40 env XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" \
    XDG_STATE_HOME="$XDG_STATE_HOME" "$APP" --backend "$BACKEND" --temp 2 --ignore-eos -n 16 --side-pane on
app_ready
tm_keys F5
if grep -q "^Model: alpha.gguf, the first by name of the 3 .gguf files in" "$TMP/screen" &&
   grep -q "│ Model: alpha.gguf" "$TMP/screen"; then
    ok ui_model_choice_said
else
    fail ui_model_choice_said "$(tm_screen | grep -E 'Model' | head -3)"
fi
answered "hello alpha"
tm_line "/model"
if tm_wait 10 "^Models in .*glmchat/models" && tm_wait 10 "^  1  alpha.gguf .* \(in use\)" &&
   tm_wait 10 "^  2  beta.gguf " && tm_wait 10 "^  3  gamma.gguf "; then
    ok ui_model_lists
else
    fail ui_model_lists "$(tm_screen | grep -E '^ +[0-9]  |Model' | head -5)"
fi
tm_snap model-list
# The same template: the conversation goes on with the new model.
tm_line "/model gamma"
if tm_wait $T "Loading .*gamma.gguf" && tm_wait 10 "the conversation goes on with it" && app_ready &&
   tm_wait 10 "│ Model: gamma.gguf" && grep -q "^hello alpha" "$TMP/screen" && answered "hello gamma" &&
   [ "$("$BUILD/tools/conv_stress" count "$(newest)")" = 4 ]; then
    ok ui_model_switch_keeps_conversation
else
    fail ui_model_switch_keeps_conversation "$(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
# Another template: a new conversation, the old one kept in its file.
old=$(newest)
tm_line "/model 2"
if tm_wait $T "Loading .*beta.gguf" && tm_wait 10 "a new conversation begins; the old one stays in" &&
   app_ready && tm_wait 10 "│ Model: beta.gguf" && ! grep -q "^hello alpha" "$TMP/screen" && answered "hello beta" &&
   [ "$("$BUILD/tools/conv_stress" count "$old")" = 4 ]; then
    ok ui_model_switch_new_template
else
    fail ui_model_switch_new_template "$(tm_screen | grep -v '^ *│\? *$' | tail -4)"
fi
tm_snap model-switched
tm_line "/model nosuch"
if tm_wait 10 "/model: no model 'nosuch' in "; then ok ui_model_unknown; else fail ui_model_unknown "$(tm_screen | tail -3)"; fi
quit_app
tm_stop
done_tests
