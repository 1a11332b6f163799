"""The ChatTTS architecture (2noise/ChatTTS) in plain PyTorch, with the official parameter names.

Five parts, one per published asset file, each a module whose ``state_dict()`` has exactly the
names and shapes of that file (see checkpoint.py for the loaders):

  gpt      asset/gpt/model.safetensors   Llama decoder without embed_tokens (HF LlamaModel names:
                                         layers.N.self_attn.{q,k,v,o}_proj, layers.N.mlp.{gate,up,down}_proj,
                                         layers.N.{input,post_attention}_layernorm, norm)
  embed    asset/Embed.safetensors       emb_text, emb_code.{0..3}, head_text and head_code.{0..3}
                                         (weight-normed: parametrizations.weight.original0 = g, original1 = v)
  decoder  asset/Decoder.safetensors     GPT hidden states -> 100-bin log-mel (coef, decoder.*, out_conv)
  dvae     asset/DVAE.safetensors        log-mel -> 4 code streams (downsample_conv, encoder, vq_layer) and back
  vocos    asset/Vocos.safetensors       log-mel -> ConvNeXt backbone -> ISTFT head (mag, phase) -> 24 kHz

The code is our own; only the structure and names follow the published model.  The GFSQ follows
vector-quantize-pytorch as it was from Dec 2023 to Oct 2024 (the releases ChatTTS was trained and
published with): residual = bound(project_in(x)); per residual r, scale = (level-1)^-r,
q = round(bound(residual/scale)) / (level//2); residual -= q*scale.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
import torchaudio
from torch import nn

from .config import ChatTTSConfig, ConvNeXtStackConfig, GPTConfig, VocosConfig


# --------------------------------------------------------------------------------------- GPT


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.heads, self.head_dim = c.heads, c.hidden // c.heads
        self.q_proj = nn.Linear(c.hidden, c.hidden, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.hidden, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.hidden, bias=False)
        self.o_proj = nn.Linear(c.hidden, c.hidden, bias=False)
        self.keep_attn = False
        self.last_attn = None

    def forward(self, x, cos, sin, bias, past_k, past_v):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + bias
        att = torch.softmax(att, dim=-1)
        if self.keep_attn:  # training only: the guided-attention loss reads it
            self.last_attn = att
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return self.o_proj(y), k, v


class LlamaMLP(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden, c.ffn, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.ffn, bias=False)
        self.down_proj = nn.Linear(c.ffn, c.hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.self_attn = LlamaAttention(c)
        self.mlp = LlamaMLP(c)
        self.input_layernorm = RMSNorm(c.hidden, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.rms_norm_eps)

    def forward(self, x, cos, sin, bias, past_k, past_v):
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, bias, past_k, past_v)
        x = x + a
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, k, v


class LlamaModel(nn.Module):
    """HF LlamaModel without embed_tokens, with an explicit stacked KV cache.

    past_kv: (layers, 2, B, heads, P, head_dim) or None.  attention_mask: (B, P+S), 1 = a real
    position.  Query i (absolute position P+i) sees keys j <= P+i whose mask is 1.
    """

    def __init__(self, c: GPTConfig):
        super().__init__()
        self.cfg = c
        self.layers = nn.ModuleList([LlamaDecoderLayer(c) for _ in range(c.layers)])
        self.norm = RMSNorm(c.hidden, c.rms_norm_eps)
        hd = c.hidden // c.heads
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                past_kv: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        b, s, _ = x.shape
        freqs = position_ids.to(torch.float32).unsqueeze(-1) * self.inv_freq  # (B,S,hd/2)
        emb = torch.cat([freqs, freqs], dim=-1).unsqueeze(1)  # (B,1,S,hd)
        cos, sin = emb.cos(), emb.sin()
        total = attention_mask.shape[1]
        past = total - s
        key_pos = torch.arange(total, device=x.device).view(1, 1, 1, total)
        query_pos = (torch.arange(s, device=x.device) + past).view(1, 1, s, 1)
        allowed = (key_pos <= query_pos) & (attention_mask.view(b, 1, 1, total) > 0)
        bias = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device).masked_fill(
            ~allowed, torch.finfo(x.dtype).min)
        ks, vs = [], []
        for i, layer in enumerate(self.layers):
            pk = past_kv[i, 0] if past_kv is not None else None
            pv = past_kv[i, 1] if past_kv is not None else None
            x, k, v = layer(x, cos, sin, bias, pk, pv)
            ks.append(k)
            vs.append(v)
        present = torch.stack([torch.stack([k, v]) for k, v in zip(ks, vs)])
        return self.norm(x), present


class WeightNormLinear(nn.Module):
    """Linear without bias under torch's weight_norm parametrization (dim 0): the state dict holds
    ``parametrizations.weight.original0`` (g, (out, 1)) and ``parametrizations.weight.original1``
    (v, (out, in)); weight = g * v / ||v||_row."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        v = torch.empty(n_out, n_in)
        nn.init.kaiming_uniform_(v, a=math.sqrt(5))
        p = nn.Module()
        p.original0 = nn.Parameter(v.norm(dim=1, keepdim=True).clone())
        p.original1 = nn.Parameter(v)
        self.parametrizations = nn.ModuleDict({"weight": p})

    @property
    def weight(self) -> torch.Tensor:
        p = self.parametrizations["weight"]
        return p.original0 * p.original1 / p.original1.norm(dim=1, keepdim=True)

    def forward(self, x):
        return F.linear(x, self.weight)


class Embed(nn.Module):
    """Embed.safetensors: the GPT's input embeddings and output heads."""

    def __init__(self, c: GPTConfig):
        super().__init__()
        self.num_vq = c.num_vq
        self.emb_code = nn.ModuleList([nn.Embedding(c.num_audio_tokens, c.hidden) for _ in range(c.num_vq)])
        self.emb_text = nn.Embedding(c.num_text_tokens, c.hidden)
        self.head_text = WeightNormLinear(c.hidden, c.num_text_tokens)
        self.head_code = nn.ModuleList([WeightNormLinear(c.hidden, c.num_audio_tokens) for _ in range(c.num_vq)])

    def forward(self, input_ids: torch.Tensor, text_mask: torch.Tensor) -> torch.Tensor:
        """input_ids (B,S,num_vq) int64: text positions carry the text id in channel 0, audio
        positions the num_vq codes; text_mask (B,S) bool, true at text positions."""
        tm = text_mask.unsqueeze(-1)
        text_ids = torch.where(text_mask, input_ids[..., 0], torch.zeros_like(input_ids[..., 0]))
        code_ids = torch.where(tm, torch.zeros_like(input_ids), input_ids)
        e_text = self.emb_text(text_ids)
        e_code = self.emb_code[0](code_ids[..., 0])
        for i in range(1, self.num_vq):
            e_code = e_code + self.emb_code[i](code_ids[..., i])
        return torch.where(tm, e_text, e_code)

    def logits_code(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., num_vq, num_audio_tokens)"""
        return torch.stack([h(hidden) for h in self.head_code], dim=-2)


def apply_speaker(emb: torch.Tensor, input_ids: torch.Tensor, text_mask: torch.Tensor,
                  spk_emb: torch.Tensor, spk_emb_id: int) -> torch.Tensor:
    """Replace the [spk_emb] text positions by the L2-normalised speaker vector (ChatTTS's
    Speaker.apply: F.normalize(p=2, eps=1e-12)).  spk_emb: (B, H)."""
    n = spk_emb / spk_emb.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    hit = text_mask & (input_ids[..., 0] == spk_emb_id)
    return torch.where(hit.unsqueeze(-1), n.unsqueeze(1).expand_as(emb), emb)


# -------------------------------------------------------------------------- ConvNeXt stacks


class ConvNeXtBlock(nn.Module):
    """ChatTTS's DVAE ConvNeXt block (kernel 7, dilation 2); layer scale named ``weight``
    (``gamma`` before ChatTTS commit b3d511b, Oct 2024; the loaders rename it)."""

    def __init__(self, dim: int, intermediate: int, kernel: int = 7, dilation: int = 2,
                 layer_scale_init: float = 1e-6):
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel, padding=dilation * (kernel // 2), dilation=dilation, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate)
        self.pwconv2 = nn.Linear(intermediate, dim)
        self.weight = nn.Parameter(layer_scale_init * torch.ones(dim))

    def forward(self, x):
        y = self.dwconv(x).transpose(1, 2)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y)))) * self.weight
        return x + y.transpose(1, 2)


class DVAEDecoder(nn.Module):
    """ChatTTS's DVAEDecoder (used as encoder and decoder)."""

    def __init__(self, c: ConvNeXtStackConfig, layer_scale_init: float = 1e-6):
        super().__init__()
        self.conv_in = nn.Sequential(nn.Conv1d(c.idim, c.bn_dim, 3, 1, 1), nn.GELU(),
                                     nn.Conv1d(c.bn_dim, c.hidden, 3, 1, 1))
        self.decoder_block = nn.ModuleList(
            [ConvNeXtBlock(c.hidden, c.hidden * 4, layer_scale_init=layer_scale_init) for _ in range(c.n_layer)])
        self.conv_out = nn.Conv1d(c.hidden, c.odim, kernel_size=1, bias=False)

    def forward(self, x):
        y = self.conv_in(x)
        for blk in self.decoder_block:
            y = blk(y)
        return self.conv_out(y)


# ------------------------------------------------------------------------------------- GFSQ


class _ResidualFSQ(nn.Module):
    def __init__(self, dim: int, levels: List[int], residuals: int):
        super().__init__()
        cd = len(levels)
        self.project_in = nn.Linear(dim, cd) if dim != cd else nn.Identity()
        self.project_out = nn.Linear(cd, dim) if dim != cd else nn.Identity()
        lv = torch.tensor(levels, dtype=torch.float32)
        self.register_buffer("levels", lv, persistent=False)
        basis = torch.cumprod(torch.tensor([1] + list(levels[:-1]), dtype=torch.float32), 0)
        self.register_buffer("basis", basis, persistent=False)
        self.register_buffer("scales", torch.stack([(lv - 1) ** -float(r) for r in range(residuals)]),
                             persistent=False)
        self.residuals = residuals

    def bound(self, z, eps: float = 1e-3):
        half_l = (self.levels - 1) * (1 + eps) / 2
        offset = torch.where(torch.remainder(self.levels, 2) == 0, 0.5, 0.0)
        shift = torch.atanh(offset / half_l)
        return torch.tanh(z + shift) * half_l - offset

    def quantize(self, z, straight_through: bool = False):
        b = self.bound(z)
        r = b.round()
        if straight_through:
            r = b + (r - b).detach()
        return r / torch.div(self.levels, 2, rounding_mode="floor")

    def forward(self, x, straight_through: bool = False):
        """x (..., dim) -> (quantized (..., dim), indices (..., residuals))"""
        hw = torch.div(self.levels, 2, rounding_mode="floor")
        z = self.project_in(x)
        residual = self.bound(z)
        out = torch.zeros_like(z)
        idx = []
        for r in range(self.residuals):
            s = self.scales[r]
            q = self.quantize(residual / s, straight_through)
            idx.append(((q * hw + hw) * self.basis).sum(-1).round().to(torch.int64))
            q = q * s
            residual = residual - q.detach()
            out = out + q
        return self.project_out(out), torch.stack(idx, dim=-1)

    def from_indices(self, idx):
        """idx (..., residuals) int64 -> (..., dim)"""
        hw = torch.div(self.levels, 2, rounding_mode="floor")
        out = 0
        for r in range(self.residuals):
            li = torch.remainder(torch.div(idx[..., r:r + 1], self.basis.to(torch.int64), rounding_mode="floor"),
                                 self.levels.to(torch.int64)).to(torch.float32)
            out = out + (li - hw) / hw * self.scales[r]
        return self.project_out(out)


class _GroupedResidualFSQ(nn.Module):
    def __init__(self, dim, levels, groups, residuals):
        super().__init__()
        self.rvqs = nn.ModuleList([_ResidualFSQ(dim // groups, levels, residuals) for _ in range(groups)])


class GFSQ(nn.Module):
    """ChatTTS's GFSQ: channels-first (B, vq_dim, T) -> codes (B, groups*residuals, T), stream
    g*residuals + r."""

    def __init__(self, dim, levels, groups, residuals):
        super().__init__()
        self.quantizer = _GroupedResidualFSQ(dim, levels, groups, residuals)
        self.groups, self.residuals = groups, residuals

    def forward(self, x, straight_through: bool = False):
        x = x.transpose(1, 2)
        feats, inds = [], []
        for rvq, chunk in zip(self.quantizer.rvqs, x.chunk(self.groups, dim=-1)):
            f, i = rvq(chunk, straight_through)
            feats.append(f)
            inds.append(i)
        feat = torch.cat(feats, dim=-1).transpose(1, 2)
        ind = torch.cat(inds, dim=-1).transpose(1, 2)  # (B, G*R, T)
        return feat, ind

    def embed(self, codes):
        """codes (B, G*R, T) -> (B, vq_dim, T)"""
        c = codes.transpose(1, 2)
        outs = [rvq.from_indices(c[..., g * self.residuals:(g + 1) * self.residuals])
                for g, rvq in enumerate(self.quantizer.rvqs)]
        return torch.cat(outs, dim=-1).transpose(1, 2)


# ------------------------------------------------------------------------------------- DVAE


def mel_features(n_mels=100, sample_rate=24000, n_fft=1024, hop=256) -> torchaudio.transforms.MelSpectrogram:
    """Vocos's MelSpectrogramFeatures: magnitude (power 1) STFT, centred (reflect pad), periodic
    Hann window, HTK mel scale without normalisation, f 0..sr/2; features = log(clip(mel, 1e-5))."""
    return torchaudio.transforms.MelSpectrogram(sample_rate=sample_rate, n_fft=n_fft, hop_length=hop,
                                                n_mels=n_mels, center=True, power=1)


def log_mel(spec: torchaudio.transforms.MelSpectrogram, audio: torch.Tensor) -> torch.Tensor:
    return torch.log(torch.clip(spec(audio), min=1e-5))


class DVAE(nn.Module):
    """ChatTTS's DVAE.  With ``encoder`` (DVAE.safetensors) it maps log-mel to codes; the
    ``Decoder`` asset is the same class without encoder and VQ, fed GPT hidden states."""

    def __init__(self, decoder: ConvNeXtStackConfig, dim: int, encoder: Optional[ConvNeXtStackConfig] = None,
                 vq: Optional[Tuple[int, List[int], int, int]] = None, n_mels: int = 100,
                 layer_scale_init: float = 1e-6):
        super().__init__()
        self.register_buffer("coef", torch.rand(n_mels).view(1, n_mels, 1))
        if encoder is not None:
            self.downsample_conv = nn.Sequential(nn.Conv1d(n_mels, dim, 3, 1, 1), nn.GELU(),
                                                 nn.Conv1d(dim, dim, 4, 2, 1), nn.GELU())
            self.encoder = DVAEDecoder(encoder, layer_scale_init)
        else:
            self.downsample_conv = None
            self.encoder = None
        self.decoder = DVAEDecoder(decoder, layer_scale_init)
        self.out_conv = nn.Conv1d(dim, n_mels, 3, 1, 1, bias=False)
        self.vq_layer = GFSQ(*vq) if vq is not None else None

    def encode(self, mel: torch.Tensor, straight_through: bool = False):
        """log-mel (B, n_mels, F) -> (vq features (B, vq_dim, F//2), codes (B, num_vq, F//2))"""
        x = self.downsample_conv(mel / self.coef)
        x = self.encoder(x)
        return self.vq_layer(x, straight_through)

    def decode(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, C, T) -> log-mel (B, n_mels, 2T): the first C/2 channels give even frames."""
        b, c, t = feats.shape
        x = feats.view(b, 2, c // 2, t).permute(0, 2, 3, 1).reshape(b, c // 2, 2 * t)
        return self.out_conv(self.decoder(x)) * self.coef

    def decode_codes(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decode(self.vq_layer.embed(codes))


# ------------------------------------------------------------------------------------ Vocos


class VocosConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, intermediate: int, layer_scale_init: float):
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate)
        self.pwconv2 = nn.Linear(intermediate, dim)
        self.gamma = nn.Parameter(layer_scale_init * torch.ones(dim))

    def forward(self, x):
        y = self.dwconv(x).transpose(1, 2)
        y = self.gamma * self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        return x + y.transpose(1, 2)


class VocosBackbone(nn.Module):
    def __init__(self, n_mels: int, c: VocosConfig):
        super().__init__()
        self.embed = nn.Conv1d(n_mels, c.dim, kernel_size=7, padding=3)
        self.norm = nn.LayerNorm(c.dim, eps=1e-6)
        self.convnext = nn.ModuleList([VocosConvNeXtBlock(c.dim, c.intermediate, 1.0 / c.layers)
                                       for _ in range(c.layers)])
        self.final_layer_norm = nn.LayerNorm(c.dim, eps=1e-6)
        for m in self.modules():
            if isinstance(m, (nn.Conv1d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.norm(self.embed(x).transpose(1, 2)).transpose(1, 2)
        for blk in self.convnext:
            x = blk(x)
        return self.final_layer_norm(x.transpose(1, 2))  # (B, F, dim)


class ISTFTHead(nn.Module):
    def __init__(self, dim: int, n_fft: int, hop: int):
        super().__init__()
        self.out = nn.Linear(dim, n_fft + 2)
        self.istft = nn.Module()
        self.istft.register_buffer("window", torch.hann_window(n_fft))
        self.n_fft, self.hop = n_fft, hop

    def mag_phase(self, x):
        """(B, F, dim) -> mag, phase (B, n_fft/2+1, F): mag = min(exp(.), 100)."""
        y = self.out(x).transpose(1, 2)
        m, p = y.chunk(2, dim=1)
        return torch.clip(torch.exp(m), max=1e2), p

    def forward(self, x):
        mag, p = self.mag_phase(x)
        return istft(mag, p, self.istft.window, self.n_fft, self.hop)


def istft(mag: torch.Tensor, phase: torch.Tensor, window: torch.Tensor, n_fft: int, hop: int) -> torch.Tensor:
    """What the Go engine must reproduce: S = mag * (cos(phase) + i sin(phase));
    torch.istft(S, n_fft, hop, n_fft, hann_periodic, center=True) -> (B, hop*(F-1))."""
    spec = torch.complex(mag * torch.cos(phase), mag * torch.sin(phase))
    return torch.istft(spec, n_fft, hop, n_fft, window, center=True)


class Vocos(nn.Module):
    def __init__(self, c: ChatTTSConfig):
        super().__init__()
        self.feature_extractor = nn.Module()
        self.feature_extractor.mel_spec = mel_features(c.n_mels, c.sample_rate, c.n_fft, c.hop)
        self.backbone = VocosBackbone(c.n_mels, c.vocos)
        self.head = ISTFTHead(c.vocos.dim, c.n_fft, c.hop)

    def features(self, audio):
        return log_mel(self.feature_extractor.mel_spec, audio)

    def mag_phase(self, mel):
        return self.head.mag_phase(self.backbone(mel))

    def decode(self, mel):
        return self.head(self.backbone(mel))


# ------------------------------------------------------------------------------- the whole


class ChatTTS(nn.Module):
    """All five parts.  Our own checkpoints store this module's state dict (prefixes gpt.,
    embed., decoder., dvae., vocos.)."""

    PARTS = ("gpt", "embed", "decoder", "dvae", "vocos")

    def __init__(self, cfg: ChatTTSConfig, layer_scale_init: float = 1e-6):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.gpt = LlamaModel(cfg.gpt)
        self.embed = Embed(cfg.gpt)
        self.decoder = DVAE(cfg.decoder, cfg.decoder.idim, n_mels=cfg.n_mels, layer_scale_init=layer_scale_init)
        self.dvae = DVAE(cfg.dvae_decoder, cfg.dvae_dim, encoder=cfg.dvae_encoder,
                         vq=(cfg.vq_dim, list(cfg.vq_levels), cfg.vq_groups, cfg.vq_residuals),
                         n_mels=cfg.n_mels, layer_scale_init=layer_scale_init)
        self.vocos = Vocos(cfg)
        if cfg.gpt.hidden < 768:  # small models: the Llama default init (std 0.02) everywhere
            for m in list(self.gpt.modules()) + list(self.embed.emb_code) + [self.embed.emb_text]:
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)

    def hidden_states(self, input_ids, text_mask, attention_mask, spk_emb=None, spk_emb_id=-1,
                      position_ids=None):
        """Teacher-forced GPT: (B,S,num_vq) ids -> (B,S,H) final hidden states."""
        emb = self.embed(input_ids, text_mask)
        if spk_emb is not None:
            emb = apply_speaker(emb, input_ids, text_mask, spk_emb, spk_emb_id)
        if position_ids is None:
            position_ids = positions_from_mask(attention_mask)
        h, _ = self.gpt(emb, attention_mask, position_ids)
        return h


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """ChatTTS/HF position ids for left-padded rows: cumsum(mask)-1, 1 at padding."""
    p = attention_mask.long().cumsum(-1) - 1
    return p.masked_fill(attention_mask == 0, 1)


def count_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())
