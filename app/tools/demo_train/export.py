#!/usr/bin/python3
"""export.py: the trained model as raw f32 tensors + a JSON manifest for demo_gguf.

Keys in the order llama.cpp's converter writes a GLM-4.7-Flash file (as
core/synth.c does), the tokenizer in the same tokenizer.ggml.* fields real
GLM files use, GLM-4.7-Flash's chat template (read from the fixture model in
tests/data, as its GGUFs carry it) with one change: the generation prompt's
default is thinking off (`</think>` unless enable_thinking is given and true),
since this model was not trained to think; and glmchat.thinking = false,
which glmchat reads for its default (core/chat_template.c).

Usage: export.py CHECKPOINT PREP_DIR SOURCES_JSON OUT_DIR [--type F16|F32]
Writes OUT_DIR/manifest.json, OUT_DIR/tensors.f32 and OUT_DIR/DATA-SOURCES.md
(the note that travels with the file: app/demo/DATA-SOURCES.md).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

from model import Config, GLMDemo, gguf_tensors

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "..", "..", "tests", "data", "models", "tiny-glm-a", "tiny-glm-a.f32.gguf")
THINK_DEFAULT_ON = "{{- '</think>' if (enable_thinking is defined and not enable_thinking) else '<think>' -}}"
THINK_DEFAULT_OFF = "{{- '<think>' if (enable_thinking is defined and enable_thinking) else '</think>' -}}"
LICENSE = "GPL-3.0-or-later"


def gguf_string_key(path, want):
    """The value of one string key of a GGUF file (v3), read from its header."""
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    assert data[:4] == b"GGUF"
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    off = 24

    def rstr(o):
        n = struct.unpack_from("<Q", data, o)[0]
        return data[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    for _ in range(n_kv):
        key, off = rstr(off)
        t = struct.unpack_from("<I", data, off)[0]
        off += 4
        if t == 8:
            val, off = rstr(off)
            if key == want:
                return val
        elif t == 9:
            et, n = struct.unpack_from("<IQ", data, off)
            off += 12
            for _ in range(n):
                if et == 8:
                    _, off = rstr(off)
                else:
                    off += sizes[et]
        else:
            off += sizes[t]
    raise KeyError(want)


def metadata(cfg, tok, sources, ftype, temp):
    md = []

    def k(key, ty, v):
        md.append([key, ty, v])
    a = "deepseek2."
    k("general.architecture", "str", "deepseek2")
    k("general.type", "str", "model")
    k("general.name", "str", "glmchat demo")
    k("general.size_label", "str", "%.1fM" % (cfg["n_params"] / 1e6))
    k("general.license", "str", LICENSE)
    k("general.description", "str",
      "A small GLM-4.7-Flash-architecture model trained by glmchat's recipe (app/tools/demo_train) on "
      "WordNet 3.0 definitions and the NAME lines of Debian manual pages, as chat turns; "
      "app/demo/DATA-SOURCES.md in glmchat's source lists the packages and their licences.")
    # the sampling this model is meant for (llama.cpp's keys; glmchat reads
    # them over its template's defaults): a model this small says English
    # words at a low temperature and invents words at GLM-4.7's 1.0
    k("general.sampling.temp", "f32", temp)
    srcs = sources["sources"]
    k("general.dataset.count", "u32", len(srcs))
    for i, s in enumerate(srcs):
        k("general.dataset.%d.name" % i, "str", "Debian package %s" % s["package"])
        k("general.dataset.%d.version" % i, "str", s["version"] or "")
        k("general.dataset.%d.license" % i, "str", ", ".join(s["licences"]))
        k("general.dataset.%d.description" % i, "str", s["used"])
    k(a + "block_count", "u32", cfg["n_layer"] + cfg["n_nextn"])
    k(a + "context_length", "u32", cfg["n_ctx"])
    k(a + "embedding_length", "u32", cfg["n_embd"])
    k(a + "feed_forward_length", "u32", cfg["n_ff_dense"])
    k(a + "attention.head_count", "u32", cfg["n_head"])
    k(a + "attention.head_count_kv", "u32", 1)
    k(a + "rope.freq_base", "f32", cfg["rope_base"])
    k(a + "attention.layer_norm_rms_epsilon", "f32", cfg["rms_eps"])
    k(a + "expert_count", "u32", cfg["n_expert"])
    k(a + "expert_used_count", "u32", cfg["n_expert_used"])
    k(a + "expert_group_count", "u32", 1)
    k(a + "expert_group_used_count", "u32", 1)
    k(a + "expert_gating_func", "u32", 2)  # sigmoid
    k("general.file_type", "u32", ftype)
    k(a + "leading_dense_block_count", "u32", cfg["n_dense_lead"])
    k(a + "vocab_size", "u32", cfg["n_vocab"])
    k(a + "attention.q_lora_rank", "u32", cfg["q_lora"])
    k(a + "attention.kv_lora_rank", "u32", cfg["kv_lora"])
    k(a + "attention.key_length", "u32", cfg["kv_lora"] + cfg["qk_rope"])
    k(a + "attention.value_length", "u32", cfg["kv_lora"])
    k(a + "attention.key_length_mla", "u32", cfg["qk_nope"] + cfg["qk_rope"])
    k(a + "attention.value_length_mla", "u32", cfg["v_head"])
    k(a + "expert_feed_forward_length", "u32", cfg["n_ff_exp"])
    k(a + "expert_shared_count", "u32", cfg["n_expert_shared"])
    k(a + "expert_weights_scale", "f32", cfg["expert_weights_scale"])
    k(a + "expert_weights_norm", "bool", True)
    k(a + "rope.dimension_count", "u32", cfg["qk_rope"])
    k(a + "nextn_predict_layers", "u32", cfg["n_nextn"])
    ids = {t: i for i, t in enumerate(tok["tokens"]) if tok["types"][i] != 1}
    k("tokenizer.ggml.model", "str", "gpt2")
    k("tokenizer.ggml.pre", "str", tok["pre"])
    k("tokenizer.ggml.tokens", "arr_str", tok["tokens"])
    k("tokenizer.ggml.token_type", "arr_i32", tok["types"])
    k("tokenizer.ggml.merges", "arr_str", tok["merges"])
    k("tokenizer.ggml.eos_token_id", "u32", ids["<|endoftext|>"])
    k("tokenizer.ggml.padding_token_id", "u32", ids["<|endoftext|>"])
    k("tokenizer.ggml.bos_token_id", "u32", ids["[gMASK]"])
    k("tokenizer.ggml.eot_token_id", "u32", ids["<|user|>"])
    k("tokenizer.ggml.unknown_token_id", "u32", ids["<|endoftext|>"])
    k("tokenizer.ggml.eom_token_id", "u32", ids["<|observation|>"])
    template = gguf_string_key(FIXTURE, "tokenizer.chat_template")
    if THINK_DEFAULT_ON not in template:
        sys.exit("export: the fixture's chat template has no generation-prompt line to change")
    k("tokenizer.chat_template", "str", template.replace(THINK_DEFAULT_ON, THINK_DEFAULT_OFF))
    k("glmchat.thinking", "bool", False)
    k("general.quantization_version", "u32", 2)
    return md


WORDNET_NOTICE = """WordNet 3.0 Copyright 2006 by Princeton University.  All rights reserved.

THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO
REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED.  BY WAY OF EXAMPLE, BUT NOT
LIMITATION, PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF
MERCHANTABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE
LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY
PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS."""


def data_sources(sources):
    """app/demo/DATA-SOURCES.md: what the model was trained on, under which licences."""
    out = ["# The built-in demo model: data sources and licences", "",
           "`glm-demo.gguf` is a small model of the GLM-4.7-Flash architecture that glmchat's recipe "
           "(`app/tools/demo_train/`, `make demo-model`) trained on chat turns made from text that "
           "Debian packages ship. Its weights are derived from that text, and its answers quote it, so "
           "the file is distributed under **%s**: the manual pages' licences (GPL-3+, GPL-2+, LGPL, BSD, "
           "ISC and alike; packages with GPL-2-only parts were left out) combine under it, and WordNet's "
           "licence (permissive, with the notice below) allows it. The GGUF says the same in "
           "`general.license` and `general.dataset.N.*`." % LICENSE, "",
           "| package | version | licences (its copyright file) | what was used |", "|---|---|---|---|"]
    for s in sources["sources"]:
        out.append("| %s | %s | %s | %s |" % (s["package"], s["version"], ", ".join(s["licences"]), s["used"]))
    out += ["", "Turns about the demo itself (\"Hello\", \"Who are you?\") were written for it in "
            "`build_corpus.py`.", "", "## WordNet's notice", "",
            "WordNet's licence asks for this notice on every copy, including derived works:", "", "```",
            WORDNET_NOTICE, "```", "",
            "The name of Princeton University or Princeton may not be used in advertising or publicity "
            "pertaining to distribution of the software and/or database.", ""]
    return "\n".join(out)


def tensor_type(name, ne, want):
    """Vectors, the router and the selection bias stay F32 (as in real files);
    matrices take the requested type where their rows fit its blocks."""
    if len(ne) == 1 or "ffn_gate_inp" in name or want == "F32":
        return "F32"
    if want == "Q8_0" and ne[0] % 32:
        return "F16"
    return want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("prep")
    ap.add_argument("sources")
    ap.add_argument("out")
    ap.add_argument("--type", default="F16", choices=["F32", "F16", "Q8_0"])
    ap.add_argument("--temp", type=float, default=0.3, help="the recommended temperature (general.sampling.temp)")
    args = ap.parse_args()
    st = torch.load(args.checkpoint)
    cfg = Config(**st["config"])
    model = GLMDemo(cfg)
    model.load_state_dict(st["model"])
    with open(os.path.join(args.prep, "tokenizer.json")) as f:
        tok = json.load(f)
    with open(args.sources) as f:
        sources = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    tensors = gguf_tensors(model)
    cd = cfg.to_dict()
    cd["n_params"] = sum(int(t.numel()) for _, t in tensors)
    # the context: twice the conversations training saw (128 tokens), so that
    # a few exchanges fit; glmchat leaves the oldest out beyond it.  Distances
    # past the trained ones make later answers of a long chat weaker.
    cd["n_ctx"] = 2 * int(np.load(os.path.join(args.prep, "test.npz"))["tokens"].shape[1])
    ftype = {"F32": 0, "F16": 1, "Q8_0": 7}[args.type]
    man = {"metadata": metadata(cd, tok, sources, ftype, args.temp), "tensors": []}
    off = 0
    with open(os.path.join(args.out, "tensors.f32"), "wb") as f:
        for name, t in tensors:
            ne = list(reversed(t.shape))
            a = t.numpy().astype("<f4")
            f.write(a.tobytes())
            man["tensors"].append({"name": name, "ne": ne, "type": tensor_type(name, ne, args.type), "offset": off})
            off += a.nbytes
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(man, f)
    with open(os.path.join(args.out, "DATA-SOURCES.md"), "w") as f:
        f.write(data_sources(sources))
    print("export: %d tensors, %.2fM parameters, %s" % (len(tensors), cd["n_params"] / 1e6, args.type))


if __name__ == "__main__":
    main()
