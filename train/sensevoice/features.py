"""The SenseVoice frontend: Kaldi fbank (80 bins, 25/10 ms, Hamming, pre-emphasis
0.97, no dither, samples scaled by 32768) -> LFR 7/6 -> global CMVN.

This matches what sherpa-onnx and Parley's Go frontend compute, so a model
trained here sees the same features at inference time.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import torch

SAMPLE_RATE = 16000
NUM_MEL_BINS = 80
LFR_M = 7
LFR_N = 6
FEAT_DIM = NUM_MEL_BINS * LFR_M  # 560


def fbank(samples: torch.Tensor, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """samples: 1-D float in [-1, 1] -> (frames, 80) log-mel (Kaldi-compatible)."""
    import torchaudio.compliance.kaldi as kaldi

    if sample_rate != SAMPLE_RATE:
        raise ValueError(f"sample rate {sample_rate} Hz: the SenseVoice frontend needs {SAMPLE_RATE} Hz")
    wav = samples.to(torch.float32).reshape(1, -1) * 32768.0
    if wav.shape[1] < 400:
        return torch.zeros(0, NUM_MEL_BINS)
    return kaldi.fbank(wav, num_mel_bins=NUM_MEL_BINS, frame_length=25.0, frame_shift=10.0,
                       dither=0.0, energy_floor=0.0, window_type="hamming",
                       preemphasis_coefficient=0.97, remove_dc_offset=True, snip_edges=True,
                       sample_frequency=SAMPLE_RATE)


def lfr(feats: torch.Tensor, m: int = LFR_M, n: int = LFR_N) -> torch.Tensor:
    """FunASR low-frame-rate stacking: ceil(T/n) frames; frame i stacks input
    frames clamp(n*i - (m-1)//2 + j, 0, T-1) for j in 0..m-1."""
    t = feats.shape[0]
    if t == 0:
        return feats.new_zeros(0, feats.shape[1] * m)
    out_t = (t + n - 1) // n
    idx = torch.arange(out_t)[:, None] * n - (m - 1) // 2 + torch.arange(m)[None, :]
    idx = idx.clamp(0, t - 1)
    return feats[idx].reshape(out_t, -1)


def apply_cmvn(x: torch.Tensor, neg_mean: torch.Tensor, inv_stddev: torch.Tensor) -> torch.Tensor:
    return (x + neg_mean) * inv_stddev


def features(samples: torch.Tensor, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """Un-normalised LFR features (T', 560)."""
    return lfr(fbank(samples, sample_rate))


class CMVNAccumulator:
    def __init__(self, dim: int = FEAT_DIM):
        self.n = 0
        self.s = np.zeros(dim, np.float64)
        self.ss = np.zeros(dim, np.float64)

    def add(self, x: torch.Tensor) -> None:
        a = x.double().numpy()
        self.n += a.shape[0]
        self.s += a.sum(0)
        self.ss += (a * a).sum(0)

    def result(self) -> Tuple[List[float], List[float]]:
        if self.n == 0:
            raise ValueError("CMVN: no frames accumulated")
        mean = self.s / self.n
        var = np.maximum(self.ss / self.n - mean * mean, 1e-8)
        return [float(-m) for m in mean], [float(1.0 / np.sqrt(v)) for v in var]


def load_am_mvn(path: str) -> Tuple[List[float], List[float]]:
    """FunASR ``am.mvn`` (Kaldi nnet text with <AddShift> and <Rescale>)."""
    vals = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("<LearnRateCoef>"):
                parts = line.split()
                vals.append([float(v) for v in parts[3:-1]])
    if len(vals) != 2:
        raise ValueError(f"{path}: expected <AddShift> and <Rescale> rows, found {len(vals)}")
    return vals[0], vals[1]
