#!/bin/sh
# t_ui_profile.sh: the chat is the benchmark.  The real chat UI in tmux on
# the Vulkan backend (lavapipe in CI) with the glm47 preset's default
# sampling (GPU sampling: temp 1, top-p 0.95, min-p 0.01): while an answer
# streams, the side pane's kernel table has at least 5 rows with numbers
# (the decode graph is timed by the sampled profiler on every path); the
# same with penalties on; /stats then lists the same kernels and a GPU
# time per token.  With the routed experts of blocks 0..3 in host memory
# (--n-cpu-moe 4) the pane shows a host layer's breakdown (GPU part, CPU
# experts, hand-over, in us) and the kernel table (the parts' dispatches)
# while the answer streams, and /stats says the breakdown in words.  A long prompt shows its progress in the pane and the status
# line (tokens done of total, tokens/s) and Esc stops it.
# Screens are kept in build/artifacts/t_ui_profile-*/.
. tests/lib.sh
if ! command -v tmux >/dev/null 2>&1; then
    fail ui_profile "tmux is not installed"
    done_tests
fi
if ! "$GLMCHAT" devices >/dev/null 2>&1; then
    fail ui_profile "no Vulkan device (CI installs lavapipe: mesa-vulkan-drivers)"
    done_tests
fi
. tests/tmux_lib.sh
trap 'tm_stop; rm -rf "$TMP"' EXIT
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
APP="$PWD/$GLMCHAT"
[ "${GLMCHAT#/}" != "$GLMCHAT" ] && APP="$GLMCHAT"
T=90 # seconds any single step may take (sanitizer builds on lavapipe are slow)

# mkmodel's demo preset (the random model that was built in before the
# trained demo: glm47 template, 8192-token context, slow enough on lavapipe
# for a long prompt to be seen being read), the Vulkan core forced; answers
# long enough to be seen streaming.
if ! "$GLMCHAT" mkmodel --preset demo --type Q4_K_M --seed 4747 --quiet -o "$TMP/demo.gguf" >/dev/null; then
    fail ui_profile "mkmodel failed"
    done_tests
fi
start_app() {
    tm_start 150 50 env XDG_CONFIG_HOME="$XDG_CONFIG_HOME" XDG_DATA_HOME="$XDG_DATA_HOME" \
        XDG_STATE_HOME="$XDG_STATE_HOME" "$APP" -m "$TMP/demo.gguf" --backend vulkan --ignore-eos -n 100000 "$@"
}

# Rows of the pane's kernel table with numbers in every column:
# "| name  calls  us/t  %  GB/s"
kernel_rows() {
    sed -n 's/.*│ *\([a-z_+]*[a-z]\) \{1,\}\([0-9.]\{1,\}\) \{1,\}\([0-9.]\{1,\}\) \{1,\}\([0-9.]\{1,\}\) \{1,\}\([0-9.]\{1,\}\) *$/\1/p' \
        "$TMP/screen" | wc -l
}

# Until the pane shows >= 5 timed kernels while the answer is still streaming
# (one screen shows both).
rows_while_streaming() {
    end=$(($(date +%s) + T))
    while [ "$(date +%s)" -lt $end ]; do
        tm_screen >/dev/null
        if grep -q "Answering" "$TMP/screen" && [ "$(kernel_rows)" -ge 5 ]; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

check_streaming_profile() {
    name=$1
    shift
    start_app "$@"
    if ! tm_wait $T '^ Ready'; then
        fail "$name" "did not start: $(tm_screen | tail -3)"
        tm_stop
        return
    fi
    tm_line "Tell me about the GPU."
    if rows_while_streaming; then
        ok "$name"
    else
        fail "$name" "$(kernel_rows) kernel rows while answering: $(tail -25 "$TMP/screen" | cut -c90- | tr -s ' ' | head -c 600)"
    fi
    tm_snap "$name"
    tm_keys Escape
    tm_wait $T '^ (Ready|Stopped)' || fail "${name}_esc" "the answer did not stop"
}

# ---- default sampling (glm47 preset)
check_streaming_profile pane_kernels_default_sampling
# /stats agrees: the same kernel names, a GPU time per token
tm_line "/stats"
if tm_wait $T "Slowest kernels" && tm_wait $T "GPU time per token: [1-9][0-9]* us"; then
    names_ok=1
    for k in $(sed -n 's/^ \{1,\}\([a-z_+]*[a-z]\) \{1,\}[0-9.]\{1,\} \{1,\}[0-9.]\{1,\}.*│.*/\1/p' "$TMP/screen" | head -3); do
        grep -q "│ *$k " "$TMP/screen" || names_ok=0
    done
    if [ $names_ok = 1 ]; then ok stats_agrees; else fail stats_agrees "/stats names a kernel the pane does not"; fi
else
    fail stats_agrees "$(tm_screen | tail -20 | cut -c1-90)"
fi
tm_snap stats
tm_stop

# ---- the same with penalties on
check_streaming_profile pane_kernels_penalties --repeat-penalty 1.3 --presence-penalty 0.5 --frequency-penalty 0.2
tm_stop

# ---- experts in host memory: the pane's breakdown of a host layer
start_app --n-cpu-moe 4
if tm_wait $T '^ Ready'; then
    tm_line "Tell me about the GPU."
    if tm_wait $T '│ host MoE +GPU [0-9]+ CPU [0-9]+ over -?[0-9]+ us' && grep -q "Answering" "$TMP/screen"; then
        ok pane_host_moe
    else
        fail pane_host_moe "$(tail -25 "$TMP/screen" | cut -c90- | tr -s ' ' | head -c 600)"
    fi
    # the kernel table too: the parts' dispatches, timed on some tokens
    if rows_while_streaming; then
        ok pane_host_moe_kernels
    else
        fail pane_host_moe_kernels "$(kernel_rows) kernel rows: $(tail -25 "$TMP/screen" | cut -c90- | tr -s ' ' | head -c 600)"
    fi
    tm_snap host_moe
    tm_keys Escape
    tm_wait $T '^ (Ready|Stopped)' || fail pane_host_moe_esc "the answer did not stop"
    tm_line "/stats"
    if tm_wait $T 'Experts in host memory, 3 layers, per host layer of a token: GPU part [0-9]+ us'; then
        ok stats_host_moe
    else
        fail stats_host_moe "$(tm_screen | tail -20 | cut -c1-90)"
    fi
else
    fail pane_host_moe "did not start"
fi
tm_stop

# ---- a long prompt: progress in the pane, Esc stops it
start_app
if tm_wait $T '^ Ready'; then
    long=$(awk 'BEGIN { for (i = 0; i < 150; i++) printf "the quick brown fox jumps over the lazy dog %d ", i }')
    tm_line "$long"
    if tm_wait $T '│ prompt +[1-9][0-9]* / [0-9]+ tokens, [0-9.]+ tok/s'; then
        ok pane_prompt_progress
    else
        fail pane_prompt_progress "$(tm_screen | tail -30 | cut -c90- | tr -s ' ' | head -c 400)"
    fi
    # ... and in the status line, not "Answering | 0.0 tok/s" (issue 28.10)
    if tm_wait $T '^ Answering \| reading the prompt: [1-9][0-9]* / [0-9]+ tokens, [0-9]+ tok/s \| Esc stops'; then
        ok status_prompt_progress
    else
        fail status_prompt_progress "$(tm_screen | tail -1)"
    fi
    tm_snap prompt_progress
    tm_keys Escape
    if tm_gone $T '│ prompt +[0-9]+ / [0-9]+ tokens' && tm_wait $T '^ (Ready|Stopped)'; then
        ok esc_stops_prompt
    else
        fail esc_stops_prompt "$(tm_screen | tail -5)"
    fi
else
    fail pane_prompt_progress "did not start"
fi
tm_stop
done_tests
