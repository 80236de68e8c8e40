#!/usr/bin/env python3
"""A float64 forward pass of a deepseek2 (GLM-4.7-Flash / DeepSeek-V2) GGUF,
independent of glmchat's C code: weights dequantized by llama.cpp's own
Python package (gguf-py), the model written from tests/data/FIXTURES.md's
description ("What the computation is").  It makes the reference logits of
tests/data/quant/ref (quantized files the oracle fixtures do not ship).

    /usr/bin/python3 tests/tools/ref_f64.py GGUF_PY_DIR MODEL.gguf TOKENS OUT.bin [N_GREEDY]

TOKENS: comma-separated prompt ids.  Writes the logits of every prompt
position (float32, [n_tokens][n_vocab]) to OUT.bin and prints JSON: the
greedy continuation (N_GREEDY ids, default 12, lowest id on ties), the
smallest top-2 logit margin over the prompt and the continuation, and the
smallest gap between the last chosen and the first rejected expert score.
Checked against the fixtures' own float64 logits (logits.ref_f64.*.bin):
see tests/data/quant/README.md.  Needs python3-numpy.

Two probes of how far a correct backend may be from the reference (not
used for the stored references): REF_F16_OPERANDS=1 rounds both operands
of every weight product to float16 (a tensor-core mat-mat's inputs;
REF_F16_ROUTER=0 keeps the router exact), and REF_SWAP_EXPERT=LAYER:POS
takes the first rejected expert instead of the last chosen one there (a
near-tie flipped by rounding; "min_expert_margin_at" says where the
smallest gap is).
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
from gguf import GGUFReader  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

MODEL, TOKENS, OUT = sys.argv[2], [int(t) for t in sys.argv[3].split(",")], sys.argv[4]
N_GREEDY = int(sys.argv[5]) if len(sys.argv) > 5 else 12

r = GGUFReader(MODEL)
kv = {f.name: f for f in r.fields.values()}


def meta(key, default=None):
    f = kv.get("deepseek2." + key, kv.get(key))
    if f is None:
        return default
    v = f.contents()
    return v



class F16Operands(np.ndarray):
    """A weight matrix whose products round both operands to float16 first:
    what a tensor-core mat-mat (fp16 operands, fp32 sums) computes, summed
    here in float64.  Only with REF_F16_OPERANDS=1 (set REF_F16_ROUTER=0 to
    keep the router exact): it measures how far a model's logits move from
    operand rounding alone, the error a correct tensor-core prompt graph
    has (tests/t_vk_lowbit.sh)."""

    def __matmul__(self, other):
        a = np.asarray(self).astype(np.float16).astype(np.float64)
        return a @ np.asarray(other).astype(np.float16).astype(np.float64)


F16_OPERANDS = os.environ.get("REF_F16_OPERANDS") == "1"
F16_ROUTER = os.environ.get("REF_F16_ROUTER", "1") == "1"

tensors = {}
for t in r.tensors:
    ne = [int(x) for x in t.shape]
    w = dequantize(t.data, t.tensor_type).astype(np.float64)
    w = w.reshape(list(reversed(ne)))
    if (F16_OPERANDS and w.ndim >= 2 and t.name != "token_embd.weight"
            and (F16_ROUTER or not t.name.endswith("ffn_gate_inp.weight"))):
        w = w.view(F16Operands)
    tensors[t.name] = w


def W(name):
    return tensors.get(name)


n_layer = int(meta("block_count")) - int(meta("nextn_predict_layers", 0))
n_head = int(meta("attention.head_count"))
n_embd = int(meta("embedding_length"))
q_lora = int(meta("attention.q_lora_rank", 0))
kv_lora = int(meta("attention.kv_lora_rank"))
n_rot = int(meta("rope.dimension_count"))
kq_dim = int(meta("attention.key_length_mla"))
qk_nope = kq_dim - n_rot
v_head = int(meta("attention.value_length_mla"))
n_dense = int(meta("leading_dense_block_count"))
n_used = int(meta("expert_used_count"))
gating = int(meta("expert_gating_func", 1))
w_norm = bool(meta("expert_weights_norm", False))
w_scale = float(meta("expert_weights_scale", 1.0))
eps = float(meta("attention.layer_norm_rms_epsilon"))
base = float(meta("rope.freq_base"))
yarn_factor = float(meta("rope.scaling.factor", 0.0)) if meta("rope.scaling.type") == "yarn" else 0.0
n_ctx_orig = int(meta("rope.scaling.original_context_length", 0))
kq_scale = 1.0 / math.sqrt(kq_dim)
if yarn_factor > 1:
    mscale_all = float(meta("rope.scaling.yarn_log_multiplier")) / 0.1
    m = 1.0 + 0.1 * mscale_all * math.log(yarn_factor)
    kq_scale *= m * m


def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x) + eps) * w


def rope_angles(pos):
    """(cos, sin) per pair: ggml NORM mode, YaRN as ggml's rope_yarn (beta 32/1)."""
    i = np.arange(n_rot // 2, dtype=np.float64)
    theta_extrap = pos * base ** (-2.0 * i / n_rot)
    if yarn_factor <= 1:
        return np.cos(theta_extrap), np.sin(theta_extrap)

    def corr(beta):
        return n_rot * math.log(n_ctx_orig / (beta * 2 * math.pi)) / (2 * math.log(base))
    lo, hi = max(0.0, math.floor(corr(32.0))), min(n_rot - 1.0, math.ceil(corr(1.0)))
    ramp = 1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)
    theta = theta_extrap / yarn_factor * (1 - ramp) + theta_extrap * ramp
    return np.cos(theta), np.sin(theta)


def rope(v, pos):
    c, s = rope_angles(pos)
    a, b = v[0::2], v[1::2]
    out = np.empty_like(v)
    out[0::2] = a * c - b * s
    out[1::2] = a * s + b * c
    return out


def silu(x):
    return x / (1 + np.exp(-x))


margins = {"expert": math.inf, "at": None}
# REF_SWAP_EXPERT=LAYER:POS (e.g. 2:3): at that layer and prompt position,
# take the first rejected expert instead of the last chosen one -- what a
# backend whose rounding flips a near-tie computes (see t_vk_lowbit.sh).
SWAP = tuple(int(v) for v in os.environ["REF_SWAP_EXPERT"].split(":")) if os.environ.get("REF_SWAP_EXPERT") else None


def moe(L, x, il, pos):
    logits = W(L + "ffn_gate_inp.weight") @ x
    probs = 1 / (1 + np.exp(-logits)) if gating == 2 else np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    bias = W(L + "exp_probs_b.bias")
    sel_score = probs + (bias if bias is not None else 0)
    order = np.argsort(-sel_score, kind="stable")
    if len(order) > n_used:
        gap = sel_score[order[n_used - 1]] - sel_score[order[n_used]]
        if gap < margins["expert"]:
            margins["expert"], margins["at"] = gap, (il, pos)
        if SWAP == (il, pos):
            order = order.copy()
            order[n_used - 1], order[n_used] = order[n_used], order[n_used - 1]
    chosen = order[:n_used]
    wts = probs[chosen]
    if w_norm:
        wts = wts / max(wts.sum(), 6.103515625e-5)
    if w_scale not in (0.0, 1.0):
        wts = wts * w_scale
    gate, up, down = W(L + "ffn_gate_exps.weight"), W(L + "ffn_up_exps.weight"), W(L + "ffn_down_exps.weight")
    if gate is None:  # merged ffn_gate_up_exps
        gu = W(L + "ffn_gate_up_exps.weight")
        half = gu.shape[1] // 2
        gate, up = gu[:, :half, :], gu[:, half:, :]
    y = np.zeros_like(x)
    for e, w in zip(chosen, wts):
        y += w * (down[e] @ (silu(gate[e] @ x) * (up[e] @ x)))
    if W(L + "ffn_gate_shexp.weight") is not None:
        h = silu(W(L + "ffn_gate_shexp.weight") @ x) * (W(L + "ffn_up_shexp.weight") @ x)
        y += W(L + "ffn_down_shexp.weight") @ h
    return y


def forward(tokens):
    """Logits of every position (naive MLA: keys and values expanded)."""
    T = len(tokens)
    xs = [W("token_embd.weight")[t].copy() for t in tokens]
    for il in range(n_layer):
        L = "blk.%d." % il
        qs, latents, krs = [], [], []
        for p, x in enumerate(xs):
            h = rmsnorm(x, W(L + "attn_norm.weight"))
            if q_lora:
                q = W(L + "attn_q_b.weight") @ rmsnorm(W(L + "attn_q_a.weight") @ h, W(L + "attn_q_a_norm.weight"))
            else:
                q = W(L + "attn_q.weight") @ h
            q = q.reshape(n_head, kq_dim)
            q = np.concatenate([q[:, :qk_nope], np.stack([rope(qh[qk_nope:], p) for qh in q])], axis=1)
            kva = W(L + "attn_kv_a_mqa.weight") @ h
            latents.append(rmsnorm(kva[:kv_lora], W(L + "attn_kv_a_norm.weight")))
            krs.append(rope(kva[kv_lora:], p))
            qs.append(q)
        kb, vb = W(L + "attn_k_b.weight"), W(L + "attn_v_b.weight")  # (head, kv_lora, nope), (head, v_head, kv_lora)
        lat = np.stack(latents)                       # (T, kv_lora)
        k_nope = np.einsum("hln,tl->htn", np.asarray(kb), lat)  # (head, T, nope)
        kr = np.stack(krs)                            # (T, rope)
        outs = []
        for p in range(T):
            q = qs[p]
            o = []
            for hd in range(n_head):
                s = (k_nope[hd, :p + 1] @ q[hd, :qk_nope] + kr[:p + 1] @ q[hd, qk_nope:]) * kq_scale
                pr = np.exp(s - s.max())
                pr /= pr.sum()
                o.append(vb[hd] @ (pr @ lat[:p + 1]))
            outs.append(W(L + "attn_output.weight") @ np.concatenate(o))
        xs = [x + a for x, a in zip(xs, outs)]
        for p in range(T):
            h = rmsnorm(xs[p], W(L + "ffn_norm.weight"))
            if il < n_dense:
                f = W(L + "ffn_down.weight") @ (silu(W(L + "ffn_gate.weight") @ h) * (W(L + "ffn_up.weight") @ h))
            else:
                f = moe(L, h, il, p)
            xs[p] = xs[p] + f
    return np.stack([W("output.weight") @ rmsnorm(x, W("output_norm.weight")) for x in xs])


def top2_margin(row):
    s = np.sort(row)
    return float(s[-1] - s[-2])


prompt_logits = forward(TOKENS)
prompt_logits.astype("<f4").tofile(OUT)
margin = min(top2_margin(r_) for r_ in prompt_logits)
expert_margin_prompt, expert_margin_at = margins["expert"], margins["at"]
seq, greedy = list(TOKENS), []
last = prompt_logits[-1]
for _ in range(N_GREEDY):
    nxt = int(np.argmax(last))  # argmax: lowest id on ties
    greedy.append(nxt)
    margin = min(margin, top2_margin(last))
    seq.append(nxt)
    if len(greedy) < N_GREEDY:
        last = forward(seq)[-1]
json.dump({"tokens": TOKENS, "n_vocab": int(prompt_logits.shape[1]), "greedy_continuation": greedy,
           "min_top2_margin": margin, "min_expert_margin_prompt": float(expert_margin_prompt),
           "min_expert_margin_at": expert_margin_at,
           "produced_by": "tests/tools/ref_f64.py (float64 NumPy, weights dequantized by gguf-py)"},
          sys.stdout, indent=1)
print()
