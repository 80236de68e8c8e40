#!/bin/sh
# t_corrupt.sh: the corrupt-GGUF corpus (tests/tools/mkcorrupt) through
# `glmchat info -m CASE`.  Each case must exit non-zero without a signal or a
# sanitizer report and print exactly one line on stderr,
#   glmchat: CASE: at byte N: PROBLEM      (format-level cases)
#   glmchat: CASE: PROBLEM                 (model-level cases: model_*)
# where PROBLEM matches the case's expected pattern (cases.txt), so each file
# is rejected for the right reason.
. tests/lib.sh

CORPUS=$TMP/corpus
if ! "$BUILD/tools/mkcorrupt" "$CORPUS" >"$TMP/mk" 2>&1; then
    fail "mkcorrupt" "$(head -c 300 "$TMP/mk")"
    done_tests
fi
n=$(wc -l <"$CORPUS/cases.txt" | tr -d ' ')
if [ "$n" -ge 30 ]; then ok "corpus: $n cases"; else fail "corpus" "only $n cases (want >= 30)"; fi

# The base file is valid: every failure below comes from its corruption.
if $GLMCHAT info -m "$CORPUS/valid.gguf" >/dev/null 2>"$TMP/err"; then ok "corpus: base model is valid"; else
    fail "corpus: base model is valid" "$(head -c 300 "$TMP/err")"; fi

tab=$(printf '\t')
while IFS="$tab" read -r name pattern; do
    file=$CORPUS/$name.gguf
    $GLMCHAT info -m "$file" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err" | tr -d ' ')
    case $name in model_*) where="" ;; *) where="at byte [0-9]+: .*" ;; esac
    if [ $rc -eq 0 ]; then
        fail "corrupt $name" "exit status 0"
    elif [ $rc -ge 128 ]; then
        fail "corrupt $name" "killed by signal $((rc - 128))"
    elif grep -qE 'Sanitizer|runtime error' "$TMP/err"; then
        fail "corrupt $name" "sanitizer: $(head -c 300 "$TMP/err")"
    elif [ "$lines" != 1 ]; then
        fail "corrupt $name" "$lines lines on stderr: $(head -c 300 "$TMP/err")"
    elif ! grep -qE "^glmchat: $file: $where" "$TMP/err"; then
        fail "corrupt $name" "'$(cat "$TMP/err")' does not start 'glmchat: $file: ${where:-...}'"
    elif ! grep -qE -- "$pattern" "$TMP/err"; then
        fail "corrupt $name" "'$(cat "$TMP/err")' does not match '$pattern'"
    else
        ok "corrupt $name"
    fi
done <"$CORPUS/cases.txt"

# A type glmchat cannot compute with: `info` still shows the census, naming
# the type, then refuses (issue 28.13: it only refused); running it is refused.
$GLMCHAT info -m "$CORPUS/model_type_not_computable.gguf" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -qE '^  TQ2_0 +1 ' "$TMP/out" && grep -qE '^  output\.weight +TQ2_0$' "$TMP/out" &&
   grep -q "has type TQ2_0, which glmchat cannot compute with" "$TMP/err"; then
    ok info_census_of_uncomputable_type
else
    fail info_census_of_uncomputable_type "exit $rc: $(grep -E 'TQ2_0|total' "$TMP/out" | head -3); $(head -c 200 "$TMP/err")"
fi
expect_fail uncomputable_type_not_run "has type TQ2_0, which glmchat cannot compute with" \
    "$GLMCHAT" -m "$CORPUS/model_type_not_computable.gguf" --backend cpu -p hi

done_tests
