#!/usr/bin/env python3
"""A tiny, random-weight model with Kokoro-82M's ONNX signature, for Parley's tests.

It is not a speech model: it turns phoneme token ids into a buzz whose pitch depends on the
token and on the style vector, lasting a fixed number of frames per token (divided by speed),
silent on pad (0), space and punctuation tokens. What matters is the I/O contract, which is
exactly Kokoro's:

  onnx-community export:  input_ids int64 (1, N), style float32 (1, 256), speed float32 (1)
                          -> waveform float32 (1, samples) at 24 kHz
  kokoro-onnx export:     tokens    int64 (1, N), style float32 (1, 256), speed float32 (1)
                          -> audio    float32 (1, samples), vocabulary in metadata "kokoro_config"

plus voice packs (510, 1, 256) float32 in an .npz archive and a config.json holding the real
Kokoro phoneme vocabulary. Regenerate (CPU, a few seconds):

  /usr/bin/python3 train/tts/kokoro_tiny.py --out tts/kokoro/testdata
"""
import argparse
import json
import os

import numpy as np
import torch
from torch import nn

# Kokoro-82M's phoneme vocabulary (config.json "vocab"): character -> token id. 0 is the pad.
VOCAB = {
    ";": 1, ":": 2, ",": 3, ".": 4, "!": 5, "?": 6, "\u2014": 9, "\u2026": 10, "\"": 11,
    "(": 12, ")": 13, "\u201c": 14, "\u201d": 15, " ": 16, "\u0303": 17, "\u02a3": 18,
    "\u02a5": 19, "\u02a6": 20, "\u02a8": 21, "\u1d5d": 22, "\uab67": 23, "A": 24, "I": 25,
    "O": 31, "Q": 33, "S": 35, "T": 36, "W": 39, "Y": 41, "\u1d4a": 42, "a": 43, "b": 44,
    "c": 45, "d": 46, "e": 47, "f": 48, "h": 50, "i": 51, "j": 52, "k": 53, "l": 54, "m": 55,
    "n": 56, "o": 57, "p": 58, "q": 59, "r": 60, "s": 61, "t": 62, "u": 63, "v": 64, "w": 65,
    "x": 66, "y": 67, "z": 68, "\u0251": 69, "\u0250": 70, "\u0252": 71, "\u00e6": 72,
    "\u03b2": 75, "\u0254": 76, "\u0255": 77, "\u00e7": 78, "\u0256": 80, "\u00f0": 81,
    "\u02a4": 82, "\u0259": 83, "\u025a": 85, "\u025b": 86, "\u025c": 87, "\u025f": 90,
    "\u0261": 92, "\u0265": 99, "\u0268": 101, "\u026a": 102, "\u029d": 103, "\u026f": 110,
    "\u0270": 111, "\u014b": 112, "\u0273": 113, "\u0272": 114, "\u0274": 115, "\u00f8": 116,
    "\u0278": 118, "\u03b8": 119, "\u0153": 120, "\u0279": 123, "\u027e": 125, "\u027b": 126,
    "\u0281": 128, "\u027d": 129, "\u0282": 130, "\u0283": 131, "\u0288": 132, "\u02a7": 133,
    "\u028a": 135, "\u028b": 136, "\u028c": 138, "\u0263": 139, "\u0264": 140, "\u03c7": 142,
    "\u028e": 143, "\u0292": 147, "\u0294": 148, "\u02c8": 156, "\u02cc": 157, "\u02d0": 158,
    "\u02b0": 162, "\u02b2": 164, "\u2193": 169, "\u2192": 171, "\u2197": 172, "\u2198": 173,
    "\u1d7b": 177,
}
N_TOKEN = 178
SAMPLE_RATE = 24000
HOP = 300            # samples per frame
FRAMES_PER_TOKEN = 4  # 50 ms per token at speed 1
STYLE_DIM = 256
PACK_ROWS = 510


class TinyKokoro(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.emb = nn.Embedding(N_TOKEN, dim)
        self.style = nn.Linear(STYLE_DIM, dim)
        self.f0 = nn.Linear(dim, 1)
        self.amp = nn.Linear(dim, 1)
        silent = torch.zeros(N_TOKEN)
        silent[0] = 1
        for ch, i in VOCAB.items():
            if ch in " ;:,.!?\u2014\u2026\"()\u201c\u201d":
                silent[i] = 1
        self.register_buffer("voiced", 1 - silent)

    def forward(self, ids, style, speed):
        tok = ids[0]                                     # (N,)
        n = tok.shape[0]
        s = torch.tanh(self.style(style))                # (1, dim)
        h = torch.tanh(self.emb(tok) + s)                # (N, dim)
        frames = torch.floor(n * FRAMES_PER_TOKEN / speed[0]).to(torch.int64)
        t = torch.arange(frames).to(torch.float32)
        idx = torch.clamp(torch.floor(t * speed[0] / FRAMES_PER_TOKEN), max=n - 1).to(torch.int64)
        hf = h[idx]                                      # (F, dim)
        base = 90 + 160 * torch.sigmoid(s.sum() * 0.5)   # the style sets the voice's pitch
        f0 = base * (1 + 0.25 * torch.tanh(self.f0(hf)))[:, 0]
        amp = 0.3 * torch.sigmoid(self.amp(hf))[:, 0] * self.voiced[tok[idx]]
        f0s = f0.unsqueeze(1).expand(-1, HOP).reshape(-1)
        amps = amp.unsqueeze(1).expand(-1, HOP).reshape(-1)
        phase = torch.cumsum(f0s * (2 * 3.141592653589793 / SAMPLE_RATE), dim=0)
        return (amps * torch.sin(phase)).unsqueeze(0)


def export(model, path, in_name, out_name):
    ids = torch.tensor([[0, 50, 83, 54, 156, 57, 135, 0]], dtype=torch.int64)
    style = torch.zeros(1, STYLE_DIM)
    speed = torch.ones(1)
    torch.onnx.export(model, (ids, style, speed), path, input_names=[in_name, "style", "speed"],
                      output_names=[out_name], dynamic_axes={in_name: {1: "n"}, out_name: {1: "samples"}},
                      opset_version=17)


def voice_pack(rng, pitch_bias):
    """510 rows x 1 x 256: a base style, drifting every 64 rows (real packs vary with length)."""
    base = np.round(rng.normal(0, 0.4, STYLE_DIM) * 16) / 16
    base[:8] += pitch_bias
    drift = np.round(rng.normal(0, 0.05, STYLE_DIM) * 16) / 16
    rows = np.stack([base + (r // 64) * drift for r in range(PACK_ROWS)])
    return rows.reshape(PACK_ROWS, 1, STYLE_DIM).astype(np.float32)


class IntSpeed(nn.Module):
    """kokoro-v1.1-zh's signature: speed as int32."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, style, speed):
        return self.m(ids, style, speed.float())


def export_int_speed(model, path):
    ids = torch.tensor([[0, 50, 83, 54, 156, 57, 135, 0]], dtype=torch.int64)
    torch.onnx.export(IntSpeed(model), (ids, torch.zeros(1, STYLE_DIM), torch.ones(1, dtype=torch.int32)), path,
                      input_names=["input_ids", "style", "speed"], output_names=["waveform"],
                      dynamic_axes={"input_ids": {1: "n"}, "waveform": {1: "samples"}}, opset_version=17)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tts/kokoro/testdata")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only-int-speed", action="store_true",
                    help="write model_int_speed.onnx alone (the same weights, speed as int32)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    m = TinyKokoro().eval()
    if a.only_int_speed:
        with torch.no_grad():
            export_int_speed(m, os.path.join(a.out, "model_int_speed.onnx"))
        return
    with torch.no_grad():
        export(m, os.path.join(a.out, "model.onnx"), "input_ids", "waveform")
        export(m, os.path.join(a.out, "model_tokens.onnx"), "tokens", "audio")
        export_int_speed(m, os.path.join(a.out, "model_int_speed.onnx"))
    # kokoro-onnx's newer exports embed config.json in the graph metadata ("kokoro_config")
    import onnx
    tok = onnx.load(os.path.join(a.out, "model_tokens.onnx"))
    meta = tok.metadata_props.add()
    meta.key, meta.value = "kokoro_config", json.dumps({"n_token": N_TOKEN, "vocab": VOCAB})
    onnx.save(tok, os.path.join(a.out, "model_tokens.onnx"))
    rng = np.random.default_rng(a.seed)
    np.savez_compressed(os.path.join(a.out, "voices.npz"),
                        af_tiny=voice_pack(rng, 1.0), am_tiny=voice_pack(rng, -1.0), bf_tiny=voice_pack(rng, 0.3))
    with open(os.path.join(a.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"model_type": "tiny-kokoro", "n_token": N_TOKEN, "sample_rate": SAMPLE_RATE,
                   "vocab": VOCAB}, f, ensure_ascii=False, indent=1)
    # a reference output for the parity test: ids, style row len(ids)-2 of af_tiny, speed 1
    ids = torch.tensor([[0, 50, 83, 54, 156, 57, 135, 16, 65, 156, 87, 54, 46, 4, 0]], dtype=torch.int64)
    pack = np.load(os.path.join(a.out, "voices.npz"))["af_tiny"]
    style = torch.from_numpy(pack[ids.shape[1] - 2])
    with torch.no_grad():
        wav = m(ids, style, torch.ones(1))[0].numpy()
    np.save(os.path.join(a.out, "reference.npy"), wav[:4800].astype(np.float32))
    print("wrote", sorted(os.listdir(a.out)))


if __name__ == "__main__":
    main()
