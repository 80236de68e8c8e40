#!/bin/sh
# t_demo_model.sh: the built-in demo model (app/demo/glm-demo.gguf, trained
# by app/tools/demo_train) as a new user meets it.
#  - Plain questions with the default settings (`glmchat -p`, no model given,
#    the model's default sampling; fixed seeds so a run is repeatable) get
#    answers of at least 5 words, at least 90 % of a question's words over four
#    seeds English words (the answers' frequent words of the training corpus:
#    tests/data/demo/words.txt), and at least 75 % of every answer's.
#  - Thinking is off by default for it (its file sets glmchat.thinking = false)
#    and --think on still turns it on; its sampling is the file's recommended
#    temperature (general.sampling.temp) unless --temp says otherwise.
#  - A fixed conversation replays to the recorded transcript (greedy, CPU
#    reference): `glmchat replay`'s diff recipe as the regression check.
#  - glmchat's tokenizer gives held-out text the ids training used.
#  - `bench --routing` reads the CPU reference's router for every MoE layer.
#  - The file carries a NextN block and states its licence.
# tests/data/demo/ is written by app/tools/demo_train/test_data.sh from the
# model the build embeds.
. tests/lib.sh
unset GLMCHAT_MODEL
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
D=tests/data/demo
DEMO=app/demo/glm-demo.gguf

# words of a text, lower case, one a line (digits and punctuation split them)
words() { tr -cs 'A-Za-z' '\n' <"$1" | tr 'A-Z' 'a-z' | sed '/^$/d'; }

# ---- English answers to plain questions: each question's answers under four
# seeds together, so that one draw's odd word does not decide (the demo model
# spells some words its own way -- "happy" comes out "chey" even greedy -- so
# a short answer with one more such word falls below 90 % on its own)
for q in "What is a river?" "What does ocean mean?" "What is a dog?" "What does the ls command do?" \
    "What does happy mean?" "What is a house?"; do
    name="english: $q (seeds 1-4)"
    n_all=0 known_all=0 why=
    for seed in 1 2 3 4; do
        if ! "$GLMCHAT" -p "$q" --seed $seed >"$TMP/ans" 2>"$TMP/err"; then
            why="seed $seed: exit status: $(head -c 300 "$TMP/err")"
            break
        fi
        words "$TMP/ans" >"$TMP/w"
        n=$(wc -l <"$TMP/w")
        known=$(grep -cxFf "$D/words.txt" "$TMP/w")
        if [ "$n" -lt 5 ]; then
            why="seed $seed: $n words: '$(head -c 200 "$TMP/ans")'"
            break
        elif [ $((known * 100)) -lt $((n * 75)) ]; then
            why="seed $seed: $known of $n words are English: '$(head -c 300 "$TMP/ans")'"
            break
        fi
        n_all=$((n_all + n)) known_all=$((known_all + known))
    done
    if [ -n "$why" ]; then
        fail "$name" "$why"
    elif [ $((known_all * 100)) -lt $((n_all * 90)) ]; then
        fail "$name" "$known_all of $n_all words are English"
    else
        ok "$name"
    fi
done

# ---- thinking: off by default, on when asked
"$GLMCHAT" -p "What is a river?" --seed 1 -n 8 -C "$TMP/off.json" >/dev/null 2>&1
"$GLMCHAT" -p "What is a river?" --seed 1 -n 8 --think on -C "$TMP/on.json" >/dev/null 2>&1
if grep -q '"thinking": false' "$TMP/off.json"; then ok thinking_off_by_default; else
    fail thinking_off_by_default "$(grep thinking "$TMP/off.json")"; fi
if grep -q '"thinking": true' "$TMP/on.json"; then ok think_on_overrides; else
    fail think_on_overrides "$(grep thinking "$TMP/on.json")"; fi
"$GLMCHAT" -p "What is a river?" --seed 1 -n 8 --temp 1 -C "$TMP/t1.json" >/dev/null 2>&1
if grep -q '"temperature": 0\.3' "$TMP/off.json" && grep -q '"temperature": 1' "$TMP/t1.json"; then
    ok sampling_file_recommends_temp_user_overrides
else
    fail sampling_file_recommends_temp_user_overrides "$(grep temperature "$TMP/off.json" "$TMP/t1.json")"
fi

# ---- the replay regression check
"$GLMCHAT" replay "$D/replay.json" --backend cpu 2>"$TMP/err" | grep -v '^#' >"$TMP/replay.txt"
if diff "$D/replay.expected" "$TMP/replay.txt" >"$TMP/diff"; then ok replay_matches_recording; else
    fail replay_matches_recording "$(head -c 600 "$TMP/diff") $(head -c 200 "$TMP/err")"; fi
if grep -c '^=== turn' "$TMP/replay.txt" | grep -qx 4; then ok replay_has_four_turns; else
    fail replay_has_four_turns "$(grep -c '^=== turn' "$TMP/replay.txt") turns"; fi

# ---- the tokenizer on held-out text
"$GLMCHAT" tokenize -m "$DEMO" --ids <"$D/heldout.txt" >"$TMP/ids" 2>"$TMP/err"
if [ "$(tr -s ' \n' '  ' <"$TMP/ids" | sed 's/ *$//')" = "$(tr -s ' \n' '  ' <"$D/heldout.ids" | sed 's/ *$//')" ]; then
    ok tokenizer_heldout_ids
else
    fail tokenizer_heldout_ids "$(head -c 200 "$TMP/ids") $(head -c 200 "$TMP/err")"
fi

# ---- routing on the CPU reference: a line per MoE layer
"$GLMCHAT" bench -m "$DEMO" --backend cpu -t 1 -p 0 -n 0 --routing >"$TMP/route" 2>&1
n_moe=$(grep -c '^  layer [0-9]*: [0-9]* distinct; expert [0-9]* [0-9.]*%' "$TMP/route")
if [ "$n_moe" -ge 1 ] && grep -q 'routing (CPU reference)' "$TMP/route"; then ok routing_cpu_reference; else
    fail routing_cpu_reference "$(tail -c 400 "$TMP/route")"; fi

# ---- the file: a NextN block, a licence, within 20 MB
"$GLMCHAT" info -m "$DEMO" >"$TMP/info" 2>&1
size=$(wc -c <"$DEMO")
if grep -q '1 NextN/MTP' "$TMP/info" && grep -q 'general.license' "$DEMO" && [ "$size" -le 20000000 ]; then
    ok demo_file_nextn_licence_size
else
    fail demo_file_nextn_licence_size "$size bytes; $(grep -i nextn "$TMP/info")"
fi
done_tests
