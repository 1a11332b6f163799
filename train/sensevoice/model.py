"""SenseVoice-Small in plain PyTorch.

The architecture follows FunASR's SenseVoiceSmall (SAN-M encoder with FSMN memory
blocks, a 16-row prompt embedding for the language / event / emotion / text-norm
queries, and a CTC head).  Parameter names match the official checkpoint, so a
FunASR ``model.pt`` state dict loads with ``load_state_dict(strict=True)``:

    embed.weight                                   (16, 560)
    encoder.encoders0.0.self_attn.linear_q_k_v.*    (1536, 560)
    encoder.encoders0.0.self_attn.fsmn_block.weight (512, 1, 11)
    encoder.encoders.{0..48}.*  encoder.tp_encoders.{0..19}.*
    encoder.after_norm.*  encoder.tp_norm.*
    ctc.ctc_lo.*                                    (V, 512)

The code is our own; only the structure and names follow the published model.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from ..trainer import load_torch

# Prompt-embedding rows, as in FunASR (lid_dict / textnorm_dict).  Rows 1 and 2
# are the fixed event and emotion queries.
LANG_IDS: Dict[str, int] = {"auto": 0, "zh": 3, "en": 4, "yue": 7, "ja": 11, "ko": 12, "nospeech": 13}
TEXTNORM_IDS: Dict[str, int] = {"withitn": 14, "woitn": 15}
EVENT_QUERY_ROW = 1
EMO_QUERY_ROW = 2
NUM_PROMPT_ROWS = 7 + len(LANG_IDS) + len(TEXTNORM_IDS)  # 16
NUM_QUERIES = 4  # language, event, emotion, text-norm


@dataclass
class SenseVoiceConfig:
    input_size: int = 560  # 80 fbank bins x LFR window 7
    d_model: int = 512
    heads: int = 4
    ffn: int = 2048
    kernel_size: int = 11
    sanm_shift: int = 0
    num_blocks: int = 50  # encoders0 (1) + encoders (num_blocks - 1)
    tp_blocks: int = 20
    vocab_size: int = 25055
    dropout: float = 0.1
    attention_dropout: float = 0.1

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SenseVoiceConfig":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown SenseVoice config keys: {sorted(unknown)}")
        return cls(**d)


# Named sizes.  "small" is SenseVoice-Small (about 234M parameters with the
# official 25055-piece vocabulary).  "tiny" is for Go test models (a few
# hundred KB); "demo" was the first embedded model (espeak-ng only), "base" is the embedded
# model trained on the human-derived corpus.
SIZES: Dict[str, dict] = {
    "small": dict(d_model=512, heads=4, ffn=2048, kernel_size=11, num_blocks=50, tp_blocks=20, vocab_size=25055),
    "demo": dict(d_model=128, heads=4, ffn=512, kernel_size=11, num_blocks=6, tp_blocks=2),
    # "demo" deepened by train.sensevoice.grow (identity blocks between its own), then trained on
    "demo-deep": dict(d_model=128, heads=4, ffn=512, kernel_size=11, num_blocks=11, tp_blocks=2),
    # "demo-deep" deepened again (session 14's stage F)
    "demo-deep16": dict(d_model=128, heads=4, ffn=512, kernel_size=11, num_blocks=16, tp_blocks=2),
    # and again (session 15's stage G)
    "demo-deep20": dict(d_model=128, heads=4, ffn=512, kernel_size=11, num_blocks=20, tp_blocks=2),
    # and again (session 16's stage H, trained without dropout)
    "demo-deep24": dict(d_model=128, heads=4, ffn=512, kernel_size=11, num_blocks=24, tp_blocks=2),
    # and again (session 17's stage I, from stage H recovered from its ONNX)
    "demo-deep28": dict(d_model=128, heads=4, ffn=512, kernel_size=11, num_blocks=28, tp_blocks=2),
    # the embedded recogniser trained on the human-derived corpus (about 10M parameters)
    "base": dict(d_model=256, heads=4, ffn=1024, kernel_size=11, num_blocks=10, tp_blocks=2),
    "tiny": dict(d_model=32, heads=2, ffn=64, kernel_size=5, num_blocks=2, tp_blocks=1),
}


def config_for(size: str, **overrides) -> SenseVoiceConfig:
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r} (known: {', '.join(SIZES)})")
    d = dict(SIZES[size])
    d.update({k: v for k, v in overrides.items() if v is not None})
    return SenseVoiceConfig(**d)


def sinusoidal_encoding(t: int, depth: int, device, dtype) -> torch.Tensor:
    """FunASR's SinusoidalPositionEncoder: positions 1..t, [sin | cos] halves."""
    pos = torch.arange(1, t + 1, device=device, dtype=torch.float32)
    half = depth // 2
    inc = math.log(10000.0) / (depth / 2 - 1)
    inv = torch.exp(torch.arange(half, device=device, dtype=torch.float32) * -inc)
    ang = pos[:, None] * inv[None, :]
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).to(dtype)


def length_mask(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """(N,) lengths -> (N, t) bool mask, True on valid frames."""
    return torch.arange(t, device=lengths.device)[None, :] < lengths.to(torch.int64)[:, None]


class LayerNorm(nn.LayerNorm):
    """LayerNorm computed in float32 (safe under AMP), same parameters as nn.LayerNorm."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight.float() if self.weight is not None else None
        b = self.bias.float() if self.bias is not None else None
        return F.layer_norm(x.float(), self.normalized_shape, w, b, self.eps).type_as(x)


class FeedForward(nn.Module):
    def __init__(self, d: int, hidden: int, dropout: float):
        super().__init__()
        self.w_1 = nn.Linear(d, hidden)
        self.w_2 = nn.Linear(hidden, d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


class SANMAttention(nn.Module):
    """Multi-head self-attention plus an FSMN memory block over the values."""

    def __init__(self, heads: int, in_dim: int, d: int, dropout: float, kernel_size: int, shift: int = 0):
        super().__init__()
        if d % heads:
            raise ValueError(f"d_model {d} is not divisible by {heads} heads")
        self.h = heads
        self.d_k = d // heads
        self.linear_out = nn.Linear(d, d)
        self.linear_q_k_v = nn.Linear(in_dim, 3 * d)
        self.fsmn_block = nn.Conv1d(d, d, kernel_size, stride=1, padding=0, groups=d, bias=False)
        left = (kernel_size - 1) // 2 + max(shift, 0)
        self.pad = (left, kernel_size - 1 - left)
        self.dropout = nn.Dropout(dropout)

    def fsmn(self, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        if mask is not None:
            v = v * mask
        y = F.pad(v.transpose(1, 2), self.pad)
        y = self.fsmn_block(y).transpose(1, 2) + v
        y = self.dropout(y)
        if mask is not None:
            y = y * mask
        return y

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        # x (N,T,in); mask (N,T,1) float or None
        n, t, _ = x.shape
        q, k, v = torch.split(self.linear_q_k_v(x), self.h * self.d_k, dim=-1)
        memory = self.fsmn(v, mask)
        qh = q.reshape(n, t, self.h, self.d_k).transpose(1, 2) * (self.d_k ** -0.5)
        kh = k.reshape(n, t, self.h, self.d_k).transpose(1, 2)
        vh = v.reshape(n, t, self.h, self.d_k).transpose(1, 2)
        scores = torch.matmul(qh, kh.transpose(-2, -1))  # (N,h,T,T)
        if mask is not None:
            pad = (mask.reshape(n, 1, 1, t) == 0)
            scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)
            attn = torch.softmax(scores, dim=-1).masked_fill(pad, 0.0)
        else:
            attn = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(self.dropout(attn), vh).transpose(1, 2).reshape(n, t, self.h * self.d_k)
        return self.linear_out(ctx) + memory


class SANMLayer(nn.Module):
    def __init__(self, in_dim: int, cfg: SenseVoiceConfig):
        super().__init__()
        d = cfg.d_model
        self.self_attn = SANMAttention(cfg.heads, in_dim, d, cfg.attention_dropout, cfg.kernel_size, cfg.sanm_shift)
        self.feed_forward = FeedForward(d, cfg.ffn, cfg.dropout)
        self.norm1 = LayerNorm(in_dim)
        self.norm2 = LayerNorm(d)
        self.dropout = nn.Dropout(cfg.dropout)
        self.residual_attn = in_dim == d

    def forward(self, x, mask):
        y = self.dropout(self.self_attn(self.norm1(x), mask))
        x = x + y if self.residual_attn else y
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class SenseVoiceEncoder(nn.Module):
    def __init__(self, cfg: SenseVoiceConfig):
        super().__init__()
        if cfg.num_blocks < 1:
            raise ValueError("num_blocks must be >= 1")
        self.d_model = cfg.d_model
        self.encoders0 = nn.ModuleList([SANMLayer(cfg.input_size, cfg)])
        self.encoders = nn.ModuleList([SANMLayer(cfg.d_model, cfg) for _ in range(cfg.num_blocks - 1)])
        self.tp_encoders = nn.ModuleList([SANMLayer(cfg.d_model, cfg) for _ in range(cfg.tp_blocks)])
        self.after_norm = LayerNorm(cfg.d_model)
        self.tp_norm = LayerNorm(cfg.d_model)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        n, t, c = x.shape
        mask = length_mask(lengths, t).to(x.dtype).unsqueeze(-1)  # (N,T,1)
        x = x * (self.d_model ** 0.5) + sinusoidal_encoding(t, c, x.device, x.dtype)[None]
        for layer in self.encoders0:
            x = layer(x, mask)
        for layer in self.encoders:
            x = layer(x, mask)
        x = self.after_norm(x)
        for layer in self.tp_encoders:
            x = layer(x, mask)
        return self.tp_norm(x)


class CTCHead(nn.Module):
    def __init__(self, d: int, vocab: int):
        super().__init__()
        self.ctc_lo = nn.Linear(d, vocab)

    def forward(self, x):
        return self.ctc_lo(x)


class SenseVoiceSmall(nn.Module):
    """SenseVoice-Small.  ``forward`` is the sherpa-onnx export signature."""

    def __init__(self, cfg: SenseVoiceConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = SenseVoiceEncoder(cfg)
        self.ctc = CTCHead(cfg.d_model, cfg.vocab_size)
        self.embed = nn.Embedding(NUM_PROMPT_ROWS, cfg.input_size)

    def queries(self, language: torch.Tensor, text_norm: torch.Tensor) -> torch.Tensor:
        """(N,) language rows, (N,) text-norm rows -> (N,4,C) prompt prefix."""
        n = language.shape[0]
        lang = self.embed(language.to(torch.int64)).unsqueeze(1)
        tn = self.embed(text_norm.to(torch.int64)).unsqueeze(1)
        rows = torch.tensor([EVENT_QUERY_ROW, EMO_QUERY_ROW], dtype=torch.int64, device=language.device)
        ev = self.embed(rows).unsqueeze(0).expand(n, -1, -1)
        return torch.cat([lang, ev.to(lang.dtype), tn], dim=1)

    def encode(self, x, x_length, language, text_norm) -> Tuple[torch.Tensor, torch.Tensor]:
        q = self.queries(language, text_norm).to(x.dtype)
        x = torch.cat([q, x], dim=1)
        lengths = x_length.to(torch.int64) + NUM_QUERIES
        return self.encoder(x, lengths), lengths

    def forward(self, x, x_length, language, text_norm, y=None, y_length=None, rich=None):
        """x (N,T,560) float, x_length/language/text_norm (N,) int -> logits (N,T+4,V).

        With targets (training, so DDP sees the call): returns ``self.loss(...)``."""
        if y is not None:
            return self.loss(x, x_length, language, text_norm, y, y_length, rich)
        enc, _ = self.encode(x, x_length, language, text_norm)
        return self.ctc(enc)

    def loss(self, x, x_length, language, text_norm, targets, target_lengths, rich_targets,
             rich_weight: float = 1.0) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """CTC loss over the speech frames plus cross-entropy of the 4 query
        positions against their tags (language, emotion, event, itn), as FunASR.

        targets (N,L) int64 padded with anything, target_lengths (N,),
        rich_targets (N,4) int64 token ids (-1 = ignore).
        Returns (sum-over-batch loss, stats); the caller normalises.
        """
        enc, lengths = self.encode(x, x_length, language, text_norm)
        logits = self.ctc(enc)
        lp = torch.log_softmax(logits[:, NUM_QUERIES:].float(), dim=-1).transpose(0, 1)  # (T,N,V)
        ctc = F.ctc_loss(lp, targets, (lengths - NUM_QUERIES), target_lengths,
                         blank=0, reduction="sum", zero_infinity=True)
        rich = F.cross_entropy(logits[:, :NUM_QUERIES].float().reshape(-1, logits.shape[-1]),
                               rich_targets.reshape(-1), ignore_index=-1, reduction="sum")
        total = ctc + rich_weight * rich
        return total, {"ctc": ctc.detach(), "rich": rich.detach()}


def build(cfg: SenseVoiceConfig) -> SenseVoiceSmall:
    return SenseVoiceSmall(cfg)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def load_checkpoint_weights(model: SenseVoiceSmall, path: str, strict: bool = True, new_head: bool = False):
    """Load an official FunASR ``model.pt`` (or one of our checkpoints) into ``model``.  With
    ``new_head`` the CTC head is left at its random start when its vocabulary differs (a
    recogniser trained on with another vocabulary: its encoder already listens)."""
    try:
        obj = load_torch(path)
    except Exception as e:  # noqa: BLE001 - report the file
        raise RuntimeError(f"{path}: cannot read checkpoint: {e}") from e
    if isinstance(obj, dict) and "model" in obj and isinstance(obj["model"], dict):
        obj = obj["model"]
    if isinstance(obj, dict) and "state_dict" in obj:
        obj = obj["state_dict"]
    if not isinstance(obj, dict):
        raise RuntimeError(f"{path}: not a state dict (got {type(obj).__name__})")
    obj = {k[len("module."):] if k.startswith("module.") else k: v for k, v in obj.items()}
    if new_head:
        own = model.state_dict()
        obj = {k: v for k, v in obj.items() if not (k.startswith("ctc.") and k in own and own[k].shape != v.shape)}
    missing, unexpected = model.load_state_dict(obj, strict=False)
    if new_head:
        missing = [k for k in missing if not k.startswith("ctc.")]
    if strict and (missing or unexpected):
        raise RuntimeError(f"{path}: state dict mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return missing, unexpected
