"""model.py: deepseek2 (GLM-4.7-Flash flavour) in PyTorch, as glmchat computes it.

Mirrors core/ref_forward.c step for step, with parameters named and laid out
as the GGUF tensors (a torch weight [out][in] is a GGUF matrix of ne (in,
out), byte for byte), so export is a dump:

  embed -> per block: attn_norm, MLA (q_a, q_a_norm, q_b; kv_a_mqa = latent |
  k_rope, kv_a_norm; RoPE on q_rope and k_rope; the absorbed form: scores =
  kq_scale * ([k_b q_nope | q_rope] . [latent | k_rope]); ctx = softmax . latent;
  heads = v_b ctx; attn_output), ffn_norm, dense SwiGLU (leading blocks) or MoE
  (router sigmoid; top-k on probs + exp_probs_b; weights = the unbiased probs
  of the chosen, normalised (sum clamped) then x expert_weights_scale; plus
  the shared expert) -> output_norm -> output.

The NextN/MTP block (blk.{n_layer}), as llama.cpp's deepseek2 MTP graph runs
it: input = eh_proj(concat(rmsnorm(embed(token t+1), enorm),
rmsnorm(h_t, hnorm))) where h_t is the main model's final hidden state after
output_norm; then a whole MoE block (its own attention over the MTP inputs);
then shared_head_norm and the main model's output head: logits for token t+2.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, **kw):
        self.n_vocab = 2048
        self.n_embd = 96
        self.n_layer = 3            # blocks the forward pass runs (without NextN)
        self.n_dense_lead = 1
        self.n_head = 4
        self.q_lora = 48
        self.kv_lora = 32
        self.qk_nope = 16
        self.qk_rope = 16
        self.v_head = 24
        self.n_ff_dense = 256
        self.n_ff_exp = 64
        self.n_expert = 8
        self.n_expert_used = 2
        self.n_expert_shared = 1
        self.expert_weights_scale = 1.8
        self.rms_eps = 1e-5
        self.rope_base = 10000.0
        self.n_ctx = 512
        self.n_nextn = 1
        self.__dict__.update(kw)

    def to_dict(self):
        return dict(self.__dict__)

    @property
    def kq_scale(self):
        # no rope scaling: mscale 1 (core/model.c read_rope)
        return 1.0 / math.sqrt(self.qk_nope + self.qk_rope)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_cos_sin(c, n_pos, device=None):
    """(n_pos, rope/2) cos and sin as core/rope.c: ggml's rope_yarn without
    scaling (freq_scale 1, ext_factor 0, attn_factor 1): theta_i = pos *
    base^(-2i/n_dims), stepped by repeated multiplication in float there;
    the same angles in float64 here (differences ~1e-7 relative)."""
    n = c.qk_rope
    theta_scale = c.rope_base ** (-2.0 / n)
    inv = torch.tensor([theta_scale ** i for i in range(n // 2)], dtype=torch.float64)
    pos = torch.arange(n_pos, dtype=torch.float64)
    ang = pos[:, None] * inv[None, :]
    return torch.cos(ang).float().to(device), torch.sin(ang).float().to(device)


def rope_apply(x, cos, sin):
    """Adjacent pairs (ggml NORM mode): x (..., T, rope), cos/sin (T, rope/2)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def lin(n_in, n_out, std=None):
    w = torch.empty(n_out, n_in)
    nn.init.normal_(w, std=std if std is not None else 1.0 / math.sqrt(n_in))
    return nn.Parameter(w)


def ones(n):
    return nn.Parameter(torch.ones(n))


class Block(nn.Module):
    def __init__(self, c, moe, nextn=False):
        super().__init__()
        self.c, self.moe = c, moe
        H, qd = c.n_embd, c.n_head * (c.qk_nope + c.qk_rope)
        self.attn_norm = ones(H)
        self.attn_q_a_norm = ones(c.q_lora)
        self.attn_kv_a_norm = ones(c.kv_lora)
        self.attn_q_a = lin(H, c.q_lora)
        self.attn_q_b = lin(c.q_lora, qd)
        self.attn_kv_a_mqa = lin(H, c.kv_lora + c.qk_rope)
        # per head: kv_lora rows of nope (k_b), v_head rows of kv_lora (v_b)
        self.attn_k_b = nn.Parameter(torch.randn(c.n_head, c.kv_lora, c.qk_nope) / math.sqrt(c.kv_lora))
        self.attn_v_b = nn.Parameter(torch.randn(c.n_head, c.v_head, c.kv_lora) / math.sqrt(c.kv_lora))
        self.attn_output = lin(c.n_head * c.v_head, H, std=0.5 / math.sqrt(c.n_head * c.v_head * c.n_layer))
        self.ffn_norm = ones(H)
        if not moe:
            self.ffn_gate = lin(H, c.n_ff_dense)
            self.ffn_up = lin(H, c.n_ff_dense)
            self.ffn_down = lin(c.n_ff_dense, H, std=0.5 / math.sqrt(c.n_ff_dense * c.n_layer))
        else:
            E, Fe, FS = c.n_expert, c.n_ff_exp, c.n_ff_exp * c.n_expert_shared
            self.ffn_gate_inp = lin(H, E, std=0.02)
            self.register_buffer("exp_probs_b", torch.zeros(E))
            self.ffn_gate_exps = nn.Parameter(torch.randn(E, Fe, H) / math.sqrt(H))
            self.ffn_up_exps = nn.Parameter(torch.randn(E, Fe, H) / math.sqrt(H))
            self.ffn_down_exps = nn.Parameter(torch.randn(E, H, Fe) * (0.5 / math.sqrt(Fe * c.n_layer)))
            self.ffn_gate_shexp = lin(H, FS)
            self.ffn_up_shexp = lin(H, FS)
            self.ffn_down_shexp = lin(FS, H, std=0.5 / math.sqrt(FS * c.n_layer))
        if nextn:
            self.nextn_eh_proj = lin(2 * H, H)
            self.nextn_enorm = ones(H)
            self.nextn_hnorm = ones(H)
            self.nextn_shared_head_norm = ones(H)
        self.last_load = None  # tokens per expert in the last forward (bias update)
        self.last_sel = None   # (tokens, k) chosen experts in the last forward

    # ---- attention (MLA, absorbed) ----
    def attention(self, x, cos, sin):
        c = self.c
        B, T, H = x.shape
        xn = rmsnorm(x, self.attn_norm, c.rms_eps)
        qa = rmsnorm(xn @ self.attn_q_a.t(), self.attn_q_a_norm, c.rms_eps)
        q = (qa @ self.attn_q_b.t()).view(B, T, c.n_head, c.qk_nope + c.qk_rope).transpose(1, 2)
        q_nope, q_rope = q[..., :c.qk_nope], q[..., c.qk_nope:]
        kv = xn @ self.attn_kv_a_mqa.t()
        latent = rmsnorm(kv[..., :c.kv_lora], self.attn_kv_a_norm, c.rms_eps)   # (B, T, lora)
        k_rope = rope_apply(kv[..., c.kv_lora:], cos, sin)                        # (B, T, rope)
        q_rope = rope_apply(q_rope, cos, sin)                                     # (B, h, T, rope)
        # per head: kv_lora x nope matrices; one mm per head (small batched
        # products are slow on the CPU)
        q_abs = torch.stack([q_nope[:, h] @ self.attn_k_b[h].t() for h in range(c.n_head)], 1)  # (B, h, T, lora)
        qq = torch.cat((q_abs, q_rope), -1)
        kk = torch.cat((latent, k_rope), -1)                                      # (B, T, lora + rope)
        # one key row per position, shared by every head (MQA): the heads
        # stack into one (h*T, d) matrix per sequence, a single bmm each way
        hd = c.n_head
        score = (qq.reshape(B, hd * T, -1) @ kk.transpose(1, 2)).view(B, hd, T, T) * c.kq_scale
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        p = torch.softmax(score.masked_fill(mask, float("-inf")), -1)
        ctx = (p.view(B, hd * T, T) @ latent).view(B, hd, T, c.kv_lora)             # (B, h, T, lora)
        heads = torch.cat([ctx[:, h] @ self.attn_v_b[h].t() for h in range(c.n_head)], -1)  # (B, T, h*v_head)
        return heads @ self.attn_output.t()

    # ---- feed-forward ----
    def moe_ffn(self, xn):
        c = self.c
        shp = xn.shape
        x2 = xn.reshape(-1, shp[-1])
        probs = torch.sigmoid(x2 @ self.ffn_gate_inp.t())                          # (N, E)
        sel = torch.topk(probs.detach() + self.exp_probs_b, c.n_expert_used, dim=-1).indices
        w = probs.gather(1, sel)
        w = w / w.sum(-1, keepdim=True).clamp(min=6.103515625e-5)
        if c.expert_weights_scale not in (0.0, 1.0):
            w = w * c.expert_weights_scale
        out = torch.zeros_like(x2)
        load = torch.zeros(c.n_expert)
        for e in range(c.n_expert):
            tok, slot = (sel == e).nonzero(as_tuple=True)
            load[e] = tok.numel()
            if tok.numel() == 0:
                continue
            xe = x2.index_select(0, tok)
            h = F.silu(xe @ self.ffn_gate_exps[e].t()) * (xe @ self.ffn_up_exps[e].t())
            out.index_add_(0, tok, (h @ self.ffn_down_exps[e].t()) * w[tok, slot, None])
        self.last_load = load
        self.last_sel = sel.detach()
        sh = F.silu(x2 @ self.ffn_gate_shexp.t()) * (x2 @ self.ffn_up_shexp.t())
        out = out + sh @ self.ffn_down_shexp.t()
        return out.view(shp)

    def ffn(self, x):
        xn = rmsnorm(x, self.ffn_norm, self.c.rms_eps)
        if self.moe:
            return self.moe_ffn(xn)
        return (F.silu(xn @ self.ffn_gate.t()) * (xn @ self.ffn_up.t())) @ self.ffn_down.t()

    def forward(self, x, cos, sin):
        x = x + self.attention(x, cos, sin)
        return x + self.ffn(x)


class GLMDemo(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.token_embd = nn.Parameter(torch.randn(c.n_vocab, c.n_embd))
        self.blocks = nn.ModuleList(Block(c, i >= c.n_dense_lead) for i in range(c.n_layer))
        self.nextn = Block(c, True, nextn=True) if c.n_nextn else None
        self.output_norm = ones(c.n_embd)
        self.output = lin(c.n_embd, c.n_vocab)

    def forward(self, tokens):
        """tokens (B, T) -> main logits (B, T, V) and the final hidden state
        after output_norm (B, T, H), the NextN block's h input."""
        c = self.c
        cos, sin = rope_cos_sin(c, tokens.shape[1])
        x = self.token_embd[tokens]
        for b in self.blocks:
            x = b(x, cos, sin)
        h = rmsnorm(x, self.output_norm, c.rms_eps)
        return h @ self.output.t(), h

    def nextn_forward(self, h, next_tokens):
        """h (B, T, H): main final hidden states at positions t; next_tokens
        (B, T): the tokens at t+1.  Returns logits for t+2 and the block's
        normed output (the h of a further draft step)."""
        c, b = self.c, self.nextn
        cos, sin = rope_cos_sin(c, h.shape[1])
        e = self.token_embd[next_tokens]
        x = torch.cat((rmsnorm(e, b.nextn_enorm, c.rms_eps), rmsnorm(h, b.nextn_hnorm, c.rms_eps)), -1)
        x = x @ b.nextn_eh_proj.t()
        x = b(x, cos, sin)
        hn = rmsnorm(x, b.nextn_shared_head_norm, c.rms_eps)
        return hn @ self.output.t(), hn

    def moe_blocks(self):
        return [b for b in list(self.blocks) + ([self.nextn] if self.nextn is not None else []) if b.moe]


def gguf_tensors(model):
    """(name, float32 tensor in GGUF element order) in the file's order."""
    c = model.c
    out = [("token_embd.weight", model.token_embd)]
    blocks = list(model.blocks) + ([model.nextn] if model.nextn is not None else [])
    for il, b in enumerate(blocks):
        p = "blk.%d." % il
        out += [(p + "attn_norm.weight", b.attn_norm), (p + "attn_q_a_norm.weight", b.attn_q_a_norm),
                (p + "attn_kv_a_norm.weight", b.attn_kv_a_norm), (p + "attn_q_a.weight", b.attn_q_a),
                (p + "attn_q_b.weight", b.attn_q_b), (p + "attn_kv_a_mqa.weight", b.attn_kv_a_mqa),
                (p + "attn_k_b.weight", b.attn_k_b), (p + "attn_v_b.weight", b.attn_v_b),
                (p + "attn_output.weight", b.attn_output), (p + "ffn_norm.weight", b.ffn_norm)]
        if not b.moe:
            out += [(p + "ffn_gate.weight", b.ffn_gate), (p + "ffn_up.weight", b.ffn_up),
                    (p + "ffn_down.weight", b.ffn_down)]
        else:
            out += [(p + "ffn_gate_inp.weight", b.ffn_gate_inp), (p + "exp_probs_b.bias", b.exp_probs_b),
                    (p + "ffn_down_exps.weight", b.ffn_down_exps), (p + "ffn_gate_exps.weight", b.ffn_gate_exps),
                    (p + "ffn_up_exps.weight", b.ffn_up_exps), (p + "ffn_gate_shexp.weight", b.ffn_gate_shexp),
                    (p + "ffn_up_shexp.weight", b.ffn_up_shexp), (p + "ffn_down_shexp.weight", b.ffn_down_shexp)]
        if il >= c.n_layer:
            out += [(p + "nextn.eh_proj.weight", b.nextn_eh_proj), (p + "nextn.enorm.weight", b.nextn_enorm),
                    (p + "nextn.hnorm.weight", b.nextn_hnorm),
                    (p + "nextn.shared_head_norm.weight", b.nextn_shared_head_norm)]
    out += [("output_norm.weight", model.output_norm), ("output.weight", model.output)]
    return [(n, t.detach().float().contiguous()) for n, t in out]
