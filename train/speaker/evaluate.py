"""Equal error rate of a speaker encoder on held-out speakers (train.speaker.corpus's test split).

    /usr/bin/python3 -m train.speaker.evaluate --checkpoint train/out/speaker/ckpt-XXXXXXXX.pt \
        --manifest train/out/speaker-corpus/test.jsonl

Every pair of utterances is scored with the cosine of their embeddings (whole utterances);
pairs of the same speaker are targets. Prints JSON: eer, mean target and non-target scores,
counts. A pitch-only baseline (median F0 distance) is printed beside it so the figure can be
judged: an encoder that only heard pitch would not beat it.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

import numpy as np
import torch

from . import model as spm
from .export import load_checkpoint
from .features import fbank, load
from .train import read_manifest


def median_f0(x: np.ndarray, sr: int = 16000) -> float:
    """A crude autocorrelation pitch estimate over voiced 40 ms frames (baseline only)."""
    f0s = []
    n = 640
    for s in range(0, len(x) - n, n):
        fr = x[s:s + n] - x[s:s + n].mean()
        if np.sqrt((fr ** 2).mean()) < 0.02:
            continue
        ac = np.correlate(fr, fr, "full")[n - 1:]
        lo, hi = sr // 400, sr // 60
        lag = lo + int(np.argmax(ac[lo:hi]))
        if ac[lag] > 0.3 * ac[0]:
            f0s.append(sr / lag)
    return float(np.median(f0s)) if f0s else 0.0


def scores(embs: List[torch.Tensor], spk: List[int]):
    same, diff = [], []
    e = torch.nn.functional.normalize(torch.stack(embs), dim=1)
    sim = (e @ e.T).numpy()
    for i in range(len(spk)):
        for j in range(i + 1, len(spk)):
            (same if spk[i] == spk[j] else diff).append(float(sim[i, j]))
    return same, diff


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.speaker.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--manifest", required=True)
    a = ap.parse_args(argv)
    enc = load_checkpoint(a.checkpoint).eval()
    rows = read_manifest(a.manifest)
    embs, spk, f0 = [], [], []
    with torch.no_grad():
        for r in rows:
            x = load(r["source"])
            embs.append(enc(fbank(x).unsqueeze(0))[0])
            spk.append(r["speaker"])
            f0.append(median_f0(x.numpy()))
    same, diff = scores(embs, spk)
    fs, fd = [], []
    for i in range(len(spk)):
        for j in range(i + 1, len(spk)):
            (fs if spk[i] == spk[j] else fd).append(-abs(np.log((f0[i] + 1) / (f0[j] + 1))))
    print(json.dumps({"utterances": len(rows), "speakers": len(set(spk)), "eer": round(spm.eer(same, diff), 4),
                      "target_mean": round(float(np.mean(same)), 4), "nontarget_mean": round(float(np.mean(diff)), 4),
                      "pitch_baseline_eer": round(spm.eer(fs, fd), 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
