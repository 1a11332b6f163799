#!/usr/bin/python3
"""Golden features for audio/fbank's Povey window, as CosyVoice feeds CAM++ speaker encoders.

Regenerate from the repository root (Debian's python3-torchaudio, espeak-ng and sox):

    /usr/bin/python3 audio/fbank/testdata/make_povey_golden.py

CosyVoice computes `kaldi.fbank(speech, num_mel_bins=80, dither=0, sample_frequency=16000)`
on float samples in [-1, 1] (torchaudio's defaults otherwise: Povey window, snip_edges,
pre-emphasis 0.97, DC removal). Writes <case>.pcm (16-bit mono PCM, the input) and
<case>.f32 (float32 frames x 80, torchaudio in float32) and index.json.
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
import torchaudio.compliance.kaldi as kaldi

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
SR = 16000


def espeak(text, voice):
    with tempfile.TemporaryDirectory() as d:
        raw, out = os.path.join(d, "a.wav"), os.path.join(d, "b.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-w", raw, text], check=True)
        subprocess.run(["sox", raw, "-r", str(SR), "-c", "1", "-b", "16", "-e", "signed-integer", out], check=True)
        with open(out, "rb") as f:
            b = f.read()
        return np.frombuffer(b[44:], dtype="<i2").copy()


def main():
    rng = np.random.default_rng(11)
    cases = {
        "povey_speech": espeak("My voice is my passport, verify me.", "en+f3"),
        "povey_quiet": rng.integers(-3, 4, SR // 2).astype(np.int16),
    }
    index = []
    for name, pcm in cases.items():
        x = torch.from_numpy(pcm.astype(np.float32) / 32768).unsqueeze(0)
        f = kaldi.fbank(x, num_mel_bins=80, dither=0, sample_frequency=SR).numpy().astype("<f4")
        pcm.astype("<i2").tofile(os.path.join(HERE, name + ".pcm"))
        f.tofile(os.path.join(HERE, name + ".f32"))
        index.append({"name": name, "samples": int(pcm.size), "frames": int(f.shape[0])})
    with open(os.path.join(HERE, "index.json"), "w") as fh:
        json.dump({"window": "povey", "scale": 1, "cases": index}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
