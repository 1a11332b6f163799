"""CTC prefix beam search with a token n-gram language model (train.sensevoice.lm): the
reference asr/beam.go follows.

Per frame, each prefix keeps two scores (ending in blank, ending in its last token); a token
appended to a prefix adds alpha * log P_LM(token | the prefix's last order-1 tokens) + beta;
at the end alpha * log P_LM(</s> | ...) is added. Tokens whose frame probability is below
``prune`` (log) are not tried, at most ``top`` per frame.
"""
from __future__ import annotations

import math
import struct
from typing import Dict, List, Sequence, Tuple

import numpy as np

from .lm import BOS, EOS, MAGIC

LN10 = math.log(10.0)
NEG = -1e30


class NgramLM:
    def __init__(self, path: str):
        with open(path, "rb") as f:
            b = f.read()
        if b[:8] != MAGIC:
            raise ValueError(f"{path}: not a Parley LM")
        ver, self.order, self.vocab = struct.unpack_from("<III", b, 8)
        if ver != 1:
            raise ValueError(f"{path}: version {ver}")
        off = 20
        self.p: Dict[Tuple[int, ...], float] = {}
        self.b: Dict[Tuple[int, ...], float] = {}
        for k in range(1, self.order + 1):
            (n,) = struct.unpack_from("<I", b, off)
            off += 4
            fmt = f"<{k}Hff"
            size = struct.calcsize(fmt)
            for _ in range(n):
                rec = struct.unpack_from(fmt, b, off)
                off += size
                g = tuple(rec[:k])
                self.p[g] = rec[k] * LN10
                self.b[g] = rec[k + 1] * LN10
        self.floor = min(v for g, v in self.p.items() if len(g) == 1)

    def logp(self, ctx: Sequence[int], w: int) -> float:
        """Natural log P(w | ctx), ctx of any length (the last order-1 tokens are used)."""
        ctx = tuple(ctx[len(ctx) - (self.order - 1):]) if self.order > 1 else ()
        back = 0.0
        while True:
            g = ctx + (w,)
            if g in self.p:
                return back + self.p[g]
            if not ctx:
                return back + self.floor
            back += self.b.get(ctx, 0.0)
            ctx = ctx[1:]


def _lse(a: float, b: float) -> float:
    if a < b:
        a, b = b, a
    if b <= NEG:
        return a
    return a + math.log1p(math.exp(b - a))


def prefix_beam_search(logp: np.ndarray, lm: NgramLM, alpha: float = 0.5, beta: float = 1.0, beam: int = 8,
                       top: int = 8, prune: float = -10.0, first_text: int = 27) -> List[int]:
    """logp (T, V) log-softmax over the speech frames, blank 0 -> best token ids."""
    ctx0 = (BOS,) * (lm.order - 1)
    # prefix -> (log p ending in blank, log p ending in last token, lm score sum)
    beams: Dict[Tuple[int, ...], List[float]] = {(): [0.0, NEG, 0.0]}
    for t in range(logp.shape[0]):
        row = logp[t]
        cand = [int(i) for i in np.argsort(-row)[:top] if row[i] >= prune or i == 0]
        nxt: Dict[Tuple[int, ...], List[float]] = {}

        def get(p, lmscore):
            if p not in nxt:
                nxt[p] = [NEG, NEG, lmscore]
            return nxt[p]

        for prefix, (pb, pnb, lms) in beams.items():
            total = _lse(pb, pnb)
            for c in cand:
                lp = float(row[c])
                if c == 0:
                    e = get(prefix, lms)
                    e[0] = _lse(e[0], total + lp)
                    continue
                last = prefix[-1] if prefix else None
                if c < first_text:  # tags and specials are not text: the LM does not score them
                    continue
                np_ = prefix + (c,)
                add = alpha * lm.logp(ctx0 + prefix, c) + beta
                e = get(np_, lms + add)
                if c == last:
                    e[1] = _lse(e[1], pb + lp)  # a repeat needs a blank between
                    s = get(prefix, lms)
                    s[1] = _lse(s[1], pnb + lp)
                else:
                    e[1] = _lse(e[1], total + lp)
        beams = dict(sorted(nxt.items(), key=lambda kv: -(_lse(kv[1][0], kv[1][1]) + kv[1][2]))[:beam])
    best, best_s = (), NEG
    for prefix, (pb, pnb, lms) in beams.items():
        s = _lse(pb, pnb) + lms + alpha * lm.logp(ctx0 + prefix, EOS)
        if s > best_s:
            best, best_s = prefix, s
    return list(best)


def make_golden(out_dir: str, seed: int = 7) -> dict:
    """A small LM (12 tokens: blank, <s>, </s>, one tag, 8 pieces) from sequences with a
    pattern, and random peaky logits with the reference's decodes: asr/beam_test.go's parity
    fixture (testdata/asr/beam)."""
    import json
    import os

    from .lm import build, write

    rng = np.random.default_rng(seed)
    vocab, first = 12, 4
    seqs = []
    for _ in range(400):  # "words" 4 5 6 and 7 8 and 9 10 11 in random order
        s = []
        for _ in range(rng.integers(1, 5)):
            s += [[4, 5, 6], [7, 8], [9, 10, 11]][rng.integers(0, 3)]
        seqs.append(s)
    model = build(seqs, 3, vocab, min_count=1)
    os.makedirs(out_dir, exist_ok=True)
    write(os.path.join(out_dir, "lm.bin"), model, vocab)
    lm = NgramLM(os.path.join(out_dir, "lm.bin"))
    cases = []
    for i in range(6):
        T = int(rng.integers(8, 30))
        logits = rng.normal(0, 1.5, size=(T, vocab)).astype(np.float32)
        logits[:, 0] += 2.0  # blanks dominate, as in CTC
        lp = logits - np.log(np.exp(logits.astype(np.float64)).sum(-1, keepdims=True))
        opts = [(0.4, 2.0, 8, 8, -10.0), (0.8, 1.0, 4, 6, -6.0)][i % 2]
        ids = prefix_beam_search(lp, lm, alpha=opts[0], beta=opts[1], beam=opts[2], top=opts[3], prune=opts[4],
                                 first_text=first)
        cases.append({"t": T, "logits": [float(x) for x in logits.reshape(-1)], "alpha": opts[0], "beta": opts[1],
                      "width": opts[2], "top": opts[3], "prune": opts[4], "ids": ids})
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump({"vocab": vocab, "first_text": first, "cases": cases}, f)
        f.write("\n")
    return {"cases": len(cases)}


if __name__ == "__main__":
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.beam")
    ap.add_argument("--golden", required=True, help="write the Go parity fixture to this directory")
    print(make_golden(ap.parse_args().golden))
    sys.exit(0)
