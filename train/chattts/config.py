"""ChatTTS model sizes and the numbers every part shares.

The ``official`` size is 2noise/ChatTTS as published (ChatTTS/config/config.py of the v0.2
releases; the same numbers as the v0.1 YAML files): GPT 768/3072/12 heads/20 layers over a
21178-token text vocabulary and 4 x 626 audio tokens, Decoder 384/512/12, DVAE encoder
512->1024 with a grouped residual FSQ (levels 5,5,5,5; 2 groups x 2 residuals), Vocos 100 mel
bins -> 512 x 8 ConvNeXt -> ISTFT head (n_fft 1024, hop 256, 24 kHz).

Shape rules that tie the parts together (checked by ``ChatTTSConfig.validate``):
  gpt.hidden == 2 * decoder.idim      (one code frame -> two mel frames)
  dvae.vq_dim == 2 * dvae.dim == dvae.encoder_odim
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Dict, List

SAMPLE_RATE = 24000
N_FFT = 1024
HOP = 256
N_MELS = 100
NUM_VQ = 4
FSQ_LEVELS = (5, 5, 5, 5)


@dataclass
class GPTConfig:
    hidden: int = 768
    ffn: int = 3072
    heads: int = 12
    layers: int = 20
    max_positions: int = 4096
    num_text_tokens: int = 21178
    num_audio_tokens: int = 626  # 625 FSQ codes + EOS (625)
    num_vq: int = NUM_VQ
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0


@dataclass
class ConvNeXtStackConfig:
    """ChatTTS's DVAEDecoder: conv_in (idim -> bn_dim -> hidden), n_layer ConvNeXt blocks
    (kernel 7, dilation 2, FFN 4*hidden), conv_out (hidden -> odim, 1x1)."""
    idim: int
    odim: int
    hidden: int
    n_layer: int
    bn_dim: int


@dataclass
class VocosConfig:
    dim: int = 512
    intermediate: int = 1536
    layers: int = 8


@dataclass
class ChatTTSConfig:
    gpt: GPTConfig = field(default_factory=GPTConfig)
    # Decoder: GPT hidden states -> log-mel (Decoder.safetensors)
    decoder: ConvNeXtStackConfig = field(default_factory=lambda: ConvNeXtStackConfig(384, 384, 512, 12, 128))
    # DVAE (DVAE.safetensors): downsample conv 100 -> dim, encoder dim -> vq_dim, GFSQ, and a
    # decoder vq_dim/2 -> dim for code -> mel.
    dvae_dim: int = 512
    dvae_encoder: ConvNeXtStackConfig = field(default_factory=lambda: ConvNeXtStackConfig(512, 1024, 256, 12, 128))
    dvae_decoder: ConvNeXtStackConfig = field(default_factory=lambda: ConvNeXtStackConfig(512, 512, 256, 12, 128))
    vq_dim: int = 1024
    vq_levels: List[int] = field(default_factory=lambda: list(FSQ_LEVELS))
    vq_groups: int = 2
    vq_residuals: int = 2
    vocos: VocosConfig = field(default_factory=VocosConfig)
    sample_rate: int = SAMPLE_RATE
    n_fft: int = N_FFT
    hop: int = HOP
    n_mels: int = N_MELS

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ChatTTSConfig":
        d = dict(d)
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown ChatTTS config keys: {sorted(unknown)}")
        sub = {"gpt": GPTConfig, "vocos": VocosConfig, "decoder": ConvNeXtStackConfig,
               "dvae_encoder": ConvNeXtStackConfig, "dvae_decoder": ConvNeXtStackConfig}
        for k, typ in sub.items():
            if k in d and isinstance(d[k], dict):
                kk = {f.name for f in fields(typ)}
                bad = set(d[k]) - kk
                if bad:
                    raise ValueError(f"unknown ChatTTS config keys in {k}: {sorted(bad)}")
                d[k] = typ(**d[k])
        c = cls(**d)
        c.validate()
        return c

    def validate(self) -> None:
        g = self.gpt
        errs = []
        if g.hidden % g.heads or (g.hidden // g.heads) % 2:
            errs.append(f"gpt.hidden {g.hidden} must split into {g.heads} heads of even size")
        if g.hidden != 2 * self.decoder.idim:
            errs.append(f"gpt.hidden {g.hidden} must be 2 x decoder.idim {self.decoder.idim}")
        if self.decoder.odim != self.decoder.idim:
            errs.append("decoder.odim must equal decoder.idim (out_conv takes decoder.idim channels)")
        if self.vq_dim != 2 * self.dvae_dim or self.dvae_encoder.odim != self.vq_dim:
            errs.append(f"dvae: vq_dim {self.vq_dim} must be 2 x dim {self.dvae_dim} and the encoder's odim")
        if self.dvae_encoder.idim != self.dvae_dim or self.dvae_decoder.idim != self.dvae_dim \
                or self.dvae_decoder.odim != self.dvae_dim:
            errs.append("dvae: encoder.idim, decoder.idim and decoder.odim must equal dim")
        if self.vq_dim % self.vq_groups:
            errs.append("dvae: vq_dim must split into vq_groups")
        n_codes = 1
        for lv in self.vq_levels:
            n_codes *= lv
        if g.num_audio_tokens != n_codes + 1:
            errs.append(f"gpt.num_audio_tokens {g.num_audio_tokens} must be prod(vq_levels)+1 = {n_codes + 1}")
        if g.num_vq != self.vq_groups * self.vq_residuals:
            errs.append(f"gpt.num_vq {g.num_vq} must be vq_groups x vq_residuals")
        if errs:
            raise ValueError("invalid ChatTTS config: " + "; ".join(errs))

    @property
    def num_codes(self) -> int:
        """FSQ codes per stream (625); the EOS code is this number."""
        return self.gpt.num_audio_tokens - 1


def _stack(idim, odim, hidden, n_layer, bn_dim) -> ConvNeXtStackConfig:
    return ConvNeXtStackConfig(idim, odim, hidden, n_layer, bn_dim)


# Named sizes.  "official" is the published model (random weights only for benchmarks; never
# committed).  "demo" is Parley's trained voice (assets/demo/chattts), "demo4" its shallower
# first phases; "tiny" is for the Go
# engine's test fixture (testdata/chattts/tiny, a few hundred KB).  num_text_tokens of demo and
# tiny is set from their tokenizer.
SIZES: Dict[str, dict] = {
    "official": {},
    "demo": dict(
        gpt=GPTConfig(hidden=192, ffn=576, heads=4, layers=6, max_positions=2048, num_text_tokens=0),
        decoder=_stack(96, 96, 128, 4, 64),
        dvae_dim=64, dvae_encoder=_stack(64, 128, 96, 3, 48), dvae_decoder=_stack(64, 64, 96, 3, 48), vq_dim=128,
        vocos=VocosConfig(dim=192, intermediate=576, layers=4),
    ),
    # the demo voice's first phases (and its bundles up to phase 9) had 4 GPT layers; phase 10
    # went on with 6 (train.chattts.train gpt --deepen)
    "demo4": dict(
        gpt=GPTConfig(hidden=192, ffn=576, heads=4, layers=4, max_positions=2048, num_text_tokens=0),
        decoder=_stack(96, 96, 128, 4, 64),
        dvae_dim=64, dvae_encoder=_stack(64, 128, 96, 3, 48), dvae_decoder=_stack(64, 64, 96, 3, 48), vq_dim=128,
        vocos=VocosConfig(dim=192, intermediate=576, layers=4),
    ),
}
# the demo voice deepened to 8 or 10 GPT layers (train.chattts.train gpt --size demo8 --deepen), for
# more capacity where the voice loses most: free-running sampling (train.chattts.oracle)
for _layers in (8, 10):
    SIZES[f"demo{_layers}"] = dict(SIZES["demo"], gpt=GPTConfig(hidden=192, ffn=576, heads=4, layers=_layers,
                                                                max_positions=2048, num_text_tokens=0))
# the demo voice with a deeper decoder (ChatTTS's own has 12 blocks): the oracle found the decoder
# losing most of what the true codes carry (judge WER 18 -> 47 %), and its fits plateaued at mel L1
# 0.440 with 4 blocks; grown from a 4-block one with train.chattts.train gpt --deepen
for _blocks in (8, 12):
    SIZES[f"demo-dec{_blocks}"] = dict(SIZES["demo"], decoder=_stack(96, 96, 128, _blocks, 64))
# every size of the demo voice's family (the same GPT width, trained by the demo recipes)
DEMO_SIZES = ("demo", "demo4", "demo8", "demo10", "demo-dec8", "demo-dec12")
SIZES.update({
    "tiny": dict(
        gpt=GPTConfig(hidden=16, ffn=32, heads=2, layers=2, max_positions=512, num_text_tokens=0),
        decoder=_stack(8, 8, 16, 1, 8),
        dvae_dim=8, dvae_encoder=_stack(8, 16, 16, 1, 8), dvae_decoder=_stack(8, 8, 16, 1, 8), vq_dim=16,
        vocos=VocosConfig(dim=16, intermediate=32, layers=1),
    ),
})


def config_for(size: str, num_text_tokens: int | None = None) -> ChatTTSConfig:
    if size not in SIZES:
        raise ValueError(f"unknown ChatTTS size {size!r} (known: {', '.join(SIZES)})")
    c = ChatTTSConfig(**copy.deepcopy(SIZES[size]))
    if num_text_tokens:
        c.gpt = GPTConfig(**{**asdict(c.gpt), "num_text_tokens": num_text_tokens})
    if c.gpt.num_text_tokens <= 0:
        raise ValueError(f"size {size!r} needs num_text_tokens (the tokenizer's vocabulary size)")
    c.validate()
    return c
