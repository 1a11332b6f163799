"""A small speaker encoder in the I/O signature of CAM++ as CosyVoice and 3D-Speaker ship it.

    input  "input"  float32 (B, T, 80): Kaldi fbank (Povey window, no dither, samples in
                    [-1, 1]) with each utterance's mean over time subtracted;
    output "output" float32 (B, 192): the speaker embedding (compare with cosine similarity).

The network follows CAM++'s outline at a fraction of its size: a 2-D convolutional front
end over (frequency, time) (CAM++'s FCM), dilated 1-D convolutions with context-aware
masking (each block's output is gated by a sigmoid of its utterance-level and local
averages), statistics pooling (mean and standard deviation over time) and a dense
embedding layer with batch norm. Training uses an additive angular margin softmax
(AAM-softmax, as CAM++ does) over the training speakers; the classifier is not exported.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

FEAT_DIM = 80


@dataclass
class SpeakerConfig:
    front_channels: int = 16  # 2-D front end channels
    channels: int = 128  # 1-D trunk width
    blocks: int = 3  # dilated context-aware-masking blocks (dilations 1, 2, 3, ...)
    embedding: int = 192

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SpeakerConfig":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


SIZES = {
    "tiny": dict(front_channels=4, channels=16, blocks=1, embedding=192),
    "demo": dict(front_channels=16, channels=128, blocks=3, embedding=192),
}


def config_for(size: str, **over) -> SpeakerConfig:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r} (have {sorted(SIZES)})")
    return SpeakerConfig(**{**SIZES[size], **over})


class FrontEnd(nn.Module):
    """2-D convolutions over (frequency, time), frequency reduced 4x: (B, T, 80) -> (B, C*20, T)."""

    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv3 = nn.Conv2d(c, c, 3, stride=(2, 1), padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)
        self.out_channels = c * (FEAT_DIM // 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2).unsqueeze(1)  # (B, 1, 80, T)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        b, c, f, t = x.shape
        return x.reshape(b, c * f, t)


class CAMBlock(nn.Module):
    """A dilated convolution whose output is masked by its context (utterance mean + local mean)."""

    def __init__(self, c: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv1d(c, c, 3, dilation=dilation, padding=dilation, bias=False)
        self.bn = nn.BatchNorm1d(c)
        self.mask = nn.Conv1d(c, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv(x)))
        ctx = y.mean(dim=2, keepdim=True) + F.avg_pool1d(y, 9, stride=1, padding=4, count_include_pad=False)
        return x + y * torch.sigmoid(self.mask(ctx))


class SpeakerEncoder(nn.Module):
    def __init__(self, cfg: SpeakerConfig):
        super().__init__()
        self.cfg = cfg
        self.front = FrontEnd(cfg.front_channels)
        self.tdnn = nn.Conv1d(self.front.out_channels, cfg.channels, 5, padding=2, bias=False)
        self.tdnn_bn = nn.BatchNorm1d(cfg.channels)
        self.blocks = nn.ModuleList(CAMBlock(cfg.channels, d + 1) for d in range(cfg.blocks))
        self.dense = nn.Linear(2 * cfg.channels, cfg.embedding)
        self.dense_bn = nn.BatchNorm1d(cfg.embedding, affine=False)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, T, 80) mean-normalised fbank -> (B, embedding)."""
        x = F.relu(self.tdnn_bn(self.tdnn(self.front(feats))))
        for blk in self.blocks:
            x = blk(x)
        mean = x.mean(dim=2)
        std = torch.sqrt(((x - mean.unsqueeze(2)) ** 2).mean(dim=2) + 1e-5)
        return self.dense_bn(self.dense(torch.cat([mean, std], dim=1)))


class AAMSoftmax(nn.Module):
    """Additive angular margin softmax: cos(theta + m) for the true class, scaled by s."""

    def __init__(self, embedding: int, classes: int, margin: float = 0.2, scale: float = 30.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(classes, embedding) * 0.01)
        self.margin, self.scale = margin, scale

    def forward(self, emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        cos = F.linear(F.normalize(emb), F.normalize(self.weight)).clamp(-1 + 1e-7, 1 - 1e-7)
        theta = torch.acos(cos)
        target = torch.cos(theta + self.margin)
        onehot = F.one_hot(labels, cos.shape[1]).to(cos.dtype)
        logits = self.scale * (onehot * target + (1 - onehot) * cos)
        return F.cross_entropy(logits, labels, reduction="sum")


class TrainingModel(nn.Module):
    """The encoder plus its training-only classifier (one module, so DDP syncs both)."""

    def __init__(self, cfg: SpeakerConfig, speakers: int, margin: float = 0.2):
        super().__init__()
        self.encoder = SpeakerEncoder(cfg)
        self.head = AAMSoftmax(cfg.embedding, speakers, margin=margin)

    def forward(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(feats), labels)


def count_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a, b, dim=-1)


def eer(scores_same, scores_diff) -> float:
    """Equal error rate of target (same speaker) vs non-target scores."""
    s = sorted([(v, 1) for v in scores_same] + [(v, 0) for v in scores_diff], key=lambda p: -p[0])
    n_t, n_n = len(scores_same), len(scores_diff)
    if n_t == 0 or n_n == 0:
        return math.nan
    fa, miss, best = 0, n_t, 1.0
    for _, is_t in s:  # threshold moves down through the scores
        if is_t:
            miss -= 1
        else:
            fa += 1
        best = min(best, max(fa / n_n, miss / n_t))
    return best
