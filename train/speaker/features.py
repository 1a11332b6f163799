"""The encoder's input, exactly as CosyVoice computes it for CAM++ (and Parley's Go side does)."""
from __future__ import annotations

import numpy as np
import soundfile as sf
import torch
import torchaudio.compliance.kaldi as kaldi
from scipy.signal import resample_poly

SR = 16000


def fbank(samples: torch.Tensor) -> torch.Tensor:
    """(N,) float samples in [-1, 1] at 16 kHz -> (T, 80) fbank with the mean over time removed."""
    if samples.numel() < 400:
        raise ValueError(f"{samples.numel()} samples is shorter than one 25 ms frame")
    f = kaldi.fbank(samples.float().unsqueeze(0), num_mel_bins=80, dither=0.0, sample_frequency=SR)
    return f - f.mean(dim=0, keepdim=True)


def load(path: str) -> torch.Tensor:
    """A WAV (any rate, any channels) as 16 kHz mono float samples."""
    x, sr = sf.read(path, dtype="float32", always_2d=True)
    x = x.mean(axis=1)
    if sr != SR:
        g = np.gcd(sr, SR)
        x = resample_poly(x, SR // g, sr // g).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(x))
