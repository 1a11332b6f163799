"""Joined training utterances: several sentences of one speaker in one item, as a person
reading a passage is heard.

    python3 -m train.sensevoice.join --manifest train/out/human/train-N.jsonl \
        --out train/out/human/joined-O.jsonl --count 14000 --max-s 12 --seed 5

Why: the corpus's utterances are single sentences of a few seconds (95 % under 7.7 s), so the
recogniser never heard one sentence end and the next begin, and a long recording cut into 10 s
pieces brings it both.  Each joined row names its pieces (``join``: the sources after the
first, each with the gap before it); the dataset reads them as one clip
(train.sensevoice.dataset.load_item_audio).  Pieces are drawn from the same speaker (an
augmented speaker is one voice with one warp; ``speaker_key``), in random order, 2 to ``max_pieces`` of them up to
``max_s`` seconds with the gaps; a speaker with one utterance is never joined.  The gap is silence or the clips'
own noise floor (``gap_fill``), 0.05-0.6 s: the evaluation's joined files use plain silence,
real recordings have a floor.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from typing import Dict, List, Optional, Tuple

import numpy as np

FRAME_S = 0.01  # source_len counts 10 ms fbank frames


def speaker_key(r: dict) -> Tuple[str, str, str]:
    """One voice: every corpus build numbers its speakers from spk0000 afresh, so in a mix the
    same id is a different voice in each corpus; the corpus is the source path before its
    shards/ (else its folder)."""
    src = r["source"]
    m = re.search(r"(^|/)shards/", src)
    return src[:m.start()] if m else os.path.dirname(src), r["speaker"], r.get("voice", "")


def join_rows(rows: List[dict], count: int, max_s: float, seed: int, max_pieces: int = 4,
              gap_s=(0.05, 0.6)) -> List[dict]:
    """``count`` joined rows (fewer when the speakers cannot make that many) from ``rows``,
    whose ``source`` paths are kept as given."""
    if count < 0 or max_s <= 0 or max_pieces < 2:
        raise ValueError("count must be >= 0, max_s > 0 and max_pieces >= 2")
    by_speaker: Dict[Tuple[str, str, str], List[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r.get("speaker") and not r.get("join"):
            by_speaker[speaker_key(r)].append(i)
    pool = np.array([i for idx in by_speaker.values() if len(idx) > 1 for i in idx], dtype=np.int64)
    if not len(pool):
        return []
    rng = np.random.default_rng(seed)
    limit = int(round(max_s / FRAME_S))
    out: List[dict] = []
    tries = 0
    while len(out) < count and tries < 4 * count:
        tries += 1
        first = rows[int(rng.choice(pool))]
        mates = [i for i in by_speaker[speaker_key(first)] if rows[i] is not first]
        rng.shuffle(mates)
        frames, pieces, targets = int(first["source_len"]), [], [first["target"]]
        fill = "noise" if rng.random() < 0.5 else "silence"
        want = int(rng.integers(2, max_pieces + 1))  # pieces in all, the first included
        for i in mates:
            if len(pieces) + 1 >= want:
                break
            if rows[i]["target"] in targets:  # "turn on the light turn on the light" teaches nothing
                continue
            gap = float(np.round(rng.uniform(*gap_s), 3))
            n = int(rows[i]["source_len"]) + int(round(gap / FRAME_S))
            if frames + n > limit:
                continue
            frames += n
            pieces.append({"source": rows[i]["source"], "gap_s": gap})
            targets.append(rows[i]["target"])
        if not pieces:
            continue
        r = dict(first)
        r.update(key=f"join-{len(out):06d}", join=pieces, gap_fill=fill, source_len=frames,
                 target=" ".join(targets), target_len=sum(len(t.split()) for t in targets),
                 text_source="joined", joined=len(pieces) + 1)
        out.append(r)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True, help="training manifest (JSONL) to draw from")
    ap.add_argument("--out", required=True, help="joined rows (JSONL); sources relative to it")
    ap.add_argument("--count", type=int, default=14000)
    ap.add_argument("--max-s", type=float, default=12.0, help="longest joined item, gaps included")
    ap.add_argument("--max-pieces", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        with open(a.manifest, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        base = os.path.dirname(os.path.abspath(a.manifest))
        for r in rows:
            if not os.path.isabs(r["source"]):
                r["source"] = os.path.join(base, r["source"])
        joined = join_rows(rows, a.count, a.max_s, a.seed, a.max_pieces)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {a.manifest}: {e}", file=sys.stderr)
        return 1
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    tmp = a.out + ".partial"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in joined:
            r["source"] = os.path.relpath(r["source"], out_dir)
            for p in r["join"]:
                p["source"] = os.path.relpath(p["source"], out_dir)
            f.write(json.dumps(r) + "\n")
    os.replace(tmp, a.out)
    hours = sum(r["source_len"] for r in joined) * FRAME_S / 3600
    print(json.dumps({"rows": len(joined), "hours": round(hours, 2),
                      "pieces": round(float(np.mean([r["joined"] for r in joined])), 2) if joined else 0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
