#!/bin/sh
# t_vk_typed_spv.sh: the kernels' per-weight-type copies (gpu/vk_spv.h)
# compute what their generic modules do: the logits of a prompt through the
# prompt graph (the mat-mats) and token by token (-b 1: the decode graph,
# every x-stationary kernel) are the same bits with --tune typed_spv=1 (the
# default) and 0, on files of several types: F32, Q4_K_M (Q4_K beside
# Q6_K: the mat-mats with two weight types take the generic module) and a
# low-bit mix.  test_vk_spv.c checks the copies exist and which one is used.
# Same bits where the driver is Mesa's (lavapipe here; `auto` turns the
# copies on there): its compiler sees one kernel either way.  NVIDIA's
# compiles a constant weight type differently from a specialization
# constant (run 42: token by token the bits differ on Q4_K_M and IQ2_XXS,
# the prompt graph's do not), so elsewhere the copies are held to 2e-6
# rel-L2 with every argmax equal: each path is within 7.5e-7 of the
# float64 oracle on these files (t_vk_lowbit), so two of them differ by
# at most about twice that.
. tests/lib.sh
JG=$BUILD/tools/json_get
CMP=$BUILD/tools/cmp_logits
VK="--backend vulkan --kv-type f32"
mesa=0
$GLMCHAT devices 2>/dev/null | grep -- '<- default' | grep -q 'llvmpipe' && mesa=1

if ! $GLMCHAT devices >/dev/null 2>&1; then
    fail "vulkan device" "none usable ($($GLMCHAT devices 2>&1 | head -c 300))"
    done_tests
fi

G=tests/data/models/tiny-glm-a
tokens=$($JG "$G/fixture.json" prompt.tokens --sep ,)
ntok=$(echo "$tokens" | tr ',' '\n' | wc -l)
vocab=$($JG "$G/logits.ref_f64.f32.json" shape.1)
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
        if [ "$mesa" = 1 ]; then
            if [ -s "$TMP/$name.$b.0.bin" ] && cmp -s "$TMP/$name.$b.0.bin" "$TMP/$name.$b.1.bin"; then
                ok "$name, $label: typed copies give the generic modules' bits"
            else
                fail "$name, $label: typed copies give the generic modules' bits" "the logits differ"
            fi
        elif out=$($CMP --vocab "$vocab" --max-rel-l2 2e-6 --min-argmax "$ntok" "$TMP/$name.$b.1.bin" \
            "$TMP/$name.$b.0.bin" 2>&1); then
            ok "$name, $label: typed copies within 2e-6 of the generic modules ($out)"
        else
            fail "$name, $label: typed copies within 2e-6 of the generic modules" "$out"
        fi
    done
done
done_tests
