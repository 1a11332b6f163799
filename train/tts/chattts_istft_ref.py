#!/usr/bin/env python3
"""torch.istft reference for tts/chattts's Go ISTFT (Vocos's ISTFTHead, padding "center").

Vocos turns its head output into a waveform as
    S = clip(exp(logmag), max=1e2) * (cos(p) + i sin(p))
    wav = torch.istft(S, n_fft=1024, hop_length=256, win_length=1024,
                      window=torch.hann_window(1024), center=True)
This script writes, per case, the magnitude and phase (bin-major, (513, F) float32 LE) and
torch's waveform, so the Go side is checked against torch itself. Regenerate from the
repository root with:

  /usr/bin/python3 train/tts/chattts_istft_ref.py --out tts/chattts/testdata/istft
"""
import argparse
import json
import os

import numpy as np
import torch

N_FFT, HOP = 1024, 256


def write(out, name, mag, phase):
    mag = mag.to(torch.float32)
    phase = phase.to(torch.float32)
    spec = torch.polar(mag, phase)
    wav = torch.istft(spec, n_fft=N_FFT, hop_length=HOP, win_length=N_FFT,
                      window=torch.hann_window(N_FFT), center=True)
    mag.numpy().astype("<f4").tofile(os.path.join(out, name + ".mag.f32"))
    phase.numpy().astype("<f4").tofile(os.path.join(out, name + ".phase.f32"))
    wav.numpy().astype("<f4").tofile(os.path.join(out, name + ".wav.f32"))
    return {"name": name, "bins": mag.shape[0], "frames": mag.shape[1], "samples": wav.shape[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tts/chattts/testdata/istft")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    g = torch.Generator().manual_seed(1024)
    cases = []
    # what a Vocos head emits: log-magnitudes around 0 (some clipped at 1e2), free phases
    logmag = torch.randn(N_FFT // 2 + 1, 37, generator=g) * 1.5 - 1.0
    logmag[5, 3] = 6.0  # exp(6) > 1e2: the clip matters
    mag = torch.clip(torch.exp(logmag), max=1e2)
    phase = torch.randn(N_FFT // 2 + 1, 37, generator=g) * 3.0
    cases.append(write(a.out, "vocos", mag, phase))
    # a real signal's STFT: istft(stft(x)) == x away from the edges
    t = torch.arange(24000 // 4, dtype=torch.float64) / 24000
    x = (0.5 * torch.sin(2 * np.pi * (200 + 1800 * t) * t)).to(torch.float32)
    S = torch.stft(x, n_fft=N_FFT, hop_length=HOP, window=torch.hann_window(N_FFT), center=True,
                   return_complex=True)
    cases.append(write(a.out, "chirp", S.abs(), S.angle()))
    x.numpy().astype("<f4").tofile(os.path.join(a.out, "chirp.signal.f32"))
    # the shortest input: two frames
    cases.append(write(a.out, "two", mag[:, :2].contiguous(), phase[:, :2].contiguous()))
    with open(os.path.join(a.out, "cases.json"), "w") as f:
        json.dump({"n_fft": N_FFT, "hop": HOP, "torch": torch.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print(json.dumps(cases))


if __name__ == "__main__":
    main()
