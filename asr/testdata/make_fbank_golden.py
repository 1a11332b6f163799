#!/usr/bin/python3
"""Golden log-mel filterbanks for asr/fbank_test.go, from torchaudio's Kaldi-compatible fbank.

Regenerate (from the repository root, needs Debian's python3-torchaudio, espeak-ng and sox):

    /usr/bin/python3 asr/testdata/make_fbank_golden.py

Writes asr/testdata/fbank/<case>.pcm (16-bit little-endian mono PCM at 16 kHz, the input),
<case>.f32 (float32 little-endian features, frames x 80) and index.json. The options are the
ones sherpa-onnx uses for SenseVoice: no dither, hamming window, snip_edges, 80 bins,
low 20 Hz, high = Nyquist, samples scaled to 16-bit amplitudes (normalize_samples=0).
Two references per case:
  <case>.f32ref.f32  torchaudio as is, in float32 (the issue's criterion: within 1e-3);
  <case>.f32         torchaudio in float64 (it follows the waveform's dtype) with its mel
                     filters replaced by Kaldi's own float32 construction (kaldi-native-fbank's
                     expressions, which sherpa-onnx runs). torchaudio builds its float32
                     filters with slightly different rounding, worth up to ~2e-4 in the log
                     domain on a few bins; this reference isolates everything else.
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
import torchaudio
import torchaudio.compliance.kaldi as kaldi

torch.set_num_threads(1)
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fbank")
SR = 16000


def espeak(text, voice="en", rate=160):
    with tempfile.TemporaryDirectory() as d:
        raw = os.path.join(d, "a.wav")
        out = os.path.join(d, "b.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(rate), "-w", raw, text], check=True)
        subprocess.run(["sox", raw, "-r", str(SR), "-c", "1", "-b", "16", "-e", "signed-integer",
                        out], check=True)
        wav, sr = torchaudio.load(out, normalize=False)
        assert sr == SR, sr
        return wav[0].numpy().astype(np.int16)


def kaldi_mel_banks(num_bins, window_length_padded, sample_freq, low_freq, high_freq,
                    vtln_low, vtln_high, vtln_warp_factor):
    """Kaldi's MelBanks weights, float32 arithmetic as in kaldi-native-fbank."""
    f32 = np.float32
    num_fft_bins = window_length_padded // 2
    nyquist = f32(0.5) * f32(sample_freq)
    high = f32(high_freq) if high_freq > 0 else nyquist + f32(high_freq)
    width = f32(sample_freq) / f32(window_length_padded)
    mel = lambda f: f32(1127.0) * np.log(f32(1.0) + f32(f) / f32(700.0), dtype=f32)
    mlow, mhigh = mel(f32(low_freq)), mel(high)
    delta = (mhigh - mlow) / f32(num_bins + 1)
    out = np.zeros((num_bins, num_fft_bins), dtype=np.float32)
    for b in range(num_bins):
        left = mlow + f32(b) * delta
        center = mlow + f32(b + 1) * delta
        right = mlow + f32(b + 2) * delta
        for i in range(num_fft_bins):
            m = mel(width * f32(i))
            if left < m < right:
                out[b, i] = (m - left) / (center - left) if m <= center else (right - m) / (right - center)
    return torch.from_numpy(out), None


def fbank(pcm, dtype, kaldi_weights=False):
    x = torch.from_numpy(pcm.astype(np.float64)).to(dtype).unsqueeze(0)  # 16-bit amplitudes
    orig = kaldi.get_mel_banks
    if kaldi_weights:
        kaldi.get_mel_banks = kaldi_mel_banks
    if x.shape[1] < 400:
        return np.zeros((0, 80), dtype=np.float32)
    f = kaldi.fbank(x, num_mel_bins=80, frame_length=25.0, frame_shift=10.0, dither=0.0,
                    energy_floor=0.0, window_type="hamming", snip_edges=True,
                    low_freq=20.0, high_freq=0.0, sample_frequency=SR,
                    preemphasis_coefficient=0.97, remove_dc_offset=True, use_energy=False,
                    use_log_fbank=True, use_power=True, round_to_power_of_two=True)
    kaldi.get_mel_banks = orig
    return f.numpy().astype(np.float32)


def main():
    os.makedirs(HERE, exist_ok=True)
    rng = np.random.default_rng(5)
    t = np.arange(SR) / SR
    cases = {
        "speech_en": espeak("Turn on the kitchen lights, please."),
        "speech_fast": espeak("What is the weather like in Paris tomorrow?", voice="en-us", rate=260),
        "silence": np.zeros(SR, dtype=np.int16),
        "dc": np.full(SR // 2, 1000, dtype=np.int16),
        "dc_negative": np.full(4000, -32768, dtype=np.int16),
        "clipped": np.clip(np.round(3 * 32767 * np.sin(2 * np.pi * 440 * t)), -32768, 32767).astype(np.int16),
        "noise_quiet": rng.integers(-2, 3, SR // 2).astype(np.int16),
        "noise_full": rng.integers(-32768, 32768, SR // 4).astype(np.int16),
        "short_1": np.array([1234], dtype=np.int16),
        "short_399": rng.integers(-3000, 3000, 399).astype(np.int16),
        "short_400": rng.integers(-3000, 3000, 400).astype(np.int16),
        "short_559": rng.integers(-3000, 3000, 559).astype(np.int16),
        "short_560": rng.integers(-3000, 3000, 560).astype(np.int16),
        "empty": np.zeros(0, dtype=np.int16),
    }
    index = []
    for name, pcm in cases.items():
        f64 = fbank(pcm, torch.float64, kaldi_weights=True)
        f32 = fbank(pcm, torch.float32)
        pcm.astype("<i2").tofile(os.path.join(HERE, name + ".pcm"))
        f64.astype("<f4").tofile(os.path.join(HERE, name + ".f32"))
        f32.astype("<f4").tofile(os.path.join(HERE, name + ".f32ref.f32"))
        d = float(np.abs(f64 - f32).max()) if f64.size else 0.0
        index.append({"name": name, "samples": int(pcm.size), "frames": int(f64.shape[0]),
                      "torchaudio_f32_vs_kaldi_f64_max_abs": d})
        print(f"{name:12s} samples={pcm.size:6d} frames={f64.shape[0]:4d} |torchaudio32-kaldi64|max={d:.2e}")
    with open(os.path.join(HERE, "index.json"), "w") as fh:
        json.dump({"torch": torch.__version__, "torchaudio": torchaudio.__version__,
                   "cases": index}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
