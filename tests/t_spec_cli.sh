#!/bin/sh
# t_spec_cli.sh: NextN speculative decoding through the program, on each
# backend that drafts (ref, cpu; GLMCHAT_TEST_BACKEND names one): `glmchat -p`
# on a tiny model made with a NextN block and on the built-in demo model
# (whose NextN head is trained, so drafts are kept) gives the same greedy
# answer with every --draft setting (on Vulkan and in the sanitizer run: 3
# and auto) and from the settings file, a sampled
# answer is reproduced by its seed with drafting on, bad values are usage
# errors, and `bench` prints its drafting lines with every forced draft kept
# (the sanitizer run on Vulkan: the first greedy comparison only).
. tests/lib.sh

BACKENDS=${GLMCHAT_TEST_BACKEND:-ref cpu vulkan} # the backends that draft
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
unset GLMCHAT_MODEL
MODEL="$TMP/nextn.gguf"

if ! "$GLMCHAT" mkmodel --preset tiny-glm --type Q8_0 --nextn 1 --seed 4 --quiet -o "$MODEL" >/dev/null 2>"$TMP/err"; then
    fail mkmodel "$(head -c 200 "$TMP/err")"
    done_tests
fi

for BACKEND in $BACKENDS; do
    # the --draft settings the greedy answer is compared over: every one on
    # the CPU backends; on Vulkan (lavapipe: seconds a run) a fixed k and
    # auto, as in the sanitizer run (TEST_QUICK) everywhere -- test_spec
    # compares every k on every backend at the engine
    DRAFTS="1 2 3 4 auto"
    if [ "$BACKEND" = vulkan ] || [ "${TEST_QUICK:-0}" = 1 ]; then DRAFTS="3 auto"; fi
    # the sanitizer run on Vulkan (3-8 s a run there): the greedy comparison
    # on the tiny model alone -- the program's own code is the same on every
    # backend, and test_spec and test_vk_spec take the Vulkan engine's
    # drafting under the sanitizers
    WHICH="G DEMO"
    [ "$BACKEND" = vulkan ] && [ "${TEST_QUICK:-0}" = 1 ] && WHICH=G
    G() { "$GLMCHAT" --backend "$BACKEND" -m "$MODEL" "$@" </dev/null; }
    DEMO() { "$GLMCHAT" --backend "$BACKEND" "$@" </dev/null; } # no model given: the demo

    # ---- greedy: the same answer whatever the drafting
    for which in $WHICH; do
        $which --temp 0 --think off --ignore-eos -n 48 --draft off -p "the same words" >"$TMP/off" 2>"$TMP/err"
        rc=$?
        bad=
        for d in $DRAFTS; do
            $which --temp 0 --think off --ignore-eos -n 48 --draft $d -p "the same words" >"$TMP/on" 2>>"$TMP/err" || bad="$bad [$d: exit $?]"
            cmp -s "$TMP/off" "$TMP/on" || bad="$bad [$d: differs]"
        done
        name=greedy_same_with_drafting_${BACKEND}; [ $which = DEMO ] && name=demo_$name
        if [ $rc -ne 0 ] || [ ! -s "$TMP/off" ]; then fail $name "exit $rc: $(head -c 200 "$TMP/err")"
        elif [ -n "$bad" ]; then fail $name "$bad"
        else ok $name
        fi
    done

    [ "$WHICH" = G ] && continue

    # ---- the settings file's key, and the option overriding it
    G --temp 0 --think off --ignore-eos -n 48 --draft off -p "the same words" >"$TMP/off" 2>/dev/null
    mkdir -p "$XDG_CONFIG_HOME/glmchat"
    printf 'draft = 3\n' >"$XDG_CONFIG_HOME/glmchat/settings"
    G --temp 0 --think off --ignore-eos -n 48 -p "the same words" >"$TMP/file" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$TMP/off" "$TMP/file"; then ok settings_key_draft_$BACKEND
    else fail settings_key_draft_$BACKEND "exit $rc: $(head -c 200 "$TMP/err")"
    fi
    printf 'draft = 9\n' >"$XDG_CONFIG_HOME/glmchat/settings"
    expect_fail settings_bad_draft_$BACKEND "settings:1: draft: '9' is not auto, off or 1 to 4" G -p hi
    rm "$XDG_CONFIG_HOME/glmchat/settings"

    # ---- sampling: a seed reproduces the answer with drafting on (the
    # model's own sampling settings on the demo: drafts are kept there)
    G --temp 1 --seed 31 --think off --ignore-eos -n 40 --draft 2 -p "tell me" >"$TMP/s1" 2>/dev/null
    G --temp 1 --seed 31 --think off --ignore-eos -n 40 --draft 2 -p "tell me" >"$TMP/s2" 2>/dev/null
    DEMO --seed 31 --ignore-eos -n 40 --draft 3 -p "tell me" >"$TMP/d1" 2>/dev/null
    DEMO --seed 31 --ignore-eos -n 40 --draft 3 -p "tell me" >"$TMP/d2" 2>/dev/null
    if [ -s "$TMP/s1" ] && cmp -s "$TMP/s1" "$TMP/s2" && [ -s "$TMP/d1" ] && cmp -s "$TMP/d1" "$TMP/d2"; then
        ok seed_reproduces_with_drafting_$BACKEND
    else fail seed_reproduces_with_drafting_$BACKEND "same seed, different answers"
    fi

    # ---- bench: a line per k, every forced draft kept
    "$GLMCHAT" bench --backend "$BACKEND" -m "$MODEL" -p 16 -n 24 -t 1 >"$TMP/bench" 2>"$TMP/err"
    rc=$?
    n=$(grep -cE '^  drafting k=[123] @ depth 0: [0-9]+% of drafts kept, [0-9.]+ tokens/step, [0-9.]+ tokens/s with the chat.s sampling \([0-9.]+x\); forced acceptance [0-9.]+ tokens/step' "$TMP/bench")
    if [ $rc -ne 0 ]; then fail bench_drafting_lines_$BACKEND "exit $rc: $(head -c 300 "$TMP/err")"
    elif [ "$n" != 3 ]; then fail bench_drafting_lines_$BACKEND "$n lines: $(grep drafting "$TMP/bench" | head -c 300)"
    elif grep -q 'forced drafts rejected' "$TMP/bench"; then fail bench_drafting_lines_$BACKEND "$(grep -A0 rejected "$TMP/bench")"
    elif ! grep -q 'k=2 @ depth 0: .*forced acceptance 3.00 tokens/step' "$TMP/bench"; then fail bench_drafting_lines_$BACKEND "k=2 forced: $(grep 'k=2' "$TMP/bench")"
    else ok bench_drafting_lines_$BACKEND
    fi
    "$GLMCHAT" bench --backend "$BACKEND" -m "$MODEL" -p 16 -n 8 -t 1 --draft off >"$TMP/bench" 2>&1
    if grep -qE "drafting k=|NextN" "$TMP/bench"; then fail bench_draft_off_$BACKEND "drafting with --draft off: $(grep -E "drafting|NextN" "$TMP/bench" | head -c 200)"; else ok bench_draft_off_$BACKEND; fi
done

# ---- usage errors (before any backend runs)
for v in 0x 5 -1 maybe ""; do
    "$GLMCHAT" -m "$MODEL" --draft "$v" -p hi </dev/null >/dev/null 2>"$TMP/err"
    rc=$?
    if [ $rc -ne 2 ] || ! grep -q "draft" "$TMP/err"; then fail "bad_draft_value_$v" "exit $rc: $(head -c 200 "$TMP/err")"; else ok "bad_draft_value_${v:-empty}"; fi
done

done_tests
