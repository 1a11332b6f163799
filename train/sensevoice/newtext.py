"""New sentences from outside every text the recogniser or its language model learnt from, read
by one voice: a manifest for choosing (in a training voice) and measuring (in the held-out
person) how the recogniser does on text it has never seen, as a real person's read speech is.

    /usr/bin/python3 -m train.sensevoice.newtext --voice flite:slt --skip 150 --count 150 --out train/out/newtext/slt
    /usr/bin/python3 -m train.sensevoice.newtext --voice flite:rms --count 150 --out train/out/newtext/rms

The text is Debian's fortune cookies (packages ``fortunes`` and ``fortunes-min``: quotations,
jokes, proverbs; the offensive set is not read): sentences of 5 to 16 words in spoken form
(``train.corpus.text.normalize``), each once, none that the corpus's text sources (WordNet,
the State of the Union, Moby-Dick: every set) or the LM's extra text
(``train.corpus.text.LM_SOURCES``, so drawing needs each of them, a Debian package among them)
have, shuffled with a fixed seed, so ``--skip`` and ``--count`` give disjoint sets; a new LM
source can move the draw (session 25's Austen text shares no sentence with the 300 fortunes
drawn before it joined).  (The corpus's generated assistant sentences and commands are
not checked: fortunes are not made of them.)  The corpus's held-out text sets measure new sentences from the
corpus's own sources (the LM knows their style); these measure text from elsewhere.  Written:
OUT.jsonl (source, target, text_source "fortune") and OUT/NNNN.wav (16 kHz mono).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sys
from typing import List, Optional

import soundfile as sf

from ..corpus import text as T
from ..corpus import voices as V

FORTUNES = "/usr/share/games/fortunes"
SEED = 7


def sentences(root: str = FORTUNES) -> List[str]:
    """Every fortune sentence of 5-16 words in spoken form, once each, in a fixed shuffled order."""
    files = sorted(f for f in glob.glob(os.path.join(root, "*"))
                   if os.path.isfile(f) and "." not in os.path.basename(f))
    if not files:
        raise T.TextSourceMissing(f"no fortunes in {root} (apt-get install fortunes fortunes-min)")
    def paragraphs():
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as f:
                blocks = f.read().split("\n%\n")
            for block in blocks:
                # verse and pictures (indented or tabbed lines) are not sentences
                if "\t" not in block and "  " not in block.strip():
                    yield " ".join(l.strip() for l in block.splitlines())

    order = sorted(T.spoken_sentences(paragraphs(), 5, 16))
    random.Random(SEED).shuffle(order)
    return order


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.newtext", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voice", required=True, help="a corpus voice id (train.corpus.voices), e.g. flite:rms")
    ap.add_argument("--count", type=int, default=150)
    ap.add_argument("--skip", type=int, default=0, help="sentences of the shuffled order to leave to another set")
    ap.add_argument("--out", required=True, help="OUT.jsonl and the directory OUT")
    ap.add_argument("--fortunes", default=FORTUNES)
    a = ap.parse_args(argv)
    if a.count < 1 or a.skip < 0:
        ap.error("--count must be positive and --skip not negative")
    try:
        v = V.voice(a.voice)
        V.check(v)
        # none the corpus's sources or the LM's extra text has (fortunes quote books and speeches)
        known = {t for name in T.LM_SOURCES for t in T.lm_sentences(name)}
        known.update(t for sets in T.load_pool(log=None).sets.values() for ts in sets.values() for t in ts)
        texts = [t for t in sentences(a.fortunes) if t not in known][a.skip:a.skip + a.count]
    except (ValueError, V.SynthError, T.TextSourceMissing) as e:  # an unknown voice, a missing package
        print(f"error: {e}", file=sys.stderr)
        return 1
    if len(texts) < a.count:
        print(f"error: only {len(texts)} sentences after skipping {a.skip}", file=sys.stderr)
        return 1
    out = a.out.rstrip("/")
    os.makedirs(out, exist_ok=True)
    refused = 0
    with open(out + ".jsonl.tmp", "w") as mf:
        for i, t in enumerate(texts):
            try:
                x = V.synthesize(t, v)
            except V.SynthError as e:
                refused += 1
                print(f"skipped {t!r}: {e}", file=sys.stderr)
                continue
            path = os.path.join(out, f"{i:04d}.wav")
            sf.write(path, x, 16000, subtype="PCM_16")
            mf.write(json.dumps({"key": f"newtext-{i:04d}", "source": os.path.abspath(path), "target": t,
                                 "text_source": "fortune", "voice": a.voice}) + "\n")
    os.replace(out + ".jsonl.tmp", out + ".jsonl")
    print(json.dumps({"utts": len(texts) - refused, "refused": refused, "manifest": out + ".jsonl"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
