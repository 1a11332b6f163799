"""Synthetic speech corpus over espeak-ng.

    python3 -m train.corpus.synth --out /tmp/parley-corpus --train 6000 --val 200 --test 200

Voices are espeak-ng accents x variants with random rate and pitch.  The test
split uses variants that never occur in training (held-out voices); the val
split uses training voices.  Training audio gets noise (white/pink/brown at
5-30 dB SNR) and a simple room reverb (exponentially decaying noise impulse
response) with probability --aug; with probability --channel it also goes through a
telephone-to-hi-fi channel: a low-pass at 3.4-7.5 kHz, a round trip through another
sample rate (8/11.025/22.05/44.1/48 kHz) and a random gain, as audio that has been
played and captured again (PulseAudio, a USB microphone) sounds.  ``--style mixed``
adds word salad and extra assistant questions to the sentences (see sentences.py).  Writes WAVs (16 kHz mono PCM16) and
FunASR-style JSONL manifests (train.jsonl, val.jsonl, test.jsonl) whose
``source`` paths are relative to the manifest.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

import numpy as np
import soundfile as sf
from scipy.signal import butter, fftconvolve, resample_poly, sosfilt

from ..sensevoice.tokens import normalize_text
from .sentences import STYLES, sentence
from .voices import espeak_wav

ACCENTS = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029", "en-us-nyc"]
TRAIN_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m6", "f1", "f2", "f3", "f4", "klatt", "klatt2", "klatt3",
                  "Andy", "Annie", "david", "linda", "max", "paul", "john", "ed", "edward", "iven", "norbert", "steph"]
# Never used for training: the held-out test voices.
TEST_VARIANTS = ["m7", "f5", "klatt4", "michael", "belinda", "benjamin"]
SR = 16000


def espeak(text: str, voice: str, rate: int, pitch: int, tmpdir: str) -> np.ndarray:
    return espeak_wav(text, voice, rate, pitch, tmpdir)


def colored_noise(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    w = rng.standard_normal(n)
    if kind == "white":
        return w
    spec = np.fft.rfft(w)
    f = np.arange(len(spec)) + 1.0
    spec /= np.sqrt(f) if kind == "pink" else f
    return np.fft.irfft(spec, n)


def reverb(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    rt60 = rng.uniform(0.15, 0.6)
    n = int(rt60 * SR)
    t = np.arange(n) / SR
    ir = rng.standard_normal(n) * np.exp(-6.9 * t / rt60)
    ir[0] = 1.0
    ir /= np.sqrt((ir ** 2).sum())
    wet = fftconvolve(x, ir)[: len(x)]
    mix = rng.uniform(0.3, 0.8)
    return (1 - mix) * x + mix * wet


def augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if rng.random() < 0.5:
        x = reverb(x, rng)
    if rng.random() < 0.8:
        snr = rng.uniform(5, 30)
        nz = colored_noise(len(x), rng.choice(["white", "pink", "brown"]), rng)
        ps = np.mean(x ** 2) + 1e-12
        pn = np.mean(nz ** 2) + 1e-12
        x = x + nz * np.sqrt(ps / (pn * 10 ** (snr / 10)))
    return x


CHANNEL_RATES = [8000, 11025, 22050, 44100, 48000]


def channel(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A played-and-recaptured channel: band limit, a rate round trip, gain."""
    cutoff = rng.uniform(3400, 7500)
    x = sosfilt(butter(6, cutoff, btype="low", fs=SR, output="sos"), x)
    if rng.random() < 0.7:
        hz = int(rng.choice(CHANNEL_RATES))
        g = np.gcd(hz, SR)
        x = resample_poly(resample_poly(x, hz // g, SR // g), SR // g, hz // g)
    if rng.random() < 0.3:  # a little high-pass, as small speakers and mic capsules do
        x = sosfilt(butter(2, rng.uniform(80, 300), btype="high", fs=SR, output="sos"), x)
    return x.astype(np.float32)


def spoken_form(text: str) -> str:
    """The text as espeak-ng must be given it: "a m"/"p m" as "AM"/"PM", as Parley's own text
    normaliser writes them (espeak reads "a m" with the article's "uh")."""
    return re.sub(r"\b([ap]) m\b", lambda m: m.group(1).upper() + "M", text)


def render(item: dict, out_dir: str, tmpdir: str) -> dict:
    rng = np.random.default_rng(item["seed"])
    x = espeak(spoken_form(item["text"]), item["voice"], item["rate"], item["pitch"], tmpdir)
    lead, tail = (int(rng.uniform(0.05, 0.4) * SR) for _ in range(2))
    x = np.concatenate([np.zeros(lead, np.float32), x, np.zeros(tail, np.float32)])
    if item.get("channel"):
        x = channel(x, rng)
    if item["aug"]:
        x = augment(x, rng)
    peak = np.abs(x).max() + 1e-9
    x = x / peak * rng.uniform(0.3, 0.9)
    rel = os.path.join("wav", item["key"] + ".wav")
    sf.write(os.path.join(out_dir, rel), x.astype(np.float32), SR, subtype="PCM_16")
    text = normalize_text(item["text"])
    return {
        "key": item["key"], "source": rel, "source_len": int(len(x) / SR * 100),
        "target": text, "target_len": len(text.split()), "text_language": "<|en|>",
        "emo_target": "<|NEUTRAL|>", "event_target": "<|Speech|>", "with_or_wo_itn": "<|woitn|>",
        "voice": item["voice"], "rate": item["rate"], "pitch": item["pitch"], "augmented": bool(item["aug"]),
        "channel": bool(item.get("channel")),
    }


def plan(split: str, n: int, variants: List[str], seed: int, aug: float, style: str = "templates",
         chan: float = 0.0) -> List[dict]:
    rng = random.Random(f"{seed}-{split}")
    items = []
    for i in range(n):
        acc = rng.choice(ACCENTS)
        var = rng.choice(variants)
        items.append({
            "key": f"{split}-{i:06d}", "text": sentence(rng, style),
            "voice": acc + ("+" + var if var else ""),
            "rate": rng.randint(130, 210), "pitch": rng.randint(25, 75),
            "aug": rng.random() < aug, "seed": rng.randrange(2 ** 31),
        })
        if chan > 0:  # drawn only when asked, so the original corpus stays what it was
            items[-1]["channel"] = rng.random() < chan
    return items


def generate(out: str, n_train: int, n_val: int, n_test: int, seed: int, aug: float, jobs: int,
             log=sys.stderr, style: str = "templates", chan: float = 0.0) -> dict:
    os.makedirs(os.path.join(out, "wav"), exist_ok=True)
    splits = {
        "train": plan("train", n_train, TRAIN_VARIANTS, seed, aug, style, chan),
        "val": plan("val", n_val, TRAIN_VARIANTS, seed, 0.0, style, chan),
        "test": plan("test", n_test, TEST_VARIANTS, seed, 0.0, style, chan),
    }
    counts = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max(1, jobs)) as ex:
        for name, items in splits.items():
            rows = list(ex.map(lambda it: render(it, out, tmp), items))
            with open(os.path.join(out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
            counts[name] = len(rows)
            hours = sum(r["source_len"] for r in rows) / 100 / 3600
            print(json.dumps({"split": name, "utterances": len(rows), "hours": round(hours, 3)}), file=log)
    return counts


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.corpus.synth", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=6000)
    ap.add_argument("--val", type=int, default=200)
    ap.add_argument("--test", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--aug", type=float, default=0.5, help="probability of noise/reverb on training audio")
    ap.add_argument("--channel", type=float, default=0.0,
                    help="probability of the band-limit/rate round-trip channel (every split)")
    ap.add_argument("--style", choices=STYLES, default="templates", help="sentence distribution")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    generate(a.out, a.train, a.val, a.test, a.seed, a.aug, a.jobs, style=a.style, chan=a.channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
