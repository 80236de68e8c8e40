#!/bin/sh
# gen_refs.sh: the float64 reference logits of tests/data/quant/ref, for
# tiny models of the low-bit and non-linear types the oracle fixtures do
# not ship (tests/t_mkmodel.sh compares glmchat's CPU logits with them).
#
#   sh tests/data/quant/gen_refs.sh GGUF_PY_DIR      (from the repository root,
#                                                     after `make` and `make test`'s tools)
#
# Models: "rq" = tests/tools/requant of the tiny-glm-a fixture's F32 file
# (our quantizers; for Q2_K .. MXFP4_MOE the same bytes llama-quantize
# writes: t_mkmodel.sh checks it against lq/llama_quantize_digests.txt),
# "mk" = `glmchat mkmodel --preset tiny-glm --seed 7` (random blocks),
# "lq" = the files llama-quantize made in lq/ (lq/make.sh).  Each
# reference: tests/tools/ref_f64.py on that very file, with
# the file's tensor digest (tests/tools/tensor_digest) recorded beside it,
# so a change of the quantizers or the generator is reported as such.
set -e
PY=${1:?usage: gen_refs.sh GGUF_PY_DIR}
BUILD=${BUILD:-build/rel}
OUT=tests/data/quant/ref
FX=tests/data/models/tiny-glm-a
TOKENS=$($BUILD/tools/json_get $FX/fixture.json prompt.tokens --sep ,)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p $OUT
for spec in rq:Q2_K rq:Q3_K_M rq:IQ4_XS rq:IQ4_NL rq:MXFP4_MOE rq:IQ3_XXS rq:IQ2_XXS \
    mk:IQ3_XXS mk:IQ2_XXS mk:IQ1_S mk:IQ1_M mk:IQ3_S mk:IQ2_XS mk:IQ2_S \
    lq:IQ2_XXS lq:IQ3_XXS lq:IQ1_S lq:IQ2_M lq:IQ3_M; do
    src=${spec%%:*} type=${spec#*:}
    model=$tmp/$src.$type.gguf
    if [ "$src" = rq ]; then
        $BUILD/tools/requant $FX/tiny-glm-a.f32.gguf "$model" "$type"
    elif [ "$src" = lq ]; then
        cp tests/data/quant/lq/$type.gguf "$model"
    else
        ./glmchat mkmodel --preset tiny-glm --seed 7 --type "$type" --quiet -o "$model" >/dev/null
    fi
    digest=$($BUILD/tools/tensor_digest "$model")
    /usr/bin/python3 tests/tools/ref_f64.py "$PY" "$model" "$TOKENS" $OUT/$src.$type.bin 12 >$tmp/ref.json
    /usr/bin/python3 - "$tmp/ref.json" "$digest" "$src" "$type" >$OUT/$src.$type.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["tensor_digest"] = sys.argv[2]
d["model"] = {"rq": "tests/tools/requant tests/data/models/tiny-glm-a/tiny-glm-a.f32.gguf OUT " + sys.argv[4],
              "lq": "tests/data/quant/lq/" + sys.argv[4] + ".gguf (llama-quantize, tests/data/quant/lq/make.sh)",
              "mk": "glmchat mkmodel --preset tiny-glm --seed 7 --type " + sys.argv[4]}[sys.argv[3]]
json.dump(d, sys.stdout, indent=1)
print()
PY
    echo "$src.$type: $(grep -o '"min_top2_margin": [^,]*' $OUT/$src.$type.json)"
done
