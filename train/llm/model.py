"""A Qwen3-shaped decoder (also Qwen2 and Llama layouts: qkv bias, per-head q/k norm) written to
export in the onnx-community / transformers.js signature:

    inputs   input_ids [b, s] int64, attention_mask [b, past+s] int64, position_ids [b, s] int64,
             past_key_values.N.key / .value [b, kv_heads, past, head_dim]
    outputs  logits [b, s, vocab], present.N.key / .value [b, kv_heads, past+s, head_dim]

Keys are cached after RoPE, as Hugging Face's DynamicCache does.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass
class Config:
    model_type: str = "qwen3"  # qwen3 | qwen2 | llama
    vocab_size: int = 512
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False  # a tied random head mostly repeats the input token
    bos_token_id: int = 0
    eos_token_id: int = 1

    @property
    def qk_norm(self) -> bool:
        return self.model_type == "qwen3"

    @property
    def qkv_bias(self) -> bool:
        return self.model_type == "qwen2"

    def hf(self, **extra) -> dict:
        """config.json as Hugging Face writes it."""
        d = asdict(self)
        d.update({
            "architectures": [{"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}[self.model_type]],
            "hidden_act": "silu", "torch_dtype": "float32", "use_cache": True, "attention_bias": self.qkv_bias,
        })
        d.update(extra)
        return d


SIZES = {
    # the committed test model
    "tiny": Config(),
    # Qwen3-0.6B's shapes (random weights, for benchmarks only)
    "0.6b": Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                   num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                   tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(v + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=c.qkv_bias)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=c.qkv_bias)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=c.qkv_bias)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        if c.qk_norm:
            self.q_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
            self.k_norm = RMSNorm(c.head_dim, c.rms_norm_eps)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        c = self.c
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, c.num_attention_heads, c.head_dim)
        k = self.k_proj(x).view(b, s, c.num_key_value_heads, c.head_dim)
        v = self.v_proj(x).view(b, s, c.num_key_value_heads, c.head_dim)
        if c.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        rep = c.num_attention_heads // c.num_key_value_heads
        t = k.shape[2]
        kk = k.unsqueeze(2).expand(b, c.num_key_value_heads, rep, t, c.head_dim).reshape(b, c.num_attention_heads, t, c.head_dim)
        vv = v.unsqueeze(2).expand(b, c.num_key_value_heads, rep, t, c.head_dim).reshape(b, c.num_attention_heads, t, c.head_dim)
        att = torch.matmul(q, kk.transpose(2, 3)) * (c.head_dim ** -0.5)
        att = att + mask
        att = torch.softmax(att, dim=-1)
        o = torch.matmul(att, vv).transpose(1, 2).reshape(b, s, c.num_attention_heads * c.head_dim)
        return self.o_proj(o), k, v


class MLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask, pk, pv):
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, mask, pk, pv)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), k, v


class Decoder(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float32) / c.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        c = self.c
        x = self.embed_tokens(input_ids)
        freqs = position_ids.unsqueeze(-1).float() * self.inv_freq  # [b, s, hd/2]
        emb = torch.cat([freqs, freqs], dim=-1).unsqueeze(1)  # [b, 1, s, hd]
        cos, sin = emb.cos(), emb.sin()
        s = input_ids.shape[1]
        total = attention_mask.shape[1]
        kpos = torch.arange(total).unsqueeze(0)
        qpos = torch.arange(s).unsqueeze(1) + (total - s)
        allowed = (kpos <= qpos).unsqueeze(0).unsqueeze(0) & (attention_mask[:, None, None, :] > 0)
        mask = torch.zeros(allowed.shape, dtype=torch.float32).masked_fill(~allowed, torch.finfo(torch.float32).min)
        presents = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.norm(x)), *presents)


def init_random(model: Decoder, seed: int, head_std: float = 1.0) -> None:
    """Random weights with a fixed seed. Norm weights stay near one; the (tied) embedding is
    wide enough that greedy decoding has clear winners, so peers agree token for token."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            elif "lm_head" in name:
                p.copy_(head_std * 3.0 * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
