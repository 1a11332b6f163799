"""A synthetic "user" for the voice-clone wizard's measurements: one espeak-ng voice no Parley
model was trained on, reading sentences of the demo's domain: OUT/takes/take-NNN.wav, one
or more sentences each, at least 3 s (16 kHz mono, a short room-tone lead-in and tail), as a person would record
prompts in the wizard, and OUT/transcripts.json ({"take-000": "text", …}).

    python3 -m train.corpus.user_voice --voice en-gb-scotland+Alicia --minutes 3 --out /tmp/alicia

The voice (accent + variant, fixed rate and pitch) is not among train.corpus.synth's accents
x variants, so the demo recogniser (assets/demo/sensevoice) never heard it; on it the demo's
CER is about 50% (en-gb-scotland+Alicia) where it is about 14% on its held-out variants.
Prints {"files": n, "seconds": total}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import soundfile as sf

from .sentences import sentences
from .synth import SR, espeak, spoken_form


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.corpus.user_voice", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voice", default="en-gb-scotland+Alicia")
    ap.add_argument("--rate", type=int, default=150)
    ap.add_argument("--pitch", type=int, default=50)
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    takes = os.path.join(a.out, "takes")
    os.makedirs(takes, exist_ok=True)
    texts = {}
    rng = np.random.default_rng(a.seed)
    total, n = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        pool = iter(sentences(100000, a.seed))
        while total < a.minutes * 60:
            # a take is one or more sentences read in one go, at least 3 s (the wizard's clips
            # are 2-15 s)
            parts = [next(pool)]
            x = espeak(spoken_form(parts[0]), a.voice, a.rate, a.pitch, tmp)
            while len(x) < 3 * SR:
                parts.append(next(pool))
                x = espeak(spoken_form(". ".join(parts)), a.voice, a.rate, a.pitch, tmp)
            text = " ".join(parts)
            lead = (rng.standard_normal(int(0.4 * SR)) * 3e-4).astype(np.float32)
            tail = (rng.standard_normal(int(0.5 * SR)) * 3e-4).astype(np.float32)
            y = np.concatenate([lead, x + (rng.standard_normal(len(x)) * 3e-4).astype(np.float32), tail])
            name = f"take-{n:03d}"
            sf.write(os.path.join(takes, name + ".wav"), y, SR, subtype="PCM_16")
            texts[name] = text
            total += len(y) / SR
            n += 1
    with open(os.path.join(a.out, "transcripts.json"), "w", encoding="utf-8") as f:
        json.dump(texts, f, indent=0)
    print(json.dumps({"files": n, "seconds": round(total, 1), "voice": a.voice}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
