"""An espeak-ng speaker corpus: many synthetic speakers, each with several utterances.

    /usr/bin/python3 -m train.speaker.corpus --out train/out/speaker-corpus --speakers 160 --utts 14

A speaker is an espeak-ng accent, a voice variant and a base pitch; the speaking rate varies
per utterance (it is not identity). Training speakers use train.corpus.synth's training
variants; the test split's speakers use its held-out variants only, so the test measures
speakers no model has heard. Training audio is augmented (noise, reverb, channel) with
probability --aug. Writes wav/ and train.jsonl / val.jsonl / test.jsonl rows with a
"speaker" field (an integer for training speakers; a name for all).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

from ..corpus.sentences import sentence
from ..corpus.synth import ACCENTS, TEST_VARIANTS, TRAIN_VARIANTS, render

PITCHES = [20, 35, 50, 65, 80]


def speakers(n: int, variants: List[str], seed: int, exclude=()) -> List[dict]:
    """n distinct (accent, variant, pitch) speakers, drawn reproducibly."""
    rng = random.Random(f"speakers-{seed}")
    pool = [(a, v, p) for a in ACCENTS for v in variants for p in PITCHES]
    pool = [s for s in pool if s not in set(exclude)]
    if n > len(pool):
        raise ValueError(f"{n} speakers asked for, only {len(pool)} combinations exist")
    rng.shuffle(pool)
    return [{"accent": a, "variant": v, "pitch": p, "name": f"{a}+{v or 'default'}@p{p}"} for a, v, p in pool[:n]]


def plan(split: str, spk: List[dict], utts: int, seed: int, aug: float, chan: float) -> List[dict]:
    rng = random.Random(f"{seed}-{split}")
    items = []
    for si, s in enumerate(spk):
        for u in range(utts):
            items.append({
                "key": f"{split}-{si:04d}-{u:03d}", "text": sentence(rng, "mixed"),
                "voice": s["accent"] + ("+" + s["variant"] if s["variant"] else ""),
                "rate": rng.randint(140, 200), "pitch": s["pitch"] + rng.randint(-3, 3),
                "aug": rng.random() < aug, "channel": rng.random() < chan,
                "seed": rng.randrange(2 ** 31), "speaker": si, "speaker_name": s["name"],
            })
    return items


def generate(out: str, n_speakers: int, utts: int, val_utts: int, test_speakers: int, test_utts: int,
             seed: int, aug: float, chan: float, jobs: int, log=sys.stderr) -> dict:
    os.makedirs(os.path.join(out, "wav"), exist_ok=True)
    train_spk = speakers(n_speakers, TRAIN_VARIANTS, seed)
    test_spk = speakers(test_speakers, TEST_VARIANTS, seed + 1)
    splits = {
        "train": plan("train", train_spk, utts, seed, aug, chan),
        "val": plan("val", train_spk, val_utts, seed, 0.0, 0.0),
        "test": plan("test", test_spk, test_utts, seed, 0.0, 0.0),
    }
    counts = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max(1, jobs)) as ex:
        for name, items in splits.items():
            def one(it):
                row = render(it, out, tmp)
                return {"key": row["key"], "source": row["source"], "source_len": row["source_len"],
                        "speaker": it["speaker"], "speaker_name": it["speaker_name"], "voice": it["voice"],
                        "pitch": it["pitch"], "rate": it["rate"], "augmented": bool(it["aug"])}
            rows = list(ex.map(one, items))
            with open(os.path.join(out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
            counts[name] = len(rows)
            hours = sum(r["source_len"] for r in rows) / 100 / 3600
            print(json.dumps({"split": name, "utterances": len(rows), "hours": round(hours, 3),
                              "speakers": len({r["speaker"] for r in rows})}), file=log)
    return counts


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.speaker.corpus", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--speakers", type=int, default=160)
    ap.add_argument("--utts", type=int, default=14, help="training utterances per speaker")
    ap.add_argument("--val-utts", type=int, default=2, help="validation utterances per training speaker")
    ap.add_argument("--test-speakers", type=int, default=40)
    ap.add_argument("--test-utts", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--aug", type=float, default=0.4)
    ap.add_argument("--channel", type=float, default=0.3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    generate(a.out, a.speakers, a.utts, a.val_utts, a.test_speakers, a.test_utts, a.seed, a.aug, a.channel, a.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
