#!/bin/sh
# t_bench_prompt.sh: `glmchat bench`'s prompt figures on each backend (cpu,
# vulkan on lavapipe; GLMCHAT_TEST_BACKEND names one): the ppP line (whole
# batches) and the "ppP (the chat's chunking)" line (the chunks the chat
# cuts by time, DECODER_CHUNK_S), and a header that says the batch the
# engine took -- clamped to the context, or chosen by the Vulkan plan --
# not the one asked for; and on Vulkan, the note that a dependency wait
# gave up (the programs on barriers since).
. tests/lib.sh

BACKENDS=${GLMCHAT_TEST_BACKEND:-cpu vulkan}
M=tests/data/models/tiny-glm-a/tiny-glm-a.q4_0.gguf
num='[0-9]+(\.[0-9]+)?'

for B in $BACKENDS; do
    # ---- both prompt lines
    if "$GLMCHAT" bench -m "$M" --backend "$B" -t 1 -p 64 -n 0 >"$TMP/b" 2>"$TMP/err" &&
        grep -qE "^pp64: $num tokens/s \($num ms, whole chunks of 64, best of 2\)$" "$TMP/b" &&
        grep -qE "^pp64 \(the chat's chunking\): $num tokens/s \(chunks of ~[0-9]+ tokens, ~[0-9]+ ms each, at most [0-9]+; best of 2\)$" "$TMP/b"; then
        ok "bench_prompt_lines_$B"
    else
        fail "bench_prompt_lines_$B" "$(grep -E '^pp|^load' "$TMP/b" | head -c 300) $(head -c 300 "$TMP/err")"
    fi
    # ---- the header: the engine's batch (-b 100 in a 48-token context: 48)
    if "$GLMCHAT" bench -m "$M" --backend "$B" -t 1 -c 48 -b 100 -p 32 -n 0 >"$TMP/b" 2>"$TMP/err" &&
        grep -qE '^load: .*; context 48 tokens, prompt batch 48 tokens \(-b\), ' "$TMP/b"; then
        ok "bench_header_says_the_engines_batch_$B"
    else
        fail "bench_header_says_the_engines_batch_$B" "$(grep '^load' "$TMP/b" | head -c 300) $(head -c 300 "$TMP/err")"
    fi
done

case " $BACKENDS " in *" vulkan "*)
    # the plan's choice where it may grow (batch_max: a CPU device keeps 256
    # by default), named on the header and in the placement on the backend line.
    # The sanitizer run (TEST_QUICK) lets it grow to 512 in a 1024-token
    # context: the same choice past lavapipe's default, by the same host
    # code; at 2048 the run took 10.7 CPU seconds under ASan (3.7 at 512,
    # 3.2 at 2048 unsanitized) -- lavapipe's allocations for the larger
    # buffers through ASan's allocator, not our code.
    bmax=2048 ctx=4096
    [ "${TEST_QUICK:-0}" = 1 ] && bmax=512 ctx=1024
    if "$GLMCHAT" bench -m "$M" --backend vulkan --tune batch_max=$bmax -c $ctx -p 16 -n 0 >"$TMP/b" 2>"$TMP/err" &&
        grep -qE "^load: .*; context $ctx tokens, prompt batch $bmax tokens, " "$TMP/b" &&
        grep -qE "^backend: Vulkan: .*activations [0-9.]+ MiB \(batches of $bmax tokens\)" "$TMP/b"; then
        ok "bench_vulkan_plan_chooses_the_batch"
    else
        fail "bench_vulkan_plan_chooses_the_batch" "$(grep -E '^load|^backend' "$TMP/b" | head -c 400) $(head -c 300 "$TMP/err")"
    fi
    # without the knob: 256 on a CPU device (lavapipe), up to 1024 on a GPU
    # (the GPU machine runs this test too)
    want=1024
    "$GLMCHAT" devices 2>/dev/null | grep -- '<- default' | grep -q '\[cpu\]' && want=256
    if "$GLMCHAT" bench -m "$M" --backend vulkan -c 4096 -p 16 -n 0 >"$TMP/b" 2>"$TMP/err" &&
        grep -qE "^load: .*; context 4096 tokens, prompt batch $want tokens, " "$TMP/b"; then
        ok "bench_vulkan_default_batch_by_device_kind ($want)"
    else
        fail "bench_vulkan_default_batch_by_device_kind ($want)" "$(grep -E '^load' "$TMP/b" | head -c 300) $(head -c 300 "$TMP/err")"
    fi
    # a dependency wait that gave up (injected: dep_stall) leaves the
    # programs on barriers for the session: bench says so, and at which
    # token; the same run without it says nothing
    note='^note: a dependency wait gave up at token [0-9]+ .*joins its steps by barriers'
    if "$GLMCHAT" bench -m "$M" --backend vulkan --tune dep_stall=1 -p 16 -n 4 --draft off >"$TMP/b" 2>"$TMP/err" &&
        grep -qE "$note" "$TMP/b" &&
        "$GLMCHAT" bench -m "$M" --backend vulkan -p 16 -n 4 --draft off >"$TMP/b2" 2>"$TMP/err" &&
        ! grep -q '^note: a dependency wait' "$TMP/b2"; then
        ok "bench_vulkan_says_a_wait_gave_up"
    else
        fail "bench_vulkan_says_a_wait_gave_up" "$(tail -n 2 "$TMP/b" | head -c 300) / $(tail -n 1 "$TMP/b2" | head -c 200) $(head -c 300 "$TMP/err")"
    fi
    # the counters tried again after a give-up (tune sync_retry): one
    # injected give-up (dep_stall=2), then they hold; every wait giving up
    # (dep_stall=1): retries 2, 4, 8 and 16 tokens on, then barriers for good
    # (the 5th give-up); with sync_retry=0, for good at the first
    if "$GLMCHAT" bench -m "$M" --backend vulkan --tune dep_stall=2 --tune sync_retry=2 -p 16 -n 8 --draft off \
        >"$TMP/b" 2>"$TMP/err" && grep -qE '^note: dependency waits gave up 1 time .*tried again and hold' "$TMP/b" &&
        "$GLMCHAT" bench -m "$M" --backend vulkan --tune dep_stall=1 --tune sync_retry=2 -p 16 -n 24 --draft off \
            >"$TMP/b2" 2>"$TMP/err" && grep -qE '^note: .*5 in all\).*for the rest of the session' "$TMP/b2" &&
        "$GLMCHAT" bench -m "$M" --backend vulkan --tune dep_stall=1 --tune sync_retry=0 -p 16 -n 4 --draft off \
            >"$TMP/b3" 2>"$TMP/err" && grep -qE '^note: .* at token 1 .*1 in all\).*for the rest of the session' "$TMP/b3"
    then
        ok "bench_vulkan_retries_the_counters_after_a_give_up"
    else
        fail "bench_vulkan_retries_the_counters_after_a_give_up" "$(grep '^note' "$TMP/b" "$TMP/b2" "$TMP/b3" | head -c 600) $(head -c 300 "$TMP/err")"
    fi
    ;;
esac

done_tests
