"""One training manifest from the human-derived corpus and train.corpus.synth's closed-set
espeak-ng corpora.

    python3 -m train.corpus.mix --out train/out/human/train-mix.jsonl \
        --human train/out/human/train.jsonl train/out/espeak-templates/train.jsonl …

Why: a recogniser trained from its start on the human-derived corpus alone (open vocabulary,
hundreds of speakers, rooms and noise) kept emitting its prior for the first thousand steps and
more: its output did not depend on its input (measured: logits on speech and on zeros differed
by 6 %).  The closed-set espeak-ng sentences are learnt within a hundred steps, and learning
them teaches the encoder to listen; mixed in, they start the whole corpus learning.

Rows of the extra corpora whose text belongs to the held-out or validation text set
(train.corpus.text.text_set, sentences of four words or more) are dropped, so the held-out
sentences stay unheard; their ``source`` is rewritten relative to the output manifest.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from .text import text_set


def mix(out: str, human: str, extra: List[str], log=sys.stderr, sources: Optional[List[str]] = None) -> dict:
    """``sources`` keeps only the human rows whose text_source is one of them (the first
    lessons: short assistant sentences, commands and words before the open text)."""
    base = os.path.dirname(os.path.abspath(out))
    counts = {"human": 0, "extra": 0, "dropped_heldout": 0}
    tmp = out + ".partial"
    with open(tmp, "w", encoding="utf-8") as f:
        for path, is_human in [(human, True)] + [(p, False) for p in extra]:
            src_dir = os.path.dirname(os.path.abspath(path))
            tag = os.path.basename(src_dir)
            with open(path, encoding="utf-8") as fin:
                for line in fin:
                    if not line.strip():
                        continue
                    r = json.loads(line)
                    if is_human and sources is not None and r.get("text_source") not in sources:
                        continue
                    if not is_human:
                        if len(r["target"].split()) >= 4 and text_set(r["target"]) != "train":
                            counts["dropped_heldout"] += 1
                            continue
                        r["key"] = f"{tag}-{r['key']}"
                        r.setdefault("person", "espeak")
                        r.setdefault("engine", "espeak-ng")
                        r.setdefault("text_source", tag)
                    if not os.path.isabs(r["source"]):
                        r["source"] = os.path.relpath(os.path.join(src_dir, r["source"]), base)
                    f.write(json.dumps(r) + "\n")
                    counts["human" if is_human else "extra"] += 1
    os.replace(tmp, out)
    print(json.dumps(counts), file=log)
    return counts


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.corpus.mix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--human", required=True, help="the human-derived corpus's train.jsonl")
    ap.add_argument("--human-sources", help="keep only these text sources of the human corpus, comma-separated "
                    "(e.g. assistant,command,word)")
    ap.add_argument("extra", nargs="+", help="train.corpus.synth / train.corpus.templates train.jsonl manifests")
    a = ap.parse_args(argv)
    mix(a.out, a.human, a.extra, sources=a.human_sources.split(",") if a.human_sources else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
