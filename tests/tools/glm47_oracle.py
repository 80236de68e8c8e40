#!/usr/bin/env python3
"""Renders chat-template cases with Jinja2 the way Hugging Face's
apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks, loopcontrols,
tojson = json.dumps with ensure_ascii=False), to make oracle files.

  python3 tests/tools/glm47_oracle.py TEMPLATE.jinja CASES.json > OUT.json

CASES.json: [{"name": ..., "inputs": {...}}, ...]; OUT.json adds "expected"
(cases Jinja refuses to render are dropped, with a note on stderr).
Needs python3-jinja2; the test suite only reads the files it wrote."""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise ValueError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
template = env.from_string(open(sys.argv[1]).read())
out = []
for case in json.load(open(sys.argv[2])):
    try:
        case["expected"] = template.render(**case["inputs"])
        out.append(case)
    except Exception as e:  # noqa: BLE001 - report and skip
        print("skipped %s: %s" % (case["name"], e), file=sys.stderr)
json.dump({"template": "GLM-4.7-Flash tokenizer.chat_template (tests/data/models/tiny-glm-a)",
           "renderer": "tests/tools/glm47_oracle.py, jinja2 %s" % jinja2.__version__,
           "cases": out}, sys.stdout, ensure_ascii=False, indent=1)
print()
