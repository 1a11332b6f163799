"""An independent judge of intelligibility: CMU PocketSphinx with its US English model
(Debian's pocketsphinx-en-us, trained on recordings of real people), which no Parley model
learns from.  It hears the human-derived voices at 3-9 % WER and espeak-ng at about 71 %.

    python3 -m train.judge --manifest corpus/test.jsonl [--field target] [--limit 100]
    python3 -m train.judge --wav a.wav --text "what it should say"

Audio at any rate is resampled to 16 kHz.  Prints {"wer": ..., "utts": ...}; with --out,
every hypothesis.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Iterable, List, Optional, Tuple

import numpy as np

from train.edit import edit_distance


class JudgeMissing(RuntimeError):
    pass


def words(s: str) -> List[str]:
    s = re.sub(r"\[[a-z_0-9]+\]", " ", s.lower())  # control tokens are not words
    return re.sub(r"[^a-z' ]+", " ", s).split()


class Judge:
    def __init__(self):
        try:
            from pocketsphinx import Decoder, get_model_path
        except ImportError as e:
            raise JudgeMissing("the judge needs PocketSphinx: apt-get install python3-pocketsphinx pocketsphinx-en-us") from e
        mp = get_model_path()
        hmm = os.path.join(mp, "en-us")
        if not os.path.isdir(hmm):
            raise JudgeMissing(f"no US English acoustic model in {mp}: apt-get install pocketsphinx-en-us")
        c = Decoder.default_config()
        c.set_string("-hmm", hmm)
        c.set_string("-lm", os.path.join(mp, "en-us.lm.bin"))
        c.set_string("-dict", os.path.join(mp, "cmudict-en-us.dict"))
        c.set_string("-logfn", os.devnull)
        self.d = Decoder(c)

    def transcribe(self, x: np.ndarray, sr: int) -> str:
        if x.ndim > 1:
            x = x.mean(1)
        if sr != 16000:
            from scipy.signal import resample_poly

            g = np.gcd(int(sr), 16000)
            x = resample_poly(x, 16000 // g, int(sr) // g)
        pcm = (np.clip(x, -1, 1) * 32767).astype("<i2")
        self.d.start_utt()
        self.d.process_raw(pcm.tobytes(), False, True)
        self.d.end_utt()
        h = self.d.hyp()
        return h.hypstr if h is not None else ""

    def transcribe_file(self, path: str) -> str:
        import soundfile as sf

        x, sr = sf.read(path, dtype="float32", always_2d=True)
        return self.transcribe(x.mean(1), sr)


def score(pairs: Iterable[Tuple[str, str]]) -> dict:
    """(hypothesis, reference) pairs -> word error rate over all of them."""
    err = n = utts = 0
    for hyp, ref in pairs:
        r = words(ref)
        err += edit_distance(words(hyp), r)
        n += len(r)
        utts += 1
    return {"wer": err / max(1, n), "words": n, "utts": utts}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.judge", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", help="JSONL rows with source (relative to the manifest) and the text")
    ap.add_argument("--field", default=None, help="the reference field (default: plain, else target, else text)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--wav")
    ap.add_argument("--text")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        j = Judge()
    except JudgeMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    rows = []
    if a.wav:
        rows.append({"source": a.wav, "ref": a.text or ""})
    elif a.manifest:
        base = os.path.dirname(os.path.abspath(a.manifest))
        with open(a.manifest, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                ref = r.get(a.field) if a.field else (r.get("plain") or r.get("target") or r.get("text") or "")
                rows.append({"source": os.path.join(base, r["source"]), "ref": ref, "key": r.get("key")})
                if a.limit and len(rows) >= a.limit:
                    break
    else:
        ap.error("--manifest or --wav")
    for r in rows:
        r["hyp"] = j.transcribe_file(r["source"])
    res = score((r["hyp"], r["ref"]) for r in rows)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({**res, "rows": rows}, f, indent=1)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
