#!/bin/sh
# t_vk_typed_spv.sh: the kernels' per-weight-type copies (gpu/vk_spv.h)
# compute what their generic modules do: the logits of a prompt through the
# prompt graph (the mat-mats) and token by token (-b 1: the decode graph,
# every x-stationary kernel) are the same bits with --tune typed_spv=1 (the
# default) and 0, on files of several types: F32, Q4_K_M (Q4_K beside
# Q6_K: the mat-mats with two weight types take the generic module) and a
# low-bit mix.  test_vk_spv.c checks the copies exist and which one is used.
. tests/lib.sh
JG=$BUILD/tools/json_get
VK="--backend vulkan --kv-type f32"

if ! $GLMCHAT devices >/dev/null 2>&1; then
    fail "vulkan device" "none usable ($($GLMCHAT devices 2>&1 | head -c 300))"
    done_tests
fi

G=tests/data/models/tiny-glm-a
tokens=$($JG "$G/fixture.json" prompt.tokens --sep ,)
$GLMCHAT mkmodel --preset tiny-glm --seed 7 --type IQ2_XXS --quiet -o "$TMP/iq2.gguf" >/dev/null 2>"$TMP/err" ||
    fail "make the IQ2_XXS model" "$(head -c 200 "$TMP/err")"

models="$G/tiny-glm-a.f32.gguf $G/tiny-glm-a.q4_k_m.gguf $TMP/iq2.gguf"
# The sanitizer run (TEST_QUICK): the Q4_K_M file alone, whose mat-mats take
# both a typed copy and the generic module (the host code that picks one)
[ "${TEST_QUICK:-0}" = 1 ] && models="$G/tiny-glm-a.q4_k_m.gguf"
for m in $models; do
    name=$(basename "$m" .gguf)
    for b in prompt 1; do
        bopt= label="the prompt graph"
        [ "$b" = 1 ] && bopt="-b 1" label="token by token"
        for t in 0 1; do
            $GLMCHAT logits -m "$m" $VK $bopt --tune typed_spv=$t --tokens "$tokens" -o "$TMP/$name.$b.$t.bin" \
                2>"$TMP/err" || fail "$name, $label, typed_spv=$t" "$(head -c 300 "$TMP/err")"
        done
        if [ -s "$TMP/$name.$b.0.bin" ] && cmp -s "$TMP/$name.$b.0.bin" "$TMP/$name.$b.1.bin"; then
            ok "$name, $label: typed copies give the generic modules' bits"
        else
            fail "$name, $label: typed copies give the generic modules' bits" "the logits differ"
        fi
    done
done
done_tests
