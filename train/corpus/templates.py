"""The human-derived voices reading the closed sentence set: the recogniser's first lesson.

    python3 -m train.corpus.templates --human train/out/human --out train/out/human-tmpl --count 6000

Why: a recogniser that starts on the open-vocabulary corpus alone stays on CTC's prior (its
output does not depend on its input: "the a to" for everything) for thousands of steps; one
that hears a small closed set (train.corpus.sentences' templates: assistant requests, times,
numbers) learns to listen within a few hundred.  These are the corpus's own training speakers
(``speakers.json`` of train.corpus.build: augmented flite/festival/espeak-ng voices, never the
held-out person or speakers) with its conditions, reading template sentences; sentences of
four words or more in the held-out or validation text sets are skipped, as the builder does.

The shards are train.corpus.build's (rendered by ``build.render_shard``, hashed, resumable).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
from typing import List, Optional

from . import build
from .sentences import sentence
from .text import text_set

SHARD = 250


def plan(speakers: dict, count: int, seed: int) -> List[dict]:
    train_spk = sorted(k for k in speakers if k.startswith("spk"))
    if not train_spk:
        raise SystemExit("no training speakers (spk…) in speakers.json")
    rng = random.Random(seed)
    items: List[dict] = []
    while len(items) < count:
        s = sentence(rng, "templates")
        if len(s.split()) >= 4 and text_set(s) != "train":
            continue
        items.append({"key": f"tmpl-{len(items):06d}", "split": "train", "text": s, "category": "templates",
                      "speaker": rng.choice(train_spk), "cond": "train" if rng.random() < 0.5 else "clean",
                      "snr": None, "seed": rng.randrange(2 ** 31)})
    return items


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.corpus.templates", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--human", required=True, help="train.corpus.build's output (its speakers.json)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    with open(os.path.join(a.human, "speakers.json"), encoding="utf-8") as f:
        speakers = json.load(f)
    items = plan(speakers, a.count, a.seed)
    os.makedirs(os.path.join(a.out, "shards"), exist_ok=True)
    jobs = []
    for i in range(0, len(items), SHARD):
        chunk = items[i:i + SHARD]
        jobs.append((os.path.join(a.out, "shards", f"tmpl-{i // SHARD:05d}"), chunk,
                     {it["speaker"]: speakers[it["speaker"]] for it in chunk}))
    with mp.get_context("fork").Pool(max(1, a.jobs)) as p:
        for _ in p.imap_unordered(build.render_shard, jobs):
            pass
    tmp = os.path.join(a.out, "train.jsonl.partial")
    with open(tmp, "w", encoding="utf-8") as f:
        for shard_dir, _, _ in jobs:
            with open(os.path.join(shard_dir, "manifest.jsonl"), encoding="utf-8") as m:
                for line in m:
                    r = json.loads(line)
                    r["source"] = os.path.relpath(os.path.join(shard_dir, r["source"]), a.out)
                    f.write(json.dumps(r) + "\n")
    os.replace(tmp, os.path.join(a.out, "train.jsonl"))
    print(json.dumps({"utterances": len(items), "out": a.out}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
