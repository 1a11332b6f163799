"""A token-level n-gram language model for the recogniser's CTC beam search.

    /usr/bin/python3 -m train.sensevoice.lm --checkpoint train/out/asr4/E --out assets/demo/sensevoice/lm.bin

The demo recogniser hears the shape of speech (about half the characters of new sentences
right) but few whole words: greedy CTC takes each frame's best piece, so a near miss becomes a
non-word. A language model over the same BPE pieces lets the beam search (asr/beam.go) prefer
piece sequences that spell English. It learns from the corpus's own training text only
(train.corpus.text: WordNet's examples, the State of the Union and Moby-Dick sentences of the
training split, plus drawn assistant sentences, commands and words), and with ``--extra`` text
the corpus never speaks (``text.LM_SOURCES``: people's e-mail prose, for English beyond the
corpus's sources, and Jane Austen's novels, tried in session 25): no held-out sentence (``text.is_heldout``) and no recording.

Interpolated Kneser-Ney (absolute discount per order, continuation counts below the top
order), stored ARPA-style: for each kept n-gram its log10 probability and, for each context,
its log10 back-off weight. N-grams of order 3 and up seen fewer than --min-count times (below the
top order: with fewer distinct left extensions) are pruned.

File (little-endian): b"PARLEYLM", uint32 version 1, uint32 order, uint32 vocab size, then per
order k = 1..order: uint32 count and count records of k uint16 ids, float32 log10 p, float32
log10 back-off. Id 1 (<s>) starts and id 2 (</s>) ends a sentence, as in tokens.txt. Parley
(asr/lm.go) packs an n-gram's ids into 64 bits, so it reads orders up to 64 // bits per id (7
for a vocabulary of 300, 4 for 65536). The beam weights tuned for an LM go beside it as lm.json
(train.sensevoice.lmtune).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import struct
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from ..corpus import text as T
from .export import resolve_checkpoint
from .train import from_init

BOS, EOS = 1, 2
NEVER = -99.0  # log10 p of an n-gram kept only for its back-off (ARPA's <s>)
MAGIC = b"PARLEYLM"


def sentences(pool: T.TextPool, draws: int, seed: int) -> List[str]:
    out = []
    for name, sets in pool.sets.items():
        out.extend(sets["train"])
    rng = random.Random(seed)
    for _ in range(draws):
        cat = rng.choice(["assistant", "command", "word", "assistant", "command"])
        s = {"assistant": pool._assistant, "command": lambda r: T.command(r, pool.common), "word": pool._word}[cat](rng)
        if T.text_set(s) == "train" or len(s.split()) < 4:
            out.append(s)
    return [s for s in out if not T.is_heldout(s)]


def build(seqs: Sequence[Sequence[int]], order: int, vocab: int, discount: float = 0.75,
          min_count: int = 2) -> List[Dict[Tuple[int, ...], Tuple[float, float]]]:
    """-> per order k (index k-1): {ngram: (log10 p, log10 backoff)}."""
    import math

    top: Dict[Tuple[int, ...], int] = collections.Counter()
    for s in seqs:
        ids = [BOS] * (order - 1) + list(s) + [EOS]
        for i in range(order - 1, len(ids)):
            top[tuple(ids[i - order + 1:i + 1])] += 1
    counts: List[Dict[Tuple[int, ...], int]] = [dict() for _ in range(order)]
    counts[order - 1] = dict(top)
    for k in range(order - 1, 0, -1):  # continuation counts: distinct left extensions
        lower: Dict[Tuple[int, ...], int] = collections.Counter()
        for g in counts[k]:
            lower[g[1:]] += 1
        counts[k - 1] = dict(lower)
    # BOS padding makes contexts like (<s>, <s>): keep them (sentence starts)
    probs: List[Dict[Tuple[int, ...], float]] = [dict() for _ in range(order)]
    backoff: List[Dict[Tuple[int, ...], float]] = [dict() for _ in range(order)]
    # unigrams: continuation probability, interpolated with uniform
    tot1 = sum(counts[0].values())
    n1 = len(counts[0])
    for (w,), c in counts[0].items():
        probs[0][(w,)] = max(c - discount, 0) / tot1 + (discount * n1 / tot1) / vocab
    floor1 = (discount * n1 / tot1) / vocab
    for k in range(1, order):
        ctx_tot: Dict[Tuple[int, ...], int] = collections.Counter()
        ctx_n: Dict[Tuple[int, ...], int] = collections.Counter()
        for g, c in counts[k].items():
            ctx_tot[g[:-1]] += c
            ctx_n[g[:-1]] += 1
        for h, t in ctx_tot.items():
            backoff[k - 1][h] = discount * ctx_n[h] / t
        for g, c in counts[k].items():
            h = g[:-1]
            lower = lookup(probs, backoff, g[1:], floor1)
            probs[k][g] = max(c - discount, 0) / ctx_tot[h] + backoff[k - 1][h] * lower
    for w in range(vocab):  # every token has a unigram (the floor for those the text never has)
        probs[0].setdefault((w,), floor1)
    out = []
    for k in range(order):
        keep = {}
        for g, p in probs[k].items():
            # prune rare n-grams of order 3 and up (by count at the top order, by the number of
            # distinct left extensions below it); unigrams and bigrams stay whole
            if k >= 2 and (top.get(g, 0) if k == order - 1 else counts[k].get(g, 0)) < min_count:
                continue
            b = backoff[k].get(g, 1.0) if k < order - 1 else 1.0
            keep[g] = (math.log10(p), math.log10(b))
        if k < order - 1:  # contexts never predicted themselves (<s>, <s> <s>) still carry a back-off
            for h, b in backoff[k].items():
                if h not in probs[k]:
                    keep[h] = (NEVER, math.log10(b))
        out.append(keep)
    return out


def lookup(probs, backoff, g: Tuple[int, ...], floor1: float) -> float:
    """P(g[-1] | g[:-1]) from the orders built so far (back off through missing contexts)."""
    k = len(g)
    if k == 1:
        return probs[0].get(g, floor1)
    if g in probs[k - 1]:
        return probs[k - 1][g]
    return backoff[k - 2].get(g[:-1], 1.0) * lookup(probs, backoff, g[1:], floor1)


def write(path: str, model: List[Dict[Tuple[int, ...], Tuple[float, float]]], vocab: int) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<III", 1, len(model), vocab))
        for k, grams in enumerate(model, 1):
            f.write(struct.pack("<I", len(grams)))
            for g in sorted(grams):
                p, b = grams[g]
                f.write(struct.pack(f"<{k}Hff", *g, p, b))
    os.replace(tmp, path)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.lm", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="the recogniser's checkpoint (its vocabulary), or a directory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--order", type=int, default=4)
    ap.add_argument("--min-count", type=int, default=8)
    ap.add_argument("--draws", type=int, default=200000, help="assistant sentences, commands and words drawn")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--open-frames", type=T.share, default=0.0, metavar="P",
                    help="the share of drawn assistant sentences that are template frames with open slots "
                         "(train.corpus.sentences.open_frame; default 0: the templates as they are)")
    ap.add_argument("--extra", action="append", default=[], metavar="SOURCE[:TIMES]",
                    help="an LM-only text source (train.corpus.text.LM_SOURCES: emails, austen), its sentences TIMES times")
    a = ap.parse_args(argv)
    extra = []
    for spec in a.extra:
        name, _, times = spec.partition(":")
        if name not in T.LM_SOURCES or (times and not (times.isascii() and times.isdecimal() and int(times) > 0)):
            ap.error(f"--extra {spec}: want one of {sorted(T.LM_SOURCES)}, optionally :TIMES (a positive count)")
        extra.append((name, int(times or 1)))
    vocab, _, _ = from_init(resolve_checkpoint(a.checkpoint), {})
    pool = T.load_pool(log=sys.stderr)
    pool.open_frames = a.open_frames
    texts = sentences(pool, a.draws, a.seed)
    for name, times in extra:
        more = T.lm_sentences(name)  # training text set only
        print(json.dumps({"extra": name, "sentences": len(more), "times": times}), file=sys.stderr)
        texts += more * times
    first = len(vocab.pieces) - sum(1 for p in vocab.pieces if not p.startswith("<|") and p not in ("<unk>", "<s>", "</s>"))
    seqs = []
    for t in texts:
        ids = [i for i in vocab.encode(t) if i >= first]
        if ids:
            seqs.append(ids)
    model = build(seqs, a.order, len(vocab.pieces), min_count=a.min_count)
    write(a.out, model, len(vocab.pieces))
    print(json.dumps({"sentences": len(seqs), "tokens": sum(len(s) for s in seqs),
                      "ngrams": [len(m) for m in model], "bytes": os.path.getsize(a.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
